"""The fuzzer's adaptive runs (`python -m benchmarks.fuzz --adaptive K`): a generated query
re-placed mid-run, its output compared with the reference evaluator's over the same input.

Every K-th query (of those whose placements matched) runs once more as an adaptive run of
three given segments: the placements that ran, in an order drawn from the query's source
(the first cuts every engine boundary where it ran), migrating at two instants on the
query's slide grid drawn inside the data's span (a third of the time the second one after
the last reading, within the windows' extent: a segment with no reading of its own; with
a slide under a second, one of them inside an input second); the strategy (move or replay) and the
input (the data directory replayed, or followed: `follow:DIR` of a landing directory filled
beforehand, ended by `until`; a query over one stream only: two streams' inputs end apart, and
the quiet one's idle clock carries the input's end past the data's, so a global COUNT has
more instants than the replayed reference) alternate between queries. Its rows (a replayed run's, or a
followed run's as its sink got them, each instant once) must equal the reference. A query
with a tuple window is refused under `replay`, and under `move` where a migration's move
does not apply (semantic refusals: its last n rows are not bounded by event time, so only
a move takes them over), recorded as `refused`.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import time
import traceback
from pathlib import Path

import pyarrow as pa


class _Rows:
    """A sink keeping every query's rows (a followed run returns none)."""

    def __init__(self) -> None:
        self.parts: dict[str, list[pa.Table]] = {}

    def put(self, key, rows, query=None) -> None:
        self.parts.setdefault(query, []).append(rows)

    def close(self) -> None:
        pass


def check_adaptive(g, ran: list[str], data, work: Path, spark, want: dict[str, pa.Table],
                   live: bool, strategy: str) -> dict:
    """Run generated query `g` adaptively over `data` (a directory or one per stream) under
    the placements in `ran`; the record (outcome match, mismatch, refused or crash)."""
    from federation.adaptive import AdaptiveError, Segment, run_adaptive
    from federation.instants import extent_of, grid_floor, query_grid
    from federation.logical import Window
    from federation.parts import list_parts
    from federation.results import diff_results

    rng = random.Random(g.source + strategy)
    order = [ran[0], *rng.sample(ran[1:], len(ran) - 1)] if len(ran) > 1 else ran * 3
    order = (order * 3)[:3]
    windows = [n for n in g.query.walk() if isinstance(n, Window)]
    slide = query_grid(windows)  # the instants: a cut is one
    dirs = data if isinstance(data, dict) else {"": data}
    files = sorted(f for d in dirs.values() for f in list_parts(d))
    first = min(_second(f) for f in files)
    span = (max(_second(f) for f in files) - first).total_seconds()
    cuts = sorted({grid_floor(first + dt.timedelta(seconds=rng.uniform(0.2, 0.8) * span),
                              slide) for _ in range(2)})
    if rng.random() < 1 / 3:  # the last one after the last reading, within the extent:
        # its segment has no reading of its own, only the moved windows (or a replay's)
        after = rng.uniform(0.0, extent_of(windows))
        cuts[-1] = grid_floor(first + dt.timedelta(seconds=span + 1 + after), slide)
    cuts = [c for c in cuts if c > first] or [grid_floor(first, slide) + slide.slide]
    if slide.slide_s < 1 and all(c.microsecond == 0 for c in cuts):
        # a migration inside an input file's second (a moved segment once lost the rest of
        # that second, found only where the drawn instant happened to fall there)
        cuts = sorted({cuts[0] + slide.slide, *cuts[1:]})
    bounds = [None, *cuts, None]
    segs = [Segment(start_at=a, stop_at=b, placement=p, rate=100.0, reason="fuzz")
            for a, b, p in zip(bounds, bounds[1:], order)]
    rec = {"query": g.source, "batch_s": g.batch_s, "feed": g.feed,
           "shapes": sorted(g.shapes), "strategy": strategy,
           "placement": f"adaptive-{'follow' if live else 'replay'}:" + " -> ".join(
               p for p in order[:len(segs)]), "cuts": [str(c) for c in cuts]}
    t0 = time.perf_counter()
    try:
        source = data
        options: dict = {}
        if live:  # every file landed beforehand: the follower reads them as they are found
            source = {}
            for name, d in dirs.items():
                landing = work / "landing" / (name or "s")
                landing.mkdir(parents=True)
                for f in list_parts(d):
                    shutil.copy(f, landing / f.name)
                source[name] = f"follow:{landing}"
            source = source.get("", source)
            options["until"] = max(_second(f) for f in files)
        sink = _Rows()
        r = run_adaptive(g.query, source, segs, seconds_per_batch=g.batch_s, feed=g.feed,
                         spark=spark, work_dir=work / "run", strategy=strategy,
                         sinks=(sink,), **options)
        problems = []
        for n, w in want.items():
            got = pa.concat_tables(sink.parts[n]) if sink.parts.get(n) else w.slice(0, 0)
            if not live and (x := diff_results(r.of(n), w)) is not None:
                problems.append(f"{n} (returned): {x}")
            if (x := diff_results(got, w)) is not None:
                problems.append(f"{n} (sink): {x}")
        rec.update(outcome="mismatch" if problems else "match",
                   segments=[s.strategy for s in r.segments],
                   reference_rows=sum(w.num_rows for w in want.values()))
        if problems:
            rec["problem"] = "; ".join(problems)
    except AdaptiveError as e:
        rec.update(outcome="refused", reason=str(e))
    except Exception as e:  # noqa: BLE001 - a crash is an outcome to report
        rec.update(outcome="crash", error=f"{type(e).__name__}: {str(e)[:2000]}",
                   trace=traceback.format_exc()[-3000:])
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    return rec


def _second(f: Path) -> dt.datetime:
    """The first event second of a generated part file (its row-group statistics)."""
    import pyarrow.parquet as pq

    st = pq.read_metadata(f).row_group(0).column(
        pq.read_schema(f).get_field_index("ts")).statistics
    t = st.min
    return (t.replace(tzinfo=None) if getattr(t, "tzinfo", None) else t).replace(microsecond=0)
