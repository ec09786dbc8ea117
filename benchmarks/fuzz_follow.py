"""The fuzzer's live runs: a generated query follows a landing directory while a writer
lands the data's files in bursts (write, then rename into place; random burst sizes and
pauses drawn from the query's source; a random `max_batch_rows`, small ones splitting the
files in the spool), under a placement that cuts the plan at engine
boundaries, and its instants, taken from the API's iterator as they are computed, must
equal the reference evaluator's over all rows.

Two endings, alternating between queries:

- `until`: the input ends at the data's last event second (`until=`), the run finishes
  every window and ends by itself;
- `idle`: the writer lands everything and goes quiet; after `idle_timeout_s` the clock
  moves on with wall time (federation/runtime/follow.py) and closes the windows; the run
  is stopped once the reference's last instant has arrived.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.parts import land_files

#: wall seconds without a new instant before a live run counts as stuck
STUCK_S = 120.0
#: ... and before its first instant: a plan cut at every engine boundary fills one
#: crossing at a time (seed 225's query 61, 40 operators, 20 crossings: its first instant
#: came after 137 and 139 micro-batches in two timed runs alone, 60 and 94 s; six runs
#: alone matched in 60-111 s; beside another fuzz worker, 133 batches took 120 s)
FILL_S = 300.0
IDLE_TIMEOUT_S = 1.0


def land_in_bursts(files: list[Path], landing: Path, rng: random.Random) -> None:
    """Land `files` in order, a burst of 1-6 at a time with a pause of 0-0.4 s between."""
    i = 0
    while i < len(files):
        n = rng.randint(1, 6)
        land_files(files[i:i + n], landing)
        i += n
        time.sleep(rng.uniform(0.0, 0.4))


def _instants(h):
    """The run's (tau, rows): the first within FILL_S, each later one within STUCK_S."""
    for item in h.results(timeout=FILL_S):
        yield item
        break
    else:
        return
    yield from h.results(timeout=STUCK_S)


def check_following(g, placement: str, data: Path, work: Path, spark, want: pa.Table,
                    ending: str) -> dict:
    """Run generated query `g` under `placement` following a landing directory fed from
    `data`'s files; the record of the run (outcome match, mismatch or crash)."""
    import traceback

    from federation.api import start
    from federation.results import diff_results

    # a small max_batch_rows splits the landed files across spool files (a burst's way)
    cap = random.Random(g.source + placement).choice([None, 120, 900, 500_000])
    rec = {"query": g.source, "placement": f"follow-{ending}:{placement}",
           "batch_s": g.batch_s, "feed": g.feed, "shapes": sorted(g.shapes),
           "max_batch_rows": cap}
    files = sorted(data.glob("part-*.parquet"))
    landing = work / "landing"
    landing.mkdir(parents=True)
    last = pc.max(pq.read_table(files[-1], columns=["ts"])["ts"]).as_py()
    options = {"until": last.replace(microsecond=0)} if ending == "until" else {
        "idle_timeout_s": IDLE_TIMEOUT_S}
    t0 = time.perf_counter()
    h, seen = None, []
    try:
        h = start(g.query, placement, landing, follow=True, work_dir=work / "run",
                  seconds_per_batch=g.batch_s, feed=g.feed, spark=spark, max_batch_rows=cap,
                  **options)
        feeder = threading.Thread(target=land_in_bursts, daemon=True,
                                  args=(files, landing, random.Random(g.source)))
        feeder.start()
        end = pc.max(want["tau"]).as_py() if want.num_rows else None
        parts = []
        for tau, rows in _instants(h):
            seen.append(tau)
            parts.append(rows)
            if ending == "idle" and tau >= end:
                break
        feeder.join()
        res = h.stop(timeout=STUCK_S) if ending == "idle" else h.wait(timeout=STUCK_S)
        got = pa.concat_tables(parts) if parts else want.slice(0, 0)
        problem = diff_results(got, want)
        if problem is None and (seen != sorted(seen) or len(set(seen)) != len(seen)):
            problem = f"instants out of order or repeated: {seen[:20]}"
        rec.update(outcome="match" if problem is None else "mismatch", rows=got.num_rows,
                   reference_rows=want.num_rows)
        if problem:
            rec["problem"] = problem
        elif res is None or res.summary.warnings:  # its report counts too (issue 41)
            rec.update(outcome="crash", error="report: " + (
                "; ".join(res.summary.warnings) if res else "the run did not end"))
    except queue.Empty:
        rec.update(outcome="crash", error=f"no {'new' if seen else 'first'} instant for "
                   f"{STUCK_S if seen else FILL_S:g} s "
                   f"(status {h.status() if h else None})")
    except Exception as e:  # noqa: BLE001 - a crash is an outcome to report
        rec.update(outcome="crash", error=f"{type(e).__name__}: {str(e)[:2000]}",
                   trace=traceback.format_exc()[-3000:])
    finally:
        if h is not None and h.status()["running"]:
            try:
                h.stop(timeout=STUCK_S)
            except Exception:  # noqa: BLE001, S110 - its error is reported above
                pass
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    return rec
