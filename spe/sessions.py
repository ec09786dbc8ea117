"""Session windows in Spark (federation/logical/window.py, `SessionWindow`): the aggregate
over a session window as a Spark expert writes it, with Spark's own session state, and the
rows of the sessions that close at each instant for any other reader."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from federation.conventions import (
    SESSION_COLUMNS,
    SORTED_NATIVE,
    TS,
    US_PER_S,
    WINDOW,
    WT,
    ListSql,
    list_mean,
    list_value,
    mean_names,
    us,
)
from spe.aggregates import agg_column
from spe.aggregates import quoted_col as _c

SESSION = "_session"  # the session_window struct column
ROWS = "_s_rows"  # a session's readings, collected (session_rows)


def _seconds(micros: int):
    """A CalendarInterval of `micros` microseconds (session_window's gap type)."""
    return F.expr(f"make_interval(0, 0, 0, 0, 0, 0, {micros / US_PER_S:.6f})")


def session_aggregate(rows: DataFrame, w, node) -> DataFrame:
    """`node` (an aggregate grouped by window_start, window_end and `w`'s partition keys)
    over the readings `rows` of session window `w` (`closed_sessions`)."""
    names = [n for n, _ in node.aggs]
    aggs = [agg_column(c.func, c.arg, n, node.schema[n], c.separator, c.fraction,
                       c.descending, c.function) for n, c in node.aggs]
    return closed_sessions(rows, w, aggs, names)


def reads_closed(node, s) -> bool:
    """True when plan node `node` reads its input `s` (a SpeStream) as the relation of the
    sessions closing at each instant: `s` is a session window's readings and `node` neither
    a selection of its keys nor its sessions' aggregate (`Node.reads_closed_sessions`)."""
    w = getattr(s, "window", None)
    return (getattr(s, "row_level", False) and w is not None and w.is_session
            and node.reads_closed_sessions())


def session_rows(rows: DataFrame, w) -> DataFrame:
    """The relation of session window `w` at each instant: the readings `rows` of the
    sessions that close there, each with its session's window_start and window_end. Each
    session's readings are collected in Spark's session state (`closed_sessions`) and
    exploded at its instant, tagged with `_wt`."""
    cols = [c for c in w.schema if c not in SESSION_COLUMNS]
    packed = F.collect_list(F.struct(*[_c(c) for c in cols])).alias(ROWS)
    out = closed_sessions(rows, w, [packed], [ROWS])
    return out.select(_c(WT), *SESSION_COLUMNS, F.explode(ROWS).alias("_s_row")).select(
        _c(WT), *[F.col(f"_s_row.`{c}`").alias(c) for c in cols], *SESSION_COLUMNS)


def closed_sessions(rows: DataFrame, w, aggs: list, names: list[str]) -> DataFrame:
    """Aggregates `aggs` (named `names`) of each session of `w` over its readings `rows`:
    `session_window` grouped with the partition keys (Spark's own session state and
    merging, which joins readings at most the gap apart), then a tumbling window of the
    slide over each session's `window_time`: every session of instant tau (the first
    instant >= its end) is emitted together under the watermark. A reading whose end
    (ts + gap) is an instant gets a gap one microsecond shorter: the session closes at that
    instant, and a reading at exactly it begins the next one. The result is tagged with
    `_wt` (tau - 1 us) as every relation is, beside window_start, window_end and the keys."""
    gap, sl, o = us(w.gap_s), us(w.slide_s), us(w.offset_s)
    gaps = F.when(F.pmod(F.unix_micros(_c(TS)) + F.lit(gap - o), F.lit(sl)) == 0,
                  _seconds(gap - 1)).otherwise(_seconds(gap))
    part = [_c(k) for k in w.partition_by]
    # Spark refuses a session window without other keys: a key equal on every reading
    # then (a literal would be folded away before that check)
    by = part or [_c(TS).isNull().alias("_s_all")]
    sessions = (rows.groupBy(F.session_window(_c(TS), gaps).alias(SESSION), *by)
                .agg(*aggs, F.max(_c(TS)).alias("_s_last"))
                .select(F.window_time(SESSION).alias("_s_time"),
                        F.col(f"{SESSION}.start").alias("window_start"),
                        (F.col("_s_last") + F.expr(f"make_dt_interval(0, 0, 0, "
                                                   f"{gap / US_PER_S:.6f})")).alias("window_end"),
                        *part, *[_c(n) for n in names]))
    keys = [_c(k) for k in ("window_start", "window_end", *w.partition_by)]
    tumble = F.window("_s_time", f"{sl} microseconds", f"{sl} microseconds",
                      f"{o} microseconds" if o else None)  # the grid's slides
    return (sessions.groupBy(tumble.alias(WINDOW), *keys)
            .agg(*[F.first(_c(n)).alias(n) for n in names])
            .select(F.window_time(WINDOW).alias(WT), *keys, *[_c(n) for n in names]))


#: Spark's SQL of a list of DOUBLEs (conventions.list_value)
SPARK_LISTS = ListSql(size="size({l})", total="aggregate({l}, 0D, (a, v) -> a + v)",
                      squares="aggregate({l}, 0D, (a, v) -> a + (v - {m}) * (v - {m}))",
                      at="try_element_at({l}, CAST({i} AS INT))", div="div")


def session_values(df: DataFrame, aggs) -> DataFrame:
    """`df` with the value of each of `aggs` ((name, AggCall) pairs) that is a session's
    STDDEV, MEDIAN, ... (SORTED_NATIVE: its column a values_list) in place of its list: the
    mean first, a column of its own (db/sqlgen/session_values.py). Also of a session's rows
    that DuckDB hands over, which Spark aggregates as rows of an instant."""
    natives = {n: c for n, c in aggs if c.func in SORTED_NATIVE}
    if not natives:
        return df
    means = mean_names(df.columns, natives)
    out = df.withColumns({m: F.expr(list_mean(f"`{n}`", SPARK_LISTS))
                          for n, m in means.items()})
    return out.withColumns({n: F.expr(list_value(c, f"`{n}`", f"`{means.get(n, '')}`",
                                                 SPARK_LISTS))
                            for n, c in natives.items()}).drop(*means.values())
