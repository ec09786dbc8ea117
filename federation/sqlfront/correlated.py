"""Subqueries correlated by more than an equality lookup: EXISTS correlated by conditions
other than equalities of columns (`WHERE b.k = a.k AND b.value > a.value`) or over a join,
`x [NOT] IN (SELECT ...)` correlated at all, and a value `(SELECT MAX(x) FROM ... WHERE
b.ts < a.ts)` so correlated: each outer row has a subquery of its own.

At instant tau the outer rows are a relation R(tau) the subquery names columns of. R's rows
are numbered (a row id) and the subquery reads them as one more FROM item: its outer
columns become that item's, joined by a comma join (its equalities are keys, the other
conditions a selection of the pairs). Then

- EXISTS keeps the rows whose id the subquery returns (a semi join on the id), NOT EXISTS
  the others;
- `x IN (SELECT y ...)` is `EXISTS (... AND y = x)`; `x NOT IN (SELECT y ...)` is TRUE
  where no row of the subquery has `y = x`, `y` NULL or `x` NULL (SQL's three-valued rule:
  then `x <> y` is not TRUE), so `NOT EXISTS (... AND (y = x OR y IS NULL OR x IS NULL))`
  (a tuple: each component so);
- a value is the subquery grouped by the row id, LEFT-joined back on it (scalars.py: a row
  without a match gets what the item gives over no row);
- over GROUP BY, its groups are formed per outer row (the id, and the outer columns its
  HAVING reads, grouped beside its keys), an IN's or ANY's comparison tested in HAVING;
- over one row (aggregates without GROUP BY), IN, ANY and ALL are the comparison with its
  value (rewrites.simpler), so COUNT's 0 over no row counts as SQL counts it.

The pairs are the outer rows with the subquery's rows equal on the equalities (without
one, every pair of the instant): quadratic in the rows of a key at an instant. An
equality lookup (EXISTS or a value correlated by equalities of columns alone, over one
FROM item) keeps the cheaper plans of subqueries.py and scalars.py: its subquery grouped
or made distinct by the correlated keys, not by outer rows.
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from federation.conjuncts import split_conjuncts
from federation.logical import Node, Relation
from federation.logical.membership import where_in
from federation.logical.names import name_maker
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.scopes import OUTER_ROWS, Scope

_CTES = itertools.count(1)


def own_aliases(sub: exp.Select) -> set[str]:
    """The aliases (lower case) `sub`'s FROM clause names."""
    frm = sub.args.get("from_") or sub.args.get("from")
    items = ([frm.this] if frm is not None else []) + [j.this for j in
                                                        sub.args.get("joins") or []]
    return {i.alias_or_name.lower() for i in items}


def select_of(e: exp.Expression) -> exp.Expression:
    """The query `e` is, or holds in parentheses."""
    return e.this if isinstance(e, exp.Subquery) else e


def limit_of(sub: exp.Expression) -> int | None:
    """The row count of `sub`'s LIMIT, where it is a SELECT's with a whole number."""
    limit = sub.args.get("limit") if isinstance(sub, exp.Select) else None
    count = limit.expression if isinstance(limit, exp.Limit) else None
    return int(count.name) if isinstance(count, exp.Literal) and count.name.isdigit() \
        else None


def outer_aliases(sub: exp.Select, scope: Scope) -> dict[str, str]:
    """The outer aliases `sub` may name (lower case -> as the scope spells it)."""
    own = own_aliases(sub)
    return {a.lower(): a for a in scope.aliases if a.lower() not in own}


def lookup(c: exp.Expression, outer: dict[str, str]
           ) -> tuple[exp.Column, exp.Column] | None:
    """(the outer column, the subquery's own) where the conjunct `c` is an equality of an
    outer column (named by an alias in `outer`) and one of the subquery's own; else None."""
    if not (isinstance(c, exp.EQ) and isinstance(c.left, exp.Column)
            and isinstance(c.right, exp.Column)):
        return None
    sides = [bool(x.table) and x.table.lower() in outer for x in (c.left, c.right)]
    if sides.count(True) != 1:
        return None
    return (c.left, c.right) if sides[0] else (c.right, c.left)


def outer_columns(sub: exp.Expression, scope: Scope) -> list[exp.Column]:
    """The columns in `sub` named by an alias of the outer `scope` it does not shadow (in
    each SELECT of a set operation)."""
    if isinstance(sub, exp.SetOperation):
        return [*outer_columns(select_of(sub.this), scope),
                *outer_columns(select_of(sub.expression), scope)]
    if not isinstance(sub, exp.Select):
        return []
    outer = outer_aliases(sub, scope)
    return [c for c in sub.find_all(exp.Column) if c.table and c.table.lower() in outer]


