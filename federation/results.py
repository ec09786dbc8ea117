"""Comparing results: the same multiset of (tau, row), floats within a tolerance."""

from __future__ import annotations

import math
from collections import Counter

import pyarrow as pa


def _norm(v, digits: int):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if v == 0:
            return 0.0
        return float(f"{v:.{digits}g}")
    return v


def canonical_rows(t: pa.Table, columns: list[str] | None = None, digits: int = 9) -> Counter:
    """Multiset of rows with floats rounded to `digits` significant digits."""
    columns = columns or t.column_names
    data = t.select(columns).to_pydict()
    return Counter(
        tuple(_norm(data[c][i], digits) for c in columns) for i in range(t.num_rows)
    )


def diff_results(got: pa.Table, want: pa.Table, digits: int = 9, rel_tol: float = 1e-6,
                 limit: int = 5) -> str | None:
    """None when equal as multisets of rows (floats within rel_tol), else a short report."""
    if sorted(got.column_names) != sorted(want.column_names):
        return f"columns differ: {got.column_names} vs {want.column_names}"
    cols = want.column_names
    a, b = canonical_rows(got, cols, digits), canonical_rows(want, cols, digits)
    if a == b:
        return None
    extra, missing = a - b, b - a
    # rows that differ only in the last float digits are matched pairwise
    still_extra = Counter()
    pool = list(missing.elements())
    for row in extra.elements():
        for i, other in enumerate(pool):
            if _close(row, other, rel_tol):
                pool.pop(i)
                break
        else:
            still_extra[row] += 1
    if not still_extra and not pool:
        return None
    return (f"{got.num_rows} rows vs {want.num_rows} expected; {sum(still_extra.values())} "
            f"unexpected, e.g. {list(still_extra)[:limit]}; {len(pool)} missing, e.g. "
            f"{pool[:limit]}")


def _close(a: tuple, b: tuple, rel_tol: float) -> bool:
    for x, y in zip(a, b):
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=rel_tol, abs_tol=1e-6):
                return False
        elif x != y:
            return False
    return True
