"""The slide instants of a query: when it produces a result (the semantics contract).

A query's instants are one grid: tau = offset + k * slide from the epoch (1970-01-01), in
whole microseconds (`Grid`; the offset is 0 unless a window gives one). The window of
instant tau covers [tau - range, tau) (time windows) or the last n rows before tau (tuple
windows). Windows of different slides or offsets in one query: its grid is the coarsest
that holds every window's instants (`common_grid`), and at an instant off a window's own
grid the window holds what it held at its own last instant (CQL: a window's relation
changes only at its instants; `Window.every_s`). Over a finite input whose event times run from
`first_ts` to `last_ts`, the query's instants are

    T = { tau on the grid : first_ts < tau <= last_ts + extent }

where `extent` is the largest window range of the query (a tuple window counts its slide):
the first instant after the first reading up to the last instant at which a window can
still hold a reading. Every placement computes exactly these instants; a global aggregate
(no group keys) has one row at each of them, (COUNT 0, the others NULL) where its input is
empty, as in SQL.

Example:
    >>> import datetime as dt
    >>> t0 = dt.datetime(2026, 1, 1, 0, 0, 0, 500000)
    >>> first_instant(t0, 2.0), last_instant(t0, 7.0, 2.0)
    (datetime.datetime(2026, 1, 1, 0, 0, 2), datetime.datetime(2026, 1, 1, 0, 0, 6))
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass

from federation.conventions import US_PER_S, at_us, grid_floor_us, ts_us, us


@dataclass(frozen=True)
class Grid:
    """A query's instants: origin + k * slide, in whole microseconds from the epoch. The
    origin is a window's offset (Flink's fourth argument of TUMBLE, HOP and CUMULATE), kept
    in [0, slide): the grid is the same for every offset congruent modulo the slide.

    Example:
        >>> g = Grid(10.0, 23.0)
        >>> g.offset_s, g.floor(dt.datetime(2026, 1, 1, 0, 0, 9))
        (3.0, datetime.datetime(2026, 1, 1, 0, 0, 3))
    """

    slide_s: float
    offset_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset_s", us(self.offset_s) % us(self.slide_s) / US_PER_S)

    @property
    def slide_us(self) -> int:
        return us(self.slide_s)

    @property
    def origin_us(self) -> int:
        return us(self.offset_s)

    @property
    def slide(self) -> dt.timedelta:
        return dt.timedelta(microseconds=self.slide_us)

    def every(self, every_s: float) -> Grid:
        """The grid of every `every_s` seconds (a multiple of the slide) through this
        grid's instants."""
        return Grid(every_s, self.offset_s)

    def floor_us(self, u: int) -> int:
        return grid_floor_us(u, self.slide_us, self.origin_us)

    def floor(self, ts: dt.datetime) -> dt.datetime:
        """The largest instant on the grid at or before `ts`."""
        return at_us(self.floor_us(ts_us(ts)))

    def first_after(self, ts: dt.datetime) -> dt.datetime:
        """The smallest instant on the grid strictly after `ts`."""
        return at_us(self.floor_us(ts_us(ts)) + self.slide_us)

    def last(self, ts: dt.datetime, extent_s: float) -> dt.datetime:
        """The largest instant on the grid at or before `ts + extent`."""
        return at_us(self.floor_us(ts_us(ts) + us(extent_s)))

    def points(self, lo: dt.datetime, hi: dt.datetime) -> list[dt.datetime]:
        """Grid points g with lo <= g <= hi."""
        a = self.floor_us(ts_us(lo) - 1) + self.slide_us
        return [at_us(u) for u in range(a, ts_us(hi) + 1, self.slide_us)]


def as_grid(grid: Grid | float) -> Grid:
    """A grid, or a slide in seconds for the grid from the epoch."""
    return grid if isinstance(grid, Grid) else Grid(grid)


def common_grid(grids: Iterable[Grid]) -> Grid:
    """The coarsest grid that holds every instant of `grids`: its slide the greatest common
    divisor of their slides and of the distances between their origins.

    Example:
        >>> common_grid([Grid(10.0), Grid(4.0)]), common_grid([Grid(10.0), Grid(10.0, 5.0)])
        (Grid(slide_s=2.0, offset_s=0.0), Grid(slide_s=5.0, offset_s=0.0))
    """
    grids = list(grids)
    o = grids[0].origin_us
    step = 0
    for g in grids:
        step = math.gcd(step, g.slide_us, g.origin_us - o)
    return Grid(step / US_PER_S, o / US_PER_S)


def query_grid(windows: Iterable) -> Grid:
    """A query's instants: the coarsest grid holding every window's (`common_grid`; a
    window held on the query's finer grid, `Window.every_s`, counts that one too)."""
    return common_grid(w.instants for w in windows)


def grid_floor(ts: dt.datetime, grid: Grid | float) -> dt.datetime:
    """The largest instant on the grid at or before `ts`."""
    return as_grid(grid).floor(ts)


def first_instant(ts: dt.datetime, grid: Grid | float) -> dt.datetime:
    """The smallest instant on the grid strictly after `ts`."""
    return as_grid(grid).first_after(ts)


def last_instant(ts: dt.datetime, extent_s: float, grid: Grid | float) -> dt.datetime:
    """The largest instant on the grid at or before `ts + extent`."""
    return as_grid(grid).last(ts, extent_s)


def instants(first_ts: dt.datetime, last_ts: dt.datetime, extent_s: float,
             grid: Grid | float) -> list[dt.datetime]:
    """T for event times in [first_ts, last_ts] (module doc)."""
    g = as_grid(grid)
    return g.points(g.first_after(first_ts), g.last(last_ts, extent_s))


def grid_points(lo: dt.datetime, hi: dt.datetime, grid: Grid | float) -> list[dt.datetime]:
    """Grid points g with lo <= g <= hi."""
    return as_grid(grid).points(lo, hi)


def extent_of(windows: Iterable) -> float:
    """The largest range of the windows (a tuple window counts its slide, a session
    window its gap and slide: its last session ends a gap after its last reading)."""
    return max(w.extent_s for w in windows)


def holdback(nodes: Iterable) -> tuple[float, float, int]:
    """The largest window range (and held time), the largest slide, and the joins in a
    plan's nodes: Spark holds back the watermark below a join of window rows
    (spe.joins.rows_join) by the window's range (a bound: only joins of rows do)."""
    nodes = list(nodes)
    windows = [n for n in nodes if n.kind == "window"]
    joins = sum(1 for n in nodes if n.kind == "join")
    return (max((w.range_s or 0.0) + w.held_s for w in windows),
            max(w.slide_s for w in windows), joins)


def end_flush_s(nodes: Iterable) -> float:
    """How far after the last reading the end-of-input punctuation goes so that every
    window closes in every engine: the largest range, once more per join of window rows
    (Spark's watermark hold-back), and ten slides."""
    max_range, slide_s, joins = holdback(nodes)
    return max_range * (1 + joins) + 10 * slide_s
