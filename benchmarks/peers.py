"""Nexmark on fedq against Flink SQL, side by side on this machine (issue 24 part 4).

Run: make peers-setup   (once: PyFlink in .venv-flink, its pins clash with fedq's)
     python -m benchmarks.peers --rate 200000 --seconds 60

One run generates Nexmark data (`fedq generate --nexmark`: persons, auctions, bids) and
feeds the same rows to every engine, one after the other, nothing else running:

- **Flink SQL** (PyFlink 2.3, local mini-cluster, parallelism 2) runs the Nexmark
  project's own query texts (benchmarks/queries_sql/nexmark/flink/) over the rows as CSV
  files (a filesystem source; PyFlink's pip package has no Parquet format and Maven is out
  of reach here), into a blackhole sink; q14's count_char is a Java class of the name
  Flink's text declares (benchmarks/flink_udf, compiled with the JDK's javac). Timed: from
  the INSERT's submission to its end (planning, deployment, CSV parsing, the query), after
  a warm-up job over a small input in the same JVM; the JVM's start is outside.
- **DuckDB alone**: a hand-written incremental loop per query over the same Parquet files
  (benchmarks/peers_duckdb.py: slices for q5, the current window's rows for q7 and q8), the
  way a DuckDB user would write it; timed whole, in one process.
- **Spark Structured Streaming in its best form**: each query written by hand in PySpark
  (benchmarks/peers_spark.py: panes then the sliding window for q5, a time-interval join
  for q7), Spark's Parquet file source over the same files, `--seconds-per-batch` files a
  micro-batch per stream, Spark's Parquet sink. Timed: from the query's start to the end of
  its last micro-batch (planning, reading and parsing the files, the query, the sink), in
  the same warm Spark session as fedq.
- **fedq** runs fedq's texts (benchmarks/queries_sql/nexmark/) with the optimizer's plan,
  pure Spark and pure DuckDB over the Parquet files, `--seconds-per-batch` event seconds a
  micro-batch, results kept (Parquet parts). Timed: the whole `run` call (ingest:
  validation, dead letters and spooling; planning; the Spark query; every micro-batch;
  the end), in a warm Spark session; the session's start is outside. A run longer than
  `--budget` wall seconds is stopped there and its steady-state rate reported instead
  (rho after the third micro-batch times the input rate; marked `truncated`).

events/s = the input's events (all three streams, Nexmark's count) / the timed seconds.
Before timing, a small input runs through Flink and fedq's plan, and each query's rows are
compared where the two mean the same (`CHECKS`). Results go to
benchmarks/results/peers.json and peers.png, with the Nexmark project's published
figures for Flink beside them (marked as published).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from benchmarks import peers_duckdb, peers_spark
from benchmarks.common import say, write_result
from federation.nexmark import SCHEMAS
from federation.nexmark.datagen import generate
from federation.parts import arrow_type
from federation.results import diff_results

ROOT = Path(__file__).resolve().parent.parent
FLINK_PY = ROOT / ".venv-flink" / "bin" / "python"
QUERIES = ROOT / "benchmarks" / "queries_sql" / "nexmark"
FLINK_TYPES = {"BIGINT": "BIGINT", "VARCHAR": "STRING", "TIMESTAMP": "TIMESTAMP(3)"}
#: the columns of Flink's result per query (its sink) and those fedq's rows share with it
FLINK_COLUMNS = {
    "q0": ["auction", "bidder", "price", "dateTime", "extra"],
    "q1": ["auction", "bidder", "price", "dateTime", "extra"],
    "q2": ["auction", "price"],
    "q5": ["auction", "num"],
    "q7": ["auction", "price", "bidder", "dateTime", "extra"],
    "q8": ["id", "name", "starttime"],
    "q10": ["auction", "bidder", "price", "dateTime", "extra", "dt", "hm"],
    "q11": ["bidder", "bid_count", "starttime", "endtime"],
    "q14": ["auction", "bidder", "price", "bidTimeType", "dateTime", "extra", "c_counts"],
    "q15": ["day", *(f"{w}_{k}" for k in ("bids", "bidders", "auctions")
                     for w in ("total", "rank1", "rank2", "rank3"))],
    "q16": ["channel", "day", "minute",
            *(f"{w}_{k}" for k in ("bids", "bidders", "auctions")
              for w in ("total", "rank1", "rank2", "rank3"))],
}
#: what the check compares: the columns both engines give, and how far they agree
CHECKS = {
    "q1": "price to 3 decimals (Flink DECIMAL(23, 3), fedq DOUBLE)",
    "q7": "Flink's BETWEEN keeps a bid at a window's end in two windows; fedq's windows "
          "are [start, end)",
    "q8": "Flink gives the window's start, fedq its end (tau); compared without it",
    "q11": "Flink groups by its legacy SESSION(dateTime, INTERVAL '10' SECOND), fedq reads "
           "SESSION(TABLE bid PARTITION BY bidder, ...); the same sessions, fedq's each at the "
           "first instant at or after its end (tau)",
    "q14": "price to 3 decimals (Flink DECIMAL, fedq DOUBLE); Flink's count_char is a "
           "Java class (benchmarks/flink_udf), fedq's a Python function",
    "q15": "Flink groups by the day's string (an updating aggregate: the check takes its "
           "final rows from Flink's batch mode), fedq by a daily TUMBLE (tau); compared "
           "without the day",
    "q16": "as q15, per channel",
}
#: Java functions Flink's texts declare (CREATE FUNCTION), compiled by `flink_jars`
FLINK_UDFS = ROOT / "benchmarks" / "flink_udf"
#: events/s per core from the Nexmark project's Flink results (issue 24), 8-vCPU RisingWave
PUBLISHED = {"flink_per_core": {"q5": 22_000, "q7": 12_000, "q8": 146_000},
             "risingwave_8vcpu": {"q5": 89_000, "q7": 296_000, "q8": 627_000}}


def to_csv(src: Path, dst: Path, schemas: dict = SCHEMAS) -> None:
    """Each stream's Parquet parts as one CSV file (timestamps as Flink reads them)."""
    for k, schema in schemas.items():
        (dst / k).mkdir(parents=True, exist_ok=True)
        with pcsv.CSVWriter(dst / k / "data.csv", pa.schema(
                [(c, pa.string() if t == "TIMESTAMP" else arrow_type(t))
                 for c, t in schema.items()]),
                write_options=pcsv.WriteOptions(include_header=False)) as w:
            for p in sorted((src / k).glob("part-*.parquet")):
                t = pq.read_table(p)
                # Flink's TIMESTAMP(3): milliseconds, truncated (never across a second)
                cols = [pc.strftime(pc.cast(t.column(c), pa.timestamp("ms"), safe=False),
                                    format="%Y-%m-%d %H:%M:%S")
                        if typ == "TIMESTAMP" else t.column(c) for c, typ in schema.items()]
                w.write_table(pa.table(cols, names=list(schema)))


