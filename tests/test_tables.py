"""Database tables in a query (federation/logical/table.py, federation/runtime/tables.py): a
table of a DuckDB file joined (inner, or outer keeping the stream's rows) with window rows
or with an aggregate equals the reference under spe, db, auto and a placement that
alternates engines; a run reads the table as it
was when the run started (updated mid-run, the run's results keep that version; the next
run reads the new one); queries a table cannot serve are refused where they are written."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation import avg, count, sum_, table, window
from federation.errors import QueryValidationError
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.smartplug import smartplug_stream
from federation.smartplug.datagen import generate
from tests.sampling import sampled
from tests.test_many_streams import PLACEMENTS

HOUSES, SECONDS = 4, 20
PLUGS = smartplug_stream(rate=40, plugs=12, houses=HOUSES)


def make_db(path) -> None:
    """Houses 0, 1, 3 and 7 (house 2 has no row: its readings join nothing), a DECIMAL
    tariff (read as DOUBLE) and a city."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE houses (house_id INTEGER, tariff DECIMAL(6,3), city VARCHAR, "
                "active BOOLEAN)")
    con.execute("INSERT INTO houses VALUES (0, 0.120, 'Ulm', true), (1, 0.250, 'Jena', true),"
                " (3, 0.180, 'Kiel', false), (7, 0.300, 'Gera', true)")
    con.close()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    generate(root / "plugs", rate=40, seconds=SECONDS, plugs=12, houses=HOUSES, seed=5)
    make_db(root / "ref.duckdb")
    return root


def rows_join(db):
    """Window rows joined with a table (filtered, projected), aggregated per house."""
    a = (window(PLUGS, range=4, slide=1).filter("property = 1")
         .project("house_id", "plug_id", w="value"))
    t = table("houses", db=db).filter("active").project("house_id", "tariff")
    return a.join(t, on=["house_id"]).aggregate(
        by=["house_id"], spend=sum_("w * tariff"), n=count()).rstream("spend")


def table_join_aggregate(db):
    """A table on the left of a join with an aggregate of a window."""
    load = window(PLUGS, range=5, slide=1).aggregate(by=["house_id"], load=avg("value"))
    t = table("houses", db=db).project("city", "tariff", house="house_id")
    return t.join(load, on=[("house", "house_id")]).project(
        "house", "city", cost="load * tariff").rstream("cost")


def rows_left_join(db):
    """Every window row, with its house's tariff where the table has the house (house 2
    has none: NULL), counted per house and tariff."""
    a = window(PLUGS, range=4, slide=1).project("house_id", w="value")
    t = table("houses", db=db).project("house_id", "tariff")
    return a.join(t, on=["house_id"], how="left").aggregate(
        by=["house_id", "tariff"], n=count(), priced=count("tariff")).rstream("priced")


def table_right_join(db):
    """The mirror: a table on the left of a RIGHT join keeps every aggregate row."""
    load = window(PLUGS, range=5, slide=1).aggregate(by=["house_id"], load=avg("value"))
    t = table("houses", db=db).filter("active").project("city", house="house_id")
    return t.join(load, on=[("house", "house_id")], how="right").rstream("cities")


def test_a_table_is_read_as_declared_and_refused_where_it_cannot_serve(setup):
    db = setup / "ref.duckdb"
    t = table("houses", db=db)
    assert t.schema == {"house_id": "INT", "tariff": "DOUBLE", "city": "VARCHAR",
                        "active": "BOOLEAN"}
    assert t.node.rows == 4 and dict(t.node.distinct)["house_id"] == 4
    with pytest.raises(QueryValidationError, match=r"no table 'plugs' in .* \(it has: houses\)"):
        table("plugs", db=db)
    with pytest.raises(QueryValidationError, match="no database file"):
        table("houses", db=setup / "missing.duckdb")
    with pytest.raises(QueryValidationError, match="unknown column 'price'"):
        t.filter("price > 1")
    with pytest.raises(QueryValidationError, match="aggregate: input: reads only database"):
        t.aggregate(by=["city"], n=count())
    with pytest.raises(QueryValidationError, match="rstream: input: the query reads no st"):
        t.rstream()
    with pytest.raises(QueryValidationError, match="join: input: both inputs read only"):
        t.join(table("houses", db=db).project(h="house_id"), on=[("house_id", "h")])
    with pytest.raises(QueryValidationError, match="window: input: .* not a table"):
        window(t, range=4)


def test_the_db_op_reads_the_table_in_place_and_the_optimizer_knows_its_size(setup):
    from federation.logical import NumberedPlan
    from federation.optimizer import plan_for
    from federation.physical import build_physical_plan

    q = rows_join(setup / "ref.duckdb")
    plan = NumberedPlan.of(q)
    assert [o for o in plan.nodes if o.startswith("t")] == ["t1"]
    pp = build_physical_plan(plan, "db")
    (op,) = pp.db_ops
    (ti,) = [ci for ci in op.inputs if ci.node.kind == "table"]
    assert not ti.row_level
    sql = op.sql_text
    assert f'"{ti.table}"' in sql and "active" in sql.lower()  # the table's filter in SQL
    # the cost model: the join's size follows the table's rows (3 active of 4 houses)
    from costmodel.sizes import SourceDrivenSizes
    sizes = SourceDrivenSizes.of(plan)
    assert sizes["t1"].rate == 0 and 1 <= sizes["t1"].size <= 4
    assert plan_for(q, "auto")[0].placement  # the optimizer places a plan with a table


