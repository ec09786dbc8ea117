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
from federation.sqlfront import SqlError
from tests.sampling import sampled
from tests.test_sql import STREAMS
from tests.test_stranger_queries import check_db, rows_of
from tests.test_subqueries import W, at, oracle

_ROWS = (f"(SELECT CASE WHEN value > 20 THEN plug_id END AS k, id, house_id, plug_id, value, "
         f"ts FROM {W})")

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

#: RANGE frames bounded by a value: over a number (a DOUBLE, with an INT offset), in a
#: descending order over a key with NULLs (a NULL row's frame: its peers) and a fractional
#: offset, frames ahead of the row (empty ones: AVG NULL), over a timestamp by INTERVALs
BY_VALUE = f"""SELECT k, id, value,
SUM(value) OVER (PARTITION BY house_id ORDER BY value RANGE BETWEEN 5 PRECEDING AND CURRENT
  ROW) AS near5,
COUNT(*) OVER (PARTITION BY house_id ORDER BY k DESC RANGE BETWEEN 1 PRECEDING AND 2.5
  FOLLOWING) AS kn,
AVG(value) OVER (PARTITION BY k ORDER BY plug_id RANGE BETWEEN 3 FOLLOWING AND 10
  FOLLOWING) AS ahead,
MAX(id) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND
  INTERVAL '500' MILLISECOND FOLLOWING) AS recent,
COUNT(id) OVER (PARTITION BY k ORDER BY ts DESC RANGE INTERVAL 1 SECONDS PRECEDING) AS later
FROM {_ROWS} WHERE value < 70"""

#: EXCLUDE: the row (a ROWS frame over a unique order), its peers (RANGE over plug_id, which
#: has ties; an empty frame: COUNT 0), its peers but it (GROUPS; and ROWS up to the row over
#: ties: a set of rows whatever order ties take), FIRST_VALUE of the later groups; the n-th
#: row past each block (of plug_id over plug_id: the same whatever order ties take)
EXCLUDED = f"""SELECT k, id, value,
MAX(value) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING
  EXCLUDE CURRENT ROW) AS around,
COUNT(*) OVER (PARTITION BY house_id ORDER BY plug_id RANGE BETWEEN UNBOUNDED PRECEDING AND
  CURRENT ROW EXCLUDE GROUP) AS below,
SUM(value) OVER (PARTITION BY house_id ORDER BY plug_id GROUPS BETWEEN 1 PRECEDING AND
  1 FOLLOWING EXCLUDE TIES) AS g_ties,
SUM(id) OVER (PARTITION BY house_id ORDER BY plug_id ROWS BETWEEN UNBOUNDED PRECEDING AND
  CURRENT ROW EXCLUDE TIES) AS upto,
FIRST_VALUE(plug_id) OVER (PARTITION BY house_id ORDER BY plug_id RANGE BETWEEN CURRENT ROW
  AND UNBOUNDED FOLLOWING EXCLUDE GROUP) AS next_plug,
NTH_VALUE(value, 2) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING
  EXCLUDE CURRENT ROW) AS second,
NTH_VALUE(plug_id, 2) OVER (PARTITION BY house_id ORDER BY plug_id RANGE BETWEEN UNBOUNDED
  PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP) AS other_plug,
NTH_VALUE(plug_id, 3) OVER (PARTITION BY house_id ORDER BY plug_id GROUPS BETWEEN 1 PRECEDING
  AND 1 FOLLOWING EXCLUDE TIES) AS third_t
FROM {_ROWS} WHERE value < 70"""


