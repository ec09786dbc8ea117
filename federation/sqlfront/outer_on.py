"""An outer join's ON conditions of one side: `a LEFT JOIN b ON a.k = b.k AND b.x > 1`
(or `AND a.y < 2`, in LEFT, RIGHT and FULL joins alike).

SQL's ON decides which rows match; a row that matches none is kept with NULLs on the
other side. A condition over one side's columns is that side's row meeting it, so it is a
key: on that side the column `COALESCE(cond, FALSE)`, on the other the constant TRUE, and
the pair is joined on with the key equalities. A row failing it (or NULL) matches nothing
and is kept, unmatched, as SQL keeps it; no row is filtered out (a WHERE would drop it). A
condition over columns of both sides beyond key equalities (a non-equi outer join) is
refused.
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
            raise text.fail(f"{c.sql()}: an outer join's ON holds key equalities and "
                            "conditions of one side (a condition over both sides beyond key "
                            "equalities is a non-equi outer join: filter the result in WHERE "
                            "if that is meant; qualify a name both sides have)", "JOIN ON", c)
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
