"""Migrate: run the chain of segments, each under its placement over the instants it owns,
the next taking the window state over (move) or replaying the last extent. Each segment
runs in a thread of its own (`_Job`); a live run launches the next before the running one
ends (segment.py, an overlapped start), a replayed one runs them one after the other."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from costmodel.profile import CostProfile, load_profile
from federation.adaptive.decide import (
    AdaptiveError,
    DecideOptions,
    Segment,
    _alternatives,
    _check_options,
    check_segments_movable,
    with_rates,
)
from federation.adaptive.live import follow_input, live_source
from federation.adaptive.log import (
    Decided,
    SegmentLog,
    adaptive_identity,
    claim_adaptive,
    finished_rows,
)
from federation.adaptive.output import AdaptiveResult
from federation.adaptive.segment import Chain, Ran
from federation.adaptive.streams import AdaptiveInput
from federation.adaptive.watch import Watch, first_segment, next_segment
from federation.instants import end_flush_s, query_grid
from federation.logical import NumberedPlan, Rstream, Window
from federation.runtime import RunOptions, work_directory
from federation.runtime.handoff import Gate
from federation.runtime.live import run_id
from federation.runtime.progress import RunProgress, as_progress
from federation.runtime.recovery import WorkLock
from federation.runtime.sinks import close_sinks, end_sinks, open_run_sinks, output_written
from federation.runtime.stages import StagedPlan
from federation.runtime.tables import snapshot_tables

STRATEGIES = ("replay", "move")


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
    _check_options(query, 10 * query_grid(windows).slide_s if fixed else dec.every_s,
                   0.0 if fixed else dec.margin, segments)
    check_segments_movable(query, segments or [], planner, strategy)
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
                                         query_grid(windows), flush_s, window_s, halt, prog)
        else:
            follower = None
            prog.phase("reading input", unit="files")
            inp = AdaptiveInput.read(query, data, work, opt, flush_s, query_grid(windows),
                                     prog.advance, resuming)
        # every segment reads the tables as they were when the run started (one copy)
        tables = snapshot_tables(query.walk(), work / "input" / "tables", resuming)
        sinks = open_run_sinks(opt, rid, resuming, list(lg.tops), lg.many)
        try:
            chain = Chain(query, data, inp, work, strategy, planner, prog,
                           RunOptions.of(opt, output=None, work_dir=None, console=False,
                                         sinks=(), until=None, source=None), spark, tables,
                           sinks, halt)
            log = SegmentLog(work, resuming)
            runs, parts, prev = _resumed(chain, log)
            seg = log.resume_at(segments, lambda: first_segment(
                query, inp, window_s, dec.start_placement, planner))
            jobs = _Jobs(chain, log, segments, dec, window_s, planner, alternatives, prog)
            gaps, t_all = [], time.perf_counter()
            job = None if seg is None else jobs.launch(len(runs), seg, prev, None)
            last_out = None
            while job is not None:
                ran = jobs.finish(job)
                if halt.is_set():  # stopped: the same call resumes the segment
                    runs.append(ran.run)
                    break
                log.finished(job.k, ran.run)
                for q, t in ran.rows.items():
                    parts[q].append(t)
                runs.append(ran.run)
                if prev is not None:  # the output gap of the migration into it
                    gaps.append(None if last_out is None or ran.first_out is None
                                else ran.first_out - last_out)
                last_out, prev = ran.last_out, (ran.plan, ran.state)
                job = job.next or jobs.launch_next(job, ran.plan, ran.state)
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


@dataclass
class _Job:
    """Segment k running in a thread; `done` opens when it has finished (segment.Gate)."""

    k: int
    thread: threading.Thread | None = None
    done: Gate = field(default_factory=Gate)
    ran: Ran | None = None
    error: BaseException | None = None
    next: _Job | None = None  # launched before this one ended (a live run)


@dataclass
class _Jobs:
    """Launches the segments of one run, each with its watch, and keeps the log."""

    chain: Chain
    log: SegmentLog
    segments: Sequence[Segment] | None  # given (replayed decisions), or None: decided
    dec: DecideOptions
    window_s: float
    planner: Callable
    alternatives: Callable
    prog: RunProgress

    def launch(self, k: int, seg: Segment, prev, after: Gate | None) -> _Job:
        """Start segment k (`prev`: the plan and state directory of the one before;
        `after`: its Gate when it still runs)."""
        log, fixed, chain = self.log, self.segments is not None, self.chain
        logged = log.entries[k] if k < len(log.entries) else None
        log.start(k, seg)
        if logged is not None and not fixed and logged.next is not None:
            seg, watch = seg.model_copy(update={"stop_at": None}), Decided(
                logged.segment.stop_at)  # decided before the kill: completed
        else:
            d = self.dec
            watch = None if fixed else Watch(
                chain.query, chain.inp, seg.placement, seg.start_at, seg.start_at,
                every_s=d.every_s, window_s=self.window_s, margin=d.margin,
                min_interval_s=d.min_interval_s, grid=chain.grid,
                planner=self.planner, alternatives=self.alternatives, progress=self.prog,
                seconds_per_batch=chain.opt.seconds_per_batch)
        job = _Job(k)

        def decided(at) -> None:
            log.decided(k, at, next_segment(seg.model_copy(update={"stop_at": at}), watch))

        def near_end(pp, state) -> None:  # in a micro-batch (they hold the run's lock)
            if job.next is None and not chain.halt.is_set():
                nxt = self._after(k)
                if nxt is not None:
                    job.next = self.launch(k + 1, nxt, (pp, state), job.done)

        def body() -> None:
            try:
                job.ran = chain.run_segment(
                    seg, k, prev, watch, f"/{len(self.segments)}" if fixed else "", decided,
                    after, near_end if chain.live else None)
            except BaseException as e:  # noqa: BLE001 - raised by finish()
                job.error = e
            finally:
                (job.done.open if job.error is None and not chain.halt.is_set()
                 else job.done.fail)()

        job.thread = threading.Thread(target=body, name=f"fedq-segment-{k}", daemon=True)
        job.thread.start()
        return job

    def _after(self, k: int) -> Segment | None:
        """The segment after segment k, as given or as decided (the log has it)."""
        if self.segments is not None:
            return self.segments[k + 1] if k + 1 < len(self.segments) else None
        return self.log.entries[k].next

    def launch_next(self, job: _Job, plan, state) -> _Job | None:
        nxt = self._after(job.k)
        return None if nxt is None else self.launch(job.k + 1, nxt, (plan, state), None)

    def finish(self, job: _Job) -> Ran:
        """Wait for `job` (signals are handled meanwhile); its failure is raised once the
        one launched after it has stopped too."""
        while job.thread.is_alive():
            job.thread.join(0.2)
        if job.error is not None or job.ran is None:
            if job.next is not None:  # its gate failed: it stops at its first owned rows
                self.chain.halt.set()
                self.finish(job.next)
            raise job.error or RuntimeError(f"segment {job.k + 1} ended without a result")
        if self.chain.halt.is_set() and job.next is not None:
            # halted: it resumes from its own work directory (stopped at its gate, it
            # wrote nothing)
            with contextlib.suppress(Exception):
                self.finish(job.next)
        return job.ran


def _resumed(chain: Chain, log: SegmentLog):
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
        prev = (pp, seg_work / "state")
    return runs, parts, prev


def decide_and_run(query: Rstream, data: str | Path, options: RunOptions | None = None, *,
                   decide: Mapping | None = None, **run_options) -> AdaptiveResult:
    """An adaptive run that decides while it runs (`run_adaptive` without segments)."""
    return run_adaptive(query, data, None, options, decide=decide, **run_options)

