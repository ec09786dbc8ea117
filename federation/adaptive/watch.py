"""Watch while running: at every decision point the running segment's stage-0 micro-batches
ask a `Watch`, which measures the window before it and decides (decide.py)."""


from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from federation.adaptive.decide import (
    Segment,
    _cost_change,
    _decide,
    move_refusal,
    with_rates,
)
from federation.conjuncts import split_conjuncts
from federation.conventions import DATA, KIND
from federation.instants import Grid
from federation.logical import Node, Rstream, Select, Window
from federation.runtime.progress import RunProgress


class Decision(BaseModel):
    """One decision of a running adaptive run, from what it measured in the window before."""

    model_config = ConfigDict(extra="forbid")

    at: dt.datetime  # the stage-0 clock it was taken at
    #: a live run's migration instant when later than `at`: the first after the readings
    #: the running placement has been given already (Watch.given: it processes them anyway)
    since: dt.datetime | None = None
    running: str
    rate: float  # input tuples per second in the window, all streams (Parquet metadata)
    rates: dict[str, float] = {}  # each stream's, of a query over several
    selectivities: dict[str, float]  # of the selections over window rows, measured
    #: the running plan's event seconds per wall second over the window (its stage-0
    #: micro-batches), None when none of them is past its warm-up and its first batch, or
    #: when a live run is caught up (its batches wait for the input: not its capacity)
    rho: float | None
    C_b: float | None  # the running plan's predicted C_b at the measured statistics
    best: str  # the placement the decision would run
    migrate: bool
    reason: str


def row_predicates(query: Rstream, stream: str | None = None) -> list[str]:
    """The conjuncts of the selections over window rows (the stream's own columns; of
    `stream`'s windows only, if given): what the watch measures from the input."""
    out: list[str] = []
    for n in query.walk():
        if isinstance(n, Select) and _over_stream_columns(n.child, stream):
            out += [c.sql(dialect="duckdb") for c in split_conjuncts(n.predicate)
                    if c.sql(dialect="duckdb") not in out]
    return out


def _over_stream_columns(n: Node, stream: str | None) -> bool:
    while isinstance(n, Select):
        n = n.child
    return isinstance(n, Window) and stream in (None, n.stream.name)


def first_segment(query: Rstream, inp, window_s: float, start_placement: str,
                  planner: Callable) -> Segment:
    """The first segment: `start_placement` planned at the first window's measured rates
    (`inp`: streams.AdaptiveInput)."""
    first = inp.first
    head = min(window_s, (inp.last + dt.timedelta(seconds=1) - first).total_seconds())
    rates = inp.rates(first, first + dt.timedelta(seconds=head))
    pp, cost = planner(with_rates(query, rates), start_placement)
    return Segment(start_at=None, stop_at=None, placement=pp.placement_string,
                   rate=sum(rates.values()), rates=rates if len(rates) > 1 else {},
                   C_b=cost.vector.C_b, C_u=cost.vector.C_u,
                   reason=f"start: {start_placement} at the first {head:g} s' rate")


