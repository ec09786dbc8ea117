"""`left [LEFT] SEMI | ANTI JOIN right ON ...`: the left rows some right row matches at the
instant (SEMI, SQL's EXISTS), or none (ANTI, NOT EXISTS; a NULL key matches nothing, so its
row is kept).

With key equalities and conditions of one side (`ON a.k = b.k AND b.x > 1 AND a.y < 2`) it
is a membership test (logical/membership.where_in): the left keys among the right rows' that
meet their condition; a condition of the left side is a key of its own, 1 where it holds
(NULL else, which no row equals) against the right side's 1 (SEMI keeps a row only where
it holds, ANTI every row where it does not). A condition over both sides (`AND b.x > a.y`),
or no key equality at all, is tested per pair: the left rows numbered (a row id), joined
with the right rows on the keys (without keys: every pair of the instant, quadratic),
the pairs filtered by every condition, and the left rows whose id is (SEMI) or is not
(ANTI) among the pairs' kept.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from federation.conjuncts import conjoin, split_conjuncts
from federation.logical import Relation, where_in
from federation.logical.builder import name_maker
from federation.sqlfront.dialect import SqlText, check_scalar
from federation.sqlfront.outer_on import paired
from federation.sqlfront.scopes import Scope

KeyPair = Callable[[exp.Expression, Scope, Scope], "tuple[str, str] | tuple[()] | None"]
Apart = Callable[[Scope, Scope, set, exp.Expression], Scope]


def semi_join(text: SqlText, left: Scope, right: Scope, j: exp.Join, kind: str,
              key_pair: KeyPair, apart: Apart) -> Scope:
    """The scope of `left` SEMI or ANTI (`kind`) joined with `right` by `j` (module doc);
    `key_pair` tells a key equality, `apart` renames the right side's columns the left
    side also has."""
    keys: list[tuple[str, str]] = []
    conds: dict[str, list[exp.Expression]] = {"l": [], "r": [], "both": []}
    using, on = j.args.get("using"), j.args.get("on")
    if using:
        keys = [(left.column_of(None, u.name, "JOIN USING", u),
                 right.column_of(None, u.name, "JOIN USING", u)) for u in using]
    for c in split_conjuncts(on) if on is not None else []:
        pair = key_pair(c, left, right)
        if pair:
            keys.append(pair)
        elif pair is None:
            check_scalar(text, c, "JOIN ON")
            cols = list(c.find_all(exp.Column))
            side = next((k for k, (a, b) in (("r", (right, left)), ("l", (left, right)))
                         if all(a.has_column(x) and not b.has_column(x) for x in cols)),
                        "both")
            conds[side].append(c)
    if not keys and on is None and not using:
        raise text.fail(f"a {kind} join needs ON or USING", f"{kind} JOIN", j, kind)
    if conds["both"] or not keys:
        return _per_pair(text, left, right, j, kind, keys, conds, apart)
    sub, rel = Relation(right.node), Relation(left.node)
    if conds["r"]:
        sub = sub.filter(conjoin([right.resolve(c, "JOIN ON") for c in conds["r"]]))
    lkeys, extra = [lk for lk, _ in keys], {}
    if conds["l"]:  # the left side's condition as a key (module doc)
        flag = name_maker({*left.node.schema, *right.node.schema})("_semi_holds")
        held = conjoin([left.resolve(c, "JOIN ON") for c in conds["l"]])
        rel = rel.project(*rel.schema, **{flag: exp.Case(ifs=[exp.If(
            this=held, true=exp.Literal.number(1))])})
        lkeys, extra = [*lkeys, flag], {flag: exp.Literal.number(1)}
    sub = sub.project(*[rk for _, rk in keys], **extra)
    node = text.build(f"{kind} JOIN", j, lambda: where_in(
        rel, lkeys, sub, anti=kind == "ANTI").node)
    if extra:  # the flag's work done
        node = Relation(node).project(*left.node.schema).node
    return Scope(text, node, left.aliases, left.instants, left.using)


def _per_pair(text: SqlText, left: Scope, right: Scope, j: exp.Join, kind: str,
              keys: list[tuple[str, str]], conds: dict[str, list[exp.Expression]],
              apart: Apart) -> Scope:
    """A SEMI or ANTI join whose ON holds a condition over both sides or no key equality:
    tested per pair of rows (module doc)."""
    cols = list(left.node.schema)
    fresh = name_maker({*cols, *right.node.schema})
    rid, met = fresh("_semi_row"), fresh("_semi_met")
    node = left.node
    numbered = text.build(f"{kind} JOIN", j, lambda: Relation(node).row_ids(rid).node)
    lhs = Scope(text, numbered, left.aliases, left.instants, left.using)
    if conds["l"]:  # each side's own conditions on its rows first
        lhs = _filtered(text, lhs, conds["l"], j, kind)
    if conds["r"]:
        right = _filtered(text, right, conds["r"], j, kind)
    both = paired(text, lhs, apart(lhs, right, {rk for _, rk in keys}, j), keys, j,
                  f"{kind} JOIN")
    pred = both.resolve(conjoin(conds["both"]), "JOIN ON") if conds["both"] else None
    kept = Relation(both.node) if pred is None else Relation(both.node).filter(pred)
    out = text.build(f"{kind} JOIN", j, lambda: where_in(
        numbered, [rid], kept.project(**{met: exp.column(rid)}), anti=kind == "ANTI")
        .project(*cols).node)
    return Scope(text, out, left.aliases, left.instants, left.using)


def _filtered(text: SqlText, side: Scope, conds: list[exp.Expression], j: exp.Join,
              kind: str) -> Scope:
    """`side` with only its rows that meet `conds` (its own conditions in the ON)."""
    node, pred = side.node, conjoin([side.resolve(c, "JOIN ON") for c in conds])
    out = text.build(f"{kind} JOIN", j, lambda: Relation(node).filter(pred).node)
    return Scope(text, out, side.aliases, side.instants, side.using)
