"""Re-optimization while a query runs: watch the input rate, decide, migrate (issue 13).

A run is cut into **segments** of event time, each under one placement:

* **Watch.** The input rate of every decision window of event time (`every_s`, on the slide
  grid) is measured from the data (rows per part file, from Parquet metadata: no row is
  read). A decision at instant T uses only the event seconds before T.
* **Decide.** At each decision point the optimizer plans the query for the measured rate
  (the stream's other statistics unchanged). The run migrates when that plan is better than
  the current placement, priced at the same rate, by a margin (Definition 1: a feasible plan
  beats an infeasible one; else C_u lower by `margin`), and no migration happened in the
  last `min_interval_s` of event time: a rate hovering at a boundary does not flap.
* **Migrate** (parallel track, docs/architecture.md "Re-optimization while running"): the
  new placement starts at instant T_m from the replayable input, its windows filled from
  the last extent of event time before T_m (fast-forwarded), and takes over at T_m; the old
  placement's results end at T_m - slide. Every instant is produced exactly once, by the
  segment that owns it: [T_k, T_k+1).

`plan_segments` decides (no JVM); `run_adaptive` runs the segments and concatenates their
results; `decide_and_run` does both.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import shutil
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
from federation.instants import grid_floor
from federation.logical import Node, Rstream, Window
from federation.runtime import RunResult, execute
from federation.runtime.carry import NotMovable, plan_carry
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
    Parquet metadata (row-group statistics of the event-time column)."""
    out = []
    for p in sorted(Path(data).glob("part-*.parquet")):
        try:
            md = pq.read_metadata(p)
        except Exception:  # noqa: BLE001, S112 - an unreadable file: the ingest quarantines it
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

def with_rate(query: Rstream, rate: float, stream: str | None = None) -> Rstream:
    """The same query with its streams' rate (or only stream `stream`'s) set to `rate`,
    their other statistics kept."""

    def rebuild(n: Node) -> Node:
        if isinstance(n, Window) and stream in (None, n.stream.name):
            st = n.stream
            return dataclasses.replace(n, stream=st.model_copy(update={
                "stats": st.stats.model_copy(update={"rate_tps": rate})}))
        kids = [getattr(n, f) for f in n.child_fields]
        return n.with_children(*[rebuild(k) for k in kids]) if kids else n

    return rebuild(query)  # type: ignore[return-value]


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


def _decide(planner: Callable, q: Rstream, cur: str, margin: float):
    """One decision at the rate `q` declares: (the optimizer's plan and its cost, the running
    placement's cost there or None when its ids no longer exist, whether to migrate)."""
    best, best_cost = planner(q, "auto")
    if best.placement_string == cur:
        return best, best_cost, best_cost, False
    try:
        _, cur_cost = planner(q, cur)
    except FedqError:  # the current ids do not exist in this rate's plan: move
        return best, best_cost, None, True
    return best, best_cost, cur_cost, better_by_margin(best_cost.vector, cur_cost.vector,
                                                       margin)


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


def plan_segments(query: Rstream, data: str | Path, *, every_s: float = 10.0,
                  window_s: float | None = None, margin: float = 0.1,
                  min_interval_s: float = 30.0, profile: CostProfile | None = None,
                  start_placement: str = "auto",
                  planner: Callable | None = None) -> list[Segment]:
    """Decide the segments of an adaptive run (module doc). `planner(query, placement)`
    returns (physical plan, PlanCost); default `federation.api.plan_for`."""
    from federation.api import plan_for

    planner = planner or (lambda q, p: plan_for(q, p, profile))
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
    window_s = window_s or every_s
    files = part_files(data, windows[0].stream.ts_column)
    if not files:
        raise AdaptiveError(f"adaptive: no part-*.parquet files with rows in {data}")
    first, last = files[0].start, files[-1].start + dt.timedelta(seconds=1)
    t = grid_floor(first, every_s) + dt.timedelta(seconds=every_s)
    points = []
    while t < last:
        if (t - first).total_seconds() >= window_s:  # a whole window measured
            points.append(t)
        t += dt.timedelta(seconds=every_s)
    head = min(window_s, (last - first).total_seconds())
    r0 = sum(f.rows for f in files if f.start < first + dt.timedelta(seconds=head)) / head
    pp, cost = planner(with_rate(query, r0), start_placement)
    cur = pp.placement_string
    segs = [Segment(start=None, end=None, placement=cur, rate=r0, C_b=cost.vector.bottleneck_cost,
                    C_u=cost.vector.utilization_cost,
                    reason=f"start: {start_placement} at the first {head:g} s' rate")]
    last_move = None
    for t, r in zip(points, measured_rates(files, points, window_s)):
        if last_move is not None and (t - last_move).total_seconds() < min_interval_s:
            continue
        best, best_cost, cur_cost, moved = _decide(planner, with_rate(query, r), cur, margin)
        if not moved:
            continue
        why = (f"rate {r:,.0f}/s: " + ("the current plan is gone" if cur_cost is None else
               f"C_b {cur_cost.vector.bottleneck_cost:.4f} -> "
               f"{best_cost.vector.bottleneck_cost:.4f}, C_u "
               f"{cur_cost.vector.utilization_cost:.4f} -> "
               f"{best_cost.vector.utilization_cost:.4f}"))
        segs[-1] = segs[-1].model_copy(update={"end": t})
        cur = best.placement_string
        segs.append(Segment(start=t, end=None, placement=cur, rate=r, reason=why,
                            C_b=best_cost.vector.bottleneck_cost,
                            C_u=best_cost.vector.utilization_cost))
        last_move = t
    return segs


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
    #: its stage-0 data micro-batches: (event time reached, wall seconds of the batch)
    batches: list[tuple[dt.datetime, float]]


