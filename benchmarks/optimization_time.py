"""The paper's Tables 2 and 3: plans examined and optimization time per phase.

Run: python -m benchmarks.optimization_time [--repeat 5] [--max-subplan-ops 15]
Writes benchmarks/results/optimization_time.json (the committed result; `--out` names
another file or path) and prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.common import write_result
from costmodel.profile import load_profile
from federation.logical import NumberedPlan
from federation.optimizer.phase_one import join_shape, phase_one
from federation.optimizer.phase_two import phase_two
from federation.smartplug.queries import PAPER_SHAPES, QUERIES, kway_plan


def measure(query, profile, repeat: int, max_ops: int, reorder: bool) -> dict:
    p1, p2 = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        logical = phase_one(query, profile, reorder=reorder)
        t1 = time.perf_counter()
        res = phase_two(NumberedPlan.of(logical), profile, max_subplan_ops=max_ops)
        t2 = time.perf_counter()
        p1.append(t1 - t0)
        p2.append(t2 - t1)
    plan = NumberedPlan.of(logical)
    n = len(plan.r2r_ids)
    return {
        "r2r_operators": n,
        "plans_without_pruning": 2 ** n,
        "plans_with_pruning": res.examined,
        "subplans": res.subplans,
        "join_shape": join_shape(logical),
        "phase_one_s_median": statistics.median(p1),
        "phase_two_s_median": statistics.median(p2),
        "repeat": repeat,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--max-subplan-ops", type=int, default=15)
    ap.add_argument("--out", default="optimization_time.json",
                    help="result file: a bare name goes to benchmarks/results/, a path where "
                         "it says")
    a = ap.parse_args(argv)
    profile = load_profile()
    rows = []
    for k in (2, 5, 8):
        q = kway_plan(k, rate=a.rate)
        paper = measure(kway_plan(k, rate=a.rate, shape=PAPER_SHAPES[k]), profile, a.repeat,
                        10**6, reorder=False)
        rows.append({"query": f"{k}-way join", "variant": "paper's join shape, no decomposition",
                     **paper})
        rows.append({"query": f"{k}-way join", "variant": "paper's join shape, decomposition",
                     **measure(kway_plan(k, rate=a.rate, shape=PAPER_SHAPES[k]), profile,
                               a.repeat, a.max_subplan_ops, reorder=False)})
        rows.append({"query": f"{k}-way join", "variant": "our Phase-One, decomposition",
                     **measure(q, profile, a.repeat, a.max_subplan_ops, reorder=True)})
    for name, make in QUERIES.items():
        rows.append({"query": name, "variant": "our Phase-One, decomposition",
                     **measure(make(rate=a.rate), profile, a.repeat, a.max_subplan_ops, True)})
    path = write_result(a.out, {
        "rate": a.rate, "max_subplan_ops": a.max_subplan_ops, "profile": profile.name,
        "rows": rows,
        "paper": {"Table 3 pruned plans": {"2-way": 11, "5-way": 312, "8-way": 8411},
                  "8-way Phase-Two with pruning": "61 s (SAP ESP + HANA, 2015)"},
    })
    hdr = (f"{'query':<12} {'variant':<38} {'ops':>3} {'2^n':>10} {'pruned':>7} "
           f"{'phase1 ms':>9} {'phase2 ms':>9}  shape")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['query']:<12} {r['variant']:<38} {r['r2r_operators']:>3} "
              f"{r['plans_without_pruning']:>10} {r['plans_with_pruning']:>7} "
              f"{r['phase_one_s_median'] * 1e3:>9.2f} {r['phase_two_s_median'] * 1e3:>9.2f}  "
              f"{r['join_shape']}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
