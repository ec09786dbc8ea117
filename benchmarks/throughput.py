"""Throughput side by side (docs/architecture.md, benchmark protocol): queries x rates x plans, rho and achieved throughput.

Run: python -m benchmarks.throughput --scale 0.1 --rates 2000,20000 --queries CQ1,CQ3

Protocol v2 (PROTOCOL, recorded in every point with the commit it ran on): for each rate
lambda the data are replayed as fast as the plan can go. Every plan, pure-SPE included,
fast-forwards the warm-up (the largest window range) in micro-batches of --warmup-batch
event seconds (10; 1: no fast-forward), then runs one event second per micro-batch for
--measure-seconds event seconds (at least 60: one-second batches after the windows are
full; fewer only with --quick, whose points are marked `protocol: "quick"`), with no
end-of-input drain. rho = event seconds processed per wall second after the windows are
full (rho_windows_full of the run's summary), the achieved throughput is
lambda * min(1, rho) and the processed throughput lambda * rho (tuples per wall second the
plan handled, unthrottled). The maximum throughput of a plan is found by search over the
measured rates: the largest rate it sustains (MST) and the largest processed throughput
(peak). Plans: the optimizer's choice (`auto`), pure-SPE, pure-DB, the optimizer's choice
with the feasibility check off (`nofeas`), the optimizer's choice priced for Spark's
feed (`auto_spe`, what auto chose before the direct feed was priced) and the other plans Phase-Two keeps (`kept`, at
most --max-kept of them). Each point has a wall-time budget (--budget; pure-SPE
--spe-budget, 0: --budget); a point that cannot finish within it is measured on what ran
and marked `steady: false` (pure Spark at full window size and more than about 1,000/s
did not fill its windows within the default 30 s in the runs before issue 22).

rho excludes the ingest: the input is validated and spooled before Spark starts (and
before the wall clock of rho starts), so its cost is recorded beside rho in every point,
`ingest_cpu_s` (CPU seconds of the ingest's thread) and `ingest_rows_per_cpu_s`. On this
project's machine it costs about 0.3-0.5 CPU seconds per million rows at 20,000-100,000/s
(2-3 million rows per CPU second) and about 1.3 at 2,000/s, where the cost per file (one
per event second) dominates (benchmarks/results/README.md, "Measurement protocols"): at
100,000/s about 0.03-0.05 CPU s per event second, which a deployment ingesting live pays on
top of the plan's work (a following run counts it inside rho).

Stages without SPE-ops are fed by Spark (`--feed spe`, the paper's setting and every point
before issue 45); `--feed direct` measures fedq's default, recorded as `feed` in the point.

Labels whose placement equals one already measured at the same query and rate are
recorded as `same_as` that point instead of running it twice. Results accumulate in
benchmarks/results/<out>.json (or at --out when it is a path ending in .json); a rerun
skips the points already there, whatever their protocol (resumable: to re-measure points
of an older protocol, write into another file). Plots go next to it. Points measured
before issue 22 carry `protocol: "v1: ..."` (12 or 20 one-second batches; pure Spark
fast-forwarded only where the point's `warmup_batch_s` says so) and no commit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from benchmarks.common import RESULTS, commit, environment, say
from costmodel.plan_cost import plan_cost
from costmodel.profile import load_profile
from federation.logical import NumberedPlan
from federation.optimizer import optimize
from federation.optimizer.phase_one import phase_one
from federation.physical import build_physical_plan, placement_string
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

ALL_RATES = "1000,2000,5000,10000,15000,20000,25000,30000,40000"
#: the protocol of the points this module measures now (issue 22)
PROTOCOL = ("v2: 60+ one-second batches after the windows are full, warm-up fast-forwarded "
            "for every plan")
#: the protocol of a `--quick` run's points (fewer than 60 measured batches allowed)
QUICK = "quick"
#: the least event seconds measured at one per micro-batch, unless --quick
MIN_MEASURE_SECONDS = 60


def result_path(out: str | None, scale: float) -> Path:
    """Where a result goes: benchmarks/results/<out>.json, or `out` itself when it is a
    path ending in .json (a smoke run outside the committed results)."""
    if out and out.endswith(".json"):
        return Path(out)
    return RESULTS / f"{out or f'throughput_scale{scale:g}'}.json"


def point_plan(doc: dict, pt: dict, profile) -> NumberedPlan:
    """The logical plan of a result point (its query at its rate, the result's scale and
    plugs), numbered by Phase-One under `profile`; its placement names these operator ids
    when `profile` is the one the run used."""
    q = QUERIES[pt["query"]](rate=pt["rate"], scale=doc["scale"], plugs=doc["plugs"])
    return NumberedPlan.of(phase_one(q, profile))


class _Progress:
    """Every ~15 s of a point: event seconds done, wall time, rho so far."""

    def __init__(self, every_s: float = 15.0) -> None:
        self.every, self.t0, self.last = every_s, time.time(), time.time()

    def __call__(self, m) -> None:
        now = time.time()
        if m.event_seconds_done is not None and now - self.last >= self.every:
            self.last = now
            say(f"      {m.event_seconds_done} event s done, {m.backlog_s} to go, "
                f"{now - self.t0:.0f} s wall, batch {m.wall_s:.2f} s")


#: pure-Spark labels and the Spark forms they run (spe/translate.py): `spe` the default
#: (panes for window aggregates, interval join of rows), the others one older form each
SPE_FORMS = {
    "spe": {"FEDQ_SPE_ROWS_JOIN": "interval", "FEDQ_SPE_WINDOW_AGG": "panes"},
    "spe_collect": {"FEDQ_SPE_ROWS_JOIN": "collect", "FEDQ_SPE_WINDOW_AGG": "expand"},
    "spe_expand": {"FEDQ_SPE_ROWS_JOIN": "interval", "FEDQ_SPE_WINDOW_AGG": "expand"},
}


def _form(label: str) -> dict[str, str]:
    """The Spark forms a plan label runs with (every non-Spark label: the default)."""
    return SPE_FORMS.get(label, SPE_FORMS["spe"])


def plans_for(name: str, rate: float, scale: float, plugs: int, wanted: list[str],
              max_kept: int, profile) -> dict[str, str]:
    q = QUERIES[name](rate=rate, scale=scale, plugs=plugs)
    auto = optimize(q, profile=profile)
    out: dict[str, str] = {}
    ops = NumberedPlan.of(phase_one(q, profile)).r2r_ids
    for w in wanted:
        if w == "auto":
            out["auto"] = auto.plan.placement_string
        elif w in SPE_FORMS:  # spe_collect / spe_expand: older Spark forms (SPE_FORMS)
            out[w] = placement_string(dict.fromkeys(ops, "spe"))
        elif w == "db":
            out["db"] = placement_string(dict.fromkeys(ops, "db"))
        elif w == "auto_spe":  # the choice priced for Spark's feed (before issue 45)
            out[w] = optimize(q, profile=profile.model_copy(update={"feed": "spe"})
                              ).plan.placement_string
        elif w == "nofeas":
            out["nofeas"] = optimize(q, profile=profile, feasibility_check=False
                                     ).plan.placement_string
        elif w == "kept":  # the other plans: never the optimizer's, pure-SPE or pure-DB
            seen = {*out.values(), auto.plan.placement_string,
                    placement_string(dict.fromkeys(ops, "spe")), placement_string(dict.fromkeys(ops, "db"))}
            k = 0
            for pl, _ in auto.kept:
                s = placement_string(pl)
                if s not in seen and k < max_kept:
                    out[f"kept{k + 1}"] = s
                    seen.add(s)
                    k += 1
    return out


def main(argv: list[str] | None = None) -> int:
    from federation.api import run

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--rates", default=ALL_RATES)
    ap.add_argument("--plans", default="auto,spe,db,nofeas,kept")
    ap.add_argument("--max-kept", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--measure-seconds", type=int, default=MIN_MEASURE_SECONDS,
                    help="event seconds measured after the windows are full, one per "
                    f"micro-batch (at least {MIN_MEASURE_SECONDS} unless --quick)")
    ap.add_argument("--quick", action="store_true",
                    help=f"allow fewer than {MIN_MEASURE_SECONDS} measured event seconds; "
                    f"every point of the run is marked protocol {QUICK!r}")
    ap.add_argument("--budget", type=float, default=300.0, help="wall seconds per point")
    ap.add_argument("--feed", choices=["spe", "direct"], default="spe",
                    help="how a stage without SPE-ops is fed: spe (default: the paper's "
                         "setting, Spark forwards every row to the DB-ops, as every point "
                         "before issue 45) or direct (fedq reads the spool itself)")
    ap.add_argument("--spe-budget", type=float, default=30.0,
                    help="wall seconds per pure-SPE point (measured on what ran)")
    ap.add_argument("--warmup-batch", type=int, default=10,
                    help="event seconds per micro-batch during the warm-up (1: no fast-forward)")
    ap.add_argument("--out", default=None,
                    help="result name under benchmarks/results/ (default from scale), or a "
                    "path ending in .json")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--summarize-only", action="store_true",
                    help="recompute the maximum throughput and the plots of a result, no runs")
    a = ap.parse_args(argv)
    if a.measure_seconds < MIN_MEASURE_SECONDS and not a.quick and not a.summarize_only:
        ap.error(f"--measure-seconds {a.measure_seconds}: the protocol measures at least "
                 f"{MIN_MEASURE_SECONDS} one-second batches; pass --quick for a shorter run "
                 f"(its points are marked protocol {QUICK!r})")
    protocol = QUICK if a.quick else PROTOCOL
    path = result_path(a.out, a.scale)
    doc = json.loads(path.read_text()) if path.exists() else {"points": []}
    try:  # a result of another shape is refused here, not half-way
        load_points(doc)
    except ValueError as e:
        raise SystemExit(f"{path}: points of another shape (an older version?): "
                         f"{str(e).splitlines()[0]}; use another --out") from None
    if a.summarize_only:
        summarize(doc, path)
        return 0
    done = {(p["query"], p["rate"], p["plan"]) for p in doc["points"]}
    profile = load_profile().model_copy(update={"feed": a.feed})  # priced as it runs
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
                twin = next((p for p in doc["points"] if p["query"] == name
                             and p["rate"] == rate and p["placement"] == placement
                             and "same_as" not in p
                             and _form(p["plan"]) == _form(label)), None)
                if twin is not None:
                    say(f"[{n}/{total}] {name} @ {rate:.0f}/s  {label}: same placement as "
                        f"{twin['plan']}")
                    doc["points"].append({**twin, "plan": label, "same_as": twin["plan"]})
                    path.write_text(json.dumps(doc, indent=2, default=str))
                    continue
                say(f"[{n}/{total}] {name} @ {rate:.0f}/s  {label}: {placement}")
                q = QUERIES[name](rate=rate, scale=a.scale, plugs=a.plugs)
                t0 = time.time()
                spe = label in SPE_FORMS
                budget = a.spe_budget if spe and a.spe_budget else a.budget
                os.environ.update(_form(label))
                work = Path(tempfile.mkdtemp(prefix="fedq-tp-"))
                try:
                    # every plan fast-forwards the warm-up: pure Spark's window aggregates
                    # are full at once, but its join of window rows (CQ1/CQ2) keeps a
                    # window range of rows in the join's state
                    ff = a.warmup_batch if a.warmup_batch > 1 else None
                    r = run(q, placement, data, work_dir=work, seconds_per_batch=1,
                            budget_s=budget, progress=_Progress(), warmup_batch_s=ff,
                            drain=False, feed=a.feed)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                s = r.summary
                rho = s.rho_windows_full
                steady = not s.truncated and not math.isnan(rho)
                if math.isnan(rho):  # never reached full windows: what ran
                    rho = s.rho_steady
                pc = plan_cost(build_physical_plan(r.plan.logical, placement), profile).vector
                point = ThroughputPoint(
                    query=name, rate=rate, plan=label, placement=s.placement, rho=rho,
                    steady=steady, **derived(rate, rho), rho_steady=s.rho_steady,
                    warmup_batch_s=s.warmup_batch_s, budget_s=budget,
                    predicted_C_b=pc.C_b, predicted_C_u=pc.C_u,
                    predicted_feasible=pc.is_feasible, wall_s=time.time() - t0,
                    data_batches=s.data_batches, result_rows=s.result_rows,
                    protocol=protocol, measure_seconds=a.measure_seconds, commit=commit(),
                    feed=a.feed, ingest_cpu_s=s.ingest_cpu_s,
                    ingest_rows_per_cpu_s=s.ingest_rows_per_cpu_s,
                ).record()
                ing = (f"  ingest {s.ingest_cpu_s:.1f} CPU s "
                       f"({1e6 / s.ingest_rows_per_cpu_s:.2f} per million rows, outside rho)"
                       if s.ingest_cpu_s and s.ingest_rows_per_cpu_s else "")
                say(f"    rho {rho:.2f}{'' if steady else ' (not at steady state)'}  "
                    f"predicted C_b {pc.C_b:.2f}{ing}")
                doc["points"].append(point)
                doc.update(environment())
                doc.update({"scale": a.scale, "plugs": a.plugs, "profile": profile.name,
                            "measure_seconds": a.measure_seconds, "budget_s": a.budget,
                            "spe_budget_s": a.spe_budget or a.budget,
                            "warmup_batch_s": a.warmup_batch})
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(doc, indent=2, default=str))
    summarize(doc, path)
    return 0


def max_throughput(pts: list[dict]) -> list[dict]:
    """Per query and plan, by search over the measured rates (docs/architecture.md, benchmark protocol): the maximum
    sustainable throughput (largest rate such that rho >= 1 at it and at every lower measured
    rate), the peak achieved throughput (largest rate x min(1, rho)) and, because achieved
    throughput is capped by the requested rate, the peak processed throughput (largest
    rate x rho: what the plan handled replaying as fast as it could)."""
    by: dict[tuple[str, str], list[dict]] = {}
    for p in pts:
        by.setdefault((p["query"], p["plan"]), []).append(p)
    out = []
    for (q, plan), ps in sorted(by.items()):
        ps.sort(key=lambda p: p["rate"])
        mst = 0.0
        for p in ps:
            if not p["rho"] >= 1:  # NaN: not one event second within the budget
                break
            mst = p["rate"]
        ok = [p for p in ps if not math.isnan(p["rho"])] or ps
        peak = max(ok, key=lambda p: p["rate"] * min(1.0, p["rho"]))
        proc = max(ok, key=lambda p: p["rate"] * p["rho"])
        out.append({"query": q, "plan": plan, "mst": mst,
                    "peak": peak["rate"] * min(1.0, peak["rho"]), "peak_at_rate": peak["rate"],
                    "peak_processed": proc["rate"] * proc["rho"],
                    "peak_processed_at_rate": proc["rate"],
                    "rates": len(ps), "all_steady": all(p["steady"] for p in ps)})
    return out


class ThroughputPoint(BaseModel):
    """One measured point: a query at a requested rate under one plan (the JSON's
    `points`); `same_as` names the plan whose identical placement was measured instead."""

    model_config = ConfigDict(extra="forbid")

    query: str
    rate: float
    plan: str
    placement: str
    rho: float
    steady: bool
    achieved_tps: float
    processed_tps: float
    rho_steady: float
    warmup_batch_s: int | None
    budget_s: float | None
    predicted_C_b: float
    predicted_C_u: float
    predicted_feasible: bool
    wall_s: float
    data_batches: int
    result_rows: int
    same_as: str | None = None
    #: how a point differs from what its label runs today (e.g. an older Spark form)
    note: str | None = None
    #: how it was measured (PROTOCOL, QUICK, or "v1: ..." for the points before issue 22)
    protocol: str | None = None
    #: event seconds measured at one per micro-batch after the windows were full
    measure_seconds: int | None = None
    #: the commit it ran on (benchmarks.common.commit(); None before issue 22)
    commit: str | None = None
    #: CPU seconds of the ingest (validation and spool, before Spark starts: outside rho)
    ingest_cpu_s: float | None = None
    ingest_rows_per_cpu_s: float | None = None
    #: how stages without SPE-ops were fed (--feed; None: before issue 45, Spark's feed)
    feed: str | None = None

    def record(self) -> dict:
        return self.model_dump(exclude_none=True) | {"budget_s": self.budget_s,
                                                     "warmup_batch_s": self.warmup_batch_s}


def load_points(doc: dict) -> list[ThroughputPoint]:
    """The points of a throughput result, validated."""
    return [ThroughputPoint.model_validate(p) for p in doc["points"]]


def derived(rate: float, rho: float) -> dict:
    """Achieved (rate x min(1, rho)) and processed (rate x rho) throughput; NaN when no
    event second finished within the budget (min(1.0, nan) would be 1.0 in Python)."""
    if math.isnan(rho):
        return {"achieved_tps": float("nan"), "processed_tps": float("nan")}
    return {"achieved_tps": rate * min(1.0, rho), "processed_tps": rate * rho}


def summarize(doc: dict, path: Path) -> None:
    """Per query and plan: MST and peak throughput; plots next to the JSON."""
    for p in doc["points"]:  # recomputed: older points had NaN rho counted as achieved
        p.update(derived(p["rate"], p["rho"]))
    doc["max_throughput"] = max_throughput(doc["points"])
    path.write_text(json.dumps(doc, indent=2, default=str))
    print(f"{'query':<5} {'plan':<8} {'MST':>8} {'peak':>9} {'processed':>10}")
    for m in doc["max_throughput"]:
        print(f"{m['query']:<5} {m['plan']:<8} {m['mst']:>8.0f} {m['peak']:>9.0f} "
              f"{m['peak_processed']:>10.0f}")
    try:
        from benchmarks.throughput_plots import plot

        plot(doc, path)
    except Exception as e:  # noqa: BLE001 - plots are a convenience; the JSON is the result
        say(f"plots skipped: {e}")


if __name__ == "__main__":
    raise SystemExit(main())
