"""Operators over a partition of each instant's rows: aggregates OVER it, LAG/LEAD and their
kin, frames, ROW_NUMBER/RANK.

A mixin of the fuzzer's builder (benchmarks/fuzz_builder.py): its methods draw with
`self.draw` and build with the builder's other methods."""

from __future__ import annotations

from hypothesis import strategies as st

from benchmarks.fuzz_domain import (
    AGGS,
    GROUPABLE,
    MAX_ROWS_PER_INSTANT,
    NUMERIC,
    Rel,
    _render_kwargs,
    _type,
    agg_args,
    bare,
    ref,
)
from benchmarks.fuzz_sizes import _join_rows


class Partitions:
    """Operators over a partition of each instant's rows (a mixin of fuzz_builder._Builder)."""

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
            node = r.dsl.over(by, **{name: AGGS[f](*agg_args(bare(c) if c else None))})
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
                                  **{name: AGGS[f](*agg_args(bare(c) if c else None))})
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
