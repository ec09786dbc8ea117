"""Soak (issue 11): the optimizer's plan runs for a long time in real time; memory and batch
time are sampled every 10 s and must stay flat.

Run: python -m benchmarks.soak --query CQ1 --rate 240000 --minutes 30
     python -m benchmarks.soak --query CQ1 --rate 100000 --minutes 30 --follow --out soak_follow_CQ1.json

With --follow the input is live: a producer process writes one file per wall second (the
first window range at once) and the run follows the landing directory (ingest included).

The windows (5 minutes) are filled first in batches of 10 event seconds, then the plan
runs one event second per micro-batch, triggered every wall second (real time, as a
deployment would), for `--minutes`. Every 10 s: resident memory of this Python process
and of the JVM (with its children), DuckDB's own accounting of the MIGs, the last batch's
wall time and the backlog. Writes benchmarks/results/soak_<query>.json and .png, with the
least-squares slope of each memory series over the last 20 minutes (MB per minute).
Choose `--rate` at about 80% of the plan's maximum throughput (benchmarks/results/README.md).
Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.common import say, write_result
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


def _tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(_children(p))
    return seen


def slope_mb_per_min(ts: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of ys (bytes) over ts (s), in MB per minute."""
    if len(ts) < 3:
        return None
    mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
    den = sum((t - mt) ** 2 for t in ts)
    if den == 0:
        return None
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den * 60 / 2**20


def main(argv: list[str] | None = None) -> int:
    from federation.api import run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--query", default="CQ1")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--plugs", type=int, default=2125)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--follow", action="store_true",
                    help="live: a producer process writes the files in real time (the first "
                         "window range at once) and the run follows them (benchmarks.live)")
    ap.add_argument("--out", default=None,
                    help="result file (default benchmarks/results/soak_<query>.json; a bare "
                         "name goes there too); the plot goes beside it as .png")
    a = ap.parse_args(argv)
    warm = 300
    seconds = warm + math.ceil(a.minutes * 60) + 30
    data = (a.data_dir or Path(tempfile.gettempdir()) / "fedq-soak-data"
            ) / f"r{int(a.rate)}_s{seconds}_p{a.plugs}"
    if a.follow:
        data = Path(tempfile.mkdtemp(prefix="fedq-soak-landing-"))
    elif not (data / "_manifest.json").exists():
        say(f"generating {seconds} s at {a.rate:.0f}/s ({a.plugs} plugs) -> {data}")
        generate(data, rate=a.rate, seconds=seconds, plugs=a.plugs, seed=3)
    q = QUERIES[a.query](rate=a.rate, plugs=a.plugs)
    samples: list[dict] = []
    t0 = time.time()
    last = {"t": 0.0, "db": None}
    me = os.getpid()
    others: set[int] = set()  # the producer: not the JVM

    def sample(m) -> None:
        if m.db_memory_bytes is not None:
            last["db"] = m.db_memory_bytes
        now = time.time() - t0
        if m.stage != 0 or now - last["t"] < 10.0:
            return
        last["t"] = now
        jvm = sum(_rss(p) for p in _tree(me) if p != me and p not in others)
        samples.append({"t_s": round(now, 1), "event_s": m.event_seconds_done,
                        "backlog_s": m.backlog_s, "batch_wall_s": round(m.wall_s, 3),
                        "python_rss": _rss(me), "jvm_rss": jvm, "duckdb_bytes": last["db"]})
        if len(samples) % 6 == 0:
            say(f"  {now / 60:.1f} min: event s {m.event_seconds_done}, backlog "
                f"{m.backlog_s} s, python {_rss(me) / 2**20:.0f} MB, JVM {jvm / 2**20:.0f} MB,"
                f" DuckDB {(last['db'] or 0) / 2**20:.0f} MB")

    work = Path(tempfile.mkdtemp(prefix="fedq-soak-"))
    try:
        if a.follow:
            import datetime as dt

            from benchmarks.live import producer
            from federation.api import start

            start_at = dt.datetime(2013, 9, 1)
            prod = producer(data, a.rate, seconds, a.plugs, start_at, warm)
            others.update(_tree(prod.pid))
            h = start(q, "auto", data, follow=True, work_dir=work, iterate=False,
                      until=start_at + dt.timedelta(seconds=seconds - 1), progress=sample)
            r = h.wait()
            prod.wait()
        else:
            r = run(q, "auto", data, work_dir=work, seconds_per_batch=1, realtime=True,
                    warmup_batch_s=10, drain=False, progress=sample,
                    budget_s=a.minutes * 60 + 600)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if a.follow:
            shutil.rmtree(data, ignore_errors=True)
    # steady state: after the first window range, before a following run's input ends
    # (`until`: the drain that follows stops Spark's queries and the JVM shrinks)
    end = seconds - 1 if a.follow else math.inf
    full = [s for s in samples if s["event_s"] is not None and warm < s["event_s"] < end]
    tail_from = (full[-1]["t_s"] - 20 * 60) if full else 0
    tail = [s for s in full if s["t_s"] >= tail_from]
    slopes = {k: slope_mb_per_min([s["t_s"] for s in tail if s[k] is not None],
                                  [s[k] for s in tail if s[k] is not None])
              for k in ("python_rss", "jvm_rss", "duckdb_bytes")}
    doc = {"query": a.query, "rate": a.rate, "minutes": a.minutes, "plugs": a.plugs,
           "mode": "follow (live producer)" if a.follow else "replay in real time",
           "placement": r.summary.placement, "samples": samples,
           "slope_mb_per_min_last_20_min": slopes,
           "batches": r.summary.data_batches, "truncated": r.summary.truncated}
    path = write_result(a.out or f"soak_{a.query}.json", doc)
    _plot(doc, path.with_suffix(".png"))
    say(f"slopes (MB/min, last 20 min): {slopes} -> {path}")
    return 0


def _plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = doc["samples"]
    t = [x["t_s"] / 60 for x in s]
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for k, label in (("python_rss", "Python RSS"), ("jvm_rss", "JVM RSS"),
                     ("duckdb_bytes", "DuckDB")):
        ax.plot(t, [(x[k] or 0) / 2**20 for x in s], label=label)
    ax.set_ylabel("MB")
    ax.legend()
    ax.set_title(f"soak {doc['query']} at {doc['rate']:.0f} tuples/s ({doc['placement']})")
    bx.plot(t, [x["batch_wall_s"] for x in s], label="batch wall s")
    bx.set_ylabel("s per micro-batch")
    bx.set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
