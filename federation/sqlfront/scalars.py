"""Scalar subqueries: `(SELECT MAX(x) FROM ...)` as a value in WHERE, HAVING, a join's ON
or the SELECT list (of an aggregated one: having.selected_subqueries), as joins at each
instant.

At instant tau a scalar subquery gives each outer row one value. Uncorrelated, it is a
global aggregate (one row at every instant; over no row COUNT is 0, the others NULL) joined
to every row of the instant (a join on the instant alone). Correlated by equalities (`WHERE
p.k = a.k AND ...`, as EXISTS is), it is the subquery's aggregate grouped by its correlated
columns, LEFT-joined on them: a row whose key meets no group (or is NULL) gets what the
SELECT item gives over no row (`COUNT(*)` 0, `COALESCE(MAX(x), 0)` 0, the others NULL),
as SQL evaluates it. The subquery is one aggregate item without GROUP BY, so it has one
row at most (SQL's error for a scalar subquery of several rows has no place in a
continuous query), or the first row of an order (`ORDER BY y LIMIT 1`: `_first_row`, NULL
where there is none); the value is a hidden column the WHERE's projection and the SELECT
list drop. Correlated by other conditions or over a join, the subquery per outer row
(correlated.py); in an aggregated SELECT, over its groups (having.selected_subqueries).

    >>> from federation import sql
    >>> from federation.smartplug import smartplug_stream
    >>> w = "HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
    >>> q = sql(f"SELECT a.plug_id, a.value FROM {w} AS a WHERE a.value > 0.9 * "
    ...         f"(SELECT MAX(b.value) FROM {w} AS b WHERE b.plug_id = a.plug_id)",
    ...         {"s": smartplug_stream()})
    >>> [n.kind for n in q.walk() if n.kind in ("join", "aggregate")]
    ['aggregate', 'join']
"""

from __future__ import annotations

from sqlglot import exp

from federation.conjuncts import conjoin
from federation.logical import Relation
from federation.logical.builder import name_maker
from federation.sqlfront.correlated import (
    OuterRows,
    limit_of,
    needs_rows,
    outer_columns,
    own_aliases,
)
from federation.sqlfront.dialect import SqlText, check_scalar, has_subquery
from federation.sqlfront.marks import marked_tests
from federation.sqlfront.scopes import Scope
from federation.sqlfront.subqueries import Translate, correlations, semi_joins


def filter_by(text: SqlText, cond: exp.Expression, scope: Scope, translate: Translate,
              clause: str, at: exp.Expression, selectivity: float | None = None) -> None:
    """Keep the rows of `scope.node` that meet `cond` (a WHERE's, an inner join's ON):
    its `[NOT] IN` and `[NOT] EXISTS` conjuncts as semi joins, its scalar subqueries as
    hidden columns joined in, the rest a selection; the hidden columns dropped after it."""
    rest = semi_joins(text, cond, scope, translate, clause)
    if rest is None:
        return
    cols = list(scope.node.schema)
    rest = scalar_values(text, rest, scope, translate, clause, keeps=True)
    check_scalar(text, rest, clause)
    pred = scope.resolve(rest, clause)
    node = Relation(scope.node)
    hidden = list(node.schema) != cols  # scalar subqueries' values: dropped after
    scope.node = text.build(clause, at, lambda: (
        node.filter(pred, selectivity=selectivity).project(*cols) if hidden
        else node.filter(pred, selectivity=selectivity)).node)


def scalar_values(text: SqlText, e: exp.Expression, scope: Scope, translate: Translate,
                  clause: str, keeps: bool = False) -> exp.Expression:
    """`e` with each subquery in it replaced by a hidden column of `scope.node`, into which
    its value is joined: a scalar subquery's value, an IN's or EXISTS's mark (marks.py;
    `keeps`: `e` is a condition whose TRUE rows are kept)."""
    e = marked_tests(text, e, scope, translate, clause, keeps, filter_by)
    subs = [s for s in e.walk(prune=lambda n: isinstance(n, exp.Subquery))
            if isinstance(s, exp.Subquery) and not isinstance(s.parent, (exp.In, exp.Exists))]
    for s in subs:
        column = exp.column(_Scalar(text, scope, s, translate, clause).join())
        if s is e:
            return column
        s.replace(column)
    return e


