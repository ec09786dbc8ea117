"""Hidden column names of the plan's rewrites, and the NULL-safe keys of a partition."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlglot
from sqlglot import exp

from federation.conventions import NULL_STAND_IN


def name_maker(taken) -> Callable[[str], str]:
    """A function giving `base`, else `base1`, `base2`, ...: a name neither in `taken`
    nor given before (the hidden columns a rewrite adds)."""
    used = set(taken)

    def fresh(base: str) -> str:
        name, i = base, 1
        while name in used:
            name, i = f"{base}{i}", i + 1
        used.add(name)
        return name

    return fresh


def null_safe_pairs(schema, by: Sequence[str], fresh, prefix: str = "_frame_"
                    ) -> tuple[dict, dict, list]:
    """Join keys equating the partition columns `by` NULL-safely: the left side's and the
    right side's projections ({name: expression}) and the (left, right) key pairs."""
    left, right, pairs = {}, {}, []
    for i, k in enumerate(by, 1):  # numbered: a key's name may need quotes
        ln, lv, rn, rv = (fresh(f"{prefix}{n}{i}") for n in ("null", "key", "rnull", "rkey"))
        left[ln], left[lv] = _null_safe(k, schema[k])
        right[rn], right[rv] = _null_safe(k, schema[k])
        pairs += [(ln, rn), (lv, rv)]
    return left, right, pairs


def _null_safe(k: str, t: str) -> tuple[exp.Expression, exp.Expression]:
    """`k IS NULL` and `COALESCE(k, <stand-in>)`: NULL equal to NULL, unequal to the rest."""
    return exp.column(k).is_(exp.null()), exp.func(
        "COALESCE", exp.column(k), sqlglot.parse_one(NULL_STAND_IN[t]))
