"""Window frames at each instant: aggregates over the rows of a frame (SQL's `SUM(x) OVER
(PARTITION BY k ORDER BY o ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)`, a running sum),
the value of a frame's first, last or n-th row (FIRST_VALUE, LAST_VALUE, NTH_VALUE), and
the distribution functions (NTILE, PERCENT_RANK, CUME_DIST).

At instant tau a row's partition is the relation's rows at tau equal to it in the
partition columns (NULL equal to NULL), in the total order ROW_NUMBER gives them (the ORDER
BY, ties broken by the other columns, NULLs last: rank.py). A frame is the rows of the
partition between two bounds (`Frame`):

- ROWS: positions relative to the row's, `n` rows before (PRECEDING) or after (FOLLOWING),
  the row itself (CURRENT ROW) or the partition's end (UNBOUNDED);
- RANGE: the row's peers (rows equal to it in the ORDER BY) and every row before them
  (UNBOUNDED PRECEDING AND CURRENT ROW, SQL's default frame under an ORDER BY), or after
  them, or the peers alone; or by value, over one ORDER BY column (SQL's rule): `n
  PRECEDING` starts at the rows whose value is the row's less n (more, in a descending
  order), `n FOLLOWING` likewise; n a number for a number column, a time span
  (`INTERVAL '10' SECOND`, a timedelta) for a timestamp. A row whose value is NULL has
  its peers, the NULL rows, at a bound by value (DuckDB's and PostgreSQL's rule); a
  NULL row is never within n of a value;
- GROUPS: as ROWS, counting groups of peers (`1 PRECEDING`: the peers before the row's).

Built of plan nodes every engine runs: the rows numbered (and ranked, for RANGE), each joined
with the rows of its partition (NULL-safe), those in its frame kept, grouped back by the row
(its number tells equal rows apart); a frame that may hold no row (`ROWS BETWEEN 3 PRECEDING
AND 1 PRECEDING`) keeps the row itself, its aggregates fed NULL for it (SUM NULL, COUNT 0).
The join is quadratic in a partition's rows: frames suit partitions of hundreds of rows at
an instant, not a whole window of a fast stream.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp

from federation.conventions import NUMERIC_TYPES, us
from federation.errors import QueryValidationError
from federation.expressions import AggCall, count, max_, min_
from federation.logical.names import name_maker, null_safe_pairs

#: a frame's kinds: by positions, by peers (rows equal in the ORDER BY), by peer groups
KINDS = ("rows", "range", "groups")
#: EXCLUDE's choices (Frame.exclude)
EXCLUDES = ("no others", "current row", "group", "ties")


@dataclass(frozen=True)
class Frame:
    """The rows of a row's frame: `lo` and `hi` relative to the row (None: the partition's
    start, resp. end; -n: n PRECEDING; 0: CURRENT ROW; n: n FOLLOWING); of RANGE and
    GROUPS relative to its peers; a RANGE's n a value's distance (a number, or a timedelta
    for a timestamp order). SQL's default under an ORDER BY is `Frame("range", None, 0)`."""

    kind: str = "range"
    lo: int | float | dt.timedelta | None = None
    hi: int | float | dt.timedelta | None = 0
    #: the rows left out of every frame: none, the row, its peers (rows equal to it in the
    #: ORDER BY) with it, or its peers but it (SQL's EXCLUDE NO OTHERS, CURRENT ROW, GROUP,
    #: TIES)
    exclude: str = "no others"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise QueryValidationError("over", "frame", f"{self.kind!r}: one of "
                                       f"{', '.join(KINDS)}")
        if self.exclude not in EXCLUDES:
            raise QueryValidationError("over", "frame", f"exclude {self.exclude!r}: one of "
                                       f"{', '.join(EXCLUDES)}")
        for b in (self.lo, self.hi):
            whole = isinstance(b, int) and not isinstance(b, bool)
            value = whole or isinstance(b, dt.timedelta) or (
                isinstance(b, float) and math.isfinite(b))
            if b is not None and not (whole or (self.kind == "range" and value)):
                raise QueryValidationError(
                    "over", "frame", f"bound {b!r}: a whole number (-n PRECEDING, 0 CURRENT "
                    "ROW, n FOLLOWING) or None" + (
                        "; a RANGE's also a number or a timedelta (a value's distance)"
                        if self.kind == "range" else ""))
        kinds = {type(b) is dt.timedelta for b in (self.lo, self.hi) if _sign(b)}
        if len(kinds) > 1:
            raise QueryValidationError("over", "frame", "one bound a time span, the other a "
                                       "number: both bound the same ORDER BY value")
        if self.lo is not None and self.hi is not None and _seconds(self.lo) > _seconds(
                self.hi):
            raise QueryValidationError("over", "frame", f"it starts after it ends ({self.sql()})")

    @property
    def by_value(self) -> bool:
        """A RANGE with a bound `n PRECEDING` or `n FOLLOWING` (values within n)."""
        return self.kind == "range" and any(_sign(b) for b in (self.lo, self.hi))

    @property
    def on_timestamps(self) -> bool:
        return any(isinstance(b, dt.timedelta) for b in (self.lo, self.hi))

    @classmethod
    def of(cls, frame) -> Frame:
        """A Frame, or ("rows" | "range", lo, hi)."""
        return frame if isinstance(frame, Frame) else cls(*frame)

    @property
    def holds_the_row(self) -> bool:
        """Every row is in its own frame (so no frame is empty)."""
        return (self.lo is None or _sign(self.lo) <= 0) and \
            (self.hi is None or _sign(self.hi) >= 0) and \
            self.exclude not in ("current row", "group")

    def sql(self) -> str:
        def bound(b, side: str) -> str:
            if b is None:
                return f"UNBOUNDED {side}"
            if not _sign(b):
                return "CURRENT ROW"
            n = f"INTERVAL '{abs(_seconds(b)):g}' SECOND" if isinstance(b, dt.timedelta) \
                else f"{abs(b)}"
            return f"{n} {'PRECEDING' if _sign(b) < 0 else 'FOLLOWING'}"
        return (f"{self.kind.upper()} BETWEEN {bound(self.lo, 'PRECEDING')} AND "
                f"{bound(self.hi, 'FOLLOWING')}" + (
                    f" EXCLUDE {self.exclude.upper()}" if self.exclude != "no others" else ""))


