"""Predicted state memory against measured, per engine (issue 25; docs/cost-model.md,
"Memory").

Run: python -m benchmarks.memory --queries CQ1,CQ2,CQ3,CQ4,CQ5,CQ6 --rates 1000,5000,20000

For each query, rate and placement (pure Spark, pure DuckDB, the optimizer's plan) one run
over generated smart-plug data: the windows are filled in micro-batches of 10 event
seconds, then --measure-seconds event seconds at one per micro-batch. Measured: the largest
state at steady state (`steady_state`: the one-second batches; Spark's `numRowsTotal` and
`memoryUsedBytes` of its state operators, every 10th batch; DuckDB's `duckdb_memory()`,
every batch; the peak over every batch, `RunSummary.peak_state`, is kept beside it as
`peak`), against the memory model's prediction for the plan
(`RunSummary.predicted_memory`). Fitted and printed: Spark's bytes per state row besides
its columns (median), DuckDB's compressed bytes per value (`fit_compressed`) and, with
--heap, the heap a predicted byte of Spark state takes at a batch's peak (the largest
over the points whose state is at least 64 MiB; the driver's live heap after a forced
collection, every second). Writes
benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import tempfile
from pathlib import Path

from benchmarks.common import say, write_result
from federation.api import run
from federation.runtime.summary import largest_state
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", default="CQ1,CQ2,CQ3,CQ4,CQ5,CQ6")
    ap.add_argument("--rates", default="1000,5000,20000")
    ap.add_argument("--plans", default="spe,db,auto")
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--scale", type=float, default=0.1, help="window range scale (1 = paper)")
    ap.add_argument("--measure-seconds", type=int, default=24,
                    help="one-second batches after the windows are full (DuckDB's memory "
                         "swings over the 20 slides between two CHECKPOINTs: sample them all)")
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--state-store", choices=["memory", "rocksdb"], default="memory",
                    help="Spark's state store for every run")
    ap.add_argument("--heap", action="store_true",
                    help="also sample Spark's live heap (a full GC every second) and fit the "
                         "heap per state byte (spe_heap_per_state_byte)")
    ap.add_argument("--out", default="memory.json")
    a = ap.parse_args(argv)
    from costmodel.profile import load_profile

    spe_per_row = load_profile().spe_state_bytes_per_row
    work = Path(tempfile.mkdtemp(prefix="fedq-mem-"))
    points = []
    try:
        for rate in (float(r) for r in a.rates.split(",")):
            seconds = int(300 * a.scale) + a.measure_seconds + 2
            data = work / f"data{int(rate)}"
            generate(data, rate=rate, seconds=seconds, plugs=a.plugs, seed=1)
            for name in a.queries.split(","):
                q = QUERIES[name](rate=rate, scale=a.scale, plugs=a.plugs)
                for plan in a.plans.split(","):
                    with heap_sampler(a.heap) as heap:
                        r = run(q, plan, data, work_dir=work / "run", seconds_per_batch=1,
                                warmup_batch_s=10, drain=False, budget_s=a.budget,
                                state_store=a.state_store, memory_check=False)
                    shutil.rmtree(work / "run", ignore_errors=True)
                    s = r.summary
                    pt = {"query": name, "rate": rate, "plan": plan,
                          "placement": s.placement, "measured": steady_state(r.metrics),
                          "peak": s.peak_state, "predicted": s.predicted_memory,
                          "truncated": s.truncated}
                    if heap is not None:
                        pt["live_heap"] = {"before": heap.before, "peak": heap.peak,
                                           "samples": len(heap.samples)}
                    points.append(pt)
                    m, p = pt["measured"], s.predicted_memory
                    say(f"{name} @ {rate:.0f}/s {plan}: Spark rows {m['spark_rows']:,} "
                        f"(predicted {p['spark_rows']:,.0f}), bytes {m['spark_bytes']:,} "
                        f"({p['spark_bytes']:,.0f}); DuckDB bytes {m['db_bytes']:,} "
                        f"({p['db_bytes']:,.0f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    fit = {}
    per_row = [spe_per_row + (p["measured"]["spark_bytes"] - p["predicted"]["spark_bytes"])
               / p["predicted"]["spark_rows"] for p in points
               if p["predicted"]["spark_rows"] and p["measured"]["spark_bytes"]]
    if per_row:  # the overhead per state row that predicts each point's bytes exactly
        fit["spe_state_bytes_per_row"] = statistics.median(per_row)
    per_byte = [heap_per_state_byte(p) for p in points
                if "live_heap" in p and p["predicted"]["spark_bytes"] >= HEAP_FIT_MIN_STATE]
    if per_byte:
        fit["spe_heap_per_state_byte"] = max(per_byte)
    db_points = [p for p in points if p["measured"]["db_bytes"]]
    if db_points:
        fit["db_compressed_bytes_per_value"] = fit_compressed(db_points, a.scale, a.plugs)
    rows = table(points)
    print("\n".join(rows))
    path = write_result(a.out, {"scale": a.scale, "plugs": a.plugs,
                                "state_store": a.state_store,
                                "spe_state_bytes_per_row": spe_per_row,
                                "measure_seconds": a.measure_seconds, "points": points,
                                "fit": fit, "table": rows})
    say(f"fit: {fit}")
    say(f"wrote {path}")
    return 0


def steady_state(metrics) -> dict[str, int]:
    """The largest state of each stage at steady state, summed over the stages: in the
    batches after the first two that read one event second each once the windows were
    filled in longer ones (Spark's state is read from the batch before; the store after a
    long batch that rewrote every row holds both versions of each: 1.3x at 5-minute
    windows, a peak the heap factor covers, not the model's rows)."""
    first = [m for m in metrics if m.stage == 0 and m.event_seconds_done is not None]
    steps = [b.event_seconds_done - a.event_seconds_done for a, b in itertools.pairwise(first)]
    last_long = max((i for i, d in enumerate(steps) if d > 1), default=-1)
    ones = first[last_long + 2:]
    t0 = ones[1].t if len(ones) > 1 else float("inf")
    return largest_state([m for m in metrics if m.t > t0])


#: the points the heap per state byte is fitted on: a state large enough to dominate the
#: heap (below it the batch's own rows do, which the model does not weigh)
HEAP_FIT_MIN_STATE = 64 * 2**20


def heap_sampler(on: bool):
    """Spark's live heap sampled while a run goes on (spe.session.HeapSampler), or nothing."""
    import contextlib

    if not on:
        return contextlib.nullcontext()
    from spe.session import HeapSampler, get_spark

    return HeapSampler(get_spark())


def heap_per_state_byte(p: dict) -> float:
    """The heap one predicted byte of Spark state took at the run's peak: the live heap
    beside Spark's reserved memory over the predicted state (costmodel.memory)."""
    from costmodel.memory import SPARK_RESERVED

    return (p["live_heap"]["peak"] - SPARK_RESERVED) / p["predicted"]["spark_bytes"]


def fit_compressed(points: list[dict], scale: float, plugs: int) -> float:
    """DuckDB's compressed bytes per value that puts the most points within 25% of the
    measured bytes, the worst point closest among those (the other terms of the model
    follow DuckDB's blocks and are not fitted)."""
    import math

    from costmodel.memory import plan_memory
    from costmodel.profile import load_profile
    from federation.optimizer import plan_for

    plans = [(plan_for(QUERIES[p["query"]](rate=p["rate"], scale=scale, plugs=plugs),
                       p["placement"])[0], p["measured"]["db_bytes"]) for p in points]
    base = load_profile()

    def score(b: float) -> tuple[int, float]:
        prof = base.model_copy(update={"db_compressed_bytes_per_value": b})
        r = [plan_memory(pp, prof).db_bytes / m for pp, m in plans]
        return -sum(0.75 <= x <= 1.25 for x in r), max(abs(math.log(x)) for x in r)

    return min((i / 20 for i in range(5, 161)), key=score)


def table(points: list[dict]) -> list[str]:
    """The 25% criterion (issue 25) as a Markdown table: predicted / measured Spark state
    rows (Spark counts them) and bytes, and DuckDB bytes, per query, rate and plan."""
    def ratio(p: dict, key_p: str, key_m: str) -> str:
        m = p["measured"].get(key_m) or 0
        return f"{p['predicted'].get(key_p, 0) / m:.2f}" if m else "-"

    out = [("| query | rate | plan | Spark rows pred/meas | Spark bytes pred/meas | "
            "DuckDB bytes pred/meas |"), "|---|---|---|---|---|---|"]
    for p in points:
        out.append(f"| {p['query']} | {p['rate']:.0f} | {p['plan']} | "
                   f"{ratio(p, 'spark_rows', 'spark_rows')} | "
                   f"{ratio(p, 'spark_bytes', 'spark_bytes')} | "
                   f"{ratio(p, 'db_bytes', 'db_bytes')} |")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
