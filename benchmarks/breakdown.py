"""Where fedq's time goes: each phase's fixed and marginal cost, beside DuckDB alone
(issue 45, part 1).

Run: python -m benchmarks.breakdown --out breakdown_before
     (defaults: Nexmark q0,q2,q5,q7,q8 at 200,000 events/s and the smart-plug CQ1,CQ3,CQ5
     at 100,000 readings/s, 2,125 plugs, windows at scale 0.1; 30 and 120 event seconds)

One run generates each input twice, `--small` and `--large` event seconds at the same rate
and seed (the small one is the large one's start), and runs on each, one after the other,
nothing else running, after an untimed warm-up run of the first query (imports, first
calls):

- **fedq**: the query's plan (`--placement`, default the optimizer's; `--feed`, default
  the direct feed), `--seconds-per-batch` event seconds a micro-batch, results kept. Timed:
  the whole `run` call (ingest, planning, start-up, every micro-batch, the end); Spark is
  started before, outside the timing, and only if the plan has a Spark-fed stage. The
  run's summary splits its wall and CPU seconds into phases (federation/runtime/phases.py:
  reading, validation, dead letters, spool, feed, Spark, the MIG, each DuckDB step, result
  collection and sinks, the end); what no phase holds is `other` (planning, Python between
  the steps).
- **DuckDB alone**: the hand-written incremental loop of the query
  (benchmarks/peers_duckdb.py, benchmarks/peers_smartplug_duckdb.py) over the same files,
  timed whole.

From the two sizes, per phase: the **marginal** cost (seconds per million input rows: the
slope between the two runs) and the **fixed** cost (the intercept: what a run pays with no
input). The marginal rate of each engine (added input rows per added second) and their
ratio are the issue's goal (fedq at least 0.5x DuckDB alone). Input rows are the rows of
the streams the query reads (Nexmark's bids for q0-q7; persons and auctions for q8).
Results: benchmarks/results/<out>.json and <out>.md (a table per query).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import peers_duckdb, peers_smartplug_duckdb
from benchmarks.common import say, write_result
from federation.runtime.phases import ORDER, process_cpu_s

ROOT = Path(__file__).resolve().parent.parent
NEXMARK = ("q0", "q2", "q5", "q7", "q8")
SMARTPLUG = ("CQ1", "CQ2", "CQ3", "CQ4", "CQ5", "CQ6")
PLUGS = 2125


def generate_inputs(root: Path, names: list[str], sizes: tuple[int, int], nx_rate: int,
                    sp_rate: int) -> dict:
    """{(kind, seconds): directory} of every input the queries need."""
    from federation.nexmark.datagen import generate as nexmark
    from federation.smartplug.datagen import generate as smartplug

    out = {}
    for s in sizes:
        for kind, rate, gen, kw in (("nexmark", nx_rate, nexmark, {}),
                                    ("smartplug", sp_rate, smartplug, {"plugs": PLUGS})):
            if not any(n in (NEXMARK if kind == "nexmark" else SMARTPLUG) for n in names):
                continue
            d = root / f"{kind}_{s}"
            done = d / ".generated"  # `--keep`: what an earlier run generated is reused
            if not done.exists() or done.read_text() != f"{rate}":
                say(f"generating {kind}, {s} s at {rate:,}/s")
                gen(d, rate=rate, seconds=s, **kw)
                done.write_text(f"{rate}")
            out[kind, s] = d
    return out


def query_of(name: str, data: Path, rate: int, scale: float):
    """The query and the data argument of `run` (Nexmark: its SQL text over the streams it
    reads; smart-plug: the CQ's plan at `scale`)."""
    if name in NEXMARK:
        from federation import sql
        from federation.streams import load_stream_decl

        streams = {k: load_stream_decl(data / k) for k in ("person", "auction", "bid")}
        q = sql((ROOT / "benchmarks/queries_sql/nexmark" / f"{name}.sql").read_text(), streams)
        used = sorted({w.stream.name for w in q.walk() if w.kind == "window"})
        return q, {k: data / k for k in used}
    from federation.smartplug.queries import QUERIES

    return QUERIES[name](rate=rate, plugs=PLUGS, scale=scale), data


def spark_if_needed(q, placement: str, feed: str):
    """A Spark session, started here (outside the timing), if the plan has a Spark-fed
    stage; else None (the run starts no JVM)."""
    from federation.api import spe_profile
    from federation.optimizer import plan_for
    from federation.runtime.direct import stage_feeds

    profile, _ = spe_profile(None, None, feed=feed)
    plan, _ = plan_for(q, placement, profile)
    if "spark" not in stage_feeds(plan, feed):
        return None, plan.placement_string
    from spe.session import get_spark

    return get_spark(), plan.placement_string


def fedq_run(name: str, data: Path, args) -> dict:
    from federation.api import run

    rate = args.nexmark_rate if name in NEXMARK else args.smartplug_rate
    q, where = query_of(name, data, rate, args.scale)
    spark, placement = spark_if_needed(q, args.placement, args.feed)
    work = Path(tempfile.mkdtemp(prefix="fedq-breakdown-"))
    try:
        t0 = time.perf_counter()
        r = run(q, args.placement, where, work_dir=work, seconds_per_batch=args.seconds_per_batch,
                spark=spark, feed=args.feed)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    s = r.summary
    phases = dict(s.phases)
    # the ingest may run in a thread of its own beside the rest (federation/runtime/ahead.py):
    # `other` is what the rest leaves of the wall
    phases["other"] = {"wall_s": round(wall - sum(p["wall_s"] for k, p in phases.items()
                                                  if not k.startswith("ingest.")), 4),
                       "cpu_s": 0.0, "calls": 0}
    say(f"  fedq {name} ({placement}): {wall:.2f} s, {s.input_rows:,} rows in, "
        f"{s.result_rows:,} out; CPU {s.cpu_s}")
    return {"wall_s": round(wall, 4), "input_rows": s.input_rows, "result_rows": s.result_rows,
            "placement": placement, "feed": args.feed, "cpu_s": s.cpu_s, "phases": phases}


def duckdb_run(name: str, data: Path, args) -> dict:
    c0, t0 = process_cpu_s(), time.perf_counter()
    if name in NEXMARK:
        n = peers_duckdb.run(data, name).num_rows
    else:
        n = peers_smartplug_duckdb.run(data, name, args.scale).num_rows
    wall, cpu = time.perf_counter() - t0, process_cpu_s() - c0
    say(f"  duckdb alone {name}: {wall:.2f} s, {n:,} rows out")
    return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 3), "result_rows": n}


