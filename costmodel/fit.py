"""Fitting a cost profile from measured figures (the runs live in benchmarks/calibrate.py).

Example:
    >>> import numpy as np
    >>> x = nnls_fit(np.array([[1, 1.0], [1, 2.0], [1, 3.0]]), np.array([3.0, 5.0, 7.0]))
    >>> [round(float(v), 6) for v in x]
    [1.0, 2.0]
"""

from __future__ import annotations

import numpy as np


def nnls_fit(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (active set by repeated refits):
    a unit cost cannot be negative, however noisy the timings."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    active = np.ones(a.shape[1], dtype=bool)
    x = np.zeros(a.shape[1])
    for _ in range(a.shape[1]):
        sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        x[:] = 0
        x[active] = sol
        if (sol >= 0).all():
            return x
        idx = np.flatnonzero(active)[np.argmin(sol)]
        active[idx] = False
        if not active.any():
            break
    return np.clip(x, 0, None)


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Intercept and slope of y = a + b x, both clipped at 0."""
    x = np.column_stack([np.ones(len(xs)), np.asarray(xs, dtype=float)])
    a, b = nnls_fit(x, np.asarray(ys, dtype=float))
    return float(a), float(b)
