"""Packed window rows: the write side (a slice table of packs) and the read side (the count).

A DB-op count of the shape federation/packing.py names does not keep its window's rows: the
MIG folds every micro-batch's rows into packs, one row per slice of width gcd(range, slide)
and join key with `_pk_n` (the rows), `_pk_lo` / `_pk_hi` (the least and greatest value of
the compared column) and `_pk_v` (its values), NULLs left out. The packs are a slice table
(db.sqlgen.slices.SliceTable, without coarse slices): the store folds, expires and moves
them as it does partial aggregates. At an instant the packs of [tau - range, tau) join the
other side (so the join pairs packs, not rows) and each pair counts

    CASE WHEN lo passes THEN n WHEN hi fails THEN 0 ELSE len(list_filter(v, x -> x op E)) END

summed per group, which keeps a group where its count is above 0 (a grouped COUNT over the
rows that pass has no row for a group where none does); a count without keys is one row.
A pack's rows pass or fail together where its least or greatest value decides, so only a
pack that straddles the bound is read value by value.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sqlglot import exp

from db.sqlgen.combine import slice_scan
from db.sqlgen.slices import BATCH, SLICE, SliceTable, fold_by_slice, rows_key
from db.sqlgen.terms import alias, col, num, quote
from db.sqlgen.tighten import pushdown, read_columns
from federation.conventions import TS, us

if TYPE_CHECKING:
    from federation.logical import NumberedPlan
    from federation.packing import PackedCount

N, LO, HI, VALUES = "_pk_n", "_pk_lo", "_pk_hi", "_pk_v"
_X = "_pk_x"  # the lambda's variable


def packed_table(plan: NumberedPlan, pc: PackedCount, name: str, table: str) -> SliceTable:
    """The slice table of packs of `pc`'s window rows, read from input table `table`."""
    win = plan.nodes[pc.input].row_window()
    width = math.gcd(us(win.range_s), us(win.slide_s))
    rows_node = plan.nodes[pc.chain[-1]]
    c = col(pc.column)
    fold = fold_by_slice(plan, pc.chain, width, pc.keys, [
        alias(exp.Count(this=exp.Star()), N), alias(exp.Min(this=c), LO),
        alias(exp.Max(this=c.copy()), HI),
        alias(exp.Anonymous(this="list", expressions=[c.copy()]), VALUES)],
        where=exp.not_(c.copy().is_(exp.null())))
    types = {TS: "TIMESTAMP", **dict(plan.nodes[pc.input].schema)}
    fold = pushdown(fold, {BATCH: types})
    read = read_columns(fold, BATCH)
    t = rows_node.schema[pc.column]
    columns = {SLICE: "BIGINT", **{k: rows_node.schema[k] for k in pc.keys},
               N: "BIGINT", LO: t, HI: t, VALUES: f"{t}[]"}
    meaning = ("packed", rows_key(rows_node), pc.keys, pc.column, width)
    return SliceTable(name, table, pc.keys, width, us(win.range_s), (N, LO, HI, VALUES),
                      fold, {c: t for c, t in types.items() if c.lower() in read},
                      None, None, meaning, columns, us(win.offset_s))


def packed_sql(plan: NumberedPlan, pc: PackedCount, tab: SliceTable, other: str
               ) -> exp.Select:
    """The count at `$tau` from the packs of [tau - range, tau) joined with the other
    side's rows (CTE `other`), under the conjuncts constant per pair (module doc)."""
    j = plan.nodes[pc.join]
    packs = slice_scan(tab, [us(plan.nodes[pc.input].row_window().range_s)])[0]
    kept = [N, LO, HI, VALUES]
    if pc.side == 0:  # the join's columns as operators._join names them, the packs'
        left, right = packs.subquery("l"), exp.to_table(other).as_("r")
        cols = [col(k, "l") for k in pc.keys]
        cols += [col(c, "r") for c in j.right.schema if c not in {r for _, r in j.keys}]
        cols += [col(c, "l") for c in kept]
    else:
        left, right = exp.to_table(other).as_("l"), packs.subquery("r")
        cols = [col(c, "l") for c in j.left.schema] + [col(c, "r") for c in kept]
    cond = exp.and_(*[exp.EQ(this=col(lk, "l"), expression=col(rk, "r"))
                      for lk, rk in j.keys])
    pairs = exp.select(*cols).from_(left).join(right, on=cond)
    bound = quote(pc.bound)
    x = exp.to_identifier(_X)
    passes = exp.Anonymous(this="len", expressions=[exp.ArrayFilter(
        this=col(VALUES), expression=exp.Lambda(
            this=pc.op(this=x, expression=bound.copy()), expressions=[x.copy()]))])
    lo, hi = (LO, HI) if pc.op in (exp.GT, exp.GTE) else (HI, LO)
    every = pc.op(this=col(lo), expression=bound.copy())  # the pack's weakest value passes
    none = exp.not_(pc.op(this=col(hi), expression=bound.copy()))  # its strongest fails
    n = exp.Case(ifs=[exp.If(this=every, true=col(N)), exp.If(this=none, true=num(0))],
                 default=passes)
    total = exp.Sum(this=n)
    node = plan.nodes[pc.agg]
    value = exp.Coalesce(this=exp.cast(total, "BIGINT"), expressions=[num(0)])
    q = exp.select(*[col(k) for k in node.keys],
                   *[alias(value.copy(), name) for name, _ in node.aggs]
                   ).from_(pairs.subquery("p"))
    for r in pc.rest:
        q = q.where(quote(r))
    if not node.keys:  # a global count: one row, 0 where nothing passes
        return q
    return q.group_by(*[col(k) for k in node.keys]).having(
        exp.GT(this=total.copy(), expression=num(0)))
