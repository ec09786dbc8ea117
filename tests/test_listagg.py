"""LISTAGG (STRING_AGG): a group's strings in ascending order joined by a separator
(federation.expressions.listagg), in every engine against DuckDB's own SQL with that order
written out, and refused where it is written wrong."""

from __future__ import annotations

import datetime as dt

import pytest

from federation import listagg, sql, window
from federation.errors import QueryValidationError
from federation.sqlfront import SqlError
from tests.test_sql import S
from tests.test_stranger_queries import check_db, rows_of
from tests.test_subqueries import STREAMS, W, at, oracle

P = "CAST(plug_id AS VARCHAR)"
TAG = "CASE WHEN value > 105 THEN 'hi' ELSE 'lo' END || CAST(plug_id AS VARCHAR)"
#: (the query, DuckDB's own SQL of it: the order written out)
CASES = {
    "grouped": (f"""SELECT house_id, LISTAGG({P}) AS ps, LISTAGG(DISTINCT {P}, '-') AS ds,
COUNT(*) AS n FROM {W} WHERE value > 100 GROUP BY window_end, house_id""",
                f"""SELECT house_id, STRING_AGG({P}, ',' ORDER BY {P}) AS ps, STRING_AGG(
DISTINCT {P}, '-' ORDER BY {P}) AS ds, COUNT(*) AS n FROM {W} WHERE value > 100
GROUP BY window_end, house_id"""),
    # FILTER, a separator with a quote, a NULL among the values (skipped)
    "filtered": (f"""SELECT house_id, STRING_AGG(CASE WHEN value < 109 THEN {TAG} END, ''';')
FILTER (WHERE value > 103) AS ps FROM {W} WHERE value > 100 GROUP BY window_end, house_id""",
                 f"""SELECT house_id, STRING_AGG(CASE WHEN value < 109 THEN {TAG} END, ''';'
ORDER BY CASE WHEN value < 109 THEN {TAG} END) FILTER (WHERE value > 103) AS ps FROM {W}
WHERE value > 100 GROUP BY window_end, house_id"""),
    # OVER a partition, and over a frame of ROW_NUMBER's order (ties by the other columns)
    "over": (f"""SELECT plug_id, value, LISTAGG({P}) OVER (PARTITION BY house_id) AS p
FROM {W} WHERE value > 105""", f"""SELECT plug_id, value, STRING_AGG({P}, ',' ORDER BY {P})
OVER (PARTITION BY house_id) AS p FROM {W} WHERE value > 105"""),
    "frame": (f"""SELECT plug_id, value, LISTAGG({P}, '/') OVER (PARTITION BY house_id ORDER BY
value ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS p FROM {W} WHERE value > 105""",
              f"""SELECT plug_id, value, STRING_AGG({P}, '/' ORDER BY {P}) OVER (PARTITION BY
house_id ORDER BY value, id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS p FROM {W}
WHERE value > 105"""),
}


@pytest.fixture(scope="module")
def readings():
    return rows_of(seconds=20, rate=60, plugs=28, houses=4)


def equals_own_sql(text: str, own: str, readings) -> list[tuple]:
    """`text`'s rows (pure DuckDB at 3 s per batch, equal to the reference) equal those of
    DuckDB's own SQL `own` at every third instant; the own SQL's rows there."""
    q = sql(text, STREAMS)
    got = check_db(q, readings, per_batch_s=3)
    first = min(readings.column("ts").to_pylist()).replace(microsecond=0)
    rows = []
    for tau in [first + dt.timedelta(seconds=s) for s in range(1, 31, 3)]:
        want = oracle(own, readings, tau)
        assert at(got, tau, list(q.schema)) == want, tau
        rows += want
    return rows


@pytest.mark.parametrize("name", list(CASES))
def test_listagg_equals_duckdb_s_own_sql(name, readings):
    rows = equals_own_sql(*CASES[name], readings)
    seen = sum(1 for r in rows for x in r if isinstance(x, str) and any(c in x for c in ",;/"))
    assert seen > 5  # lists of several values


def test_a_global_listagg_is_null_where_the_window_has_no_value(readings):
    q = (window(S, range=4, slide=1).filter("value > 109")
         .aggregate(hs=listagg("CAST(house_id AS VARCHAR)", "|", distinct=True))
         .rstream("q"))
    got = check_db(q, readings, per_batch_s=4)
    values = got.column("hs").to_pylist()
    assert None in values and any(v and "|" in v for v in values)


@pytest.mark.parametrize("text,why", [
    (f"SELECT LISTAGG(plug_id) AS p FROM {W} GROUP BY window_end",
     "LISTAGG joins strings, not INT 'plug_id': CAST"),
    (f"SELECT LISTAGG({P}, {P}) AS p FROM {W} GROUP BY window_end",
     "LISTAGG's separator is a string literal"),
    (f"SELECT STRING_AGG({P}, ',' ORDER BY value) AS p FROM {W} GROUP BY window_end",
     "ORDER BY in it is not supported"),
])
def test_listagg_a_user_gets_wrong_is_refused_where_written(text, why):
    with pytest.raises((SqlError, QueryValidationError), match=why):
        sql(text, STREAMS)


@pytest.mark.spark
@pytest.mark.parametrize("placement", ["spe", "cut"])
def test_listagg_in_spark_and_across_the_engines(spark, tmp_path, placement):
    from benchmarks.fuzz_queries import alternating_placements
    from federation.smartplug import smartplug_stream
    from federation.smartplug.datagen import generate
    from tests.test_stranger_queries import run_checked

    d = tmp_path / "data"
    generate(d, rate=60, seconds=16, plugs=28, houses=4, seed=1)
    q = sql(CASES["grouped"][0] + " HAVING COUNT(*) > 1", {
        "smartplug": smartplug_stream(rate=60, plugs=28, houses=4)})
    if placement == "cut":
        placement = alternating_placements(q)[0]
    run_checked(spark, q, placement, d, tmp_path / "run", 5)
