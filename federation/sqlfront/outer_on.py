"""An outer join's ON conditions beyond key equalities: of one side (`a LEFT JOIN b ON a.k =
b.k AND b.x > 1`, or `AND a.y < 2`) and over both sides (`AND b.x > a.y`, a non-equi outer
join), in LEFT, RIGHT and FULL joins alike.

SQL's ON decides which rows match; a row that matches none is kept with NULLs on the
other side. A condition over one side's columns is that side's row meeting it, so it is a
key: on that side the column `COALESCE(cond, FALSE)`, on the other the constant TRUE, and
the pair is joined on with the key equalities. A row failing it (or NULL) matches nothing
and is kept, unmatched, as SQL keeps it; no row is filtered out (a WHERE would drop it).

Conditions over both sides (`cross_matched`): each side's rows numbered (a row id,
ROW_NUMBER over every column), the matching pairs of ids found by an inner join on the keys
filtered by the conditions, the left rows joined with the ids of their matches (LEFT: none
is NULL), and the outer join made on the right row's id alone: a left row with no match has
a NULL id and meets no right row; a right row in no pair meets none (kept by RIGHT and
FULL). Without a key equality the pairs come from all pairs of the instant (quadratic).
"""

from __future__ import annotations

from sqlglot import exp

from federation.logical import Relation
from federation.logical.builder import name_maker
from federation.sqlfront.dialect import SqlText, check_scalar
from federation.sqlfront.scopes import Scope


def one_side_keys(text: SqlText, conds: list[exp.Expression], left: Scope, right: Scope
                  ) -> list[tuple[str, str]]:
    """The key pairs (left column, right column) of `conds`, each a condition of one side
    (module doc); the sides' nodes get the columns."""
    fresh = name_maker({*left.node.schema, *right.node.schema})
    pairs = []
    for c in conds:
        cols = list(c.find_all(exp.Column))
        on_left = all(left.has_column(x) and not right.has_column(x) for x in cols)
        if not on_left and not all(right.has_column(x) and not left.has_column(x)
                                   for x in cols):
            raise text.fail(f"{c.sql()}: a name both sides have: qualify it (a.x, b.x)",
                            "JOIN ON", c)
        check_scalar(text, c, "JOIN ON")
        side, other = (left, right) if on_left else (right, left)
        flag, mark = fresh("_on_cond"), fresh("_on_true")
        held = exp.func("COALESCE", side.resolve(c, "JOIN ON"), exp.false())
        side.node = _with(text, c, side.node, flag, held)
        other.node = _with(text, c, other.node, mark, exp.true())
        pairs.append((flag, mark) if on_left else (mark, flag))
    return pairs


def _with(text: SqlText, at: exp.Expression, node, name: str, value: exp.Expression):
    """`node` with the column `name` = `value` added."""
    return text.build("JOIN ON", at, lambda: Relation(node).project(
        *node.schema, **{name: value}).node)


def crossing(conds: list[exp.Expression], left: Scope, right: Scope
             ) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """`conds` as (conditions of one side, conditions over both sides)."""
    one, both = [], []
    for c in conds:
        cols = list(c.find_all(exp.Column))
        sides = {("l" if left.has_column(x) and not right.has_column(x) else
                  "r" if right.has_column(x) and not left.has_column(x) else "?")
                 for x in cols}
        (both if sides == {"l", "r"} else one).append(c)
    return one, both


def cross_matched(text: SqlText, left: Scope, right: Scope, keys: list[tuple[str, str]],
                  cross: list[exp.Expression], how: str, at: exp.Expression, apart
                  ) -> tuple[Scope, Scope, list[tuple[str, str]], set[str]]:
    """The outer join of `left` and `right` on `keys` (and one side's flags, in `keys`
    already) and the conditions `cross` over both sides, as an outer join on one key
    (module doc): (left, right, that key pair, the helper columns to drop after it).
    `apart(left, right, rkeys)`: the right scope with columns the left has renamed."""
    fresh = name_maker({*left.node.schema, *right.node.schema})
    lid, rid, mlid, mrid = (fresh(n) for n in ("_on_lid", "_on_rid", "_on_mlid", "_on_mrid"))
    lcols, rcols = list(left.node.schema), list(right.node.schema)
    for side, name, cols in ((left, lid, lcols), (right, rid, rcols)):
        node = side.node
        side.node = text.build("JOIN ON", at, lambda n=node, c=cols, m=name: Relation(n)
                               .row_number([(c[0], False)], (), m).node)
    r2 = apart(left, right, {rk for _, rk in keys})
    pairs = text.build("JOIN ON", at, lambda: Relation(left.node).join(r2.node, on=keys).node)
    rkey = {rk: lk for lk, rk in keys}
    both = Scope(text, pairs, {**left.aliases, **{a: {c: rkey.get(n, n) for c, n in m.items()}
                                                  for a, m in r2.aliases.items()}},
                 {**left.instants, **right.instants}, {**left.using, **right.using})
    cond = cross[0] if len(cross) == 1 else exp.and_(*cross)
    check_scalar(text, cond, "JOIN ON")
    pred = both.resolve(cond, "JOIN ON")
    matched = text.build("JOIN ON", at, lambda: Relation(pairs).filter(pred).project(
        **{mlid: exp.column(lid), mrid: exp.column(rid)}).node)
    node = left.node
    left.node = text.build("JOIN ON", at, lambda: Relation(node).join(
        matched, on=[(lid, mlid)], how="inner" if how == "right" else "left").node)
    return left, right, [(mrid, rid)], {lid, rid, mlid, mrid}

