"""Aggregates at a slide instant from slice tables: sliced aggregation, the read side.

A window of range r at `$tau` combines the partial aggregates of the slices that cover
[tau - r, tau) (db.sqlgen.slices): fine slices only, or sealed coarse slices in the middle
and fine ones at both ends. Aggregations sharing a slice table (the same rows and keys)
combine in one scan of it, each over its own range.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from db.sqlgen.slices import SLICE, SliceTable, grid_floor_sql
from db.sqlgen.terms import alias, col, num, tau_us_param


def slice_scan(tab: SliceTable, ranges: Sequence[int]
                ) -> tuple[exp.Select | exp.Union, dict[int, exp.Expression | None]]:
    """The slice rows that windows of the given ranges need at `$tau`, and for each range
    the condition picking its own (None: every row).

    Fine slices only: those of [tau - r, tau). With sealed coarse slices, a window of
    range r reads coarse slices in [A_r, B) and fine ones in [lo_r, A_r) and [B, tau),
    where lo_r = tau - r, A_r is the first coarse boundary at or after lo_r and B the last
    sealed one at or before tau; rows carry `_c` (1 coarse, 0 fine)."""
    cols = [col(SLICE)] + [col(k) for k in tab.keys] + [col(p) for p in tab.partials]
    longest = max(ranges)
    s = col(SLICE)

    def ge(e: exp.Expression) -> exp.Expression:
        return exp.GTE(this=s.copy(), expression=e.copy())

    def lt(e: exp.Expression) -> exp.Expression:
        return exp.LT(this=s.copy(), expression=e.copy())

    def lo(r: int) -> exp.Expression:
        return exp.Paren(this=exp.Sub(this=tau_us_param(), expression=num(r)))

    if tab.coarse_us is None:
        q = exp.select(*cols).from_(exp.to_table(tab.name)).where(_slice_bounds(longest))
        return q, {r: None if r == longest else ge(lo(r)) for r in ranges}
    g = tab.coarse_us

    def floor_g(e: exp.Expression) -> exp.Expression:
        return exp.Paren(this=grid_floor_sql(e, g, tab.origin_us))

    def fn(name: str, *args: exp.Expression) -> exp.Expression:  # plain LEAST / GREATEST
        return exp.Anonymous(this=name, expressions=[a.copy() for a in args])

    def a(r: int) -> exp.Expression:
        return floor_g(exp.Paren(this=exp.Add(this=lo(r), expression=num(g - 1))))

    b = fn("least", floor_g(tau_us_param()), exp.Placeholder(this=f"sealed_{tab.name}"))

    def head(r: int) -> exp.Expression:
        return exp.and_(ge(lo(r)), lt(fn("least", a(r), tau_us_param())))

    def tail(r: int) -> exp.Expression:
        return exp.and_(ge(fn("greatest", a(r), b)), lt(tau_us_param()))

    one = len(set(ranges)) == 1
    marker = [] if one else [alias(num(1), "_c")]
    coarse = exp.select(*cols, *marker).from_(exp.to_table(tab.coarse)).where(
        exp.and_(ge(a(longest)), lt(b)))
    fine = exp.select(*cols, *[alias(num(0), "_c") for _ in marker]).from_(
        exp.to_table(tab.name)).where(exp.or_(*[head(r) for r in sorted(set(ranges))],
                                             tail(longest)))
    union = exp.union(coarse, fine, distinct=False)
    if one:
        return union, {r: None for r in ranges}

    def cond(r: int) -> exp.Expression:
        c = col("_c")
        return exp.or_(
            exp.and_(exp.EQ(this=c.copy(), expression=num(1)), ge(a(r))),
            exp.and_(exp.EQ(this=c.copy(), expression=num(0)),
                     exp.Paren(this=exp.or_(head(r), tail(r)))))
    return union, {r: cond(r) for r in ranges}


def _slice_bounds(range_us: int) -> exp.Expression:
    return exp.and_(
        exp.GTE(this=col(SLICE), expression=exp.Sub(this=tau_us_param(),
                                                     expression=num(range_us))),
        exp.LT(this=col(SLICE), expression=tau_us_param()))


def _combined(node, names: dict[tuple, str], cond: exp.Expression | None = None,
              prefix: str = "") -> list[exp.Expression]:
    """The aggregates of `node` from the partials of slices (those where `cond` holds)."""
    cols: list[exp.Expression] = []
    for name, call in node.aggs:
        arg = None if call.arg is None else call.arg.sql()

        def agg(cls, func: str, double: bool = False, arg=arg) -> exp.Expression:
            a = cls(this=col(names[(func, arg, double)]))
            return a if cond is None else exp.Filter(this=a, expression=exp.Where(
                this=cond.copy()))

        rtype = node.schema[name]
        if call.func == "count":
            v: exp.Expression = exp.Coalesce(this=exp.cast(agg(exp.Sum, "count"), "BIGINT"),
                                             expressions=[num(0)])
        elif call.func == "sum":
            v = agg(exp.Sum, "sum")
            if rtype != "DOUBLE":
                v = exp.cast(v, "BIGINT")
        elif call.func == "avg":
            v = exp.Div(this=exp.cast(agg(exp.Sum, "sum", True), "DOUBLE"),
                        expression=exp.Nullif(this=agg(exp.Sum, "count"), expression=num(0)))
        else:
            v = agg(exp.Min if call.func == "min" else exp.Max, call.func)
        cols.append(alias(v, prefix + name))
    return cols


def combine(node, tab: SliceTable, names: dict[tuple, str], range_us: int) -> exp.Select:
    """Aggregate `node` at `$tau` from the slices of [tau - range, tau)."""
    cols = [col(k) for k in node.keys] + _combined(node, names)
    if tab.coarse_us is None:
        q = exp.select(*cols).from_(exp.to_table(tab.name)).where(_slice_bounds(range_us))
    else:
        q = exp.select(*cols).from_(slice_scan(tab, [range_us])[0].subquery("sl"))
    return q.group_by(*[col(k) for k in node.keys]) if node.keys else q


def combine_shared(tab: SliceTable, aggs: list[tuple[str, object, dict, int]]
                    ) -> exp.Select:
    """Every aggregate (oid, node, partial names, range) reading slice table `tab`, with
    the same keys, in one scan: each over its own range (FILTER), with the count of its
    slices (`_n_<oid>`: a group is in an aggregate's result when its window holds a row)."""
    scan, conds = slice_scan(tab, [r for *_, r in aggs])
    # each window's condition once per row, as a flag column
    flags = {r: f"_w{i}" for i, r in enumerate(sorted(conds)) if conds[r] is not None}
    scan = exp.select(exp.Star(), *[alias(conds[r], f) for r, f in flags.items()]).from_(
        scan.subquery("u"))
    cols: list[exp.Expression] = [col(k) for k in tab.keys]
    for oid, node, names, r in aggs:
        cond = col(flags[r]) if r in flags else None
        n = exp.Count(this=exp.Star())
        if cond is not None:
            n = exp.Filter(this=n, expression=exp.Where(this=cond.copy()))
        cols.append(alias(n, f"_n_{oid}"))
        cols += _combined(node, names, cond, prefix=f"{oid}__")
    return (exp.select(*cols).from_(scan.subquery("sl"))
            .group_by(*[col(k) for k in tab.keys]))
