"""End to end through Spark and DuckDB: bad input during a run, `fedq run`, metrics."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.api import run
from federation.cli import main
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

pytestmark = pytest.mark.spark
LATE = "late: event time is before the watermark (largest earlier event time - allowed lateness)"


def test_bad_rows_are_dead_lettered_and_the_run_goes_on(spark, tmp_path):
    data = tmp_path / "data"
    generate(data, rate=40, seconds=20, plugs=5, seed=3)
    # inject one row of each kind into second 12
    path = sorted(data.glob("part-*.parquet"))[12]
    t = pq.read_table(path)
    good = t.to_pylist()
    base = dict(good[0])
    late = {**base, "id": 10**6, "ts": base["ts"] - dt.timedelta(seconds=5)}
    unknown = {**base, "id": 10**6 + 1, "property": 9}
    null = {**base, "id": 10**6 + 2, "plug_id": None}
    pq.write_table(pa.Table.from_pylist(good + [late, unknown, null], schema=t.schema), path)
    q = QUERIES["CQ5"](rate=40, scale=1 / 30, plugs=5)
    r = run(q, "op2=db", data, work_dir=tmp_path / "w", seconds_per_batch=4, spark=spark)
    assert r.summary.dead_lettered == 3
    assert r.summary.dead_by_reason == {  # by stream and reason
        f"smartplug: {LATE}": 1, "smartplug: unknown property code 9": 1,
        "smartplug: null in column 'plug_id'": 1}
    want = reference_result(q, read_clean_rows(r.ingest.spool_dir))
    assert diff_results(r.rows, want) is None
    m = r.metrics[0]
    assert m.rows_in >= 0 and m.transfer_s > 0 and m.db_s >= 0 and m.wall_s > 0


def test_fedq_run_writes_results_with_tau(spark, tmp_path, capsys):
    out = tmp_path / "res.parquet"
    rc = main(["run", "CQ3", "--placement", "op2=db,op4=db", "--rate", "40", "--seconds", "15",
               "--plugs", "4", "--scale", "0.05", "--seconds-per-batch", "5", "--output",
               str(out), "--work-dir", str(tmp_path / "w"), "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "placement op1=spe,op2=db,op3=spe,op4=db" in text and "rho" in text
    assert "dead-lettered rows 0" in text
    t = pq.read_table(out)
    assert t.column_names[0] == "tau" and t.num_rows > 0


def test_bad_placement_is_a_clear_error(spark, tmp_path, capsys):
    rc = main(["run", "CQ3", "--placement", "op9=db", "--seconds", "3", "--plugs", "2",
               "--work-dir", str(tmp_path), "--quiet"])
    assert rc == 2
    assert "placement names 'op9': not an operator" in capsys.readouterr().err


@pytest.mark.parametrize("when", [dt.datetime(2030, 1, 1), dt.datetime(1960, 1, 1)])
def test_one_outlier_timestamp_costs_no_good_row(spark, tmp_path, when):
    # issue 8: one reading dated 2030 (or 1960) once lost every later row and the memory
    data = tmp_path / "data"
    generate(data, rate=40, seconds=20, plugs=5, seed=3)
    path = sorted(data.glob("part-*.parquet"))[2]
    t = pq.read_table(path)
    rows = t.to_pylist()
    rows[0]["ts"] = when
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), path)
    q = QUERIES["CQ5"](rate=40, scale=1 / 30, plugs=5)
    r = run(q, "db", data, work_dir=tmp_path / "w", seconds_per_batch=4, spark=spark)
    assert r.summary.input_rows == 800 and r.summary.dead_lettered == 1
    assert r.ingest.rows_ok == 799
    assert r.summary.deadletter_dir.startswith(str(tmp_path / "w"))
    want = reference_result(q, read_clean_rows(r.ingest.spool_dir))
    assert diff_results(r.rows, want) is None
    assert r.summary.event_seconds == 20
