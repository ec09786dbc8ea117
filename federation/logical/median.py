"""MEDIAN(x) and the percentiles of each group at each instant, planned as operators every
engine runs.

Of a group's n non-NULL values of x (a number) in their order (ORDER BY x, or DESC),
PERCENTILE_CONT(p) is the value at position h = p (n - 1) (from 0), interpolated between
the values at floor(h) and ceil(h) (DOUBLE); MEDIAN is PERCENTILE_CONT(0.5), the middle
value or the mean of the two middle ones; PERCENTILE_DISC(p) is the first value whose
share of the values up to it is at least p: the one at position ceil(p n) (from 1), the
first for p = 0 (of x's type). NULL for no value. So each group's values are numbered in
their order (ROW_NUMBER, partitioned by the group keys) and counted (an aggregate joined
back, OVER), the one or two rows at those positions kept, and their value (their least
and greatest, and the fraction between) aggregated per group; the groups' other
aggregates are computed beside it and the percentiles left-joined to them (NULL-safe on
the keys: a group without a value gets NULL). p = a / b is read exactly as written (0.28
is 7/25), so the positions are integer comparisons (`rn * b >= a * n`) that no engine's
floating point rounds differently. Sorting a group costs what a window Top-N costs: every
row of the window at each instant.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from federation.conventions import NUMERIC_TYPES
from federation.errors import QueryValidationError
from federation.expressions import ORDERED_FUNCS, AggCall, count, infer_type, max_, min_
from federation.logical.names import name_maker, null_safe_pairs


def median_aggregate(rel, by: Sequence[str], aggs: dict[str, AggCall]):
    """`rel.aggregate(by, **aggs)` where some of `aggs` are MEDIAN or percentiles
    (ORDERED_FUNCS; module doc)."""
    by = list(by)
    cols = list(rel.node.schema)
    fresh = name_maker([*cols, *aggs])
    plain = {n: c for n, c in aggs.items() if c.func not in ORDERED_FUNCS}
    hidden = None
    if not plain:  # the groups, to join the percentiles to
        hidden = fresh("_median_rows")
        plain = {hidden: count()}
    out = rel.aggregate(by, **plain)
    done: dict[tuple, str] = {}  # (kind, argument's SQL, fraction, order) -> its column
    keep = {}
    for n, c in aggs.items():
        if c.func not in ORDERED_FUNCS:
            keep[n] = exp.column(n)
            continue
        key = (c.func == "percentile_disc", c.arg.sql(), c.fraction, c.descending)
        if key not in done:
            t = infer_type(c.arg, rel.node.schema)
            if t not in NUMERIC_TYPES:
                raise QueryValidationError("aggregate", n, f"{c.func.upper()}("
                                           f"{c.arg.sql()}) of {t}: of a number")
            m = done[key] = fresh("_median")
            out = _joined(out, _at(rel, by, c, m, fresh), by, m, fresh)
        keep[n] = exp.column(done[key])
    return out.project(*by, **keep)


def _at(rel, by: list[str], call: AggCall, name: str, fresh):
    """Each group's percentile `call` as the column `name` (groups without a value absent,
    but for the whole instant: one row, NULL)."""
    v, rn, n, lo, hi, first = (fresh(f"_median_{x}") for x in ("v", "rn", "n", "lo", "hi",
                                                                 "first"))
    a, b = call.fraction
    vals = rel.project(*by, **{v: call.arg.copy()}).filter(exp.Not(this=exp.column(v).is_(
        exp.null())))
    ranked = vals.row_number([(v, call.descending)], by, rn).over(by, **{n: count()})
    if call.func == "percentile_disc":  # the least rn with rn * b >= a * n, at least 1
        kept = ranked.filter(f"({rn} * {b} >= {a} * {n} AND ({rn} - 1) * {b} < {a} * {n}) "
                             f"OR ({a} = 0 AND {rn} = 1)")
        return kept.project(*by, **{name: exp.column(v)})
    # the rows at floor(h) and ceil(h), h = a (n - 1) / b: (rn - 1) b within b of a (n - 1)
    kept = ranked.filter(f"({rn} - 1) * {b} <= {a} * ({n} - 1) AND "
                         f"({rn} - 1) * {b} > {a} * ({n} - 1) - {b}"
                         f" OR ({rn} - 2) * {b} < {a} * ({n} - 1) AND "
                         f"({rn} - 1) * {b} >= {a} * ({n} - 1)")
    low, high = (max_, min_) if call.descending else (min_, max_)
    ends = kept.aggregate(by, **{lo: low(v), hi: high(v), first: min_(rn), n: max_(n)})
    d = f"CAST({lo} AS DOUBLE)"
    value = sqlglot.parse_one(
        f"{d} + (CAST({hi} AS DOUBLE) - {d}) * (CAST({a} * ({n} - 1) - ({first} - 1) * {b} "
        f"AS DOUBLE) / {b})", read="duckdb")
    return ends.project(*by, **{name: value})


def _joined(groups, medians, by: list[str], name: str, fresh):
    """`groups` with the column `name` of `medians`, NULL-safe on `by` (NULL where a group
    has none)."""
    if not by:
        return groups.join(medians, on=[])
    left, right, pairs = null_safe_pairs(groups.node.schema, by, fresh, "_median_")
    cols = list(groups.node.schema)
    return groups.project(*cols, **left).join(
        medians.project(name, **right), on=pairs, how="left").project(*cols, name)
