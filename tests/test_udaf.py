"""Python aggregate functions (federation.udaf): a group's non-NULL values, sorted, handed
to a Python function once per group and instant, in SQL and in the DSL, against DuckDB's
own SQL of the same meaning, in every engine, and refused where they are written wrong."""

from __future__ import annotations

import pytest

from federation import sql, udaf, window
from federation.errors import QueryValidationError
from federation.expressions import count
from federation.sqlfront import SqlError
from tests.sampling import sampled
from tests.test_listagg import equals_own_sql
from tests.test_sql import STREAMS, S
from tests.test_stranger_queries import check_db, rows_of, run_checked
from tests.test_subqueries import W


@udaf(returns="VARCHAR")
def dotted(v):
    """The values joined by '.', in the order they come (ascending: numbers as numbers)."""
    return ".".join(str(x) for x in v.to_pylist())


@udaf(returns="DOUBLE")
def ranked_sum(v):
    """Each value times its rank (from 1) in the order they come: a sum that changes with
    the order, added left to right."""
    total = 0.0
    for i, x in enumerate(v.to_pylist(), 1):
        total += i * x
    return total


@udaf(returns="VARCHAR")
def pairs(k, v):
    """'k:v' of each row (of the rows where neither is NULL), in (k, v) order."""
    return ";".join(f"{a}:{b}" for a, b in zip(k.to_pylist(), v.to_pylist()))


@udaf(returns="TIMESTAMP")
def latest(t):
    """The last time (a time in and out: Spark hands times zoned, DuckDB not)."""
    return t[-1]


@udaf(returns="BIGINT")
def spread_ids(k):
    return k[-1].as_py() - k[0].as_py()


HIGH = "CASE WHEN value > 104 THEN value END"  # NULL below: skipped
#: (the query, DuckDB's own SQL of it: the order written out)
CASES = {
    "grouped": (f"""SELECT house_id, dotted(plug_id) AS d, dotted(DISTINCT plug_id) AS dd,
COUNT(*) AS n FROM {W} WHERE value > 100 GROUP BY window_end, house_id""",
                f"""SELECT house_id, STRING_AGG(CAST(plug_id AS VARCHAR), '.' ORDER BY plug_id)
AS d, ARRAY_TO_STRING(LIST_SORT(LIST(DISTINCT plug_id)), '.') AS dd, COUNT(*) AS n
FROM {W} WHERE value > 100 GROUP BY window_end, house_id"""),
    # two arguments and FILTER: the rows where neither is NULL, in (k, v) order
    "pairs": (f"""SELECT house_id, pairs(plug_id, {HIGH}) FILTER (WHERE property = 1) AS p
FROM {W} GROUP BY window_end, house_id""",
              f"""SELECT house_id, STRING_AGG(CAST(plug_id AS VARCHAR) || ':' || CAST({HIGH} AS
VARCHAR), ';' ORDER BY plug_id, {HIGH}) FILTER (WHERE property = 1 AND {HIGH} IS NOT NULL)
AS p FROM {W} GROUP BY window_end, house_id"""),
    "over": (f"""SELECT plug_id, value, dotted(plug_id) OVER (PARTITION BY house_id) AS d
FROM {W} WHERE value > 105""", f"""SELECT plug_id, value, STRING_AGG(CAST(plug_id AS VARCHAR),
'.' ORDER BY plug_id) OVER (PARTITION BY house_id) AS d FROM {W} WHERE value > 105"""),
}


@pytest.fixture(scope="module")
def readings():
    return rows_of(seconds=20, rate=60, plugs=28, houses=4)


@pytest.mark.parametrize("name", list(CASES))
def test_a_python_aggregate_equals_duckdb_s_own_sql(name, readings):
    rows = equals_own_sql(*CASES[name], readings)
    several = sum(1 for r in rows for x in r if isinstance(x, str) and "." in x)
    assert several > 5 or name == "pairs"

