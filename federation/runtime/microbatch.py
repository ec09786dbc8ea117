"""The micro-batch cycle: what one stage's `foreachBatch` does with one micro-batch.

1. one Arrow transfer of the tagged union (MIG inputs, result rows, clock rows);
2. the stage's clock advances to the largest punctuation of each source;
3. every MIG input is inserted into its DuckDB table, result rows go to the collector;
4. every MIG of the stage runs its SQL for the slide instants the watermark completed
   (a MIG reading a relation waits one batch: its rows arrive one batch after their clock),
   and hands (tau, rows) on: to the collector, or to the re-entry spool of the next stage
   with a punctuation row that tells that stage how far it is complete;
5. the batch's metrics are recorded. Batches are idempotent by micro-batch id.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from db.store import naive_timestamps
from federation.conventions import CLOCK, OUT, clock_tag, packed
from federation.runtime.direct import DirectFeed, Halted, Unpacked
from federation.runtime.ingest import IngestResult
from federation.runtime.mig import MigRuntime, split_outputs, wt_to_tau
from federation.runtime.phases import PHASES, timed
from federation.runtime.recovery import ResultParts, StageLog, fault_point
from federation.runtime.reentry import ReentrySpool
from federation.runtime.result import BatchMetrics
from federation.runtime.stages import Stage, StagedPlan

END_OF_INPUT_BATCH = 10**8  # the key of the parts written when the input is drained


def watermark(clock: dict[int, dt.datetime], sources: list[int], lateness_s: float):
    """The stage's watermark: the slowest source's clock minus the allowed lateness."""
    if not sources or any(j not in clock for j in sources):
        return None
    return min(clock[j] for j in sources) - dt.timedelta(seconds=lateness_s)


@dataclass(frozen=True)
class BatchFailure:
    """A micro-batch whose handler failed (nothing of it was committed)."""

    stage: int
    batch: int
    error: BaseException


@dataclass
class Execution:
    """The state of one run that every stage's batch handler shares."""

    staged: StagedPlan
    migs: dict[str, MigRuntime]
    collectors: dict[str, ResultParts]  # per query: its result parts and sinks
    reentry: ReentrySpool
    ingest: IngestResult
    lateness_s: float
    event_seconds_done: Callable[[int], tuple[int, int]]  # of data batches: done, landed
    progress: Callable[[BatchMetrics], None] | None = None
    metrics: list[BatchMetrics] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    t_start: float = field(default_factory=time.perf_counter)
    last_end: dict[int, float] = field(default_factory=dict)

    stage_logs: dict[int, StageLog] = field(default_factory=dict)
    #: asked at every stage-0 batch with the stage's clock, before its slides run: an
    #: instant it returns (the migration instant, `stop_at`) stops the run there (a
    #: migration, federation/adaptive/)
    watch: Callable[[dt.datetime], dt.datetime | None] | None = None
    stop_at: dt.datetime | None = None
    #: Spark's own results of the instants before `stop_at` need its watermark past them:
    #: stage 0 goes on to this clock (its MIGs take no window row from `stop_at` on), then
    #: stops
    tail_s: float = 0.0
    #: Spark keeps window rows at stage 0: its watermark in a micro-batch is the clock of
    #: the batches before it, so the stop waits for a batch that starts past the tail
    spark_state: bool = False
    stopping: threading.Event = field(default_factory=threading.Event)
    #: set, no new micro-batch is handled: the handler raises, so Spark does not commit
    #: it and a resumed run does it (a following run stopped by a signal, live.py)
    halt: threading.Event = field(default_factory=threading.Event)
    #: the first error a micro-batch's handler raised (the run reports it: failure.py)
    failure: BatchFailure | None = None

    def consider_stop(self, clock: dt.datetime | None) -> None:
        if self.watch is None or self.stop_at is not None or clock is None:
            return
        stop_at = self.watch(clock)
        if stop_at is not None:
            self.stop_at = stop_at
            for m in self.migs.values():
                m.stop_before(stop_at)

    def stop_due(self, st: Stage, clock: dt.datetime | None,
                 before: dt.datetime | None) -> None:
        """Stop stage 0 once its clock is `tail_s` past `stop_at` (from another thread: a query
        cannot be stopped from its own batch). With Spark's window state, the clock `before`
        the batch must be (Spark's watermark moves a batch after the data: a batch that
        takes the clock from before `stop_at` past the tail at once emits nothing of the
        instants it passed; Spark runs the next batch without data, which stops)."""
        clock = before if self.spark_state else clock
        if self.stop_at is None or self.stopping.is_set() or clock is None or \
                clock < self.stop_at + dt.timedelta(seconds=self.tail_s):
            return
        self.stopping.set()
        threading.Thread(target=st.query.stop, daemon=True).start()

    @property
    def collector(self) -> ResultParts:
        """The (first) query's result parts."""
        return next(iter(self.collectors.values()))

    def put_result(self, oid: str, key: tuple, rows: pa.Table, complete: bool = True) -> int:
        """Rows of operator `oid` to every query whose result they are; their count
        (`complete`: ResultParts.put)."""
        names = self.staged.queries_at(oid)
        with timed("results"):
            for q in names:
                self.collectors[q].put(key, rows, complete)
        return rows.num_rows if names else 0

    def release(self, st: Stage, key: tuple, done) -> None:
        """The instants up to `done` of the results Spark computes in stage `st` are
        complete: to the sinks that show instants in order (ResultParts.release)."""
        with timed("results"):
            for what in st.outputs:
                if what[0] != "mig":
                    for q in self.staged.queries_at(what[1]):
                        self.collectors[q].release(key, done)

    def hand_on(self, mig: MigRuntime, key: tuple, out: pa.Table | None, done) -> int:
        """A DB-op's rows, each output's to the queries whose result it is and to its
        re-entry spool if SPE-ops read it; the result rows handed on."""
        n = 0
        for oid, rows in split_outputs(mig.db_op, self.staged.plan.logical.nodes, out).items():
            if rows is not None:
                n += self.put_result(oid, key, rows)
            if self.staged.reenters(oid):
                with timed("reentry"):
                    self.reentry.write(oid, key, rows, done)
        return n

    def feeds_spark(self, mig: MigRuntime) -> bool:
        return any(self.staged.reenters(o) for o in mig.db_op.outputs)

    def drain(self, stage: int) -> None:
        """End of input: the MIGs of the stage finish every remaining slide instant."""
        far = dt.datetime(2100, 1, 1)
        with self.lock:
            for op_id in self.staged.db_ops_of(stage):
                mig = self.migs[op_id]
                if not mig.begin(END_OF_INPUT_BATCH):  # drained before a crash
                    continue
                _, out, _ = mig.advance(far)
                self.hand_on(mig, (stage, END_OF_INPUT_BATCH), out, far)
                mig.commit(END_OF_INPUT_BATCH)
            st = next(s for s in self.staged.stages if s.index == stage)
            self.release(st, (stage, END_OF_INPUT_BATCH), None)