class AdaptiveResult(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    rows: pa.Table
    segments: list[SegmentRun]
    wall_s: float

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


def run_adaptive(query: Rstream, data: str | Path, segments: Sequence[Segment], *,
                 profile: CostProfile | None = None, seconds_per_batch: int = 1,
                 work_dir: str | Path | None = None, spark=None,
                 progress: RunProgress | None = None, strategy: str = "move",
                 planner: Callable | None = None, **execute_options) -> AdaptiveResult:
    """Run each segment's placement over the instants it owns (module doc, "Migrate").

    `strategy`: "replay" starts every new placement from a replay of the last extent of
    input (parallel track); "move" carries the window state in DuckDB over where that
    applies (federation/runtime/carry.py) and replays elsewhere."""
    from federation.api import plan_for

    if strategy not in STRATEGIES:
        raise AdaptiveError(f"adaptive: strategy: {strategy!r} is not one of "
                            f"{', '.join(STRATEGIES)}")
    planner = planner or (lambda q, p: plan_for(q, p, profile or load_profile()))
    prog = as_progress(progress)
    windows = [n for n in query.walk() if isinstance(n, Window)]
    extent = max(w.range_s for w in windows)
    warm_s = math.ceil(extent) + 1
    slide_s = windows[0].slide_s
    files = part_files(data, windows[0].stream.ts_column)
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="fedq-adaptive-"))
    work.mkdir(parents=True, exist_ok=True)
    decl = Path(data) / "_stream.json"
    parts, runs = [], []
    prev = None  # the previous segment's plan and its DB-op state directory
    t_all = time.perf_counter()
    for k, seg in enumerate(segments):
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
        lo = None if seg.start is None or carry is not None else \
            seg.start - dt.timedelta(seconds=warm_s)
        if carry is not None:
            lo = seg.start
        mine = [f for f in files if (lo is None or f.start >= lo)
                and (seg.end is None or f.start < seg.end)]
        seg_dir = work / f"segment{k}" / "data"
        shutil.rmtree(seg_dir, ignore_errors=True)
        seg_dir.mkdir(parents=True)
        for f in mine:
            (seg_dir / f.path.name).symlink_to(f.path.resolve())
        if decl.exists():
            shutil.copy(decl, seg_dir / decl.name)
        warm = sum(1 for f in mine if seg.start is not None and f.start < seg.start)
        prog.phase(f"segment {k + 1}/{len(segments)}: {seg.placement} ({seg.reason}; {how})",
                   total=len(mine), unit="event seconds")
        t0 = time.perf_counter()
        first_at = [None]

        def on_batch(m, seg=seg, t0=t0, first_at=first_at) -> None:
            if first_at[0] is None and m.result_rows and (
                    seg.start is None or (m.clock is not None and m.clock >= seg.start)):
                first_at[0] = time.perf_counter() - t0
            prog.batch(m)

        ff = warm if (warm and seconds_per_batch == 1) else None
        seg_work = work / f"segment{k}" / "work"
        r: RunResult = execute(pp, seg_dir, seconds_per_batch=seconds_per_batch,
                               work_dir=seg_work, spark=spark,
                               progress=on_batch, warmup_batch_s=10 if ff else None,
                               start_at=seg.start if carry is not None else None,
                               stop_at=seg.end, carry=carry, **execute_options)
        wall = time.perf_counter() - t0
        rows = _owned(r.rows, seg)
        parts.append(rows)
        owned_s = len(mine) - warm
        runs.append(SegmentRun(segment=seg, strategy=how, carried=r.summary.carried,
                               input_seconds=len(mine), warmup_seconds=warm,
                               result_rows=rows.num_rows, wall_s=wall,
                               rho=owned_s / wall if wall else float("nan"),
                               first_result_s=first_at[0], setup_s=wall - r.summary.wall_s,
                               batches=[(m.clock, m.wall_s) for m in r.metrics
                                        if m.stage == 0 and m.data and m.clock is not None]))
        prev = (pp, seg_work / "state")
    rows = pa.concat_tables(parts) if parts else pa.table({})
    return AdaptiveResult(rows=rows, segments=runs, wall_s=time.perf_counter() - t_all)


def decide_and_run(query: Rstream, data: str | Path, *, decide: Mapping | None = None,
                   **run_options) -> AdaptiveResult:
    """`plan_segments` with the options in `decide`, then `run_adaptive`."""
    segs = plan_segments(query, data, profile=run_options.get("profile"), **(decide or {}))
    return run_adaptive(query, data, segs, **run_options)
