"""Sources, tagged outputs and sinks of the Spark streaming queries of a plan's stages."""

from __future__ import annotations

import traceback
import weakref

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from federation.conventions import (
    CLOCK,
    DATA,
    KIND,
    OUT,
    PUNCT,
    PUNCTUATION,
    TICK,
    TS,
    WINDOW,
    WT,
    clock_tag,
    packed,
)
from spe.translate import SpeStream, spark_schema, window_column


def spool_source(spark, columns: dict[str, str], ts_column: str, path: str,
                 files_per_batch: int, delay_ms: int
                 ) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The validated input spool: (data rows with `_ts`, clock rows of punctuation, tick
    rows with `_ts`: one per slide instant of the stream's life, see federation.instants).

    The filters mention the event-time column so that Spark cannot push them below the
    watermark into the scan (punctuation would then never advance the watermark).
    """
    src = (spark.readStream.schema(spark_schema({**columns, KIND: "INT"}))
           .option("maxFilesPerTrigger", files_per_batch).parquet(path))
    src = src.withColumn(TS, F.col(ts_column)).withWatermark(TS, f"{delay_ms} milliseconds")
    clock = (src.filter(f"{KIND} = {PUNCTUATION} AND {TS} IS NOT NULL")
             .select(F.col(TS).alias(CLOCK)))
    ticks = src.filter(f"{KIND} = {TICK} AND {TS} IS NOT NULL").select(F.col(TS))
    return src.filter(f"{KIND} = {DATA} OR {TS} IS NULL").drop(KIND), clock, ticks


def reentry_source(spark, columns: dict[str, str], path: str, files_per_batch: int = 1
                   ) -> tuple[SpeStream, DataFrame]:
    """A DB-op's results re-entering Spark: (relation rows with `_wt`, clock rows), up to
    `files_per_batch` of its files (one per micro-batch of the stage before) a batch."""
    sch = spark_schema({WT: "TIMESTAMP", **columns, PUNCT: "BOOLEAN"})
    src = (spark.readStream.schema(sch).option("maxFilesPerTrigger", files_per_batch)
           .parquet(path)
           .withWatermark(WT, "0 milliseconds"))
    clock = src.filter(f"{PUNCT} AND {WT} IS NOT NULL").select(F.col(WT).alias(CLOCK))
    rows = src.filter(f"NOT {PUNCT} OR {WT} IS NULL").drop(PUNCT)
    return SpeStream(rows, False), clock


def select_columns(df: DataFrame, columns: list[str]) -> DataFrame:
    return df.select(*[F.col(f"`{c}`") for c in columns])


def tag_outputs(outputs: list[DataFrame], clocks: list[DataFrame]) -> DataFrame:
    """One DataFrame for one foreachBatch: output k as struct `packed(k)` with `OUT` = k,
    clock j as `CLOCK` with `OUT` = clock_tag(j) (one Arrow transfer per micro-batch)."""
    union = None
    for k, df in enumerate(outputs):
        # every field nullable: output k's struct is NULL in the rows of the others, and
        # Arrow cannot view a NULL struct whose field is declared NOT NULL (a CASE or a
        # COUNT is never NULL)
        loose = T.StructType([T.StructField(f.name, f.dataType, True) for f in df.schema])
        part = df.select(F.lit(k).alias(OUT),
                         F.struct(*[F.col(f"`{c}`") for c in df.columns]).cast(loose)
                         .alias(packed(k)))
        union = part if union is None else union.unionByName(part, allowMissingColumns=True)
    for j, clock in enumerate(clocks):
        part = clock.select(F.lit(clock_tag(j)).alias(OUT), F.col(CLOCK))
        union = union.unionByName(part, allowMissingColumns=True)
    return union


#: Spark's loggers of a streaming query that end with an error (its stack trace at ERROR)
_QUERY_LOGGERS = ("org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
                  "org.apache.spark.sql.execution.streaming.MicroBatchExecution")


def quiet_query_errors(spark, quiet: bool) -> None:
    """Silence (or restore) the ERROR and stack trace Spark logs when a streaming query's
    foreachBatch raises: fedq stops a run on purpose that way (a halt raises in the batch
    handler, so that Spark does not commit the batch it did not handle)."""
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.logging.log4j.core.config.Configurator
    level = (jvm.org.apache.logging.log4j.Level.OFF if quiet else
             jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel())
    for name in _QUERY_LOGGERS:
        conf.setLevel(name, level)


STATE_STORES = {
    "memory": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


def start_query(df: DataFrame, handler, checkpoint: str, name: str,
                trigger_seconds: float | None = None, state_store: str = "memory"):
    """Start the stage's streaming query in append mode with a foreachBatch sink, its
    state in `state_store` (STATE_STORES: Spark's default, in the executors' heap, or
    RocksDB, shipped with Spark: off heap and on local disk; a resumed query keeps the one
    its checkpoint was written with).

    Exchange reuse is off for the query (the stream clones the session's conf at start):
    when two branches of a plan read the same rows (a self-join of one aggregate), Spark
    plans the second branch's stateful operators over a ReusedExchange, and its watermark
    propagation does not see through it: those operators run with watermark 0, never
    evict, and everything above them waits forever (no row at all)."""
    df.sparkSession.conf.set("spark.sql.exchange.reuse", "false")
    df.sparkSession.conf.set("spark.sql.streaming.stateStore.providerClass",
                             STATE_STORES[state_store])
    quiet_query_errors(df.sparkSession, False)  # a halted run before may have silenced them
    w = (df.writeStream.outputMode("append").option("checkpointLocation", checkpoint)
         .queryName(name).foreachBatch(WeakHandler(handler)))
    if trigger_seconds:
        w = w.trigger(processingTime=f"{trigger_seconds} seconds")
    query = w.start()
    query.fedq_handler = handler  # the handler lives as long as the query's Python object
    return query


class WeakHandler:
    """What Spark calls for each micro-batch: the handler, through a weak reference.

    Py4J keeps the Python function a query calls (in its proxy pool) until the JVM has
    collected the query, and the JVM keeps the query while Python holds its StreamingQuery:
    a handler that reaches the StreamingQuery (through its stage) closed a cycle across the
    two collectors that neither breaks, and every run left its query, plans and state
    behind (a fuzz worker's 4-GB heap full after about 330 runs in one session). Held
    weakly here and strongly by the StreamingQuery, the handler goes with the run."""

    def __init__(self, handler) -> None:
        self._handler = weakref.ref(handler)

    def __call__(self, batch_df, batch_id: int) -> None:
        handler = self._handler()
        if handler is None:  # the run that started the query is gone: nothing to feed
            raise RuntimeError(f"micro-batch {batch_id} after its run ended")
        try:
            handler(batch_df, batch_id)
        except Exception as e:
            # PySpark's wrapper keeps the error (ForeachBatchFunction.error) while Py4J
            # keeps the wrapper: the frames of its traceback would hold the handler, and
            # so the query, again (a halted run's, a failed one's). Their lines stay.
            seen, x = set(), e
            while x is not None and id(x) not in seen:
                seen.add(id(x))
                traceback.clear_frames(x.__traceback__)
                x = x.__cause__ or x.__context__
            handler = batch_df = None  # this frame is in the traceback too
            raise


def instants_relation(ticks: DataFrame, extent_s: float, slide_s: float,
                      offset_s: float = 0.0) -> DataFrame:
    """One row (`_wt`) per slide instant of the query's life, possibly repeated: every tick
    in each window of the query's largest range that holds it (federation.instants)."""
    w = ticks.select(window_column(F.col(TS), extent_s, slide_s, offset_s).alias(WINDOW))
    return w.select(F.window_time(WINDOW).alias(WT))


def state_of(query) -> dict[str, int]:
    """Rows and bytes in the state stores of a streaming query after its last finished
    micro-batch (Spark's own metrics, `stateOperators` of its progress; empty before one)."""
    progress = getattr(query, "lastProgress", None) if query is not None else None
    ops = (progress or {}).get("stateOperators") or []
    if not ops:
        return {}
    return {"spark_state_rows": sum(int(o.get("numRowsTotal") or 0) for o in ops),
            "spark_state_bytes": sum(int(o.get("memoryUsedBytes") or 0) for o in ops)}