def flink_jars() -> list[str]:
    """The jar of the Java functions Flink's texts declare (benchmarks/flink_udf),
    compiled with javac against PyFlink's own jars when missing or older than a source."""
    sources = sorted(FLINK_UDFS.glob("*.java"))
    jar = ROOT / ".venv-flink" / "fedq-peers-udf.jar"
    if jar.exists() and all(jar.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return [str(jar)]
    lib = next((ROOT / ".venv-flink" / "lib").glob("python3*/site-packages/pyflink/lib"))
    classes = Path(tempfile.mkdtemp(prefix="fedq-udf-"))
    try:
        subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(classes),
                        *map(str, sources)], check=True, capture_output=True, text=True)
        subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"compiling {FLINK_UDFS} for Flink's CREATE FUNCTION failed (a "
                         f"JDK's javac and jar are needed): {getattr(e, 'stderr', e)}")
    finally:
        shutil.rmtree(classes, ignore_errors=True)
    return [str(jar)]


def flink(csv: Path, warm: Path | None, names: list[str], out: Path | None,
          texts: Path = QUERIES / "flink", schemas: dict = SCHEMAS,
          time_column: str = "dateTime", timeout: float = 7200) -> dict:
    """Run the queries (`texts`/<name>.sql) in one PyFlink process; {query: seconds} (or
    {"error": ...}, also when the process outlives `timeout` wall seconds)."""
    if not FLINK_PY.exists():
        return {"error": f"{FLINK_PY} missing: run `make peers-setup`"}

    def tables(d: Path) -> dict:
        return {k: {"path": str(d / k), "time": time_column,
                    "columns": [[c, FLINK_TYPES.get(t, t)] for c, t in s.items()]}
                for k, s in schemas.items()}

    spec = {"tables": tables(csv), "warmup": tables(warm) if warm else None,
            "out": str(out) if out else None, "jars": flink_jars(),
            "queries": {q: (texts / f"{q.lower()}.sql").read_text() for q in names}}
    path = csv.parent / "flink_spec.json"
    path.write_text(json.dumps(spec))
    try:
        r = subprocess.run([str(FLINK_PY), str(ROOT / "benchmarks" / "flink_job.py"),
                            str(path)], capture_output=True, text=True, check=False,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        done = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        return {**{x["query"]: x["run_s"] for x in done if x["event"] == "query"},
                "error": f"Flink did not finish within {timeout:.0f} s"}
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode != 0:
        tail = [x for x in r.stderr.splitlines() if "Exception" in x or "Error" in x]
        return {"error": " | ".join(tail[-3:]) or r.stderr[-500:], "done": lines}
    return {x["query"]: x["run_s"] for x in lines if x["event"] == "query"}


def fedq(data: Path, name: str, placement: str, per_batch: int, spark,
         budget: float | None = None) -> tuple[float, dict]:
    """Seconds of one fedq run (module doc) and what it says of itself; `placement`
    "db:spe" is pure DuckDB with Spark forwarding every row (the paper's feed), "db" has
    the direct feed."""
    from federation import sql
    from federation.api import run
    from federation.streams import load_stream_decl

    streams = {k: load_stream_decl(data / k) for k in SCHEMAS}
    q = sql((QUERIES / f"{name}.sql").read_text(), streams)
    used = sorted({w.stream.name for w in q.walk() if w.kind == "window"})
    work = Path(tempfile.mkdtemp(prefix="fedq-peers-"))
    try:
        t0 = time.perf_counter()
        placement, _, feed = placement.partition(":")
        r = run(q, placement, {k: data / k for k in used}, work_dir=work,
                seconds_per_batch=per_batch, spark=spark, budget_s=budget,
                feed=feed or "direct")
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    s = r.summary
    return wall, {"placement": s.placement, "rows": s.result_rows, "rho_steady": s.rho_steady,
                  "ingest_cpu_s": s.ingest_cpu_s, "truncated": s.truncated,
                  "phases": s.phases, "cpu_s": s.cpu_s,
                  "result": r.rows}


def flink_points(fl: dict, names: list[str], events: int) -> list[dict]:
    """One point per query from `flink`'s answer (its error where it gave no time)."""
    out = []
    for q in names:
        s = fl.get(q)
        out.append({"query": q, "engine": "flink-sql", "seconds": s,
                    "events_per_s": events / s if s else None,
                    "error": fl.get("error") if s is None else None})
        say(f"  flink {q}: {s} s")
    return out


def duckdb_point(q: str, run, data: Path, events: int) -> dict:
    """The point of a hand-written DuckDB loop: `run(data, q)` (its rows) timed whole."""
    t0 = time.perf_counter()
    n = run(data, q).num_rows
    wall = time.perf_counter() - t0
    say(f"  duckdb alone {q}: {wall:.1f} s, {events / wall:,.0f} events/s")
    return {"query": q, "engine": "duckdb-alone", "seconds": round(wall, 3),
            "events_per_s": events / wall, "rows": n}


def fedq_point(q: str, placement: str, wall: float, info: dict, rate: float,
               events: int) -> dict:
    """The point of one fedq run: events over its wall time, or for a run stopped at the
    budget its steady-state rate (event seconds per wall second in the micro-batches after
    the third, times the input's rate)."""
    info = {k: v for k, v in info.items() if k != "result"}
    eps = rate * info["rho_steady"] if info["truncated"] else events / wall
    say(f"  fedq {placement} {q}: {wall:.1f} s, {eps:,.0f} events/s ({info['placement']}"
        f"{', stopped at the budget' if info['truncated'] else ''})")
    return {"query": q, "engine": f"fedq-{placement}", "seconds": round(wall, 3),
            "events_per_s": eps, **info}


def canonical(t: pa.Table, cols: list[str]) -> list[tuple]:
    out = []
    for row in zip(*(t.column(c).to_pylist() for c in cols)):
        out.append(tuple(round(float(v), 3) if isinstance(v, float) or type(v).__name__ ==
                         "Decimal" else v for v in row))
    return sorted(out, key=repr)


def check(data: Path, csv: Path, names: list[str], spark) -> dict:
    """Each query's rows from Flink and from fedq's plan over a small input, compared."""
    out = data.parent / "flink_out"
    got = flink(csv, None, names, out)
    if "error" in got:
        return {"error": got["error"]}
    report: dict = {}
    checks_duck: dict[str, bool] = {}
    checks_spark: dict[str, bool] = {}
    for q in names:
        files = [p for p in (out / q).rglob("*") if p.is_file() and not p.name.startswith(".")]
        cols = FLINK_COLUMNS[q]
        types = {**{c: pa.timestamp("ms") for c in ("dateTime", "starttime", "endtime")},
                 **{c: pa.string() for c in ("dt", "hm", "day", "minute", "extra")}}
        ft = pa.concat_tables(pcsv.read_csv(f, read_options=pcsv.ReadOptions(
            column_names=cols), convert_options=pcsv.ConvertOptions(
            column_types={c: t for c, t in types.items() if c in cols})) for f in files)
        _, info = fedq(data, q, "auto", 5, spark)
        mine = info["result"]
        if q in peers_duckdb.SUPPORTED:  # the hand-written loop means what fedq means
            alone = peers_duckdb.run(data, q)
            problem = diff_results(alone, mine)
            say(f"check {q}: duckdb-alone {alone.num_rows} rows, fedq {mine.num_rows}: "
                f"{problem or 'equal'}")
            checks_duck[q] = problem is None
        if q in peers_spark.SUPPORTED:  # so does the hand-written Spark query
            sp_out = data.parent / "spark_out" / q
            peers_spark.run(data, q, spark, 5, sp_out)
            problem = diff_results(peers_spark.rows(sp_out, q), mine)
            say(f"check {q}: spark-best vs fedq: {problem or 'equal'}")
            checks_spark[q] = problem is None
        common = [c for c in cols if c in mine.column_names]
        a, b = canonical(ft, common), canonical(mine, common)
        same = a == b
        report[q] = {"flink_rows": ft.num_rows, "fedq_rows": mine.num_rows, "columns": common,
                     "equal": same, "note": CHECKS.get(q, ""),
                     "duckdb_alone_equal": checks_duck.get(q),
                     "spark_best_equal": checks_spark.get(q)}
        if not same:
            sa, sb = set(a), set(b)
            report[q]["only_flink"] = [repr(x) for x in list(sa - sb)[:3]]
            report[q]["only_fedq"] = [repr(x) for x in list(sb - sa)[:3]]
        say(f"check {q}: flink {ft.num_rows} rows, fedq {mine.num_rows}, equal {same}")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=200_000, help="events per event second")
    ap.add_argument("--seconds", type=int, default=60, help="event seconds of input")
    ap.add_argument("--queries", default="q0,q1,q2,q5,q7,q8,q10,q11,q14,q15,q16")
    ap.add_argument("--placements", default="auto,spe,db,db:spe",
                    help="fedq's placements; db:spe is pure DuckDB fed through Spark")
    ap.add_argument("--seconds-per-batch", type=int, default=10)
    ap.add_argument("--budget", type=float, default=240.0,
                    help="wall seconds a fedq run may take; stopped there, its steady-state "
                         "rate is reported")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (kept)")
    ap.add_argument("--out", default="peers.json")
    a = ap.parse_args(argv)
    names = a.queries.split(",")
    work = a.work or Path(tempfile.mkdtemp(prefix="fedq-peers-data-"))
    from spe.session import get_spark

    spark = get_spark()
    say(f"small input for the check and the warm-up: {work / 'small'}")
    generate(work / "small" / "parquet", rate=2000, seconds=30, seed=11)
    to_csv(work / "small" / "parquet", work / "small" / "csv")
    checks = check(work / "small" / "parquet", work / "small" / "csv", names, spark)
    say(f"generating {a.rate} events/s x {a.seconds} s into {work / 'big'}")
    t0 = time.perf_counter()
    summary = generate(work / "big" / "parquet", rate=a.rate, seconds=a.seconds, seed=1)
    to_csv(work / "big" / "parquet", work / "big" / "csv")
    say(f"  {summary.events} events, {time.perf_counter() - t0:.0f} s (with the CSV copy)")
    events = summary.events
    points = []
    say("Flink SQL ...")
    points += flink_points(flink(work / "big" / "csv", work / "small" / "csv", names, None),
                           names, events)
    for q in names:
        if q in peers_duckdb.SUPPORTED:
            points.append(duckdb_point(q, peers_duckdb.run, work / "big" / "parquet", events))
        if q in peers_spark.SUPPORTED:
            out = work / "spark_out" / q
            shutil.rmtree(out, ignore_errors=True)
            wall = peers_spark.run(work / "big" / "parquet", q, spark, a.seconds_per_batch, out)
            shutil.rmtree(out, ignore_errors=True)
            points.append({"query": q, "engine": "spark-best", "seconds": round(wall, 3),
                           "events_per_s": events / wall})
            say(f"  spark best form {q}: {wall:.1f} s, {events / wall:,.0f} events/s")
        for pl in a.placements.split(","):
            wall, info = fedq(work / "big" / "parquet", q, pl, a.seconds_per_batch, spark,
                              a.budget)
            points.append(fedq_point(q, pl, wall, info, a.rate, events))
    payload = {"rate": a.rate, "seconds": a.seconds, "events": events,
               "rows": summary.rows, "seconds_per_batch": a.seconds_per_batch,
               "flink": "PyFlink 2.3.0, local, parallelism 2, CSV source, blackhole sink",
               "cpus": os.cpu_count(), "checks": checks, "points": points,
               "published": PUBLISHED}
    from benchmarks.peers_report import plot, ratios

    payload["ratios"] = ratios(points)
    path = write_result(a.out, payload)  # once: a second write would see the first (+dirty)
    plot(payload, path.with_suffix(".png"))
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