def _seconds(b) -> float:
    return b.total_seconds() if isinstance(b, dt.timedelta) else b


def _sign(b) -> int:
    """-1 PRECEDING, 0 CURRENT ROW (or unbounded: None), 1 FOLLOWING."""
    v = 0 if b is None else _seconds(b)
    return (v > 0) - (v < 0)


def framed(rel, order_by, partition_by: Sequence[str], frame, aggs: dict[str, AggCall]):
    """Each row of `rel` (a Relation) with the aggregates `aggs` over its frame (module
    doc)."""

    frame = Frame.of(frame)
    by = list(partition_by)
    cols = list(rel.node.schema)
    fresh = name_maker([*cols, *aggs])
    rn, rk, lrn, lpos, rrn, rpos, lpk, rpk = (fresh(f"_frame_{n}") for n in (
        "rn", "rk", "lrn", "lpos", "rrn", "rpos", "lpk", "rpk"))
    rows = rel.row_number(order_by, by, rn)
    ranked = frame.kind != "rows" and (frame.lo, frame.hi) != (None, None)  # peers share it
    peers = frame.exclude in ("group", "ties")  # the row's peers told apart from the others
    if ranked or peers:
        rows = rows.row_number(order_by, by, rk, "dense_rank")
    pos = rk if ranked else rn
    hidden = {c: fresh("_frame_c") for c in cols}
    left, right, pairs = null_safe_pairs(rel.node.schema, by, fresh)
    values = _by_value(rel, order_by, frame, fresh) if frame.by_value else None
    lv, rv = ({values.left: exp.column(values.column)},
              {values.right: exp.column(values.column)}) if values else ({}, {})
    if peers and not ranked:  # the peer ranks beside the positions
        lv, rv = {**lv, lpk: exp.column(rk)}, {**rv, rpk: exp.column(rk)}
    elif peers:
        lpk, rpk = lpos, rpos
    lhs = rows.project(**{h: exp.column(c) for c, h in hidden.items()},
                       **{lrn: exp.column(rn), lpos: exp.column(pos)}, **lv, **left)
    rhs = rows.project(*cols, **{rrn: exp.column(rn), rpos: exp.column(pos)}, **rv, **right)
    inside = _excluded(frame.exclude, lrn, rrn, lpk, rpk)
    for b, start in ((frame.lo, True), (frame.hi, False)):
        if b is None:
            continue
        cmp = exp.GTE if start else exp.LTE
        if values is not None and _sign(b):  # by value; a NULL value's peers by position
            inside.append(values.within(b, start, cmp(this=exp.column(rpos),
                                                      expression=exp.column(lpos))))
        else:
            inside.append(cmp(this=exp.column(rpos), expression=exp.column(lpos) + b))
    cond = exp.and_(*inside) if inside else None
    joined = lhs.join(rhs, on=pairs)
    calls = dict(aggs)
    if cond is not None and frame.holds_the_row:
        joined = joined.filter(cond)
    elif cond is not None:  # the row itself too, so that it stays; its aggregates skip it
        joined = joined.filter(exp.or_(cond.copy(), exp.column(rrn).eq(exp.column(lrn))))
        calls = {n: replace(c, arg=exp.Case(ifs=[exp.If(
            this=cond.copy(), true=exp.Literal.number(1) if c.arg is None else c.arg.copy())]))
            for n, c in aggs.items()}
    out = joined.aggregate(by=[*hidden.values(), lrn], **calls)
    return out.project(**{c: exp.column(h) for c, h in hidden.items()},
                       **{n: exp.column(n) for n in aggs})


