"""STDDEV, VARIANCE, MEDIAN and percentiles (issue 44; federation/logical/spread.py,
median.py): in pure DuckDB through the DB-op runtime against the reference evaluator (no
JVM), and at sampled instants against DuckDB's own STDDEV_SAMP, STDDEV_POP, VAR_SAMP,
VAR_POP, MEDIAN, PERCENTILE_CONT/DISC and QUANTILE_CONT/DISC over the window's rows."""

from __future__ import annotations

import datetime as dt

import pytest

from federation import median, percentile, sql, stddev, variance
from federation.logical import window
from federation.sqlfront import SqlError
from tests.test_sql import STREAMS, S
from tests.test_stranger_queries import check_db, rows_of
from tests.test_subqueries import W, at, oracle

#: per group: SQL's STDDEV and VARIANCE (the sample's), the population's, with a FILTER, of
#: values large beside their spread (id + 1e6: sum(x^2) - sum(x)^2 / n would lose the sixth
#: decimal; at 1e9 DuckDB's own VARIANCE does), and
#: groups of one row (a sample's NULL) where few readings pass
GROUPED = f"""SELECT plug_id, STDDEV(value) AS s, STDDEV_POP(value) AS sp,
VARIANCE(id + 1000000) AS big, VAR_POP(value) FILTER (WHERE value > 50) AS vf,
COUNT(*) AS n FROM {W} WHERE value > 90 GROUP BY plug_id"""
#: the whole instant (a median beside the spreads), and over a partition (OVER)
WHOLE = f"""SELECT STDDEV_SAMP(value) AS s, VAR_SAMP(value) AS v, AVG(value) AS m,
MEDIAN(value) AS med FROM {W}"""
OVER = f"""SELECT id, house_id, STDDEV_POP(value) OVER (PARTITION BY house_id) AS sp,
MAX(value) OVER (PARTITION BY house_id) AS top, MEDIAN(value) OVER (PARTITION BY house_id)
AS med FROM {W} WHERE value < 30"""
#: medians: of a DOUBLE and of an INT (odd and even counts: the mean of the middle two),
#: none where FILTER passes no value (NULL), per house
MEDIANS = f"""SELECT house_id, MEDIAN(value) AS med, MEDIAN(plug_id) AS mp,
MEDIAN(value) FILTER (WHERE value > 500) AS none_, COUNT(*) AS n FROM {W}
GROUP BY house_id"""

#: percentiles (median.py), as SQL, DuckDB and Flink spell them: interpolated and discrete,
#: at 0.28 (0.28 n is 7.000000000000001 in floating point at n = 25: read as 7/25), in a
#: descending order, at 0 and 1, with FILTER; over a partition
PERCENTILES = f"""SELECT plug_id, PERCENTILE_CONT(0.28) WITHIN GROUP (ORDER BY value) AS p28,
PERCENTILE_DISC(0.28) WITHIN GROUP (ORDER BY value) AS d28,
PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY value DESC) AS p90d,
PERCENTILE_DISC(0.3) WITHIN GROUP (ORDER BY id DESC) AS d30d, QUANTILE_CONT(value, 0) AS q0,
QUANTILE_DISC(value, 1) AS q1, QUANTILE_CONT(value, 0.75) FILTER (WHERE value > 50) AS qf,
COUNT(*) AS n FROM {W} GROUP BY plug_id"""
PERCENTILE_OVER = f"""SELECT id, value, QUANTILE_CONT(value, 0.25) OVER (PARTITION BY house_id)
AS q, QUANTILE_DISC(id, 0.6) OVER (PARTITION BY house_id) AS d FROM {W} WHERE value > 100"""


@pytest.mark.parametrize("text", [GROUPED, WHOLE, OVER, MEDIANS, PERCENTILES, PERCENTILE_OVER],
                         ids=["grouped", "whole", "over", "medians", "percentiles",
                              "percentile_over"])
def test_spread_equals_the_reference_and_duckdb_s_own(text):
    q = sql(text, STREAMS)
    rows = rows_of(seconds=20, rate=30, plugs=28, houses=4)
    got = check_db(q, rows, per_batch_s=5)
    first = min(rows.column("ts").to_pylist()).replace(microsecond=0)
    for s in (3, 10, 17):
        tau = first + dt.timedelta(seconds=s)
        assert at(got, tau, list(q.schema)) == oracle(text, rows, tau), tau
    if text is GROUPED:  # groups of one reading: the sample's spread is NULL
        one = [r for r in got.to_pylist() if r["n"] == 1]
        assert one and all(r["s"] is None and r["sp"] == 0 for r in one)


def test_spread_in_the_dsl_and_its_refusals():
    w = window(S, range=10, slide=1)
    by_sql = sql(f"SELECT plug_id, STDDEV(value) AS s FROM {W} GROUP BY plug_id", STREAMS)
    dsl = w.aggregate(by=["plug_id"], s=stddev("value"))
    assert by_sql.schema == dsl.schema == {"plug_id": "INT", "s": "DOUBLE"}
    assert list(w.aggregate(v=variance("value", population=True)).schema) == ["v"]
    assert w.aggregate(by=["house_id"], m=median("plug_id")).schema["m"] == "DOUBLE"
    with pytest.raises(ValueError, match="MEDIAN.ts. of TIMESTAMP: of a number"):
        w.aggregate(m=median("ts"))
    with pytest.raises(SqlError, match=r"DISTINCT \.\.\.\) of the distinct values"):
        sql(f"SELECT STDDEV(DISTINCT value) AS s FROM {W}", STREAMS)
    # Flink's PERCENTILE(x, p) is PERCENTILE_CONT; the DSL's percentile(), MEDIAN at 0.5
    flink = sql(f"SELECT plug_id, PERCENTILE(value, 0.9) AS p FROM {W} GROUP BY plug_id",
                STREAMS)
    assert flink == sql(f"SELECT plug_id, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY value) "
                        f"AS p FROM {W} GROUP BY plug_id", STREAMS)
    assert flink == w.aggregate(by=["plug_id"], p=percentile("value", 0.9)).rstream()
    assert w.aggregate(m=median("value")) == w.aggregate(m=percentile("value", "0.5"))
    for bad in ("1.5", "-0.1", "value"):
        with pytest.raises(SqlError, match="the fraction is a number from 0 to 1"):
            sql(f"SELECT QUANTILE_CONT(value, {bad}) AS q FROM {W}", STREAMS)
    with pytest.raises(ValueError, match="a number between 0 and 1"):
        percentile("value", 2)


@pytest.mark.spark
@pytest.mark.long
@pytest.mark.parametrize("text,cut", [(GROUPED, False), (MEDIANS, True),
                                      (PERCENTILES, True)],
                         ids=["grouped-spe", "medians-cut", "percentiles-cut"])
def test_spread_in_spark_and_across_the_engines(spark, tmp_path, text, cut):
    """Pure Spark, or cut at every engine boundary (the placement that alternates engines
    by depth: the means, their join, the squared deviations' sums apart)."""
    from benchmarks.fuzz_queries import alternating_placements
    from federation.smartplug import smartplug_stream
    from federation.smartplug.datagen import generate
    from tests.test_stranger_queries import run_checked

    d = tmp_path / "data"
    generate(d, rate=30, seconds=16, plugs=28, houses=4, seed=1)
    q = sql(text, {"smartplug": smartplug_stream(rate=30, plugs=28, houses=4)})
    placement = alternating_placements(q)[0] if cut else "spe"
    run_checked(spark, q, placement, d, tmp_path / "run", 5)
