"""Migrate: run the chain of segments, each under its placement over the instants it owns,
the next taking the window state over (move) or replaying the last extent."""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from costmodel.profile import CostProfile, load_profile
from federation.adaptive.decide import (
    AdaptiveError,
    DecideOptions,
    Segment,
    _alternatives,
    _check_options,
    with_rates,
)
from federation.adaptive.live import SpoolLink, follow_input, live_source, owned_seconds
from federation.adaptive.log import (
    Decided,
    SegmentLog,
    adaptive_identity,
    claim_adaptive,
    finished_rows,
)
from federation.adaptive.output import AdaptiveResult, SegmentRun, owned, segment_sinks
from federation.adaptive.streams import AdaptiveInput, SegmentInput
from federation.adaptive.watch import Watch, first_segment, next_segment
from federation.instants import end_flush_s
from federation.logical import NumberedPlan, Rstream, Window
from federation.runtime import RunOptions, RunResult, execute, work_directory
from federation.runtime.handoff import Handoff
from federation.runtime.live import run_id
from federation.runtime.move import NotMovable, plan_move, spark_tail_s
from federation.runtime.progress import RunProgress, as_progress
from federation.runtime.recovery import WorkLock, fault_point
from federation.runtime.sinks import close_sinks, end_sinks, open_run_sinks, output_written
from federation.runtime.stages import StagedPlan
from federation.runtime.tables import snapshot_tables

STRATEGIES = ("replay", "move")