class _Scalar:
    """One scalar subquery of a WHERE or a SELECT list over `scope`, joined in place."""

    def __init__(self, text: SqlText, scope: Scope, s: exp.Subquery, translate: Translate,
                 clause: str) -> None:
        self.text, self.scope, self.s, self.translate = text, scope, s, translate
        sub = s.this
        if not (isinstance(sub, exp.Select) and len(sub.expressions) == 1 and not any(
                sub.args.get(k) for k in ("group", "having", "offset", "distinct")) and (
                _first(sub) or sub.expressions[0].find(exp.AggFunc) is not None and not any(
                    sub.args.get(k) for k in ("limit", "order")))):
            raise text.fail("a subquery as a value is one aggregate without GROUP BY, one row "
                            "at each instant (or for each correlated key): (SELECT MAX(x) "
                            "FROM ... [WHERE s.k = a.k ...]), or the first row of an order: "
                            "(SELECT x FROM ... ORDER BY y DESC LIMIT 1)", clause, s, "SELECT")
        self.sub, self.clause = sub, clause

    def fail(self, why: str):
        return self.text.fail(f"{why} (a subquery as a value: (SELECT MAX(x) FROM s WHERE "
                              "s.k = a.k AND ...))", self.clause, self.s, "SELECT")

    def join(self) -> str:
        """Join the value into the scope; its hidden column."""
        fresh = name_maker(set(self.scope.node.schema))

        item = self.sub.expressions[0].unalias()
        name = fresh("_scalar")
        if _first(self.sub):
            return self._first_row(item, name)
        if needs_rows(self.sub, self.scope):  # each outer row's own (correlated.py)
            rows = OuterRows(self.text, self.scope, self.translate, self.clause, self.s)
            q, alias = rows.reading(self.sub)
            key, inner, mark = self._hidden(name)
            groups = rows.grouped(q, alias, q.expressions[0].unalias(), key, inner)
            return self._joined(groups, [rows.rid], [key], inner, mark, item, name,
                                rows.cols)
        lhs, rhs, rest = correlations(self.sub, self.scope, self.fail)
        node = self.scope.node
        if not lhs:  # one row at every instant: joined on the instant alone
            named = self.sub.copy()  # an expression of aggregates gets a name
            named.set("expressions", [exp.alias_(item.copy(), "_scalar_item")])
            value = self.translate(named)
            only = next(iter(value.schema))
            self.scope.node = self.text.build(self.clause, self.s, lambda: Relation(node).join(
                Relation(value).project(**{name: exp.column(only)}), on=[]).node)
            return name
        keys = [fresh(f"_scalar_key{i}") for i in range(1, len(rhs) + 1)]
        inner, mark = fresh("_scalar_value"), fresh("_scalar_mark")
        grouped = self.sub.copy()
        grouped.set("expressions", [*(exp.alias_(c, k) for c, k in zip(rhs, keys)),
                                    exp.alias_(item.copy(), inner)])
        grouped.set("where", exp.Where(this=conjoin(rest)) if rest else None)
        grouped.set("group", exp.Group(expressions=[c.copy() for c in rhs]))
        groups = self.translate(grouped)
        outer = [self.scope.resolve(c, self.clause).name for c in lhs]
        return self._joined(groups, outer, keys, inner, mark, item, name, list(node.schema))

    def _first_row(self, item: exp.Expression, name: str) -> str:
        """`(SELECT x FROM ... ORDER BY y LIMIT 1)`: per outer row (correlated.py), the
        first of its rows under ROW_NUMBER's order (ties broken by the other columns, as
        ranking.py does), LEFT-joined back: NULL where it has none. Uncorrelated, the
        first row is taken before the outer rows meet it (one pair per row)."""
        sub = self.sub
        if not outer_columns(sub, self.scope):  # ordered and cut at each instant first
            top, first = name_maker(own_aliases(sub))("_fedq_first"), sub.copy()
            order = first.args.get("order")
            keys = order.expressions if order is not None else []
            first.set("expressions", [exp.alias_(item.copy(), "_first_value"), *(
                exp.alias_(o.this.copy(), f"_first_o{i}") for i, o in enumerate(keys))])
            if keys:
                first.set("order", exp.Order(expressions=[
                    exp.Ordered(this=exp.column(f"_first_o{i}"), desc=o.args.get("desc"),
                                nulls_first=o.args.get("nulls_first"))
                    for i, o in enumerate(keys)]))
            sub = exp.select(exp.column("_first_value", table=top)).from_(exp.Subquery(
                this=first, alias=exp.TableAlias(this=exp.to_identifier(top))))
        rows = OuterRows(self.text, self.scope, self.translate, self.clause, self.s)
        q, alias = rows.reading(sub)
        key, inner, mark = self._hidden(name)
        q.set("expressions", [exp.alias_(exp.column(rows.rid, table=alias), key),
                              exp.alias_(q.expressions[0].unalias(), inner)])
        order = q.args.get("order")
        if order is not None:  # correlated: the first of each outer row's rows
            number = exp.Window(this=exp.RowNumber(), partition_by=[exp.column(
                rows.rid, table=alias)], order=order.copy())
            q.set("qualify", exp.Qualify(this=exp.EQ(this=number,
                                                     expression=exp.Literal.number(1))))
        elif q.args.get("limit") is not None and sub is self.sub:
            raise self.fail("LIMIT 1 without ORDER BY: which row is not defined")
        q.set("order", None)
        q.set("limit", None)
        return self._joined(rows.plan(q), [rows.rid], [key], inner, mark, exp.column(inner),
                            name, rows.cols)  # no row: NULL, whatever the item

    def _hidden(self, name: str) -> tuple[str, str, str]:
        """Fresh names beside the scope's columns and `name` for a per-row value's key,
        value and match mark."""
        fresh = name_maker(set(self.scope.node.schema) | {name})
        return fresh("_scalar_key"), fresh("_scalar_value"), fresh("_scalar_mark")

    def _joined(self, groups, outer: list[str], keys: list[str], inner: str, mark: str,
                item: exp.Expression, name: str, cols: list[str]) -> str:
        """LEFT-join `groups` (the value `inner` by `keys`) to the scope on its `outer`
        columns: the value as `name` beside `cols`, what `item` gives over no row where
        none matched."""
        node, empty = self.scope.node, _over_no_row(item)
        value = exp.column(inner) if empty is None else exp.case().when(
            exp.column(mark).is_(exp.null()), empty).else_(exp.column(inner))
        self.scope.node = self.text.build(self.clause, self.s, lambda: Relation(node).join(
            Relation(groups).project(*keys, inner, **{mark: exp.true()}),
            list(zip(outer, keys)), how="left").project(*cols, **{name: value}).node)
        return name


