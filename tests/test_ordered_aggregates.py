"""MIN and MAX of VARCHARs (in the order of their bytes, UTF-8's code points: Spark's and
DuckDB's alike) and of TIMESTAMPs (Nexmark q16's latest minute), over window rows (sliced
in DuckDB: the slices keep partial minima and maxima) and over a relation, in pure DuckDB
and in Spark, equal to the reference."""

from __future__ import annotations

import pytest

from federation.expressions import count, max_, min_
from federation.logical import window
from tests.test_sql import S as S_SQL
from tests.test_stranger_queries import check_db, generated_plugs, rows_of, run_checked


def ordered():
    w = window(S_SQL, range=10, slide=1).project(
        "house_id", "plug_id", "ts", t="STRFTIME(ts, '%H:%M:%S')",
        name="'plug-' || CAST(plug_id AS VARCHAR)")
    per_plug = w.aggregate(by=["house_id", "plug_id"], first=min_("ts"), last=max_("t"),
                           lo=min_("name"), n=count())
    return per_plug.aggregate(by=["house_id"], latest=max_("last"), least=min_("lo"),
                              earliest=min_("first")).rstream("ordered")


def test_min_and_max_of_strings_and_times_in_duckdb_equal_the_reference():
    got = check_db(ordered(), rows_of(seconds=20, rate=60, plugs=28, houses=4))
    assert got.schema.field("earliest").type.equals(got.schema.field("tau").type)
    assert all(v.startswith("plug-") for v in got.column("least").to_pylist())


def test_min_of_a_boolean_is_still_refused():
    from federation.errors import QueryValidationError

    with pytest.raises(QueryValidationError, match="MIN over non-numeric"):
        window(S_SQL, range=10, slide=1).aggregate(by=["house_id"], b=min_("plug_id > 1"))


@pytest.fixture(scope="module")
def plug_data(tmp_path_factory):
    return generated_plugs(tmp_path_factory, "ordered", seed=3, plugs=20, houses=2)


@pytest.mark.spark
def test_min_and_max_of_strings_and_times_in_spark_equal_the_reference(spark, plug_data,
                                                                       tmp_path):
    run_checked(spark, ordered(), "spe", plug_data, tmp_path, per_batch=4)
