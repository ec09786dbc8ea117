"""Subqueries in HAVING: `HAVING COUNT(*) > (SELECT AVG(n) FROM ...)`, `HAVING k IN (SELECT
...)`, `HAVING [NOT] EXISTS (SELECT ... WHERE s.k = a.k)`, each as in WHERE (scalars.py,
subqueries.py) but over the aggregation's output: its groups are the outer rows.

At instant tau the HAVING condition is evaluated for each group of tau: an aggregate in it
is the group's (its column of the aggregation), an outer column is a grouped key (any other
is neither grouped nor aggregated: refused), and a subquery sees the instant's relations as
in WHERE (a correlated one by equalities of grouped keys). The plan: the aggregation, the
subqueries joined to it as WHERE joins them to a FROM, the selection, its hidden columns
projected away.

    >>> from federation import sql
    >>> from federation.smartplug import smartplug_stream
    >>> w = "HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
    >>> q = sql(f"SELECT plug_id, COUNT(*) AS n FROM {w} GROUP BY window_end, plug_id "
    ...         f"HAVING COUNT(*) > (SELECT COUNT(*) / 5 FROM {w})", {"s": smartplug_stream()})
    >>> [n.kind for n in q.walk() if n.kind in ("join", "aggregate", "select")]
    ['aggregate', 'aggregate', 'join', 'select']
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from federation.logical import Node, Relation
from federation.sqlfront.dialect import SqlText, check_scalar, selectivity
from federation.sqlfront.scalars import scalar_values
from federation.sqlfront.scopes import Scope
from federation.sqlfront.subqueries import Translate, semi_joins

#: the name a subquery stands under while the aggregates around it are named
_HOLE = "__fedq_subquery"


def having_subqueries(text: SqlText, having: exp.Having, cond: exp.Expression, node: Node,
                      scope: Scope, keys: list[str], translate: Translate | None) -> Node:
    """`node` (the aggregation) kept where `cond` holds (`having`'s condition, its
    aggregates and keys named as the aggregation's columns: `outside_subqueries`; module
    doc)."""
    if translate is None:
        raise text.fail("a subquery in this HAVING is not supported", "HAVING", having)
    cols = list(node.schema)
    groups = group_scope(text, node, scope, keys)
    rest = semi_joins(text, cond, groups, translate, "HAVING")
    if rest is not None:
        rest = scalar_values(text, rest, groups, translate, "HAVING", keeps=True)
        check_scalar(text, rest, "HAVING", aggs_ok=True)
        pred, sel = groups.resolve(rest, "HAVING"), selectivity(having)
        below = groups.node
        groups.node = text.build("HAVING", having, lambda: Relation(below).filter(
            pred, selectivity=sel).node)
    if list(groups.node.schema) == cols:
        return groups.node
    return text.build("HAVING", having, lambda: Relation(groups.node).project(*cols).node)


def group_scope(text: SqlText, node: Node, scope: Scope, keys: list[str]) -> Scope:
    """The aggregation `node` as the outer rows of subqueries: the names of `scope` (the
    rows aggregated) that reach a grouped key."""
    return Scope(text, node, {a: {c: k for c, k in m.items() if k in keys}
                              for a, m in scope.aliases.items()},
                 scope.instants, {u: k for u, k in scope.using.items() if k in keys})


def selected_subqueries(text: SqlText, items: dict[str, exp.Expression], node: Node,
                        scope: Scope, keys: list[str], translate: Translate | None,
                        at: exp.Expression) -> tuple[Node, dict[str, exp.Expression]]:
    """SELECT items of an aggregation with subqueries (`items`: name -> the item, its
    aggregates and keys named as the aggregation's columns: `outside_subqueries`), each
    subquery's value or mark joined to `node` as in HAVING: (the node with them, each
    item over its columns)."""
    if translate is None:
        raise text.fail("a subquery in this SELECT is not supported", "SELECT", at)
    groups, out = group_scope(text, node, scope, keys), {}
    for name, e in items.items():
        value = scalar_values(text, e, groups, translate, "SELECT")
        check_scalar(text, value, "SELECT", aggs_ok=True)
        out[name] = groups.resolve(value, "SELECT")
    return groups.node, out


def outside_subqueries(e: exp.Expression, over: Callable) -> exp.Expression:
    """`e` with `over(e, skip=prefix)` applied to all but its subqueries (which keep their
    own aggregates and columns; they stand under columns named `prefix`... meanwhile)."""
    e = e.copy()
    held: list[exp.Expression] = []
    kinds = (exp.Subquery, exp.Exists, exp.Select)
    top = [n for n in e.walk(prune=lambda n: isinstance(n, kinds)) if isinstance(n, kinds)]
    for n in top:
        held.append(n.copy())
        placeholder = exp.column(f"{_HOLE}{len(held) - 1}")
        if n is e:
            e = placeholder
        else:
            n.replace(placeholder)
    named = over(e, skip=_HOLE)

    def back(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.name.startswith(_HOLE):
            return held[int(n.name[len(_HOLE):])]
        return n

    return named.transform(back)
