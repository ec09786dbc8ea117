"""`x IN (SELECT ...)` and `x NOT IN (SELECT ...)` in WHERE, as joins at each instant.

At instant tau the subquery is a relation S(tau) like any FROM item (a window's rows, an
aggregate, a database table), so `WHERE x IN (SELECT c FROM ...)` keeps the rows of R(tau)
whose x equals some c of S(tau): a join of R with S's distinct values of c on x = c
(a semi join: each row of R at most once; NULL matches nothing, so a NULL x, or a row
whose x only meets NULLs, is not kept, as SQL's IN is then NULL). `(a, b) IN (SELECT c, d
...)` compares pairs. `x NOT IN (SELECT c ...)` keeps a row where the comparison is TRUE
by SQL's three-valued rule: S(tau) is empty, or x is not NULL, equals no c, and no c is
NULL; the plan is an outer join with S's distinct values (a mark where one matched) and an
instant join with S's count of rows and of NULLs. The subquery is uncorrelated (it names
no column of the outer query: a correlated one is refused, write a join); only conjuncts
of WHERE (not under OR or NOT but NOT IN's own). NOT IN over a database table alone is
refused: a table has no instants to count its rows at (use `IN` over the complement, or
a LEFT JOIN with `IS NULL`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from federation.expressions import conjoin, split_conjuncts
from federation.logical import Node, Relation
from federation.logical.membership import where_in
from federation.sqlfront.dialect import SqlText, check_scalar
from federation.sqlfront.scopes import Scope

#: translates a nested query to its plan (query.QueryTranslator.query with the CTEs)
Translate = Callable[[exp.Expression], Node]


def membership(e: exp.Expression) -> tuple[exp.In, bool] | None:
    """`e` as (the IN over a subquery, negated), or None when it is no such test."""
    negated = isinstance(e, exp.Not)
    inner = e.this if negated else e
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.In) and inner.args.get("query") is not None:
        return inner, negated
    return None


def semi_joins(text: SqlText, where: exp.Expression, scope: Scope, translate: Translate
               ) -> exp.Expression | None:
    """Join `scope.node` with the subquery of each `IN (SELECT ...)` conjunct of `where`;
    returns the other conjuncts (None: no other)."""
    rest = []
    for c in split_conjuncts(where):
        got = membership(c)
        if got is None:
            rest.append(c)
            continue
        test, negated = got
        _Member(text, scope, test, translate).join(negated)
    return conjoin(rest) if rest else None


class _Member:
    """One `lhs [NOT] IN (subquery)`: the outer relation's scope, joined in place."""

    def __init__(self, text: SqlText, scope: Scope, test: exp.In, translate: Translate) -> None:
        self.text, self.scope, self.test = text, scope, test
        query = test.args["query"]
        sub = query.this if isinstance(query, exp.Subquery) else query
        self.sub = text.build("IN", sub, lambda: translate(_named(sub)))
        lhs = test.this
        self.lhs = list(lhs.expressions) if isinstance(lhs, exp.Tuple) else [lhs]

    def join(self, negated: bool) -> None:
        for e in self.lhs:
            check_scalar(self.text, e, "WHERE")
        scope, values = self.scope, [self.scope.resolve(e, "WHERE") for e in self.lhs]
        node, names, extra = scope.node, [], {}
        for i, v in enumerate(values, 1):  # an expression: a hidden column
            if isinstance(v, exp.Column):
                names.append(v.name)
                continue
            name = f"_in_value{i}"
            while name in node.schema:
                name = "_" + name
            names.append(name)
            extra[name] = v
        clause = "NOT IN" if negated else "IN"
        if extra:
            node = self.text.build("WHERE", self.test, lambda: Relation(node).project(
                *node.schema, **extra).node)
        scope.node = self.text.build(clause, self.test, lambda: where_in(
            node, names, self.sub, negated).node)


def _named(sub: exp.Expression) -> exp.Expression:
    """The subquery with a name for each unnamed computed SELECT item (an IN compares by
    position: the names are not seen)."""
    if not isinstance(sub, exp.Select):
        return sub
    out = sub.copy()
    out.set("expressions", [e if isinstance(e, (exp.Column, exp.Alias, exp.Star))
                            else exp.alias_(e, f"_in_item{i}")
                            for i, e in enumerate(out.expressions, 1)])
    return out