def test_the_values_reach_the_function_in_one_order_whatever_the_batches(readings):
    """A sum that depends on the order of its terms is the same at 1 and 4 s per batch and
    in the reference (both sort); over the window's times, and of no value: NULL."""
    q = (window(S, range=4, slide=1).filter("value > 100")
         .aggregate(by=["house_id"], r=ranked_sum("value"), t=latest("ts"),
                    s=spread_ids("plug_id", where="value > 108"), n=count())
         .rstream("q"))
    one = check_db(q, readings, per_batch_s=1)
    four = check_db(q, readings, per_batch_s=4)
    assert sorted(one.to_pylist(), key=str) == sorted(four.to_pylist(), key=str)
    assert None in one.column("s").to_pylist()
    rows = one.to_pylist()
    assert all(r["t"] < r["tau"] for r in rows)


def test_sql_and_the_dsl_build_one_plan():
    text = (f"SELECT house_id, ranked_sum(value) FILTER (WHERE plug_id > 3) AS r FROM {W} "
            "GROUP BY window_end, house_id")
    dsl = (window(S, range=10, slide=1)
           .aggregate(by=["house_id"], r=ranked_sum("value", where="plug_id > 3")).rstream())
    assert sql(text, STREAMS) == dsl


def test_a_session_s_python_aggregate(readings):
    text = """SELECT plug_id, window_start, dotted(CAST(value AS INT)) AS d, COUNT(*) AS n
FROM SESSION(TABLE smartplug PARTITION BY plug_id, DESCRIPTOR(ts), INTERVAL '2' SECOND)
WHERE plug_id < 6 GROUP BY window_start, window_end, plug_id"""
    got = check_db(sql(text, STREAMS), readings, per_batch_s=2)
    assert any("." in d for d in got.column("d").to_pylist())


def test_python_aggregates_in_a_query_set_and_of_a_table_s_groups(readings, tmp_path):
    """Two queries sharing a window and a selection, each with its Python aggregate, as one
    set; and a Python aggregate per city of a DuckDB table joined with the window rows."""
    from db.reference import reference_result
    from federation.logical import QuerySet, table
    from federation.results import diff_results
    from tests.test_tables import make_db

    base = window(S, range=4, slide=1).filter("value > 100")
    qs = QuerySet((base.aggregate(by=["house_id"], d=dotted("plug_id")).rstream("a"),
                   base.aggregate(by=[], r=ranked_sum("value"), n=count()).rstream("b")))
    got = check_sets(qs, readings)
    assert set(got) == {"a", "b"}
    make_db(tmp_path / "t.duckdb")
    cities = table("houses", db=tmp_path / "t.duckdb").project("house_id", "city")
    q = (window(S, range=4, slide=1).join(cities, on=["house_id"])
         .aggregate(by=["city"], p=pairs("house_id", "plug_id"))
         .rstream("cities"))
    want = reference_result(q, readings)
    assert want.num_rows > 0 and diff_results(check_db(q, readings), want) is None


def check_sets(qs, readings) -> dict:
    from db.reference import reference_result
    from federation.results import diff_results
    from tests.test_stranger_queries import pure_db

    got = pure_db(qs, readings, per_batch_s=2)
    for q in qs.queries:
        want = reference_result(q, readings)
        assert want.num_rows > 0 and diff_results(got[q.name], want) is None, q.name
    return got


def test_create_function_loads_a_python_aggregate(readings):
    text = ("CREATE FUNCTION dots AS 'tests.test_udaf.dotted' LANGUAGE PYTHON;\n"
            f"SELECT house_id, dots(plug_id) AS d FROM {W} GROUP BY window_end, house_id")
    got = check_db(sql(text, STREAMS), readings)
    assert got.num_rows > 0


def _flaky(v):
    import random

    return random.random()


def _raises(v):
    raise RuntimeError("no")


@pytest.mark.parametrize("text,why", [
    (f"SELECT house_id FROM {W} WHERE dotted(plug_id) = '1'", "aggregate .* in WHERE"),
    (f"SELECT dotted() AS d FROM {W}", "an aggregate of at least one argument"),
    (f"SELECT dotted(DISTINCT plug_id, value) AS d FROM {W}",
     r"DOTTED\(DISTINCT ...\) takes one argument"),
    (f"SELECT COUNT(*) AS n FROM {W} GROUP BY window_end, dotted(plug_id)", "GROUP BY"),
])
def test_a_python_aggregate_written_wrong_is_refused_where_written(text, why):
    with pytest.raises((SqlError, QueryValidationError), match=why):
        sql(text, STREAMS)


