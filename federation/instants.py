"""The slide instants of a query: when it produces a result (the semantics contract).

Every window of a query slides on one grid: tau = k * slide from the epoch (1970-01-01), in
whole microseconds. The window of instant tau covers [tau - range, tau) (time windows) or the
last n rows before tau (tuple windows). Over a finite input whose event times run from
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
from collections.abc import Iterable

from federation.conventions import at_us, ts_us, us


def grid_floor(ts: dt.datetime, slide_s: float) -> dt.datetime:
    """The largest instant on the grid at or before `ts`."""
    s = us(slide_s)
    return at_us(ts_us(ts) // s * s)


def first_instant(ts: dt.datetime, slide_s: float) -> dt.datetime:
    """The smallest instant on the grid strictly after `ts`."""
    s = us(slide_s)
    return at_us((ts_us(ts) // s + 1) * s)


def last_instant(ts: dt.datetime, extent_s: float, slide_s: float) -> dt.datetime:
    """The largest instant on the grid at or before `ts + extent`."""
    s = us(slide_s)
    return at_us((ts_us(ts) + us(extent_s)) // s * s)


def instants(first_ts: dt.datetime, last_ts: dt.datetime, extent_s: float,
             slide_s: float) -> list[dt.datetime]:
    """T for event times in [first_ts, last_ts] (module doc)."""
    s = us(slide_s)
    lo = ts_us(first_instant(first_ts, slide_s))
    hi = ts_us(last_instant(last_ts, extent_s, slide_s))
    return [at_us(u) for u in range(lo, hi + 1, s)]


def grid_points(lo: dt.datetime, hi: dt.datetime, slide_s: float) -> list[dt.datetime]:
    """Grid points g with lo <= g <= hi."""
    s = us(slide_s)
    a = -(-ts_us(lo) // s) * s
    return [at_us(u) for u in range(a, ts_us(hi) + 1, s)]


def extent_of(windows: Iterable) -> float:
    """The largest range of the windows (a tuple window counts its slide, a session
    window its gap and slide: its last session ends a gap after its last reading)."""
    return max(w.extent_s for w in windows)


def holdback(nodes: Iterable) -> tuple[float, float, int]:
    """The largest window range, the slide, and the joins in a plan's nodes: Spark holds
    back the watermark below a join of window rows (spe.joins.rows_join) by the
    window's range (a bound: only joins of rows do)."""
    nodes = list(nodes)
    windows = [n for n in nodes if n.kind == "window"]
    joins = sum(1 for n in nodes if n.kind == "join")
    return max((w.range_s or 0.0) for w in windows), windows[0].slide_s, joins


def end_flush_s(nodes: Iterable) -> float:
    """How far after the last reading the end-of-input punctuation goes so that every
    window closes in every engine: the largest range, once more per join of window rows
    (Spark's watermark hold-back), and ten slides."""
    max_range, slide_s, joins = holdback(nodes)
    return max_range * (1 + joins) + 10 * slide_s
