"""Python scalar functions (federation.udf, issue 44): registered by `udf(fn, returns=...)`
or by SQL's `CREATE FUNCTION name AS 'module.attr' LANGUAGE PYTHON`, called in the DSL and
in SQL by name, in selections, projections, group keys and aggregate arguments; equal to
the reference in pure DuckDB (no JVM) and, with the JVM, in pure Spark and in a placement
that cuts the plan between the engines (Spark's Arrow UDFs against DuckDB's Arrow
functions: the same arrays reach the function in both). Refused where written: unknown
names, a function whose two calls on one sample differ, a result of the wrong length or
type; a function that raises in a run fails the run naming it. The optimizer sees each
call's cost."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from federation import sql
from federation.errors import QueryValidationError
from federation.expressions import count, lit, max_
from federation.logical import window
from federation.python_functions import udf
from federation.sqlfront import SqlError
from tests.sampling import sampled
from tests.test_sql import H10, STREAMS
from tests.test_sql import S as S_SQL
from tests.test_stranger_queries import check_db, rows_of, run_checked


@udf(returns="DOUBLE")
def scaled(v, k):
    """2 v + k (NULL where either is)."""
    return pc.add(pc.multiply(v, 2.0), pc.cast(k, pa.float64()))


@udf(returns="VARCHAR")
def band(v, edge):
    """'high' above the edge, else 'low'; 'none' for a NULL reading (the function sees it)."""
    return pc.fill_null(pc.if_else(pc.greater(v, edge), "high", "low"), "none")


@udf(returns="TIMESTAMP")
def later(t):
    """90 minutes later (a time in and out: Spark hands times zoned, DuckDB not)."""
    return pc.add(t, pa.scalar(dt.timedelta(minutes=90)))


@udf(returns="BIGINT")
def hour_of(t):
    return pc.hour(t)


UDF_SQL = f"""
CREATE FUNCTION scaled AS 'tests.test_udf.scaled' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION band AS 'tests.test_udf.band';
CREATE FUNCTION later AS 'tests.test_udf.later';
CREATE FUNCTION hour_of AS 'tests.test_udf.hour_of';
SELECT house_id, band(value, 50.0) AS b, COUNT(*) AS n, MAX(scaled(value, property)) AS m,
       MAX(hour_of(later(ts))) AS h
