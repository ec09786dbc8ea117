"""Spark Structured Streaming in its best form: each Nexmark query written by hand in
PySpark (a peer of `benchmarks.peers`), the way a Spark expert would write it without fedq.

Each stream is Spark's own Parquet file source over the generated event-second files
(`maxFilesPerTrigger` files a micro-batch per stream, in mtime order, the generator's
order), under a watermark on `dateTime` with no delay. The forms:

- q0, q1, q2: a `select` / `filter` per row, no state;
- q5 (HOP 2 s / 10 s): partial counts per (2-s pane, auction), then Spark's sliding
  `window()` of 10 s over the panes summing them (each bid counted once, not five times),
  the maximum per window, and a stream-stream join of the counts with it on the window and
  the count;
- q7 (TUMBLE 10 s): the maximum price per window, and a time-interval join of the bids
  with it (a bid matches the maximum of the window holding it and its price);
- q8 (TUMBLE 10 s): distinct persons and distinct sellers per window (Spark's window
  aggregates), joined on the window and the id.

The last windows close by a punctuation file per stream (one row far in the future, the
last mtime; removed by a filter on `dateTime`, which keeps the filter above the watermark:
spe/SPARK_TRIALS.md, pitfall 0): the peer reads hard links of the data files beside it,
so every engine reads the same files. Results go to Spark's Parquet file sink (fedq keeps
its results as Parquet too). `run(data, name, spark, per_batch, out)` returns the wall
seconds from the query's start to the end of the last micro-batch, in a warm session.
`rows(out, name)` reads the results back with `tau` (the instant, the window's end, as fedq
gives it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.nexmark import SCHEMAS

SUPPORTED = ("q0", "q1", "q2", "q5", "q7", "q8")
#: the streams each query reads
STREAMS = {"q8": ("person", "auction")}
PUNCTUATION = datetime(2100, 1, 1)


def _feed(data: Path, stream: str, into: Path) -> Path:
    """Hard links of the stream's files, and a punctuation file with a later mtime."""
    d = into / stream
    d.mkdir(parents=True)
    last = 0.0
    for p in sorted((data / stream).glob("part-*.parquet")):
        os.link(p, d / p.name)
        last = max(last, p.stat().st_mtime)
    schema = pq.read_schema(next(d.glob("part-*.parquet")))
    row = {f.name: [PUNCTUATION if f.name == "dateTime" else None] for f in schema}
    # join keys must not be NULL (Spark pushes `isnotnull(key)` below the watermark)
    for k in ("id", "seller", "auction", "price"):
        if k in row:
            row[k] = [-1]
    punct = d / "part-99999999.parquet"
    pq.write_table(pa.Table.from_pydict(row, schema=schema), punct)
    os.utime(punct, (last + 1, last + 1))
    return d


def _spark_schema(stream: str):
    from spe.translate import spark_schema

    return spark_schema(SCHEMAS[stream])


