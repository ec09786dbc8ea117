"""What a micro-batch's feed costs, Spark's and the direct one, side by side in one run.

Run: python -m benchmarks.feed_cost [--rates 2000,20000] [--seconds 300,120]
Writes benchmarks/results/feed_cost.json: per feed and rate, the feed's own seconds per
micro-batch (median over the batches after the first five), the rows per batch, and the
fit `feed_s = per_batch + per_row x rows` over the rates, per feed (what the cost model is to
charge a plan whose streams no SPE-op reads instead of Spark's per-slide cost: issue 45).

The plan is CQ1 all in DuckDB (its stage has no SPE-op, so either feed can serve it), one
event second per micro-batch, replayed as fast as it goes. A batch's feed cost is its wall
time between the end of the batch before and its own end, less the DuckDB work of its
handler (`wall_s - (handler_s - transfer_s)`): reading the spool files and handing the
rows over as Arrow (`transfer_s`), and for Spark its scheduling, offset and commit logs.
Not included: ingest (validation into the spool, before the batches; the same for both
feeds) and Spark's start-up (a warm-up run first, untimed). Spark's feed is measured over
its first --spark-batches batches (1-2 s each: at least 60 s), the direct feed over all
of them (that both feeds give the same rows is the fuzzer's check, benchmarks/fuzz.py).
Nothing else may run meanwhile.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from benchmarks.common import say, write_result
from federation.api import run
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

WARM = 5  # batches left out at the start of each run


def feed_seconds(r) -> tuple[list[float], list[int]]:
    """Each steady data batch's feed seconds and rows (module doc)."""
    ms = [m for m in r.metrics if m.stage == 0 and m.data][WARM:]
    return [m.wall_s - (m.handler_s - m.transfer_s) for m in ms], [m.rows_in for m in ms]


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (rows, seconds) points."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rates", default="2000,20000")
    ap.add_argument("--seconds", default="300,120", help="event seconds of data per rate")
    ap.add_argument("--spark-batches", type=int, default=70)
    ap.add_argument("--plugs", type=int, default=500)
    ap.add_argument("--out", default="feed_cost.json")
    a = ap.parse_args(argv)
    from spe.session import get_spark

    spark = get_spark()
    work = Path(tempfile.mkdtemp(prefix="fedq-feed-"))
    rates = [float(x) for x in a.rates.split(",")]
    seconds = [int(x) for x in a.seconds.split(",")]
    rows, points = [], {"direct": [], "spe": []}
    for k, (rate, secs) in enumerate(zip(rates, seconds, strict=True)):
        data = work / f"data{int(rate)}"
        say(f"generating {secs} event s at {rate:.0f}/s")
        generate(data, rate=rate, seconds=secs, plugs=a.plugs, seed=1)
        q = QUERIES["CQ1"](rate=rate, plugs=a.plugs)
        if k == 0:
            say("warming Spark up (untimed)")
            run(q, "db", data, work_dir=work / "warmup", feed="spe", spark=spark,
                max_files=20)
        for feed in ("direct", "spe"):
            n = a.spark_batches if feed == "spe" else None
            say(f"CQ1 @ {rate:.0f}/s, all in DuckDB, feed {feed} ...")
            r = run(q, "db", data, work_dir=work / f"{feed}{int(rate)}", feed=feed,
                    spark=spark, seconds_per_batch=1, max_files=n)
            secs_b, rows_b = feed_seconds(r)
            points[feed] += list(zip(rows_b, secs_b, strict=True))
            med = statistics.median(secs_b)
            rows.append({"feed": feed, "rate": rate, "batches": len(secs_b),
                         "rows_per_batch": statistics.median(rows_b),
                         "feed_s_per_batch_median": med,
                         "feed_s_total": sum(secs_b), "wall_s": r.summary.wall_s})
            say(f"  {len(secs_b)} batches: feed {med * 1000:.2f} ms per batch (median), "
                f"run wall {r.summary.wall_s:.1f} s")
    fits = {}
    for feed, pts in points.items():
        per_batch, per_row = fit(pts)
        fits[feed] = {"per_batch_s": per_batch, "per_row_s": per_row, "points": len(pts)}
        say(f"{feed}: {per_batch * 1000:.3f} ms per batch + {per_row * 1e9:.1f} ns per row")
    ratio = {f"{r:.0f}": next(x["feed_s_per_batch_median"] for x in rows
                              if x["feed"] == "spe" and x["rate"] == r) /
             next(x["feed_s_per_batch_median"] for x in rows
                  if x["feed"] == "direct" and x["rate"] == r) for r in rates}
    path = write_result(a.out, {"rows": rows, "fit": fits, "spark_over_direct": ratio,
                                "seconds": seconds, "plugs": a.plugs})
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
