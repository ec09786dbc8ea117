"""Throughput side by side (DESIGN 8): queries x rates x plans, rho and achieved throughput.

Run: python -m benchmarks.throughput --scale 0.1 --rates 2000,20000 --queries CQ1,CQ3

For each rate lambda the data are replayed one event second per micro-batch, as fast as the
plan can go; rho = event seconds processed per wall second after the windows are full, the
achieved throughput is lambda * min(1, rho). Plans: the optimizer's choice (`auto`),
pure-SPE, pure-DB, the optimizer's choice with the feasibility check off (`nofeas`) and the
other plans Phase-Two keeps (`kept`, at most --max-kept of them). Each point has a wall-time
budget; a point that cannot finish within it is measured on what ran and marked
`steady: false`. Results accumulate in benchmarks/results/<out>.json; a rerun skips the
points already there (resumable). Plots go next to it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import RESULTS, environment
from benchmarks.datagen import generate
from benchmarks.queries import QUERIES
from costmodel.profile import load_profile
from federation.logical import NumberedPlan
from federation.optimizer import optimize
from federation.phase_one import phase_one
from federation.physical import build_physical_plan

ALL_RATES = "1000,2000,5000,10000,15000,20000,25000,30000,40000"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def plans_for(name: str, rate: float, scale: float, plugs: int, wanted: list[str],
              max_kept: int, profile) -> dict[str, str]:
    q = QUERIES[name](rate=rate, scale=scale, plugs=plugs)
    auto = optimize(q, profile=profile)
    out: dict[str, str] = {}
    ops = NumberedPlan.of(phase_one(q, profile)).r2r_ids
    for w in wanted:
        if w == "auto":
            out["auto"] = auto.plan.placement_string
        elif w == "spe":
            out["spe"] = ",".join(f"{o}=spe" for o in ops)
        elif w == "db":
            out["db"] = ",".join(f"{o}=db" for o in ops)
        elif w == "nofeas":
            out["nofeas"] = optimize(q, profile=profile, feasibility_check=False
                                     ).plan.placement_string
        elif w == "kept":
            seen = set(out.values())
            k = 0
            for pl, _ in auto.kept:
                s = ",".join(f"{o}={e}" for o, e in pl.items())
                if s not in seen and k < max_kept:
                    out[f"kept{k + 1}"] = s
                    seen.add(s)
                    k += 1
    return out


def main(argv: list[str] | None = None) -> int:
    from federation.runtime import run

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--rates", default=ALL_RATES)
    ap.add_argument("--plans", default="auto,spe,db,nofeas,kept")
    ap.add_argument("--max-kept", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--measure-seconds", type=int, default=20,
                    help="event seconds measured after the windows are full")
    ap.add_argument("--budget", type=float, default=300.0, help="wall seconds per point")
    ap.add_argument("--out", default=None, help="result name (default from scale)")
    ap.add_argument("--data-dir", type=Path, default=None)
    a = ap.parse_args(argv)
    out_name = a.out or f"throughput_scale{a.scale:g}"
    path = RESULTS / f"{out_name}.json"
    doc = json.loads(path.read_text()) if path.exists() else {"points": []}
    done = {(p["query"], p["rate"], p["plan"]) for p in doc["points"]}
    profile = load_profile()
    data_root = a.data_dir or Path(tempfile.gettempdir()) / "fedq-throughput-data"
    queries = a.queries.split(",")
    rates = [float(r) for r in a.rates.split(",")]
    wanted = a.plans.split(",")
    total = len(queries) * len(rates) * len(wanted)
    n = 0
    for rate in rates:
        max_range = max(60.0 * 5 * a.scale, 1.0)
        seconds = math.ceil(max_range) + a.measure_seconds + 2
        data = data_root / f"r{int(rate)}_s{seconds}_p{a.plugs}"
        if not (data / "_manifest.json").exists():
            say(f"generating {seconds} s at {rate:.0f}/s ({a.plugs} plugs) -> {data}")
            generate(data, rate=rate, seconds=seconds, plugs=a.plugs, seed=1)
        for name in queries:
            plans = plans_for(name, rate, a.scale, a.plugs, wanted, a.max_kept, profile)
            for label, placement in plans.items():
                n += 1
                if (name, rate, label) in done:
                    continue
                say(f"[{n}/{total}] {name} @ {rate:.0f}/s  {label}: {placement}")
                q = QUERIES[name](rate=rate, scale=a.scale, plugs=a.plugs)
                t0 = time.time()
                r = run(q, placement, data, work_dir=Path(tempfile.mkdtemp()),
                        seconds_per_batch=1, budget_s=a.budget)
                s = r.summary
                rho = s["rho_windows_full"]
                steady = not s["truncated"] and not math.isnan(rho)
                if math.isnan(rho):  # never reached full windows: what ran
                    rho = s["rho_steady"]
                pp = build_physical_plan(r.plan.logical, placement, profile)
                point = {
                    "query": name, "rate": rate, "plan": label, "placement": s["placement"],
                    "rho": rho, "steady": steady, "achieved_tps": rate * min(1.0, rho),
                    "predicted_C_b": pp.cost.bottleneck_cost,
                    "predicted_C_u": pp.cost.utilization_cost,
                    "predicted_feasible": pp.cost.is_feasible,
                    "wall_s": time.time() - t0, "data_batches": s["data_batches"],
                    "result_rows": s["result_rows"],
                }
                say(f"    rho {rho:.2f}{'' if steady else ' (not at steady state)'}  "
                    f"predicted C_b {pp.cost.bottleneck_cost:.2f}")
                doc["points"].append(point)
                doc.update(environment())
                doc.update({"scale": a.scale, "plugs": a.plugs, "profile": profile.name,
                            "measure_seconds": a.measure_seconds, "budget_s": a.budget})
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(doc, indent=2, default=str))
    summarize(doc, path)
    return 0


def summarize(doc: dict, path: Path) -> None:
    """Per query and plan: MST and peak throughput; plots next to the JSON."""
    pts = doc["points"]
    table = {}
    for p in pts:
        key = (p["query"], p["plan"])
        t = table.setdefault(key, {"mst": 0.0, "peak": 0.0})
        if p["rho"] >= 1:
            t["mst"] = max(t["mst"], p["rate"])
        t["peak"] = max(t["peak"], p["achieved_tps"])
    doc["max_throughput"] = [{"query": q, "plan": pl, **v} for (q, pl), v in
                             sorted(table.items())]
    path.write_text(json.dumps(doc, indent=2, default=str))
    print(f"{'query':<5} {'plan':<8} {'MST':>8} {'peak':>9}")
    for (q, pl), v in sorted(table.items()):
        print(f"{q:<5} {pl:<8} {v['mst']:>8.0f} {v['peak']:>9.0f}")
    try:
        plot(doc, path)
    except Exception as e:  # noqa: BLE001 - plots are a convenience; the JSON is the result
        say(f"plots skipped: {e}")


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    queries = sorted({p["query"] for p in pts})
    fig, axes = plt.subplots(2, len(queries), figsize=(4 * len(queries), 7), squeeze=False)
    for i, q in enumerate(queries):
        ax = axes[0][i]
        for plan in ("auto", "spe", "db"):
            xs = sorted((p["rate"], p["achieved_tps"]) for p in pts
                        if p["query"] == q and p["plan"] == plan)
            if xs:
                ax.plot([x for x, _ in xs], [y for _, y in xs], marker="o", label=plan)
        lim = max(p["rate"] for p in pts)
        ax.plot([0, lim], [0, lim], ls=":", color="grey")
        ax.set_title(f"{q}: achieved vs requested")
        ax.set_xlabel("requested tuples/s")
        ax.set_ylabel("achieved tuples/s")
        ax.legend()
        ax = axes[1][i]
        mt = {m["plan"]: m["peak"] for m in doc["max_throughput"] if m["query"] == q}
        plans = [p for p in ("auto", "spe", "db", "nofeas") if p in mt]
        ax.bar(plans, [mt[p] for p in plans], color=["C0", "C1", "C2", "C3"][:len(plans)])
        ax.set_title(f"{q}: peak throughput")
        ax.set_ylabel("tuples/s")
    fig.suptitle(f"scale {doc.get('scale')} ({doc.get('date', '')[:10]})")
    fig.tight_layout()
    out = path.with_suffix(".png")
    fig.savefig(out, dpi=80)
    say(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
