"""One segment of an adaptive run: its placement planned, its input (a sub-spool of the
replayed input or a live SpoolLink), the state it takes over, and its `execute`.

A live run starts the next segment before the running one ends (an overlapped start): when
the running segment's migration instant is known and its clock is near it, the next one is
launched in its own thread (migrate.py) and sets up meanwhile: its spool link, its Spark
queries, a replay's warm-up. It writes nothing of its own and adopts no moved state before
the segment before it has finished (a `Gate`): its first owned instant then follows the
last of the old placement by about one micro-batch, not by a Spark start.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from federation.adaptive.decide import (
    TUPLE_STATE,
    AdaptiveError,
    Segment,
    has_tuple_window,
    with_rates,
)
from federation.adaptive.live import SpoolLink, owned_seconds
from federation.adaptive.output import SegmentRun, owned, segment_sinks
from federation.adaptive.streams import AdaptiveInput, SegmentInput
from federation.adaptive.watch import Watch, migration_instant
from federation.instants import end_flush_s, extent_of, query_grid
from federation.logical import NumberedPlan, Rstream, Window
from federation.runtime import RunOptions, RunResult, execute
from federation.runtime.handoff import Gate, Handoff
from federation.runtime.move import NotMovable, plan_move, spark_tail_s
from federation.runtime.progress import RunProgress
from federation.runtime.recovery import fault_point


@dataclass
class Ran:
    """What one segment's run gives the chain: its record, the rows it owns by query
    (replayed input only), what the next segment takes over (its plan and its DB-ops'
    state directory), and the wall times (perf_counter) of its first and last owned result."""

    run: SegmentRun
    rows: dict
    plan: object
    state: Path
    first_out: float | None
    last_out: float | None


@dataclass
class Chain:
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
        self.grid = query_grid(windows)
        self.slide_s = self.grid.slide_s
        # a replay's warm-up: the windows' extent (a held window reads its last own instant)
        self.warm_s = math.ceil(extent_of(windows)) + 1
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
                if has_tuple_window(self.query):  # checked before: decide.move_refusal
                    raise AdaptiveError("segments", f"{seg.placement}: {TUPLE_STATE} ({e})"
                                        ) from e
                return None, f"replay (move does not apply: {e})"
        return None, "replay"

    @property
    def live(self) -> bool:
        return self.opt.follow

    def lead_s(self, moved: bool) -> float:
        """How long before its migration instant (in event time) a live segment launches
        the next: its Spark start and first batches, and a replay's warm-up."""
        return 2.0 * self.opt.seconds_per_batch + 2.0 + (0.0 if moved else self.warm_s)

    def spool(self, seg: Segment, moved, k: int, pp, stop) -> SegmentInput:
        """The segment's input (streams.AdaptiveInput.segment; live: a SpoolLink): from
        its start when it takes the state over, else from a replay's warm-up of the last
        extent before it. `stop()`: its migration instant as known now (live)."""
        lo = seg.start_at if moved is not None else (
            None if seg.start_at is None else seg.start_at - dt.timedelta(seconds=self.warm_s))
        out = self.work / f"segment{k}" / "spool"
        if self.live:
            tail = spark_tail_s(pp, self.opt.seconds_per_batch) + self.opt.allowed_lateness_s
            link = SpoolLink(self.inp.follower, self.inp.streams, out, lo, stop, tail,
                             prime=moved is not None)
            return SegmentInput({}, 0, 0, None, link.start())
        return self.inp.segment(lo, seg.start_at, seg.stop_at, out,
                                self.opt.seconds_per_batch == 1, self.flush_s)

    def run_segment(self, seg: Segment, k: int, prev, watch, of: str,
                    on_decided: Callable | None = None, after: Gate | None = None,
                    near_end: Callable | None = None) -> Ran:
        """Run one segment (`prev`: the plan and state directory of the one before).
        `on_decided(at)`: the watch decided to migrate at `at` (the log keeps it);
        `after`: the end of the segment before, when this one started overlapped (module
        doc); `near_end(plan, state)`: called at each micro-batch once its migration
        instant is known and its clock is within `lead_s` of it."""
        t0 = time.perf_counter()  # its setup: its plan, spool, Spark's queries, warm-up
        if seg.start_at is not None:  # the new placement starts (the old may still run)
            fault_point("migration")
        pp, _ = self.planner(with_rates(self.query, seg.rates or seg.rate), seg.placement)
        moved, how = self.takeover(seg, pp, prev)
        chosen = seg.stop_at if watch is None else None
        seg_work = self.work / f"segment{k}" / "work"
        lead = dt.timedelta(seconds=self.lead_s(moved is not None))

        def stop() -> dt.datetime | None:
            return chosen or migration_instant(watch)

        sin = self.spool(seg, moved, k, pp, stop)
        if sin.link is not None and isinstance(watch, Watch):
            watch.given = sin.link.given
            watch.given_cap_s = self.opt.files_per_batch
            watch.lead_s = self.lead_s(True)
        ff = sin.warm and self.opt.seconds_per_batch == 1  # the warm-up merged (spool)
        self.prog.phase(f"segment {k + 1}{of}: {seg.placement} ({seg.reason}; {how})",
                        total=sin.seconds or None, unit="event seconds")
        first_out, last_out, stop_t = [None], [None], [None]

        def on_batch(m) -> None:
            if m.result_rows and (seg.start_at is None or (m.clock is not None
                                                          and m.clock >= seg.start_at)):
                if first_out[0] is None:
                    first_out[0] = time.perf_counter()
                last_out[0] = time.perf_counter()
            if watch is not None:
                watch.batch(m)
                if watch.chosen is not None and stop_t[0] is None:
                    stop_t[0] = time.perf_counter()
                    if on_decided is not None:
                        on_decided(migration_instant(watch))
            if near_end is not None and m.clock is not None and (s := stop()) is not None \
                    and m.clock >= s - lead:
                near_end(pp, seg_work / "state")
            self.prog.batch(m)

        wait = None if after is None else (lambda: after.wait(self.halt))
        sinks = segment_sinks(k, seg.start_at, stop, self.sinks, wait)
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
                                tables=self.tables, segments=tuple(self.history),
                                after=after))
        finally:
            if sin.link is not None:
                sin.link.stop()
        t_end = time.perf_counter()
        if watch is not None and r.summary.stopped_at is not None:
            seg = seg.model_copy(update={"stop_at": r.summary.stopped_at})
        rows = {} if self.live else {q: owned(r.of(q), seg.start_at, seg.stop_at)
                                     for q in self.sinks}  # live: in the sinks only
        opened = after.opened_at if after is not None else None  # it computed from then
        busy = t_end - max(t0, opened or t0)
        owned_s = owned_seconds(seg, sin, r, self.inp)
        run = SegmentRun(segment=seg, strategy=how, moved=r.summary.moved,
                         input_seconds=sin.seconds, warmup_seconds=sin.warm,
                         result_rows=sum(t.num_rows for t in rows.values()) if rows
                         else sinks[0].rows if sinks else 0,
                         wall_s=t_end - t0,
                         rho=owned_s / busy if busy > 0 else float("nan"),
                         first_result_s=None if first_out[0] is None else first_out[0] - t0,
                         setup_s=(t_end - t0) - r.summary.wall_s,
                         stop_s=None if stop_t[0] is None else t_end - stop_t[0],
                         overlap_s=None if opened is None else opened - t0,
                         tail_s=None if last_out[0] is None else t_end - last_out[0],
                         first_after_s=None if first_out[0] is None or seg.start_at is None
                         else first_out[0] - max(t0, opened or t0),
                         batches=[(m.clock, m.wall_s) for m in r.metrics
                                  if m.stage == 0 and m.data and m.clock is not None],
                         decisions=[] if watch is None else watch.decisions)
        return Ran(run, rows, pp, seg_work / "state", first_out[0], last_out[0] or t_end)
