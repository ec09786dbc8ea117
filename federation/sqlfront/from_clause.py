"""The FROM clause: its items and the joins between them, as a `Scope`.

A FROM item is a window table function (windows.py), a CTE, a subquery or a table of the
DuckDB file given as `tables` (a plain name that is no stream or CTE), named by its alias
(else by its stream, CTE or table name). A bare stream is read through CQL's NOW window:
at each instant the rows of that instant's slide, so each row once (a window whose range is
the query's slide: that of its window table functions, else 1 s).
Joins pair rows of one instant, inner or LEFT, RIGHT, FULL OUTER: `JOIN ... USING (k,
...)` or `JOIN ... ON a.k = b.k AND ...`, where `a.window_end = b.window_end` (or
window_start) is implied and dropped, and a condition of an inner join that is no key
equality becomes a selection above the join. An inner join without a key equality (ON
`a.x < b.y`, CROSS JOIN, a comma) pairs every row of each side at the instant; a comma or
CROSS join takes the equalities of its two sides in WHERE as its keys (as if written in
ON). A bare USING column is the value of the side a row has; `a.k` of a side an outer join
may miss is NULL there (a copy of the key, `key_copies`). A NATURAL join is USING the
names both sides have; `[LEFT] SEMI JOIN` and `[LEFT] ANTI JOIN` (Spark's, DuckDB's) keep
the left rows some right row equals on the keys, or none (`x IN`, `NOT EXISTS`), the right
side filtered by the rest of ON. Refused: an outer join without a key equality and an
outer join's ON condition that is no key equality (it would decide which rows match, not
which are output).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from federation.conjuncts import conjoin, split_conjuncts
from federation.errors import QueryValidationError
from federation.instants import Grid
from federation.logical import Node, Relation
from federation.logical.dsl import table
from federation.logical.nodes import Project
from federation.logical.window import TimeWindow, Window
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.outer_on import cross_matched, crossing, one_side_keys
from federation.sqlfront.scalars import filter_by
from federation.sqlfront.scopes import Scope
from federation.sqlfront.semi_join import semi_join
from federation.sqlfront.windows import window_tvf
from federation.streams import StreamDecl

#: translates a query nested in FROM, given the CTEs in scope
Subquery = Callable[[exp.Expression, dict[str, Node]], Node]


class FromClause:
    """Builds the scope of a SELECT's FROM clause; `subquery` translates a nested query."""

    def __init__(self, text: SqlText, streams: Mapping[str, StreamDecl],
                 subquery: Subquery, tables=None) -> None:
        self.text = text
        self.streams = streams
        self.subquery = subquery
        self.tables = tables  # a DuckDB database file: other plain names are its tables
        #: the grid of a bare stream's NOW window and of sessions: the query's (`query_grid`)
        self.now_grid = Grid(1.0)
        #: id of a subquery's plan -> {name -> window column} of its SELECT items that
        #: rename the instant (`window_start AS starttime`), filled by select_list
        self.instant_names: dict[int, dict[str, str]] = {}
        #: the NOW windows built (by identity: a TUMBLE of the slide is equal to one)
        self.now_windows: list[Window] = []
        #: id of a SELECT -> the conjuncts of its WHERE that its joins did not take as keys
        self.where_left: dict[int, list[exp.Expression]] = {}

    def refuse_unbounded(self, node: Node, what: str, clause: str, at: exp.Expression
                         ) -> None:
        """A join or an aggregate over a stream read without a window would hold one
        instant's rows where Flink SQL or Spark keep every row so far: refused."""
        for n in node.walk():
            if any(n is w for w in self.now_windows):
                s = n.stream
                raise self.text.fail(
                    f"{what} over stream {s.name!r} without a window: a stream without a "
                    "window table function is read row by row (CQL's NOW window), and an "
                    f"unbounded {what} over all rows so far is not supported; give it a "
                    f"window: HOP(TABLE {s.name}, DESCRIPTOR({s.ts_column}), slide, size) "
                    f"or TUMBLE(TABLE {s.name}, DESCRIPTOR({s.ts_column}), size)", clause, at)

    def scope(self, q: exp.Select, ctes: dict[str, Node]) -> Scope:
        """The relation `q` reads: its first FROM item joined with the others."""
        frm = q.args.get("from_") or q.args.get("from")
        if frm is None:
            raise self.text.fail("a query reads a stream: FROM HOP(TABLE s, DESCRIPTOR(ts), "
                                 "slide, size)", "FROM", q, "SELECT")
        scope = self.source(frm.this, ctes)
        where = q.args.get("where")
        conjuncts = [] if where is None else split_conjuncts(where.this)
        keyed: list[exp.Expression] = []  # those a comma or CROSS join took as its keys
        for j in q.args.get("joins") or []:
            scope = self.join(scope, j, ctes, conjuncts, keyed)
        self.where_left[id(q)] = [c for c in conjuncts if c not in keyed]
        return scope

    def nested(self, ctes: dict[str, Node]):
        """Translates a subquery of a condition given the CTEs in scope (a second argument:
        more of them, correlated.py's outer rows)."""
        return lambda sub, more=None: self.subquery(sub, {**ctes, **(more or {})})

    def source(self, src: exp.Expression, ctes: dict[str, Node]) -> Scope:
        """One FROM item: a window table function, a CTE or a subquery."""
        fail = self.text.fail
        alias = src.alias if isinstance(src, (exp.Table, exp.Subquery)) else ""
        if isinstance(src, exp.Subquery):
            node = self.subquery(src.this, ctes)
        elif isinstance(src, exp.Table) and isinstance(src.this, exp.Anonymous):
            node = window_tvf(self.text, self.streams, src.this, self.now_grid)
            stream_name = node.stream.name if isinstance(node, Window) else ""
            alias = alias or stream_name
        elif isinstance(src, exp.Table) and isinstance(src.this, exp.Identifier):
            name = src.name
            if src.args.get("db"):
                raise fail(f"qualified names are not supported: {src.sql()}", "FROM", src)
            if name in ctes:
                node = ctes[name]
            elif name in self.streams:  # CQL's NOW window: each row once
                stream, grid = self.streams[name], self.now_grid
                node = self.text.build("FROM", src, lambda: TimeWindow(
                    stream=stream, slide_s=grid.slide_s, range_s=grid.slide_s,
                    offset_s=grid.offset_s))
                self.now_windows.append(node)
            elif self.tables is not None:  # a table of the database file
                try:
                    node = table(name, db=self.tables).node
                except QueryValidationError as e:
                    raise fail(f"{e.message}; streams: {', '.join(sorted(self.streams))}",
                               "FROM", src) from None
            else:
                known = sorted(set(self.streams) | set(ctes))
                raise fail(f"unknown stream or CTE {name!r} (known: "
                           f"{', '.join(known) or 'none'}; a table of a DuckDB file needs "
                           "--tables FILE)", "FROM", src)
            alias = alias or name
        else:
            what = src.key.upper()
            raise fail(f"{what} in FROM is not supported (a window table function, a "
                       "CTE or a subquery)", "FROM", src, what)
        return Scope.of(self.text, node, alias, self.instant_names.get(id(node)))

    def join(self, left: Scope, j: exp.Join, ctes: dict[str, Node],
             where: list[exp.Expression], keyed: list[exp.Expression]) -> Scope:
        """`left` joined with the item of `j` on its key equalities (of a comma or CROSS
        join: those of `where`, the WHERE's conjuncts, added to `keyed`)."""
        fail = self.text.fail
        side, kind = (j.side or "").upper(), (j.kind or "").upper()
        how = {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(side or kind, "inner")
        if kind == "OUTER" and not side:
            raise fail("OUTER JOIN names no side: LEFT, RIGHT or FULL OUTER JOIN",
                       "OUTER JOIN", j, "OUTER")
        method = (j.args.get("method") or "").upper()
        if method not in ("", "NATURAL"):
            raise fail(f"{method} JOIN is not supported", "JOIN", j)
        right = self.source(j.this, ctes)
        for side, other in ((left, right), (right, left)):  # a table alone is static
            if any(n.kind == "window" for n in other.node.walk()):
                self.refuse_unbounded(side.node, "join", "JOIN", j)
        overlap = set(left.aliases) & set(right.aliases)
        if overlap:
            raise fail(f"alias {min(overlap)!r} used twice in FROM", "JOIN", j.this)
        keys: list[tuple[str, str]] = []
        rest: list[exp.Expression] = []
        using = j.args.get("using")
        on = j.args.get("on")
        if method == "NATURAL":  # USING the names both sides have
            names = [c for cols in right.aliases.values() for c in cols]
            using = [exp.to_identifier(c) for c in dict.fromkeys(names)
                     if any(c in cols for cols in left.aliases.values())]
        if kind in ("SEMI", "ANTI"):
            return semi_join(self.text, left, right, j, kind, self.key_pair,
                             self.renamed_apart)
        if using:
            for u in using:
                n = u.name
                lk = left.column_of(None, n, "JOIN USING", u)
                rk = right.column_of(None, n, "JOIN USING", u)
                keys.append((lk, rk))
        elif on is not None:
            for c in split_conjuncts(on):
                pair = self.key_pair(c, left, right)
                if pair == ():  # window_start/window_end equal on both sides: implied
                    continue
                if pair is not None:
                    keys.append(pair)
                else:
                    rest.append(c)
        elif how == "inner":  # a comma or CROSS join: WHERE's equalities of the sides
            for c in where:
                pair = None if c in keyed else self.key_pair(c, left, right)
                if pair is not None:
                    keys += [pair] if pair else []
                    keyed.append(c)
        else:
            raise fail("an outer join needs ON or USING with equalities of keys", "JOIN", j,
                       "JOIN")
        one, cross = crossing(rest, left, right)  # outer: without a key, every pair tried
        flags = [] if how == "inner" else one_side_keys(
            self.text, one, left, right, self.nested(ctes))
        rest = rest if how == "inner" else []  # outer: a condition of one side is a key
        helpers: set[str] = set()  # a condition over both sides: the pairs it matches
        if cross and how != "inner":
            left, right, keys, helpers = cross_matched(
                self.text, left, right, [*keys, *flags], cross, how, on,
                lambda a, b, k: self.renamed_apart(a, b, k, j), self.nested(ctes))
            helpers |= {c for pair in flags for c in pair}
            flags = []
        before = {*left.node.schema, *right.node.schema}
        if how in ("right", "full"):  # the left side may be missing: a.k is NULL then
            left = self.key_copies(left, [lk for lk, _ in keys], right, j)
        if how in ("left", "full"):
            right = self.key_copies(right, [rk for _, rk in keys], left, j)
        if helpers:  # the copies of the helpers' key
            helpers |= {*left.node.schema, *right.node.schema} - before
        right = self.renamed_apart(left, right, {rk for _, rk in [*keys, *flags]}, j)
        node = self.text.build("JOIN", j, lambda: Relation(left.node).join(
            right.node, on=[*keys, *flags], how=how).node)
        if flags or helpers:  # their work done (with their key copies)
            done = {f for f, _ in flags} | helpers
            node = Relation(node).project(*[c for c in node.schema if c not in done]).node
        rkey = {rk: lk for lk, rk in keys}
        aliases = dict(left.aliases)
        for a, cols in right.aliases.items():
            aliases[a] = {c: rkey.get(n, n) for c, n in cols.items()}
        scope = Scope(self.text, node, aliases, {**left.instants, **right.instants},
                      {**left.using, **right.using,
                       **({u.name: lk for u, (lk, _) in zip(using, keys)} if using else {})})
        if rest:  # an inner join's: WHERE's conditions, subqueries too, right at the join
            filter_by(self.text, conjoin(rest), scope, self.nested(ctes),
                      "JOIN ON", on)
        return scope

    def key_copies(self, side: Scope, keys: list[str], other: Scope, at: exp.Expression
                   ) -> Scope:
        """`side` of an outer join that may be missing from an output row: its key
        columns copied (`<key>_<alias>`) and its aliases' names of them moved to the
        copies, NULL where the side is missing (the join's key column is the value of the
        side a row has, as USING's)."""
        taken = {c.lower() for c in (*side.node.schema, *other.node.schema)}
        alias = next(iter(side.aliases), "t")
        copies: dict[str, str] = {}
        for k in keys:
            n, i = f"{k}_{alias}", 2
            while n.lower() in taken:
                n, i = f"{k}_{alias}{i}", i + 1
            taken.add(n.lower())
            copies[k] = n
        outputs = tuple((c, exp.column(c)) for c in side.node.schema)
        outputs += tuple((n, exp.column(k)) for k, n in copies.items())
        child = side.node
        node = self.text.build("JOIN", at, lambda: Project(child, outputs))
        aliases = {a: {c: copies.get(n, n) for c, n in cols.items()}
                   for a, cols in side.aliases.items()}
        using = {u: copies.get(n, n) for u, n in side.using.items()}
        return Scope(self.text, node, aliases, side.instants, using)

    def renamed_apart(self, left: Scope, right: Scope, rkeys: set[str],
                      at: exp.Expression) -> Scope:
        """`right` with its columns that the left side also has (in any letter case; its
        join keys aside) renamed `<column>_<alias>`, so that both stay reachable by their
        qualified names (`b.dateTime`, `o.dateTime`); a bare one is then ambiguous."""
        taken = {c.lower() for c in (*left.node.schema, *right.node.schema)}
        lower = {c.lower() for c in left.node.schema}
        alias = next(iter(right.aliases), "r")
        rename: dict[str, str] = {}
        for c in right.node.schema:
            if c in rkeys or c.lower() not in lower:
                continue
            n, i = f"{c}_{alias}", 2
            while n.lower() in taken:
                n, i = f"{c}_{alias}{i}", i + 1
            taken.add(n.lower())
            rename[c] = n
        if not rename:
            return right
        outputs = tuple((rename.get(c, c), exp.column(c)) for c in right.node.schema)
        child = right.node
        node = self.text.build("JOIN", at, lambda: Project(child, outputs))
        aliases = {a: {c: rename.get(n, n) for c, n in cols.items()}
                   for a, cols in right.aliases.items()}
        return Scope(self.text, node, aliases, right.instants, right.using)

    def key_pair(self, c: exp.Expression, left: Scope, right: Scope
                 ) -> tuple[str, str] | tuple[()] | None:
        """(left column, right column) of an equality between the two sides; () for the
        window columns on both sides; None for another condition."""
        if not (isinstance(c, exp.EQ) and isinstance(c.left, exp.Column)
                and isinstance(c.right, exp.Column)):
            return None
        a, b = c.left, c.right
        ia = left.instant_of(a) or right.instant_of(a)
        ib = left.instant_of(b) or right.instant_of(b)
        if ia and ib:
            if ia != ib:
                raise self.text.fail(f"{a.sql()} = {b.sql()}: window instants join only "
                                     "with the same column of the other side", "JOIN ON", c)
            grids = {Grid(n.slide_s, n.offset_s) for side in (left, right)
                     for n in side.node.walk() if n.kind == "window"}
            if len(grids) > 1:  # not implied: their instants differ
                told = ", ".join(f"every {g.slide_s:g} s" + (f" from {g.offset_s:g} s"
                                                            if g.offset_s else "")
                                 for g in sorted(grids, key=lambda g: (g.slide_s, g.offset_s)))
                raise self.text.fail(
                    f"{a.sql()} = {b.sql()} over windows of different instants ({told}): "
                    "at each of the query's instants each window holds its rows of its own "
                    "last instant; drop the condition, or give the windows one slide",
                    "JOIN ON", c)
            return ()
        sides = []
        for col in (a, b):
            inl = left.has_column(col)
            inr = right.has_column(col)
            sides.append("l" if inl and not inr else "r" if inr and not inl else None)
        if sides == ["l", "r"]:
            return (left.column_of(a.table, a.name, "JOIN ON", a),
                    right.column_of(b.table, b.name, "JOIN ON", b))
        if sides == ["r", "l"]:
            return (left.column_of(b.table, b.name, "JOIN ON", b),
                    right.column_of(a.table, a.name, "JOIN ON", a))
        return None
