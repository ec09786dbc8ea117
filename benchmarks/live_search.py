"""The highest live rate of each query, searched with a rising load (issue 22).

Run: python -m benchmarks.live_search --queries CQ1,CQ2,CQ3,CQ4,CQ5,CQ6

Per query, one following run (`federation.api.start(..., follow=True)`, the optimizer's
plan for the query at `--plan-rate`, 2,125 plugs, 5-minute windows) over one
producer process (`datagen.generate(rate_profile=..., realtime=1)`) whose rate rises in
steps: the first window range at once at the first rate (a backlog that fills the
windows), that rate for `--first-s` more event seconds (the backlog is caught up), then
`--step-s` event seconds at each later rate of the ladder (`--start` times `--factor`^i), one
event second per wall second (`--rates` gives the ladder and each step's length instead,
e.g. a 5-minute hold at the top after a step at half of it). A step **keeps up** when, over
the second half of its wall time, the backlog (event seconds whose files landed, counted in the landing directory,
minus those processed: an ingest falling behind counts) has a median of at most 3 s and
ends at most 5 s, and the results' lag behind what landed (event seconds landed minus
those whose instant reached the sink) a median of at most 5 s, ending at most 8 s (the
first rate is a step too, over its last `--first-s` event seconds); a step's wall interval is read from the ctimes of its files, and a
step counts only when the producer landed at least 95% of its nominal rate (on two cores
it competes with fedq: where it falls behind, the search stops there and says so). The run
stops at the first step that does not keep up (or at the top of the ladder); the query's
**live maximum** is the last step that kept up (sustained for its own length: `--step-s`,
or a 300-s step of `--rates` for a 5-minute hold), and the step that failed bounds it from
above. A short step after a lower rate is judged while the 5-minute windows still hold
mostly the lower rate's rows; a 300-s step ends with them full at its own rate (the
holds in benchmarks/results/README.md use `--rates LOW,R/2:120,R:300,1.5R:40`).

Per step: the latency of its instants written in the step's second half (result handed to
the sink minus the ctime of the file holding the instant's last reading, as in
benchmarks/live.py) with p50/p95/p99, and the backlog. Then, same process, same machine:

- `--confirm`: a 5-minute live point at the live maximum (benchmarks.live.live_point);
- the **replay** with the same placement at `--replay-rate` (`federation.api.run` over a
  generated directory of the first window range plus 60 event seconds, warm-up
  fast-forwarded, one event second per micro-batch): rate x rho_steady is the replay's
  maximum, and live / replay the ratio of the two maxima. Ingest runs
  before Spark starts in the replay and is outside its rho; live pays it inside.

Writes benchmarks/results/live_search.json (`--out`) and a plot. Nothing else may run on
the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import say, write_result
from benchmarks.live import LatencySink, cpu_s, live_point, percentile, replay_point
from federation.smartplug.queries import QUERIES

T_START = dt.datetime(2013, 9, 1)
TAIL_S = 10


def ladder(start: float, factor: float, top: float) -> list[float]:
    out = [start]
    while out[-1] * factor <= top * 1.0001:
        out.append(round(out[-1] * factor, -2))
    return out


def ramp_producer(out: Path, profile: list[tuple[float, int]], plugs: int, burst: int):
    import subprocess

    code = ("import datetime as dt; from federation.smartplug.datagen import generate; "
            f"generate({str(out)!r}, rate_profile={profile!r}, plugs={plugs}, seed=1, "
            f"start=dt.datetime.fromisoformat({T_START.isoformat()!r}), realtime=1.0, "
            f"burst_s={burst})")
    return subprocess.Popen([sys.executable, "-c", code])


def judge(step: dict, backlog: list[tuple[float, float, float]]) -> bool | None:
    """Whether `step` kept up, from the samples of its second half (None: no sample yet):
    the input backlog (median <= 3 s, last <= 5 s) and the results' lag behind what landed
    (median <= 5 s, last <= 8 s: a DB-op falling behind shows there, not in the input)."""
    half = [(b, lag) for t, b, lag in backlog if step["half_from"] <= t < step["wall_to"]]
    if not half:
        return None
    step["backlog_median_s"] = statistics.median(b for b, _ in half)
    step["backlog_end_s"] = half[-1][0]
    step["result_lag_median_s"] = statistics.median(lag for _, lag in half)
    step["result_lag_end_s"] = half[-1][1]
    return (step["backlog_median_s"] <= 3 and half[-1][0] <= 5
            and step["result_lag_median_s"] <= 5 and half[-1][1] <= 8)


def ramp(query: str, rates: list[float], first_s: int, step_s: int | list[int], plugs: int,
         scale: float, spark, work: Path, plan_rate: float) -> dict:
    """One following run over a rising load; the steps, each judged and with its latency.
    `step_s`: every later step's event seconds, or a list of them (one per later rate)."""
    from federation.api import start

    burst = round(300 * scale) + 1
    lengths = step_s if isinstance(step_s, list) else [step_s] * (len(rates) - 1)
    profile = [(rates[0], burst + first_s)] + list(zip(rates[1:], lengths))
    steps, k = [{"rate": rates[0], "from_s": burst, "to_s": burst + first_s}], burst + first_s
    for r, n in zip(rates[1:], lengths):
        steps.append({"rate": r, "from_s": k, "to_s": k + n})
        k += n
    # a tail at the last rate, judged with nothing: the end of input drains every open
    # window (one instant per slide of the largest range) and would delay the last step's
    # instants
    profile.append((rates[-1], TAIL_S))
    seconds = k + TAIL_S
    q = QUERIES[query](rate=plan_rate, scale=scale, plugs=plugs)
    landing = work / "landing"
    landing.mkdir(parents=True)
    sink = LatencySink()
    backlog: list[tuple[float, float, float]] = []
    jvm = spark.sparkContext._gateway.proc.pid
    cpu0 = {"python": cpu_s(os.getpid()), "jvm": cpu_s(jvm)}

    landed_n = [0]  # files landed so far (the producer writes part-k in order)

    def watch(m) -> None:
        # the backlog from the landing directory, not the follower's count: event seconds
        # landed but not yet processed, so that an ingest falling behind shows too
        while (landing / f"part-{landed_n[0]:08d}.parquet").exists():
            landed_n[0] += 1
        if m.stage == 0 and m.event_seconds_done is not None:
            # results so far: instant tau holds the readings up to event second tau - 1
            done = max(list(sink.at), default=T_START) - T_START
            lag = landed_n[0] - done.total_seconds()
            backlog.append((time.time(), max(0, landed_n[0] - m.event_seconds_done),
                            max(0.0, lag)))

    prod = ramp_producer(landing, profile, plugs, burst)
    t0 = time.time()
    h = start(q, "auto", landing, follow=True,
              until=T_START + dt.timedelta(seconds=seconds - 1), work_dir=work / "live",
              iterate=False, sinks=(sink,), spark=spark, seconds_per_batch=1, progress=watch)
    failed = None

    def landed(k: int) -> float | None:  # when event second k's file was renamed into place
        f = landing / f"part-{k:08d}.parquet"
        return f.stat().st_ctime if f.exists() else None

    def settle(st: dict) -> bool:
        """Judge a step once its last file landed: its wall interval from the files' ctimes
        (the producer may fall behind its schedule at high rates: then the rate that
        landed, not the nominal one, is what fedq was offered)."""
        a, b = landed(st["from_s"] - 1), landed(st["to_s"] - 1)
        if a is None or b is None or time.time() < b + 1:
            return False
        st["wall_from"], st["wall_to"], st["half_from"] = a, b, (a + b) / 2
        st["landed_rate"] = st["rate"] * (st["to_s"] - st["from_s"]) / max(b - a, 1e-9)
        st["producer_on_pace"] = st["landed_rate"] >= 0.95 * st["rate"]
        st["keeps_up"] = judge(st, backlog)
        say(f"  {query} {st['rate']:,.0f}/s (landed {st['landed_rate']:,.0f}/s): keeps up "
            f"{st['keeps_up']} (backlog median {st.get('backlog_median_s')}, end "
            f"{st.get('backlog_end_s')})")
        return True

    while h.wait(timeout=2.0) is None:
        for st in steps:
            if "keeps_up" not in st and settle(st) and not (
                    st["keeps_up"] and st["producer_on_pace"]):
                failed = st  # fedq fell behind, or the producer did: no higher step
                break
        if failed is not None:
            prod.kill()
            h.stop()
            break
    r = h.wait()
    time.sleep(1.0)
    for st in steps:  # the steps that ended with the run
        if "keeps_up" not in st and failed is None:
            settle(st)
    prod.kill()
    prod.wait()
    wall = time.time() - t0
    ran = [st for st in steps if "keeps_up" in st]
    for st in ran:
        lat = []
        for tau, at in sink.at.items():
            s = round((tau - T_START).total_seconds()) - 1
            f = landing / f"part-{s:08d}.parquet"
            if st["from_s"] <= s < st["to_s"] and f.exists() and f.stat().st_ctime >= st[
                    "half_from"]:
                lat.append(at - f.stat().st_ctime)
        st.update(instants=len(lat), latency_p50_s=percentile(lat, 50),
                  latency_p95_s=percentile(lat, 95), latency_p99_s=percentile(lat, 99))
        for key in ("wall_from", "wall_to", "half_from"):
            st[key] = round(st[key] - t0, 1)
    kept = [st for st in steps if st.get("keeps_up")]
    top = None  # the steps kept up in a row from the first, the producer on pace
    for st in ran:
        if not st["keeps_up"] or not st["producer_on_pace"]:
            break
        top = st
    return {"query": query, "placement": r.summary.placement, "planned_at_rate": plan_rate,
            "first_rate": rates[0], "first_s": first_s, "step_s": step_s, "burst_s": burst,
            "steps": ran, "live_max_rate": top["rate"] if top else None,
            "failed_at_rate": failed["rate"] if failed and not failed["keeps_up"] else None,
            "producer_behind_at_rate": failed["rate"] if failed and failed["keeps_up"]
            and not failed["producer_on_pace"] else None,
            "steps_kept_up": len(kept), "wall_s": round(wall, 1),
            "cpu_s": {"python": cpu_s(os.getpid()) - cpu0["python"],
                      "jvm": cpu_s(jvm) - cpu0["jvm"], "ingest": r.summary.ingest_cpu_s},
            "dead_lettered": r.summary.dead_lettered}


