"""The fuzzer's builder: draws one query, node by node, with its DSL source and a hint
per column (what the generator may do with it); the expressions it writes are in
benchmarks/fuzz_expressions.py, the sizes that keep joins small in benchmarks/fuzz_sizes.py."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from benchmarks.fuzz_domain import (
    AGGS,
    DECOMPOSED,
    DOMAINS,
    DRAWN_AGGS,
    GROUPABLE,
    HOUSES,
    KEYWORDS,
    MAX_OPS,
    MAX_ROWS_PER_INSTANT,
    MEDIANS,
    NUMERIC,
    OTHER,
    PLUGS,
    PYTHON_SUMS,
    RATE,
    TABLE,
    WHERE,
    Rel,
    _render_kwargs,
    _type,
    bare,
    ref,
    table_db,
)
from benchmarks.fuzz_expressions import Expressions
from benchmarks.fuzz_shapes import _lineage
from benchmarks.fuzz_sizes import _below, _join_rows, _ops, estimated_rows
from federation.expressions import infer_type, to_expression
from federation.logical import Node, Relation, is_row_level, plan_of, table, where_in, window
from federation.logical.sessions import grouped_per_session
from federation.smartplug import PLUG_KEYS, smartplug_stream


class _Builder(Expressions):
    """Draws one query: nodes with their DSL source and a hint per column."""

    def __init__(self, draw, sessions: bool = False) -> None:
        self.draw = draw
        self.sessions = sessions  # every leaf a session window (tests/test_fuzz.py)
        self.stream = smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES)
        self.other = smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES, name=OTHER)
        self.slide = draw(st.sampled_from([0.5, 1.0, 2.0]))
        self.n = 0
        self.used = {c.lower() for c in self.stream.columns}
        #: the expressions as written, by (id of the node, output name): the DSL keeps
        #: them in the form every engine computes alike (CAST as TRY_CAST(TRUNC(..)), ...)
        self.raw: dict[tuple[int, str], str] = {}
        self._alive: list[Node] = []  # keeps the ids in `raw` those of these nodes
        self.computed_cols: set[str] = set()

    def written(self, node: Node | Relation, exprs: dict[str, str]) -> None:
        node = plan_of(node)  # the plan node the shapes walk
        self._alive.append(node)
        self.raw.update({(id(node), n): e for n, e in exprs.items()})

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def pick(self, cols: list[str]) -> str:
        """One of `cols`, a keyword-named one (or a computed one) more often."""
        odd = [c for c in cols if c.strip('"').lower() in KEYWORDS or c in self.computed_cols]
        if odd and self.chance(40):
            return self.draw(st.sampled_from(odd))
        return self.draw(st.sampled_from(cols))

    def filter(self, r: Rel, predicate: str) -> Rel | None:
        try:
            return Rel(r.dsl.filter(predicate), f"{r.src}.filter({predicate!r})", r.hints)
        except ValueError:
            return None

    def project(self, r: Rel, keep: list[str], outputs: list[tuple[str, str, str]]
                ) -> Rel | None:
        """keep: columns by name; outputs: (name, expression, hint)."""
        try:
            node = r.dsl.project(*keep, **{n: e for n, e, _ in outputs})
        except ValueError:
            return None
        self.written(node, {n: e for n, e, _ in outputs})
        self.computed_cols |= {n for n, e, _ in outputs if e not in r.node.schema}
        args = [repr(c) for c in keep] + _render_kwargs([(n, repr(e)) for n, e, _ in outputs])
        hints = {c: r.hints.get(c, "value") for c in keep}
        hints.update({n: h for n, _, h in outputs})
        return Rel(node, f"{r.src}.project({', '.join(args)})", hints)

    def aggregate_call(self, r: Rel, keys: list[str], aggs: list[tuple[str, str, str | None,
                                                                        str, str | None]]
                       ) -> Rel | None:
        """aggs: (name, function, argument or None, hint, FILTER's condition or None)."""
        try:
            node = r.dsl.aggregate(by=keys, **{
                n: AGGS[f](*_args(a), where=w) for n, f, a, _, w in aggs})
        except ValueError:
            return None
        self.written(node, {n: a for n, _, a, _, w in aggs if isinstance(a, str) and w is None})
        self.written(node, {f"{n}{WHERE}": w for n, _, _, _, w in aggs if w is not None})
        parts = [(n, f"{AGGS[f].__name__}({', '.join(map(repr, _args(a)))}"
                  + ("" if w is None else f"{', ' if a else ''}where={w!r}") + ")")
                 for n, f, a, _, w in aggs]
        hints = {k: r.hints.get(k, "code") for k in keys}
        hints.update({n: h for n, _, _, h, _ in aggs})
        src = f"{r.src}.aggregate(by={keys!r}, {', '.join(_render_kwargs(parts))})"
        return Rel(node, src, hints)

    def distinct(self, r: Rel) -> Rel:
        try:
            return Rel(r.dsl.distinct(), f"{r.src}.distinct()", r.hints)
        except ValueError:  # a relation of a table alone: no window to group over
            return r

    def over(self, r: Rel) -> Rel:
        """Each row with an aggregate of its partition at the instant (`over`: SQL's
        MAX(x) OVER (PARTITION BY k)), or of the whole instant."""
        d = self.draw
        keys = self.cols(r, *GROUPABLE)
        by = [self.pick(keys)] if keys and self.chance(70) else []
        nums = [c for c, t in r.node.schema.items() if r.hints.get(c) in NUMERIC
                and _type(t) in ("INT", "BIGINT", "DOUBLE")]
        f = d(st.sampled_from(["max", "avg", "count", "min", "sum"])) if nums else "count"
        c = d(st.sampled_from(nums)) if f != "count" else None
        name = self.fresh("o", "over")
        try:
            node = r.dsl.over(by, **{name: AGGS[f](*_args(bare(c) if c else None))})
        except ValueError:  # a relation of a table alone: no window to aggregate
            return r
        call = f"{AGGS[f].__name__}({repr(bare(c)) if c else ''})"
        src = f"{r.src}.over({by!r}, {', '.join(_render_kwargs([(name, call)]))})"
        return Rel(node, src, {**r.hints, name: "count" if f == "count" else
                               r.hints.get(c, "value")})

    def order_and_partition(self, r: Rel) -> tuple[list[str], list[str]]:
        """An order of one or two columns of `r` (each ASC or DESC) and, more often than
        not, a partition by one groupable column (ROW_NUMBER's and LAG's OVER)."""
        order = [f"{c} DESC" if self.chance(50) else c for c in self.draw(st.lists(
            st.sampled_from(list(r.node.schema)), min_size=1, max_size=2, unique=True))]
        keys = self.cols(r, *GROUPABLE)
        return order, [self.pick(keys)] if keys and self.chance(60) else []

    def neighbour(self, r: Rel) -> Rel:
        """Each row with a value of another row of its partition at the instant: LAG or
        LEAD (`lag`, a negative offset for LEAD; now and then a default) or FIRST_VALUE."""
        d = self.draw
        order, part = self.order_and_partition(r)
        c = d(st.sampled_from(list(r.node.schema)))
        name = self.fresh("nb", "nav")
        hint = "value" if r.hints.get(c) == "count" else r.hints.get(c, "value")
        try:
            if self.chance(30):
                node = r.dsl.first_value(c, order, part, name)
                src = f"{r.src}.first_value({c!r}, {order!r}, {part!r}, {name!r})"
                return Rel(node, src, {**r.hints, name: hint})
            n = d(st.integers(1, 2)) * (1 if self.chance(50) else -1)
            default = "0" if _type(r.node.schema[c]) in ("INT", "BIGINT", "DOUBLE") \
                and self.chance(40) else None
            ignore = self.chance(25)  # IGNORE NULLS: the rows whose value is not NULL
            node = r.dsl.lag(c, order, part, n, default, name, ignore)
        except ValueError:  # a relation of a table alone: no window to number over
            return r
        src = (f"{r.src}.lag({c!r}, {order!r}, {part!r}, {n}, {default!r}, {name!r}, "
               f"{ignore})")
        return Rel(node, src, {**r.hints, name: hint})

    def frame(self, r: Rel) -> Rel:
        """Each row with a value over its frame (frames.py): an aggregate over ROWS,
        RANGE or GROUPS bounds (a running aggregate by default), the first, last or n-th
        row's value, or NTILE, PERCENT_RANK or CUME_DIST."""
        d = self.draw
        order, part = self.order_and_partition(r)
        kind = d(st.sampled_from(["rows", "range", "groups"]))
        bounds = [None, 0] if kind == "range" else [None, -2, -1, 0, 1, 2]
        key = order[0].split()[0]
        if kind == "range" and len(order) == 1 and _type(r.node.schema[key]) in (
                "INT", "BIGINT", "DOUBLE") and self.chance(50):  # by value: within n
            bounds = [None, -3, -1.5, 0, 2]
        lo, hi = d(st.sampled_from(bounds)), d(st.sampled_from(bounds))
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo
        frame = (kind, lo, hi)
        if self.chance(25):  # EXCLUDE CURRENT ROW, GROUP (the row's peers), TIES
            frame += (d(st.sampled_from(["current row", "group", "ties"])),)
        name = self.fresh("fr", "frame")
        # each row joined with its partition's rows: within the rows an instant may have
        pairs = _join_rows(r.node, r.node, part) <= MAX_ROWS_PER_INSTANT
        try:
            if pairs and self.chance(50):
                nums = [c for c, t in r.node.schema.items() if r.hints.get(c) in NUMERIC
                        and _type(t) in ("INT", "BIGINT", "DOUBLE")]
                f = d(st.sampled_from(["max", "avg", "count", "min", "sum"])) if nums \
                    else "count"
                c = d(st.sampled_from(nums)) if f != "count" else None
                node = r.dsl.over(part, order_by=order, frame=frame,
                                  **{name: AGGS[f](*_args(bare(c) if c else None))})
                call = f"{AGGS[f].__name__}({repr(bare(c)) if c else ''})"
                src = (f"{r.src}.over({part!r}, order_by={order!r}, frame={frame!r}, "
                       f"{', '.join(_render_kwargs([(name, call)]))})")
                hint = "count" if f == "count" else r.hints.get(c, "value")
            elif pairs and self.chance(60):
                c = d(st.sampled_from(list(r.node.schema)))
                which = d(st.sampled_from(["first", "last", 1, 2, 3]))
                ignore = self.chance(25)  # IGNORE NULLS
                node = r.dsl.nth_value(c, which, order, part, name, frame, ignore)
                src = (f"{r.src}.nth_value({c!r}, {which!r}, {order!r}, {part!r}, {name!r}, "
                       f"{frame!r}, {ignore})")
                hint = "value" if r.hints.get(c) == "count" else r.hints.get(c, "value")
            else:
                fn = d(st.sampled_from(["ntile", "percent_rank", "cume_dist"] if pairs
                                       else ["ntile", "percent_rank"]))
                buckets = d(st.integers(1, 4)) if fn == "ntile" else None
                node = r.dsl.distribution(fn, order, part, name, buckets)
                src = f"{r.src}.distribution({fn!r}, {order!r}, {part!r}, {name!r}, {buckets!r})"
                hint = "count" if fn == "ntile" else "value"
        except ValueError:  # a relation of a table alone: no window to number over
            return r
        return Rel(node, src, {**r.hints, name: hint})

    def rank(self, r: Rel) -> Rel:
        """ROW_NUMBER at each instant: the first n rows per partition (`top`, the window
        Top-N or ORDER BY ... LIMIT n), or the numbers (ROW_NUMBER, RANK or DENSE_RANK) as
        a column, often filtered."""
        d = self.draw
        order, part = self.order_and_partition(r)
        try:
            if self.chance(35):  # Top-N (row numbers), else the numbers
                n = d(st.integers(1, 3))
                return Rel(r.dsl.top(n, order, part), f"{r.src}.top({n}, {order!r}, {part!r})",
                           r.hints)
            name = self.fresh("rn", "rank")
            fn = self.draw(st.sampled_from(["rank", "dense_rank", "row_number"]))
            node = r.dsl.row_number(order, part, name, fn)
            src = f"{r.src}.row_number({order!r}, {part!r}, {name!r}, {fn!r})"
            if self.chance(50):
                node, src = node.filter(f"{ref(name)} <= 2"), f"{src}.filter({ref(name) + ' <= 2'!r})"
            return Rel(node, src, {**r.hints, name: "count"})
        except ValueError:  # a relation of a table alone: no window to number over
            return r

    def join_call(self, left: Rel, right: Rel, on: list) -> Rel | None:
        """An inner join, or now and then an outer one (LEFT, RIGHT, FULL; inner where it
        would keep a table's rows, which is refused)."""
        how = self.draw(st.sampled_from(["left", "right", "full"])) if self.chance(25) \
            else "inner"
        if how != "inner" and self.chance(40):  # a value that is not NULL on NULL input
            if how in ("left", "full"):  # on a side the join may miss (NULL where it did)
                right = self.never_null(right) or right
            if how in ("right", "full"):
                left = self.never_null(left) or left
        try:
            node = left.dsl.join(right.node, on=on, how=how)
        except ValueError:
            try:
                node, how = left.dsl.join(right.node, on=on), "inner"
            except ValueError:
                return None
        rkeys = {k if isinstance(k, str) else k[1] for k in on}
        hints = {**left.hints, **{c: h for c, h in right.hints.items() if c not in rkeys}}
        tail = "" if how == "inner" else f", how={how!r}"
        return Rel(node, f"{left.src}.join({right.src}, on={on!r}{tail})", hints)

    def never_null(self, r: Rel) -> Rel | None:
        """`r` with a column that is never NULL on its rows (a constant, a COALESCE):
        NULL on the rows an outer join pads (sqlglot's subquery merge once made it the
        constant there)."""
        nums = [c for c, t in r.node.schema.items() if _type(t) in ("INT", "BIGINT")]
        e = self.draw(st.sampled_from(["TRUE", "1"] + [f"COALESCE({ref(c)}, 0) + 1"
                                                       for c in nums]))
        return self.project(r, list(r.node.schema), [(self.fresh("seen"), e, "code")])

    # -- leaves ----------------------------------------------------------------------------
    def window(self, range_s: float | None = None) -> Rel:
        d = self.draw
        # a window over the second stream now and then (a query over two streams)
        stream, name = (self.other, "s2") if self.chance(25) else (self.stream, "s")
        if range_s is None and self.chance(16):
            rows = d(st.sampled_from([5, 20]))
            where = self.readings()  # the last n of the selected readings
            w = window(stream, rows=rows, slide=self.slide, where=where)
            tail = f", where={where!r}" if where else ""
            src = f"window({name}, rows={rows}, slide={self.slide:g}{tail})"
        elif range_s is None and self.chance(15):  # Flink's CUMULATE: size k steps
            size = self.slide * d(st.integers(2, 5))
            w = window(stream, range=size, slide=self.slide, cumulate=True)
            src = f"window({name}, range={size:g}, slide={self.slide:g}, cumulate=True)"
        else:
            if range_s is None:
                k = d(st.integers(1, 6))
                extra = d(st.sampled_from([0.0, 0.0, 0.5, 0.25]))  # ranges the slide won't divide
                range_s = self.slide * (k + extra)
            w = window(stream, range=range_s, slide=self.slide)
            src = f"window({name}, range={range_s:g}, slide={self.slide:g})"
        hints = {"value": "value", "property": "code", "house_id": "key",
                 "household_id": "key", "plug_id": "key", "id": "id", "ts": "ts"}
        return Rel(w, src, hints)

    def table(self) -> Rel:
        """The database table, often filtered, as the right side of a join."""
        t = Rel(table(TABLE, db=table_db()), f"table({TABLE!r}, db=T)",
                {"house_id": "key", "household_id": "key", "rank": "code", "tariff": "value",
                 "label": "vnum", "active": "bool"})
        if self.chance(50):
            t = self.filter(t, self.draw(st.sampled_from(["active", "rank < 3",
                                                          "tariff > 0.2"]))) or t
        return t

    def session(self) -> Rel:
        """Sessions of a stream per a key (or none) and their aggregate, or their rows for
        the operators above (the sessions closing at each instant): gaps from half to
        twice the mean time between two readings of one key, so that sessions both close
        and go on (fuzz data: RATE readings a second over PLUGS plugs in HOUSES houses)."""
        d = self.draw
        stream, name = (self.other, "s2") if self.chance(25) else (self.stream, "s")
        keys = d(st.sampled_from([[], ["plug_id"], ["house_id"], ["house_id", "plug_id"],
                                  ["household_id"]]))
        per_key = RATE / (PLUGS // HOUSES if keys == ["plug_id"] else PLUGS if "plug_id" in keys
                          else HOUSES if keys == ["house_id"] else 1)
        gap = round(d(st.sampled_from([0.5, 1.0, 2.0])) / per_key, 3)
        where = self.readings()  # the sessions of the selected readings
        part: list[str] | dict[str, str] = keys
        hints = {"value": "value", "property": "code", "house_id": "key",
                 "household_id": "key", "plug_id": "key", "id": "id", "ts": "ts",
                 "window_start": "ts", "window_end": "ts"}
        if keys and self.chance(25):  # a key computed of each reading (its last key's)
            c, k = keys[-1], self.fresh("k", keys[-1].split("_")[0])
            part = {**{x: x for x in keys[:-1]}, k: d(st.sampled_from([
                f"{c} % 2", f"{c} < 3", f"CASE WHEN {c} = 1 THEN 10 ELSE {c} END",
                f"CAST({c} AS VARCHAR)"]))}
            keys, hints[k] = list(part), "key"
        try:
            w = window(stream, gap=gap, slide=self.slide, partition_by=part, where=where)
        except ValueError:  # a computed key named as a column of the stream
            return self.window()
        tail = f", where={where!r}" if where else ""
        r = Rel(w, f"window({name}, gap={gap:g}, slide={self.slide:g}, partition_by={part!r}"
                   f"{tail})", hints)
        if self.chance(30):  # read by other operators: the rows of the sessions closing at
            return self.select(r) if self.chance(50) else r  # each instant, bounds with them
        if keys and self.chance(30):  # a selection of a key below the sessions' aggregate
            r = self.filter(r, f"{keys[0]} <> 1") or r
        by = ["window_start", "window_end", *keys]
        if self.chance(30):  # a view's columns: the aggregate reads the readings' expressions
            r, by = self.session_view(r, by)
        return self.aggregate(r, keys=by) or self.window()

    def session_view(self, r: Rel, by: list[str]) -> tuple[Rel, list[str]]:
        """`r`, a session window's rows, under a projection that passes the keys `by` on
        (one maybe renamed), keeps some columns and computes some (session_fold.py)."""
        d = self.draw
        rest = [c for c in r.node.schema if c not in by]
        keep = [c for c in rest if c in d(st.lists(st.sampled_from(rest), max_size=3,
                                                   unique=True))]
        outputs: list[tuple[str, str, str]] = []
        if len(by) > 2 and self.chance(40):
            c = by[-1]
            outputs.append((self.fresh("k", c.split("_")[0]), c, r.hints[c]))
        for _ in range(d(st.integers(1, 2))):
            got = self.computed(r)
            if got is not None:
                outputs.append((self.fresh("x"), *got))
        out = self.project(r, [c for c in by if c not in {e for _, e, _ in outputs}] + keep,
                           outputs)
        if out is None:
            return r, by
        return out, [c if c in out.node.schema else outputs[0][0] for c in by]

    def readings(self) -> str | None:
        """A tuple or session window's own selection (a view's, `SELECT * FROM s WHERE
        ...`), now and then: which readings it counts."""
        if not self.chance(35):
            return None
        return self.draw(st.sampled_from(["value > 40", "property = 1",
                                          "plug_id <> 2 AND value < 90",
                                          "value IS NOT NULL AND house_id % 2 = 0"]))

    def leaf(self) -> Rel:
        if self.sessions or self.chance(9):
            return self.session()
        r = self.window()
        if self.chance(50):
            r = self.select(r)
        if self.chance(15):  # the window's rows with the database table (then often grouped
            r = self.join(r, 0, table=True)  # by one of its columns)
        return r

    # -- unary -----------------------------------------------------------------------------
    def projection(self, r: Rel, computed: int | None = None) -> Rel:
        """Keep some columns, maybe rename one, maybe add computed ones."""
        d = self.draw
        cols = list(r.node.schema)
        keep = d(st.lists(st.sampled_from(cols), min_size=1, max_size=len(cols), unique=True))
        keep = [c for c in cols if c in keep]  # schema order
        outputs: list[tuple[str, str, str]] = []
        if len(keep) > 1 and self.chance(20):  # a renaming
            c = keep.pop(d(st.integers(0, len(keep) - 1)))
            outputs.append((self.fresh("r", c.split("_")[0]), c, r.hints.get(c, "value")))
        n = computed if computed is not None else d(st.sampled_from([0, 1, 1, 2]))
        for _ in range(n):
            got = self.computed(r)
            if got is not None:
                outputs.append((self.fresh("x"), *got))
        return self.project(r, keep, outputs) or r

    def aggregate(self, r: Rel, keys: list[str] | None = None, global_pct: int = 25
                  ) -> Rel | None:
        d = self.draw
        if keys is None:
            groupable = [c for c in r.node.schema if r.hints.get(c) in GROUPABLE]
            made = [c for c in groupable if c in self.computed_cols]
            tabled = [c for c in groupable if _lineage(r.node, c)[2] == "table"]
            if self.chance(global_pct):
                keys = []
            elif tabled and self.chance(50):  # by a database table's column (issue 41)
                keys = [d(st.sampled_from(tabled))]
            elif self.chance(20) and (got := self.derived_key(r)) is not None:
                r, keys = got[0], [got[1]]  # by a key a projection renames or computes
            elif made and self.chance(50) or not made and self.chance(35):
                if not made:  # a computed INT, BOOLEAN or VARCHAR column to group by
                    got = self.computed(r, family=d(st.sampled_from(
                        ["case", "bool", "int_arith", "conversion", "cast"])))
                    if got is not None and got[1] in GROUPABLE:
                        r = self.project(r, list(r.node.schema),
                                         [(self.fresh("g"), *got)]) or r
                        groupable = [c for c in r.node.schema if r.hints.get(c) in GROUPABLE]
                        made = [c for c in groupable if c in self.computed_cols]
                keys = [d(st.sampled_from(made))] if made else []
                if groupable and self.chance(40):
                    keys.append(d(st.sampled_from(groupable)))
                keys = [c for c in r.node.schema if c in keys]
            elif groupable:
                keys = d(st.lists(st.sampled_from(groupable), min_size=1,
                                  max_size=min(2, len(groupable)), unique=True))
                keys = [c for c in r.node.schema if c in keys]
            else:
                keys = []
        nums = [c for c, t in r.node.schema.items() if r.hints.get(c) in NUMERIC
                and _type(t) in ("INT", "BIGINT", "DOUBLE")]
        aggs = []
        w = r.node.row_window()
        # the sessions' own aggregate: each engine's own STDDEV, ... (builder.aggregate)
        session = w is not None and w.is_session and grouped_per_session(w, keys)
        for _ in range(d(st.integers(1, 3))):
            f = d(st.sampled_from(DRAWN_AGGS)) if nums else "count"
            # FILTER (WHERE ...): the aggregate of the rows where a predicate holds
            where = self.predicate(r) if self.chance(5) else None
            if f == "count_distinct":  # of any column (a key, a code, a value), or two
                arg = bare(d(st.sampled_from(list(r.node.schema))))
                if len(r.node.schema) > 1 and self.chance(25):  # COUNT(DISTINCT a, b)
                    arg = tuple(bare(c) for c in d(st.lists(st.sampled_from(list(
                        r.node.schema)), min_size=2, max_size=2, unique=True)))
                aggs.append((self.fresh("d", "distinct"), f, arg, "count", where))
                continue
            if f == "count":
                arg = None
                if self.chance(15):
                    arg = bare(d(st.sampled_from(list(r.node.schema))))
                aggs.append((self.fresh("n", "count"), "count", arg, "count", where))
                continue
            texts = [c for c in r.node.schema if r.hints.get(c) in ("key", "code", "vnum")]
            if f in ("min", "max") and texts and self.chance(15):  # LISTAGG of their text
                c = d(st.sampled_from(texts))
                arg = bare(c) if _type(r.node.schema[c]) == "VARCHAR" else \
                    f"CAST({ref(c)} AS VARCHAR)"
                f = "listagg_distinct" if self.chance(30) else "listagg"
                name = self.fresh("l", "list")
                sep = d(st.sampled_from([",", "|", "; "]))
                if f == "listagg" and (len(aggs) + len(c)) % 2:  # a Python aggregate of
                    other = [t for t in texts if t != c]  # the values, or of two columns'
                    arg = (bare(c), bare(other[0])) if other and sep != "," else (bare(c),)
                    f, sep = "fz_dotted", None  # (no draw of its own: the seeds' queries stay)
                aggs.append((name, f, arg if sep is None else (arg, sep),
                             "vtime", where))
                continue
            ordered = [c for c, t in r.node.schema.items() if _type(t) in ("VARCHAR",
                                                                            "TIMESTAMP")]
            if f in ("min", "max") and ordered and self.chance(20):  # of strings or times
                c = d(st.sampled_from(ordered))
                aggs.append((self.fresh(f[0], f), f, bare(c), r.hints.get(c, "vtime"), where))
                continue
            c = d(st.sampled_from(nums))
            arg, h = bare(c), r.hints.get(c)
            if self.chance(15):  # a computed argument
                got = self.computed(r, numeric=True)
                if got is not None:
                    arg, h = got
            if session and f == "avg" and self.chance(70):  # a session's own STDDEV,
                f = d(st.sampled_from(sorted(DECOMPOSED)))  # ... (sessions are drawn rarely;
                # the argument's text picks the percentile: most are a session's first)
                f = MEDIANS[(len(aggs) + len(str(arg))) % 3] if f == "median" else f
            elif f in ("sum", "avg") and self.chance(12):  # of the distinct values
                f = f"{f}_distinct"
            elif f == "avg" and self.chance(12):  # STDDEV, VARIANCE, MEDIAN (of a session's
                f = d(st.sampled_from(sorted(DECOMPOSED)))  # rows: the engines' own)
                f = MEDIANS[len(aggs) % 3] if f == "median" else f
            if f in ("avg", "avg_distinct", *DECOMPOSED, *MEDIANS):
                hint = "value"
            elif h == "count":
                hint = "count"
            else:
                hint = "code" if f in ("min", "max") and h in ("key", "code") else "value"
            name = self.fresh(f[0], f)
            if f in ("sum", "sum_distinct") and (len(aggs) + len(str(arg))) % 5 == 2:
                # a Python aggregate of SUM's type (no draw of its own: the seeds' queries
                # stay those drawn before)
                f = PYTHON_SUMS.get((f, _type(infer_type(to_expression(arg), r.node.schema))), f)
            aggs.append((name, f, arg, hint, where))
        return self.aggregate_call(r, keys, aggs)

    def derived_key(self, r: Rel) -> tuple[Rel, str] | None:
        """`r` under a projection that keeps its columns and adds a groupable one, renamed
        (`k = plug_id`) or computed (a CASE, a cast, integer arithmetic...), and its name:
        the key whose slice table the memory model once could not type (issue 41)."""
        d = self.draw
        groupable = [c for c in r.node.schema if r.hints.get(c) in GROUPABLE]
        if groupable and self.chance(50):
            c = d(st.sampled_from(groupable))
            out = (self.fresh("k", c.split("_")[0]), bare(c), r.hints[c])
        else:
            got = self.computed(r, family=d(st.sampled_from(
                ["case", "bool", "int_arith", "conversion", "cast"])))
            if got is None or got[1] not in GROUPABLE:
                return None
            out = (self.fresh("g"), *got)
        keep = [c for c in r.node.schema if c != out[0]]
        projected = self.project(r, keep, [out])
        return None if projected is None else (projected, out[0])

    # -- whole subtrees --------------------------------------------------------------------
    def relation(self, depth: int, top: bool = True) -> Rel:
        """A subtree: a leaf or a join of window rows, then operators in a random order
        (no more joins once it has MAX_OPS operators)."""
        d = self.draw
        r = self.rows_join() if self.chance(40 if top else 8) else self.leaf()
        if top and is_row_level(r.node) and self.chance(10):  # CQ1's count over packs
            r = self.against_own_aggregate(r) or r
        for _ in range(d(st.integers(1, depth + 1))):
            kind = d(st.sampled_from(["select", "project", "aggregate", "aggregate", "join",
                                      "join", "derived", "union"]))
            if kind in ("join", "union") and _ops(r.node) >= MAX_OPS:
                kind = "aggregate"
            if kind == "select":
                r = self.select(r)
            elif kind == "project":
                r = self.projection(r)
            elif kind == "aggregate":
                r = self.aggregate(r, global_pct=40 if _below(r.node, "join") else 20) or r
            elif kind == "union":
                r = self.union(r, depth - 1)
            elif kind == "derived":  # grouped by a key a projection renames or computes
                got = self.derived_key(r)
                r = r if got is None else self.aggregate(got[0], keys=[got[1]]) or r
            else:
                r = self.join(r, depth - 1)
        return r

    def union(self, r: Rel, depth: int) -> Rel:
        """`r` UNION ALL (or INTERSECT, EXCEPT [ALL]) another relation whose columns, of
        `r`'s types, a projection renames to `r`'s (SQL's by position), else `r` through a
        selection (a union of a subtree with itself)."""
        d = self.draw
        other = self.relation(max(depth, 0), top=False)
        cols, free = [], list(other.node.schema)
        for c, t in r.node.schema.items():
            same = [o for o in free if other.node.schema[o] == t]
            if not same:
                cols = None
                break
            o = d(st.sampled_from(same))
            free.remove(o)
            cols.append((c, bare(o), r.hints.get(c, "value")))
        right = None if cols is None else self.project(other, [], cols)
        if right is None:
            right = self.select(r)
        how = d(st.sampled_from(["union_all", "union_all", "intersect", "except_"]))
        all_ = how != "union_all" and d(st.booleans())
        try:  # INTERSECT / EXCEPT [ALL]: a union, row numbers, a group by (union.py)
            node = (r.dsl.union_all(right.node) if how == "union_all" else
                    getattr(r.dsl, how)(right.node, all_))
        except ValueError:  # a side of tables alone, or another slide
            return r
        arg = "" if how == "union_all" else f", {all_}"
        return Rel(node, f"{r.src}.{how}({right.src}{arg})", r.hints)

    def rows_join(self) -> Rel:
        """Two window-rows relations over windows of different ranges (one slide), each with
        its own selection and renaming projection, joined on plug keys; then often an
        aggregate (keyed or global) and sometimes a projection."""
        d = self.draw
        keys = list(PLUG_KEYS) if self.chance(50) else [k for k in PLUG_KEYS if k in d(
            st.lists(st.sampled_from(PLUG_KEYS), min_size=1, max_size=3, unique=True))]
        ranges = sorted({self.slide * (k + e) for k in range(1, 7) for e in (0.0, 0.25, 0.5)})

        def pairs(ks):
            v = math.prod(DOMAINS[k] for k in ks)
            return [(a, b) for a in ranges for b in ranges
                    if a != b and RATE * a * RATE * b / v <= MAX_ROWS_PER_INSTANT]

        if not pairs(keys):
            keys = list(PLUG_KEYS)
        r1, r2 = d(st.sampled_from(pairs(keys)))
        renamed = d(st.sampled_from(["house_id", "household_id", "plug_id", None, None, None]))
        renamed = renamed if renamed in keys and self.chance(50) else None
        sides: list[Rel] = []
        rname = ""
        for rng, word in ((r1, "load"), (r2, "work")):
            r = self.window(rng)
            if self.chance(85):
                if self.chance(60):
                    p = f"property = {d(st.sampled_from([0, 1]))}"
                    r = self.filter(r, p) or r
                    if self.chance(25):
                        r = self.select(r)
                else:
                    r = self.select(r)
            keep = list(keys)
            if not sides:  # the left may keep more plug keys than it joins on
                keep += [k for k in PLUG_KEYS if k not in keys and self.chance(30)]
            outputs = [(self.fresh("v", word), "value", "value")]
            if sides and renamed:
                keep.remove(renamed)
                rname = self.fresh("k", renamed.split("_")[0])
                outputs.insert(0, (rname, renamed, "key"))
            if self.chance(35):
                got = self.computed(r)
                if got is not None:
                    outputs.append((self.fresh("x"), *got))
            keep = [c for c in r.node.schema if c in keep]
            sides.append(self.project(r, keep, outputs) or r)
        left, right = sides
        on: list = list(keys)
        if renamed and rname in right.node.schema:
            on = [(k, rname) if k == renamed else k for k in keys]
        j = self.join_call(left, right, on)
        if j is None or estimated_rows(j.node) > MAX_ROWS_PER_INSTANT:
            return left
        if self.chance(30):
            vs = self.cols(j, "value", types=("DOUBLE",))
            if len(vs) >= 2:
                j = self.filter(j, f"{ref(vs[0])} > {ref(vs[1])}") or j
        if self.chance(75):
            a = self.aggregate(j, global_pct=40)
            if a is not None:
                j = a
                if self.chance(40):
                    j = self.projection(j, computed=d(st.integers(0, 1)))
        return j

    def join(self, left: Rel, depth: int, table: bool = False) -> Rel:
        d = self.draw
        if not table and is_row_level(left.node) and self.chance(12):
            got = self.against_own_aggregate(left)  # CQ1's shape
            if got is not None:
                return got
        if table or self.chance(25):  # a database table
            right = self.table()
        elif self.chance(45):  # self-join: the same subtree on both sides
            right = left
        else:
            right = self.relation(max(depth, 0), top=False)
        lkeys = [c for c in left.node.schema if left.hints.get(c) in ("key", "code")]

        def common(rr: Rel) -> list[str]:
            return [c for c in lkeys if c in rr.node.schema and rr.hints.get(c) in ("key", "code")
                    and _type(left.node.schema[c]) == _type(rr.node.schema[c])]

        keys = common(right)
        if keys:
            keys = [c for c in keys if c in d(st.lists(st.sampled_from(keys), min_size=1,
                                                       max_size=len(keys), unique=True))]
        if keys and self.chance(35):  # x [NOT] IN (SELECT k FROM right)
            got = self.membership(left, right, keys)
            if got is not None:
                return got
        aggregated = False
        if self.chance(15):  # a join on the instant alone (Nexmark q5's window join):
            agg = self.aggregate(right, keys=[])  # with a global aggregate, one row a side
            if agg is None:
                return left
            right, keys = agg, []
        elif not keys or _join_rows(left.node, right.node, keys) > MAX_ROWS_PER_INSTANT or (
                is_row_level(right.node) and self.chance(50)):
            # no join key, too many rows, or a join of rows or a relation with an aggregate
            # (CQ1's shape): aggregate the right side by the join keys
            keys = common(right)
            if not keys:
                return left
            keys = [c for c in keys if c in d(st.lists(st.sampled_from(keys), min_size=1,
                                                       max_size=len(keys), unique=True))]
            agg = self.aggregate(right, keys=keys)
            if agg is None:
                return left
            right, aggregated = agg, True
        # rename the right side's other columns: no ambiguous names
        outputs = [(self.fresh("r", c.split("_")[0]), c, right.hints.get(c, "value"))
                   for c in right.node.schema if c not in keys]
        rproj = self.project(right, keys, outputs)
        if rproj is None:
            return left
        out = self.join_call(left, rproj, keys)
        if out is None or estimated_rows(out.node) > MAX_ROWS_PER_INSTANT:
            return left  # a near cross product: skip it
        if aggregated and is_row_level(left.node) and self.chance(40):
            counted = self.counted(out, left, keys)
            if counted is not None:
                return counted
        tabled = [c for c in rproj.node.schema if c not in keys
                  and rproj.hints.get(c) in GROUPABLE] if right.node.kind == "table" else []
        if tabled and self.chance(50):  # aggregated by a table's column (issue 41)
            out = self.aggregate(out, keys=[self.draw(st.sampled_from(tabled))]) or out
        return out


    def against_own_aggregate(self, rows: Rel) -> Rel | None:
        """`rows` joined with their own aggregate by some of their keys (renamed), then
        counted against it (`counted`), as CQ1 and CQ2."""
        keys = [c for c in rows.node.schema if rows.hints.get(c) in ("key", "code")]
        if not keys:
            return None
        keys = [c for c in keys if c in self.draw(st.lists(
            st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True))]
        agg = self.aggregate(rows, keys=keys)
        if agg is None:
            return None
        right = self.project(agg, keys, [(self.fresh("r"), c, agg.hints.get(c, "value"))
                                          for c in agg.node.schema if c not in keys])
        if right is None:
            return None
        try:  # inner, as CQ1's (an outer join's NULL-padded rows are not counted over packs)
            node = rows.dsl.join(right.node, on=keys)
        except ValueError:
            return None
        hints = {**rows.hints, **{c: h for c, h in right.hints.items() if c not in keys}}
        return self.counted(Rel(node, f"{rows.src}.join({right.src}, on={keys!r})", hints),
                            rows, keys)

    def counted(self, j: Rel, left: Rel, keys: list[str]) -> Rel | None:
        """The pairs of `left`'s rows and its keys' aggregate whose row value passes a bound
        of the aggregate, counted per some of the keys (CQ1, CQ2: a DB-op counts packs of
        rows, federation/packing.py); sometimes with a condition on the aggregate alone."""
        d = self.draw
        vs = [c for c in self.cols(left, "value", "ival") if c in j.node.schema]
        bounds = [c for c in self.cols(j, *NUMERIC) if c not in left.node.schema]
        if not vs or not bounds:
            return None
        v, a = ref(d(st.sampled_from(vs))), ref(d(st.sampled_from(bounds)))
        op = d(st.sampled_from([">", ">=", "<", "<="]))
        e = d(st.sampled_from([f"0.9 * {a}", a, f"{a} - 2", f"0.5 * {a} + 1"]))
        flip = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
        cond = f"{v} {op} {e}" if self.chance(60) else f"{e} {flip[op]} {v}"
        if self.chance(25):
            cond += f" AND {a} IS NOT NULL"
        r = self.filter(j, cond)
        by = [k for k in keys if self.chance(70)]
        aggs = [(self.fresh("n"), "count", None, "count", None)]
        if self.chance(30):
            aggs.append((self.fresh("n"), "count", bare(v), "count", None))
        return None if r is None else self.aggregate_call(r, by, aggs)

    def membership(self, left: Rel, right: Rel, keys: list[str]) -> Rel | None:
        """`left`'s rows whose `keys` are (or are not) among `right`'s values of them,
        renamed (SQL's `(a, b) [NOT] IN (SELECT x, y FROM ...)`, or NOT EXISTS correlated by
        them: logical/membership.py)."""
        sub = self.project(right, [], [(self.fresh("v", k.split("_")[0]), bare(k),
                                        right.hints.get(k, "code")) for k in keys])
        if sub is None:
            return None
        # IN, NOT IN (not over a table alone: refused) or NOT EXISTS correlated by the keys
        mode = self.draw(st.sampled_from(["in", "not in", "not exists"]))
        anti, negated = mode == "not exists", mode == "not in" and right.node.kind != "table"
        try:
            node = where_in(left.node, keys, sub.node, negated, anti=anti)
        except ValueError:
            return None
        return Rel(node, f"where_in({left.src}, {keys!r}, {sub.src}, {negated}, anti={anti})",
                   left.hints)


def _args(a: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """An aggregate's arguments as drawn: none (COUNT(*)), one, or several (COUNT(DISTINCT
    a, b))."""
    return () if a is None else a if isinstance(a, tuple) else (a,)
