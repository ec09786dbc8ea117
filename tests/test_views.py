"""Views and window table functions over views and subqueries (federation/sqlfront/views.py),
and tuple and session windows over selected readings (`window(..., where=...)`).

A window over a view of a time window is the query written with the window around the
stream: both run through the reference and pure DuckDB and must agree. A ROWS_WINDOW or
SESSION over a selecting view counts the selected readings only: the same query over the
stream with the other readings taken out of the input is its oracle. No JVM.
"""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from db.reference import reference_result
from federation import sql
from federation.errors import QueryValidationError
from federation.expressions import count, sum_
from federation.logical import window
from federation.results import diff_results
from federation.sqlfront import SqlError
from tests.test_sql import STREAMS, S
from tests.test_stranger_queries import pure_db, rows_of

T2 = "INTERVAL '2' SECOND"
#: the hand-written form: the window around the stream, the selection above it
WRITTEN = f"""SELECT plug_id, SUM(v2) AS s, COUNT(*) AS n FROM (SELECT plug_id, value * 2 AS v2,
window_start, window_end FROM TUMBLE(TABLE smartplug, DESCRIPTOR(ts), {T2}) WHERE value > 50)
GROUP BY window_start, window_end, plug_id"""
SAME_AS_WRITTEN = {
    "view": f"""CREATE TEMPORARY VIEW hot AS SELECT plug_id, value * 2 AS v2, ts FROM smartplug
WHERE value > 50;
SELECT plug_id, SUM(v2) AS s, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE hot, DESCRIPTOR(ts), {T2}))
GROUP BY window_start, window_end, plug_id""",
    "cte": f"""WITH hot AS (SELECT plug_id, value * 2 AS v2, ts FROM smartplug WHERE value > 50)
SELECT plug_id, SUM(v2) AS s, COUNT(*) AS n FROM TUMBLE(TABLE hot, DESCRIPTOR(ts), {T2})
GROUP BY window_start, window_end, plug_id""",
    "subquery": f"""SELECT h.plug_id, SUM(h.v2) AS s, COUNT(*) AS n FROM TUMBLE(TABLE (
SELECT plug_id, value * 2 AS v2, ts FROM smartplug WHERE value > 50), DESCRIPTOR(ts), {T2}) AS h
GROUP BY window_start, window_end, h.plug_id""",
    # views over views, a column list renaming, the time column renamed on the way
    "chained": f"""CREATE VIEW a (p, t, v) AS SELECT plug_id, ts, value FROM smartplug AS r
WHERE r.value > 20;
CREATE VIEW b AS SELECT p AS plug_id, t AS t2, v * 2 AS v2 FROM a WHERE v > 50;
SELECT plug_id, SUM(v2) AS s, COUNT(*) AS n FROM TUMBLE(TABLE b, DESCRIPTOR(t2), {T2})
GROUP BY window_start, window_end, plug_id""",
    # Flink's legacy group window over a view
    "legacy": f"""CREATE VIEW hot AS SELECT plug_id, value * 2 AS v2, ts FROM smartplug
WHERE value > 50;
SELECT plug_id, SUM(v2) AS s, COUNT(*) AS n FROM hot GROUP BY plug_id, TUMBLE(ts, {T2})""",
}


@pytest.fixture(scope="module")
def readings():
    return rows_of(12, 50, 10, 3)


@pytest.mark.parametrize("name", list(SAME_AS_WRITTEN))
def test_a_time_window_over_a_view_is_the_window_around_the_stream(name, readings):
    want = reference_result(sql(WRITTEN, STREAMS), readings)
    q = sql(SAME_AS_WRITTEN[name], STREAMS)
    assert want.num_rows > 0
    assert diff_results(reference_result(q, readings), want) is None
    assert diff_results(pure_db(q, readings, 3), want) is None


