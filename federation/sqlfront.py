"""Streaming SQL in: a SELECT over window table functions becomes the DSL's logical plan.

`sql(text, streams)` parses with sqlglot (DuckDB's dialect, extended only so that a
`TABLE name` argument of a table function is read as a table reference) and builds the
same `federation.logical` nodes the Python DSL builds, so the optimizer, explain and every
placement treat both alike.

What a query may use (docs/sql.md has the full reference):

* windows at the leaves, Flink-style: `HOP(TABLE s, DESCRIPTOR(ts), slide, size)` and
  `TUMBLE(TABLE s, DESCRIPTOR(ts), size)`, sizes as `INTERVAL '5' MINUTE`,
  `INTERVAL '5 minutes'` or seconds; the window's instants are implicit: `window_start`
  and `window_end` may appear in GROUP BY, in a join's ON and as bare SELECT items, and are
  dropped there (every result row carries its slide instant as `tau`); tuple windows as
  `ROWS_WINDOW(TABLE s, DESCRIPTOR(ts), slide, n [, DESCRIPTOR(k, ...)])` (this project's
  spelling: Flink has no row-count window table function);
* WHERE, projections with expressions, GROUP BY columns with COUNT/SUM/AVG/MIN/MAX, HAVING,
  inner equi-joins (`JOIN ... ON a.k = b.k AND ...` or `USING (k)`; further conditions in
  ON become a selection above the join), subqueries in FROM and CTEs (WITH);
* the result is RSTREAM (the whole result relation at every slide instant), named by
  `INSERT INTO name SELECT ...` or by the `name` argument;
* a selectivity hint for the optimizer in a comment of a WHERE or HAVING condition:
  `WHERE value > 0.9 * maxv /* selectivity 0.1 */`.

Everything else is refused with a `SqlError` naming the clause, the line and the column.

Example:
    >>> q = sql("SELECT plug_id, MAX(value) AS peak "
    ...         "FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE)"
    ...         " GROUP BY window_start, window_end, plug_id")
    >>> [n.kind for n in q.walk()]
    ['window', 'aggregate', 'rstream']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError
from sqlglot.tokens import TokenType

from federation.errors import FedqError, QueryValidationError
from federation.expressions import AggCall, split_conjuncts
from federation.logical import Node, Rstream
from federation.logical.dsl import parse_duration, window
from federation.logical.nodes import Project
from federation.logical.window import Window
from federation.streams import StreamDecl

#: implicit columns of a window table function (Flink's names)
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
_AGGS: dict[type, str] = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg",
                          exp.Min: "min", exp.Max: "max"}
#: expression forms every engine evaluates alike (Spark, DuckDB, the reference evaluator)
_SCALARS = (exp.Column, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Neg, exp.Not,
            exp.Binary, exp.Predicate, exp.Connector, exp.Between, exp.In, exp.Is,
            exp.Abs, exp.Round, exp.Greatest, exp.Least, exp.Cast, exp.Case, exp.If,
            exp.Coalesce, exp.Identifier, exp.DataType, exp.Star, exp.Var)
_SELECTIVITY = re.compile(r"selectivity\s*[=:(]?\s*([0-9]*\.?[0-9]+)", re.IGNORECASE)
_UNITS = {"millisecond": "ms", "milliseconds": "ms"}


class SqlError(FedqError, ValueError):
    """A SQL query the engine cannot run; names the clause and the position.

    Example:
        >>> str(SqlError("ORDER BY on a stream is not supported", "ORDER BY", 2, 5))
        'SQL line 2, col 5 (ORDER BY): ORDER BY on a stream is not supported'
    """

    def __init__(self, message: str, clause: str, line: int | None = None,
                 col: int | None = None) -> None:
        self.message, self.clause, self.line, self.col = message, clause, line, col
        where = f"line {line}, col {col}" if line is not None else "line ?"
        super().__init__(f"SQL {where} ({clause}): {message}")


class _FedqSql(DuckDB):
    """DuckDB's dialect, reading `TABLE name` inside a function call as a table argument
    (the window table functions' first argument) instead of `TABLE name` as a query."""

    class Parser(DuckDB.Parser):
        def _parse_lambda(self, alias: bool = False) -> exp.Expression | None:
            if (self._curr is not None and self._curr.token_type == TokenType.TABLE
                    and self._next is not None
                    and self._next.token_type in (TokenType.VAR, TokenType.IDENTIFIER)):
                self._advance()
                return self.expression(exp.Table(this=self._parse_id_var()))
            return super()._parse_lambda(alias)


def sql(text: str, streams: Mapping[str, StreamDecl] | Sequence[StreamDecl] | None = None,
        name: str | None = None) -> Rstream:
    """The logical plan of a streaming SELECT (see the module's docstring).

    `streams` maps names to stream declarations (default: the smart-plug stream as
    `smartplug`); `name` names the result (default: the INSERT INTO target, or "result").
    """
    if streams is None:
        from federation.smartplug import smartplug_stream

        streams = {"smartplug": smartplug_stream()}
    elif not isinstance(streams, Mapping):
        streams = {s.name: s for s in streams}
    return _Translator(text, dict(streams)).translate(name)


_SIGNATURES = {
    "HOP": "HOP(TABLE s, DESCRIPTOR(ts), slide, size)",
    "TUMBLE": "TUMBLE(TABLE s, DESCRIPTOR(ts), size)",
    "ROWS_WINDOW": "ROWS_WINDOW(TABLE s, DESCRIPTOR(ts), slide, n [, DESCRIPTOR(keys)])",
}


@dataclass
class _Scope:
    """The relation a FROM clause builds: its node and how names reach its columns."""

    node: Node
    #: alias -> {column as the alias sees it -> column of node}
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)


