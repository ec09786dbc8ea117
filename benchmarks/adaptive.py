"""Adaptive against static placements over a stream whose rate changes (issue 13).

Run: python -m benchmarks.adaptive [--queries CQ1,...,CQ6] [--profile 2000:60,150000:60,2000:60]
     [--plugs 2125] [--scale 0.1] [--strategies move,replay] [--out adaptive.json]

Generates one stream with the rate profile, then per query runs, one after the other, each
static placement the optimizer picks for one of the phases (planned at that phase's rate)
and one adaptive run per migration strategy (`federation.adaptive.decide_and_run`: it
decides while it runs, every `--decide-every` event seconds), all at one event second per
micro-batch, as fast as they go. Per phase: rho (the phase's event seconds over the wall
time of the micro-batches that processed them; for an adaptive run, a segment's start and
warm-up, and the old segment's tail after the migration instant, count in the phase where
the migration happens). Per migration: the strategy, the old segment's stop (tail and
drain), the new one's setup and warm-up, and the output gap (wall seconds from the old
placement's last result to the new one's first). Every run's result is compared with the
first one's. Writes benchmarks/results/adaptive.json and adaptive.png. Nothing else may run
on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

from benchmarks.common import RESULTS, say, write_result
from federation.adaptive import decide_and_run, part_files, with_rate
from federation.api import plan_for
from federation.cli.args import rate_profile
from federation.results import diff_results
from federation.runtime import execute
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES


def phase_bounds(start: dt.datetime, profile) -> list[tuple[dt.datetime, dt.datetime, float]]:
    out, t = [], start
    for rate, n in profile:
        out.append((t, t + dt.timedelta(seconds=n), rate))
        t += dt.timedelta(seconds=n)
    return out


def phase_of(clock: dt.datetime, phases) -> int | None:
    sec = clock.replace(microsecond=0)
    return next((i for i, (a, b, _) in enumerate(phases) if a <= sec < b), None)


def static_rho(metrics, phases) -> list[float]:
    wall = [0.0] * len(phases)
    for m in metrics:
        if m.stage == 0 and m.data and m.clock is not None:
            p = phase_of(m.clock, phases)
            if p is not None:
                wall[p] += m.wall_s
    return [(b - a).total_seconds() / w if w else float("nan") for (a, b, _), w in
            zip(phases, wall)]


def adaptive_rho(result, phases) -> list[float]:
    wall = [0.0] * len(phases)
    for sr in result.segments:
        start_at, stop_at = sr.segment.start_at, sr.segment.stop_at
        takeover = phase_of(start_at, phases) if start_at is not None else 0
        wall[takeover] += sr.setup_s
        for clock, w in sr.batches:
            if start_at is not None and clock < start_at:  # its warm-up: where it takes over
                wall[takeover] += w
            elif stop_at is not None and clock >= stop_at:  # its tail: where it hands over
                wall[phase_of(stop_at, phases) or 0] += w
            elif (p := phase_of(clock, phases)) is not None:
                wall[p] += w
    return [(b - a).total_seconds() / w if w else float("nan") for (a, b, _), w in
            zip(phases, wall)]


def _adaptive_record(ar, rho, strategy: str, margin: float, wall: float) -> dict:
    segs = []
    for k, s in enumerate(ar.segments):
        segs.append({"start_at": s.segment.start_at, "stop_at": s.segment.stop_at,
                     "placement": s.segment.placement, "reason": s.segment.reason,
                     "strategy": s.strategy, "moved": s.moved,
                     "setup_s": s.setup_s, "warmup_seconds": s.warmup_seconds,
                     "stop_s": s.stop_s, "first_result_s": s.first_result_s,
                     "gap_s": ar.gaps_s[k - 1] if k else None, "wall_s": s.wall_s,
                     "result_rows": s.result_rows, "decisions": len(s.decisions)})
    return {"kind": "adaptive", "strategy": strategy, "margin": margin,
            "rho_per_phase": rho, "wall_s": wall, "rows": ar.rows, "segments": segs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", default="CQ1,CQ2,CQ3,CQ4,CQ5,CQ6")
    ap.add_argument("--profile", type=rate_profile,
                    default=rate_profile("2000:60,150000:60,2000:60"))
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--scale", type=float, default=0.1, help="window scale (0.1: 30-s windows)")
    ap.add_argument("--decide-every", type=float, default=10.0)
    ap.add_argument("--margin", type=float, default=0.1)
    ap.add_argument("--strategies", default="move,replay",
                    help="one adaptive run per migration strategy")
    ap.add_argument("--min-interval", type=float, default=30.0)
    ap.add_argument("--data", type=Path, default=None, help="reuse a generated stream")
    ap.add_argument("--out", default="adaptive.json")
    ap.add_argument("--replot", action="store_true",
                    help="only draw the plot again from the JSON result --out")
    a = ap.parse_args(argv)
    if a.replot:
        import json

        path = Path(a.out) if Path(a.out).parent != Path(".") else RESULTS / a.out
        doc = json.loads(path.read_text())
        _plot(doc, path.with_suffix(".png"))
        say(f"wrote {path.with_suffix('.png')}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="fedq-adaptive-bench-"))
    data = a.data or work / "data"
    if a.data is None:
        say(f"generating {sum(n for _, n in a.profile)} event seconds: "
            + " -> ".join(f"{r:g}/s x {n} s" for r, n in a.profile))
        generate(data, rate_profile=a.profile, plugs=a.plugs, seed=1)
    start = part_files(data, "ts")[0].start
    phases = phase_bounds(start, a.profile)
    out = []
    for name in a.queries.split(","):
        q = QUERIES[name](rate=a.profile[0][0], scale=a.scale, plugs=a.plugs)
        picks = {}
        for _, _, rate in phases:
            pp, cost = plan_for(with_rate(q, rate), "auto")
            picks.setdefault(pp.placement_string, (rate, cost.vector))
        runs = {}
        first = next(iter(picks))  # not measured: the JVM's and Spark's first queries
        execute(plan_for(with_rate(q, picks[first][0]), first)[0], data, seconds_per_batch=1,
                max_files=15, work_dir=work / f"{name}_jit")
        for placement, (rate, vec) in picks.items():
            say(f"{name}: static {placement} (the optimizer's plan at {rate:g}/s) ...")
            pp, _ = plan_for(with_rate(q, rate), placement)
            t0 = time.perf_counter()
            r = execute(pp, data, seconds_per_batch=1, work_dir=work / f"{name}_{len(runs)}")
            rho = static_rho(r.metrics, phases)
            say("   rho per phase " + ", ".join(f"{x:.2f}" for x in rho))
            runs[placement] = {"kind": "static", "placement": placement, "planned_at": rate,
                               "C_b": vec.C_b, "C_u": vec.C_u,
                               "rho_per_phase": rho, "wall_s": time.perf_counter() - t0,
                               "rows": r.rows}
        for strategy in a.strategies.split(","):
            key = f"adaptive ({strategy})"
            say(f"{name}: {key} ...")
            t0 = time.perf_counter()
            ar = decide_and_run(q, data, decide={"every_s": a.decide_every,
                                                 "margin": a.margin,
                                                 "min_interval_s": a.min_interval},
                                strategy=strategy, seconds_per_batch=1,
                                work_dir=work / f"{name}_{strategy}")
            rho = adaptive_rho(ar, phases)
            say(f"   {ar.migrations} migration(s): " + "; ".join(
                f"{s.strategy.split(' ')[0]} at {s.segment.start_at:%H:%M:%S}, gap "
                f"{g:.1f} s" for s, g in zip(ar.segments[1:], ar.gaps_s) if g is not None))
            say("   rho per phase " + ", ".join(f"{x:.2f}" for x in rho))
            runs[key] = _adaptive_record(ar, rho, strategy, a.margin,
                                         time.perf_counter() - t0)
        base = next(iter(runs.values()))["rows"]
        for v in runs.values():
            v["equal_to_first"] = diff_results(v.pop("rows"), base) is None
        sustained = {k: [x >= 1 for x in v["rho_per_phase"]] for k, v in runs.items()}
        best = [max(v["rho_per_phase"][i] for v in runs.values() if v["kind"] == "static")
                for i in range(len(phases))]
        out.append({"query": name, "runs": runs, "sustained": sustained,
                    "best_static_rho_per_phase": best})
    doc = {"profile": a.profile, "plugs": a.plugs, "scale": a.scale,
           "decide_every_s": a.decide_every, "margin": a.margin, "strategies": a.strategies,
           "min_interval_s": a.min_interval,
           "phases": [{"start": x, "end": y, "rate": r} for x, y, r in phases],
           "queries": out}
    path = write_result(a.out, doc)
    _plot(doc, path.with_suffix(".png") if Path(a.out).parent != Path(".")
          else RESULTS / Path(a.out).with_suffix(".png").name)
    say(f"wrote {path}")
    return 0


def _plot(doc: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qs = doc["queries"]
    fig, axes = plt.subplots(len(qs) + 1, 1, figsize=(12, 2.6 * (len(qs) + 1)), sharex=True)
    t, xs, ys = 0, [], []
    for rate, n in doc["profile"]:
        xs += [t, t + n]
        ys += [rate, rate]
        t += n
    axes[0].plot(xs, ys, color="black")
    axes[0].set_ylabel("tuples/s")
    axes[0].set_title("input rate over event time")
    mids, t = [], 0
    for _, n in doc["profile"]:
        mids.append(t + n / 2)
        t += n
    start = _time(doc["phases"][0]["start"])
    for ax, q in zip(axes[1:], qs):
        width = 0.8 * min(n for _, n in doc["profile"]) / max(len(q["runs"]), 1)
        for k, (name, run) in enumerate(q["runs"].items()):
            off = (k - (len(q["runs"]) - 1) / 2) * width
            label = name if run["kind"] == "adaptive" else f"static {name}"
            ax.bar([m + off for m in mids], run["rho_per_phase"], width=width, label=label)
            for s in run.get("segments", [])[1:]:
                ax.axvline((_time(s["start_at"]) - start).total_seconds(), color="red", ls="--",
                           lw=1)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_ylabel(f"{q['query']} rho")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("event seconds (red: migrations of the adaptive run)")
    fig.tight_layout()
    fig.savefig(png, dpi=110, bbox_inches="tight")


def _time(t) -> dt.datetime:
    """A datetime, also as written to JSON."""
    return t if isinstance(t, dt.datetime) else dt.datetime.fromisoformat(str(t))


if __name__ == "__main__":
    raise SystemExit(main())
