"""Kill -9 campaign (issue 11): runs killed at random moments resume to the exact result.

Run: python -m benchmarks.faults --trials 24 [--seed 1] [--out faults.json]

Each trial runs `fedq run` on small smart-plug data (30 plugs, 60 event seconds, windows of
10/30/50 s, 2 event seconds per micro-batch) with one of the cases below, kills its whole
process group with SIGKILL one to three times, each time either after a random wall time or
at a named point of the micro-batch cycle (FEDQ_FAULT, runtime/recovery.FAULT_POINTS: at the
start of a batch, after the MIG's rows are in, just before and just after the DuckDB commit,
at the end of a batch, between two input files read ahead of the direct feed), then lets the same command finish. The result must equal the
reference evaluator's: same rows per slide instant, no duplicates, no missing instants. A
fresh uninterrupted run per case gives the work a resumed run saves (micro-batches and wall
time of the last, resumed run against the fresh one). Writes benchmarks/results/<out> with
every trial, kills and mismatches."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks.common import say, write_result
from db.reference import reference_result
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.runtime.recovery import FAULT_POINTS
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

RATE, PLUGS, SECONDS, SCALE = 60, 30, 60, 1 / 6
CASES = [
    ("CQ3", "op1=db,op2=db,op3=db,op4=db,op5=spe,op6=spe"),  # a DB result re-enters Spark
    ("CQ1", "auto"),
    ("CQ3", "spe"),
    ("CQ1", "db"),
    ("CQ6", "auto"),
    ("CQ2", "spe"),
    ("CQ5", "db"),  # the direct feed with its input read ahead (ahead.py): no JVM
    ("CQ2", "db"),
]
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"


def command(query: str, placement: str, data: Path, work: Path, out: Path) -> list[str]:
    return [sys.executable, "-c", CLI, "run", query, "--placement", placement,
            "--data", str(data), "--scale", repr(SCALE), "--seconds-per-batch", "2",
            "--work-dir", str(work), "--output", str(out), "--quiet", "--overwrite"]


def one_run(cmd: list[str], kill: tuple[str, float | str] | None) -> dict:
    """Run `cmd`; kill = ("time", seconds) or ("point", "name:n") or None."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("FEDQ_FAULT", None)
    if kill and kill[0] == "point":
        env["FEDQ_FAULT"] = str(kill[1])
    t0 = time.time()
    p = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    killed = False
    try:
        timeout = kill[1] if kill and kill[0] == "time" else 900
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        _, err = p.communicate()
        killed = True
    killed = killed or p.returncode == -9
    return {"kill": list(kill) if kill else None, "killed": killed, "rc": p.returncode,
            "wall_s": time.time() - t0, "resumed": "fedq: resuming" in (err or ""),
            "stderr_tail": (err or "")[-400:] if p.returncode not in (0, -9) else ""}


def summary_of(work: Path) -> dict:
    p = work / "summary.json"
    return json.loads(p.read_text()) if p.exists() else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="faults.json")
    ap.add_argument("--min-kills", type=int, default=1, help="kill attempts per trial, at least")
    ap.add_argument("--max-point", type=int, default=25,
                    help="a fault point fires at its n-th pass, n in 1..max-point")
    ap.add_argument("--kill-within", type=float, default=1.0,
                    help="timed kills fall within this share of a fresh run's wall time")
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    root = Path(tempfile.mkdtemp(prefix="fedq-faults-"))
    data = root / "data"
    generate(data, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=7)
    refs, fresh = {}, {}
    for query, placement in CASES:  # one uninterrupted run per case: its work and time
        work, out = root / f"fresh-{query}-{placement[:8]}", root / "fresh.parquet"
        r = one_run(command(query, placement, data, work, out), None)
        q = QUERIES[query](rate=RATE, scale=SCALE, plugs=PLUGS)
        refs[query] = reference_result(q, read_clean_rows(work / "input" / "smartplug" / "spool"))
        problem = diff_results(pq.read_table(out), refs[query])
        fresh[(query, placement)] = {"wall_s": r["wall_s"], "ok": problem is None,
                                     "batches": summary_of(work).get("data_batches")}
        say(f"fresh {query} {placement}: {r['wall_s']:.1f} s, "
            f"{'equal' if problem is None else problem}")
        shutil.rmtree(work, ignore_errors=True)
    trials = []
    for t in range(a.trials):
        query, placement = CASES[t % len(CASES)]
        work, out = root / f"t{t}", root / f"t{t}.parquet"
        cmd = command(query, placement, data, work, out)
        runs = []
        for _ in range(rng.randint(a.min_kills, 3)):
            if rng.random() < 0.5:  # a run without a JVM may be done within 6 s
                wall = fresh[(query, placement)]["wall_s"]
                lo = min(6.0, 0.2 * wall)
                kill = ("time", round(rng.uniform(lo, max(lo + 1.0, a.kill_within * wall)), 1))
            else:
                kill = ("point", f"{rng.choice(FAULT_POINTS)}:{rng.randint(1, a.max_point)}")
            runs.append(one_run(cmd, kill))
        last = one_run(cmd, None)
        runs.append(last)
        ok = last["rc"] == 0 and out.exists()
        problem = diff_results(pq.read_table(out), refs[query]) if ok else "no output"
        kills = sum(1 for r in runs if r["killed"])
        trials.append({"trial": t, "query": query, "placement": placement, "runs": runs,
                       "kills": kills, "mismatch": problem,
                       "last_run_batches": summary_of(work).get("data_batches"),
                       "fresh_batches": fresh[(query, placement)]["batches"]})
        say(f"trial {t}: {query} {placement}: {kills} kills, "
            f"{'equal' if problem is None else 'MISMATCH ' + str(problem)[:200]}")
        shutil.rmtree(work, ignore_errors=True)
    resumed = [tr for tr in trials if tr["runs"][-1]["resumed"]]
    saved = [tr["runs"][-1]["wall_s"] / fresh[(tr["query"], tr["placement"])]["wall_s"]
             for tr in resumed]
    doc = {"cases": [list(c) for c in CASES], "trials": trials,
           "fresh": [{"query": q, "placement": p, **v} for (q, p), v in fresh.items()],
           "totals": {"trials": len(trials), "kills": sum(t["kills"] for t in trials),
                      "mismatches": sum(1 for t in trials if t["mismatch"] is not None),
                      "resumed_runs": len(resumed),
                      "median_resumed_over_fresh_wall": statistics.median(saved)
                      if saved else None}}
    path = write_result(a.out, doc)
    say(f"{doc['totals']} -> {path}")
    shutil.rmtree(root, ignore_errors=True)
    return 0 if doc["totals"]["mismatches"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
