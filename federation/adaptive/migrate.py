"""Migrate: run the chain of segments, each under its placement over the instants it owns,
the next taking the window state over (moving state) or replaying the last extent."""


from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from costmodel.profile import CostProfile, load_profile
from federation.adaptive.decide import (
    AdaptiveError,
    Segment,
    _alternatives,
    _check,
    _start,
    with_rate,
)
from federation.adaptive.inputs import part_files
from federation.adaptive.watch import Decision, Watch
from federation.logical import NumberedPlan, Rstream, Window
from federation.runtime import RunResult, execute, work_directory
from federation.runtime.carry import NotMovable, plan_carry
from federation.runtime.execute import end_flush_s
from federation.runtime.handoff import Handoff
from federation.runtime.ingest import prepare_input, sub_spool
from federation.runtime.progress import RunProgress, as_progress


class SegmentRun(BaseModel):
    """How one segment ran."""

    model_config = ConfigDict(extra="forbid")

    segment: Segment
    #: how it started: "start" (the first), "replay" (parallel track, and why moving
    #: state did not apply when it was asked for) or "move"
    strategy: str = "start"
    #: rows (or slice rows) its DB-ops took from the previous segment's, per DB-op and table
    carried: dict[str, dict[str, int]] = {}
    input_seconds: int  # event seconds read, warm-up included
    warmup_seconds: int
    result_rows: int
    wall_s: float  # the whole segment: ingest, Spark start, warm-up, its batches, drain
    rho: float  # event seconds it owns over its wall time
    #: wall time from the segment's call until its first result at its first instant
    #: (the output gap of a migration: the new placement's start and warm-up)
    first_result_s: float | None
    #: wall time before its first micro-batch (ingest of its input, Spark's queries)
    setup_s: float
    #: wall time from the old segment's stop to the end of its run (its tail and drain)
    stop_s: float | None = None
    #: its stage-0 data micro-batches: (event time reached, wall seconds of the batch)
    batches: list[tuple[dt.datetime, float]]
    decisions: list[Decision] = []  # taken while it ran (online runs)


