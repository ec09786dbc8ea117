"""`x IN (SELECT ...)` and `x NOT IN (SELECT ...)` in WHERE, as joins at each instant.

At instant tau the subquery is a relation S(tau) like any FROM item (a window's rows, an
aggregate, a database table), so `WHERE x IN (SELECT c FROM ...)` keeps the rows of R(tau)
whose x equals some c of S(tau): a join of R with S's distinct values of c on x = c
(a semi join: each row of R at most once; NULL matches nothing, so a NULL x, or a row
whose x only meets NULLs, is not kept, as SQL's IN is then NULL). `(a, b) IN (SELECT c, d
...)` compares pairs. `x NOT IN (SELECT c ...)` keeps a row where the comparison is TRUE
by SQL's three-valued rule: S(tau) is empty, or x is not NULL, equals no c, and no c is
NULL; the plan is an outer join with S's distinct values (a mark where one matched) and an
instant join with S's count of rows and of NULLs. Here the subquery is uncorrelated and a
conjunct of WHERE (a correlated one: correlated.py; under OR or NOT: marks.py). `EXISTS
(SELECT ... FROM s WHERE s.c = a.x AND ...)`, correlated by equalities, is `a.x IN (SELECT
s.c FROM s WHERE ...)`
(`exists_as_in`), NOT EXISTS the rows no row of the subquery equals (an outer join kept
where unmatched: unlike NOT IN, a NULL key is kept, as SQL's NOT EXISTS keeps it); an
uncorrelated [NOT] EXISTS compares the constant 1 with the subquery's 1 (every row of the
instant or none). NOT IN over a database table alone is
refused: a table has no instants to count its rows at (use `IN` over the complement, or
a LEFT JOIN with `IS NULL`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from federation.conjuncts import conjoin, split_conjuncts
from federation.logical import Node, Relation
from federation.logical.membership import where_in
from federation.sqlfront.correlated import (
    OuterRows,
    compare,
    grouped_or_plain,
    in_as_exists,
    lookup,
    needs_rows,
    outer_aliases,
    outer_columns,
    select_of,
)
from federation.sqlfront.dialect import SqlText, check_scalar
from federation.sqlfront.rewrites import quantified, simpler
from federation.sqlfront.scopes import Scope

#: translates a nested query to its plan (query.QueryTranslator.query with the CTEs; a
#: second argument, more CTEs: correlated.py's outer rows)
Translate = Callable[..., Node]


def membership(e: exp.Expression) -> tuple[exp.In, str] | None:
    """`e` as (the IN over a subquery, "IN" or "NOT IN"), or None when it is no such
    test."""
    negated = isinstance(e, exp.Not)
    inner = e.this if negated else e
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.In) and inner.args.get("query") is not None:
        return inner, "NOT IN" if negated else "IN"
    return None


def semi_joins(text: SqlText, where: exp.Expression, scope: Scope, translate: Translate,
               clause: str = "WHERE") -> exp.Expression | None:
    """Join `scope.node` with the subquery of each `IN (SELECT ...)` conjunct of `where`
    (a WHERE's, or a HAVING's: `clause`); returns the other conjuncts (None: no other)."""
    rest = []
    for c in split_conjuncts(where.transform(simpler)):
        if _per_row(text, c, scope, translate, clause):
            continue
        got = membership(c) or exists_as_in(text, c, scope, clause)
        if got is None:
            rest.append(c)
            continue
        test, kind = got
        _Member(text, scope, test, translate, clause).join(kind)
    return conjoin(rest) if rest else None


def _per_row(text: SqlText, c: exp.Expression, scope: Scope, translate: Translate,
             clause: str) -> bool:
    """Keep the rows a correlated `[NOT] IN` conjunct `c`, or an EXISTS correlated by
    more than equalities or over a join, keeps (correlated.py); False: `c` is none."""
    got = membership(c)
    if got is not None:
        test, kind = got
        query = select_of(test.args["query"])
        if not outer_columns(query, scope):
            return False
        rows = OuterRows(text, scope, translate, clause, test)
        in_as_exists(test, kind == "NOT IN", rows, lambda why: text.fail(
            why, clause, test, "IN"))
        return True
    inner = c.this if isinstance(c, exp.Not) else c
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if quantified(inner):
        compare(inner, isinstance(c, exp.Not), OuterRows(text, scope, translate, clause, inner),
                lambda why: text.fail(why, clause, inner, "ANY"))
        return True
    if not isinstance(inner, exp.Exists):
        return False
    sub = select_of(inner.this)
    plain = isinstance(sub, exp.Select) and not any(sub.args.get(k) for k in (
        "group", "having", "limit", "order")) and not any(e.find(exp.AggFunc)
                                                          for e in sub.expressions)
    if plain and not needs_rows(sub, scope):
        return False  # an equality lookup: exists_as_in
    if not grouped_or_plain(sub):
        raise text.fail("EXISTS over a UNION, or a SELECT with ORDER BY, LIMIT or "
                        "aggregates without GROUP BY (one row: always TRUE) is not supported "
                        "(EXISTS (SELECT ... WHERE s.k = a.k AND ...) is)", clause, inner,
                        "EXISTS")
    rows = OuterRows(text, scope, translate, clause, inner)
    q, alias = rows.reading(sub)
    rows.keep(q, alias, negated=isinstance(c, exp.Not))
    return True


def exists_as_in(text: SqlText, e: exp.Expression, scope: Scope, clause: str = "WHERE"
                 ) -> tuple[exp.In, str] | None:
    """`[NOT] EXISTS (SELECT ... FROM s WHERE s.c = a.x AND ...)` as (`a.x IN (SELECT s.c
    FROM s WHERE ...)`, "EXISTS" or "NOT EXISTS") (with several correlations, a tuple IN;
    with none, `1 IN (SELECT 1 ...)`), or None when `e` is no EXISTS. The correlations are
    equalities of an outer column, named by its alias, and one of the subquery; its other
    conditions name only its own columns. `clause`: where it stands (WHERE, HAVING), for
    the errors."""
    inner = e.this if isinstance(e, exp.Not) else e
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if not isinstance(inner, exp.Exists):
        return None
    sub = select_of(inner.this)

    def fail(why: str):
        return text.fail(f"{why} (EXISTS (SELECT ... WHERE s.k = a.k AND ...) is "
                         "supported: `a.k IN (SELECT s.k ...)`)", clause, inner, "EXISTS")

    if not isinstance(sub, exp.Select) or any(sub.args.get(k) for k in (
            "group", "having", "limit", "order", "joins")) or sub.find(exp.AggFunc):
        raise fail("EXISTS over a SELECT with GROUP BY, aggregates, a join, ORDER BY or "
                   "LIMIT is not supported")
    lhs, rhs, rest = correlations(sub, scope, fail)
    if not lhs:  # uncorrelated: every row of the instant or none
        lhs, rhs = [exp.Literal.number(1)], [exp.alias_(exp.Literal.number(1), "_exists1")]
    new = sub.copy()
    names = [c.name.lower() for c in rhs]  # by position: a name only where one repeats
    new.set("expressions", [c if isinstance(c, exp.Alias) or names.count(c.name.lower()) == 1
                            else exp.alias_(c, f"_exists{i}") for i, c in enumerate(rhs, 1)])
    new.set("where", exp.Where(this=conjoin(rest)) if rest else None)
    new.set("distinct", None)
    test = exp.In(this=lhs[0] if len(lhs) == 1 else exp.Tuple(expressions=lhs),
                  query=exp.Subquery(this=new))
    return test, "NOT EXISTS" if isinstance(e, exp.Not) else "EXISTS"


def correlations(sub: exp.Select, scope: Scope, fail: Callable[[str], Exception]
                 ) -> tuple[list[exp.Column], list[exp.Column], list[exp.Expression]]:
    """The conditions of `sub`'s WHERE as (outer columns, the subquery's columns they
    equal, the other conditions): a correlation is an equality of an outer column, named by
    its alias, and one of the subquery; the other conditions name only its own columns
    (`fail(why)`: the error to raise else)."""
    outer = outer_aliases(sub, scope)
    where = sub.args.get("where")
    lhs, rhs, rest = [], [], []
    for c in split_conjuncts(where.this) if where is not None else []:
        pair = lookup(c, outer)
        if pair is not None:
            lhs.append(pair[0].copy())
            rhs.append(pair[1].copy())
        elif any(col.table.lower() in outer for col in c.find_all(exp.Column)):
            raise fail(f"{c.sql()}: a correlation other than an equality of columns")
        else:
            rest.append(c)
    return lhs, rhs, rest


class _Member:
    """One `lhs [NOT] IN (subquery)`: the outer relation's scope, joined in place."""

    def __init__(self, text: SqlText, scope: Scope, test: exp.In, translate: Translate,
                 where: str = "WHERE") -> None:
        self.text, self.scope, self.test, self.where = text, scope, test, where
        query = test.args["query"]
        sub = select_of(query)
        self.sub = text.build("IN", sub, lambda: translate(_named(sub)))
        lhs = test.this
        self.lhs = list(lhs.expressions) if isinstance(lhs, exp.Tuple) else [lhs]

    def join(self, clause: str) -> None:
        """Keep the rows `clause` (IN, NOT IN, EXISTS, NOT EXISTS) keeps."""
        for e in self.lhs:
            check_scalar(self.text, e, self.where)
        scope, values = self.scope, [self.scope.resolve(e, self.where) for e in self.lhs]
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
        if extra:
            node = self.text.build(self.where, self.test, lambda: Relation(node).project(
                *node.schema, **extra).node)
        scope.node = self.text.build(clause, self.test, lambda: where_in(
            node, names, self.sub, clause == "NOT IN", anti=clause == "NOT EXISTS").node)


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