def unpack(tbl: pa.Table, n_outputs: int, clock_sources: list[int]) -> Unpacked:
    """Spark's tagged union (spe/pipeline.tag_outputs) as the rows of each output and the
    largest clock of each source."""
    outcol = tbl.column(OUT)
    clocks = {}
    for j in clock_sources:
        c = tbl.filter(pc.equal(outcol, clock_tag(j))).column(CLOCK)
        clocks[j] = pc.max(naive_timestamps(pa.table({"c": c})).column("c")).as_py() \
            if len(c) else None
    parts = {}
    for k in range(n_outputs):
        sub = tbl.filter(pc.equal(outcol, k)).column(packed(k))
        if len(sub):
            parts[k] = pa.Table.from_struct_array(sub.combine_chunks())
    return Unpacked(parts, clocks)


class BatchHandler:
    """The `foreachBatch` of one stage (module doc)."""

    def __init__(self, ex: Execution, st: Stage) -> None:
        self.ex = ex
        self.st = st

    def __call__(self, batch_df, batch_id: int) -> None:
        """Spark's foreachBatch: the tagged union in one Arrow transfer (module doc)."""
        if self.st.last_done is not None and batch_id <= self.st.last_done:
            # a replay after a crash or a halt: fedq's side of it is done, but Spark's
            # stateful operators must run it again (their state commits with the batch;
            # Spark 4 refuses a batch whose state stores did not commit)
            batch_df.write.format("noop").mode("overwrite").save()
            return

        def quiet() -> None:
            from spe.pipeline import quiet_query_errors

            quiet_query_errors(batch_df.sparkSession, True)  # stopped on purpose

        self.handle(batch_id, lambda: unpack(batch_df.toArrow(), len(self.st.outputs),
                                             self.st.clock_sources), quiet)

    def handle(self, batch_id: int, read: Callable[[], Unpacked],
               on_halt: Callable[[], None] | None = None) -> None:
        """One micro-batch, read by `read` (from Spark, or the direct feed: direct.py)."""
        ex, st = self.ex, self.st
        with ex.lock:
            if st.last_done is not None and batch_id <= st.last_done:
                return  # idempotent by micro-batch id (a replay after a crash)
            if st.index == 0 and ex.stopping.is_set():
                return  # stopped at a migration: this input is the next placement's
            if ex.halt.is_set():
                if on_halt is not None:
                    on_halt()
                raise Halted(f"stage {st.index} batch {batch_id}: halted, not handled")
            try:
                self._handle(batch_id, read)
            except Exception as e:  # the run names it (runtime/failure.py), not Spark's trace
                if ex.failure is None:
                    ex.failure = BatchFailure(st.index, batch_id, e)
                raise

    def _handle(self, batch_id: int, read: Callable[[], Unpacked]) -> None:
        ex, st = self.ex, self.st
        fault_point("batch_start")
        t0, c0 = time.perf_counter(), time.thread_time()
        batch = read()
        t1 = time.perf_counter()
        PHASES.add("feed", t1 - t0, time.thread_time() - c0)
        prev_clock = dict(st.clock)
        self._advance_clock(batch)
        clock = watermark(st.clock, st.clock_sources, 0.0)
        if st.index == 0:
            ex.consider_stop(clock)
        # a MIG that committed this batch before a crash skips it (recovery.py)
        fed = {what[1][0] for k, what in enumerate(st.outputs) if what[0] == "mig"
               and (p := batch.parts.get(k)) is not None and p.num_rows}
        live = {op_id: ex.migs[op_id].begin(batch_id, None if op_id in fed else clock)
                for op_id in ex.staged.db_ops_of(st.index)}
        rows_in, result_rows = self._take_rows(batch, batch_id, live)
        fault_point("mig_rows_in")
        db_s, slides, mig_rows = self._run_migs(batch_id, prev_clock, live)
        done = watermark(st.clock, st.clock_sources, ex.lateness_s if st.index == 0 else 0.0)
        if done is not None:
            ex.release(st, (st.index, batch_id), done)
        st.last_done = batch_id
        self._record(batch_id, t0, t1, rows_in, result_rows + mig_rows, db_s, slides,
                     prev_clock)
        if st.index in ex.stage_logs:
            ex.stage_logs[st.index].save(batch_id, st.clock, st.data_batches)
        fault_point("batch_end")
        if st.index == 0:
            ex.stop_due(st, clock, watermark(prev_clock, st.clock_sources, 0.0))

    def _advance_clock(self, batch: Unpacked) -> None:
        for j in self.st.clock_sources:
            hi = batch.clocks.get(j)
            if hi is not None:
                self.st.clock[j] = max(hi, self.st.clock.get(j, hi))

    def _take_rows(self, batch: Unpacked, batch_id: int, live: dict[str, bool]
                   ) -> tuple[int, int]:
        rows_in = result_rows = 0
        for k, what in enumerate(self.st.outputs):
            part = batch.parts.get(k)
            if part is None or part.num_rows == 0:
                continue
            rows_in += part.num_rows
            if what[0] == "mig":
                op_id, table = what[1]
                if live[op_id]:
                    self.ex.migs[op_id].add(table, part)
            else:
                result_rows += self.ex.put_result(what[1], (self.st.index, batch_id),
                                                  wt_to_tau(part), complete=False)
        return rows_in, result_rows

    def _run_migs(self, batch_id: int, prev_clock: dict, live: dict[str, bool]
                  ) -> tuple[float, int, int]:
        ex, st = self.ex, self.st
        db_s, slides, result_rows = 0.0, 0, 0
        for op_id in ex.staged.db_ops_of(st.index):
            mig = ex.migs[op_id]
            if not live[op_id]:
                continue
            src = prev_clock if mig.rel_inputs else st.clock
            wm = watermark(src, st.clock_sources, ex.lateness_s if st.index == 0 else 0.0)
            if wm is not None and st.holdback_s.get(op_id):  # Spark emits those rows later
                wm -= dt.timedelta(seconds=st.holdback_s[op_id])
            taus, out, took = mig.advance(wm)
            db_s += took
            slides = max(slides, len(taus))
            if taus or (ex.feeds_spark(mig) and wm is not None):
                done = mig.next_tau - mig.slide if mig.next_tau else wm
                result_rows += ex.hand_on(mig, (st.index, batch_id), out, done)
            fault_point("before_commit")
            mig.commit(batch_id)  # after its results are on disk (recovery.py)
            fault_point("after_commit")
        return db_s, slides, result_rows

    def _record(self, batch_id, t0, t1, rows_in, result_rows, db_s, slides, prev_clock) -> None:
        ex, st = self.ex, self.st
        end = time.perf_counter()
        clock = watermark(st.clock, st.clock_sources, 0.0)
        # a data batch consumed input: it produced rows or moved the clock (a pure Spark
        # plan emits nothing until its first windows close)
        data = bool(rows_in) or st.clock != prev_clock
        extra = {}
        if st.index == 0:
            st.data_batches += 1 if data else 0
            done_s, landed_s = ex.event_seconds_done(st.data_batches)
            extra = {"event_seconds_done": done_s, "backlog_s": landed_s - done_s,
                     "rho_so_far": done_s / max(end - ex.t_start, 1e-9)}
        op_ids = ex.staged.db_ops_of(st.index)
        if op_ids:  # every batch (under a millisecond): it swings with DuckDB's CHECKPOINTs
            extra["db_memory_bytes"] = sum(ex.migs[o].memory_bytes() for o in op_ids)
        if batch_id % 10 == 0:
            from spe.pipeline import state_of

            extra.update(state_of(st.query))
        m = BatchMetrics(stage=st.index, batch=batch_id, rows_in=rows_in,
                         result_rows=result_rows, transfer_s=t1 - t0, db_s=db_s,
                         handler_s=end - t0,
                         wall_s=end - ex.last_end.get(st.index, ex.t_start), slides=slides,
                         t=end - ex.t_start, watermark=str(clock), clock=clock, data=data,
                         **extra)
        ex.last_end[st.index] = end
        # between two batches of the stage: Spark's own part (planning, offsets, commit
        # logs, the SPE-ops before foreachBatch reads), or the direct feed's offset log
        PHASES.add("feed.plan" if isinstance(st.query, DirectFeed) else "spark",
                   m.wall_s - m.handler_s)
        ex.metrics.append(m)
        if ex.progress:
            ex.progress(m)