def _first(sub: exp.Select) -> bool:
    """`sub` is `SELECT x FROM ... [ORDER BY ...] LIMIT 1` (no aggregate)."""
    return limit_of(sub) == 1 and not any(e.find(exp.AggFunc) for e in sub.expressions)


#: expressions that are NULL when an aggregate in them is (the others, COALESCE, CASE, IS
#: NULL, COUNT, ..., are evaluated over no row)
_NULL_IN_NULL_OUT = (exp.AggFunc, exp.Column, exp.Identifier, exp.Literal, exp.Add, exp.Sub,
                     exp.Mul, exp.Div, exp.Mod, exp.Paren, exp.Neg, exp.Cast)


def _over_no_row(item: exp.Expression) -> exp.Expression | None:
    """What `item` gives over no row, where that is not NULL: COUNT 0, every other
    aggregate and column NULL (None: NULL)."""
    if all(isinstance(n, _NULL_IN_NULL_OUT) and not isinstance(n, exp.Count)
           for n in item.walk()):
        return None

    def fix(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Count) or isinstance(n, exp.Filter) and isinstance(n.this,
                                                                               exp.Count):
            return exp.Literal.number(0)
        if isinstance(n, (exp.AggFunc, exp.Filter, exp.Column)):
            return exp.null()
        return n

    return item.copy().transform(fix)


def before_grouping(text: SqlText, q: exp.Select, scope: Scope, translate: Translate) -> None:
    """The subqueries of an aggregation's FILTER conditions and GROUP BY expressions: values
    of the rows it groups, so joined to them (`scope.node`) as WHERE's are, each replaced
    where it is written by its hidden column (which the aggregation drops). A FILTER keeps
    the rows whose condition is TRUE, as WHERE (one mark per test); a GROUP BY value is
    SQL's, NULL where SQL's is (marks.py). A GROUP BY expression written again in SELECT or
    HAVING (`SELECT k IN (SELECT ...) AS seen ... GROUP BY 1`) is replaced there too."""
    having = q.args.get("having")
    clauses = [*q.expressions, *([having] if having is not None else [])]
    def outside(e: exp.Expression):  # not in a subquery of its own
        return e.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Select)))

    for f in [f for e in clauses for f in outside(e) if isinstance(f, exp.Filter)]:
        cond = f.expression.this if isinstance(f.expression, exp.Where) else None
        if cond is not None and has_subquery(cond):
            new = scalar_values(text, cond, scope, translate, "FILTER", keeps=True)
            if new is not cond:
                cond.replace(new)
    group = q.args.get("group")
    for g in list(group.expressions) if group is not None else []:
        if isinstance(g, exp.Literal) and not g.is_string and str(g.this).isdigit() \
                and 1 <= int(g.this) <= len(q.expressions):  # GROUP BY 2: the item itself
            g = q.expressions[int(g.this) - 1].unalias()
        if not has_subquery(g):
            continue
        written = g.sql()
        same = [n for e in clauses for n in outside(e) if n is not g and n.sql() == written]
        new = scalar_values(text, g, scope, translate, "GROUP BY")
        if new is not g:
            g.replace(new)
        for n in same:
            n.replace(new.copy())