def needs_rows(sub: exp.Expression, scope: Scope) -> bool:
    """`sub` is correlated by more than equalities of an outer column and one of its own
    (another condition, an outer column outside WHERE), or over a join (module doc)."""
    cols = outer_columns(sub, scope)
    if not cols:
        return False
    if sub.args.get("joins") or not isinstance(sub, exp.Select):
        return True
    outer, where = outer_aliases(sub, scope), sub.args.get("where")
    conjuncts = split_conjuncts(where.this) if where is not None else []
    return sum(lookup(c, outer) is not None for c in conjuncts) < len(cols)


def refuse_tables(text: SqlText, node: Node, clause: str, at: exp.Expression) -> None:
    """Refuse to number the rows of `node` where it reads database tables alone (a row id
    is numbered at each instant, and a table has none)."""
    if not any(n.kind == "window" for n in node.walk()):
        raise text.fail("this subquery is tested per row of the outer query, whose rows come "
                        "from database tables alone: such rows are not numbered (they have "
                        "no instants); join the table with the stream in FROM instead",
                        clause, at)


class OuterRows:
    """The outer scope's rows numbered (`scope.node` gains the id), read by subqueries as
    a relation of their own (module doc). `translate(q, ctes)`: the plan of a query with
    more CTEs in scope."""

    def __init__(self, text: SqlText, scope: Scope, translate, clause: str,
                 at: exp.Expression) -> None:
        self.text, self.scope, self.translate, self.clause, self.at = (
            text, scope, translate, clause, at)
        refuse_tables(text, scope.node, clause, at)
        self.cols = list(scope.node.schema)
        self.rid = name_maker(self.cols)("_corr_row")
        self.cte = f"_fedq_outer_rows{next(_CTES)}"
        node = scope.node
        scope.node = text.build(clause, at, lambda: Relation(node).row_ids(self.rid).node)

    def reading(self, sub: exp.Select) -> tuple[exp.Select, str]:
        """A copy of `sub` that reads the outer rows by an alias of its own (returned): its
        outer columns that alias's, the rows joined in its FROM."""
        outer = outer_aliases(sub, self.scope)
        alias = name_maker(own_aliases(sub) | set(outer))(OUTER_ROWS)

        def fix(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and n.table and n.table.lower() in outer:
                name = self.scope.column_of(outer[n.table.lower()], n.name, self.clause, n)
                return exp.column(name, table=alias)
            return n

        out = sub.copy().transform(fix)
        out.append("joins", exp.Join(this=exp.Table(
            this=exp.to_identifier(self.cte), alias=exp.TableAlias(
                this=exp.to_identifier(alias)))))
        return out, alias

    def reading_top(self, sub: exp.Select, fail) -> tuple[exp.Select, str]:
        """`reading` of `sub` with ORDER BY ... LIMIT n [OFFSET m]: each outer row's rows
        m+1 to m+n in that order (ROW_NUMBER partitioned by the outer row, ties broken as
        ranking.py breaks them), as a query over a FROM item of their own (returned) that
        holds them, the outer rows' columns and the id: a test added to it applies to
        those rows, not before the order picks them."""
        n, m = limit_of(sub), sub.args.get("offset")
        m = int(m.expression.name) if isinstance(m, exp.Offset) and m.expression.name.isdigit() \
            else 0 if m is None else None
        if n is None or m is None or sub.args.get("order") is None or any(
                isinstance(e, exp.Star) for e in sub.expressions):
            raise fail("a correlated IN, ANY or ALL over LIMIT takes ORDER BY ... LIMIT n "
                       "[OFFSET m] and named columns (which rows is not defined otherwise)")
        q, alias = self.reading(sub)
        ys = [f"_corr_y{i}" for i in range(len(q.expressions))]
        number = exp.Window(this=exp.RowNumber(), partition_by=[exp.column(
            self.rid, table=alias)], order=q.args["order"].copy())
        q.set("expressions", [*(exp.alias_(e.unalias(), y) for e, y in zip(q.expressions, ys)),
                              *(exp.alias_(exp.column(c, table=alias), c)
                                for c in [*self.cols, self.rid]),
                              exp.alias_(number, "_corr_rank")])
        for k in ("order", "limit", "offset"):
            q.set(k, None)
        top = name_maker(set(self.cols) | {self.rid})("_corr_top")
        rank = exp.column("_corr_rank", table=top)
        return exp.select(*(exp.column(y, table=top) for y in ys)).from_(exp.Subquery(
            this=q, alias=exp.TableAlias(this=exp.to_identifier(top)))).where(exp.and_(
                exp.GT(this=rank, expression=exp.Literal.number(m)),
                exp.LTE(this=rank.copy(), expression=exp.Literal.number(m + n)))), top

    def reading_set(self, sub: exp.SetOperation, fail) -> tuple[exp.Select, str]:
        """`reading` of each SELECT of `sub` (INTERSECT, EXCEPT, UNION [ALL] of them), its
        items beside the outer rows' columns and id: the set operation made per outer row
        (the id tells the rows of two outer rows apart), as a query over a FROM item of its
        own (returned), as `reading_top`'s."""
        def over(e: exp.Expression) -> exp.Expression:
            e = select_of(e)
            if isinstance(e, exp.SetOperation) and not any(
                    e.args.get(k) for k in ("order", "limit", "offset")):
                out = e.copy()
                out.set("this", over(e.this))
                out.set("expression", over(e.expression))
                return out
            if not isinstance(e, exp.Select) or not grouped_or_plain(e) or any(
                    isinstance(x, exp.Star) for x in e.expressions):
                raise fail("a correlated test over a set operation reads SELECTs of named "
                           "columns without ORDER BY or LIMIT (an ordered UNION, INTERSECT or "
                           "EXCEPT: number its rows in a subquery of FROM)")
            q, alias = self.reading(e)
            outer = [exp.column(c, table=alias) for c in [*self.cols, self.rid]]
            q.set("expressions", [*(exp.alias_(x.unalias(), f"_corr_y{i}")
                                    for i, x in enumerate(q.expressions)),
                                  *(exp.alias_(c, c.name) for c in outer)])
            if q.args.get("group"):  # its groups per outer row
                q.args["group"].set("expressions", [*q.args["group"].expressions,
                                                    *(c.copy() for c in outer)])
            return q

        tree = over(sub)
        first = tree
        while isinstance(first, exp.SetOperation):
            first = first.this
        ys = [e.alias for e in first.expressions[:-len(self.cols) - 1]]
        top = name_maker(set(self.cols) | {self.rid})("_corr_set")
        return exp.select(*(exp.column(y, table=top) for y in ys)).from_(exp.Subquery(
            this=tree, alias=exp.TableAlias(this=exp.to_identifier(top)))), top

    def outer_value(self, e: exp.Expression, alias: str) -> exp.Expression:
        """`e`, an expression of the outer query, over the rows read as `alias`."""
        return self.scope.resolve(e, self.clause).transform(
            lambda n: exp.column(n.name, table=alias) if isinstance(n, exp.Column) else n)

    def plan(self, q: exp.Select) -> Node:
        """The plan of `q`, a subquery made by `reading`."""
        rows = self.scope.node
        return self.text.build(self.clause, self.at,
                               lambda: self.translate(q, {self.cte: rows}))

    def keep(self, q: exp.Select, alias: str, negated: bool) -> None:
        """Keep the outer rows whose id `q` (a `reading`) returns (`negated`: does not);
        the id dropped after."""
        q = q.copy()
        q.set("expressions", [exp.alias_(exp.column(self.rid, table=alias), "_corr_id")])
        for k in ("distinct", "order", "limit"):
            q.set(k, None)
        if q.args.get("group"):  # its groups per outer row
            _group_by(q, exp.column(self.rid, table=alias), alias)
        ids, rows, cols = self.plan(q), self.scope.node, self.cols
        self.scope.node = self.text.build(self.clause, self.at, lambda: where_in(
            rows, [self.rid], ids, anti=negated).project(*cols).node)

    def grouped(self, q: exp.Select, alias: str, item: exp.Expression, key: str,
                value: str) -> Node:
        """`q` (a `reading`) as one row per outer row it meets: the id as `key`, `item`
        (over `q`'s names) as `value`."""
        q = q.copy()
        q.set("expressions", [exp.alias_(exp.column(self.rid, table=alias), key),
                              exp.alias_(item, value)])
        q.set("group", exp.Group(expressions=[exp.column(self.rid, table=alias)]))
        return self.plan(q)


def in_as_exists(test: exp.In, negated: bool, rows: OuterRows, fail) -> None:
    """Keep the rows `lhs [NOT] IN (correlated subquery)` keeps (module doc)."""
    sub = select_of(test.args["query"])
    if isinstance(sub, exp.Select) and not grouped_or_plain(sub) and not _top(sub):
        raise fail("a correlated IN over aggregates without GROUP BY (but of one value: "
                   "`x = (SELECT MAX(y) ...)`), or over LIMIT beside aggregates, is not "
                   "supported (compute the set in a subquery of FROM)")
    lhs = test.this
    lhs = list(lhs.expressions) if isinstance(lhs, exp.Tuple) else [lhs]
    q, alias = _read(sub, rows, fail)
    items = [e.unalias() for e in q.expressions]
    if len(items) != len(lhs):
        raise fail(f"IN compares {len(lhs)} value(s) with a subquery of {len(items)} "
                   "column(s): they must be as many")
    conds = []
    for x, y in zip((rows.outer_value(e, alias) for e in lhs), items):
        eq = exp.EQ(this=y.copy(), expression=x.copy())
        conds.append(exp.paren(exp.or_(eq, y.copy().is_(exp.null()), x.copy().is_(
            exp.null()))) if negated else eq)
    _add(q, exp.and_(*conds), alias)
    rows.keep(q, alias, negated)


def _read(sub: exp.Expression, rows: OuterRows, fail) -> tuple[exp.Select, str]:
    """The rows of subquery `sub` per outer row, and the alias of the outer rows in them."""
    if isinstance(sub, exp.SetOperation):
        return rows.reading_set(sub, fail)
    return rows.reading_top(sub, fail) if _top(sub) else rows.reading(sub)


def _top(sub: exp.Select) -> bool:
    """`sub` orders or limits rows it neither groups nor aggregates (a Top-N per outer row:
    OuterRows.reading_top)."""
    return any(sub.args.get(k) for k in ("order", "limit", "offset")) and not (
        sub.args.get("group") or sub.args.get("having") or sub.args.get("distinct")
        or any(e.find(exp.AggFunc) for e in sub.expressions))


def grouped_or_plain(sub: exp.Select) -> bool:
    """`sub` is a SELECT without ORDER BY or LIMIT, with aggregates only beside GROUP BY
    (several rows)."""
    return isinstance(sub, exp.Select) and not any(
        sub.args.get(k) for k in ("limit", "order")) and (
        sub.args.get("group") is not None or not any(
            e.find(exp.AggFunc) for e in sub.expressions) and not sub.args.get("having"))


def _add(q: exp.Select, cond: exp.Expression, alias: str) -> None:
    """`cond` (of `q`'s items and the outer rows read as `alias`) into `q`'s WHERE, or,
    where `q` groups, its HAVING, with the outer columns it reads grouped (one value per
    outer row, whose id keep() groups by)."""
    group = q.args.get("group")
    if group is None:
        where = q.args.get("where")
        q.set("where", exp.Where(this=exp.and_(*([where.this] if where else []), cond)))
        return
    having = q.args.get("having")
    q.set("having", exp.Having(this=exp.and_(*([having.this] if having else []), cond)))


def _group_by(q: exp.Select, e: exp.Expression, alias: str) -> None:
    """Add `e` and the outer columns (read as `alias`) of `q`'s HAVING to its GROUP BY:
    one value per outer row, so its groups stay those of each outer row."""
    group = q.args["group"]
    having = q.args.get("having")
    seen = {g.sql() for g in group.expressions}
    for c in [e, *(having.find_all(exp.Column) if having is not None else ())]:
        if c.sql() not in seen and (c is e or c.table == alias):
            seen.add(c.sql())
            group.append("expressions", c.copy())


def compare(test: exp.Binary, negated: bool, rows: OuterRows, fail) -> None:
    """Keep the rows `[NOT] x op ANY|ALL (subquery)` keeps, by SQL's three-valued rule:
    ANY is TRUE where `x op y` is for some row y, ALL where it is for every row (so over
    no row); NOT ANY where no row makes it TRUE or NULL, NOT ALL where one makes it FALSE.
    Each is an EXISTS (NOT EXISTS) over the subquery reading the outer row (module doc)."""
    every = isinstance(test.expression, exp.All)
    sub = select_of(test.expression.this)
    if isinstance(sub, exp.Select) and not (grouped_or_plain(sub) or _top(sub)) or len(
            sub.selects) != 1:
        raise fail("ANY and ALL compare with a subquery of one column (LIMIT without "
                   "aggregates)")
    q, alias = _read(sub, rows, fail)
    x, y = rows.outer_value(test.this, alias), q.expressions[0].unalias()
    holds = type(test)(this=x.copy(), expression=y.copy())
    if every != negated:  # ALL, NOT ANY: no row where it fails (or is NULL; holds)
        cond = exp.or_(exp.Not(this=holds) if every else holds, x.copy().is_(exp.null()),
                       y.copy().is_(exp.null()))
    else:  # ANY, NOT ALL: a row where it holds (fails)
        cond = exp.Not(this=holds) if every else holds
    _add(q, exp.paren(cond), alias)
    rows.keep(q, alias, negated=every != negated)
