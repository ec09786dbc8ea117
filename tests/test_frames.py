"""Window frames (issue 44): aggregates OVER (... ORDER BY ... [ROWS | RANGE | GROUPS
BETWEEN ...]), FIRST_VALUE, LAST_VALUE and NTH_VALUE over a frame, NTILE, PERCENT_RANK and
CUME_DIST (federation/logical/frames.py, federation/sqlfront/frames.py).

Each query runs in pure DuckDB through the DB-op runtime against the reference evaluator
(no JVM), and at sampled instants against DuckDB's own window functions over the window's
rows; where DuckDB's pick among ties is its own, the orders are unique (ids). With the JVM,
a running aggregate in Spark and cut across the engines.
"""

from __future__ import annotations

import datetime as dt

import pytest

from federation import sql
from federation.errors import QueryValidationError
from federation.logical.frames import Frame
from tests.sampling import sampled
from tests.test_sql import STREAMS
from tests.test_stranger_queries import check_db, rows_of
from tests.test_subqueries import W, at, oracle

_ROWS = (f"(SELECT CASE WHEN value > 20 THEN plug_id END AS k, id, house_id, plug_id, value "
         f"FROM {W})")

#: running aggregates: the default frame (up to the row's last peer: ties in plug_id), ROWS
#: around the row, ROWS before it only (empty for a partition's first rows: AVG NULL, COUNT
#: 0), GROUPS of peers with a FILTER, RANGE to the end in a descending order; partitions by a
#: key with NULLs (a reading of at most 20 W) and the whole instant
RUNNING = f"""SELECT k, id, value,
SUM(value) OVER (PARTITION BY k ORDER BY id) AS run,
COUNT(*) OVER (PARTITION BY house_id ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING)
  AS n4,
AVG(value) OVER (ORDER BY id ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS before3,
COUNT(id) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING) AS n2,
MAX(value) OVER (PARTITION BY house_id ORDER BY plug_id) AS peak,
COUNT(value) FILTER (WHERE value > 30) OVER (PARTITION BY house_id ORDER BY plug_id
  GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) AS g,
MIN(value) OVER (PARTITION BY k ORDER BY plug_id DESC RANGE BETWEEN CURRENT ROW AND
  UNBOUNDED FOLLOWING) AS low,
SUM(id) OVER (PARTITION BY k ORDER BY id ROWS UNBOUNDED PRECEDING) AS ids
FROM {_ROWS} WHERE value < 70"""
#: a frame's rows: the last of the default frame (the row itself under a unique order), of
#: the rows after it (NULL at a partition's end), the n-th (NULL before it), the first of the
#: last three; the distribution functions, with ties (PERCENT_RANK, CUME_DIST) and without
VALUES = f"""SELECT k, id, value,
LAST_VALUE(value) OVER (PARTITION BY house_id ORDER BY id) AS last_here,
LAST_VALUE(id) OVER (PARTITION BY k ORDER BY value DESC, id ROWS BETWEEN 1 FOLLOWING
  AND 3 FOLLOWING) AS l3,
NTH_VALUE(id, 2) OVER (PARTITION BY k ORDER BY id) AS second,
FIRST_VALUE(value) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS f3,
LAST_VALUE(value) OVER (PARTITION BY house_id ORDER BY plug_id, id RANGE BETWEEN
  UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last_all,
NTILE(3) OVER (PARTITION BY house_id ORDER BY id) AS tile,
NTILE(50) OVER (PARTITION BY k ORDER BY id) AS tile50,
PERCENT_RANK() OVER (PARTITION BY k ORDER BY plug_id) AS pr,
CUME_DIST() OVER (PARTITION BY house_id ORDER BY plug_id DESC) AS cd
FROM {_ROWS} WHERE value < 70"""


@pytest.mark.parametrize("text", [RUNNING, VALUES, None], ids=["running", "values", "one"])
def test_frames_equal_the_reference_and_duckdb_s_own_window_functions(text):
    text = text or ONE
    q = sql(text, STREAMS)
    rows = rows_of(seconds=20, rate=30, plugs=28, houses=4)
    got = check_db(q, rows, per_batch_s=5)
    first = min(rows.column("ts").to_pylist()).replace(microsecond=0)
    taus = sorted(set(got.column("tau").to_pylist()))
    assert len(taus) > 5
    for s in (3, 10, 17):
        tau = first + dt.timedelta(seconds=s)
        assert at(got, tau, list(q.schema)) == oracle(text, rows, tau), tau


def test_frames_in_the_dsl_and_their_validation():
    from federation.expressions import count, sum_
    from federation.logical import window
    from tests.test_sql import S

    w = window(S, range=10, slide=1)
    by_sql = sql(f"SELECT plug_id, value, SUM(value) OVER (PARTITION BY plug_id ORDER BY id "
                 f"ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM {W}", STREAMS)
    dsl = (w.project("plug_id", "value", "id")
           .over("plug_id", order_by=["id"], frame=("rows", -2, 0), _over=sum_("value")))
    assert by_sql.schema["s"] == dsl.schema["_over"]
    assert Frame("groups", -1, 2).sql() == "GROUPS BETWEEN 1 PRECEDING AND 2 FOLLOWING"
    assert not Frame("rows", -3, -1).holds_the_row and Frame().holds_the_row
    for bad, why in [(("rows", 1, -1), "starts after it ends"),
                     (("range", -2, 0), "UNBOUNDED or CURRENT ROW"),
                     (("slices", None, 0), "one of rows, range, groups"),
                     (("rows", 1.5, 2), "a whole number")]:
        with pytest.raises(QueryValidationError, match=why):
            Frame.of(bad)
    with pytest.raises(QueryValidationError, match="a frame needs an order"):
        w.over("plug_id", frame=("rows", -1, 0), n=count())
    with pytest.raises(QueryValidationError, match="whole number >= 1"):
        w.nth_value("value", 0, ["id"])
    with pytest.raises(QueryValidationError, match="whole number >= 1"):
        w.ntile(0, ["id"])


#: one frame, a moving sum over ROWS: a plan small enough to cut at every engine boundary
ONE = f"""SELECT k, id, value,
SUM(value) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s3
FROM {_ROWS} WHERE value < 70"""


@pytest.mark.spark
@pytest.mark.parametrize("which,cut", sampled(
    [("one", True), ("one", False), ("running", False), ("values", False)],
    keep=[("one", True)]))
def test_frames_in_spark_and_across_the_engines(spark, tmp_path, which, cut):
    """Pure Spark, or cut at every engine boundary (the placement that alternates engines
    by depth: the numbering, the join, the frame's selection, the aggregate apart)."""
    from benchmarks.fuzz_queries import alternating_placements
    from federation.smartplug import smartplug_stream
    from federation.smartplug.datagen import generate
    from tests.test_stranger_queries import run_checked

    d = tmp_path / "data"
    generate(d, rate=30, seconds=16, plugs=28, houses=4, seed=1)
    s = smartplug_stream(rate=30, plugs=28, houses=4)
    q = sql({"one": ONE, "running": RUNNING, "values": VALUES}[which], {"smartplug": s})
    placement = alternating_placements(q)[0] if cut else "spe"
    run_checked(spark, q, placement, d, tmp_path / "run", 5)
