"""Joins in Spark beside the plain one (translate.py): rows with a relation, outer joins.

`rows_join`: window rows against a relation as a time-interval join. `cogroup_join`: an
outer join of two instants' relations, a cogroup rather than Spark's outer join.

Spark's outer stream-stream join emits a row without a match only once the watermark has
passed it, a micro-batch after the matched ones, which the aggregates above it (waiting
for the same watermark) would have closed by then. Here both sides' rows, each packed as
an array of structs (a row-level side is already collected per (window, keys) by
translate.py), are unioned and collected once more per (instant, keys), a plain
aggregate under the watermark like every other; each group then yields the product of
its two sides' rows, a side that is empty giving one row of NULLs where the join keeps
the other side (`explode_outer`). A NULL key matches nothing: such rows are grouped per
side (`_nk`), so they never meet the other side's. The key columns are the group's keys:
the value of whichever side a row has (SQL's USING column).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from federation.conventions import TS, WT, us
from spe.aggregates import quoted_col as _c


def _side(df: DataFrame, keys: list[str], packed: str | None, cols: list[str], tag: int,
          mine: str) -> DataFrame:
    """One side as (WT, _k0.., _nk, its rows as an array of structs in column `mine`)."""
    rows = _c(packed) if packed else F.array(F.struct(*[_c(c) for c in cols]))
    null_key = F.lit(False)
    for k in keys:
        null_key = null_key | _c(k).isNull()
    return df.select(_c(WT), *[_c(k).alias(f"_k{i}") for i, k in enumerate(keys)],
                     F.when(null_key, F.lit(tag)).otherwise(F.lit(-1)).alias("_nk"),
                     rows.alias(mine))


def cogroup_join(keeps: tuple[bool, bool], left: DataFrame, right: DataFrame,
                 lkeys: list[str], rkeys: list[str], lcols: list[str], rcols: list[str],
                 lpacked: str | None, rpacked: str | None, out: list[str]) -> DataFrame:
    """`left` outer-joined with `right` on the keys at each instant, keeping every row of
    the sides `keeps` says (the plan's `Join.keeps`: left, right). `lcols`/`rcols`: each
    side's non-key columns (in its packed structs, if `lpacked`/`rpacked` names them);
    `out`: the output's columns (the left keys' names)."""
    ls = _side(left, lkeys, lpacked, lcols, 0, "_l")
    rs = _side(right, rkeys, rpacked, rcols, 1, "_r")
    ls = ls.withColumn("_r", F.lit(None).cast(rs.schema["_r"].dataType))
    rs = rs.withColumn("_l", F.lit(None).cast(ls.schema["_l"].dataType)).select(*ls.columns)
    keys = [f"_k{i}" for i in range(len(lkeys))]
    g = (ls.unionByName(rs).groupBy(_c(WT), *map(_c, keys), _c("_nk"))
         .agg(F.flatten(F.collect_list("_l")).alias("_l"),
              F.flatten(F.collect_list("_r")).alias("_r")))
    keep_l, keep_r = keeps
    g = g.withColumn("_lrow", (F.explode_outer if keep_r else F.explode)("_l"))
    g = g.withColumn("_rrow", (F.explode_outer if keep_l else F.explode)("_r"))
    key_of = {k: f"_k{i}" for i, k in enumerate(lkeys)}
    cols = [_c(WT)]
    for c in out:
        if c in key_of:
            cols.append(_c(key_of[c]).alias(c))
        elif c in lcols:
            cols.append(F.col(f"_lrow.`{c}`").alias(c))
        else:
            cols.append(F.col(f"_rrow.`{c}`").alias(c))
    return g.select(*cols)


def interval_rows(node, left, right, mode: str = "interval"):
    """The window whose rows Spark joins with a relation by `rows_join`, an interval join,
    at join `node` of `left` and `right` (SpeStreams as the join reads them: a session's
    readings are the relation of its closed sessions); None: another join. Its watermark then holds
    every stateful operator above back by the rows' range (runtime/stages.py waits that
    long). Not for a static side (a table), keys none, an outer join, or rows of a window
    read less often than the query's instants (held: `_windowed`'s filter instead).
    `mode`: FEDQ_SPE_ROWS_JOIN (collect: never)."""
    from spe.sessions import reads_closed

    lr, rr = (s.row_level and not reads_closed(node, s) for s in (left, right))
    if mode != "interval" or lr == rr or left.static or right.static or not node.keys or \
            node.how != "inner":
        return None
    w = (left if lr else right).window
    return None if w.every_s else w


def rows_join(node, left, right, lkeys: list[str], rkeys: list[str], lcols: list[str],
              rcols: list[str]) -> DataFrame:
    """Window rows joined with a relation (CQ1/CQ2: rows against their window's own
    aggregate) as Spark's time-interval stream-stream join: a row at `_ts` matches the
    relation's row of every instant tau with tau - range <= _ts < tau, i.e.
    `_wt - range < _ts <= _wt`. Each row is kept once in the join's state (until the
    watermark passes `_ts + range`) instead of once per window holding it; relation rows
    at instants that are not instants of the rows' window are left out."""
    w = (left if left.row_level else right).window
    if w is None or not w.is_time_based:
        raise NotImplementedError(
            "tuple-based windows run in the DB only for now; place their operators in db")
    r_us, sl_us = us(w.range_s), us(w.slide_s)
    ltag = TS if left.row_level else WT
    rtag = TS if right.row_level else WT
    lcol = [c for c in lcols if c not in set(lkeys)]
    ldf = left.df.select(_c(ltag), *[_c(k) for k in lkeys], *[_c(c) for c in lcol])
    rdf = right.df.select(_c(rtag).alias(f"_r{rtag}"),
                          *[_c(k).alias(f"_rk{i}") for i, k in enumerate(rkeys)],
                          *[_c(c) for c in rcols])
    def on_instant(col: str) -> Column:  # the relation's rows at the window's instants
        return F.pmod(F.unix_micros(_c(col)) + 1 - us(w.offset_s), F.lit(sl_us)) == 0

    if left.row_level:
        rdf = rdf.filter(on_instant(f"_r{WT}"))
    else:
        ldf = ldf.filter(on_instant(WT))
    ldf, rdf = ldf.alias("l"), rdf.alias("r")
    ts, wt = ((F.col(f"l.{TS}"), F.col(f"r._r{WT}")) if left.row_level
              else (F.col(f"r._r{TS}"), F.col(f"l.{WT}")))
    cond = (ts <= wt) & (ts > wt - F.expr(f"INTERVAL {r_us} MICROSECONDS"))
    if w.cumulate:  # a cumulating window's rows: of the period of its instant
        cond = cond & same_period(F.unix_micros(ts), F.unix_micros(wt), w.range_s, w.offset_s)
    for i, k in enumerate(lkeys):
        cond = cond & (F.col(f"l.`{k}`") == F.col(f"r._rk{i}"))
    j = ldf.join(rdf, cond, "inner")
    out = [wt.alias(WT)] + [F.col(f"l.`{c}`").alias(c) for c in lcols]
    out += [F.col(f"r.`{c}`").alias(c) for c in rcols]
    return j.select(*out)


def same_period(ts_us: Column, last_us: Column, size_s: float, origin_s: float = 0.0
                ) -> Column:
    """A reading at `ts_us` (micros) is in the period of `size_s` seconds (from the
    epoch plus `origin_s`) that holds `last_us`, a window's end - 1 us: a cumulating window
    ending there holds it (federation/logical/window.py)."""
    size, o = F.lit(us(size_s)), F.lit(us(origin_s))
    return ts_us - F.pmod(ts_us - o, size) == last_us - F.pmod(last_us - o, size)
