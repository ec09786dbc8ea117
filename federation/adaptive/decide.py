"""Decide: the plan for the measured statistics against the running placement, priced alike
(Definition 1 with hysteresis); the segments of a run decided from the rates alone (no JVM)."""


from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from costmodel.ordering import CostVector, sort_key
from costmodel.profile import CostProfile
from federation.adaptive.inputs import PartFile, measured_rates, part_files
from federation.conventions import US_PER_S
from federation.errors import FedqError, OptionError
from federation.instants import query_grid
from federation.logical import Node, Rstream, Window
from federation.runtime.options import CheckedOptions


class AdaptiveError(OptionError):
    """A query or an input that adaptive runs cannot take."""


class DecideOptions(CheckedOptions):
    """The decision options of a run that decides while it runs (`decide=`), checked once;
    an AdaptiveError names a bad one."""

    error: ClassVar[type[OptionError]] = AdaptiveError

    start_placement: str = "auto"
    every_s: float = 10.0
    margin: float = 0.1
    min_interval_s: float = 30.0
    window_s: float | None = None




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


def with_rates(query: Rstream, rates: float | Mapping[str, float],
               selectivities: Mapping[str, float] | None = None) -> Rstream:
    """`with_rate` for every stream: one rate for all, or each stream's by its name."""
    if not isinstance(rates, Mapping):
        return with_rate(query, rates, selectivities=selectivities)
    for name, r in rates.items():
        query = with_rate(query, r, name, selectivities)
    return query


class Segment(BaseModel):
    """One placement over the instants [start_at, stop_at) (None: from the first instant, to
    the end of the input); `start_at` and `stop_at` are migration instants."""

    model_config = ConfigDict(extra="forbid")

    start_at: dt.datetime | None  # None: from the first instant
    stop_at: dt.datetime | None  # None: to the end of the input
    placement: str
    rate: float  # the measured rate that chose it (of all streams)
    reason: str
    #: each stream's measured rate, when the query reads several (else `rate` is its)
    rates: dict[str, float] = {}
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
        return new.C_u < (1 - margin) * cur.C_u
    return new.C_b < (1 - margin) * cur.C_b


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
    except FedqError:  # the current ids do not exist in this plan: migrate
        return best, best_cost, None, True
    if rho is not None and 0 < rho < 1:
        v = cur_cost.vector
        cur_cost = dataclasses.replace(cur_cost, vector=CostVector(
            max(v.C_b, 1 / rho), max(v.C_u, 1 / rho)))
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
    return (f"C_b {v.C_b:.{digits}f} -> {w.C_b:.{digits}f}, "
            f"C_u {v.C_u:.{digits}f} -> {w.C_u:.{digits}f}")


def migrations_over(make_query: Callable[[float], Rstream], rates: Sequence[float],
                    margin: float, profile: CostProfile | None = None) -> list[dict]:
    """What an adaptive run would do as the rate steps through `rates`: the running
    placement at each rate, and whether (and why) it migrates there (`fedq explain --sweep
    --margin`). The run starts on the optimizer's plan at the first rate."""
    from federation.optimizer import plan_for

    def planner(q, p):
        return plan_for(q, p, profile)

    out, cur = [], None
    for rate in rates:
        q = make_query(rate)
        if cur is None:
            cur = planner(q, "auto")[0].placement_string
            out.append({"rate": rate, "running": cur, "migrates": False, "reason": "start"})
            continue
        best, best_cost, cur_cost, migrates = _decide(planner, q, cur, margin)
        reason = ""
        if migrates:
            reason = ("the running plan is gone" if cur_cost is None else
                      f"C_u {cur_cost.vector.C_u:.4f} -> {best_cost.vector.C_u:.4f}")
            cur = best.placement_string
        elif best.placement_string != cur:
            reason = (f"kept: the optimum is cheaper by less than the margin (C_u "
                      f"{cur_cost.vector.C_u:.4f} vs {best_cost.vector.C_u:.4f})")
        out.append({"rate": rate, "running": cur, "migrates": migrates, "reason": reason})
    return out


def _check_options(query: Rstream, every_s: float, margin: float,
                   segments: Sequence[Segment] | None = None) -> None:
    """The decision options, or the given segments, checked (AdaptiveError names the bad
    one): a migration instant is an instant of the query (on its slide's grid)."""
    windows = [n for n in query.walk() if isinstance(n, Window)]
    session = next((w for w in windows if w.is_session), None)
    if session is not None:
        raise AdaptiveError("query", f"{session.label()}: {SESSION_STATE}")
    grid = query_grid(windows)
    if segments is None and grid.origin_us % math.gcd(grid.slide_us, US_PER_S):
        raise AdaptiveError("query", f"its instants ({grid.offset_s:g} s plus multiples of "
                            f"{grid.slide_s:g} s) never fall on a whole event second, where "
                            "a run decides (give its segments: they may cut a second)")
    for s in segments or ():
        if s.start_at is not None and grid.floor(s.start_at) != s.start_at:
            raise AdaptiveError("segments", f"{s.start_at} is not an instant of the query "
                                f"({grid.offset_s:g} s plus a multiple of its slide, "
                                f"{grid.slide_s:g} s)")
    slide = grid.slide_s
    if every_s <= 0 or abs(every_s / slide - round(every_s / slide)) > 1e-9:
        raise AdaptiveError("every_s", f"{every_s:g} s is not a multiple of the slide "
                            f"({slide:g} s)")
    if not 0 <= margin < 1:
        raise AdaptiveError("margin", f"{margin} is not in [0, 1)")


def has_tuple_window(query: Node) -> bool:
    return any(isinstance(n, Window) and n.rows is not None for n in query.walk())


