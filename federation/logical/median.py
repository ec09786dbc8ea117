"""MEDIAN(x) of each group at each instant, planned as operators every engine runs.

The median of a group's non-NULL values of x (a number) is the middle one in their order,
or, for an even count, the mean of the two middle ones (DOUBLE; NULL for no value). So each
group's values are numbered in their order (ROW_NUMBER, partitioned by the group keys) and
counted (an aggregate joined back, OVER), the one or two middle rows kept (`2 rn` between
the count and the count plus two), and their least and greatest averaged per group; the
groups' other aggregates are computed beside it and the medians left-joined to them
(NULL-safe on the keys: a group without a value gets NULL). Sorting a group costs what a
window Top-N costs: every row of the window at each instant.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from federation.conventions import NUMERIC_TYPES
from federation.errors import QueryValidationError
from federation.expressions import AggCall, count, infer_type, max_, min_
from federation.logical.names import name_maker, null_safe_pairs


def median_aggregate(rel, by: Sequence[str], aggs: dict[str, AggCall]):
    """`rel.aggregate(by, **aggs)` where some of `aggs` are MEDIAN (module doc)."""
    by = list(by)
    cols = list(rel.node.schema)
    fresh = name_maker([*cols, *aggs])
    plain = {n: c for n, c in aggs.items() if c.func != "median"}
    hidden = None
    if not plain:  # the groups, to join the medians to
        hidden = fresh("_median_rows")
        plain = {hidden: count()}
    out = rel.aggregate(by, **plain)
    medians: dict[str, str] = {}  # the argument's SQL -> its median's column
    for n, c in aggs.items():
        if c.func != "median" or c.arg.sql() in medians:
            continue
        t = infer_type(c.arg, rel.node.schema)
        if t not in NUMERIC_TYPES:
            raise QueryValidationError("aggregate", n, f"MEDIAN({c.arg.sql()}) of {t}: of a "
                                       "number")
        m = medians[c.arg.sql()] = fresh("_median")
        out = _joined(out, _middle(rel, by, c.arg, m, fresh), by, m, fresh)
    keep = {n: exp.column(medians[c.arg.sql()] if c.func == "median" else n)
            for n, c in aggs.items()}
    return out.project(*by, **keep)


def _middle(rel, by: list[str], arg: exp.Expression, name: str, fresh):
    """Each group's median of `arg` as the column `name` (groups without a value absent,
    but for the whole instant: one row, NULL)."""
    v, rn, n, lo, hi = (fresh(f"_median_{x}") for x in ("v", "rn", "n", "lo", "hi"))
    vals = rel.project(*by, **{v: arg.copy()}).filter(exp.Not(this=exp.column(v).is_(
        exp.null())))
    ranked = vals.row_number([(v, False)], by, rn).over(by, **{n: count()})
    mid = ranked.filter(f"{rn} * 2 >= {n} AND {rn} * 2 <= {n} + 2")
    ends = mid.aggregate(by, **{lo: min_(v), hi: max_(v)})
    value = sqlglot.parse_one(f"CAST({lo} AS DOUBLE) + (CAST({hi} AS DOUBLE) - CAST({lo} AS "
                              f"DOUBLE)) / 2", read="duckdb")
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
