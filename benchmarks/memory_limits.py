"""Which plans run out of memory, against the memory model's verdict (issue 25;
docs/cost-model.md, "Memory").

Run: python -m benchmarks.memory_limits --driver-memory 512m --rate 1000

Spark's heap is lowered (--driver-memory; the state capacity the model assumes is what that
heap holds, costmodel.memory.heap_state_capacity, as for the default 4 GB) and each query
runs at the paper's window sizes over generated smart-plug data: the windows filled in
micro-batches of 10 event seconds, then --measure-seconds at one per batch. Every point (query, placement, Spark state store) runs
in a process of its own, since an OutOfMemoryError ends Spark's JVM; its outcome is "ran",
"out of memory" (the JVM said so) or "failed"/"timed out". Beside it the model's verdict for
that plan under that capacity (qualified or not). Points: pure Spark with the heap store,
the optimizer's plan, and pure Spark with RocksDB where the heap store is predicted not to
fit or ran out. The check the issue asks for: no plan the model calls qualified ran out of
memory, and every point that ran out of memory was predicted unqualified. Writes
benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import say, write_result
from federation.smartplug.queries import QUERIES

OOM_SIGNS = ("OutOfMemoryError", "Java heap space", "GC overhead limit exceeded")


def capacity_profile(heap: str, store: str):
    """The cost profile of a run with `heap` as Spark's heap: the state it holds as Spark's
    state capacity, RocksDB's the local disk (off the heap), as `fedq run` would plan."""
    from costmodel.memory import heap_state_capacity, size_bytes
    from costmodel.profile import load_profile
    from federation.api import spe_profile

    if store == "rocksdb":
        return spe_profile(load_profile(), None, "rocksdb")[0]
    p = load_profile()
    return p.model_copy(update={"spe_memory_bytes": heap_state_capacity(size_bytes(heap), p)})


def verdict(name: str, plan: str, rate: float, store: str, heap: str, plugs: int) -> dict:
    """The memory model's prediction for one point (no JVM): the plan it runs, its Spark
    and DuckDB state, the capacity and whether it is qualified."""
    from costmodel.memory import plan_memory
    from federation.optimizer import plan_for

    profile = capacity_profile(heap, store)
    pp, _ = plan_for(QUERIES[name](rate=rate, plugs=plugs), plan, profile)
    m = plan_memory(pp, profile)
    return {"placement": pp.placement_string, "spark_bytes": m.spe_bytes,
            "db_bytes": m.db_bytes, "spark_capacity": m.spe_capacity,
            "qualified": m.fits, "exceeded": m.exceeded()}


def one(a: argparse.Namespace) -> int:
    """The child: one point, its outcome as a JSON line on stdout."""
    from federation.api import run
    from spe.session import SparkSettings, get_spark

    name, plan, store = a.one.split(",")
    spark = get_spark(SparkSettings(driver_memory=a.driver_memory))
    t0 = time.monotonic()
    r = run(QUERIES[name](rate=a.rate, plugs=a.plugs), plan, Path(a.data), work_dir=Path(a.work),
            seconds_per_batch=1, warmup_batch_s=10, drain=False, budget_s=a.budget,
            state_store=store, spark=spark,
            profile=capacity_profile(a.driver_memory, store))
    s = r.summary
    print(json.dumps({"outcome": "ran", "seconds": round(time.monotonic() - t0, 1),
                      "placement": s.placement, "peak_state": s.peak_state,
                      "batches": len(r.metrics), "truncated": s.truncated}))
    return 0