class _Translator:
    def __init__(self, text: str, streams: dict[str, StreamDecl]) -> None:
        self.text = text
        self.streams = streams
        self._fresh = 0

    # -- positions and errors ------------------------------------------------------------

    def _pos(self, node: exp.Expression | None, keyword: str | None = None
             ) -> tuple[int | None, int | None]:
        """Line and column (1-based) of `node`'s first token, or of the nearest `keyword`
        before it (the clause that holds it)."""
        at = None
        if node is not None:
            starts = [n.meta["start"] for n in node.walk()
                      if getattr(n, "_meta", None) and "start" in n.meta]
            at = min(starts) if starts else None
        if keyword:
            pat = re.compile(r"\b" + r"\s+".join(map(re.escape, keyword.split())) + r"\b",
                             re.IGNORECASE)
            hits = [m.start() for m in pat.finditer(self.text)]
            before_node = [h for h in hits if at is None or h <= at]
            if before_node:  # the clause that holds the node
                at = before_node[-1] if at is not None else before_node[0]
            elif hits:  # a clause after it (UNION after the first SELECT)
                at = hits[0]
        if at is None:
            return None, None
        before = self.text[:at]
        return before.count("\n") + 1, at - (before.rfind("\n") + 1) + 1

    def fail(self, message: str, clause: str, node: exp.Expression | None = None,
             keyword: str | None = None) -> SqlError:
        line, col = self._pos(node, keyword)
        if line is None:
            line, col = self._pos(None, clause)
        return SqlError(message, clause, line, col)

    def build(self, clause: str, node: exp.Expression | None, make):
        """Build a DSL node; its validation errors become SqlErrors at `node`."""
        try:
            return make()
        except QueryValidationError as e:
            raise self.fail(f"{e.field}: {e.message}", clause, node) from None

    # -- statements ----------------------------------------------------------------------

    def translate(self, name: str | None) -> Rstream:
        try:
            trees = [t for t in sqlglot.parse(self.text, dialect=_FedqSql) if t is not None]
        except ParseError as e:
            err = (e.errors or [{}])[0]
            raise SqlError(f"cannot parse: {err.get('description') or e}", "syntax",
                           err.get("line"), err.get("col")) from None
        if not trees:
            raise SqlError("no statement", "statement")
        if len(trees) > 1:
            raise self.fail("one statement per query (found "
                            f"{len(trees)})", "statement", trees[1])
        tree = trees[0]
        target = None
        if isinstance(tree, exp.Insert):
            table = tree.this
            if isinstance(table, exp.Schema):
                raise self.fail("INSERT INTO names the result only (no column list)",
                                "INSERT INTO", table)
            target = table.name
            tree = tree.expression
        if not isinstance(tree, (exp.Query, exp.Subquery)):
            raise self.fail(f"only SELECT queries run continuously, not "
                            f"{tree.key.upper()}", "statement", tree, tree.key)
        node = self.query(tree, {})
        return self.build("INSERT INTO", tree, lambda: node.rstream(name or target or "result"))

    def query(self, q: exp.Expression, ctes: dict[str, Node]) -> Node:
        if isinstance(q, exp.Subquery):
            return self.query(q.this, ctes)
        if isinstance(q, exp.SetOperation):
            kind = type(q).__name__.upper()
            raise self.fail(f"{kind} of streams is not supported (one SELECT per query)",
                            kind, q, kind)
        if not isinstance(q, exp.Select):
            raise self.fail(f"unsupported query form {q.key.upper()}", q.key.upper(), q)
        self.refuse_modifiers(q)
        ctes = dict(ctes)
        with_ = q.args.get("with_") or q.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise self.fail("recursive CTEs are not supported", "WITH RECURSIVE", with_,
                                "RECURSIVE")
            for cte in with_.expressions:
                ctes[cte.alias] = self.query(cte.this, ctes)
        scope = self.from_clause(q, ctes)
        where = q.args.get("where")
        if where is not None:
            self.check_scalar(where.this, "WHERE")
            pred, sel = self.resolve(where.this, scope, "WHERE"), _selectivity(where)
            scope.node = self.build("WHERE", where,
                                    lambda: scope.node.filter(pred, selectivity=sel))
        return self.select_list(q, scope)

    def refuse_modifiers(self, q: exp.Select) -> None:
        checks = (
            ("distinct", "DISTINCT", "DISTINCT is not supported (group by the columns instead)"),
            ("order", "ORDER BY", ("ORDER BY on a stream is not supported: each slide "
                                   "instant's result is a relation; sort the output file "
                                   "instead")),
            ("limit", "LIMIT", "LIMIT on a stream is not supported"),
            ("offset", "OFFSET", "OFFSET on a stream is not supported"),
            ("qualify", "QUALIFY", "QUALIFY is not supported"),
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
        for arg, clause, message in checks:
            v = q.args.get(arg)
            if v:
                raise self.fail(message, clause, v if isinstance(v, exp.Expression) else None,
                                clause)
        for e in q.expressions:
            w = e.find(exp.Window)
            if w is not None:
                raise self.fail("window functions (OVER ...) are not supported; use a window "
                                "table function and GROUP BY", "OVER", w, "OVER")

    # -- FROM ----------------------------------------------------------------------------

    def from_clause(self, q: exp.Select, ctes: dict[str, Node]) -> _Scope:
        frm = q.args.get("from_") or q.args.get("from")
        if frm is None:
            raise self.fail("a query reads a stream: FROM HOP(TABLE s, DESCRIPTOR(ts), "
                            "slide, size)", "FROM", q, "SELECT")
        scope = self.source(frm.this, ctes)
        for j in q.args.get("joins") or []:
            scope = self.join(scope, j, ctes)
        return scope

    def source(self, src: exp.Expression, ctes: dict[str, Node]) -> _Scope:
        alias = src.alias if isinstance(src, (exp.Table, exp.Subquery)) else ""
        if isinstance(src, exp.Subquery):
            node = self.query(src.this, ctes)
        elif isinstance(src, exp.Table) and isinstance(src.this, exp.Anonymous):
            node = self.window_tvf(src.this)
            stream_name = node.stream.name if isinstance(node, Window) else ""
            alias = alias or stream_name
        elif isinstance(src, exp.Table) and isinstance(src.this, exp.Identifier):
            name = src.name
            if src.args.get("db"):
                raise self.fail(f"qualified names are not supported: {src.sql()}", "FROM", src)
            if name in ctes:
                node = ctes[name]
            elif name in self.streams:
                raise self.fail(
                    f"stream {name!r} needs a window: FROM HOP(TABLE {name}, DESCRIPTOR("
                    f"{self.streams[name].ts_column}), INTERVAL '1' SECOND, INTERVAL '5' "
                    f"MINUTE) or TUMBLE(TABLE {name}, DESCRIPTOR(...), size)", "FROM", src)
            else:
                known = sorted(set(self.streams) | set(ctes))
                raise self.fail(f"unknown stream or CTE {name!r} (known: "
                                f"{', '.join(known) or 'none'})", "FROM", src)
            alias = alias or name
        else:
            what = src.key.upper()
            raise self.fail(f"{what} in FROM is not supported (a window table function, a "
                            "CTE or a subquery)", "FROM", src, what)
        return _Scope(node, {alias: {c: c for c in node.schema}})

    def window_tvf(self, call: exp.Anonymous) -> Window:
        fn = call.name.upper()
        args = list(call.expressions)
        if fn == "TABLE" and len(args) == 1 and isinstance(args[0], exp.Anonymous):
            return self.window_tvf(args[0])
        if fn in ("CUMULATE", "SESSION"):
            raise self.fail(f"{fn} windows are not supported (HOP, TUMBLE or ROWS_WINDOW)",
                            fn, call)
        if fn not in _SIGNATURES:
            raise self.fail(f"unknown table function {call.name!r} (HOP, TUMBLE or "
                            "ROWS_WINDOW)", "FROM", call)
        want = {"HOP": (4,), "TUMBLE": (3,), "ROWS_WINDOW": (4, 5)}[fn]
        if len(args) not in want:
            extra = (" (a window offset is not supported)"
                     if fn != "ROWS_WINDOW" and len(args) == want[0] + 1 else "")
            n = " or ".join(map(str, want))
            raise self.fail(f"{fn} takes {n} arguments, {_SIGNATURES[fn]}; got {len(args)}"
                            f"{extra}", fn, call)
        table, desc = args[0], args[1]
        if not isinstance(table, exp.Table):
            raise self.fail(f"the first argument of {fn} is TABLE <stream>", fn, call)
        sname = table.name
        if sname not in self.streams:
            raise self.fail(f"unknown stream {sname!r} (known: "
                            f"{', '.join(sorted(self.streams)) or 'none'})", fn, table)
        stream = self.streams[sname]
        if not (isinstance(desc, exp.Anonymous) and desc.name.upper() == "DESCRIPTOR"
                and len(desc.expressions) == 1 and isinstance(desc.expressions[0], exp.Column)):
            raise self.fail(f"the second argument of {fn} is DESCRIPTOR(<event-time column>)",
                            fn, desc)
        ts = desc.expressions[0].name
        if ts != stream.ts_column:
            raise self.fail(f"stream {sname!r} has event time {stream.ts_column!r}, not "
                            f"{ts!r}", fn, desc)
        if fn == "ROWS_WINDOW":
            return self.rows_window(stream, call, args)
        sizes = [self.duration(a, fn) for a in args[2:]]
        slide, size = (sizes[0], sizes[1]) if fn == "HOP" else (sizes[0], sizes[0])
        return self.build(fn, call, lambda: Window(stream=stream, slide_s=slide, range_s=size))

    def rows_window(self, stream, call: exp.Anonymous, args: list) -> Window:
        """ROWS_WINDOW(TABLE s, DESCRIPTOR(ts), slide, n [, DESCRIPTOR(k, ...)]): at each
        instant the last n rows (per partition when keys are given), the DSL's
        `window(s, rows=n, slide=..., partition_by=...)`."""
        fn = "ROWS_WINDOW"
        slide = self.duration(args[2], fn)
        n = args[3]
        if not (isinstance(n, exp.Literal) and not n.is_string and n.name.isdigit()
                and int(n.name) >= 1):
            raise self.fail(f"the row count of ROWS_WINDOW is a whole number >= 1, not "
                            f"{n.sql()!r}", fn, n)
        keys: tuple[str, ...] = ()
        if len(args) == 5:
            part = args[4]
            if not (isinstance(part, exp.Anonymous) and part.name.upper() == "DESCRIPTOR"
                    and part.expressions
                    and all(isinstance(c, exp.Column) for c in part.expressions)):
                raise self.fail("the fifth argument of ROWS_WINDOW is DESCRIPTOR(<partition "
                                "columns>)", fn, part)
            keys = tuple(c.name for c in part.expressions)
        return self.build(fn, call, lambda: window(stream, rows=int(n.name), slide=slide,
                                                   partition_by=keys))

    def duration(self, a: exp.Expression, clause: str) -> float:
        if isinstance(a, exp.Interval):
            value = a.this.name if isinstance(a.this, exp.Literal) else a.this.sql()
            unit = a.args.get("unit")
            unit_s = unit.name.lower() if unit is not None else ""
            text = f"{value} {_UNITS.get(unit_s, unit_s)}".strip()
        elif isinstance(a, exp.Literal):
            text = a.name
        else:
            raise self.fail(f"a window size is an INTERVAL or a number of seconds, not "
                            f"{a.sql()!r}", clause, a)
        try:
            return parse_duration(text, clause.lower(), "size")
        except QueryValidationError as e:
            raise self.fail(e.message, clause, a) from None

    def join(self, left: _Scope, j: exp.Join, ctes: dict[str, Node]) -> _Scope:
        side, kind = (j.side or "").upper(), (j.kind or "").upper()
        if side or kind in ("OUTER", "FULL"):
            what = f"{side} {kind}".strip() or kind
            raise self.fail(f"{what} JOIN is not supported (inner equi-joins only)",
                            f"{what} JOIN", j, f"{side or kind} ")
        if kind in ("CROSS", "SEMI", "ANTI", "NATURAL"):
            raise self.fail(f"{kind} JOIN is not supported (inner equi-joins only)",
                            f"{kind} JOIN", j, kind)
        if j.args.get("method"):
            raise self.fail(f"{j.args['method']} JOIN is not supported", "JOIN", j)
        right = self.source(j.this, ctes)
        overlap = set(left.aliases) & set(right.aliases)
        if overlap:
            raise self.fail(f"alias {min(overlap)!r} used twice in FROM", "JOIN", j.this)
        keys: list[tuple[str, str]] = []
        rest: list[exp.Expression] = []
        using = j.args.get("using")
        on = j.args.get("on")
        if using:
            for u in using:
                n = u.name
                lk = self.column_of(left, None, n, "JOIN USING", u)
                rk = self.column_of(right, None, n, "JOIN USING", u)
                keys.append((lk, rk))
        elif on is not None:
            for c in split_conjuncts(on):
                pair = self.key_pair(c, left, right)
                if pair == ():
                    continue  # window_start/window_end equal on both sides: implied
                if pair is not None:
                    keys.append(pair)
                else:
                    rest.append(c)
        else:
            raise self.fail("a join needs ON or USING with equalities of keys (a comma or "
                            "CROSS join is not supported)", "JOIN", j, "JOIN")
        if not keys:
            raise self.fail("non-equi join: ON needs at least one equality between a column "
                            "of each side", "JOIN ON", on if on is not None else j, "ON")
        node = self.build("JOIN", j, lambda: left.node.join(right.node, on=keys))
        rkey = {rk: lk for lk, rk in keys}
        aliases = dict(left.aliases)
        for a, cols in right.aliases.items():
            aliases[a] = {c: rkey.get(n, n) for c, n in cols.items()}
        scope = _Scope(node, aliases)
        if rest:
            cond = rest[0] if len(rest) == 1 else exp.and_(*rest)
            self.check_scalar(cond, "JOIN ON")
            pred = self.resolve(cond, scope, "JOIN ON")
            scope.node = self.build("JOIN ON", on, lambda: node.filter(pred))
        return scope

    def key_pair(self, c: exp.Expression, left: _Scope, right: _Scope
                 ) -> tuple[str, str] | tuple[()] | None:
        """(left column, right column) of an equality between the two sides; () for the
        window columns on both sides; None for another condition."""
        if not (isinstance(c, exp.EQ) and isinstance(c.left, exp.Column)
                and isinstance(c.right, exp.Column)):
            return None
        a, b = c.left, c.right
        if a.name in WINDOW_COLUMNS and b.name in WINDOW_COLUMNS:
            if a.name != b.name:
                raise self.fail(f"{a.sql()} = {b.sql()}: window instants join only with "
                                "the same column of the other side", "JOIN ON", c)
            return ()
        sides = []
        for col in (a, b):
            inl = self.has_column(left, col)
            inr = self.has_column(right, col)
            sides.append("l" if inl and not inr else "r" if inr and not inl else None)
        if sides == ["l", "r"]:
            return (self.column_of(left, a.table, a.name, "JOIN ON", a),
                    self.column_of(right, b.table, b.name, "JOIN ON", b))
        if sides == ["r", "l"]:
            return (self.column_of(left, b.table, b.name, "JOIN ON", b),
                    self.column_of(right, a.table, a.name, "JOIN ON", a))
        return None

    # -- columns -------------------------------------------------------------------------

    def has_column(self, scope: _Scope, col: exp.Column) -> bool:
        if col.table:
            return col.name in scope.aliases.get(col.table, {})
        return any(col.name in cols for cols in scope.aliases.values())

    def column_of(self, scope: _Scope, table: str | None, name: str, clause: str,
                  node: exp.Expression) -> str:
        if table:
            if table not in scope.aliases:
                raise self.fail(f"unknown table or alias {table!r} (in scope: "
                                f"{', '.join(sorted(scope.aliases)) or 'none'})", clause, node)
            cols = scope.aliases[table]
            if name not in cols:
                raise self.fail(f"unknown column {table}.{name} (available: "
                                f"{', '.join(cols)})", clause, node)
            return cols[name]
        hits = {cols[name] for cols in scope.aliases.values() if name in cols}
        if not hits and name in scope.node.schema:
            return name
        if not hits:
            if name in WINDOW_COLUMNS:
                raise self.fail(f"{name} is the window's instant: only in GROUP BY, in a "
                                "join's ON and as a bare SELECT item", clause, node)
            raise self.fail(f"unknown column {name!r} (available: "
                            f"{', '.join(scope.node.schema)})", clause, node)
        if len(hits) > 1:
            raise self.fail(f"ambiguous column {name!r}: qualify it with its table",
                            clause, node)
        return hits.pop()

    def resolve(self, e: exp.Expression, scope: _Scope, clause: str) -> exp.Expression:
        """A copy of `e` over the columns of scope.node (qualifiers resolved, comments gone)."""
        def fix(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column):
                return exp.column(self.column_of(scope, n.table or None, n.name, clause, n))
            return n

        out = e.copy().transform(fix)
        for n in out.walk():
            n.comments = None
        return out

    def check_scalar(self, e: exp.Expression, clause: str, aggs_ok: bool = False) -> None:
        for n in e.walk():
            if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)):
                raise self.fail(f"subqueries in {clause} are not supported (join instead)",
                                clause, n, "SELECT")
            if isinstance(n, exp.AggFunc):
                if not aggs_ok:
                    raise self.fail(f"aggregate {n.sql()} in {clause} (aggregates belong in "
                                    "SELECT or HAVING with GROUP BY)", clause, n)
                continue
            if isinstance(n, exp.Anonymous):
                raise self.fail(f"unknown function {n.name}()", clause, n)
            if isinstance(n, exp.Func) and not isinstance(n, _SCALARS):
                raise self.fail(f"function {n.sql_name()}() is not supported in continuous "
                                "queries", clause, n)
            if not isinstance(n, _SCALARS) and not isinstance(n, (exp.AggFunc, exp.Tuple,
                                                                  exp.Interval)):
                raise self.fail(f"{n.key.upper()} is not supported in {clause}", clause, n)

    # -- SELECT list, GROUP BY, HAVING ---------------------------------------------------

    def select_list(self, q: exp.Select, scope: _Scope) -> Node:
        items = list(q.expressions)
        group = q.args.get("group")
        having = q.args.get("having")
        has_agg = any(e.find(exp.AggFunc) is not None for e in items)
        if group is not None or has_agg or having is not None:
            return self.aggregate(q, scope, items, group, having)
        if len(items) == 1 and isinstance(items[0], exp.Star):
            return scope.node
        columns: list[str] = []  # plain columns, kept by name
        outputs: dict[str, exp.Expression] = {}
        order: list[str] = []  # the SELECT's order
        for e in items:
            inner = e.this if isinstance(e, exp.Alias) else e
            if isinstance(inner, exp.Star) or (isinstance(inner, exp.Column)
                                               and isinstance(inner.this, exp.Star)):
                raise self.fail("* together with other SELECT items is not supported",
                                "SELECT", e, "*")
            if isinstance(inner, exp.Column) and inner.name in WINDOW_COLUMNS \
                    and not self.has_column(scope, inner):
                continue  # the instant: every result row carries it as tau
            self.check_scalar(inner, "SELECT")
            out = self.resolve(inner, scope, "SELECT")
            alias = e.alias if isinstance(e, exp.Alias) else None
            if isinstance(out, exp.Column) and alias in (None, out.name):
                columns.append(out.name)
                order.append(out.name)
                continue
            if alias is None:
                raise self.fail(f"name the expression {inner.sql()!r}: {inner.sql()} AS name",
                                "SELECT", e)
            outputs[alias] = out
            order.append(alias)
        if not outputs and columns == list(scope.node.schema):
            return scope.node  # the identity
        items = tuple((n, outputs[n] if n in outputs else exp.column(n)) for n in order)
        node = scope.node
        return self.build("SELECT", q, lambda: Project(node, items))

    def aggregate(self, q: exp.Select, scope: _Scope, items: list[exp.Expression],
                  group: exp.Group | None, having: exp.Having | None) -> Node:
        keys: list[str] = []
        for g in (group.expressions if group is not None else []):
            if isinstance(g, exp.Column) and g.name in WINDOW_COLUMNS \
                    and not self.has_column(scope, g):
                continue
            if not isinstance(g, exp.Column):
                raise self.fail(f"GROUP BY {g.sql()}: group by columns (compute the "
                                "expression in a subquery first)", "GROUP BY", g, "GROUP BY")
            k = self.column_of(scope, g.table or None, g.name, "GROUP BY", g)
            if k not in keys:
                keys.append(k)
        for arg in ("rollup", "cube", "grouping_sets"):
            if group is not None and group.args.get(arg):
                raise self.fail(f"GROUP BY {arg.upper().replace('_', ' ')} is not supported",
                                "GROUP BY", group, "GROUP BY")
        aggs: dict[str, AggCall] = {}
        seen: dict[str, str] = {}  # the agg's SQL -> its output name

        def agg_name(call: exp.AggFunc, wanted: str | None) -> str:
            text = call.sql(dialect="duckdb")
            if text in seen and wanted in (None, seen[text]):
                return seen[text]
            func = _AGGS.get(type(call))
            if func is None:
                raise self.fail(f"aggregate {call.sql_name()}() is not supported "
                                "(COUNT, SUM, AVG, MIN, MAX)", "SELECT", call)
            inner = call.this
            if isinstance(inner, exp.Distinct):
                raise self.fail(f"{func.upper()}(DISTINCT ...) is not supported", "SELECT",
                                call, "DISTINCT")
            if inner is not None and inner.find(exp.AggFunc) is not None:
                raise self.fail(f"nested aggregate {call.sql()}", "SELECT", call)
            if isinstance(inner, exp.Star) or inner is None:
                if func != "count":
                    raise self.fail(f"{func.upper()}(*) is not an aggregate", "SELECT", call)
                arg = None
            else:
                self.check_scalar(inner, "SELECT")
                arg = self.resolve(inner, scope, "SELECT")
            name = wanted
            if name is None:
                if arg is None:
                    name = "count"
                elif isinstance(arg, exp.Column):
                    name = f"{func}_{arg.name}"
                else:
                    name = f"_agg{len(aggs) + 1}"
            if name in aggs or name in keys:
                raise self.fail(f"output column {name!r} named twice", "SELECT", call)
            aggs[name] = AggCall(func, arg)
            seen[text] = name
            return name

        # each SELECT item: a key, an aggregate, or an expression over them
        plain: list[tuple[str, str]] = []  # (output name, agg or key column)
        computed: dict[str, exp.Expression] = {}
        order: list[str] = []
        for e in items:
            inner = e.this if isinstance(e, exp.Alias) else e
            alias = e.alias if isinstance(e, exp.Alias) else None
            if isinstance(inner, exp.Star):
                raise self.fail("SELECT * with GROUP BY: list the keys and aggregates",
                                "SELECT", e, "*")
            if isinstance(inner, exp.Column) and inner.name in WINDOW_COLUMNS \
                    and not self.has_column(scope, inner):
                continue
            if isinstance(inner, exp.AggFunc):
                n = agg_name(inner, alias)
                plain.append((n, n))
                order.append(n)
                continue
            if isinstance(inner, exp.Column):
                k = self.column_of(scope, inner.table or None, inner.name, "SELECT", inner)
                if k not in keys:
                    raise self.fail(f"column {inner.sql()} is neither grouped nor aggregated",
                                    "SELECT", inner)
                plain.append((alias or k, k))
                order.append(alias or k)
                continue
            if alias is None:
                raise self.fail(f"name the expression {inner.sql()!r}: {inner.sql()} AS name",
                                "SELECT", e)
            self.check_scalar(inner, "SELECT", aggs_ok=True)
            computed[alias] = self.over_aggregates(inner, scope, keys, agg_name)
            order.append(alias)
        pred = None
        if having is not None:
            self.check_scalar(having.this, "HAVING", aggs_ok=True)
            pred = self.over_aggregates(having.this, scope, keys, agg_name)
            sel = _selectivity(having)
        if not aggs:
            raise self.fail("GROUP BY without an aggregate (add COUNT(*), or use DISTINCT-"
                            "free projection)", "GROUP BY", group, "GROUP BY")
        node = self.build("GROUP BY", group or q,
                          lambda: scope.node.aggregate(by=keys, **aggs))
        if pred is not None:
            node = self.build("HAVING", having, lambda: node.filter(pred, selectivity=sel))
        schema = list(node.schema)
        if not computed and [n for n, _ in plain] == schema \
                and all(n == src for n, src in plain):
            return node
        source = dict(plain)
        items = tuple((n, computed[n] if n in computed else exp.column(source[n]))
                      for n in order)
        return self.build("SELECT", q, lambda: Project(node, items))

    def over_aggregates(self, e: exp.Expression, scope: _Scope, keys: list[str],
                        agg_name) -> exp.Expression:
        """`e` over the aggregate's output: aggregates become their output columns, group
        keys stay, any other column is an error."""
        def fix(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.AggFunc):
                return exp.column(agg_name(n, None))
            if isinstance(n, exp.Column):
                k = self.column_of(scope, n.table or None, n.name, "SELECT", n)
                if k not in keys:
                    raise self.fail(f"column {n.sql()} is neither grouped nor aggregated",
                                    "SELECT", n)
                return exp.column(k)
            return n

        out = e.copy().transform(fix)
        for n in out.walk():
            n.comments = None
        return out


def _selectivity(clause: exp.Expression) -> float | None:
    for n in clause.walk():
        for c in n.comments or []:
            m = _SELECTIVITY.search(c)
            if m:
                return float(m.group(1))
    return None