def test_what_is_not_a_python_aggregate_is_refused_where_written():
    flaky = udaf(_flaky, returns="DOUBLE", name="flaky_agg")
    with pytest.raises(QueryValidationError, match="not deterministic"):
        window(S, range=4, slide=1).aggregate(by=["house_id"], f=flaky("value"))
    with pytest.raises(ValueError, match="built-in"):
        udaf(_flaky, returns="DOUBLE", name="sum")
    with pytest.raises(ValueError, match="returns="):
        udaf(_flaky, returns="FLOAT", name="f2")
    bad = udaf(lambda v: "x", returns="BIGINT", name="bad_agg")
    with pytest.raises(QueryValidationError, match="not BIGINT"):
        window(S, range=4, slide=1).aggregate(by=["house_id"], f=bad("value"))
    with pytest.raises(QueryValidationError, match="called with 2 arguments"):
        window(S, range=4, slide=1).aggregate(by=["house_id"], d=dotted("plug_id", "value"))
    with pytest.raises(QueryValidationError, match=r"DOTTED\(plug_id\) is an aggregate"):
        window(S, range=4, slide=1).project("house_id", d=dotted("plug_id"))
    with pytest.raises(QueryValidationError, match="is a Python aggregate"):
        window(S, range=4, slide=1).project("house_id", d="dotted(plug_id)")


def test_a_python_aggregate_that_raises_in_a_run_fails_it_naming_the_function(readings):
    boom = udaf(_raises, returns="DOUBLE", name="boom_agg", cost_us=1.0)
    q = window(S, range=4, slide=1).aggregate(by=["house_id"], b=boom("value")).rstream()
    with pytest.raises(Exception, match="boom_agg"):
        check_db(q, readings)


def test_the_optimizer_prices_a_python_aggregate_by_its_cost():
    from costmodel.operators import DB_COST, SPE_COST
    from costmodel.profile import load_profile
    from costmodel.sizes import NodeSize

    slow = udaf(lambda v: v[0], returns="DOUBLE", name="slow_agg", cost_us=1000.0)
    base = window(S, range=10, slide=1)
    plain = base.aggregate(by=["house_id"], m=count()).node
    costly = base.aggregate(by=["house_id"], m=slow("value")).node
    assert costly.python_cost == (1, pytest.approx(1e-3))
    p = load_profile()
    kid = NodeSize(rate=100.0, size=1000.0, l=1.0, copies=10.0, row_level=True)
    out = NodeSize(rate=4.0, size=4.0, l=1.0, copies=1.0, row_level=False)
    assert SPE_COST(costly, out, [kid], p) - SPE_COST(plain, out, [kid], p) >= 0.1 * 0.999
    assert DB_COST(costly, 1000.0, p) - DB_COST(plain, 1000.0, p) >= 1.0 * 0.999


@pytest.mark.spark
@pytest.mark.parametrize("placement", sampled(["spe", "cut"], keep=["cut"]))
def test_python_aggregates_in_spark_and_across_the_engines(spark, tmp_path, placement):
    from benchmarks.fuzz_queries import alternating_placements
    from federation.smartplug import smartplug_stream
    from federation.smartplug.datagen import generate

    d = tmp_path / "data"
    generate(d, rate=60, seconds=16, plugs=28, houses=4, seed=1)
    text = (f"SELECT house_id, dotted(DISTINCT plug_id) AS d, ranked_sum(value) AS r, "
            f"pairs(plug_id, {HIGH}) AS p, latest(ts) AS t, COUNT(*) AS n FROM {W} "
            "WHERE value > 100 GROUP BY window_end, house_id HAVING COUNT(*) > 1")
    q = sql(text, {"smartplug": smartplug_stream(rate=60, plugs=28, houses=4)})
    if placement == "cut":
        placement = alternating_placements(q)[0]
    run_checked(spark, q, placement, d, tmp_path / "run", 5)
