"""Measured rho of the optimizer's plan, pure-SPE and pure-DB, side by side in one run.

Run: python -m benchmarks.side_by_side --queries CQ1,CQ3 --rates 2000,20000 --seconds 40
Writes benchmarks/results/side_by_side.json. rho = event seconds processed per wall second
(docs/architecture.md), one event second per micro-batch, as fast as the plan can go; `rho_steady`
uses the median batch time after the first three batches. rho excludes the ingest (the input
is validated before Spark's queries start; `ingest_cpu_s` is recorded beside it) and Spark's
start-up; before the timed runs Spark is warmed up by an untimed run of the first query and
plan over the first --warmup-seconds event seconds, so that the first timed plan does not
pay the JVM's first micro-batches. Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.common import say, write_result
from federation.api import run
from federation.results import diff_results
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", default="CQ1,CQ3")
    ap.add_argument("--rates", default="2000,20000")
    ap.add_argument("--plans", default="auto,spe,db")
    ap.add_argument("--seconds", type=int, default=40)
    ap.add_argument("--plugs", type=int, default=500)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--warmup-seconds", type=int, default=20,
                    help="event seconds of the untimed warm-up run (0: none)")
    ap.add_argument("--out", default="side_by_side.json")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedq-sbs-"))
    rows = []
    for k, rate in enumerate(float(x) for x in a.rates.split(",")):
        data = work / f"data{int(rate)}"
        generate(data, rate=rate, seconds=a.seconds, plugs=a.plugs, seed=1)
        if k == 0 and a.warmup_seconds > 0:
            name, plan = a.queries.split(",")[0], a.plans.split(",")[0]
            say(f"warming Spark up: {name} ({plan}) over {a.warmup_seconds} event s, untimed")
            run(QUERIES[name](rate=rate, scale=a.scale, plugs=a.plugs), plan, data,
                work_dir=work / "warmup", seconds_per_batch=1, max_files=a.warmup_seconds)
        for name in a.queries.split(","):
            q = QUERIES[name](rate=rate, scale=a.scale, plugs=a.plugs)
            results = {}
            for plan in a.plans.split(","):
                print(f"{name} @ {rate:.0f}/s: {plan} ...", file=sys.stderr, flush=True)
                r = run(q, plan, data, work_dir=work / f"{name}_{int(rate)}_{plan}",
                        seconds_per_batch=1)
                results[plan] = r
                s = r.summary
                rows.append({"query": name, "rate": rate, "plan": plan,
                             "placement": s.placement, "rho": s.rho,
                             "rho_steady": s.rho_steady, "wall_s": s.wall_s,
                             "ingest_cpu_s": s.ingest_cpu_s,
                             "result_rows": s.result_rows, "predicted": s.predicted.model_dump(),
                             "batch_wall_s": [m.wall_s for m in r.metrics
                                              if m.stage == 0]})
                print(f"   rho {s.rho:.2f} steady {s.rho_steady:.2f} "
                      f"({s.placement})", file=sys.stderr, flush=True)
            base = next(iter(results.values())).rows
            equal = all(diff_results(r.rows, base) is None for r in results.values())
            for row in rows[-len(results):]:
                row["outputs_equal"] = equal
    path = write_result(a.out, {"seconds": a.seconds, "plugs": a.plugs, "scale": a.scale,
                                "warmup_seconds": a.warmup_seconds, "rows": rows})
    print("rho excludes the ingest and Spark's start-up; "
          + ("Spark warmed up by an untimed run first" if a.warmup_seconds > 0 else
             "NOT warmed up: the first plan pays the JVM's first batches"))
    print(f"{'query':<5} {'rate':>6} {'plan':<5} {'rho':>6} {'steady':>7}  placement")
    for r in rows:
        print(f"{r['query']:<5} {r['rate']:>6.0f} {r['plan']:<5} {r['rho']:>6.2f} "
              f"{r['rho_steady']:>7.2f}  {r['placement']}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
