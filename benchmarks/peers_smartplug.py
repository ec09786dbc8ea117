"""The smart-plug queries CQ1-CQ6 on fedq against Flink SQL, side by side (issue 24 part 4).

Run: make peers-setup   (once)
     python -m benchmarks.peers_smartplug --rate 50000 --seconds 360

One run generates smart-plug data (`fedq generate`, 2,125 plugs) and feeds the same rows
to every engine, one after the other, nothing else running:

- **Flink SQL** (PyFlink 2.3, local, parallelism 2): CQ3-CQ6 written for Flink
  (benchmarks/queries_sql/smartplug_flink/): HOP window TVF aggregates (Flink slices
  sliding windows), joined per instant by interval joins of zero width on their
  `window_time`, CQ5 as Flink's cascading window aggregate; the rows as one CSV file, a
  blackhole sink. Timed as in `benchmarks.peers`: the INSERT's submission to its end, after
  a warm-up job over the small input.
- **DuckDB alone**: CQ1-CQ6 as hand-written incremental loops
  (benchmarks/peers_smartplug_duckdb.py: a slice row per plug and second, CQ1/CQ2 also the
  window's load rows, one statement per instant), the physical-limit anchor; checked
  against fedq's rows on the small input; timed whole, in one process.
- **fedq**: the optimizer's plan (auto), pure Spark (whose window aggregates are the best
  Spark form since this change: partial aggregates per 1-s pane, then the sliding window
  over the panes; it is the Spark peer here, a hand-written PySpark query would be the
  same operators) and pure DuckDB, `--seconds-per-batch` event seconds a micro-batch,
  results kept. Timed: the whole `run` call (ingest, planning, every micro-batch, the end)
  in a warm Spark session.

CQ1 and CQ2 (window rows against their window's aggregate) are written for Flink as an
interval join of the load rows with the HOP aggregate, then a 1-s TUMBLE over the
aggregate's window_time: `--queries CQ1,CQ2` (measured at 20,000 rows/s: Flink joins each
row with its 300 windows' aggregates; `--flink-timeout` bounds it). Before timing, a small input runs through Flink and fedq's
plan and the rows are compared (`tau` = Flink's window_end). events/s = input rows / timed
seconds; each run is the whole input once, windows filling for the first 5 minutes.
Results: benchmarks/results/peers_smartplug.json and .png.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv

from benchmarks import peers_smartplug_duckdb
from benchmarks.common import say, write_result
from benchmarks.peers import duckdb_point, fedq_point, flink, flink_points, to_csv
from federation.results import diff_results
from federation.smartplug import SMARTPLUG_SCHEMA
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ROOT / "benchmarks" / "queries_sql" / "smartplug_flink"
SCHEMAS = {"smartplug": SMARTPLUG_SCHEMA}
NAMES = ("CQ3", "CQ4", "CQ5", "CQ6")


def fedq(data: Path, name: str, placement: str, rate: float, plugs: int, per_batch: int,
         spark, budget: float | None = None) -> tuple[float, dict]:
    from federation.api import run

    work = Path(tempfile.mkdtemp(prefix="fedq-peers-sp-"))
    try:
        t0 = time.perf_counter()
        r = run(QUERIES[name](rate=rate, plugs=plugs), placement, data, work_dir=work,
                seconds_per_batch=per_batch, spark=spark, budget_s=budget)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    s = r.summary
    return wall, {"placement": s.placement, "rows": s.result_rows, "rho_steady": s.rho_steady,
                  "ingest_cpu_s": s.ingest_cpu_s, "truncated": s.truncated,
                  "phases": s.phases, "cpu_s": s.cpu_s, "result": r.rows}


def flink_rows(out: Path, name: str, columns: list[str]) -> pa.Table:
    files = [p for p in (out / name).rglob("*") if p.is_file() and not p.name.startswith(".")]
    return pa.concat_tables(pcsv.read_csv(f, read_options=pcsv.ReadOptions(
        column_names=columns), convert_options=pcsv.ConvertOptions(
        column_types={"tau": pa.timestamp("us")})) for f in files)


def check(work: Path, names: list[str], rate: float, plugs: int, spark) -> dict:
    """Each query's rows from Flink and from fedq's plan over the small input."""
    got = flink(work / "csv", None, names, work / "flink_out", TEXTS, SCHEMAS, "ts")
    if "error" in got:
        return {"error": got["error"]}
    report = {}
    for name in names:
        _, info = fedq(work / "parquet" / "smartplug", name, "auto", rate, plugs, 5, spark)
        mine = info["result"]
        ft = flink_rows(work / "flink_out", name, mine.column_names)
        problem = diff_results(ft, mine)
        alone = peers_smartplug_duckdb.run(work / "parquet" / "smartplug", name)
        duck = diff_results(alone, mine)  # the hand-written loop means what fedq means
        report[name] = {"flink_rows": ft.num_rows, "fedq_rows": mine.num_rows,
                        "equal": problem is None, "problem": problem,
                        "duckdb_alone_equal": duck is None, "duckdb_alone_problem": duck}
        say(f"check {name}: flink {ft.num_rows} rows, fedq {mine.num_rows}: "
            f"{problem or 'equal'}; duckdb alone {alone.num_rows}: {duck or 'equal'}")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=50_000, help="tuples per event second")
    ap.add_argument("--seconds", type=int, default=360, help="event seconds of input")
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--queries", default=",".join(NAMES))
    ap.add_argument("--placements", default="auto,spe,db")
    ap.add_argument("--seconds-per-batch", type=int, default=10)
    ap.add_argument("--budget", type=float, default=600.0,
                    help="wall seconds a fedq run may take (then its steady-state rate)")
    ap.add_argument("--flink-timeout", type=float, default=3600.0,
                    help="wall seconds the Flink process may take for all the queries")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", default="peers_smartplug.json")
    a = ap.parse_args(argv)
    names = a.queries.split(",")
    work = a.work or Path(tempfile.mkdtemp(prefix="fedq-peers-sp-data-"))
    from spe.session import get_spark

    spark = get_spark()
    small = work / "small"
    say(f"small input for the check and the warm-up: {small}")
    generate(small / "parquet" / "smartplug", rate=500, seconds=400, plugs=50, seed=3)
    to_csv(small / "parquet", small / "csv", SCHEMAS)
    checks = check(small, names, 500, 50, spark)
    big = work / "big"
    say(f"generating {a.rate:.0f} tuples/s x {a.seconds} s, {a.plugs} plugs into {big}")
    rows = generate(big / "parquet" / "smartplug", rate=a.rate, seconds=a.seconds,
                    plugs=a.plugs, seed=1).rows
    to_csv(big / "parquet", big / "csv", SCHEMAS)
    say("Flink SQL ...")
    points = flink_points(flink(big / "csv", small / "csv", names, None, TEXTS, SCHEMAS, "ts",
                                a.flink_timeout), names, rows)
    for q in names:  # DuckDB alone: the hand-written loop, timed whole, in this process
        points.append(duckdb_point(q, peers_smartplug_duckdb.run, big / "parquet" / "smartplug",
                                   rows))
        for pl in a.placements.split(","):
            wall, info = fedq(big / "parquet" / "smartplug", q, pl, a.rate, a.plugs,
                              a.seconds_per_batch, spark, a.budget)
            points.append(fedq_point(q, pl, wall, info, a.rate, rows))
    payload = {"rate": a.rate, "seconds": a.seconds, "plugs": a.plugs, "events": rows,
               "seconds_per_batch": a.seconds_per_batch,
               "flink": "PyFlink 2.3.0, local, parallelism 2, CSV source, blackhole sink",
               "cpus": os.cpu_count(), "checks": checks, "points": points,
               "title": f"CQ3-CQ6, {rows:,} tuples, {os.cpu_count()} cores"}
    from benchmarks.peers_report import plot, ratios

    payload["ratios"] = ratios(points)
    path = write_result(a.out, payload)
    plot(payload, path.with_suffix(".png"))
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