class AdaptiveResult(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    rows: pa.Table
    segments: list[SegmentRun]
    wall_s: float
    #: the output gap of each migration: wall seconds from the old placement's last
    #: micro-batch that produced results to the new one's first result
    gaps_s: list[float | None] = []
    #: bad rows of the input (validated once, before the first segment), per reason; their
    #: records, and the files that could not be read, are in `deadletter_dir`
    dead_lettered: int = 0
    dead_by_reason: dict[str, int] = {}
    quarantined: list[dict[str, str]] = []  # part files that could not be read
    deadletter_dir: str | None = None

    @property
    def migrations(self) -> int:
        return len(self.segments) - 1


def _owned(rows: pa.Table, seg: Segment) -> pa.Table:
    tau = rows.column("tau")
    keep = None
    if seg.start is not None:
        keep = pc.greater_equal(tau, pa.scalar(seg.start, tau.type))
    if seg.end is not None:
        lt = pc.less(tau, pa.scalar(seg.end, tau.type))
        keep = lt if keep is None else pc.and_(keep, lt)
    return rows if keep is None else rows.filter(keep)


STRATEGIES = ("replay", "move")


def run_adaptive(query: Rstream, data: str | Path, segments: Sequence[Segment] | None = None,
                 *, decide: Mapping | None = None, profile: CostProfile | None = None,
                 seconds_per_batch: int = 1, work_dir: str | Path | None = None, spark=None,
                 progress: RunProgress | None = None, strategy: str = "move",
                 planner: Callable | None = None, alternatives: Callable | None = None,
                 **execute_options) -> AdaptiveResult:
    """Run a query adaptively (module doc).

    With `segments`, each runs its given placement over the instants it owns (a replayed
    decision: tests, benchmarks). Without, the run decides while it runs: every segment
    is watched (`Watch`, options in `decide`: every_s, window_s, margin, min_interval_s,
    start_placement) and stopped at the instant a decision migrates.

    `strategy`: "replay" starts every new placement from a replay of the last extent of
    input (parallel track); "move" carries the window state in DuckDB over where that
    applies (federation/runtime/carry.py) and replays elsewhere."""
    from federation.optimizer import plan_for

    if strategy not in STRATEGIES:
        raise AdaptiveError("strategy", f"{strategy!r} is not one of "
                            f"{', '.join(STRATEGIES)}")
    prof = profile or load_profile()
    planner = planner or (lambda q, p: plan_for(q, p, prof))
    if alternatives is None and planner is not None:
        alternatives = _alternatives(prof)
    prog = as_progress(progress)
    windows = [n for n in query.walk() if isinstance(n, Window)]
    slide_s = windows[0].slide_s
    opts = dict(decide or {})
    start_placement = opts.pop("start_placement", "auto")
    every_s = opts.pop("every_s", 10.0)
    margin = opts.pop("margin", 0.1)
    min_interval_s = opts.pop("min_interval_s", 30.0)
    window_s = opts.pop("window_s", None)
    if opts:
        raise AdaptiveError("decide", f"unknown option(s) {', '.join(opts)}")
    fixed = segments is not None
    if fixed:
        _check(query, data, 10 * slide_s, None, 0.0)  # tuple windows, input files
        files = part_files(data, windows[0].stream.ts_column)
    else:
        window_s, files = _check(query, data, every_s, window_s, margin)
    extent = max(w.range_s for w in windows)
    warm_s = math.ceil(extent) + 1
    work = work_directory(work_dir, "fedq-adaptive-")
    # one ingest: every row validated once (dead letters counted once); each segment's
    # spool links the spool files of its event seconds (federation.runtime.ingest.sub_spool)
    stream = windows[0].stream
    flush_s = end_flush_s(NumberedPlan.of(query).nodes.values())  # as every execute's
    prog.phase("reading input", unit="files")
    whole = prepare_input(data, work / "input", stream, progress=prog.advance,
                          allowed_lateness_s=execute_options.get("allowed_lateness_s", 0.0),
                          flush_after_s=flush_s,
                          domains={c: set(v) for c, v in stream.domains.items()},
                          tick_s=slide_s,
                          horizon_s=execute_options.get("event_horizon_s", 3600.0))
    position = {n: i for i, n in enumerate(whole.file_names)}
    seg = segments[0] if fixed else _start(query, files, window_s, start_placement, planner)
    parts, runs, gaps = [], [], []
    prev = None  # the previous segment's plan, its DB-op state directory, its last result
    t_all = time.perf_counter()
    k = 0
    while seg is not None:
        pp, _ = planner(with_rate(query, seg.rate), seg.placement)
        carry, how = None, "start"
        if seg.start is not None:
            how = "replay"
            if strategy == "move":
                try:
                    carry = plan_carry(prev[0], prev[1], pp, slide_s)
                    how = "move"
                except NotMovable as e:
                    how = f"replay (moving state does not apply: {e})"
        lo = seg.start if carry is not None else (
            None if seg.start is None else seg.start - dt.timedelta(seconds=warm_s))
        mine = [f for f in files if (lo is None or f.start >= lo)
                and (seg.end is None or f.start < seg.end)]
        t0 = time.perf_counter()  # its setup: its spool, Spark's queries, its warm-up
        span = [position[f.path.name] for f in mine]
        names = whole.file_names[span[0]:span[-1] + 1]
        warm = 0 if seg.start is None else next(
            (position[f.path.name] - span[0] for f in mine if f.start >= seg.start),
            len(names))
        ff = warm if (warm and seconds_per_batch == 1) else None
        sub = sub_spool(whole, names, work / f"segment{k}" / "spool", stream,
                        warmup=warm if ff else 0, flush_after_s=flush_s)
        watch = None
        if not fixed:
            watch = Watch(query, files, seg.placement, seg.start, seg.start, every_s=every_s,
                          window_s=window_s, margin=margin, min_interval_s=min_interval_s,
                          slide_s=slide_s, planner=planner, alternatives=alternatives,
                          progress=prog, seconds_per_batch=seconds_per_batch)
        prog.phase(f"segment {k + 1}" + (f"/{len(segments)}" if fixed else "")
                   + f": {seg.placement} ({seg.reason}; {how})",
                   total=len(names), unit="event seconds")
        first_at, last_out, stop_t = [None], [None], [None]

        def on_batch(m, seg=seg, t0=t0, first_at=first_at, last_out=last_out, watch=watch,
                     stop_t=stop_t) -> None:
            if m.result_rows and (seg.start is None or (m.clock is not None
                                                       and m.clock >= seg.start)):
                if first_at[0] is None:
                    first_at[0] = time.perf_counter() - t0
                last_out[0] = time.perf_counter()
            if watch is not None:
                watch.batch(m)
                if watch.chosen is not None and stop_t[0] is None:
                    stop_t[0] = time.perf_counter()
            prog.batch(m)

        seg_work = work / f"segment{k}" / "work"
        r: RunResult = execute(pp, data, seconds_per_batch=seconds_per_batch,
                               work_dir=seg_work, spark=spark,
                               progress=on_batch, warmup_batch_s=10 if ff else None,
                               handoff=Handoff(start_at=seg.start if carry is not None else None,
                                               stop_at=seg.end, carry=carry or {}, watch=watch,
                                               prepared=sub), **execute_options)
        t_end = time.perf_counter()
        if watch is not None and r.summary.stopped_at is not None:
            seg = seg.model_copy(update={"end": r.summary.stopped_at})
        rows = _owned(r.rows, seg)
        parts.append(rows)
        if prev is not None:
            gaps.append(None if first_at[0] is None or prev[2] is None
                        else t0 + first_at[0] - prev[2])
        owned_s = sum(1 for f in mine if (seg.start is None or f.start >= seg.start)
                      and (seg.end is None or f.start < seg.end))
        runs.append(SegmentRun(segment=seg, strategy=how, carried=r.summary.carried,
                               input_seconds=len(mine), warmup_seconds=warm,
                               result_rows=rows.num_rows, wall_s=t_end - t0,
                               rho=owned_s / (t_end - t0) if t_end > t0 else float("nan"),
                               first_result_s=first_at[0], setup_s=(t_end - t0)
                               - r.summary.wall_s,
                               stop_s=None if stop_t[0] is None else t_end - stop_t[0],
                               batches=[(m.clock, m.wall_s) for m in r.metrics
                                        if m.stage == 0 and m.data and m.clock is not None],
                               decisions=[] if watch is None else watch.decisions))
        prev = (pp, seg_work / "state", last_out[0] or t_end)
        k += 1
        if fixed:
            seg = segments[k] if k < len(segments) else None
        elif watch is not None and watch.chosen is not None and seg.end is not None:
            d, cost = watch.chosen
            seg = Segment(start=seg.end, end=None, placement=d.best, rate=d.rate,
                          reason=d.reason, C_b=cost.vector.bottleneck_cost,
                          C_u=cost.vector.utilization_cost)
        else:
            seg = None
    rows = pa.concat_tables(parts) if parts else pa.table({})
    return AdaptiveResult(rows=rows, segments=runs, wall_s=time.perf_counter() - t_all,
                          gaps_s=gaps, dead_lettered=whole.rows_dead,
                          dead_by_reason=whole.dead, quarantined=whole.quarantined,
                          deadletter_dir=str(whole.deadletter_dir))



def decide_and_run(query: Rstream, data: str | Path, *, decide: Mapping | None = None,
                   **run_options) -> AdaptiveResult:
    """An adaptive run that decides while it runs (`run_adaptive` without segments)."""
    return run_adaptive(query, data, decide=decide, **run_options)
