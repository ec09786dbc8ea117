"""CQ1-CQ6 together against one at a time (issue 23 part 4), side by side in one run.

Run: python -m benchmarks.query_sets --rates 50000,100000,200000

For each rate, the same generated data (2,125 plugs, 5-minute windows: 300 s of warm-up
and --measure-seconds more) is run
- together: the six queries as one run (`run([CQ1, ..., CQ6], "auto")`): one ingest, the
  optimizer's placement of the merged plan, shared operators computed once where the
  engine shares them;
- alone: each query in its own run with its own optimizer's plan, one after the other.
Every run follows the throughput protocol (benchmarks/throughput.py): the warm-up
fast-forwarded in 10-s micro-batches, then one event second per micro-batch, no drain; rho
= event seconds per wall second after the windows are full. The six alone do the same
work as the set when they share the machine one after the other, so their joint rho is
1 / sum(1 / rho_i) (the wall seconds add up). The maximum sustained rate is the largest
measured rate with rho >= 1.

Ingest (validation and spooling, before Spark starts) is outside rho in both, as in the
throughput protocol; the set pays it once, the six alone six times: each point records
`ingest_cpu_s`, and the summary the ingest CPU per event second each way.

The predicted cost: C_u of the set's plan against the sum of the six separate plans' C_u
(the issue's goal: the set costs at most half). Results go to
benchmarks/results/query_sets.json and query_sets.png.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import RESULTS, commit, environment, say
from costmodel.profile import load_profile
from federation.logical import QuerySet
from federation.optimizer import optimize
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES


def measure(q, data: Path, budget: float, warmup: int) -> dict:
    from federation.api import run

    work = Path(tempfile.mkdtemp(prefix="fedq-qs-"))
    t0 = time.time()
    try:
        r = run(q, "auto", data, work_dir=work, seconds_per_batch=1, budget_s=budget,
                warmup_batch_s=warmup, drain=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    s = r.summary
    rho = s.rho_windows_full
    steady = not s.truncated and not math.isnan(rho)
    rows = ({n: t.num_rows for n, t in r.results.items()} if r.results else
            {q.name: s.result_rows})
    return {"placement": s.placement, "db_ops": s.db_ops, "rho": rho if steady else
            s.rho_steady, "steady": steady, "wall_s": time.time() - t0,
            "data_batches": s.data_batches, "result_rows": rows,
            "ingest_cpu_s": s.ingest_cpu_s, "event_seconds": s.event_seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="50000,100000,200000")
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--scale", type=float, default=1.0, help="window sizes (1: 5 minutes)")
    ap.add_argument("--measure-seconds", type=int, default=60)
    ap.add_argument("--budget", type=float, default=600.0, help="wall seconds per run")
    ap.add_argument("--warmup-batch", type=int, default=10)
    ap.add_argument("--data-dir", type=Path,
                    default=Path(tempfile.gettempdir()) / "fedq-throughput-data")
    ap.add_argument("--out", default="query_sets.json")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of the set against the slowest queries alone (the first "
                         "runs all six; the others --round-queries, in alternating order)")
    ap.add_argument("--round-queries", type=int, default=2,
                    help="how many of the slowest queries alone the later rounds run")
    a = ap.parse_args(argv)
    profile = load_profile()
    names = a.queries.split(",")
    path = Path(a.out) if a.out.endswith(".json") and "/" in a.out else RESULTS / a.out
    doc = json.loads(path.read_text()) if path.exists() else {"points": []}
    for rate in (float(x) for x in a.rates.split(",")):
        seconds = math.ceil(max(300 * a.scale, 1)) + a.measure_seconds + 2
        data = a.data_dir / f"r{int(rate)}_s{seconds}_p{a.plugs}"
        if not (data / "_manifest.json").exists():
            say(f"generating {seconds} s at {rate:.0f}/s ({a.plugs} plugs) -> {data}")
            generate(data, rate=rate, seconds=seconds, plugs=a.plugs, seed=1)
        qs = [QUERIES[n](rate=rate, scale=a.scale, plugs=a.plugs) for n in names]
        qset = QuerySet(tuple(qs))
        done = next((p for p in doc["points"] if p["rate"] == rate), None)
        if done is not None:
            say(f"{rate:.0f}/s: measured already")
            if len(done.get("rounds", [1])) < a.rounds:
                more_rounds(done, qset, data, a)
                path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
            continue
        opt_set = optimize(qset, profile=profile)
        alone_cost = {q.name: optimize(q, profile=profile).cost.C_u for q in qs}
        say(f"{rate:.0f}/s together: {opt_set.plan.placement_string}")
        point = {"rate": rate, "predicted_C_u_together": opt_set.cost.C_u,
                 "predicted_C_u_alone": alone_cost,
                 "together": measure(qset, data, a.budget, a.warmup_batch), "alone": {}}
        say(f"    rho {point['together']['rho']:.3f}")
        for q in qs:
            say(f"{rate:.0f}/s {q.name} alone")
            point["alone"][q.name] = measure(q, data, a.budget, a.warmup_batch)
            say(f"    rho {point['alone'][q.name]['rho']:.3f}")
        point.update(derived(point))
        point["commit"] = commit()
        doc["points"].append(point)
        if a.rounds > 1:
            more_rounds(point, qset, data, a)
        doc.update(environment())
        doc.update({"plugs": a.plugs, "scale": a.scale, "profile": profile.name,
                    "measure_seconds": a.measure_seconds, "warmup_batch_s": a.warmup_batch})
        path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        say(f"    together rho {point['rho_together']:.3f}, alone (joint) "
            f"{point['rho_alone_joint']:.3f}: x{point['speedup']:.2f}; predicted C_u "
            f"{point['cost_ratio']:.2f} of the sum")
    plot(doc, path.with_suffix(".png"))
    return 0


def more_rounds(point: dict, qset: QuerySet, data: Path, a) -> None:
    """Rounds 2..--rounds: the set and the slowest queries alone of the first round again,
    alone first in even rounds (the machine's speed drifts over minutes: the ratio of each
    round is of runs minutes apart); `rounds` holds each round's rho by run, and
    `together_over_slowest` the median over rounds of the set's rho over the slowest's."""
    first = {"together": point["together"]["rho"],
             **{n: x["rho"] for n, x in point["alone"].items()}}
    rounds = point.setdefault("rounds", [first])
    slow = sorted(point["alone"], key=lambda n: point["alone"][n]["rho"])[:a.round_queries]
    by_name = {q.name: q for q in qset.queries}
    while len(rounds) < a.rounds:
        order = ["together", *slow] if len(rounds) % 2 == 0 else [*slow, "together"]
        got = {}
        for n in order:
            say(f"round {len(rounds) + 1}: {n}")
            got[n] = measure(qset if n == "together" else by_name[n], data, a.budget,
                             a.warmup_batch)["rho"]
            say(f"    rho {got[n]:.3f}")
        rounds.append(got)
    ratios = [r["together"] / min(v for k, v in r.items() if k != "together") for r in rounds]
    point["together_over_slowest"] = statistics.median(ratios)
    point["together_over_slowest_by_round"] = ratios
    say(f"    together over the slowest alone, by round: "
        f"{', '.join(f'{x:.2f}' for x in ratios)}; median {point['together_over_slowest']:.2f}")


def derived(p: dict) -> dict:
    """The joint rho of the six alone (wall seconds add up), the ratio, the cost ratio and
    the ingest per event second each way."""
    alone = p["alone"].values()
    joint = 1.0 / sum(1.0 / max(x["rho"], 1e-9) for x in alone)
    together = p["together"]
    ev = together["event_seconds"] or 1
    return {
        "rho_together": together["rho"], "rho_alone_joint": joint,
        "speedup": together["rho"] / joint,
        "cost_ratio": p["predicted_C_u_together"] / sum(p["predicted_C_u_alone"].values()),
        "ingest_cpu_s_per_event_s_together": (together["ingest_cpu_s"] or 0) / ev,
        "ingest_cpu_s_per_event_s_alone": sum(x["ingest_cpu_s"] or 0 for x in alone) / ev,
        "rows_equal": all(together["result_rows"].get(n) == x["result_rows"].get(n)
                          for n, x in p["alone"].items()),
    }


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = sorted(doc["points"], key=lambda p: p["rate"])
    if not pts:
        return
    x = range(len(pts))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar([i - 0.2 for i in x], [p["rho_together"] for p in pts], 0.4,
           label="CQ1-CQ6 together (one run)")
    ax.bar([i + 0.2 for i in x], [p["rho_alone_joint"] for p in pts], 0.4,
           label="one at a time (joint rho)")
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(list(x), [f"{p['rate'] / 1000:.0f}k/s" for p in pts])
    ax.set_ylabel("rho (event s per wall s, >= 1 keeps up)")
    ax.set_title("CQ1-CQ6: shared run vs separate runs (ingest outside rho)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
