"""Live end to end (issue 22): a producer writes smart-plug files in real time; fedq follows
them with the optimizer's plan; per query and rate, whether the run keeps up (a bounded
backlog), the latency of every instant, and where the CPU goes; then the same rows replayed
as a data directory, so that live / replay is a ratio measured in the same run.

Run: python -m benchmarks.live --queries CQ1,CQ3 --rates 20000,60000 --minutes 5

Per point: a producer process (`datagen.generate(realtime=1)`) writes the first window
range at once (a backlog that fills the windows, `--burst`), then one event second per wall
second for `--minutes`; `federation.api.start(..., follow=True, until=...)` follows the
landing directory in this process (ingest, Spark's driver and DuckDB) with a sink that
records when each instant's rows were handed over. What each figure includes:

- **latency** of instant tau: the wall time its rows reached the sink minus the wall time
  at which the file holding its last reading (event second tau - 1) was renamed into place
  (the file's ctime). It includes the producer's write, the follower's poll (0.2 s), ingest,
  Spark's micro-batch and trigger, DuckDB and the sink. Instants of the burst and of the
  final drain are left out; p50/p95/p99 over the rest (which includes catching up the
  burst), and `steady_latency_*` over the instants written in the second half of the
  measured minutes (the `per_instant` list: event second, written at, latency).
- **keeps up**: the backlog (event seconds landed but not yet processed) over the second
  half of the measured minutes has a median of at most 3 s and no upward trend (least
  squares slope < 0.05 s per s).
- **CPU** (seconds over the whole run): the ingest thread (validation and spool), DuckDB
  (the MIGs' SQL, wall time inside DuckDB), the JVM (Spark), this Python process in total,
  and the producer process.
- **replay**: the same directory afterwards as a finite run (`federation.api.run`, the
  warm-up fast-forwarded): rho at steady state and the ingest's rows per CPU second; the
  replay's maximum rate is estimated as rate x rho_steady, and live / replay is the rate
  that kept up over that estimate (ingest is outside the replay's rho: it runs before
  Spark starts; live pays it inside).

`--nexmark`: Nexmark q8 (persons who open an auction in the 10-s window they registered
in) live over two streams, each from its own generator in this process
(`--data person=datagen:nexmark?rate=R`, the same for auction: no producer process, and
the generators' CPU is in `python`), one event second per wall second after a 10-s burst;
`--rates` are Nexmark events per second over all three streams (person and auction are
1/50 and 3/50 of them; each generator makes every event and keeps its stream's, so both
pay for the bids they drop). Latency of instant tau: its rows at the sink minus the later
of the two files holding event second tau - 1; keeps up as above. No replay point.

Writes benchmarks/results/live.json (and a plot). Nothing else may run on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import say, write_result
from federation.smartplug.queries import QUERIES

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of a process (and its reaped children), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / TICKS
    except (OSError, ValueError, IndexError):
        return float("nan")


def percentile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


def slope(ts: list[float], ys: list[float]) -> float | None:
    if len(ts) < 3:
        return None
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    den = sum((t - mt) ** 2 for t in ts)
    return None if den == 0 else sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den


class LatencySink:
    """Records the wall time at which each instant's rows were first handed over."""

    def __init__(self) -> None:
        self.at: dict[dt.datetime, float] = {}

    def put(self, key, rows, query=None) -> None:
        now = time.time()
        import pyarrow.compute as pc

        for tau in pc.unique(rows.column("tau")).to_pylist():  # not a row's each
            self.at.setdefault(tau, now)

    def close(self) -> None:
        pass


def watch_backlog(backlog: list[tuple[float, int]]):
    """A progress callback appending (wall time, backlog seconds) of stage 0's batches."""
    def watch(m) -> None:
        if m.stage == 0 and m.backlog_s is not None:
            backlog.append((time.time(), m.backlog_s))

    return watch


def latencies(sink: LatencySink, t_start: dt.datetime, burst: int, seconds: int,
              written_at, t0: float, measured_from: float):
    """Each instant's latency (module doc) past the burst: (all, steady, per instant as
    (event second, written at - t0, latency)); `written_at(k)`: the wall time the file(s)
    of event second k landed."""
    lat, steady, per_instant = [], [], []
    for tau, at in sorted(sink.at.items()):
        k = round((tau - t_start).total_seconds()) - 1  # its last reading's event second
        if burst <= k < seconds:
            written = written_at(k)
            lat.append(at - written)
            per_instant.append((k, round(written - t0, 3), round(at - written, 3)))
            if written >= measured_from:  # after the burst is caught up: steady state
                steady.append(at - written)
    return lat, steady, per_instant