def point(a, data: Path, work: Path, name: str, plan: str, store: str) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.memory_limits", "--one", f"{name},{plan},{store}",
           "--data", str(data), "--work", str(work / "run"), "--rate", repr(a.rate),
           "--driver-memory", a.driver_memory, "--budget", repr(a.budget),
           "--plugs", str(a.plugs)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.budget + 600,
                           check=False)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = "", (e.stderr or b"").decode(errors="replace"), None
    finally:
        shutil.rmtree(work / "run", ignore_errors=True)
    res = {"query": name, "plan": plan, "state_store": store,
           "wall_s": round(time.monotonic() - t0, 1),
           "predicted": verdict(name, plan, a.rate, store, a.driver_memory, a.plugs)}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if rc == 0 and lines:
        res.update(json.loads(lines[-1]))
    else:
        oom = any(s in err for s in OOM_SIGNS)
        res["outcome"] = ("out of memory" if oom else "timed out" if rc is None
                          else "failed")
        res["error"] = [ln for ln in err.splitlines()
                        if any(s in ln for s in OOM_SIGNS + ("Error", "Exception"))][:6]
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", default="CQ1,CQ2,CQ3,CQ4,CQ5,CQ6")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--driver-memory", default="512m", help="Spark's heap for every point")
    ap.add_argument("--plugs", type=int, default=2125,
                    help="plugs of the generated data, and of the queries' declared stream")
    ap.add_argument("--measure-seconds", type=int, default=20)
    ap.add_argument("--budget", type=float, default=600.0, help="wall seconds per point")
    ap.add_argument("--out", default="memory_limits.json")
    ap.add_argument("--recheck", metavar="JSON",
                    help="no run: the verdicts of a results file's points (its heap, rate and "
                         "plugs) under today's memory model, and the check over them")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        return one(a)
    if a.recheck:
        return recheck(Path(a.recheck))
    from federation.smartplug.datagen import generate

    work = Path(tempfile.mkdtemp(prefix="fedq-memlim-"))
    points = []
    try:
        data = work / "data"
        generate(data, rate=a.rate, seconds=300 + a.measure_seconds + 2, plugs=a.plugs,
                 seed=1)
        for name in a.queries.split(","):
            spe = point(a, data, work, name, "spe", "memory")
            mine = [spe, point(a, data, work, name, "auto", "memory")]
            if spe["outcome"] != "ran" or not spe["predicted"]["qualified"]:
                mine.append(point(a, data, work, name, "spe", "rocksdb"))
            points += mine
            for p in mine:
                say(f"{name} {p['plan']} ({p['state_store']}): {p['outcome']} in "
                    f"{p['wall_s']} s; predicted Spark "
                    f"{p['predicted']['spark_bytes'] / 2**20:,.0f} MiB of "
                    f"{p['predicted']['spark_capacity'] / 2**20:,.0f}, "
                    f"{'qualified' if p['predicted']['qualified'] else 'NOT qualified'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    check, rows = judge(points)
    print("\n".join(rows))
    path = write_result(a.out, {"rate": a.rate, "plugs": a.plugs,
                                "driver_memory": a.driver_memory,
                                "measure_seconds": a.measure_seconds, "points": points,
                                "check": check, "table": rows})
    say(f"check: {check}")
    say(f"wrote {path}")
    return 0 if not check["qualified_that_ran_out"] else 1


def recheck(path: Path) -> int:
    """The points of an earlier run judged by today's model (the outcomes stay measured)."""
    d = json.loads(path.read_text())
    for p in d["points"]:
        p["predicted"] = verdict(p["query"], p["plan"], d["rate"], p["state_store"],
                                 d["driver_memory"], d["plugs"])
    check, rows = judge(d["points"])
    print("\n".join(rows))
    say(f"check ({path.name}, {d['driver_memory']} heap, today's model): {check}")
    return 0 if not check["qualified_that_ran_out"] else 1


def judge(points: list[dict]) -> tuple[dict, list[str]]:
    """The check the issue asks for over measured points, and their table."""
    ran_out = [p for p in points if p["outcome"] == "out of memory"]
    check = {
        "qualified_that_ran_out": [(p["query"], p["plan"], p["state_store"]) for p in ran_out
                                   if p["predicted"]["qualified"]],
        "ran_out": [(p["query"], p["plan"], p["state_store"]) for p in ran_out],
        "unqualified_that_ran": [(p["query"], p["plan"], p["state_store"]) for p in points
                                 if p["outcome"] == "ran" and not p["predicted"]["qualified"]],
    }
    rows = ["| query | plan | state store | predicted Spark MiB (capacity) | verdict | outcome |",
            "|---|---|---|---|---|---|"]
    for p in points:
        v = p["predicted"]
        rows.append(f"| {p['query']} | {p['plan']} | {p['state_store']} | "
                    f"{v['spark_bytes'] / 2**20:,.0f} ({v['spark_capacity'] / 2**20:,.0f}) | "
                    f"{'qualified' if v['qualified'] else 'not qualified'} | {p['outcome']} |")
    return check, rows


if __name__ == "__main__":
    raise SystemExit(main())