def _excluded(exclude: str, lrn: str, rrn: str, lpk: str, rpk: str) -> list[exp.Expression]:
    """The condition that keeps a partition row out of the EXCLUDE's rows (none for NO
    OTHERS): not the row itself (CURRENT ROW), not a peer (GROUP), not a peer but the row
    itself (TIES)."""
    itself = exp.column(rrn).eq(exp.column(lrn))
    other_peer = exp.NEQ(this=exp.column(rpk), expression=exp.column(lpk))
    return {"no others": [], "current row": [exp.not_(itself)], "group": [other_peer],
            "ties": [exp.or_(other_peer, itself.copy())]}[exclude]


@dataclass(frozen=True)
class _Values:
    """A RANGE bounded by value: its ORDER BY `column` as `left` (the row's) and `right`
    (the partition row's)."""

    column: str
    descending: bool
    left: str
    right: str

    def within(self, b, start: bool, by_pos: exp.Expression) -> exp.Expression:
        """The partition row is on the frame's side of bound `b` (its start's, or its
        end's): its value at least (at most) the row's shifted by b, in the order's
        direction; for a row whose value is NULL, `by_pos` (its peers')."""
        shift = _seconds(b) * (-1 if self.descending else 1)
        if isinstance(b, dt.timedelta):
            amount = exp.Interval(this=exp.Literal.string(str(us(abs(shift)))),
                                  unit=exp.Var(this="MICROSECOND"))
        else:
            amount = exp.Literal.number(abs(b))
        op = exp.Add if shift > 0 else exp.Sub
        edge = op(this=exp.column(self.left), expression=amount)
        cmp = exp.GTE if start != self.descending else exp.LTE
        return exp.Case(ifs=[exp.If(this=exp.Is(this=exp.column(self.left), expression=exp.Null()),
                                    true=by_pos)],
                        default=cmp(this=exp.column(self.right), expression=edge))


def _by_value(rel, order_by, frame: Frame, fresh) -> _Values:
    from federation.logical.rank import order_items

    keys = order_items(order_by)
    if len(keys) != 1:
        raise QueryValidationError("over", "frame", f"{frame.sql()}: a RANGE bounded by a "
                                   f"value orders by one column ({len(keys)} here)")
    (column, descending), = keys
    t = rel.node.schema[column]
    if frame.on_timestamps != (t == "TIMESTAMP") or (t != "TIMESTAMP" and
                                                     t not in NUMERIC_TYPES):
        raise QueryValidationError(
            "over", "frame", f"{frame.sql()} over {column} ({t}): a RANGE bounded by a value "
            "orders by a number (offsets numbers) or a timestamp (offsets time spans: "
            "INTERVAL '10' SECOND, a timedelta)")
    return _Values(column, descending, fresh("_frame_lval"), fresh("_frame_rval"))