def backlog_verdict(backlog: list[tuple[float, int]], measured_from: float):
    """(median, least-squares slope, keeps up) of the backlog from `measured_from` on."""
    half = [(t, b) for t, b in backlog if t >= measured_from]
    med = statistics.median(b for _, b in half) if half else None
    trend = slope([t for t, _ in half], [b for _, b in half])
    return med, trend, med is not None and med <= 3 and (trend is None or trend < 0.05)


def producer(out: Path, rate: float, seconds: int, plugs: int, start: dt.datetime,
             burst: int) -> subprocess.Popen:
    code = ("import datetime as dt, sys; from federation.smartplug.datagen import generate; "
            f"generate({str(out)!r}, rate={rate}, seconds={seconds}, plugs={plugs}, seed=1, "
            f"start=dt.datetime.fromisoformat({start.isoformat()!r}), realtime=1.0, "
            f"burst_s={burst})")
    return subprocess.Popen([sys.executable, "-c", code])


def live_point(query: str, rate: float, minutes: float, plugs: int, scale: float,
               spark, work: Path) -> tuple[dict, Path]:
    import resource

    from federation.api import start

    q = QUERIES[query](rate=rate, scale=scale, plugs=plugs)
    burst = round(300 * scale) + 1  # the largest window range of CQ1-CQ6, then one slide
    seconds = burst + round(minutes * 60)
    t_start = dt.datetime(2013, 9, 1)
    landing, run_work = work / "landing", work / "live"
    landing.mkdir(parents=True)
    sink = LatencySink()
    backlog: list[tuple[float, int]] = []
    jvm = spark.sparkContext._gateway.proc.pid
    cpu0 = {"python": cpu_s(os.getpid()), "jvm": cpu_s(jvm)}

    watch = watch_backlog(backlog)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    prod = producer(landing, rate, seconds, plugs, t_start, burst)
    t0 = time.time()
    until = t_start + dt.timedelta(seconds=seconds - 1)
    h = start(q, "auto", landing, follow=True, until=until, work_dir=run_work,
              iterate=False, sinks=(sink,), spark=spark, seconds_per_batch=1,
              progress=watch)
    r = h.wait()
    wall = time.time() - t0
    prod.wait()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the producer, reaped
    cpu = {"python": cpu_s(os.getpid()) - cpu0["python"], "jvm": cpu_s(jvm) - cpu0["jvm"],
           "producer": (children.ru_utime + children.ru_stime
                        - children0.ru_utime - children0.ru_stime)}
    measured_from = t0 + (minutes * 60) / 2
    lat, steady_lat, per_instant = latencies(
        sink, t_start, burst, seconds,
        lambda k: (landing / f"part-{k:08d}.parquet").stat().st_ctime, t0, measured_from)
    med, trend, keeps_up = backlog_verdict(backlog, measured_from)
    s = r.summary
    db_s = sum(m.db_s for m in r.metrics)
    return {"query": query, "rate": rate, "minutes": minutes, "plugs": plugs,
            "scale": scale, "placement": s.placement, "wall_s": wall,
            "instants": len(lat), "latency_p50_s": percentile(lat, 50),
            "latency_p95_s": percentile(lat, 95), "latency_p99_s": percentile(lat, 99),
            "latency_max_s": max(lat) if lat else None,
            "steady_instants": len(steady_lat),
            "steady_latency_p50_s": percentile(steady_lat, 50),
            "steady_latency_p95_s": percentile(steady_lat, 95),
            "steady_latency_p99_s": percentile(steady_lat, 99),
            "per_instant": per_instant,
            "backlog_median_s": med, "backlog_slope": trend, "keeps_up": keeps_up,
            "cpu_s": {"ingest": s.ingest_cpu_s, "duckdb": db_s, **cpu},
            "ingest_rows_per_cpu_s": s.ingest_rows_per_cpu_s,
            "input_rows": s.input_rows, "dead_lettered": s.dead_lettered,
            "phases": s.phases}, landing