class Watch:
    """Asked at every stage-0 micro-batch of a running segment
    (`execute(handoff=Handoff(watch=...))`): at each decision point (every `every_s` of
    event time) it measures the window before it (input rate, selectivities, the running
    plan's rho), decides, and returns the migration instant when the run should move."""

    def __init__(self, query: Rstream, inp, running: str,
                 start_at: dt.datetime | None, last_migration: dt.datetime | None, *,
                 every_s: float, window_s: float, margin: float, min_interval_s: float,
                 grid: Grid, planner: Callable, alternatives: Callable | None,
                 progress: RunProgress, seconds_per_batch: int = 1) -> None:
        self.query, self.inp, self.running = query, inp, running  # streams.AdaptiveInput
        self.start_at, self.last_migration = start_at, last_migration
        self.every_s, self.window_s, self.margin = every_s, window_s, margin
        self.min_interval_s, self.grid = min_interval_s, grid  # the query's instants
        self.seconds_per_batch = seconds_per_batch
        self.planner, self.alternatives, self.prog = planner, alternatives, progress
        self.first = inp.first
        self.next_at = grid.every(every_s).floor(start_at or self.first) + dt.timedelta(
            seconds=every_s)
        self.batches: list[tuple[dt.datetime, float]] = []
        self.live = getattr(inp, "follower", None) is not None  # live.LiveInput
        self.backlog_s: int | None = None  # of the last stage-0 batch
        #: a live segment's: the latest reading its input has been given, less its tail
        #: (adaptive/live.SpoolLink.given), and how far past the clock a migration instant
        #: may be put after it (one micro-batch of a following run, RunOptions.files_per_batch)
        self.given: Callable[[], dt.datetime | None] | None = None
        self.given_cap_s = 60.0
        #: a live segment's: how far past the decision the migration instant is put at
        #: least (segment.Chain.lead_s: the next placement starts meanwhile)
        self.lead_s = 0.0
        self.predicates = {n: row_predicates(query, n) for n in inp.streams}
        self.decisions: list[Decision] = []
        self.chosen: tuple[Decision, object] | None = None  # (decision, its plan's cost)

    def batch(self, m) -> None:
        """A micro-batch of the running segment (its progress)."""
        if m.stage == 0 and m.data and m.clock is not None:
            self.batches.append((m.clock, m.wall_s))
            self.backlog_s = m.backlog_s

    def _rho(self, clock: dt.datetime) -> float | None:
        # asked before the current batch is recorded: its pace is the batches before it
        lo = clock - dt.timedelta(seconds=self.window_s + self.seconds_per_batch)
        start = self.start_at or self.first
        idx = [i for i, (c, _) in enumerate(self.batches) if lo < c <= clock and c > start]
        if not idx or idx[0] < 2 or self.batches[idx[0] - 1][0] < start:
            return None  # its warm-up or Spark's first batches are not its pace
        event = (self.batches[idx[-1]][0] - self.batches[idx[0] - 1][0]).total_seconds()
        wall = sum(self.batches[i][1] for i in idx)
        return event / wall if wall > 0 else None

    def __call__(self, clock: dt.datetime) -> dt.datetime | None:
        # the decision instant, the next file's second: the migration instant if it migrates
        at = clock.replace(microsecond=0) + dt.timedelta(seconds=1)
        if at < self.next_at or self.grid.floor(at) != at or \
                not self.inp.before_end(at):  # the end-of-input flush: nothing left to move
            return None
        self.next_at = self.grid.every(self.every_s).floor(at) + dt.timedelta(
            seconds=self.every_s)
        if (at - self.first).total_seconds() < self.window_s:
            return None  # not a whole window measured yet
        if self.last_migration is not None and \
                (at - self.last_migration).total_seconds() < self.min_interval_s:
            return None
        lo = at - dt.timedelta(seconds=self.window_s)
        rates = self.inp.rates(lo, at)
        rate = sum(rates.values())
        sels = {}
        for name, files in self.inp.between(lo, at).items():
            if self.predicates[name] and files:
                from db.files import predicate_fractions

                n, fr = predicate_fractions([f.path for f in files], self.predicates[name],
                                            f"{KIND} = {DATA}")  # the spool's readings
                sels.update({p: f for p, f in zip(self.predicates[name], fr)
                             if n and not math.isnan(f)})
        rho = self._rho(clock)
        if self.live and self.backlog_s is not None and \
                self.backlog_s <= 2 * max(1, self.seconds_per_batch):
            rho = None  # caught up with a live input: its pace is the input's (it waits)
        q = with_rates(self.query, rates, selectivities=sels)
        best, best_cost, cur_cost, migrates = _decide(self.planner, q, self.running,
                                                      self.margin, rho, self.alternatives)
        blocked = None
        if migrates and cur_cost is not None:  # a tuple window's state: moved, or kept
            blocked = move_refusal(self.query, self.planner, q, self.running, best)
            migrates = blocked is None
        pred = None if cur_cost is None else cur_cost.vector.C_b
        seen = f"rate {rate:,.0f}/s" + (f", measured rho {rho:.2f}" if rho is not None else "") \
            + (f", backlog {self.backlog_s} s" if self.live and self.backlog_s is not None else "")
        if migrates:
            why = f"{seen}: " + ("the running plan is gone" if cur_cost is None else
                                 _cost_change(cur_cost, best_cost, 3))
        elif blocked is not None:
            why = f"keep ({seen}): {best.placement_string} is cheaper, but {blocked}"
        elif best.placement_string == self.running:
            why = f"keep: the optimum ({seen})"
        else:
            why = (f"keep ({seen}): {best.placement_string} is cheaper by less than the "
                   f"margin (C_u {cur_cost.vector.C_u:.3f} vs {best_cost.vector.C_u:.3f})")
        since = self._later_instant(at) if migrates else None
        d = Decision(at=at, since=since, running=self.running, rate=rate,
                     selectivities=sels, rho=rho, rates=rates if len(rates) > 1 else {},
                     C_b=pred, best=best.placement_string, migrate=migrates, reason=why)
        self.decisions.append(d)
        self.prog.phase(f"decision at {at:%H:%M:%S}: "
                        + (f"migrate to {d.best} " + (f"from {since:%H:%M:%S} " if since
                                                      else "") + f"({why})"
                           if migrates else why))
        if migrates:
            self.chosen = (d, best_cost)
            return since or at
        return None

    def _later_instant(self, at: dt.datetime) -> dt.datetime | None:
        """A live segment's migration instant, when later than the decision's `at`: at
        least `lead_s` past it (the next placement plans and starts its Spark queries while
        the old one computes up to it), and after the readings the segment has been given
        already (a backlog: its next micro-batch reads them whatever is decided), so that
        it computes with them and its input ends there (the next file is cut: live._Lane)
        instead of the new placement reading them again, unless that is more than one
        micro-batch of a following run past `at`. None: `at`."""
        slide = self.grid.slide
        since = self.grid.floor(at + dt.timedelta(seconds=self.lead_s) - dt.timedelta(
            microseconds=1)) + slide  # the first instant from at + lead on
        given = None if self.given is None else self.given()
        if given is not None and given >= since and \
                (given - at).total_seconds() <= self.given_cap_s:
            since = self.grid.floor(given) + slide
        return since if since > at and self.inp.before_end(since) else None


def migration_instant(watch) -> dt.datetime | None:
    """The migration instant a watch (or log.Decided) has chosen, if it has."""
    if watch is None or watch.chosen is None:
        return None
    d = watch.chosen[0]
    return getattr(d, "since", None) or d.at


def next_segment(seg: Segment, watch) -> Segment | None:
    """The segment the watch decided at the end of `seg` (its `stop_at`), if it did."""
    if watch is not None and watch.chosen is not None and seg.stop_at is not None:
        d, cost = watch.chosen
        return Segment(start_at=seg.stop_at, stop_at=None, placement=d.best, rate=d.rate,
                       rates=d.rates, reason=d.reason, C_b=cost.vector.C_b, C_u=cost.vector.C_u)
    return None