def build(spark, dirs: dict[str, Path], name: str, per_batch: int):
    """The query's streaming DataFrame (module doc), with `tau` first."""
    from pyspark.sql import functions as F

    def source(stream: str, *cols: str):
        df = (spark.readStream.schema(_spark_schema(stream))
              .option("maxFilesPerTrigger", per_batch).parquet(str(dirs[stream])))
        if cols:
            df = df.select(*cols)
        return (df.withWatermark("dateTime", "0 seconds")
                .filter(F.col("dateTime") < F.lit(PUNCTUATION)))

    def instant(col: str):  # the NOW window's instant: the end of the row's second
        return (F.date_trunc("second", F.col(col)) + F.expr("INTERVAL 1 SECOND")).alias("tau")

    def tau(wt: str):  # a window's end from its window_time
        return (F.col(wt) + F.expr("INTERVAL 1 MICROSECOND")).alias("tau")

    if name == "q0":
        b = source("bid", "auction", "bidder", "price", "dateTime", "extra")
        return b.select(instant("dateTime"), "auction", "bidder", "price", "dateTime", "extra")
    if name == "q1":
        b = source("bid", "auction", "bidder", "price", "dateTime", "extra")
        return b.select(instant("dateTime"), "auction", "bidder",
                        (F.lit(0.908) * F.col("price")).alias("price"), "dateTime", "extra")
    if name == "q2":
        b = source("bid", "auction", "price", "dateTime")
        return b.filter(F.col("auction") % 123 == 0).select(instant("dateTime"), "auction",
                                                            "price")
    if name == "q5":
        b = source("bid", "auction", "dateTime")
        panes = (b.groupBy(F.window("dateTime", "2 seconds"), "auction")
                 .agg(F.count(F.lit(1)).alias("n"))
                 .select(F.window_time("window").alias("pt"), "auction", "n"))
        counts = (panes.groupBy(F.window("pt", "10 seconds", "2 seconds"), "auction")
                  .agg(F.sum("n").alias("num"))
                  .select(F.window_time("window").alias("wt"), "auction", "num"))
        top = (counts.groupBy("wt").agg(F.max("num").alias("maxn"))
               .select(F.col("wt").alias("mwt"), "maxn"))
        j = counts.join(top, (F.col("wt") == F.col("mwt")) & (F.col("num") == F.col("maxn")))
        return j.select(tau("wt"), "auction", "num")
    if name == "q7":
        b = source("bid", "auction", "price", "bidder", "dateTime", "extra")
        top = (b.groupBy(F.window("dateTime", "10 seconds"))
               .agg(F.max("price").alias("maxprice"))
               .select(F.window_time("window").alias("wt"), "maxprice"))
        cond = ((F.col("price") == F.col("maxprice")) & (F.col("dateTime") <= F.col("wt"))
                & (F.col("dateTime") > F.col("wt") - F.expr("INTERVAL 10 SECONDS")))
        return b.join(top, cond).select(tau("wt"), "auction", "price", "bidder", "dateTime",
                                        "extra")
    if name == "q8":
        p = (source("person", "id", "name", "dateTime")
             .groupBy(F.window("dateTime", "10 seconds"), "id", "name").agg(F.count(F.lit(1)))
             .select(F.window_time("window").alias("wt"), "id", "name"))
        a = (source("auction", "seller", "dateTime")
             .groupBy(F.window("dateTime", "10 seconds"), "seller").agg(F.count(F.lit(1)))
             .select(F.window_time("window").alias("awt"), "seller"))
        j = p.join(a, (F.col("wt") == F.col("awt")) & (F.col("id") == F.col("seller")))
        return j.select(tau("wt"), "id", "name")
    raise ValueError(f"no hand-written Spark form for {name} (one of {', '.join(SUPPORTED)})")


def run(data: Path, name: str, spark, per_batch: int, out: Path) -> float:
    """Wall seconds of the query over the Nexmark directories under `data` (module doc);
    its rows are left in `out` (read them with `rows`)."""
    scratch = Path(tempfile.mkdtemp(prefix="fedq-peer-spark-"))
    try:
        dirs = {s: _feed(data, s, scratch / "in") for s in STREAMS.get(name, ("bid",))}
        df = build(spark, dirs, name, per_batch)
        t0 = time.perf_counter()
        q = (df.writeStream.format("parquet").outputMode("append")
             .option("checkpointLocation", str(scratch / "chk")).option("path", str(out))
             .start())
        q.processAllAvailable()
        q.stop()
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return wall


def rows(out: Path, name: str) -> pa.Table:
    """The rows the query left in `out`, timestamps in microseconds as fedq gives them."""
    files = sorted(out.glob("*.parquet"))
    if not files:
        return pa.table({})
    t = pa.concat_tables(pq.read_table(f) for f in files)
    cols = []
    for c in t.column_names:
        col = t.column(c)
        if pa.types.is_timestamp(col.type):
            col = pc.cast(col, pa.timestamp("us"))
        cols.append(col)
    return pa.table(cols, names=t.column_names)
