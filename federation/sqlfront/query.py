"""A statement, clause by clause, into the DSL's logical plan.

`INSERT INTO name SELECT ...` names the result (an RSTREAM); a SELECT is read in the order
its clauses take effect: WITH binds each CTE to its plan (a CTE used twice is the same
subplan twice), FROM builds the scope (from_clause.py), WHERE filters it, the SELECT list
with GROUP BY and HAVING ends it (select_list.py). The modifiers that have no meaning on a
stream (ORDER BY without LIMIT, OFFSET, OVER but ROW_NUMBER, ...) are refused:

    >>> from federation.smartplug import smartplug_stream
    >>> from federation.sqlfront.dialect import SqlError
    >>> t = Translator("SELECT plug_id FROM HOP(TABLE smartplug, DESCRIPTOR(ts), 1, 60)\\n"
    ...                "ORDER BY plug_id", {"smartplug": smartplug_stream()})
    >>> try:
    ...     t.translate(None)
    ... except SqlError as e:
    ...     print(e.line, e.col, e.clause)
    2 1 ORDER BY
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from federation.conjuncts import conjoin
from federation.logical import Node, Relation, Rstream
from federation.logical.frames import add_columns
from federation.sqlfront.dialect import SqlText, selectivity
from federation.sqlfront.from_clause import FromClause
from federation.sqlfront.navigation import navigations
from federation.sqlfront.over import over_partitions
from federation.sqlfront.ranking import (
    distinct_on,
    navigation,
    numbered,
    order_items,
    order_limit,
    qualify,
    qualify_items,
    refuse_window_functions,
    windowed_aggregate,
)
from federation.sqlfront.scalars import before_grouping, filter_by, scalar_values
from federation.sqlfront.select_list import aggregates, select_list
from federation.sqlfront.windows import query_grid
from federation.streams import StreamDecl

#: (argument of a SELECT, clause, why it is refused)
MODIFIERS = (
    ("windows", "WINDOW", "named windows (WINDOW w AS ...) are not supported"),
    ("laterals", "LATERAL", "LATERAL is not supported"),
    ("pivots", "PIVOT", "PIVOT is not supported"),
    ("sample", "TABLESAMPLE", "sampling is not supported"),
    ("cluster", "CLUSTER BY", "CLUSTER BY is not supported"),
    ("distribute", "DISTRIBUTE BY", "DISTRIBUTE BY is not supported"),
    ("sort", "SORT BY", "SORT BY is not supported"),
    ("locks", "FOR UPDATE", "locking clauses are not supported"),
    ("into", "INTO", "SELECT INTO is not supported (use INSERT INTO name SELECT)"),
)


class Translator:
    """The logical plan of one statement of `text` over the declared `streams`."""

    def __init__(self, text: str, streams: Mapping[str, StreamDecl], tables=None) -> None:
        self.text = SqlText(text)
        self.from_clause = FromClause(self.text, streams, self.query, tables)

    def translate(self, name: str | None) -> Rstream:
        """The statement's RSTREAM, named `name`, else by INSERT INTO, else "result"."""
        fail = self.text.fail
        tree = self.text.statement()
        target = None
        if isinstance(tree, exp.Insert):
            table = tree.this
            if isinstance(table, exp.Schema):
                raise fail("INSERT INTO names the result only (no column list)",
                           "INSERT INTO", table)
            target = table.name
            tree = tree.expression
        if not isinstance(tree, (exp.Query, exp.Subquery)):
            raise fail(f"only SELECT queries run continuously, not "
                       f"{tree.key.upper()}", "statement", tree, tree.key)
        self.from_clause.now_grid = query_grid(self.text, tree)
        node = self.query(tree, {})
        return self.text.build("INSERT INTO", tree,
                               lambda: Relation(node).rstream(name or target or "result"))

    def query(self, q: exp.Expression, ctes: dict[str, Node]) -> Node:
        """The plan of a SELECT (top level, in a CTE or in FROM), given the CTEs in scope."""
        fail = self.text.fail
        if isinstance(q, exp.Subquery):
            return self.query(q.this, ctes)
        if isinstance(q, exp.SetOperation):
            return self.set_operation(q, ctes)
        if not isinstance(q, exp.Select):
            raise fail(f"unsupported query form {q.key.upper()}", q.key.upper(), q)
        refuse_modifiers(self.text, q)
        hidden = qualify_items(q)  # QUALIFY's inline window functions: SELECT items
        ordered = order_items(self.text, q)  # ORDER BY's expressions: SELECT items too
        ctes = self.with_ctes(q, ctes)
        scope = self.from_clause.scope(q, ctes)
        where = q.args.get("where")
        # `x [NOT] IN (SELECT ...)` conjuncts: joins with the subquery's relation
        left = self.from_clause.where_left.pop(id(q))
        def translate(sub: exp.Expression, more: dict[str, Node] | None = None) -> Node:
            return self.query(sub, {**ctes, **(more or {})})

        if left:
            filter_by(self.text, conjoin(left), scope, translate, "WHERE", where,
                      selectivity(where))
        if not aggregates(q):  # scalar subqueries and aggregates OVER: joined in
            for e in q.expressions:
                scalar_values(self.text, e, scope, translate, "SELECT")
            units = over_partitions(self.text, q, scope) + navigations(self.text, q, scope)
            scope.node = add_columns(Relation(scope.node), units).node
        else:
            before_grouping(self.text, q, scope, translate)  # FILTER's, GROUP BY's subqueries
            for w in (w for e in q.expressions for w in e.find_all(exp.Window)
                      if windowed_aggregate(w) or navigation(w)):
                raise self.text.fail(f"{w.this.key.upper()} OVER (...) beside GROUP BY or "
                                     "aggregates: aggregate in a subquery, OVER above it",
                                     "OVER", w, "OVER")
        distinct = q.args.get("distinct")
        if aggregates(q):
            self.from_clause.refuse_unbounded(scope.node, "aggregate", "GROUP BY",
                                              q.args.get("group") or q)
        elif distinct:
            self.from_clause.refuse_unbounded(scope.node, "DISTINCT", "DISTINCT", distinct)
        for e in (e for e in q.expressions if numbered(e)):  # Flink's: over every row so far
            self.from_clause.refuse_unbounded(scope.node, "ROW_NUMBER", "OVER", e)
        for clause in ("limit", "offset"):
            if q.args.get(clause) is not None:
                self.from_clause.refuse_unbounded(scope.node, "ORDER BY ... LIMIT",
                                                  clause.upper(), q.args[clause])
        node = select_list(self.text, q, scope, self.from_clause.instant_names, translate)
        node = self.named_as(node, qualify(self.text, q, node, hidden))
        if distinct and distinct.args.get("on") is not None:  # the first row of each
            node = self.named_as(node, distinct_on(self.text, q, node))
            node = self.named_as(node, order_limit(self.text, q, node, picked=True))
        else:
            if distinct:
                node = self.named_as(node, self.text.build(
                    "DISTINCT", distinct, lambda: Relation(node).distinct().node))
            node = self.named_as(node, order_limit(self.text, q, node))  # ORDER BY ... LIMIT n
        if not ordered:
            return node
        kept = [c for c in node.schema if c not in ordered]
        return self.named_as(node, self.text.build(
            "ORDER BY", q.args.get("order"), lambda: Relation(node).project(*kept).node))

    def with_ctes(self, q: exp.Query, ctes: dict[str, Node]) -> dict[str, Node]:
        """The CTEs in scope of `q`: `ctes` and those of its WITH (not RECURSIVE)."""
        ctes = dict(ctes)
        with_ = q.args.get("with_") or q.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise self.text.fail("recursive CTEs are not supported", "WITH RECURSIVE",
                                     with_, "RECURSIVE")
            for cte in with_.expressions:
                ctes[cte.alias] = self.query(cte.this, ctes)
        return ctes

    def named_as(self, node: Node, out: Node) -> Node:
        """`out`, built over `node`, keeps the names `node`'s SELECT gave the instant
        (`window_end AS t`)."""
        names = self.from_clause.instant_names
        if id(node) in names:
            names[id(out)] = names[id(node)]
        return out

    def set_operation(self, q: exp.SetOperation, ctes: dict[str, Node]) -> Node:
        """UNION ALL: both SELECTs' rows at each instant, the right side's columns named
        by position as the left's; UNION: its distinct rows; INTERSECT and EXCEPT [ALL]
        (federation/logical/union.py)."""
        fail = self.text.fail
        kind = type(q).__name__.upper()
        refuse_modifiers(self.text, q)  # ORDER BY, LIMIT ... of the union
        ctes = self.with_ctes(q, ctes)
        left, right = self.query(q.left, ctes), self.query(q.right, ctes)
        lcols, rcols = list(left.schema), list(right.schema)
        if len(lcols) != len(rcols):
            raise fail(f"{kind} of {len(lcols)} and {len(rcols)} columns: both sides need "
                       "the same number", kind, q, kind)
        if rcols != lcols:  # by position, named as the left side's
            right = self.text.build(kind, q, lambda: Relation(right).project(**{
                n: exp.column(c) for n, c in zip(lcols, rcols)}).node)
        all_ = not q.args.get("distinct")
        if isinstance(q, exp.Union):
            out = self.text.build(kind, q, lambda: Relation(left).union_all(right).node)
            if not all_:
                out = self.text.build(kind, q, lambda: Relation(out).distinct().node)
        else:  # INTERSECT, EXCEPT [ALL]
            out = self.text.build(kind, q, lambda: (Relation(left).intersect(right, all_) if isinstance(
                q, exp.Intersect) else Relation(left).except_(right, all_)).node)
        if q.args.get("limit") is not None:
            self.from_clause.refuse_unbounded(out, "ORDER BY ... LIMIT", "LIMIT", q.args["limit"])
        return self.named_as(left, order_limit(self.text, q, out))


def refuse_modifiers(text: SqlText, q: exp.Select | exp.Union) -> None:
    """Refuse what a SELECT (or a UNION of them) over a stream cannot mean: `MODIFIERS`,
    window functions."""
    for arg, clause, message in MODIFIERS:
        v = q.args.get(arg)
        if v:
            raise text.fail(message, clause, v if isinstance(v, exp.Expression) else None,
                            clause)
    if isinstance(q, exp.Select):
        refuse_window_functions(text, q)