def fit(small: dict, large: dict, rows: tuple[int, int]) -> dict:
    """Per phase: marginal seconds per million input rows and the fixed seconds (module doc)."""
    dn = (rows[1] - rows[0]) / 1e6
    out = {}
    for k in sorted(set(small["phases"]) | set(large["phases"]),
                    key=lambda k: ORDER.index(k) if k in ORDER else len(ORDER)):
        a, b = (x["phases"].get(k, {"wall_s": 0.0, "cpu_s": 0.0}) for x in (small, large))
        slope = (b["wall_s"] - a["wall_s"]) / dn
        out[k] = {"marginal_s_per_mrow": round(slope, 4),
                  "fixed_s": round(a["wall_s"] - slope * rows[0] / 1e6, 4),
                  "cpu_marginal_s_per_mrow": round((b["cpu_s"] - a["cpu_s"]) / dn, 4)}
    return out


def marginal_rate(small: dict, large: dict, rows: tuple[int, int]) -> float | None:
    dt = large["wall_s"] - small["wall_s"]
    return round((rows[1] - rows[0]) / dt) if dt > 0 else None


def table_md(name: str, r: dict) -> list[str]:
    lines = [f"### {name} ({r['fedq'][1]['placement']}, feed {r['fedq'][1]['feed']})", "",
             (f"input rows {r['rows'][0]:,} and {r['rows'][1]:,}; fedq {r['fedq'][0]['wall_s']}"
             f" and {r['fedq'][1]['wall_s']} s, DuckDB alone {r['duckdb'][0]['wall_s']} and "
             f"{r['duckdb'][1]['wall_s']} s; marginal rows/s: fedq "
             f"{r['fedq_marginal_rows_per_s'] or 0:,}, DuckDB alone "
             f"{r['duckdb_marginal_rows_per_s'] or 0:,} (ratio {r['ratio']})"), "",
             "| phase | marginal s per M rows | fixed s | CPU s per M rows |", "|---|---|---|---|"]
    for k, v in r["phases"].items():
        lines.append(f"| {k} | {v['marginal_s_per_mrow']} | {v['fixed_s']} | "
                     f"{v['cpu_marginal_s_per_mrow']} |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries", default=",".join((*NEXMARK, *SMARTPLUG)))
    p.add_argument("--small", type=int, default=30)
    p.add_argument("--large", type=int, default=120)
    p.add_argument("--nexmark-rate", type=int, default=200_000)
    p.add_argument("--smartplug-rate", type=int, default=100_000)
    p.add_argument("--scale", type=float, default=0.1, help="smart-plug window ranges")
    p.add_argument("--placement", default="auto")
    p.add_argument("--feed", default="direct", choices=("direct", "spe"))
    p.add_argument("--seconds-per-batch", type=int, default=5)
    p.add_argument("--out", default="breakdown")
    p.add_argument("--keep", type=Path, help="generate into (and reuse) this directory")
    args = p.parse_args(argv)
    names = args.queries.split(",")
    root = args.keep or Path(tempfile.mkdtemp(prefix="fedq-breakdown-data-"))
    sizes = (args.small, args.large)
    results = {}
    try:
        data = generate_inputs(root, names, sizes, args.nexmark_rate, args.smartplug_rate)
        # a first run in the process pays imports and first calls: once, outside the timing
        kind = "nexmark" if names[0] in NEXMARK else "smartplug"
        say(f"warm-up: {names[0]} on the small input, not timed")
        fedq_run(names[0], data[kind, sizes[0]], args)
        for name in names:
            kind = "nexmark" if name in NEXMARK else "smartplug"
            say(f"{name}")
            fq = [fedq_run(name, data[kind, s], args) for s in sizes]
            db = [duckdb_run(name, data[kind, s], args) for s in sizes]
            rows = (fq[0]["input_rows"], fq[1]["input_rows"])
            fm, dm = marginal_rate(*fq, rows), marginal_rate(*db, rows)
            results[name] = {"rows": rows, "fedq": fq, "duckdb": db, "phases": fit(*fq, rows),
                             "fedq_marginal_rows_per_s": fm, "duckdb_marginal_rows_per_s": dm,
                             "ratio": round(fm / dm, 3) if fm and dm else None}
            say(f"  marginal rows/s: fedq {fm}, DuckDB alone {dm}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    out = args.out if args.out.endswith(".json") else args.out + ".json"
    path = write_result(out, {"args": vars(args) | {"keep": str(args.keep)},
                                   "queries": results})
    md = ["# Where the time goes", "", (f"`python -m benchmarks.breakdown {' '.join(sys.argv[1:] if argv is None else argv)}`"
          " (module doc: benchmarks/breakdown.py)"), ""]
    for name, r in results.items():
        md += table_md(name, r)
    path.with_suffix(".md").write_text("\n".join(md))
    say(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