@dataclass
class _Chain:
    """The fixed parts of one adaptive run: the query, its input validated once (each
    segment's spool links the spool files of its event seconds, ingest.sub_spool), the
    planner, and how each segment runs."""

    query: Rstream
    data: str | Path | Mapping[str, str | Path]
    inp: AdaptiveInput  # each stream's files and spool (streams.py)
    work: Path
    strategy: str
    planner: Callable
    prog: RunProgress
    opt: RunOptions  # each segment's, but for its work directory and warm-up
    spark: object
    tables: Mapping[str, Path]  # the copy of each database table made at the start
    sinks: Mapping[str, list]  # the run's sinks by query (output.py), opened once
    halt: object = None  # threading.Event: a live run's signal (the segment stops)

    def __post_init__(self) -> None:
        windows = [n for n in self.query.walk() if isinstance(n, Window)]
        self.slide_s = windows[0].slide_s
        self.warm_s = math.ceil(max(w.range_s for w in windows)) + 1
        self.flush_s = end_flush_s(NumberedPlan.of(self.query).nodes.values())
        self.history: list[dict[str, str]] = []  # each segment's, for the metrics

    def takeover(self, seg: Segment, pp, prev) -> tuple[dict | None, str]:
        """How a segment starts: (moved state, "start" | "move" | "replay (why)")."""
        if seg.start_at is None:
            return None, "start"
        if self.strategy == "move":
            try:
                return plan_move(prev[0], prev[1], pp, self.slide_s), "move"
            except NotMovable as e:
                return None, f"replay (move does not apply: {e})"
        return None, "replay"

    @property
    def live(self) -> bool:
        return self.opt.follow

    def spool(self, seg: Segment, moved, k: int, pp, stop) -> SegmentInput:
        """The segment's input (streams.AdaptiveInput.segment; live: a SpoolLink): from
        its start when it takes the state over, else from a replay's warm-up of the last
        extent before it. `stop()`: its migration instant as known now (live)."""
        lo = seg.start_at if moved is not None else (
            None if seg.start_at is None else seg.start_at - dt.timedelta(seconds=self.warm_s))
        out = self.work / f"segment{k}" / "spool"
        if self.live:
            tail = spark_tail_s(pp, self.opt.seconds_per_batch) + self.opt.allowed_lateness_s
            link = SpoolLink(self.inp.follower, self.inp.streams, out, lo, stop, tail)
            return SegmentInput({}, 0, 0, None, link.start())
        return self.inp.segment(lo, seg.start_at, seg.stop_at, out,
                                self.opt.seconds_per_batch == 1, self.flush_s)

    def run_segment(self, seg: Segment, k: int, prev, watch, of: str,
                    on_decided: Callable | None = None):
        """Run one segment; (its SegmentRun, the rows it owns by query, its gap, what the next
        segment takes over: its plan, its DB-ops' state, its last result's wall time).
        `on_decided(at)`: the watch decided to migrate at `at` (the log keeps it)."""
        if seg.start_at is not None:  # the old placement stopped, the new one not started
            fault_point("migration")
        pp, _ = self.planner(with_rates(self.query, seg.rates or seg.rate), seg.placement)
        moved, how = self.takeover(seg, pp, prev)
        t0 = time.perf_counter()  # its setup: its spool, Spark's queries, its warm-up
        chosen = seg.stop_at if watch is None else None

        def stop() -> dt.datetime | None:
            return chosen or (watch.chosen[0].at if watch is not None and watch.chosen
                              else None)

        sin = self.spool(seg, moved, k, pp, stop)
        ff = sin.warm and self.opt.seconds_per_batch == 1  # the warm-up merged (spool)
        self.prog.phase(f"segment {k + 1}{of}: {seg.placement} ({seg.reason}; {how})",
                        total=sin.seconds or None, unit="event seconds")
        first_at, last_out, stop_t = [None], [None], [None]

        def on_batch(m) -> None:
            if m.result_rows and (seg.start_at is None or (m.clock is not None
                                                          and m.clock >= seg.start_at)):
                if first_at[0] is None:
                    first_at[0] = time.perf_counter() - t0
                last_out[0] = time.perf_counter()
            if watch is not None:
                watch.batch(m)
                if watch.chosen is not None and stop_t[0] is None:
                    stop_t[0] = time.perf_counter()
                    if on_decided is not None:
                        on_decided(watch.chosen[0].at)
            self.prog.batch(m)

        seg_work = self.work / f"segment{k}" / "work"
        sinks = segment_sinks(k, seg.start_at, stop, self.sinks)
        self.history.append({"placement": seg.placement, "strategy": how, "reason": seg.reason,
                             "since": "the first instant" if seg.start_at is None
                             else str(seg.start_at)})
        try:
            r: RunResult = execute(
                pp, self.data, RunOptions.of(self.opt, sinks=sinks), work_dir=seg_work,
                warmup_batch_s=10 if ff else None,
                spark=self.spark, progress=on_batch, halt=self.halt,
                handoff=Handoff(start_at=seg.start_at if moved is not None else None,
                                stop_at=seg.stop_at, moved=moved or {}, watch=watch,
                                prepared=sin.spools, follower=sin.link,
                                tables=self.tables, segments=tuple(self.history)))
        finally:
            if sin.link is not None:
                sin.link.stop()
        t_end = time.perf_counter()
        if watch is not None and r.summary.stopped_at is not None:
            seg = seg.model_copy(update={"stop_at": r.summary.stopped_at})
        rows = {} if self.live else {q: owned(r.of(q), seg.start_at, seg.stop_at)
                                     for q in self.sinks}  # live: in the sinks only
        gap = None if prev is None or first_at[0] is None or prev[2] is None \
            else t0 + first_at[0] - prev[2]
        owned_s = owned_seconds(seg, sin, r, self.inp)
        run = SegmentRun(segment=seg, strategy=how, moved=r.summary.moved,
                         input_seconds=sin.seconds, warmup_seconds=sin.warm,
                         result_rows=sum(t.num_rows for t in rows.values()) if rows
                         else sinks[0].rows if sinks else 0,
                         wall_s=t_end - t0,
                         rho=owned_s / (t_end - t0) if t_end > t0 else float("nan"),
                         first_result_s=first_at[0], setup_s=(t_end - t0) - r.summary.wall_s,
                         stop_s=None if stop_t[0] is None else t_end - stop_t[0],
                         batches=[(m.clock, m.wall_s) for m in r.metrics
                                  if m.stage == 0 and m.data and m.clock is not None],
                         decisions=[] if watch is None else watch.decisions)
        return run, rows, gap, (pp, seg_work / "state", last_out[0] or t_end)


