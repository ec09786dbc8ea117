"""The distribution functions at each instant (SQL's NTILE, PERCENT_RANK, CUME_DIST over
a partition's rows in ROW_NUMBER's total order: federation/logical/frames.py, module doc)."""

from __future__ import annotations

from collections.abc import Sequence

from federation.errors import QueryValidationError
from federation.expressions import count
from federation.logical.frames import Frame, framed, sql_of
from federation.logical.names import name_maker


def distribution(rel, function: str, order_by, partition_by: Sequence[str], name: str,
                 buckets: int | None = None):
    """Each row of `rel` with NTILE(`buckets`) ("ntile": the rows in `buckets` groups of
    sizes differing by at most one, the larger first, numbered 1, 2, ...), PERCENT_RANK()
    ("percent_rank": (rank - 1) / (rows - 1), 0 for a partition of one row) or CUME_DIST()
    ("cume_dist": the share of the partition's rows up to the row's last peer)."""

    by = list(partition_by)
    cols = list(rel.node.schema)
    fresh = name_maker([*cols, name])
    rn, size, upto = fresh("_dist_rn"), fresh("_dist_rows"), fresh("_dist_upto")
    if function == "cume_dist":
        ups = framed(rel, order_by, by, Frame("range", None, 0), {upto: count()})
        sized = ups.over(by, **{size: count()})
        return sized.project(*cols, **{name: sql_of(f"CAST({upto} AS DOUBLE) / {size}")})
    fn = "rank" if function == "percent_rank" else "row_number"
    sized = rel.row_number(order_by, by, rn, fn).over(by, **{size: count()})
    if function == "percent_rank":
        value = sql_of(f"CASE WHEN {size} > 1 THEN CAST({rn} - 1 AS DOUBLE) / ({size} - 1) "
                     "ELSE CAST(0 AS DOUBLE) END")
        return sized.project(*cols, **{name: value})
    if function != "ntile":
        raise QueryValidationError("over", "function", f"{function!r}: ntile, percent_rank or "
                                   "cume_dist")
    if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 1:
        raise QueryValidationError("ntile", "buckets", f"{buckets!r}: a whole number >= 1")
    q = f"CAST(FLOOR(CAST({size} AS DOUBLE) / {buckets}) AS BIGINT)"
    r = f"({size} - {q} * {buckets})"  # the first r groups have q + 1 rows
    big = f"{r} * ({q} + 1)"
    value = sql_of(
        f"CASE WHEN {rn} <= {big} THEN CAST(FLOOR(CAST({rn} - 1 AS DOUBLE) / ({q} + 1)) "
        f"AS BIGINT) + 1 ELSE {r} + CAST(FLOOR(CAST({rn} - {big} - 1 AS DOUBLE) / "
        f"GREATEST({q}, 1)) AS BIGINT) + 1 END")
    return sized.project(*cols, **{name: value})