#: IGNORE NULLS over k (NULL for readings of at most 20 W), in DuckDB's spelling (inside the
#: parentheses; SQL's, after them, is the same plan): LAG and LEAD (with a default),
#: FIRST_VALUE of the default frame, LAST_VALUE of the rows
#: before the row (often none with a value), the n-th of a growing frame, and past a block
#: EXCLUDE leaves out (of k over plug_id: the same whatever order ties take)
IGNORING = f"""SELECT k, id, value,
LAG(k, 1 IGNORE NULLS) OVER (PARTITION BY house_id ORDER BY id) AS prev_k,
LEAD(k, 2, -1 IGNORE NULLS) OVER (PARTITION BY house_id ORDER BY id) AS next2_k,
FIRST_VALUE(k IGNORE NULLS) OVER (PARTITION BY house_id ORDER BY id) AS first_k,
LAST_VALUE(k IGNORE NULLS) OVER (PARTITION BY house_id ORDER BY id ROWS BETWEEN 3 PRECEDING
  AND 1 PRECEDING) AS last_k,
NTH_VALUE(k, 2 IGNORE NULLS) OVER (PARTITION BY house_id ORDER BY id ROWS BETWEEN UNBOUNDED
  PRECEDING AND CURRENT ROW) AS second_k,
NTH_VALUE(k, 2 IGNORE NULLS) OVER (PARTITION BY house_id ORDER BY plug_id RANGE BETWEEN
  UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP) AS other_k
FROM {_ROWS} WHERE value < 70"""


@pytest.mark.parametrize("text", [RUNNING, VALUES, None, BY_VALUE, EXCLUDED, IGNORING],
                         ids=["running", "values", "one", "by_value", "excluded", "ignoring"])
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
    assert Frame("range", dt.timedelta(seconds=-2), 0).sql() == \
        "RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND CURRENT ROW"
    assert not Frame("range", 0.5, 3).holds_the_row and Frame("range", -2.5, 1).by_value
    assert Frame("rows", -1, 1, "ties").holds_the_row and not Frame(
        "rows", -1, 1, "current row").holds_the_row
    assert Frame("groups", -1, 0, "group").sql() == \
        "GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW EXCLUDE GROUP"
    assert sql(f"SELECT LAG(value, 1) IGNORE NULLS OVER (ORDER BY id) AS p FROM {W}",
               STREAMS) == sql(f"SELECT LAG(value, 1 IGNORE NULLS) OVER (ORDER BY id) AS p "
                               f"FROM {W}", STREAMS)
    assert "_n2" in w.nth_value("value", 2, ["id"], name="_n2",
                                frame=("rows", -2, 0, "current row")).schema
    for bad, why in [(("rows", 1, -1), "starts after it ends"),
                     (("range", 2, -0.5), "starts after it ends"),
                     (("range", dt.timedelta(seconds=-1), 2), "one bound a time span"),
                     (("range", "2", 0), "a number or a timedelta"),
                     (("slices", None, 0), "one of rows, range, groups"),
                     (("rows", None, 0, "others"), "one of no others, current row"),
                     (("rows", 1.5, 2), "a whole number")]:
        with pytest.raises(QueryValidationError, match=why):
            Frame.of(bad)
    rows = w.project("plug_id", "value", "id", "ts")
    for order, frame, why in [(["plug_id", "id"], ("range", -2, 0), "orders by one column"),
                              (["ts"], ("range", -2, 0), r"orders by a number \(offsets"),
                              (["value"], ("range", dt.timedelta(seconds=-2), 0),
                               "or a timestamp")]:
        with pytest.raises(QueryValidationError, match=why):
            rows.over("plug_id", order_by=order, frame=frame, n=count())
    for bound, why in [("2 FOLLOWING AND 1", "starts after it ends"),
                       ("INTERVAL '1:30' MINUTE TO SECOND PRECEDING AND CURRENT ROW",
                        "an INTERVAL such as"),
                       ("1.5 PRECEDING AND CURRENT ROW", "a whole number")]:
        kind = "ROWS" if bound.startswith("1.5") else "RANGE"
        with pytest.raises(SqlError, match=why):
            sql(f"SELECT SUM(value) OVER (ORDER BY ts {kind} BETWEEN {bound} FOLLOWING) AS s "
                f"FROM {W}".replace("FOLLOWING FOLLOWING", "FOLLOWING").replace(
                    "CURRENT ROW FOLLOWING", "CURRENT ROW"), STREAMS)
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
    [("one", True), ("one", False), ("running", False), ("values", False),
     ("by_value", False), ("excluded", False), ("ignoring", False)],
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
    q = sql({"one": ONE, "running": RUNNING, "values": VALUES, "by_value": BY_VALUE,
             "excluded": EXCLUDED, "ignoring": IGNORING}[which], {"smartplug": s})
    placement = alternating_placements(q)[0] if cut else "spe"
    run_checked(spark, q, placement, d, tmp_path / "run", 5)