#: (over a selecting view, the query over the stream; the selection)
OF_SELECTED = {
    "rows": ("""SELECT plug_id, COUNT(*) AS n, SUM(value) AS s FROM ROWS_WINDOW(TABLE (
SELECT * FROM smartplug AS r WHERE r.value > 60), DESCRIPTOR(ts), INTERVAL '1' SECOND, 7,
DESCRIPTOR(plug_id)) GROUP BY window_end, plug_id""",
             """SELECT plug_id, COUNT(*) AS n, SUM(value) AS s FROM ROWS_WINDOW(TABLE smartplug,
DESCRIPTOR(ts), INTERVAL '1' SECOND, 7, DESCRIPTOR(plug_id)) GROUP BY window_end, plug_id"""),
    "session": ("""CREATE VIEW hot AS SELECT * FROM smartplug WHERE value > 60;
CREATE VIEW hotter AS SELECT * FROM hot WHERE plug_id <> 3;
SELECT plug_id, COUNT(*) AS n, MAX(value) AS m, window_start, window_end FROM SESSION(
TABLE hotter PARTITION BY plug_id, DESCRIPTOR(ts), INTERVAL '0.3' SECOND)
GROUP BY window_start, window_end, plug_id""",
                """SELECT plug_id, COUNT(*) AS n, MAX(value) AS m, window_start, window_end FROM
SESSION(TABLE smartplug PARTITION BY plug_id, DESCRIPTOR(ts), INTERVAL '0.3' SECOND)
GROUP BY window_start, window_end, plug_id"""),
    # a view that projects above its selection: the last 7 selected rows, projected
    "rows_projected": ("""CREATE VIEW v AS SELECT plug_id AS p, value * 2 AS v2, ts FROM smartplug
WHERE value > 60;
SELECT p, COUNT(*) AS n, SUM(v2) AS s FROM ROWS_WINDOW(TABLE v, DESCRIPTOR(ts), INTERVAL '1'
SECOND, 7, DESCRIPTOR(p)) GROUP BY window_end, p""",
                       """SELECT plug_id AS p, COUNT(*) AS n, SUM(value * 2) AS s FROM
ROWS_WINDOW(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, 7, DESCRIPTOR(plug_id))
GROUP BY window_end, plug_id"""),
    # the readings selected by a column a view computes, the last 7 of them counted
    "rows_computed": ("""WITH v AS (SELECT plug_id, value * 2 AS v2, ts FROM smartplug),
w AS (SELECT * FROM v AS x WHERE x.v2 > 120) SELECT plug_id, COUNT(*) AS n, SUM(v2) AS s FROM
ROWS_WINDOW(TABLE w, DESCRIPTOR(ts), INTERVAL '1' SECOND, 7, DESCRIPTOR(plug_id))
GROUP BY window_end, plug_id""",
                      """SELECT plug_id, COUNT(*) AS n, SUM(value * 2) AS s FROM ROWS_WINDOW(
TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, 7, DESCRIPTOR(plug_id))
GROUP BY window_end, plug_id"""),
    # a view that computes columns and renames the key under one that selects by them:
    # its aggregate reads the expressions of the session's readings
    "session_computed": ("""CREATE VIEW a AS SELECT plug_id AS p, value * 2 AS v2, ts,
value AS v FROM smartplug;
CREATE VIEW hot AS SELECT p, v2 - 1 AS v3, ts FROM a WHERE v2 > 120 AND p <> 3;
SELECT p, COUNT(*) AS n, SUM(v3) AS s, MAX(v3 + p) AS m, window_start, window_end FROM SESSION(
TABLE hot PARTITION BY p, DESCRIPTOR(ts), INTERVAL '0.3' SECOND)
GROUP BY window_start, window_end, p""",
                         """SELECT plug_id AS p, COUNT(*) AS n, SUM(value * 2 - 1) AS s,
MAX(value * 2 - 1 + plug_id) AS m, window_start, window_end FROM SESSION(TABLE smartplug
PARTITION BY plug_id, DESCRIPTOR(ts), INTERVAL '0.3' SECOND)
GROUP BY window_start, window_end, plug_id"""),
    # Flink's legacy SESSION over a subquery listing columns (its aggregate reads them)
    "legacy_session": ("""SELECT plug_id, COUNT(*) AS n, SESSION_END(ts, INTERVAL '0.3' SECOND)
AS e FROM (SELECT plug_id, ts FROM smartplug WHERE value > 60 AND plug_id <> 3) AS h
GROUP BY plug_id, SESSION(ts, INTERVAL '0.3' SECOND)""",
                       """SELECT plug_id, COUNT(*) AS n, SESSION_END(ts, INTERVAL '0.3' SECOND)
AS e FROM smartplug GROUP BY plug_id, SESSION(ts, INTERVAL '0.3' SECOND)"""),
}


