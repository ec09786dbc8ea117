"""Query shapes beyond CQ1-CQ6, each under every placement that can run it (issue 8).

One reproducer per class of failure found by trying other queries: a DB step, a Spark step
and a DB step on window rows; a result of window rows in Spark; windows whose slide does not
divide the range; a global aggregate over empty windows (one row per instant, as SQL).
"""

from __future__ import annotations

import itertools
import warnings

import pytest

from db.reference import reference_result
from federation import count, max_, window
from federation.api import run
from federation.errors import PlacementError
from federation.expressions import avg, sum_
from federation.logical import NumberedPlan
from federation.physical import build_physical_plan, placement_string, spe_limits
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.smartplug import smartplug_stream
from federation.smartplug.datagen import generate
from tests.sampling import sampled

pytestmark = pytest.mark.spark

S = smartplug_stream(rate=40, plugs=6, houses=2)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("shapes")
    generate(d, rate=40, seconds=30, plugs=6, houses=2, seed=5)
    return d


def every_placement(q) -> list:
    """spe, db and every explicit placement the engines can run; `make test` runs the
    last mixed one (db when there is none), `make test-long` all."""
    plan = NumberedPlan.of(q)
    ops = plan.r2r_ids
    mixed = []
    for es in itertools.product(("spe", "db"), repeat=len(ops)):
        pl = dict(zip(ops, es))
        if not spe_limits(plan, pl) and len(set(es)) > 1:
            mixed.append(placement_string(pl))
    keep = mixed[-1:] or ["db"]
    return sampled(["spe", "db", *mixed], keep=keep)


def check(spark, q, placement, data, tmp_path, batch=10):
    """Three micro-batches of 10 event seconds by default (Spark pays about 2 s each; the
    windows here are 2-10 s, so a batch completes several slides)."""
    r = run(q, placement, data, work_dir=tmp_path, seconds_per_batch=batch, spark=spark)
    want = reference_result(q, read_clean_rows(r.ingest.spool_dir))
    assert want.num_rows > 0
    problem = diff_results(r.rows, want)
    assert problem is None, f"{placement}: {problem}"
    return r, want


DB_SPE_DB = (window(S, range=5, slide=1).filter("property = 1").filter("house_id = 1")
             .aggregate(by=["house_id"], c=count()).rstream("Q"))
ROWS_RESULT = (window(S, range=3, slide=1).filter("property = 1")
               .project("house_id", "plug_id", "value").rstream("Q"))
MISALIGNED = (window(S, range=7, slide=2).filter("property = 1")
              .aggregate(by=["house_id"], c=count(), m=max_("value")).rstream("Q"))
HALF = window(S, range=3.75, slide=0.5).filter("property = 1") \
    .aggregate(by=["house_id"], a=avg("value"))
MISALIGNED_JOIN = (window(S, range=10, slide=0.5).filter("property = 0")
                   .aggregate(by=["house_id"], n=count())
                   .join(HALF, on=["house_id"]).rstream("Q"))
# window rows joined in Spark with a relation, aggregated there, then a DB-op: Spark's
# watermark above the join lags by the rows' range, and so does the DB-op's input (the fuzzer
# found the DB-op computing such instants before their rows came)
HELD_BACK = (window(S, range=3, slide=1).join(
    window(S, range=4, slide=1).aggregate(by=["house_id"], m=max_("value")), on=["house_id"])
    .aggregate(by=["house_id"], n=count()).filter("n > 1").rstream("Q"))
GLOBAL_EMPTY = (window(S, range=2, slide=1).filter("value > 150")
                .aggregate(by=[], n=count(), m=max_("value"), a=avg("value"), s=sum_("value"))
                .rstream("Q"))


@pytest.mark.parametrize("placement", every_placement(DB_SPE_DB))
def test_db_then_spark_then_db_on_window_rows(spark, data, tmp_path, placement):
    check(spark, DB_SPE_DB, placement, data, tmp_path)


@pytest.mark.parametrize("placement", every_placement(ROWS_RESULT))
def test_result_of_window_rows(spark, data, tmp_path, placement):
    r, want = check(spark, ROWS_RESULT, placement, data, tmp_path)
    # every row once per window holding it: range 3 s at slide 1 s
    assert want.num_rows == 3 * read_clean_rows(r.ingest.spool_dir).filter(
        pa_eq("property", 1)).num_rows


def pa_eq(col, v):
    import pyarrow.compute as pc

    return pc.field(col) == v


@pytest.mark.parametrize("placement", every_placement(MISALIGNED))
def test_slide_that_does_not_divide_the_range(spark, data, tmp_path, placement):
    _, want = check(spark, MISALIGNED, placement, data, tmp_path)
    # instants on the slide's grid (even seconds), each window [tau - 7 s, tau)
    assert {t.second % 2 for t in want.column("tau").to_pylist()} == {0}


@pytest.mark.parametrize("placement", sampled(
    ["spe", "db", "op1=spe,op2=db,op3=spe,op4=spe,op5=db"],
    keep=["db", "op1=spe,op2=db,op3=spe,op4=spe,op5=db"]))