@pytest.mark.spark
@pytest.mark.parametrize("make,which", sampled(
    [(m, p) for m in (rows_join, table_join_aggregate, rows_left_join, table_right_join)
     for p in PLACEMENTS],
    keep=[(rows_join, "spe"), (table_join_aggregate, "alternating"),
          (table_right_join, "alternating")]),  # Spark's stream-static right outer join
    ids=lambda v: getattr(v, "__name__", v))
def test_a_table_join_equals_the_reference_in_every_placement(make, which, setup, tmp_path,
                                                              spark):
    from tests.test_many_streams import check, placements_of

    q = make(setup / "ref.duckdb")
    check(q, placements_of(q, which), setup / "plugs", tmp_path / "w", spark)


@pytest.mark.spark
def test_a_run_reads_the_table_as_it_was_when_it_started(setup, tmp_path, spark):
    """The table is updated (a tariff changed, a house added) after the run's first
    micro-batch: every instant of that run sees the old version, the next run the new."""
    import shutil

    from federation.api import run
    from tests.test_many_streams import check

    db = tmp_path / "ref.duckdb"
    shutil.copy(setup / "ref.duckdb", db)
    q = rows_join(db)
    before = duckdb.connect(str(db), read_only=True).sql(
        "SELECT house_id, tariff::DOUBLE AS tariff, city, active FROM houses").to_arrow_table()
    updated = []

    def update(m):
        if not updated:
            con = duckdb.connect(str(db))  # the run does not hold the file: this can write
            con.execute("UPDATE houses SET tariff = tariff * 10")
            con.execute("INSERT INTO houses VALUES (2, 0.5, 'Hof', true)")
            con.close()
            updated.append(m)

    for pl in ("db", "spe"):
        updated.clear()
        r = run(q, pl, setup / "plugs", work_dir=tmp_path / pl, seconds_per_batch=4,
                spark=spark, progress=update)
        assert updated and r.summary.data_batches > 2
        rows = read_clean_rows(r.ingest.spool_dir)
        assert diff_results(r.rows, reference_result(q, rows, {"houses": before})) is None
        if pl == "db":  # the next run reads the new version
            r2 = check(q, pl, setup / "plugs", tmp_path / f"{pl}-next", spark)
            assert diff_results(r2.rows, r.rows) is not None
        shutil.copy(setup / "ref.duckdb", db)


def test_sql_reads_a_table_by_name_from_the_file_given_with_tables(setup, tmp_path, capsys):
    from federation.cli import main

    sql = tmp_path / "spend.sql"
    sql.write_text(
        "SELECT l.house_id, h.city, l.load * h.tariff AS cost FROM (SELECT house_id, "
        "AVG(value) AS load FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, "
        "INTERVAL '5' SECOND) GROUP BY window_end, house_id) l JOIN houses h "
        "ON l.house_id = h.house_id WHERE h.active")
    assert main(["explain", "--sql", str(sql), "--tables", str(setup / "ref.duckdb")]) == 0
    out = capsys.readouterr().out
    assert "table houses (ref.duckdb) where active" in out, out  # the filter went with it
    with pytest.raises(SystemExit, match="needs --tables FILE"):
        main(["explain", "--sql", str(sql)])
    with pytest.raises(SystemExit, match="--tables: .* is not a file"):
        main(["explain", "--sql", str(sql), "--tables", str(tmp_path / "none.duckdb")])


def test_an_adaptive_run_reads_the_table_copied_at_its_start_in_every_segment(setup, tmp_path):
    """A table join re-placed mid-run (DuckDB, then DuckDB again from a replay of the last
    extent: the new placement's DB-ops load the table anew; no JVM): the table is updated
    during the first segment; both segments read the copy made when the adaptive run
    started, so the rows equal the reference over the old version."""
    import datetime as dt
    import shutil

    from federation.adaptive import Segment, run_adaptive
    from federation.adaptive.inputs import part_files

    db = tmp_path / "ref.duckdb"
    shutil.copy(setup / "ref.duckdb", db)
    q = rows_join(db)
    before = duckdb.connect(str(db), read_only=True).sql(
        "SELECT house_id, tariff::DOUBLE AS tariff, city, active FROM houses").to_arrow_table()

    def update(m):
        if not (tmp_path / "updated").exists():
            con = duckdb.connect(str(db))
            con.execute("UPDATE houses SET tariff = tariff * 10")
            con.close()
            (tmp_path / "updated").touch()

    files = part_files(setup / "plugs", "ts")
    at = files[0].start + dt.timedelta(seconds=10)
    segs = [Segment(start_at=None, stop_at=at, placement="db", rate=40, reason="test"),
            Segment(start_at=at, stop_at=None, placement="db", rate=40, reason="test")]
    r = run_adaptive(q, setup / "plugs", segs, seconds_per_batch=4,
                     work_dir=tmp_path / "w", progress=update, strategy="replay")
    assert (tmp_path / "updated").exists() and len(r.segments) == 2
    assert all(s.result_rows > 0 for s in r.segments)
    rows = pa.concat_tables(pq.read_table(f.path) for f in files)
    problem = diff_results(r.rows, reference_result(q, rows, {"houses": before}))
    assert problem is None, problem