def run_adaptive(query: Rstream, data: str | Path | Mapping[str, str | Path], segments: Sequence[Segment] | None = None,
                 options: RunOptions | None = None, *, decide: Mapping | None = None,
                 profile: CostProfile | None = None, spark=None,
                 progress: RunProgress | None = None, strategy: str = "move",
                 planner: Callable | None = None, alternatives: Callable | None = None,
                 halt=None, **option_values) -> AdaptiveResult:
    """Run a query adaptively (module doc).

    With `segments`, each runs its given placement over the instants it owns (a replayed
    decision: tests, benchmarks). Without, the run decides while it runs: every segment
    is watched (`Watch`, options in `decide`: DecideOptions) and stopped at the instant a
    decision migrates.

    `strategy`: "replay" starts every new placement from a replay of the last extent of
    input (parallel track); "move" moves the window state in DuckDB over where that
    applies (federation/runtime/move.py) and replays elsewhere.

    `query`: one query or a set (the merged plan is re-placed as one: shared operators stay
    shared). `options` (RunOptions, or their fields as keywords): as a plain run's;
    `work_dir` holds every segment's; the output, `console` and `sinks` get each instant
    once, in order, as the segments compute them (output.py); the rows are returned too,
    but for a live run's (follow, or a live source: live.py), which are in its sinks only.
    `halt` (a threading.Event): a live run stops after the micro-batch in progress; the
    same call resumes it."""
    from federation.optimizer import plan_for

    opt = RunOptions.of(options, **option_values)
    if not opt.follow and live_source(query, data, opt):
        opt = RunOptions.of(opt, follow=True)  # a live source never ends
    halt = halt or threading.Event()
    if opt.warmup_batch_s is not None or opt.max_files is not None or not opt.drain:
        raise AdaptiveError("options", "warmup_batch_s, max_files and drain=False are not "
                            "options of an adaptive run")
    if strategy not in STRATEGIES:
        raise AdaptiveError("strategy", f"{strategy!r} is not one of "
                            f"{', '.join(STRATEGIES)}")
    prof = (profile or load_profile()).model_copy(update={"feed": opt.feed})  # as run
    planner = planner or (lambda q, p: plan_for(q, p, prof))
    if alternatives is None:
        alternatives = _alternatives(prof)
    prog = as_progress(progress)
    dec = DecideOptions.of(decide)
    windows = [n for n in query.walk() if isinstance(n, Window)]
    fixed = segments is not None
    _check_options(query, 10 * windows[0].slide_s if fixed else dec.every_s,
                   0.0 if fixed else dec.margin, segments)
    window_s = dec.window_s or dec.every_s
    work = work_directory(opt.work_dir, "fedq-adaptive-")
    lock = WorkLock.hold(work)
    try:
        resuming = claim_adaptive(work, adaptive_identity(query, data, opt, strategy,
                                                          segments, dec))
        lg = NumberedPlan.of(query)
        rid = run_id(work, resuming)
        flush_s = end_flush_s(lg.nodes.values())
        if opt.follow:  # one follower for the whole run (live.py)
            follower, inp = follow_input(query, data, work, opt, rid, resuming,
                                         windows[0].slide_s, flush_s, window_s, halt, prog)
        else:
            follower = None
            prog.phase("reading input", unit="files")
            inp = AdaptiveInput.read(query, data, work, opt, flush_s, windows[0].slide_s,
                                     prog.advance, resuming)
        # every segment reads the tables as they were when the run started (one copy)
        tables = snapshot_tables(query.walk(), work / "input" / "tables", resuming)
        sinks = open_run_sinks(opt, rid, resuming, list(lg.tops), lg.many)
        try:
            chain = _Chain(query, data, inp, work, strategy, planner, prog,
                           RunOptions.of(opt, output=None, work_dir=None, console=False,
                                         sinks=(), until=None, source=None), spark, tables,
                           sinks, halt)
            log = SegmentLog(work, resuming)
            runs, parts, prev = _resumed(chain, log)
            seg = log.resume_at(segments, lambda: first_segment(
                query, inp, window_s, dec.start_placement, planner))
            gaps, t_all = [], time.perf_counter()
            while seg is not None:
                k = len(runs)
                logged = log.entries[k] if k < len(log.entries) else None
                log.start(k, seg)
                if logged is not None and not fixed and logged.next is not None:
                    seg, watch = seg.model_copy(update={"stop_at": None}), Decided(
                        logged.segment.stop_at)  # decided before the kill: completed
                else:
                    watch = None if fixed else Watch(
                        query, inp, seg.placement, seg.start_at, seg.start_at,
                        every_s=dec.every_s, window_s=window_s, margin=dec.margin,
                        min_interval_s=dec.min_interval_s, slide_s=chain.slide_s,
                        planner=planner, alternatives=alternatives, progress=prog,
                        seconds_per_batch=opt.seconds_per_batch)

                def decided(at, k=k, seg=seg, watch=watch):
                    nxt = next_segment(seg.model_copy(update={"stop_at": at}), watch)
                    log.decided(k, at, nxt)

                run, rows, gap, nxt = chain.run_segment(
                    seg, k, prev, watch, f"/{len(segments)}" if fixed else "", decided)
                if halt.is_set():  # stopped: the same call resumes the segment
                    runs.append(run)
                    break
                log.finished(k, run)
                for q, t in rows.items():
                    parts[q].append(t)
                runs.append(run)
                if prev is not None:
                    gaps.append(gap)
                prev = nxt
                seg = log.entries[k].next if not fixed else (
                    segments[k + 1] if k + 1 < len(segments) else None)
            results = None if chain.live else {
                q: pa.concat_tables([t for t in ts if t.num_rows] or ts[:1])
                for q, ts in parts.items()}  # an empty segment's table has tau only
            # the results are durable first (a .parquet file is written here), then the report
            if results is not None:
                end_sinks(sinks, {q: (lambda t=t: t) for q, t in results.items()}, prog.phase)
        finally:
            close_sinks(sinks, opt)
            for user in opt.sinks:  # the user's too (execute closes a plain run's)
                user.close()
    finally:
        if follower is not None:
            follower.stop()
        lock.close()
    whole = inp.whole
    output = output_written(sinks) or opt.output
    first = None if results is None else next(iter(results.values()))
    return AdaptiveResult(rows=first, results=results if lg.many else None,
                          halted=halt.is_set(),
                          output=None if output is None else str(output), segments=runs,
                          wall_s=time.perf_counter() - t_all, gaps_s=gaps,
                          dead_lettered=whole.rows_dead, dead_by_reason=whole.dead,
                          quarantined=whole.quarantined,
                          deadletter_dir=str(whole.deadletter_dir))