def test_join_of_windows_with_ranges_off_the_slide(spark, data, tmp_path, placement):
    check(spark, MISALIGNED_JOIN, placement, data, tmp_path)


@pytest.mark.parametrize("placement", sampled(
    ["op1=spe,op2=spe,op3=spe,op4=db", "op1=db,op2=spe,op3=spe,op4=db"],
    keep=["op1=db,op2=spe,op3=spe,op4=db"]))
def test_db_op_above_a_spark_aggregate_of_a_rows_join(spark, data, tmp_path, placement):
    # six batches: the DB-op must wait for the watermark held back across batch boundaries
    check(spark, HELD_BACK, placement, data, tmp_path, batch=5)


@pytest.mark.parametrize("placement", every_placement(GLOBAL_EMPTY))
def test_global_aggregate_has_one_row_per_instant(spark, data, tmp_path, placement):
    _, want = check(spark, GLOBAL_EMPTY, placement, data, tmp_path)
    taus = want.column("tau").to_pylist()
    assert len(taus) == len(set(taus))  # one row per instant, none missing in between
    assert all((b - a).total_seconds() == 1 for a, b in itertools.pairwise(taus))
    empty = [row for row in want.to_pylist() if row["n"] == 0]
    assert empty and all(row["m"] is None and row["a"] is None and row["s"] is None
                         for row in empty)


def test_tuple_window_operators_are_refused_in_spark_and_not_chosen(spark, data, tmp_path):
    q = window(S, rows=10, slide=1).filter("property = 1") \
        .aggregate(by=["house_id"], c=count()).rstream("T")
    plan = NumberedPlan.of(q)
    with pytest.raises(PlacementError, match=r"op1 \(select\) cannot run in Spark: it reads a "
                                             r"tuple window"):
        build_physical_plan(plan, "spe")
    r, _ = check(spark, q, "auto", data, tmp_path)
    assert r.summary.placement.startswith("op1=db")
    check(spark, q, "op1=db,op2=spe", data, tmp_path / "b")


#: issue 41: grouped by a column a projection computes (its slice table's key is `v2`)
COMPUTED_KEY = (window(S, range=10, slide=1).project("plug_id", v2="CAST(value AS INT)")
                .aggregate(by=["v2"], n=count()).rstream("computed_key"))


@pytest.mark.parametrize("placement", ["spe", "op1=spe,op2=db", "db"])
def test_grouped_by_a_computed_column(spark, data, tmp_path, placement, monkeypatch):
    """Each placement returns the reference rows. Under db the report fails (a test double
    raises in the predicted memory): the output file is written whole all the same, and
    the summary says what failed."""
    import pyarrow.parquet as pq

    from federation.runtime import summary

    if placement == "db":
        def broken(plan):
            raise RuntimeError("injected into the report")

        monkeypatch.setattr(summary, "predicted_memory", broken)
    out = tmp_path / "out.parquet"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = run(COMPUTED_KEY, placement, data, work_dir=tmp_path / "w", output=out,
                seconds_per_batch=15, spark=spark)
    want = reference_result(COMPUTED_KEY, read_clean_rows(r.ingest.spool_dir))
    assert want.num_rows > 0
    assert diff_results(pq.read_table(out), want) is None, placement
    s = r.summary
    if placement == "db":
        assert s.warnings == ["predicted memory unavailable: RuntimeError: injected into the "
                              "report (tests/test_query_shapes.py:" + s.warnings[0].split(":")[-1]]
        assert s.reporting_failures == 1 and s.predicted_memory == {}
        assert "injected" in (tmp_path / "w" / "summary.json").read_text()
        assert [str(w.message) for w in seen if w.category.__name__ == "ReportingWarning"] \
            == s.warnings
    else:
        assert s.warnings == [] and s.predicted_memory["db_bytes"] >= 0


def test_grouped_by_a_computed_column_from_the_command_line(spark, data, tmp_path, capsys):
    """`fedq run --query FILE:q` under auto (planned with its memory) writes the rows."""
    import pyarrow.parquet as pq

    from federation.cli import main

    f = tmp_path / "mine.py"
    f.write_text("from federation import window, count\n"
                 "from federation.smartplug import smartplug_stream\n"
                 "s = smartplug_stream(rate=40, plugs=6, houses=2)\n"
                 "q = (window(s, range=10, slide=1).project('plug_id', v2='CAST(value AS INT)')\n"
                 "     .aggregate(by=['v2'], n=count()).rstream('computed_key'))\n")
    out = tmp_path / "out.parquet"
    assert main(["run", "--query", f"{f}:q", "--data", str(data), "--output", str(out),
                 "--seconds-per-batch", "15", "--work-dir", str(tmp_path / "w")]) == 0
    printed = capsys.readouterr()
    assert "warning" not in printed.out and "Traceback" not in printed.err
    from federation.runtime.sources import load_inputs

    spool = load_inputs(tmp_path / "w" / "input").spool_dir
    want = reference_result(COMPUTED_KEY, read_clean_rows(spool))
    assert want.num_rows > 0 and diff_results(pq.read_table(out), want) is None
