"""SPE fragments as Spark Structured Streaming operators (docs/architecture.md).

A visitor over the plan nodes builds streaming DataFrames. Two shapes of stream exist:
* row-level (`rows`): window rows with their event time `_ts` (a window leaf and the
  selections and projections over it; they run per row, before any window expansion);
* relation-level (`rel`): rows of an instantaneous relation tagged with
  `_wt = window_time(window)` = tau - 1 microsecond, which carries Spark's event-time
  metadata so that chained stateful operators keep working under the watermark.

Aggregation over rows is Spark's sliding `window()` aggregation in append mode; over a
relation it groups by `_wt`. A join of relations is a stream-stream join on `_wt` and the
keys (an outer join is a cogroup: spe/joins.py). A join with a row-level side (CQ1/CQ2:
window contents against the window's own aggregate) first collects that side's rows per
(window, keys) with Spark's own aggregate, joins on (`_wt`, keys) and explodes the
collected rows again.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from federation.conventions import SPARK_TYPES, TS, US_PER_S, WINDOW, WT, Lowering, us
from spe.aggregates import MERGE, agg_column, ranked, run_starts, sorted_rows, spark_expr
from spe.aggregates import quoted_col as _c
from spe.joins import cogroup_join, interval_rows, rows_join, same_period
from spe.sessions import reads_closed, session_aggregate, session_rows, session_values

if TYPE_CHECKING:  # plan nodes are dispatched on by class name: spe/ imports no plan code
    from federation.logical import Aggregate, Join, Node, Project, Select, Table, Union, Window

#: the Spark streaming DataFrame of each plan node class, from its inputs' (a window's
#: input: its stream's rows; a table's: its rows as read)
SPARK = Lowering("Spark lowering", ("operator", "leaf"))

_BY_NAME = {t.simpleString(): t for t in (T.BooleanType(), T.IntegerType(), T.LongType(),
                                          T.DoubleType(), T.StringType(), T.TimestampType())}


def spark_type(sql_type: str) -> T.DataType:
    """The Spark type of one of the six SQL types (federation.conventions)."""
    return _BY_NAME[SPARK_TYPES[sql_type]]


def spark_schema(columns: dict[str, str]) -> T.StructType:
    return T.StructType([T.StructField(c, spark_type(t)) for c, t in columns.items()])


@dataclass(frozen=True)
class SpeStream:
    """A streaming DataFrame for one plan node: row-level (with its window) or relation."""

    df: DataFrame
    row_level: bool
    window: Window | None = None
    static: bool = False  # a database table: a static DataFrame, the same at every instant


def _interval(micros: int) -> str:
    return f"{micros} microseconds"


def window_column(ts: Column, range_s: float, slide_s: float, offset_s: float = 0.0) -> Column:
    """Spark's sliding window whose instant tau = offset + k * slide covers [tau - range,
    tau), also where the slide does not divide the range (the start offset moves them)."""
    r, sl = us(range_s), us(slide_s)
    start = (us(offset_s) - r) % sl
    return F.window(ts, _interval(r), _interval(sl), _interval(start) if start else None)


class SpeTranslator:
    """Builds the streaming DataFrame of each SPE-op (a method per node class, in `SPARK`).

    `instants` gives, on demand, a relation with one row (`_wt`) per slide instant of the
    query's life (built from the ticks of the input spool): a global aggregate has one row
    at every instant, also where its input is empty (SQL semantics).
    """

    def __init__(self, instants=None) -> None:
        self.instants = instants
        # a join of window rows with a relation: "interval" (Spark's time-interval join, the
        # default; not of a held window's rows) or "collect" (rows collected per window)
        self.rows_join = os.environ.get("FEDQ_SPE_ROWS_JOIN", "interval")
        if self.rows_join not in ("interval", "collect"):
            raise ValueError(f"FEDQ_SPE_ROWS_JOIN={self.rows_join!r}: use interval or collect")
        # how a sliding window aggregate runs: "panes" (partial aggregates per pane, then
        # the window over the panes; the default) or "expand" (each row copied into every
        # window holding it: Spark's own sliding window(); kept to measure both)
        self.window_agg = os.environ.get("FEDQ_SPE_WINDOW_AGG", "panes")
        if self.window_agg not in ("panes", "expand"):
            raise ValueError(f"FEDQ_SPE_WINDOW_AGG={self.window_agg!r}: use panes or expand")

    def visit(self, node: Node, inputs: list) -> SpeStream:
        if node.kind != "window":  # a session window's rows as the sessions closing now
            inputs = [self.as_relation(s) if reads_closed(node, s) else s for s in inputs]
        return SPARK.find(node)(self, node, inputs)

    @SPARK.register("TimeWindow", "TupleWindow", "SessionWindow")
    def visit_window(self, node: Window, inputs: list[DataFrame]) -> SpeStream:
        """A window's rows: its stream's, each with its event time (Spark has no tuple
        windows: an operator over one is placed in the DB, physical.spe_limits)."""
        (rows,) = inputs
        where = node.where  # the readings a session is made of
        if where is not None:
            rows = rows.filter(spark_expr(where))
        for k, e in node.computed_keys:  # partition keys computed of each reading
            rows = rows.withColumn(k, spark_expr(e))
        return SpeStream(rows, True, node)

    @SPARK.register("Select")
    def visit_select(self, node: Select, inputs: list[SpeStream]) -> SpeStream:
        (s,) = inputs
        return SpeStream(s.df.filter(spark_expr(node.predicate)), s.row_level,
                         s.window)

    @SPARK.register("Project")
    def visit_project(self, node: Project, inputs: list[SpeStream]) -> SpeStream:
        (s,) = inputs
        tag = TS if s.row_level else WT
        cols = [_c(tag)] + [spark_expr(e).alias(n) for n, e in node.outputs]
        return SpeStream(s.df.select(*cols), s.row_level, s.window)

    @SPARK.register("Aggregate")
    def visit_aggregate(self, node: Aggregate, inputs: list[SpeStream]) -> SpeStream:
        (s,) = inputs
        aggs = [agg_column(c.func, c.arg, n, node.schema[n], c.separator, c.fraction,
                           c.descending, c.function) for n, c in node.aggs]
        keys = [_c(k) for k in node.keys]
        if s.row_level and s.window is not None and s.window.is_session:
            out = session_aggregate(s.df, s.window, node)
        elif s.row_level and self._panes(s, node):
            out = self._pane_aggregate(s, node)
        elif s.row_level:
            out = (self._windowed(s).groupBy(_c(WINDOW), *keys).agg(*aggs)
                   .select(F.window_time(WINDOW).alias(WT), *keys, *[_c(n) for n, _ in node.aggs]))
        else:
            out = s.df.groupBy(_c(WT), *keys).agg(*aggs)
        out = session_values(out, node.aggs)  # a session's STDDEV, ...: from its values
        if not node.keys:
            out = self._pad_empty_instants(node, out)
        # SUM of integers is BIGINT in both engines; keep the declared result types
        out = out.select(_c(WT), *[_c(c).cast(spark_type(t)).alias(c)
                                   for c, t in node.schema.items()])
        return SpeStream(out, False)

    def _panes(self, s: SpeStream, node: Aggregate) -> bool:
        w = s.window
        return (self.window_agg == "panes" and w is not None and w.is_time_based
                and not w.cumulate and us(w.range_s) > us(w.slide_s) and w.every_s is None
                and all(c.func in MERGE for _, c in node.aggs))

    def _pane_aggregate(self, s: SpeStream, node: Aggregate) -> DataFrame:
        """A sliding window aggregate the way a Spark expert writes it: each row once into
        its pane (a tumbling window of gcd(range, slide), the panes tile every window), a
        partial aggregate per (pane, keys), then Spark's sliding window over the panes'
        `window_time` merging the partials. A row is copied into one pane instead of
        range/slide windows; the second aggregate reads one row per pane and key. Both are
        Spark's own stateful aggregates, chained under the one watermark."""
        w = s.window
        pane = math.gcd(us(w.range_s), us(w.slide_s)) / US_PER_S  # from the grid's origin
        keys = [_c(k) for k in node.keys]
        partial, merged = {}, []
        for i, (n, c) in enumerate(node.aggs):
            parts, merge = MERGE[c.func](None if c.arg is None else spark_expr(c.arg), f"_part{i}",
                                         node.schema[n])
            partial.update(parts)
            merged.append(merge.alias(n))
        panes = (s.df.groupBy(window_column(_c(TS), pane, pane, w.offset_s).alias(WINDOW), *keys)
                 .agg(*[col.alias(name) for name, col in partial.items()])
                 .select(F.window_time(WINDOW).alias("_pane"), *keys, *partial))
        win = window_column(F.col("_pane"), w.range_s, w.slide_s, w.offset_s).alias(WINDOW)
        return (panes.groupBy(win, *keys).agg(*merged)
                .select(F.window_time(WINDOW).alias(WT), *keys, *[_c(n) for n, _ in node.aggs]))

    def _pad_empty_instants(self, node: Aggregate, out: DataFrame) -> DataFrame:
        """A global aggregate: one row at every instant, (COUNT 0, others NULL) where the
        input is empty. The aggregate's rows are merged with one row per instant."""
        if self.instants is None:
            raise NotImplementedError(
                "a global aggregate in Spark needs the instants of the input spool")
        names = [n for n, _ in node.aggs]
        padded = out.select(_c(WT), *[_c(n) for n in names], F.lit(False).alias("_pad"))
        padded = padded.unionByName(self.instants().select(_c(WT), F.lit(True).alias("_pad")),
                                    allowMissingColumns=True)
        cols = []
        for n, call in node.aggs:
            v = F.max(F.when(~F.col("_pad"), _c(n)))
            zero = call.func in ("count", "count_distinct")  # COUNT 0, the others NULL
            cols.append((F.coalesce(v, F.lit(0)) if zero else v).alias(n))
        return padded.groupBy(_c(WT)).agg(*cols)

    def as_relation(self, s: SpeStream) -> SpeStream:
        """Window rows as the per-instant relation: every row once per window holding it."""
        if not s.row_level:
            return s
        if s.window is not None and s.window.is_session:  # the sessions closing at tau
            return SpeStream(session_rows(s.df, s.window), False)
        cols = [c for c in s.df.columns if c != TS]
        df = self._windowed(s).select(F.window_time(WINDOW).alias(WT), *[_c(c) for c in cols])
        return SpeStream(df, False)

    @SPARK.register("Table")
    def static_table(self, node: Table, inputs: list[DataFrame]) -> SpeStream:
        """A database table from the run's Parquet copy (its input), through its selections
        and projections: a static DataFrame, broadcast to the joins that read it."""
        (rows,) = inputs
        df = rows.select(*[_c(c) for c, _ in node.columns])
        for what, v in node.steps:
            if what == "distinct":
                df = df.distinct()
            elif what == "where":
                df = df.filter(spark_expr(v))
            else:
                df = df.select(*[spark_expr(e).alias(n) for n, e in v])
        return SpeStream(F.broadcast(df), False, static=True)

    def _static_join(self, node: Join, left: SpeStream, right: SpeStream, lcols: list[str],
                     rcols: list[str]) -> SpeStream:
        """A relation joined with a database table: Spark's stream-static join, which keeps
        no state (the table is the same at every instant). Window rows are first the
        per-instant relation, as the plan sees a join's output."""
        if left.static:
            right = self.as_relation(right)
        else:
            left = self.as_relation(left)
        ldf, rdf = left.df.alias("l"), right.df.alias("r")
        cond = None
        for lk, rk in node.keys:
            eq = F.col(f"l.`{lk}`") == F.col(f"r.`{rk}`")
            cond = eq if cond is None else cond & eq
        side = "r" if left.static else "l"
        rkey = dict(node.keys) if node.how == "right" else {}  # the stream's key (the node
        out = [F.col(f"{side}.{WT}").alias(WT)] + [  # keeps no table side's rows alone)
            F.col(f"r.`{rkey[c]}`" if c in rkey else f"l.`{c}`").alias(c) for c in lcols]
        out += [F.col(f"r.`{c}`").alias(c) for c in rcols]
        how = {"inner": "inner", "left": "left_outer", "right": "right_outer"}[node.how]
        return SpeStream(ldf.join(rdf, cond, how).select(*out), False)

    @SPARK.register("Union")
    def visit_union(self, node: Union, inputs: list[SpeStream]) -> SpeStream:
        """Both inputs as the instants' relations (window rows once per window holding
        them), one streaming union: Spark's watermark is the smaller of the two."""
        cols = [WT, *node.schema]
        left, right = (self.as_relation(s).df.select(*[_c(c) for c in cols]) for s in inputs)
        return SpeStream(left.unionByName(right), False)

    @SPARK.register("RowNumber")
    def visit_row_number(self, node: Node, inputs: list[SpeStream]) -> SpeStream:
        """Each instant's rows collected per partition (an aggregate, as Spark's streaming
        queries allow: its windows or WT, under the watermark), sorted by the node's total
        order (`array_sort` with a comparator: NULLs last in every column), numbered by
        their position (RANK, DENSE_RANK: by the runs of rows tied in the ORDER BY)."""
        (s,) = inputs
        cols = list(node.child.schema)
        keys = [_c(k) for k in node.partition_by]
        rows = F.collect_list(F.struct(*[_c(c) for c in cols])).alias("_rows")
        if s.row_level:
            g = (self._windowed(s).groupBy(_c(WINDOW), *keys).agg(rows)
                 .select(F.window_time(WINDOW).alias(WT), "_rows"))
        else:
            g = s.df.groupBy(_c(WT), *keys).agg(rows)
        if node.function == "row_number":
            out = g.select(_c(WT), F.posexplode(sorted_rows("_rows", node.sort_keys))
                           .alias("_pos", "_row"))
            number = F.col("_pos") + 1
        else:  # RANK(), DENSE_RANK(): the runs of rows tied in the ORDER BY
            s = g.select(_c(WT), sorted_rows("_rows", node.sort_keys).alias("_s"))
            s = s.select(_c(WT), "_s", run_starts("_s", list(node.order_by)).alias("_starts"))
            out = s.select(_c(WT), F.explode(ranked("_s", "_starts")).alias("_r")).select(
                _c(WT), "_r.*")
            number = F.col("_rank" if node.function == "rank" else "_dense")
        return SpeStream(out.select(_c(WT), *[F.col(f"_row.`{c}`").alias(c) for c in cols],
                                    number.cast("bigint").alias(node.name)), False)

    @SPARK.register("Join")
    def visit_join(self, node: Join, inputs: list[SpeStream]) -> SpeStream:
        left, right = inputs
        lkeys = [a for a, _ in node.keys]
        rkeys = [b for _, b in node.keys]
        lcols = list(node.left.schema)
        rcols = [c for c in node.right.schema if c not in set(rkeys)]
        if left.static or right.static:
            return self._static_join(node, left, right, lcols, rcols)
        if interval_rows(node, left, right, self.rows_join) is not None:
            return SpeStream(rows_join(node, left, right, lkeys, rkeys, lcols, rcols), False)
        lrest = [c for c in lcols if c not in lkeys]
        ldf, lpack = self._as_relation(left, lkeys, lrest, "_lrows")
        rdf, rpack = self._as_relation(right, rkeys, rcols, "_rrows")
        if node.how != "inner":  # spe/joins.py
            return SpeStream(cogroup_join(
                node.keeps, ldf, rdf, lkeys, rkeys, lrest, rcols,
                "_lrows" if left.row_level else None, "_rrows" if right.row_level else None,
                list(node.schema)), False)
        ldf = ldf.select(_c(WT), *[_c(k) for k in lkeys], *lpack).alias("l")
        rdf = rdf.select(_c(WT).alias("_rwt"), *[_c(k).alias(f"_rk{i}") for i, k in
                                                   enumerate(rkeys)], *rpack).alias("r")
        cond = F.col(f"l.{WT}") == F.col("r._rwt")
        for i, k in enumerate(lkeys):
            cond = cond & (F.col(f"l.`{k}`") == F.col(f"r._rk{i}"))
        j = ldf.join(rdf, cond, "inner")
        if left.row_level:
            j = j.withColumn("_lrow", F.explode("_lrows"))
        if right.row_level:
            j = j.withColumn("_rrow", F.explode("_rrows"))
        out_cols = [F.col(f"l.{WT}").alias(WT)]
        for c in lcols:
            if left.row_level and c not in lkeys:
                out_cols.append(F.col(f"_lrow.`{c}`").alias(c))
            else:
                out_cols.append(F.col(f"l.`{c}`").alias(c))
        for c in rcols:
            out_cols.append(F.col(f"_rrow.`{c}`").alias(c) if right.row_level
                            else F.col(f"r.`{c}`").alias(c))
        return SpeStream(j.select(*out_cols), False)

    def _windowed(self, s: SpeStream) -> DataFrame:
        """The rows with their window (`WINDOW`), once per window holding them; a cumulating
        window's: the sliding windows of its size, each keeping the rows of its period (the
        one that holds its end - 1 us: `joins.same_period`). Held on the query's finer grid
        (`every_s`): Spark's windows of range + held on that grid whose own last instant
        holds the row, ts < own <= ts + range (Spark's window stays the grouping key)."""
        w = s.window
        assert w is not None and w.is_time_based, "Spark has no tuple windows (spe_limits)"
        ts = F.unix_micros(_c(TS))
        df = s.df.select(window_column(_c(TS), w.range_s + w.held_s, w.instants.slide_s,
                                       w.offset_s).alias(WINDOW), "*")
        own = F.unix_micros(F.col(f"{WINDOW}.end"))  # the instant whose window this is
        if w.every_s is not None:  # (Spark's window ends on the query's grid)
            sl, o = w.grid.slide_us, w.grid.origin_us
            own = F.expr(f"(unix_micros(`{WINDOW}`.`end`) - {o}) div {sl}") * sl + o
            df = df.filter(F.floor((own - ts - 1) / us(w.range_s)) == 0)  # ts < own <= ts + r
        if w.cumulate:  # held: the period of its own instant, not of the query's
            df = df.filter(same_period(ts, own - 1, w.range_s, w.offset_s))
        return df

    def _as_relation(self, s: SpeStream, keys: list[str], others: list[str], packed: str):
        """A relation-level DataFrame; a row-level side is collected per (window, keys)."""
        if not s.row_level:
            return s.df, [_c(c) for c in others]
        rows = F.collect_list(F.struct(*[_c(c) for c in others])).alias(packed)
        df = (self._windowed(s).groupBy(_c(WINDOW), *[_c(k) for k in keys]).agg(rows)
              .select(F.window_time(WINDOW).alias(WT), *[_c(k) for k in keys], _c(packed)))
        return df, [_c(packed)]