def replay_at(query: str, rate: float, plugs: int, scale: float, spark, work: Path,
              placement: str, plan_rate: float) -> dict:
    from federation.smartplug.datagen import generate

    data = work / "replay-data"
    generate(data, rate=rate, seconds=round(300 * scale) + 1 + 60, plugs=plugs, seed=1,
             start=T_START)
    return replay_point(query, rate, plugs, scale, spark, data, work / "replay", placement,
                        plan_rate)


def plot(points: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qs = [p["query"] for p in points]
    live = [p["live_max_rate"] or 0 for p in points]
    replay = [(p.get("replay") or {}).get("max_rate_estimate") or 0 for p in points]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    x = range(len(qs))
    ax.bar([i - 0.2 for i in x], live, 0.4, label="live (followed, ingest inside)")
    ax.bar([i + 0.2 for i in x], replay, 0.4, label="replay (rate x rho, ingest outside)")
    for i, p in enumerate(points):
        if p.get("failed_at_rate"):
            ax.plot([i - 0.4, i], [p["failed_at_rate"]] * 2, "k:", lw=1)
        if p.get("producer_behind_at_rate"):
            ax.plot([i - 0.4, i], [p["producer_behind_at_rate"]] * 2, "r--", lw=1)
    ax.set_xticks(list(x), qs)
    ax.set_ylabel("tuples/s")
    ax.set_title("Highest live rate kept up vs replay maximum\n(dotted: the rate fedq "
                 "missed; dashed red: the producer could not write it)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    from spe.session import get_spark

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", default="CQ1,CQ2,CQ3,CQ4,CQ5,CQ6")
    ap.add_argument("--start", type=float, default=50000, help="first rate (tuples/s)")
    ap.add_argument("--factor", type=float, default=1.25, help="rate ratio between steps")
    ap.add_argument("--top", type=float, default=500000, help="highest rate of the ladder")
    ap.add_argument("--plan-rate", type=float, default=150000,
                    help="the rate the optimizer plans for (the ramp and the replay run "
                         "that plan)")
    ap.add_argument("--rates", default=None,
                    help="the ladder given instead of --start/--factor/--top: RATE[:SECONDS] "
                         "comma-separated (a later step held SECONDS event seconds, else "
                         "--step-s; the first rate's are --first-s), e.g. "
                         "100000,379650:120,759300:300 for a 5-minute hold")
    ap.add_argument("--first-s", type=int, default=90)
    ap.add_argument("--step-s", type=int, default=60)
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--scale", type=float, default=1.0, help="window range scale")
    ap.add_argument("--confirm", action="store_true",
                    help="a 5-minute live point at each query's live maximum")
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--replay-rate", type=float, default=100000,
                    help="the replay's rate (its maximum is rate x rho_steady)")
    ap.add_argument("--out", default="live_search.json")
    a = ap.parse_args(argv)
    for name, v in (("--start", a.start), ("--factor", a.factor - 1), ("--step-s", a.step_s)):
        if v <= 0:
            ap.error(f"{name}: must be > {1 if name == '--factor' else 0}")
    if a.rates:
        try:
            given = [(float(r), int(n) if n else a.step_s)
                     for r, _, n in (x.partition(":") for x in a.rates.split(","))]
        except ValueError:
            ap.error(f"--rates: expected RATE[:SECONDS],..., got {a.rates!r}")
        if any(r <= 0 or n <= 0 for r, n in given):
            ap.error("--rates: rates and seconds must be > 0")
        rates, step_s = [r for r, _ in given], [n for _, n in given[1:]]
    else:
        rates, step_s = ladder(a.start, a.factor, a.top), a.step_s
    spark = get_spark()
    points = []
    for query in a.queries.split(","):
        if query not in QUERIES:
            ap.error(f"--queries: unknown query {query!r} (known: {', '.join(QUERIES)})")
    for query in a.queries.split(","):
        work = Path(tempfile.mkdtemp(prefix="fedq-live-search-"))
        try:
            say(f"{query}: rising load {', '.join(f'{r:,.0f}' for r in rates)} /s")
            p = ramp(query, rates, a.first_s, step_s, a.plugs, a.scale, spark, work,
                     a.plan_rate)
            say(f"{query}: live maximum {p['live_max_rate']} (failed at {p['failed_at_rate']})")
            best = p["live_max_rate"]
            if best and a.confirm:
                say(f"{query}: 5 minutes at {best:,.0f}/s")
                c, _ = live_point(query, best, 5, a.plugs, a.scale, spark, work / "confirm")
                c.pop("per_instant", None)
                p["confirm"] = c
            points.append(p)
            write_result(a.out, {"points": points, "ladder": rates, "protocol": __doc__})
            if best and not a.no_replay:
                say(f"{query}: replay at {a.replay_rate:,.0f}/s")
                p["replay"] = replay_at(query, a.replay_rate, a.plugs, a.scale, spark, work,
                                        p["placement"], a.plan_rate)
                est = p["replay"]["max_rate_estimate"]
                p["live_over_replay"] = best / est if est else None
            write_result(a.out, {"points": points, "ladder": rates, "protocol": __doc__})
        finally:
            shutil.rmtree(work, ignore_errors=True)
    path = write_result(a.out, {"points": points, "ladder": rates, "protocol": __doc__})
    if points:
        plot(points, path.with_suffix(".png"))
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
