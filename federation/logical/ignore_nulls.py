"""IGNORE NULLS at each instant: `LAG(x, n, d) IGNORE NULLS` (LEAD) is `x` of the n-th row
before (after) the row in its partition whose `x` is not NULL, `d` where there is none;
`FIRST_VALUE`, `LAST_VALUE` and `NTH_VALUE(x, n)` with IGNORE NULLS are `x` of the first,
last or n-th row of the row's frame whose `x` is not NULL (SQL's, DuckDB's).

The rows whose `x` is not NULL are numbered first, in the partition's order (ROW_NUMBER by
`x IS NULL`, then the ORDER BY: frames.py's total order), 1 to k. A frame's rows with a
value are then the numbers between the least and the greatest number in it (MIN and MAX
over the frame, frames.framed), but for a block EXCLUDE leaves out (its rows with a value:
the row's number, or the least and greatest of its peers'); LAG's is the count of rows
with a value before the row, less n - 1 (LEAD: up to the row, plus n). That count is the
row's number less one for a row with a value, and for a row without one its position
among all rows less its position among the rows without (two more ROW_NUMBERs: no frame,
whose pairs of rows would be quadratic in a partition's rows). The value is joined from
the numbered rows on the partition and that number.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from federation.expressions import max_, min_
from federation.logical.frames import Frame, framed, past_block, peer_keys, sql_of
from federation.logical.names import name_maker, null_safe_pairs
from federation.logical.rank import order_items


def ignoring_nulls(rel, column: str, order_by, partition_by: Sequence[str], which,
                   name: str, frame: Frame | None = None, default=None):
    """Each row of `rel` (a Relation) with `column` of a row whose `column` is not NULL
    (module doc): `which` "first", "last" or n (of the row's `frame`, SQL's default when
    None), or ("lag", n) ("lead", n) with `default` where there is no such row."""
    by = list(partition_by)
    cols = list(rel.node.schema)
    fresh = name_maker([*cols, name])
    null, nnr, at, hit, value = (fresh(f"_nulls_{n}") for n in (
        "null", "nnr", "at", "hit", "value"))
    flagged = rel.project(*cols, **{null: exp.Case(ifs=[exp.If(
        this=exp.column(column).is_(exp.null()), true=exp.Literal.number(1))],
        default=exp.Literal.number(0))})
    numbered = flagged.row_number([(null, False), *order_items(order_by)], by, nnr)
    valued = f"{null} = 0"  # the rows with a value
    if isinstance(which, tuple):  # LAG, LEAD: the count of rows with a value before
        rn, same = fresh("_nulls_rn"), fresh("_nulls_same")
        rows = numbered.row_number(order_items(order_by), by, rn).row_number(
            order_items(order_by), [*by, null], same)
        before = f"(CASE WHEN {null} = 0 THEN {nnr} - 1 ELSE {rn} - {same} END)"
        fn, n = which
        target = sql_of(f"{before} - {n - 1}" if fn == "lag" else
                        f"{before} + 1 - {null} + {n}")
    else:
        frame = Frame.of(frame or Frame())
        lo, hi = fresh("_nulls_lo"), fresh("_nulls_hi")
        gaps = frame.exclude != "no others" and which not in ("first", "last", 1)
        whole = Frame(frame.kind, frame.lo, frame.hi) if gaps else frame
        rows = framed(numbered, order_by, by, whole, {lo: min_(nnr, where=valued),
                                                      hi: max_(nnr, where=valued)})
        if which == "first":
            target = exp.column(lo)
        elif which == "last":
            target = exp.column(hi)
        elif not gaps:
            t = f"{lo} + {int(which) - 1}"
            target = sql_of(f"CASE WHEN {t} <= {hi} THEN {t} END")
        else:  # the left-out block's rows with a value: the row's, or its peers'
            own = f"(CASE WHEN {null} = 0 THEN {nnr} END)"
            a = b = own
            if frame.exclude != "current row":
                a, b = fresh("_nulls_a"), fresh("_nulls_b")
                rows = rows.over(peer_keys(order_by, by), **{a: min_(nnr, where=valued),
                                                              b: max_(nnr, where=valued)})
            target = past_block(lo, hi, a, b, own, frame.exclude == "ties", int(which))
    left, right, pairs = null_safe_pairs(rel.node.schema, by, fresh)
    lhs = rows.project(*cols, **{at: target}, **left)
    rhs = numbered.filter(f"{null} = 0").project(
        **{nnr: exp.column(nnr), hit: exp.true(), value: exp.column(column)}, **right)
    out = lhs.join(rhs, on=[*pairs, (at, nnr)], how="left")
    if default is None:
        return out.project(*cols, **{name: exp.column(value)})
    d = exp.cast(sqlglot.parse_one(default) if isinstance(default, str) else default,
                 rel.node.schema[column])
    return out.project(*cols, **{name: exp.case().when(
        exp.column(hit).is_(exp.null()), d).else_(exp.column(value))})
