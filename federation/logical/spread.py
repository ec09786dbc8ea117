"""STDDEV_SAMP, STDDEV_POP, VAR_SAMP and VAR_POP of each group at each instant (SQL's
STDDEV and VARIANCE are the sample's), planned as two passes of operators every engine runs.

The variance of the values x_1..x_n (the non-NULL ones) is sum((x_i - mean)^2) / (n - 1) for
a sample (NULL for n < 2), / n for the population (NULL for n = 0); the standard deviation
its square root. Two passes because one is not exact: sum(x^2) - sum(x)^2 / n cancels
catastrophically where the values are large beside their spread (timestamps, counters), and
the engines' own functions do not cancel so. So the group's mean (AVG) is joined back to
its rows (NULL-safe on the group keys, as OVER's partitions), and the squared deviations
summed with the group's other aggregates, computed over the same rows. The join costs what
a non-mergeable aggregate costs: every row of the window at each instant.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from federation.errors import QueryValidationError
from federation.expressions import SPREAD_FUNCS, AggCall
from federation.logical.names import name_maker, null_safe_pairs


def spread_aggregate(rel, by: Sequence[str], aggs: dict[str, AggCall]):
    """`rel.aggregate(by, **aggs)` where some of `aggs` are SPREAD_FUNCS (module doc)."""
    by = list(by)
    cols = list(rel.node.schema)
    fresh = name_maker([*cols, *aggs])
    args: dict[str, tuple[exp.Expression, str, str]] = {}  # arg's SQL -> (arg, mean, dev)
    for n, c in aggs.items():
        if c.func not in SPREAD_FUNCS:
            continue
        if c.arg is None:
            raise QueryValidationError("aggregate", n, f"{c.func.upper()}(*): of a value")
        args.setdefault(c.arg.sql(), (c.arg, fresh("_spread_mean"), fresh("_spread_dev")))
    means = rel.aggregate(by, **{m: AggCall("avg", a.copy()) for a, m, _ in args.values()})
    names = [m for _, m, _ in args.values()]
    if by:
        left, right, pairs = null_safe_pairs(rel.node.schema, by, fresh, "_spread_")
        joined = rel.project(*cols, **left).join(means.project(*names, **right), on=pairs)
    else:
        joined = rel.join(means, on=[])
    rows = joined.project(*cols, **{d: exp.Sub(this=exp.Paren(this=a.copy()),
                                               expression=exp.column(m))
                                    for a, m, d in args.values()})
    calls, finish = {}, {}
    for n, c in aggs.items():
        if c.func not in SPREAD_FUNCS:
            calls[n] = c
            finish[n] = exp.column(n)
            continue
        _, _, d = args[c.arg.sql()]
        ss, k = fresh("_spread_ss"), fresh("_spread_n")
        calls[ss] = AggCall("sum", exp.Mul(this=exp.column(d), expression=exp.column(d)))
        calls[k] = AggCall("count", exp.column(d))
        sample, root = SPREAD_FUNCS[c.func]
        least = 2 if sample else 1
        div = exp.Sub(this=exp.column(k), expression=exp.Literal.number(1)) if sample \
            else exp.column(k)
        var = exp.Div(this=exp.column(ss), expression=exp.cast(div, "DOUBLE"))
        value = exp.func("SQRT", var) if root else var
        finish[n] = exp.Case(ifs=[exp.If(this=exp.GTE(this=exp.column(k),
                                                      expression=exp.Literal.number(least)),
                                         true=value)])
    return rows.aggregate(by, **calls).project(*by, **finish)