@pytest.mark.parametrize("name", list(OF_SELECTED))
def test_rows_and_sessions_over_a_view_count_its_readings_only(name, readings):
    over_view, over_stream = OF_SELECTED[name]
    v = readings.column("value")
    kept = pc.greater(v, 60)
    if not name.startswith("rows"):
        kept = pc.and_(kept, pc.not_equal(readings.column("plug_id"), 3))
    want = reference_result(sql(over_stream, STREAMS), readings.filter(kept))
    q = sql(over_view, STREAMS)
    assert want.num_rows > 0
    # and they are others than the selected readings' windows
    assert diff_results(reference_result(sql(over_stream, STREAMS), readings), want)
    assert diff_results(reference_result(q, readings), want) is None
    for per_batch_s in (1, 4):  # the DB deletes what the window no longer counts
        assert diff_results(pure_db(q, readings, per_batch_s), want) is None


def test_the_dsl_writes_the_window_selection():
    q = (window(S, rows=7, slide=1, partition_by=["plug_id"], where="value > 60")
         .aggregate(by=["plug_id"], n=count(), s=sum_("value")).rstream("q"))
    assert "where value > 60" in q.child.child.label()
    with pytest.raises(QueryValidationError, match=r"filter\(\.\.\.\)"):
        window(S, range=4, slide=1, where="value > 60")
    with pytest.raises(QueryValidationError, match="not a condition"):
        window(S, gap=4, slide=1, where="value + 1")


@pytest.mark.parametrize("text,why", [
    (("CREATE VIEW v AS SELECT plug_id % 2 AS house_id, value AS x, ts FROM smartplug; "
     "SELECT house_id, COUNT(*) AS n FROM SESSION(TABLE v PARTITION BY house_id, "
     "DESCRIPTOR(ts), 2) GROUP BY window_start, window_end, house_id"),
     "computed key 'house_id' is a column of stream 'smartplug': name it apart"),
    (("CREATE VIEW v AS SELECT plug_id % 2 AS k, ts FROM smartplug; CREATE VIEW w AS SELECT "
      "k % 2 AS k, ts FROM v; SELECT k, COUNT(*) AS n FROM SESSION(TABLE w PARTITION BY k, "
      "DESCRIPTOR(ts), 2) GROUP BY window_start, window_end, k"),
     "its column k is the partition key a view above computes"),
    (("WITH v AS (SELECT a.plug_id, a.ts FROM smartplug AS a JOIN smartplug AS b ON "
     "a.plug_id = b.plug_id) SELECT COUNT(*) AS n FROM TUMBLE(TABLE v, DESCRIPTOR(ts), 2) "
     "GROUP BY window_start, window_end"), "not a selection and projection of one stream"),
    (("WITH v AS (SELECT plug_id, ts + INTERVAL '1' SECOND AS ts FROM smartplug) SELECT "
     "COUNT(*) AS n FROM TUMBLE(TABLE v, DESCRIPTOR(ts), 2) GROUP BY window_start, "
     "window_end"), "does not pass the time column"),
    (("WITH v AS (SELECT plug_id, ts, value AS window_end FROM smartplug) SELECT COUNT(*) AS n "
     "FROM TUMBLE(TABLE v, DESCRIPTOR(ts), 2) GROUP BY window_start, window_end"),
     "its column window_end is the window's"),
    (("WITH v AS (SELECT * FROM smartplug WHERE plug_id IN (SELECT plug_id FROM smartplug)) "
     "SELECT COUNT(*) AS n FROM ROWS_WINDOW(TABLE v, DESCRIPTOR(ts), 1, 3) GROUP BY "
     "window_end"), "a subquery in the view's WHERE"),
    (("WITH v AS (SELECT plug_id, value * 2 AS v2, ts FROM smartplug), w AS (SELECT * FROM v "
      "WHERE value > 60) SELECT COUNT(*) AS n FROM ROWS_WINDOW(TABLE w, DESCRIPTOR(ts), 1, "
      "3) GROUP BY window_end"), "its WHERE names value, which the view below does not"),
    ("SELECT COUNT(*) AS n FROM smartplug; CREATE VIEW v AS SELECT * FROM smartplug",
     "a view is created before the query"),
    ("CREATE VIEW v AS SELECT * FROM smartplug", "views without a query"),
    (("CREATE VIEW v AS SELECT * FROM smartplug; CREATE VIEW v AS SELECT * FROM smartplug; "
     "SELECT COUNT(*) AS n FROM v"), "'v' defined twice"),
    ("CREATE VIEW v (a, b) AS SELECT * FROM smartplug; SELECT COUNT(*) AS n FROM v",
     "names 2 columns"),
])
def test_views_a_user_gets_wrong_are_refused_where_written(text, why):
    with pytest.raises(SqlError, match=why.replace("(", r"\(").replace("*", r"\*")):
        sql(text, STREAMS)