FROM {H10}
WHERE scaled(value, plug_id) > 20
GROUP BY window_end, house_id, band(value, 50.0)
"""


def udf_dsl(s):
    return (window(s, range=10, slide=1)
            .filter(scaled("value", "plug_id") > 20)
            .project("id", "ts", "value", "property", "plug_id", "household_id", "house_id",
                     b=band("value", lit(50.0)))  # SQL's GROUP BY expression keeps them
            .aggregate(by=["house_id", "b"], n=count(), m=max_(scaled("value", "property")),
                       h=max_(hour_of(later("ts"))))
            .rstream())


def test_python_functions_in_sql_are_the_dsl_s_and_equal_the_reference_in_duckdb():
    q = sql(UDF_SQL, STREAMS)
    assert q == udf_dsl(S_SQL)
    assert [f.name for f in q.functions()] == ["band", "hour_of", "later", "scaled"]
    got = check_db(q, rows_of(seconds=20, rate=60, plugs=28, houses=4), per_batch_s=3)
    assert set(got.column("b").to_pylist()) == {"high", "low"}
    assert set(got.column("h").to_pylist()) == {1}  # 00:00 UTC and 90 minutes


def test_an_unknown_function_in_sql_names_how_to_declare_one():
    with pytest.raises(SqlError, match=r"unknown function nosuch\(\).*CREATE FUNCTION"):
        sql(f"SELECT nosuch(value) AS x FROM {H10}", STREAMS)


@pytest.mark.parametrize("text,why", [
    ("CREATE FUNCTION f AS 'tests.test_udf.nothing'", "cannot import 'tests.test_udf.nothing'"),
    ("CREATE FUNCTION f AS 'pyarrow.compute.add'", "not declared with federation.udf"),
    ("CREATE FUNCTION f AS 'x.y' LANGUAGE JAVA", "LANGUAGE JAVA: functions are Python"),
])
def test_create_function_is_refused_at_its_line_when_it_cannot_be_called(text, why):
    with pytest.raises(SqlError, match=why) as e:
        sql(f"{text};\nSELECT value AS x FROM {H10}", STREAMS)
    assert e.value.clause == "CREATE FUNCTION" and e.value.line == 1


def test_what_is_not_a_deterministic_function_of_its_rows_is_refused_where_written():
    rng = iter(range(10**9))

    @udf(returns="BIGINT", name="counter")
    def counter(v):  # a different value at every call
        start = next(rng) * len(v)
        return pa.array(range(start, start + len(v)), pa.int64())

    @udf(returns="BIGINT", name="short")
    def short(v):
        return pa.array([1], pa.int64())

    @udf(returns="INT", name="words")
    def words(v):
        return pa.array(["a"] * len(v))

    w = window(S_SQL, range=10, slide=1)
    with pytest.raises(QueryValidationError, match=r"counter\(\) is not deterministic"):
        w.project(c=counter("value"))
    with pytest.raises(QueryValidationError, match=r"short\(\) returned 1 values for 4096"):
        w.filter(short("value") > 1)
    with pytest.raises(QueryValidationError, match=r"words\(\) returned values that are not "
                       "INT"):
        w.project(c=words("value"))
    with pytest.raises(ValueError, match="returns='FLOAT'"):
        udf(lambda v: v, returns="FLOAT", name="f")
    with pytest.raises(ValueError, match="built-in SQL function"):
        udf(lambda v: v, returns="DOUBLE", name="abs")
    with pytest.raises(QueryValidationError, match=r"scaled\(\) called with 1 argument:"):
        w.project(c=scaled("value"))


def test_a_function_that_raises_in_a_run_fails_it_naming_the_function():
    @udf(returns="DOUBLE", name="picky")
    def picky(v):
        if len(v) < 4096 and pc.any(pc.greater(v, 100.0)).as_py():
            raise ZeroDivisionError("a reading above 100")
        return v

    q = window(S_SQL, range=10, slide=1).project("plug_id", p=picky("value")).rstream()
    with pytest.raises(Exception, match=r"picky\(\) raised ZeroDivisionError: a reading"):
        check_db(q, rows_of(seconds=6, rate=60, plugs=28, houses=4))


def test_the_optimizer_prices_a_call_by_the_function_s_cost():
    from costmodel.operators import DB_COST, SPE_COST
    from costmodel.profile import load_profile
    from costmodel.sizes import NodeSize

    slow = udf(lambda v: v, returns="DOUBLE", name="slow", cost_us=1000.0)
    w = window(S_SQL, range=10, slide=1)
    plain, costly = w.filter("value > 1").node, w.filter(slow("value") > 1).node
    assert costly.python_cost == (1, pytest.approx(1e-3))
    assert plain.python_cost == (0, 0.0)
    p = load_profile()
    kid = NodeSize(rate=100.0, size=1000.0, l=1.0, copies=10.0, row_level=True)
    out = NodeSize(rate=50.0, size=500.0, l=1.0, copies=10.0, row_level=True)
    assert SPE_COST(costly, out, [kid], p) - SPE_COST(plain, out, [kid], p) >= 0.1 * 0.999
    assert DB_COST(costly, 1000.0, p) - DB_COST(plain, 1000.0, p) >= 1.0 * 0.999


#: the selection in DuckDB, the projection computing the group key in Spark, the aggregate
#: in DuckDB: every call crosses the engine boundary
CUT = "op1=db,op2=spe,op3=db"


@pytest.mark.spark
@pytest.mark.parametrize("placement", sampled(["spe", CUT], keep=[CUT]))  # spe: test-long
def test_python_functions_in_spark_and_across_the_engines(spark, plug_data, tmp_path,
                                                          placement):
    from federation.smartplug import smartplug_stream

    q = udf_dsl(smartplug_stream(rate=60, plugs=28, houses=4))
    run_checked(spark, q, placement, plug_data, tmp_path, 5)


@pytest.fixture(scope="module")
def plug_data(tmp_path_factory):
    from federation.smartplug.datagen import generate

    d = tmp_path_factory.mktemp("udf")
    generate(d, rate=60, seconds=16, plugs=28, houses=4, seed=1)
    return d
