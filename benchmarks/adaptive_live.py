"""Adaptive against static placements on a live source whose rate changes (issue 43).

Run: python -m benchmarks.adaptive_live [--queries CQ1,CQ3,CQ5]
     [--profile 2000:90,100000:60,2000:60] [--scale 0.1] [--plugs 2125] [--feed direct]
     [--as-set] [--behind 300] [--out adaptive_live.json]

The source is a generator in this process paced in wall time (`datagen:smartplug?profile=
...`, one event second per wall second; its first window range plus one second written at
once, a burst that fills the windows), the same readings in every run. Per query, one after
the other (`--as-set`: the queries as one query set, one run per placement): an adaptive
run that decides while it runs (`run_adaptive` on the live source: one follower, segments
cut from its spools), and each static placement: pure Spark, pure
DuckDB and the optimizer's plan for the first phase (planned at its rate; once if it is one
of the others; a static run still going `--behind` seconds after its input's end is
stopped, its instants so far kept); before them a short run, not measured, takes the JVM's
first queries, and a run of the first phase's plan over the burst, a minute after it and a
minute of each later phase warms the JVM as every measured run meets it.
What each figure includes:

- **latency** of instant tau (slide 1 s): the wall time its rows reached the run's sink
  minus the wall time the generator renamed the file of its last event second (tau - 1)
  into place. It includes the follower's poll, ingest, Spark's micro-batch and trigger,
  DuckDB, the sink, and for the adaptive run every migration (the old placement's tail,
  the new one's start and warm-up). The burst's instants and the final drain are left
  out. p50/p99 per phase (by the event second of the instant's last reading).
- **backlog** per phase: event seconds landed but not processed, at each stage-0 batch
  (median, and the least-squares slope in seconds per second: above 0.05, falling behind).
  Between two segments of the adaptive run there are no batches: the gap shows in latency.
- **migrations**: instant, strategy, and the output gap measured in the sink (the wall
  time between the old placement's last instant and the new one's first, i.e. the sink's
  time for instants start_at - slide and start_at), which the goal bounds by one slide
  plus one second.

Every run's sink is compared with the first's (each instant once, equal). Writes
benchmarks/results/adaptive_live.json and .png (backlog over wall time, migrations marked).
Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.common import RESULTS, say, write_result
from benchmarks.live import percentile, slope
from federation.cli.args import rate_profile
from federation.logical import query_set
from federation.results import diff_results
from federation.smartplug.queries import QUERIES

T0 = dt.datetime(2013, 9, 1)


class RowsSink:
    """A sink recording when each instant was handed over and keeping the rows (the runs
    are compared), per query of a set: `at_of[query][tau]` the wall time instant tau of
    `query` was handed over (benchmarks.live.LatencySink's, by query)."""

    def __init__(self) -> None:
        self.parts: dict[str | None, list[pa.Table]] = {}
        self.at_of: dict[str | None, dict[dt.datetime, float]] = {}

    def close(self) -> None:
        pass

    def put(self, key, rows, query=None) -> None:
        now = time.time()
        at = self.at_of.setdefault(query, {})
        for tau in pc.unique(rows.column("tau")).to_pylist():  # not a row's each
            at.setdefault(tau, now)
        self.parts.setdefault(query, []).append(rows)

    def table(self, query=None) -> pa.Table:
        return pa.concat_tables(self.parts[query])


def phase_of(k: int, profile) -> int | None:
    t = 0
    for i, (_, n) in enumerate(profile):
        if k < t + n:
            return i
        t += n
    return None


def measure(sink: RowsSink, backlog, landing: Path, profile, burst: int, t0: float,
            query: str | None = None) -> dict:
    """Latency (of `query`'s instants, of a set) and backlog per phase (module doc)."""
    total = sum(n for _, n in profile)
    lat: dict[int, list[float]] = {i: [] for i in range(len(profile))}
    each = []  # (event second, latency): where the p99 lies
    for tau, at in sink.at_of.get(query, {}).items():
        k = round((tau - T0).total_seconds()) - 1
        p = phase_of(k, profile)
        if p is None or k < burst or k >= total:
            continue
        written = (landing / f"part-{k:08d}.parquet").stat().st_ctime
        lat[p].append(at - written)
        each.append((k, round(at - written, 3)))
    # the wall time event second k landed: the phase of a batch is that of its clock
    phases = []
    for i in range(len(profile)):
        b = [(t, s) for t, s, k in backlog if phase_of(k, profile) == i and k >= burst]
        phases.append({
            "rate": profile[i][0], "instants": len(lat[i]),
            "latency_p50_s": percentile(lat[i], 50), "latency_p99_s": percentile(lat[i], 99),
            "backlog_median_s": statistics.median(s for _, s in b) if b else None,
            "backlog_slope": slope([t for t, _ in b], [s for _, s in b])})
    return {"phases": phases, "latency": sorted(each),
            "backlog": [(round(t - t0, 2), s) for t, s, _ in backlog]}


def url_of(a, burst: int) -> str:
    prof = ",".join(f"{r:g}:{n}" for r, n in a.profile)
    return (f"datagen:smartplug?plugs={a.plugs}&profile={prof}&burst={burst}&seed=1"
            f"&seconds={sum(n for _, n in a.profile)}&start={T0.isoformat()}")


def watcher(backlog: list):
    def watch(m) -> None:
        if m.stage == 0 and m.backlog_s is not None and m.clock is not None:
            k = int((m.clock - T0).total_seconds())
            backlog.append((time.time(), m.backlog_s, k))
    return watch


def per_query(sink: RowsSink, backlog, names: list[str], a, burst: int, t0: float,
              work: Path) -> tuple[dict, dict]:
    """Each query's latency and backlog per phase, and its rows: ({name: record},
    {name: table}); one query alone has its rows under None in the sink."""
    keys = {n: (n if n in sink.at_of else None) for n in names}
    recs = {n: measure(sink, backlog, work / "landing" / "smartplug", a.profile, burst, t0,
                       k) for n, k in keys.items()}
    return recs, {n: sink.table(k) if k in sink.parts else None for n, k in keys.items()}


def static_run(qs, placement: str, a, burst: int, spark, work: Path
               ) -> tuple[dict, dict, dict]:
    """A static placement, stopped `a.behind` seconds after its input's end (then it is
    behind; its instants so far are kept and compared)."""
    from federation.api import start

    sink, backlog = RowsSink(), []
    t0 = time.time()
    h = start(query_set(qs), placement, url_of(a, burst), work_dir=work,
              iterate=False, sinks=(sink,), spark=spark, seconds_per_batch=1, feed=a.feed,
              progress=watcher(backlog))
    budget = sum(n for _, n in a.profile) + a.behind
    failed = None
    try:
        r = h.wait(budget)
        stopped = r is None
        if stopped:
            say(f"   stopped after {budget:.0f} s (behind)")
            r = h.stop()
        shown = r.summary.placement
    except Exception as e:  # noqa: BLE001 - a placement the machine cannot run is a result
        stopped, failed, shown = True, first_line(e), placement
        say(f"   failed after {time.time() - t0:.0f} s: {failed}")
    recs, tables = per_query(sink, backlog, [q.name for q in qs], a, burst, t0, work)
    return {"kind": "static", "placement": shown, "wall_s": time.time() - t0,
            "stopped_behind": stopped, "failed": failed}, recs, tables


def first_line(e: BaseException) -> str:
    """The first line naming the cause of a failed run (Spark's error class, if any)."""
    text = str(e)
    for line in text.splitlines():
        if "OUT_OF_MEMORY" in line or "Error" in line or "Exception" in line:
            return line.strip()[:300]
    return (text.splitlines() or [type(e).__name__])[0][:300]


def adaptive_run(qs, a, burst: int, spark, work: Path) -> tuple[dict, dict, dict]:
    from costmodel.profile import load_profile
    from federation.adaptive import run_adaptive

    sink, backlog = RowsSink(), []
    t0 = time.time()
    r = run_adaptive(query_set(qs), url_of(a, burst), sinks=(sink,),
                     spark=spark, work_dir=work, seconds_per_batch=1, feed=a.feed,
                     progress=watcher(backlog), profile=load_profile(),
                     decide={"every_s": a.decide_every, "margin": a.margin,
                             "min_interval_s": a.min_interval})
    recs, tables = per_query(sink, backlog, [q.name for q in qs], a, burst, t0, work)
    migrations = []
    for prev, s in zip(r.segments, r.segments[1:]):
        at = s.segment.start_at
        # the sink's gap: the last instant before the migration to the first at it (the
        # earliest query of a set to reach each)
        before = [v[at - dt.timedelta(seconds=1)] for v in sink.at_of.values()
                  if at - dt.timedelta(seconds=1) in v]
        first = [v[at] for v in sink.at_of.values() if at in v]
        migrations.append({
            "at": at, "placement": s.segment.placement, "strategy": s.strategy,
            "reason": s.segment.reason, "wall_s_after_start": None if not first
            else round(min(first) - t0, 2),
            "sink_gap_s": None if not before or not first else min(first) - min(before),
            "old_tail_s": prev.tail_s, "new_first_after_s": s.first_after_s,
            "overlap_s": s.overlap_s})
    return {"kind": "adaptive", "placement": " -> ".join(s.segment.placement
                                                          for s in r.segments),
            "wall_s": time.time() - t0, "migrations": migrations, "stopped_behind": False,
            "decisions": [d.model_dump(mode="json") for s in r.segments for d in s.decisions],
            }, recs, tables


def equal_on_common(t: pa.Table | None, ref: pa.Table | None) -> bool:
    """The rows equal the reference run's on the instants `t` has (a stopped run has
    fewer)."""
    if t is None or ref is None:
        return t is None and ref is None

    taus = pc.unique(t.column("tau"))
    return diff_results(t, ref.filter(pc.is_in(ref.column("tau"), taus))) is None


def compare(group: list[str], a, spark, work: Path, tag: str) -> list[dict]:
    """The adaptive run and each static placement of the queries `group` (one query, or the
    set run as one): a record per query."""
    from costmodel.profile import load_profile
    from federation.api import plan_for

    qs = [QUERIES[n](rate=a.profile[0][0], scale=a.scale, plugs=a.plugs) for n in group]
    q = query_set(qs)
    burst = max(round(w.range_s) for x in qs for w in x.walk() if w.kind == "window") + 1
    prof = load_profile().model_copy(update={"feed": a.feed})
    first = plan_for(q, "auto", prof)[0].placement_string
    runs, recs, tables = {}, {}, {}
    # the JVM warmed as every measured run meets it: the burst, a minute after it and a
    # minute of each later phase's rate, under the first phase's plan (a first run met the
    # burst on a JVM that had run 40 s: 1.6x slower micro-batches than the run after it,
    # which met it after the first's 30 minutes, 2026-12-05)
    say(f"{tag}: warm-up under {first} (not measured) ...")
    warm = argparse.Namespace(**{**vars(a), "profile": [(a.profile[0][0], burst + 60)] + [
        (r, 60) for r, _ in a.profile[1:]]})
    static_run(qs, first, warm, burst, spark, work / f"{tag}_warmup")
    say(f"{tag}: adaptive ...")
    runs["adaptive"], recs["adaptive"], tables["adaptive"] = adaptive_run(
        qs, a, burst, spark, work / f"{tag}_adaptive")
    for m in runs["adaptive"]["migrations"]:
        say(f"   migrated at {m['at']:%H:%M:%S} to {m['placement']} ({m['strategy']}), "
            f"sink gap {m['sink_gap_s']}")
    for label, placement in (("spe", "spe"), ("db", "db"), ("first phase's plan", first)):
        if label.split()[0] not in a.static:
            continue
        pp = plan_for(q, placement, prof)[0].placement_string
        if any(r["placement"] == pp for r in runs.values() if r["kind"] == "static"):
            continue
        say(f"{tag}: static {label} ({pp}) ...")
        runs[label], recs[label], tables[label] = static_run(
            qs, placement, a, burst, spark, work / f"{tag}_{len(runs)}")
    out = []
    for n in group:
        per = {}
        for k, r in runs.items():
            per[k] = {**r, **recs[k][n],
                      "equal_to_adaptive": equal_on_common(tables[k][n],
                                                           tables["adaptive"][n])}
            say(f"   {n} {k}: " + "; ".join(
                f"{p['rate']:g}/s p50 {p['latency_p50_s'] or 0:.2f} p99 "
                f"{p['latency_p99_s'] or 0:.2f} s, backlog {p['backlog_median_s']}"
                for p in per[k]["phases"]) + f"; equal {per[k]['equal_to_adaptive']}")
        out.append({"query": n, "burst_s": burst, "as_set": len(group) > 1, "runs": per})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", default="CQ1,CQ3,CQ5")
    ap.add_argument("--as-set", action="store_true",
                    help="the queries as one query set per run (one run per placement)")
    ap.add_argument("--profile", type=rate_profile, default=rate_profile(
        "2000:90,100000:60,2000:60"), help="RATE:SECONDS phases (the first holds the burst)")
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--scale", type=float, default=0.1, help="window scale (0.1: 30-s windows)")
    ap.add_argument("--feed", default="direct", choices=("direct", "spe"))
    ap.add_argument("--decide-every", type=float, default=10.0)
    ap.add_argument("--margin", type=float, default=0.1)
    ap.add_argument("--min-interval", type=float, default=30.0)
    ap.add_argument("--behind", type=float, default=300.0,
                    help="a static run still going this many seconds after its input's end "
                    "is stopped (behind)")
    ap.add_argument("--static", type=lambda v: v.split(","), default=["spe", "db", "first"],
                    help="the static placements to run beside the adaptive one (spe, db, "
                    "first: the first phase's plan)")
    ap.add_argument("--out", default="adaptive_live.json")
    a = ap.parse_args(argv)
    from spe.session import get_spark

    spark = get_spark()
    work = Path(tempfile.mkdtemp(prefix="fedq-adaptive-live-"))
    names = a.queries.split(",")
    warm = QUERIES[names[0]](rate=a.profile[0][0], scale=a.scale,
                             plugs=a.plugs)  # the JVM's first queries:
    say("warm-up (not measured) ...")  # not in the first measured run
    from federation.api import run

    run(warm, "spe", f"datagen:smartplug?plugs={a.plugs}&rate=2000&speed=10&seconds=40&"
        f"start={T0.isoformat()}", work_dir=work / "warmup", feed=a.feed, spark=spark)
    groups = [names] if a.as_set else [[n] for n in names]
    out = [rec for g in groups for rec in compare(g, a, spark, work, "+".join(g))]
    doc = {"command": "python -m benchmarks.adaptive_live " + " ".join(
               sys.argv[1:] if argv is None else argv),
           "profile": a.profile, "plugs": a.plugs, "scale": a.scale, "feed": a.feed,
           "as_set": a.as_set, "behind_s": a.behind,
           "decide_every_s": a.decide_every, "margin": a.margin,
           "min_interval_s": a.min_interval, "queries": out}
    path = write_result(a.out, doc)
    _plot(doc, RESULTS / Path(a.out).with_suffix(".png").name
          if Path(a.out).parent == Path(".") else path.with_suffix(".png"))
    say(f"wrote {path}")
    return 0


def _plot(doc: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qs = doc["queries"]
    fig, axes = plt.subplots(len(qs), 1, figsize=(11, 2.8 * len(qs)), squeeze=False)
    for ax, q in zip(axes[:, 0], qs):
        for name, run in q["runs"].items():
            xs = [t for t, _ in run["backlog"]]
            ax.plot(xs, [b for _, b in run["backlog"]], label=name, lw=1)
            for m in run.get("migrations", []):
                if m["wall_s_after_start"] is not None:
                    ax.axvline(m["wall_s_after_start"], color="red", ls="--", lw=1)
        ax.set_ylabel(f"{q['query']} backlog (s)")
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("wall seconds since the run's start (red: the adaptive run's "
                           "migrations, at its new placement's first result)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
