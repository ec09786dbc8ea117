"""Where a following run cuts a burst (an input file of more good rows than a micro-batch
may read) into spool files (federation/runtime/ingest.py, `max_file_rows`)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def burst_slices(good: pa.Table, ts_col: str, cap: int) -> list[pa.Table]:
    """`good` ordered by event time (stably) in slices of at most `cap` rows but where one
    timestamp holds more (`slice_cuts`)."""
    good = good.take(pc.sort_indices(good, [(ts_col, "ascending")]))
    cuts = [*slice_cuts(good.column(ts_col), cap), good.num_rows]
    return [good.slice(a, b - a) for a, b in pairwise(cuts)]


def slice_cuts(ts: pa.ChunkedArray, cap: int) -> list[int]:
    """Where a burst sorted by event time (`ts`) is cut into slices of at most `cap` rows:
    the start of each slice, 0 first. A cut falls only between two timestamps, so every
    reading of one timestamp is in one slice (a slice holds more than `cap` rows only where
    one timestamp does): the punctuation after a slice is then a clock no later reading
    reaches, and a session window closed at it has all its readings.

    Example:
        >>> slice_cuts(pa.chunked_array([[1, 1, 2, 2, 2, 3, 4, 4]]), 3)
        [0, 2, 5]
        >>> slice_cuts(pa.chunked_array([[5, 5, 5, 5, 6]]), 2)
        [0, 4]
    """
    t = ts.cast(pa.int64()).to_numpy() if pa.types.is_timestamp(ts.type) else ts.to_numpy()
    cuts, n = [0], len(t)
    while n - cuts[-1] > cap:
        b = cuts[-1] + cap
        start = int(np.searchsorted(t, t[b], "left"))  # the first reading of t[b]'s time
        b = start if start > cuts[-1] else int(np.searchsorted(t, t[b], "right"))
        if b >= n:
            break
        cuts.append(b)
    return cuts
