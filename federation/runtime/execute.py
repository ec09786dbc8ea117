"""`execute`: run a given physical plan over a directory of part files (docs/architecture.md).

Ingest validates the input into a spool; the plan is cut into stages (stages.py), each a
Spark streaming query whose foreachBatch is a BatchHandler (microbatch.py) feeding the MIGs
(mig.py); at the end of input the MIGs finish every remaining slide; the summary and the
result rows are returned (result.py). The runtime never re-plans: placement, DB-ops and
their SQL come with the plan.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from federation.errors import OptionError
from federation.instants import end_flush_s, extent_of, first_instant, last_instant, query_grid
from federation.logical import Window
from federation.physical import PhysicalPlan
from federation.runtime.ahead import ahead_of
from federation.runtime.direct import (
    DirectFeed,
    build_direct,
    direct_stages,
    needs_spark,
    spool_format,
)
from federation.runtime.drive import drive, drive_following, stop_queries
from federation.runtime.failure import run_failed
from federation.runtime.handoff import Handoff
from federation.runtime.live import (
    RunHalted,
    run_id,
    seconds_by_batches,
    seconds_by_clock,
    start_following,
    wait_for_first,
)
from federation.runtime.metrics import start_metrics
from federation.runtime.microbatch import BatchHandler, Execution
from federation.runtime.mig import MigRuntime, mig_resources
from federation.runtime.move import spark_tail_s, spark_window_state
from federation.runtime.options import RunOptions, work_directory
from federation.runtime.phases import RunClock
from federation.runtime.progress import RunProgress, as_progress
from federation.runtime.recovery import (
    ResultParts,
    WorkLock,
    claim_work,
    first_error,
    load_stage_logs,
    results_dir,
    run_identity,
)
from federation.runtime.reentry import ReentrySpool
from federation.runtime.result import BatchMetrics, RunResult
from federation.runtime.sinks import close_sinks, end_sinks, open_run_sinks, output_written
from federation.runtime.sources import (
    INPUTS_FILE,
    InputSet,
    bind_sources,
    load_inputs,
    query_streams,
    replay_input,
)
from federation.runtime.stages import StageBuilder, StagedPlan
from federation.runtime.summary import ReportingWarning, safe_summary
from federation.runtime.tables import snapshot_tables
from federation.runtime.takeover import TAKEOVER, TakeOver, take_over


class _ResumeFailed(Exception):
    """Spark failed on a resumed run (its checkpoint could not be used)."""


def execute(plan: PhysicalPlan, data: str | Path | Mapping[str, str | Path],
            options: RunOptions | None = None, *,
            spark=None, progress: RunProgress | Callable[[BatchMetrics], None] | None = None,
            predicted=None, handoff: Handoff | None = None,
            halt: threading.Event | None = None, **option_values) -> RunResult:
    """Run `plan` over the part files of `data`: a directory, or for a query over several
    streams a mapping {stream name: directory} (federation/runtime/sources.py).

    `options` (RunOptions, options.py; or its fields as keywords) are checked before any
    work. A `work_dir` holding an interrupted run of the same plan is resumed where its last
    micro-batch committed (recovery.py). `spark`: the session (default: the shared one).
    `progress`: a RunProgress (progress.py), or a callable receiving the micro-batches.
    `predicted`: the plan's cost vector, in the summary beside rho. `handoff`: one segment
    of an adaptive run (handoff.py). `halt`: set, the run stops after the micro-batch in
    progress (how a following run ends, live.py).

    A resumed run whose Spark queries fail (a checkpoint unusable after a kill) starts over
    from the spool, saying so on stderr (Spark's error in `<work-dir>/resume-failure.txt`)."""
    opt = RunOptions.of(options, **option_values)
    run = _Run(plan, data, opt, spark, as_progress(progress), predicted, handoff or Handoff(),
               halt or threading.Event())
    try:
        return run.execute()
    except _ResumeFailed as e:
        print(f"fedq: could not resume ({first_error(e.__cause__)}); starting over",
              file=sys.stderr)
        run.taken = take_over(opt, run.work, run.run_id, run.lg, StagedPlan.of(plan).columns)
        run.opt = RunOptions.of(opt, fresh=True)
        return run.execute()
    finally:
        for s in [*opt.sinks, *run.locks]:  # given sinks once, after the last attempt
            s.close()


@dataclass
class _Run:
    """One execution of a plan, in named steps: claim the work directory, read the input,
    set up the DB-ops and stages, drive the micro-batches, write the results."""

    plan: PhysicalPlan
    data: str | Path | Mapping[str, str | Path]
    opt: RunOptions
    spark: object
    prog: RunProgress
    predicted: object
    h: Handoff
    halt: threading.Event
    taken: TakeOver | None = None  # set when a fresh run takes over a resumed one
    locks: list = field(default_factory=list)  # the work directories this run holds

    def __post_init__(self) -> None:
        self.lg = self.plan.logical
        windows = [n for n in self.lg.nodes.values() if isinstance(n, Window)]
        self.stream = windows[0].stream
        self.streams = query_streams(windows)  # by name: a query may read several
        # each stream's data directory (checked here: a query over several names them)
        self.sources = None if self.h.prepared is not None or self.h.follower is not None else \
            bind_sources(self.streams, self.data, self.opt)
        if self.sources and any(s.live for s in self.sources.values()) and not self.opt.follow:
            self.opt = RunOptions.of(self.opt, follow=True)  # a live source never ends
        if self.opt.until is not None and not self.opt.follow:
            raise OptionError("until", "needs follow=True, --follow or a live source (a "
                                       "directory read once ends at its last file)")
        self.grid = query_grid(windows)  # the instants (one grid: checked where built)
        self.max_range = max((w.range_s or 0.0) for w in windows)
        self.extent_s = extent_of(windows)

    def execute(self) -> RunResult:
        opt = self.opt
        clock = RunClock(self.spark)
        self.work = work_directory(opt.work_dir)
        self.locks.append(WorkLock.hold(self.work))  # released by execute() at the end
        resuming = claim_work(self.work, run_identity(self.plan, self.opt, self.sources,
                                                      self.data, self.h), opt.fresh)
        self.follower = self.ahead = None
        taken = TakeOver.load(self.work) if resuming else self.taken
        if taken is None:
            (self.work / TAKEOVER).unlink(missing_ok=True)
        self.run_id = run_id(self.work, resuming or taken is not None)
        sinks = open_run_sinks(opt, self.run_id, resuming or taken is not None,
                               list(self.lg.tops), self.lg.many)
        metrics = None
        try:
            ingest = self._read_input(resuming)
            if ingest is None:  # halted while waiting for the first reading
                raise RunHalted("halted before the first reading landed")
            ex = self._set_up(ingest, resuming, taken.wrap(sinks) if taken else sinks)
            metrics = start_metrics(opt, ex, self.plan, self.h.segments)
            if reader := self.follower or self.ahead:  # the last instant, before the flush
                reader.when_ended(lambda: self._end_life(ex))
            try:
                self._start_stages(ex, ingest, clock)
                if self.follower is None:
                    truncated = drive(ex, opt.budget_s, opt.drain, self.prog)
                else:
                    truncated = drive_following(ex, self.follower, self.halt, self.prog)
                # the results are durable first (before the sinks close); then reporting
                end_sinks(sinks, {q: c.table for q, c in ex.collectors.items()},
                          self.prog.phase)
            except Exception as e:
                stop_queries(ex.staged.stages)
                for m in ex.migs.values():
                    m.close()
                failed = run_failed(e, ex, self.work, self.follower is not None
                                    and e is self.follower.error)
                if failed is not None:  # a full disk, a failing sink: resumed once mended
                    raise failed from e
                if not resuming:
                    raise
                (self.work / "resume-failure.txt").write_text(f"{type(e).__name__}: {e}")
                raise _ResumeFailed() from e
        finally:
            if reader := self.follower or self.ahead:
                reader.stop()
            close_sinks(sinks, opt)
            if metrics:
                metrics.stop()
            if self.spark is not None:  # the run's queries have stopped
                from spe.session import close_idle_callbacks
                close_idle_callbacks(self.spark)
        wall = clock.ending() - ex.t_start
        # a following run keeps no whole result in memory: its rows are in the sinks
        tables = None if self.follower is not None else {
            q: c.table() for q, c in ex.collectors.items()}
        n_rows = sum(c.rows for c in ex.collectors.values()) if tables is None else sum(
            t.num_rows for t in tables.values())
        output = output_written(sinks) or opt.output
        try:  # the sinks have the results (closed above); then reporting
            summary = safe_summary(ex, self.plan, n_rows, wall, truncated, opt, self.max_range,
                                   self.grid.slide_s, self.predicted)
        finally:
            for m in ex.migs.values():
                m.close()
        summary.output = None if output is None else str(output)
        clock.report(summary, self.spark)
        try:
            (self.work / "summary.json").write_text(summary.model_dump_json(indent=2))
        except OSError as e:  # reporting: the results are written already
            summary.warn(f"summary.json not written: {e}")
        for w in summary.warnings:  # the CLI prints them in its summary instead
            warnings.warn(w, ReportingWarning, stacklevel=2)
        rows = None if tables is None else next(iter(tables.values()))
        return RunResult(rows, ex.metrics, summary, self.plan, ingest,
                         tables if self.lg.many else None)

    def _end_life(self, ex: Execution) -> None:
        """A followed input ended: every DB-op knows its last instant (a tuple window goes on)."""
        last = last_instant(ex.ingest.last_ts, self.extent_s, self.grid)
        with ex.lock:
            for m in ex.migs.values():
                m.end_life(last)

    def _read_input(self, resuming: bool) -> InputSet | None:
        """The validated input: the spool of the interrupted run, the prepared one of a
        handoff, or the data directory validated into a new spool (ingest.py)."""
        opt, work = self.opt, self.work
        fmt = spool_format(StagedPlan.of(self.plan), opt.feed)
        if self.h.follower is not None:  # a live segment of an adaptive run
            self.follower = self.h.follower
            return self.follower.res if wait_for_first(self.follower, self.halt,
                                                       self.prog) else None
        if opt.follow:
            self.follower = start_following(
                self.sources, self.streams, work, self.run_id, opt, self.grid, resuming,
                end_flush_s(self.lg.nodes.values()), fmt)
            return self.follower.res if wait_for_first(self.follower, self.halt,
                                                       self.prog) else None
        flush_s = end_flush_s(self.lg.nodes.values()) if opt.drain else None
        self.ahead = None if self.h.prepared else ahead_of(  # the direct feed works meanwhile
            self.sources, self.streams, work / "input", opt, flush_s, self.grid,
            self._fast_forward_s(), fmt, resuming)
        if self.ahead is not None:
            self.prog.phase("reading input (the first batch starts while the rest is read)")
            return self.ahead.res if self.ahead.wait_started(self.halt) else None
        if resuming:  # the spools are complete and Spark's checkpoints refer to them
            return load_inputs(work / "input")
        if self.h.prepared is not None:
            (work / "input").mkdir(parents=True, exist_ok=True)
            (work / "input" / INPUTS_FILE).write_text(self.h.prepared.model_dump_json(indent=2))
            return self.h.prepared
        self.prog.phase("reading input", unit="files")
        return replay_input(self.sources, self.streams, work / "input", opt, self.prog.advance,
                            flush_s, self.grid, self._fast_forward_s(), fmt)

    def _fast_forward_s(self) -> int:
        return math.ceil(self.max_range) if self.opt.warmup_batch_s else 0

    def _set_up(self, ingest: InputSet, resuming: bool, sinks) -> Execution:
        """The DB-ops' runtimes (MIGs), the stages, and the state of an interrupted run."""
        opt, work, h, plan = self.opt, self.work, self.h, self.plan
        last = None if opt.follow or self.ahead or ingest.last_ts is None else \
            last_instant(ingest.last_ts, self.extent_s, self.grid)  # else: _end_life
        life = None if ingest.first_ts is None else (
            first_instant(ingest.first_ts, self.grid), last)
        if h.start_at is not None:  # a moved segment (before its first reading, live; or
            life = (h.start_at, last)  # none of its own: after the input's last reading)
        spb = opt.seconds_per_batch
        staged = StagedPlan.of(plan)
        self.reentry_dirs = staged.reentry_dirs(work / "reentry")
        self.table_files = table_files = dict(h.tables) or snapshot_tables(  # the version
            self.lg.nodes.values(), work / "input" / "tables", resuming)  # every instant sees
        threads, memory = mig_resources(plan)
        migs = {c.id: MigRuntime(c, self.grid, opt.allowed_lateness_s, threads=threads[c.id],
                                 memory_limit=memory, plan_nodes=self.lg.nodes, life=life,
                                 state_path=str(work / "state" / f"{c.id}.duckdb"),
                                 moved=h.moved.get(c.id), stop_at=h.stop_at,
                                 table_files=table_files, moved_after=None if h.after is None
                                 else (lambda: h.after.wait(self.halt)))
                for c in plan.db_ops}
        collectors = {q: ResultParts(results_dir(work, q), staged.columns[q],
                                     sinks[q], q) for q in staged.tops}
        ex = Execution(staged, migs, collectors,
                       ReentrySpool(staged, self.reentry_dirs), ingest, opt.allowed_lateness_s,
                       seconds_by_batches(ingest, self._fast_forward_s(), opt, self.ahead),
                       self.prog.batch, watch=h.watch,
                       tail_s=spark_tail_s(plan, spb) + opt.allowed_lateness_s,
                       spark_state=bool(spark_window_state(plan)),
                       halt=self.halt)  # a late reading before stop_at is the old plan's
        if opt.follow:  # bounded: the last hour of micro-batches at one a second
            ex.metrics = deque(maxlen=3600 * max(1, len(staged.stages)))
            ex.event_seconds_done = seconds_by_clock(staged, ingest)
        ex.stage_logs, resumed_at = load_stage_logs(staged.stages, work / "state", resuming)
        if resuming:
            b, t = resumed_at or (0, None)
            say = f"fedq: resuming {self.lg.root.name} in {work} at batch {b}"
            print(say + (f", event time {t}" if t else ""), file=sys.stderr)
        return ex

    def _start_stages(self, ex: Execution, ingest: InputSet, clock: RunClock) -> None:
        """Every stage's micro-batches, each handed to a BatchHandler: from Spark's streaming
        query, or from the direct feed where it has no SPE-op (direct.py; then no JVM)."""
        opt, staged = self.opt, ex.staged
        direct = direct_stages(staged, opt.feed)
        if self.spark is None and needs_spark(staged, direct):
            from spe.session import get_spark

            self.prog.phase("starting Spark")
            self.spark = get_spark()
        self.prog.phase("setting up the stages")
        chk_root = self.work / "checkpoints"  # kept for a resumed run (Spark's exactly-once)
        files_per_batch = opt.files_per_batch
        spools = {n: (self.streams[n], d) for n, d in ingest.spool_dirs.items()}
        builder = StageBuilder(self.spark, staged, spools, self.reentry_dirs, files_per_batch,
                               round(opt.allowed_lateness_s * 1000), self.extent_s, self.grid,
                               self.table_files)
        layouts = {st.index: build_direct(staged, st, spools, ingest.spool_formats) if st.index in direct
                   else builder.build(st) for st in staged.stages}
        if opt.follow:  # no end known: no total, no time left
            self.prog.phase("micro-batches (following)", unit="event seconds")
        else:
            total = self.ahead.total_files if self.ahead else ingest.files
            self.prog.phase("micro-batches", total=total, unit="event seconds")
        clock.start_done()
        ex.t_start = time.perf_counter()
        trigger = opt.seconds_per_batch if opt.realtime else None
        for st in staged.stages:
            if not st.outputs:
                continue
            name = f"fedq_{self.lg.root.name}_s{st.index}_{id(st)}"
            chk = chk_root / f"stage{st.index}"
            if st.index in direct:
                st.query = DirectFeed(BatchHandler(ex, st).handle, *layouts[st.index],
                                      files_per_batch, chk, name, not opt.follow, trigger,
                                      self.ahead)
            else:
                from spe.pipeline import start_query

                st.query = start_query(st.df, BatchHandler(ex, st), str(chk), name, trigger,
                                       opt.state_store)