def _resumed(chain: _Chain, log: SegmentLog):
    """The finished segments of an interrupted run (log.py): their records, the rows they
    own by query (read from their result parts), what the next segment takes over."""
    parts: dict[str, list[pa.Table]] = {q: [] for q in chain.sinks}
    runs, prev = [], None
    for k, e in enumerate(log.done):
        seg = e.run.segment
        pp, _ = chain.planner(with_rates(chain.query, seg.rates or seg.rate), seg.placement)
        seg_work = chain.work / f"segment{k}" / "work"
        if not chain.live:  # a live run's are in its sinks only
            for q, t in finished_rows(seg_work, seg, StagedPlan.of(pp).columns).items():
                parts[q].append(t)
        runs.append(e.run)
        chain.history.append({"placement": seg.placement, "strategy": e.run.strategy,
                              "reason": seg.reason, "since": "the first instant"
                              if seg.start_at is None else str(seg.start_at)})
        prev = (pp, seg_work / "state", None)
    return runs, parts, prev


def decide_and_run(query: Rstream, data: str | Path, options: RunOptions | None = None, *,
                   decide: Mapping | None = None, **run_options) -> AdaptiveResult:
    """An adaptive run that decides while it runs (`run_adaptive` without segments)."""
    return run_adaptive(query, data, None, options, decide=decide, **run_options)

