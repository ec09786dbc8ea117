"""An aggregate over projections of a session window's rows, folded into the aggregate of
the rows themselves (an aggregate grouped by window_start and window_end is its sessions':
federation/logical/sessions.py).

A view over a SESSION may compute columns (`SELECT plug_id, value * 2 AS v2, ts FROM s`):
the aggregate above it (`SUM(v2)`) is then the aggregate of the session's readings with the
view's expressions in its arguments (`SUM(value * 2)`), and a key the view renames is the
partition key under another name. Selections between (of partition keys only) stay under
the aggregate, over the columns they name."""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from federation.conventions import SESSION_COLUMNS
from federation.errors import QueryValidationError
from federation.expressions import AggCall

#: the prefix of a folded aggregate's name under its renaming projection (`_s0`, `_s1`, ...)
FOLDED = "_s"


def fold_session_projections(rel, by: list[str], aggs: dict[str, AggCall]):
    """The Relation of `rel.aggregate(by, **aggs)` with the projections between it and a
    session window folded in, or None if none stand between."""
    chain, n = [], rel.node
    while n.kind in ("select", "project"):
        chain.append(n)
        n = n.child
    if n.kind != "window" or not n.is_session or all(c.kind != "project" for c in chain):
        return None
    env: dict[str, exp.Expression] = {c: exp.column(c) for c in n.schema}
    conds = []
    for c in reversed(chain):
        if c.kind == "select":
            conds.append((substitute(c.predicate, env), c.selectivity))
        else:
            env = {name: substitute(e, env) for name, e in c.outputs}
    if not {e.name for k in by if isinstance(e := env.get(k), exp.Column)} >= set(
            SESSION_COLUMNS):
        return None  # the rows of the sessions that close at each instant, grouped
    keys: list[str] = []
    for k in by:
        e = env.get(k)
        if not isinstance(e, exp.Column):
            raise QueryValidationError(
                "aggregate", "by", f"{k!r} is {e.sql(dialect='duckdb') if e else 'unknown'}"
                f" over the rows of {n.label()}: a session's aggregate is grouped by its "
                "partition keys (partition the SESSION by a column of the stream)")
        if e.name not in keys:
            keys.append(e.name)
    hidden = {a: f"{FOLDED}{i}" for i, a in enumerate(aggs)}  # apart from the keys' names
    calls = {hidden[a]: call if call.arg is None else dataclasses.replace(
        call, arg=substitute(call.arg, env)) for a, call in aggs.items()}
    out = type(rel)(n)
    for cond, sel in conds:
        out = out.filter(cond, selectivity=sel)
    out = out.aggregate(by=keys, **calls)
    return out.project(**{k: exp.column(env[k].name) for k in by},
                       **{a: exp.column(hidden[a]) for a in aggs})


def substitute(e: exp.Expression, env: dict[str, exp.Expression]) -> exp.Expression:
    """`e` with each column it names replaced by that column's expression in `env`."""
    return e.copy().transform(lambda c: env[c.name].copy() if isinstance(
        c, exp.Column) and c.name in env else c)
