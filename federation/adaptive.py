"""Re-optimization while a query runs: watch, decide, migrate (issue 13).

A run is a chain of **segments** of event time, each under one placement
(docs/architecture.md "Re-optimization while running"):

* **Watch.** At every decision point (`every_s`, on the slide grid) a `Watch`, asked by the
  running segment's stage-0 micro-batches, measures the window before it: the input rate
  (Parquet metadata, no row read), the selectivities of the selections over window rows
  (DuckDB over the window's files) and the running plan's pace (rho, from its batch times).
* **Decide.** The optimizer plans the query for those statistics; the run migrates when
  that plan beats the running placement, priced at the same statistics, by a margin
  (Definition 1 with hysteresis), or when the running placement falls behind (rho below
  1) and the optimizer kept a plan it calls feasible; at most once per `min_interval_s`.
* **Migrate** at instant T_m: the running placement stops there (its DB-ops keep their
  state as it is at T_m; Spark finishes its results before T_m), and the new one takes
  over: its DB-ops take the window state over from DuckDB where it is there (moving state,
  federation/runtime/carry.py), else it replays the last extent of input before T_m
  (parallel track). Segment k owns the instants [T_k, T_k+1): each instant is produced
  exactly once.

`run_adaptive` with given segments replays a decision (tests, benchmarks); without, it
decides while it runs (`decide_and_run`). `plan_segments` and `migrations_over` decide from
the rates alone (no JVM: `fedq explain --sweep --margin`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from costmodel.ordering import CostVector, sort_key
from costmodel.profile import CostProfile, load_profile
from federation.errors import FedqError
from federation.expressions import split_conjuncts
from federation.instants import grid_floor
from federation.logical import Node, NumberedPlan, Rstream, Select, Window
from federation.runtime import RunResult, execute
from federation.runtime.carry import NotMovable, plan_carry
from federation.runtime.execute import end_flush_s
from federation.runtime.ingest import prepare_input, sub_spool
from federation.runtime.progress import RunProgress, as_progress


class AdaptiveError(FedqError, ValueError):
    """A query or an input that adaptive runs cannot take."""


# --- watch ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PartFile:
    path: Path
    start: dt.datetime  # the event second the file holds: [start, start + 1 s)
    rows: int


def part_files(data: str | Path, ts_column: str) -> list[PartFile]:
    """The part files of a data directory with their event second and row count, from the
    Parquet metadata (row-group statistics of the event-time column). Files that cannot be
    read are left out (the run's ingest quarantines them)."""
    out = []
    for p in sorted(Path(data).glob("part-*.parquet")):
        try:
            md = pq.read_metadata(p)
        except Exception:  # noqa: BLE001, S112 - an unreadable file: quarantined by the run
            continue
        if md.num_rows == 0:
            continue
        idx = md.schema.to_arrow_schema().get_field_index(ts_column)
        lo = None
        for g in range(md.num_row_groups):
            st = md.row_group(g).column(idx).statistics if idx >= 0 else None
            if st is None or not st.has_min_max:
                lo = None
                break
            lo = st.min if lo is None else min(lo, st.min)
        if lo is None:
            col = pq.read_table(p, columns=[ts_column]).column(0)
            lo = pc.min(col).as_py()
        if isinstance(lo, dt.datetime) and lo.tzinfo is not None:
            lo = lo.astimezone(dt.timezone.utc).replace(tzinfo=None)
        out.append(PartFile(p, lo.replace(microsecond=0), md.num_rows))
    return out


def measured_rates(files: Sequence[PartFile], points: Sequence[dt.datetime],
                   window_s: float) -> list[float]:
    """Tuples per second in [T - window_s, T) for each decision point T."""
    w = dt.timedelta(seconds=window_s)
    return [sum(f.rows for f in files if t - w <= f.start < t) / window_s for t in points]


# --- decide --------------------------------------------------------------------------------

def with_rate(query: Rstream, rate: float, stream: str | None = None,
              selectivities: Mapping[str, float] | None = None) -> Rstream:
    """The same query with its streams' rate (or only stream `stream`'s) set to `rate`, and
    the given measured selectivities (per conjunct's SQL text) added to their statistics;
    their other statistics kept."""

    def restat(n: Node) -> Node:
        if not (isinstance(n, Window) and stream in (None, n.stream.name)):
            return n
        st = n.stream
        upd: dict = {"rate_tps": rate}
        if selectivities:
            upd["selectivities"] = {**st.stats.selectivities, **selectivities}
        return dataclasses.replace(n, stream=st.model_copy(update={
            "stats": st.stats.model_copy(update=upd)}))

    return query.transform(restat)  # type: ignore[return-value]


class Segment(BaseModel):
    """One placement over the instants [start, end) (end None: to the end of the input)."""

    model_config = ConfigDict(extra="forbid")

    start: dt.datetime | None  # None: from the first instant
    end: dt.datetime | None
    placement: str
    rate: float  # the measured rate that chose it
    reason: str
    C_b: float | None = None
    C_u: float | None = None


def better_by_margin(new: CostVector, cur: CostVector, margin: float) -> bool:
    """Definition 1 with hysteresis: a feasible plan beats an infeasible one; two feasible
    (or two infeasible) plans need C_u (or C_b) lower by the margin."""
    if sort_key(new) >= sort_key(cur):
        return False
    if new.is_feasible != cur.is_feasible:
        return new.is_feasible
    if new.is_feasible:
        return new.utilization_cost < (1 - margin) * cur.utilization_cost
    return new.bottleneck_cost < (1 - margin) * cur.bottleneck_cost


def _decide(planner: Callable, q: Rstream, cur: str, margin: float,
            rho: float | None = None, alternatives: Callable | None = None):
    """One decision at the statistics `q` declares: (the plan to run and its cost, the
    running placement's cost there or None when its ids no longer exist, whether to
    migrate).

    `rho`: the running plan's measured event seconds per wall second. Below 1 it falls
    behind whatever the model predicts: its cost vector is then at least 1/rho (infeasible),
    and when the optimizer still picks it, the best other plan the model calls feasible
    (`alternatives(q)`: placements, best first) is taken."""
    best, best_cost = planner(q, "auto")
    try:
        _, cur_cost = planner(q, cur)
    except FedqError:  # the current ids do not exist in this plan: move
        return best, best_cost, None, True
    if rho is not None and 0 < rho < 1:
        v = cur_cost.vector
        cur_cost = dataclasses.replace(cur_cost, vector=CostVector(
            max(v.bottleneck_cost, 1 / rho), max(v.utilization_cost, 1 / rho)))
        if best.placement_string == cur and alternatives is not None:
            for alt in alternatives(q):
                if alt == cur:
                    continue
                pp, cost = planner(q, alt)
                if cost.vector.is_feasible:
                    best, best_cost = pp, cost
                    break
    if best.placement_string == cur:
        return best, best_cost, cur_cost, False
    return best, best_cost, cur_cost, better_by_margin(best_cost.vector, cur_cost.vector,
                                                       margin)


def _cost_change(cur, best, digits: int) -> str:
    """The running plan's cost vector against the optimum's, for a decision's reason."""
    v, w = cur.vector, best.vector
    return (f"C_b {v.bottleneck_cost:.{digits}f} -> {w.bottleneck_cost:.{digits}f}, "
            f"C_u {v.utilization_cost:.{digits}f} -> {w.utilization_cost:.{digits}f}")


def migrations_over(make_query: Callable[[float], Rstream], rates: Sequence[float],
                    margin: float, profile: CostProfile | None = None) -> list[dict]:
    """What an adaptive run would do as the rate steps through `rates`: the running
    placement at each rate, and whether (and why) it migrates there (`fedq explain --sweep
    --margin`). The run starts on the optimizer's plan at the first rate."""
    from federation.api import plan_for

    def planner(q, p):
        return plan_for(q, p, profile)

    out, cur = [], None
    for rate in rates:
        q = make_query(rate)
        if cur is None:
            cur = planner(q, "auto")[0].placement_string
            out.append({"rate": rate, "running": cur, "migrates": False, "reason": "start"})
            continue
        best, best_cost, cur_cost, moved = _decide(planner, q, cur, margin)
        reason = ""
        if moved:
            reason = ("the running plan is gone" if cur_cost is None else
                      f"C_u {cur_cost.vector.utilization_cost:.4f} -> "
                      f"{best_cost.vector.utilization_cost:.4f}")
            cur = best.placement_string
        elif best.placement_string != cur:
            reason = (f"kept: the optimum is cheaper by less than the margin (C_u "
                      f"{cur_cost.vector.utilization_cost:.4f} vs "
                      f"{best_cost.vector.utilization_cost:.4f})")
        out.append({"rate": rate, "running": cur, "migrates": moved, "reason": reason})
    return out


def _check(query: Rstream, data: str | Path, every_s: float, window_s: float | None,
           margin: float) -> tuple[float, list[PartFile]]:
    """The decision options checked (AdaptiveError names the bad one), the measurement
    window, and the input's part files."""
    windows = [n for n in query.walk() if isinstance(n, Window)]
    if any(w.range_s is None for w in windows):
        raise AdaptiveError("adaptive: tuple windows (rows=...) are not supported: their "
                            "state is not bounded by event time, so no placement can take "
                            "over from a replay of the last window")
    slide = windows[0].slide_s
    if every_s <= 0 or abs(every_s / slide - round(every_s / slide)) > 1e-9:
        raise AdaptiveError(f"adaptive: every_s: {every_s:g} s is not a multiple of the slide "
                            f"({slide:g} s)")
    if not 0 <= margin < 1:
        raise AdaptiveError(f"adaptive: margin: {margin} is not in [0, 1)")
    files = part_files(data, windows[0].stream.ts_column)
    if not files:
        raise AdaptiveError(f"adaptive: no part-*.parquet files with rows in {data}")
    return window_s or every_s, files


def _start(query: Rstream, files: Sequence[PartFile], window_s: float, start_placement: str,
           planner: Callable) -> Segment:
    """The first segment: `start_placement` planned at the first window's measured rate."""
    first, last = files[0].start, files[-1].start + dt.timedelta(seconds=1)
    head = min(window_s, (last - first).total_seconds())
    r0 = sum(f.rows for f in files if f.start < first + dt.timedelta(seconds=head)) / head
    pp, cost = planner(with_rate(query, r0), start_placement)
    return Segment(start=None, end=None, placement=pp.placement_string, rate=r0,
                   C_b=cost.vector.bottleneck_cost, C_u=cost.vector.utilization_cost,
                   reason=f"start: {start_placement} at the first {head:g} s' rate")


def plan_segments(query: Rstream, data: str | Path, *, every_s: float = 10.0,
                  window_s: float | None = None, margin: float = 0.1,
                  min_interval_s: float = 30.0, profile: CostProfile | None = None,
                  start_placement: str = "auto",
                  planner: Callable | None = None) -> list[Segment]:
    """Decide the segments of an adaptive run (module doc). `planner(query, placement)`
    returns (physical plan, PlanCost); default `federation.api.plan_for`."""
    from federation.api import plan_for

    planner = planner or (lambda q, p: plan_for(q, p, profile))
    window_s, files = _check(query, data, every_s, window_s, margin)
    first, last = files[0].start, files[-1].start + dt.timedelta(seconds=1)
    t = grid_floor(first, every_s) + dt.timedelta(seconds=every_s)
    points = []
    while t < last:
        if (t - first).total_seconds() >= window_s:  # a whole window measured
            points.append(t)
        t += dt.timedelta(seconds=every_s)
    segs = [_start(query, files, window_s, start_placement, planner)]
    cur = segs[0].placement
    last_move = None
    for t, r in zip(points, measured_rates(files, points, window_s)):
        if last_move is not None and (t - last_move).total_seconds() < min_interval_s:
            continue
        best, best_cost, cur_cost, moved = _decide(planner, with_rate(query, r), cur, margin)
        if not moved:
            continue
        why = (f"rate {r:,.0f}/s: " + ("the current plan is gone" if cur_cost is None else
                                       _cost_change(cur_cost, best_cost, 4)))
        segs[-1] = segs[-1].model_copy(update={"end": t})
        cur = best.placement_string
        segs.append(Segment(start=t, end=None, placement=cur, rate=r, reason=why,
                            C_b=best_cost.vector.bottleneck_cost,
                            C_u=best_cost.vector.utilization_cost))
        last_move = t
    return segs


# --- watch while running ---------------------------------------------------------------

class Decision(BaseModel):
    """One decision of a running adaptive run, from what it measured in the window before."""

    model_config = ConfigDict(extra="forbid")

    at: dt.datetime  # the stage-0 clock it was taken at
    running: str
    rate: float  # input tuples per second in the window (Parquet metadata)
    selectivities: dict[str, float]  # of the selections over window rows, measured
    #: the running plan's event seconds per wall second over the window (its stage-0
    #: micro-batches), None when none of them is past its warm-up and its first batch
    rho: float | None
    C_b: float | None  # the running plan's predicted C_b at the measured statistics
    best: str  # the placement the decision would run
    migrate: bool
    reason: str


def row_predicates(query: Rstream) -> list[str]:
    """The conjuncts of the selections over window rows (the stream's own columns): what
    the watch measures from the input."""
    out: list[str] = []
    for n in query.walk():
        if isinstance(n, Select) and _over_stream_columns(n.child):
            out += [c.sql(dialect="duckdb") for c in split_conjuncts(n.predicate)
                    if c.sql(dialect="duckdb") not in out]
    return out


def _over_stream_columns(n: Node) -> bool:
    while isinstance(n, Select):
        n = n.child
    return isinstance(n, Window)


class Watch:
    """Asked at every stage-0 micro-batch of a running segment (`execute(watch=...)`): at
    each decision point (every `every_s` of event time) it measures the window before it
    (input rate, selectivities, the running plan's rho), decides, and returns the
    migration instant when the run should move."""

    def __init__(self, query: Rstream, files: Sequence[PartFile], running: str,
                 seg_start: dt.datetime | None, last_move: dt.datetime | None, *,
                 every_s: float, window_s: float, margin: float, min_interval_s: float,
                 slide_s: float, planner: Callable, alternatives: Callable | None,
                 progress: RunProgress, seconds_per_batch: int = 1) -> None:
        self.query, self.files, self.running = query, files, running
        self.seg_start, self.last_move = seg_start, last_move
        self.every_s, self.window_s, self.margin = every_s, window_s, margin
        self.min_interval_s, self.slide_s = min_interval_s, slide_s
        self.seconds_per_batch = seconds_per_batch
        self.planner, self.alternatives, self.prog = planner, alternatives, progress
        self.first = files[0].start
        self.next_at = grid_floor(seg_start or self.first, every_s) + dt.timedelta(
            seconds=every_s)
        self.batches: list[tuple[dt.datetime, float]] = []
        self.predicates = row_predicates(query)
        self.decisions: list[Decision] = []
        self.chosen: tuple[Decision, object] | None = None  # (decision, its plan's cost)

    def batch(self, m) -> None:
        """A micro-batch of the running segment (its progress)."""
        if m.stage == 0 and m.data and m.clock is not None:
            self.batches.append((m.clock, m.wall_s))

    def _rho(self, clock: dt.datetime) -> float | None:
        # asked before the current batch is recorded: its pace is the batches before it
        lo = clock - dt.timedelta(seconds=self.window_s + self.seconds_per_batch)
        start = self.seg_start or self.first
        idx = [i for i, (c, _) in enumerate(self.batches) if lo < c <= clock and c > start]
        if not idx or idx[0] < 2 or self.batches[idx[0] - 1][0] < start:
            return None  # its warm-up or Spark's first batches are not its pace
        event = (self.batches[idx[-1]][0] - self.batches[idx[0] - 1][0]).total_seconds()
        wall = sum(self.batches[i][1] for i in idx)
        return event / wall if wall > 0 else None

    def __call__(self, clock: dt.datetime) -> dt.datetime | None:
        t_m = clock.replace(microsecond=0) + dt.timedelta(seconds=1)  # the next file's second
        if t_m < self.next_at or grid_floor(t_m, self.slide_s) != t_m or \
                t_m > self.files[-1].start:  # the end-of-input flush: nothing left to move
            return None
        self.next_at = grid_floor(t_m, self.every_s) + dt.timedelta(seconds=self.every_s)
        if (t_m - self.first).total_seconds() < self.window_s:
            return None  # not a whole window measured yet
        if self.last_move is not None and \
                (t_m - self.last_move).total_seconds() < self.min_interval_s:
            return None
        lo = t_m - dt.timedelta(seconds=self.window_s)
        mine = [f for f in self.files if lo <= f.start < t_m]
        rate = sum(f.rows for f in mine) / self.window_s
        sels = {}
        if self.predicates and mine:
            from db.files import predicate_fractions

            n, fr = predicate_fractions([f.path for f in mine], self.predicates)
            sels = {p: f for p, f in zip(self.predicates, fr) if n and not math.isnan(f)}
        rho = self._rho(clock)
        q = with_rate(self.query, rate, selectivities=sels)
        best, best_cost, cur_cost, moved = _decide(self.planner, q, self.running, self.margin,
                                                   rho, self.alternatives)
        pred = None if cur_cost is None else cur_cost.vector.bottleneck_cost
        seen = f"rate {rate:,.0f}/s" + (f", measured rho {rho:.2f}" if rho is not None else "")
        if moved:
            why = f"{seen}: " + ("the running plan is gone" if cur_cost is None else
                                 _cost_change(cur_cost, best_cost, 3))
        elif best.placement_string == self.running:
            why = f"keep: the optimum ({seen})"
        else:
            why = (f"keep ({seen}): {best.placement_string} is cheaper by less than the "
                   f"margin (C_u {cur_cost.vector.utilization_cost:.3f} vs "
                   f"{best_cost.vector.utilization_cost:.3f})")
        d = Decision(at=t_m, running=self.running, rate=rate, selectivities=sels, rho=rho,
                     C_b=pred, best=best.placement_string, migrate=moved, reason=why)
        self.decisions.append(d)
        self.prog.phase(f"decision at {t_m:%H:%M:%S}: "
                        + (f"migrate to {d.best} ({why})" if moved else why))
        if moved:
            self.chosen = (d, best_cost)
            return t_m
        return None


# --- migrate -------------------------------------------------------------------------------

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
    from federation.api import plan_for

    if strategy not in STRATEGIES:
        raise AdaptiveError(f"adaptive: strategy: {strategy!r} is not one of "
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
        raise AdaptiveError(f"adaptive: decide: unknown option(s) {', '.join(opts)}")
    fixed = segments is not None
    if fixed:
        _check(query, data, 10 * slide_s, None, 0.0)  # tuple windows, input files
        files = part_files(data, windows[0].stream.ts_column)
    else:
        window_s, files = _check(query, data, every_s, window_s, margin)
    extent = max(w.range_s for w in windows)
    warm_s = math.ceil(extent) + 1
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="fedq-adaptive-"))
    work.mkdir(parents=True, exist_ok=True)
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
        r: RunResult = execute(pp, data, seconds_per_batch=seconds_per_batch, prepared=sub,
                               work_dir=seg_work, spark=spark,
                               progress=on_batch, warmup_batch_s=10 if ff else None,
                               start_at=seg.start if carry is not None else None,
                               stop_at=seg.end, carry=carry, watch=watch, **execute_options)
        t_end = time.perf_counter()
        if watch is not None and r.summary.stopped_at is not None:
            seg = seg.model_copy(update={"end": dt.datetime.fromisoformat(
                r.summary.stopped_at)})
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


def _alternatives(profile: CostProfile) -> Callable[[Rstream], list[str]]:
    """The placements the optimizer kept for a query, best first (every engine can run
    them)."""
    from federation.optimizer import optimize
    from federation.physical import placement_string, spe_limits

    def alts(q: Rstream) -> list[str]:
        r = optimize(q, profile=profile)
        lg = r.plan.logical
        return [placement_string(pl) for pl, _ in r.kept if not spe_limits(lg, pl)]

    return alts


def decide_and_run(query: Rstream, data: str | Path, *, decide: Mapping | None = None,
                   **run_options) -> AdaptiveResult:
    """An adaptive run that decides while it runs (`run_adaptive` without segments)."""
    return run_adaptive(query, data, decide=decide, **run_options)
