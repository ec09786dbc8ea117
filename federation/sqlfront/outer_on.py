"""An outer join's ON conditions beyond key equalities: of one side (`a LEFT JOIN b ON a.k =
b.k AND b.x > 1`, or `AND a.y < 2`) and over both sides (`AND b.x > a.y`, a non-equi outer
join), in LEFT, RIGHT and FULL joins alike.

SQL's ON decides which rows match; a row that matches none is kept with NULLs on the
other side. A condition over one side's columns is that side's row meeting it, so it is a
key: on that side the column `COALESCE(cond, FALSE)`, on the other the constant TRUE, and
the pair is joined on with the key equalities. A row failing it (or NULL) matches nothing
and is kept, unmatched, as SQL keeps it; no row is filtered out (a WHERE would drop it).

A condition of one side with subqueries (`b.x IN (SELECT ...)`, `EXISTS (SELECT ... WHERE
s.k = b.k)`, `b.x > (SELECT AVG(x) ...)`) is the same key: whether the side's row is among
its rows that meet it, as WHERE keeps them (the subqueries at the instant). One over both
sides (`AND b.m > (SELECT AVG(x) FROM s WHERE s.k = a.k)`) is a condition over both sides,
below: tested on the pairs as WHERE tests rows.

Conditions over both sides (`cross_matched`): each side's rows numbered (a row id,
ROW_NUMBER over every column), the matching pairs of ids found by an inner join on the keys
filtered by the conditions, the left rows joined with the ids of their matches (LEFT: none
is NULL), and the outer join made on the right row's id alone: a left row with no match has
a NULL id and meets no right row; a right row in no pair meets none (kept by RIGHT and
FULL). Without a key equality the pairs come from all pairs of the instant (quadratic).
"""

from __future__ import annotations

from sqlglot import exp

from federation.conjuncts import conjoin
from federation.logical import Relation
from federation.logical.builder import name_maker
from federation.sqlfront.dialect import SqlText, check_scalar
from federation.sqlfront.marks import met
from federation.sqlfront.scalars import filter_by
from federation.sqlfront.scopes import Scope
from federation.sqlfront.subqueries import Translate


def one_side_keys(text: SqlText, conds: list[exp.Expression], left: Scope, right: Scope,
                  translate: Translate) -> list[tuple[str, str]]:
    """The key pairs (left column, right column) of `conds`, each a condition of one side
    (module doc); the sides' nodes get the columns. A condition with subqueries (`b.x IN
    (SELECT ...)`, EXISTS, a value) is its side's rows that meet it (`marks.met`)."""
    fresh = name_maker({*left.node.schema, *right.node.schema})
    pairs = []
    for c in conds:
        cols = _outer_columns(c, left, right)
        on_left = all(left.has_column(x) and not right.has_column(x) for x in cols)
        if not on_left and not all(right.has_column(x) and not left.has_column(x)
                                   for x in cols):
            raise text.fail(f"{c.sql()}: a name both sides have: qualify it (a.x, b.x)",
                            "JOIN ON", c)
        side, other = (left, right) if on_left else (right, left)
        flag, mark = fresh("_on_cond"), fresh("_on_true")
        if any(isinstance(n, SUBQUERY) for n in c.walk()):
            met(text, [c.copy()], side, translate, "JOIN ON", c, filter_by, [flag])
        else:
            check_scalar(text, c, "JOIN ON")
            held = exp.func("COALESCE", side.resolve(c, "JOIN ON"), exp.false())
            side.node = _with(text, c, side.node, flag, held)
        other.node = _with(text, c, other.node, mark, exp.true())
        pairs.append((flag, mark) if on_left else (mark, flag))
    return pairs


SUBQUERY = (exp.Subquery, exp.Select, exp.Exists)


def _outer_columns(c: exp.Expression, left: Scope, right: Scope) -> list[exp.Column]:
    """The columns of `c` that the join's sides give: outside its subqueries, and inside
    them those named by a side's alias (a correlation, `WHERE s.k = a.k`)."""
    aliases = {*left.aliases, *right.aliases}
    out = []
    for x in c.find_all(exp.Column):
        n, inside = x.parent, False
        while n is not None and n is not c:
            inside = inside or isinstance(n, SUBQUERY)
            n = n.parent
        if not inside or x.table in aliases:
            out.append(x)
    return out


def _with(text: SqlText, at: exp.Expression, node, name: str, value: exp.Expression):
    """`node` with the column `name` = `value` added."""
    return text.build("JOIN ON", at, lambda: Relation(node).project(
        *node.schema, **{name: value}).node)


def crossing(conds: list[exp.Expression], left: Scope, right: Scope
             ) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """`conds` as (conditions of one side, conditions over both sides)."""
    one, both = [], []
    for c in conds:
        cols = _outer_columns(c, left, right)
        sides = {("l" if left.has_column(x) and not right.has_column(x) else
                  "r" if right.has_column(x) and not left.has_column(x) else "?")
                 for x in cols}
        (both if sides == {"l", "r"} else one).append(c)
    return one, both


def cross_matched(text: SqlText, left: Scope, right: Scope, keys: list[tuple[str, str]],
                  cross: list[exp.Expression], how: str, at: exp.Expression, apart,
                  translate: Translate) -> tuple[Scope, Scope, list[tuple[str, str]], set[str]]:
    """The outer join of `left` and `right` on `keys` (and one side's flags, in `keys`
    already) and the conditions `cross` over both sides, as an outer join on one key
    (module doc): (left, right, that key pair, the helper columns to drop after it).
    `apart(left, right, rkeys)`: the right scope with columns the left has renamed. A
    condition with subqueries is tested on the pairs as WHERE tests rows (scalars.py)."""
    fresh = name_maker({*left.node.schema, *right.node.schema})
    lid, rid, mlid, mrid = (fresh(n) for n in ("_on_lid", "_on_rid", "_on_mlid", "_on_mrid"))
    for side, name in ((left, lid), (right, rid)):
        node = side.node
        side.node = text.build("JOIN ON", at, lambda n=node, m=name: Relation(n)
                               .row_ids(m).node)
    both = paired(text, left, apart(left, right, {rk for _, rk in keys}), keys, at)
    filter_by(text, conjoin([c.copy() for c in cross]), both, translate, "JOIN ON", at)
    pairs = both.node
    matched = text.build("JOIN ON", at, lambda: Relation(pairs).project(
        **{mlid: exp.column(lid), mrid: exp.column(rid)}).node)
    node = left.node
    left.node = text.build("JOIN ON", at, lambda: Relation(node).join(
        matched, on=[(lid, mlid)], how="inner" if how == "right" else "left").node)
    return left, right, [(mrid, rid)], {lid, rid, mlid, mrid}


def paired(text: SqlText, left: Scope, right: Scope, keys: list[tuple[str, str]],
           at: exp.Expression, clause: str = "JOIN ON") -> Scope:
    """The pairs of `left`'s and `right`'s rows equal on `keys` (without keys every pair of
    the instant), both sides' names reaching their columns (`right` renamed apart from
    `left` already; a right key is the left one's)."""
    pairs = text.build(clause, at, lambda: Relation(left.node).join(right.node, on=keys).node)
    rkey = {rk: lk for lk, rk in keys}
    return Scope(text, pairs, {**left.aliases, **{a: {c: rkey.get(n, n) for c, n in m.items()}
                                                  for a, m in right.aliases.items()}},
                 {**left.instants, **right.instants}, {**left.using, **right.using})