def frame_value(rel, column: str, order_by, partition_by: Sequence[str], frame, which,
                name: str):
    """Each row of `rel` with `column` of a row of its frame: `which` "first", "last", or n
    (NTH_VALUE: the n-th, NULL where the frame has fewer rows); NULL where the frame is
    empty. The frame's first and last positions (MIN and MAX of the numbers in it) pick
    the row, joined from the numbered rows on the partition and number. The n-th row of a
    frame with EXCLUDE (n > 1): the frame's rows are its positions but one block of them
    (the row; its peers, whose positions are consecutive; its peers but the row), so the
    n-th is counted past that block (`past_block`)."""

    frame = Frame.of(frame)
    by = list(partition_by)
    cols = list(rel.node.schema)
    fresh = name_maker([*cols, name])
    rn, lo, hi, at, value = (fresh(f"_frame_{n}") for n in ("n", "lo", "hi", "at", "value"))
    numbered = rel.row_number(order_by, by, rn)
    gaps = frame.exclude != "no others" and which not in ("first", "last", 1)
    whole = Frame(frame.kind, frame.lo, frame.hi) if gaps else frame
    spans = framed(numbered, order_by, by, whole, {lo: min_(rn), hi: max_(rn)})
    if which == "first":
        target = exp.column(lo)
    elif which == "last":
        target = exp.column(hi)
    elif gaps:  # the frame's rows are its positions but one block of them
        a = b = rn
        if frame.exclude != "current row":
            spans, a, b = peer_block(spans, order_by, by, fresh)
        target = past_block(lo, hi, a, b, rn, frame.exclude == "ties", int(which))
    else:
        n = exp.column(lo) + int(which) - 1
        target = exp.Case(ifs=[exp.If(this=n.copy() <= exp.column(hi), true=n)])
    left, right, pairs = null_safe_pairs(rel.node.schema, by, fresh)
    lhs = spans.project(*cols, **{at: target}, **left)
    rhs = numbered.project(**{rn: exp.column(rn), value: exp.column(column)}, **right)
    return lhs.join(rhs, on=[*pairs, (at, rn)], how="left").project(
        *cols, **{name: exp.column(value)})


def peer_block(rel, order_by, by: list[str], fresh) -> tuple:
    """`rel` with the first and last positions of each row's peers (its RANK, and RANK plus
    the peers' count less one: ROW_NUMBER numbers peers consecutively), and their names."""
    a, peers = fresh("_frame_peer"), fresh("_frame_peers")
    return (rel.row_number(order_by, by, a, "rank").over(
        peer_keys(order_by, by), **{peers: count()}), a, f"{a} + {peers} - 1")


def peer_keys(order_by, by: list[str]) -> list[str]:
    """What a row's peers share: its partition's columns and its ORDER BY columns."""
    from federation.logical.rank import order_items

    return [*by, *(c for c, _ in order_items(order_by) if c not in by)]


def past_block(lo: str, hi: str, a: str, b: str, own: str, ties: bool, n: int):
    """The position of the n-th row of a frame [lo, hi] (NULL: empty) less the block [a, b]
    of positions EXCLUDE leaves out (NULL: none), NULL past the frame's end; `ties`: the
    row's own position `own` stays (EXCLUDE TIES), between those before the block and those
    after it."""
    first, last = f"GREATEST({a}, {lo})", f"LEAST({b}, {hi})"
    t = f"{lo} + {n - 1}"
    inside = f"({own} BETWEEN {lo} AND {hi})"
    kept = f" WHEN {inside} AND {t} = {first} THEN {own}" if ties else ""
    skip = f"({last} - {first} + 1)" + (
        f" - CASE WHEN {inside} THEN 1 ELSE 0 END" if ties else "")
    pos = (f"CASE WHEN {a} IS NULL OR {first} > {last} OR {t} < {first} THEN {t}{kept} "
           f"ELSE {t} + {skip} END")
    return sql_of(f"CASE WHEN {lo} IS NOT NULL AND ({pos}) <= {hi} THEN {pos} END")


def sql_of(text: str) -> exp.Expression:
    return sqlglot.parse_one(text, read="duckdb")


def add_columns(rel, units):
    """`rel` (a Relation) with the columns each of `units` adds (functions of a Relation
    to it with columns of their own: a window function's value). One unit is applied to
    `rel`; several each to `rel` numbered (a row id: ROW_NUMBER over every column, rows
    equal in all of them interchangeable), their columns joined back on that id: applied
    one over the other, each would copy the plan below it at least twice (a self-join),
    2^k copies for k units."""

    if len(units) <= 1:
        return units[0](rel) if units else rel
    cols = list(rel.node.schema)
    fresh = name_maker(cols)
    rid = fresh("_row_id")
    numbered = rel.row_ids(rid)
    out, added = numbered, []
    for unit in units:
        branch = unit(numbered)
        new = [c for c in branch.schema if c not in numbered.schema]
        key = fresh("_row_of")
        out = out.join(branch.project(*new, **{key: exp.column(rid)}), on=[(rid, key)])
        added += new
    return out.project(*cols, *added)