def test_a_cte_named_as_its_stream_reads_the_stream():
    # `WITH s AS (SELECT * FROM s ...)`: the CTE's body does not see the CTE (it looped)
    shadowed = ("WITH smartplug AS (SELECT * FROM smartplug WHERE value > 50) SELECT plug_id, "
                "COUNT(*) AS n FROM TUMBLE(TABLE smartplug, DESCRIPTOR(ts), 2) GROUP BY "
                "window_start, window_end, plug_id")
    assert sql(shadowed, STREAMS) == sql(
        "SELECT plug_id, COUNT(*) AS n FROM TUMBLE(TABLE smartplug, DESCRIPTOR(ts), 2) WHERE "
        "value > 50 GROUP BY window_start, window_end, plug_id", STREAMS)


#: (a query with a partition key computed of each reading, the query over a stream whose
#: readings carry that key as a column `k`): a session or the last n rows per value of it
KEYED = {
    # a view computes the key
    "session_view": ("""CREATE VIEW v AS SELECT plug_id % 3 AS k, value AS x, ts FROM smartplug;
SELECT k, COUNT(*) AS n, SUM(x) AS s, window_start FROM SESSION(TABLE v PARTITION BY k,
DESCRIPTOR(ts), INTERVAL '0.05' SECOND) GROUP BY window_start, window_end, k""",
                     """SELECT k, COUNT(*) AS n, SUM(value) AS s, window_start FROM SESSION(
TABLE smartplug PARTITION BY k, DESCRIPTOR(ts), INTERVAL '0.05' SECOND)
GROUP BY window_start, window_end, k"""),
    # beside the stream's columns, selected on by a view above
    "rows_view": ("""WITH v AS (SELECT *, plug_id % 3 AS k FROM smartplug), w AS (SELECT * FROM v
WHERE k <> 1) SELECT k, COUNT(*) AS n, SUM(value) AS s FROM ROWS_WINDOW(TABLE w,
DESCRIPTOR(ts), INTERVAL '1' SECOND, 5, DESCRIPTOR(k)) GROUP BY window_end, k""",
                  """SELECT k, COUNT(*) AS n, SUM(value) AS s FROM ROWS_WINDOW(TABLE (SELECT *
FROM smartplug WHERE k <> 1), DESCRIPTOR(ts), INTERVAL '1' SECOND, 5, DESCRIPTOR(k))
GROUP BY window_end, k"""),
    # Flink's legacy SESSION grouped by an expression, of the readings its WHERE selects
    "legacy": ("""SELECT r.plug_id % 3 AS k, COUNT(*) AS n, SESSION_END(ts, INTERVAL '0.05'
SECOND) AS e FROM smartplug AS r WHERE r.value > 10 GROUP BY r.plug_id % 3, SESSION(r.ts,
INTERVAL '0.05' SECOND) HAVING r.plug_id % 3 > 0""",
               """SELECT k, COUNT(*) AS n, window_end AS e FROM SESSION(TABLE (SELECT * FROM
smartplug WHERE value > 10) PARTITION BY k, DESCRIPTOR(ts), INTERVAL '0.05' SECOND)
GROUP BY window_start, window_end, k HAVING k > 0"""),
}


@pytest.mark.parametrize("name", list(KEYED))
def test_a_key_computed_of_each_reading_is_a_column_the_readings_carry(name, readings):
    import numpy as np
    import pyarrow as pa

    from federation.streams import StreamDecl

    keyed_stream = StreamDecl(name="smartplug", schema={**S.columns, "k": "INT"},
                              stats=S.stats)
    keyed = readings.append_column("k", pa.array(
        np.asarray(readings.column("plug_id")) % 3, pa.int32()))
    computed, over_keys = KEYED[name]
    want = reference_result(sql(over_keys, {"smartplug": keyed_stream}), keyed)
    q = sql(computed, STREAMS)
    assert want.num_rows > 0
    assert diff_results(reference_result(q, readings), want) is None
    for per_batch_s in (1, 4):
        assert diff_results(pure_db(q, readings, per_batch_s), want) is None