def nexmark_point(rate: float, minutes: float, spark, work: Path) -> dict:
    """Nexmark q8 live from two generators (module doc)."""
    from federation.api import start
    from federation.nexmark import nexmark_streams
    from federation.sqlfront import sql

    root = Path(__file__).resolve().parent / "queries_sql" / "nexmark" / "q8.sql"
    q = sql(root.read_text(), nexmark_streams(rate))
    burst, seconds = 11, 11 + round(minutes * 60)
    t_start = dt.datetime(2015, 7, 15)
    url = (f"datagen:nexmark?rate={rate:g}&burst={burst}&seconds={seconds}"
           f"&start={t_start.isoformat()}")
    sink, backlog = LatencySink(), []
    jvm = spark.sparkContext._gateway.proc.pid
    cpu0 = {"python": cpu_s(os.getpid()), "jvm": cpu_s(jvm)}

    t0 = time.time()
    h = start(q, "auto", {"person": url, "auction": url}, work_dir=work, iterate=False,
              sinks=(sink,), spark=spark, seconds_per_batch=1,
              progress=watch_backlog(backlog))
    r = h.wait()
    wall = time.time() - t0
    cpu = {"python": cpu_s(os.getpid()) - cpu0["python"], "jvm": cpu_s(jvm) - cpu0["jvm"]}
    measured_from = t0 + (minutes * 60) / 2
    lat, steady_lat, _ = latencies(
        sink, t_start, burst, seconds,
        lambda k: max((work / "landing" / n / f"part-{k:08d}.parquet").stat().st_ctime
                      for n in ("person", "auction")), t0, measured_from)
    med, trend, keeps_up = backlog_verdict(backlog, measured_from)
    s = r.summary
    return {"query": "nexmark q8 (person, auction)", "rate": rate, "minutes": minutes,
            "placement": s.placement, "wall_s": wall, "instants": len(lat),
            "latency_p50_s": percentile(lat, 50), "latency_p99_s": percentile(lat, 99),
            "latency_max_s": max(lat) if lat else None, "steady_instants": len(steady_lat),
            "steady_latency_p50_s": percentile(steady_lat, 50),
            "steady_latency_p99_s": percentile(steady_lat, 99),
            "backlog_median_s": med, "backlog_slope": trend,
            "keeps_up": keeps_up,
            "cpu_s": {"ingest": s.ingest_cpu_s, "duckdb": sum(m.db_s for m in r.metrics),
                      **cpu},
            "input_rows": s.input_rows, "result_rows": s.result_rows,
            "dead_lettered": s.dead_lettered, "phases": s.phases}


def replay_point(query: str, rate: float, plugs: int, scale: float, spark, data: Path,
                 work: Path, placement: str = "auto", plan_rate: float | None = None) -> dict:
    """`plan_rate`: the rate the query is declared at (an explicit placement names the
    operators of the plan optimized for it: Phase-One's join order depends on the rate)."""
    from federation.api import run

    q = QUERIES[query](rate=plan_rate or rate, scale=scale, plugs=plugs)
    r = run(q, placement, data, work_dir=work, spark=spark, warmup_batch_s=10, drain=False)
    s = r.summary
    return {"rho_steady": s.rho_steady, "rho_windows_full": s.rho_windows_full,
            "placement": s.placement, "ingest_cpu_s": s.ingest_cpu_s,
            "ingest_rows_per_cpu_s": s.ingest_rows_per_cpu_s,
            "max_rate_estimate": rate * s.rho_steady}


def main(argv: list[str] | None = None) -> int:
    from spe.session import get_spark

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", default="CQ1,CQ3")
    ap.add_argument("--rates", default="20000,60000")
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--scale", type=float, default=1.0, help="window range scale")
    ap.add_argument("--out", default="live.json")
    ap.add_argument("--nexmark", action="store_true",
                    help="Nexmark q8 over two generated streams (module doc); --rates in "
                         "events/s")
    a = ap.parse_args(argv)
    spark = get_spark()
    points = []
    if a.nexmark:
        for rate in [float(x) for x in a.rates.split(",")]:
            work = Path(tempfile.mkdtemp(prefix="fedq-live-nx-"))
            try:
                say(f"nexmark q8 at {rate:g} events/s: live for {a.minutes:g} min")
                p = nexmark_point(rate, a.minutes, spark, work)
                say(f"  keeps up {p['keeps_up']} (backlog median {p['backlog_median_s']}), "
                    f"latency p50 {p['latency_p50_s']} p99 {p['latency_p99_s']}")
                points.append(p)
                write_result(a.out, {"points": points, "protocol": __doc__})
            finally:
                shutil.rmtree(work, ignore_errors=True)
        say(f"wrote {write_result(a.out, {'points': points, 'protocol': __doc__})}")
        return 0
    for query in a.queries.split(","):
        for rate in [float(x) for x in a.rates.split(",")]:
            work = Path(tempfile.mkdtemp(prefix="fedq-live-"))
            try:
                say(f"{query} at {rate:g}/s: live for {a.minutes:g} min")
                p, landing = live_point(query, rate, a.minutes, a.plugs, a.scale, spark, work)
                say(f"  keeps up {p['keeps_up']} (backlog median {p['backlog_median_s']}), "
                    f"latency p50 {p['latency_p50_s']} p99 {p['latency_p99_s']}")
                say(f"{query} at {rate:g}/s: replay of the same files")
                p["replay"] = replay_point(query, rate, a.plugs, a.scale, spark, landing,
                                           work / "replay")
                est = p["replay"]["max_rate_estimate"]
                p["live_over_replay"] = rate / est if p["keeps_up"] and est else None
                say(f"  replay rho {p['replay']['rho_steady']:.2f}")
                points.append(p)
                write_result(a.out, {"points": points, "protocol": __doc__})
            finally:
                shutil.rmtree(work, ignore_errors=True)
    path = write_result(a.out, {"points": points, "protocol": __doc__})
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