#: why a query with a session window is not re-placed during its run
SESSION_STATE = ("a session lasts as long as its key's readings keep coming, so no replay "
                 "of a bounded extent rebuilds the open sessions, and Spark's session state "
                 "cannot be moved into DuckDB's tables; run it with one placement")


#: why a migration of a query with a tuple window must move its state
TUPLE_STATE = ("a tuple window's state is its last n rows, not bounded by event time: a "
               "replay of the last extent cannot rebuild it, only a move takes it over")


def _unmovable(query: Node, old, new) -> str | None:
    """Why the move from plan `old` to plan `new` does not apply (runtime/move.py), as a
    tuple window's refusal; None when it does. Plans only: no state is read."""
    from federation.runtime.move import NotMovable, plan_move

    slide = next(n for n in query.walk() if isinstance(n, Window)).slide_s
    try:
        plan_move(old, Path("."), new, slide)
    except NotMovable as e:
        return f"{TUPLE_STATE}, and here the move does not apply ({e})"
    return None


def move_refusal(query: Node, planner: Callable, q: Rstream, running: str, new
                 ) -> str | None:
    """Why a migration of `query` (`q`: with the statistics decided at) from placement
    `running` to plan `new` cannot take a tuple window's state over, or None (it can, or
    the query has no tuple window: then nothing is planned)."""
    if not has_tuple_window(query):
        return None
    return _unmovable(query, planner(q, running)[0], new)


def check_segments_movable(query: Rstream, segments: Sequence[Segment], planner: Callable,
                           strategy: str) -> None:
    """A query with a tuple window: the strategy moves, and so can each given migration
    (AdaptiveError naming the option)."""
    if not has_tuple_window(query):
        return
    if strategy != "move":
        raise AdaptiveError("strategy", f"{strategy!r} with a tuple window (rows=...): "
                            f"{TUPLE_STATE}")
    plans = [planner(with_rates(query, s.rates or s.rate), s.placement)[0] for s in segments]
    for s, old, new in zip(segments[1:], plans, plans[1:]):
        if (why := _unmovable(query, old, new)) is not None:
            raise AdaptiveError("segments", f"the migration to {s.placement} at "
                                f"{s.start_at}: {why}")


def _check(query: Rstream, data: str | Path, every_s: float, window_s: float | None,
           margin: float) -> tuple[float, list[PartFile]]:
    """The decision options checked (AdaptiveError names the bad one), the measurement
    window, and the part files of a query's one stream."""
    _check_options(query, every_s, margin)
    stream = next(n for n in query.walk() if isinstance(n, Window)).stream
    files = part_files(data, stream.ts_column)
    if not files:
        raise AdaptiveError("data", f"no part-*.parquet files with rows in {data}")
    return window_s or every_s, files


def _start(query: Rstream, files: Sequence[PartFile], window_s: float, start_placement: str,
           planner: Callable) -> Segment:
    """The first segment: `start_placement` planned at the first window's measured rate."""
    first, last = files[0].start, files[-1].start + dt.timedelta(seconds=1)
    head = min(window_s, (last - first).total_seconds())
    r0 = sum(f.rows for f in files if f.start < first + dt.timedelta(seconds=head)) / head
    pp, cost = planner(with_rate(query, r0), start_placement)
    return Segment(start_at=None, stop_at=None, placement=pp.placement_string, rate=r0,
                   C_b=cost.vector.C_b, C_u=cost.vector.C_u,
                   reason=f"start: {start_placement} at the first {head:g} s' rate")


def plan_segments(query: Rstream, data: str | Path, *, every_s: float = 10.0,
                  window_s: float | None = None, margin: float = 0.1,
                  min_interval_s: float = 30.0, profile: CostProfile | None = None,
                  start_placement: str = "auto",
                  planner: Callable | None = None) -> list[Segment]:
    """Decide the segments of an adaptive run (module doc). `planner(query, placement)`
    returns (physical plan, PlanCost); default `federation.optimizer.plan_for`."""
    from federation.optimizer import plan_for

    planner = planner or (lambda q, p: plan_for(q, p, profile))
    window_s, files = _check(query, data, every_s, window_s, margin)
    first, last = files[0].start, files[-1].start + dt.timedelta(seconds=1)
    grid = query_grid(n for n in query.walk() if isinstance(n, Window)).every(every_s)
    t = grid.floor(first) + dt.timedelta(seconds=every_s)
    points = []
    while t < last:
        if (t - first).total_seconds() >= window_s:  # a whole window measured
            points.append(t)
        t += dt.timedelta(seconds=every_s)
    segs = [_start(query, files, window_s, start_placement, planner)]
    cur = segs[0].placement
    last_migration = None
    for t, r in zip(points, measured_rates(files, points, window_s)):
        if last_migration is not None and \
                (t - last_migration).total_seconds() < min_interval_s:
            continue
        q = with_rate(query, r)
        best, best_cost, cur_cost, migrates = _decide(planner, q, cur, margin)
        if not migrates or cur_cost is not None and move_refusal(
                query, planner, q, cur, best) is not None:
            continue  # kept (or a tuple window's state could not be moved)
        why = (f"rate {r:,.0f}/s: " + ("the current plan is gone" if cur_cost is None else
                                       _cost_change(cur_cost, best_cost, 4)))
        segs[-1] = segs[-1].model_copy(update={"stop_at": t})
        cur = best.placement_string
        segs.append(Segment(start_at=t, stop_at=None, placement=cur, rate=r, reason=why,
                            C_b=best_cost.vector.C_b, C_u=best_cost.vector.C_u))
        last_migration = t
    return segs



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
