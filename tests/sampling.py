"""`make test` runs a pairwise sample of the exhaustive matrix (every placement of a query,
every kill point, every batch size); the rest is marked `long` and runs in `make
test-long` (README)."""

from __future__ import annotations

import pytest

LONG = pytest.mark.long


def sampled(cases, keep) -> list:
    """`cases` for pytest.mark.parametrize, each case not in `keep` marked long."""
    keep = list(keep)
    missing = [k for k in keep if k not in cases]
    assert not missing, f"kept cases that are not cases: {missing}"
    return [c if c in keep else pytest.param(*(c if isinstance(c, tuple) else (c,)),
                                             marks=LONG)
            for c in cases]
