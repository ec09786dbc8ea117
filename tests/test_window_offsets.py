"""Window offsets (Flink's last argument of TUMBLE, HOP and CUMULATE): a query's instants
are offset + k * slide from the epoch (federation.instants.Grid). Each engine against the
reference at several batch sizes, the instants checked on the grid itself (so a reference
that ignored the offset fails too), in SQL, the legacy group windows and the DSL alike;
with sessions and tuple windows on the query's grid, an adaptive run migrating at offset
instants, a live query set with a table killed and resumed, and the refusals where two
grids would meet."""

from __future__ import annotations

import datetime as dt
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation import sql, window
from federation.errors import QueryValidationError
from federation.instants import Grid
from federation.logical.queryset import QuerySet
from federation.results import diff_results
from federation.runtime.sinks import read_parquet_sink
from federation.sqlfront import SqlError
from tests.sampling import sampled
from tests.test_sql import STREAMS
from tests.test_stranger_queries import check_db, rows_of, run_checked

T = "TABLE smartplug, DESCRIPTOR(ts)"
#: (query, its slide and offset in seconds: every instant is offset + k * slide)
CASES = {
    "tumble": ((f"SELECT plug_id, COUNT(*) AS n, SUM(value) AS s, window_start, window_end "
               f"FROM TUMBLE({T}, INTERVAL '10' SECOND, INTERVAL '3' SECOND) "
               "GROUP BY plug_id, window_start, window_end"), 10, 3),
    "hop_negative": ((f"SELECT plug_id, AVG(value) AS a FROM HOP({T}, 4, 12, -1.5) "
                     "GROUP BY plug_id"), 4, 2.5),
    # 30 slices of 1 s per window: coarse slices sealed from the offset on
    "hop_coarse": ((f"SELECT plug_id, MAX(value) AS m, COUNT(*) AS n FROM HOP({T}, 1, 30, "
                   "0.25) GROUP BY plug_id"), 1, 0.25),
    "cumulate": ((f"SELECT house_id, COUNT(*) AS n, window_start, window_end FROM CUMULATE("
                 f"{T}, 2, 10, 7) GROUP BY house_id, window_start, window_end"), 2, 1),
    "global": (f"SELECT COUNT(*) AS n FROM HOP({T}, 2, 4, 1) WHERE value > 50", 2, 1),
    # a session and a tuple window take the query's grid
    "session_join": ((f"SELECT s.plug_id, COUNT(*) AS n FROM HOP({T}, 5, 10, 2) a JOIN "
                     "SESSION(TABLE smartplug PARTITION BY plug_id, DESCRIPTOR(ts), 0.2) s "
                     "ON a.plug_id = s.plug_id GROUP BY s.plug_id"), 5, 2),
    "rows_join": ((f"SELECT a.plug_id, COUNT(*) AS n FROM HOP({T}, 3, 6, 1) a JOIN "
                  f"ROWS_WINDOW({T}, 3, 5, DESCRIPTOR(plug_id)) r ON a.plug_id = r.plug_id "
                  "GROUP BY a.plug_id"), 3, 1),
}


def on_grid(got: pa.Table, slide: float, offset: float) -> None:
    """Every instant of the result is offset + k * slide."""
    taus = {t.as_py() for t in got.column(0)}
    off = [t for t in taus if Grid(slide, offset).floor(t) != t]
    assert taus and not off, f"instants off the grid: {sorted(off)[:3]}"


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("per_batch", [1, 4])
def test_offsets_in_duckdb_return_the_reference_rows_on_the_grid(case, per_batch):
    text, slide, offset = CASES[case]
    got = check_db(sql(text, STREAMS), rows_of(40, 20, 6, 2), per_batch)
    on_grid(got, slide, offset)


def test_a_tumbling_windows_bounds_are_the_offset():
    """Flink's TUMBLE(..., 10 s, 3 s): windows [3 s, 13 s), [13 s, 23 s), ..., each
    result at its window's end."""
    got = reference_result(sql(CASES["tumble"][0], STREAMS), rows_of(40, 20, 6, 2))
    assert {t.as_py().second % 10 for t in got.column(0)} == {3}


def test_sql_the_legacy_group_window_and_the_dsl_build_one_window():
    s = STREAMS["smartplug"]
    tvf = sql(f"SELECT COUNT(*) AS n FROM TUMBLE({T}, INTERVAL '10' SECOND, "
              "INTERVAL '-3' SECOND)", STREAMS)
    legacy = sql("SELECT COUNT(*) AS n FROM smartplug GROUP BY TUMBLE(ts, INTERVAL '10' "
                 "SECOND, INTERVAL '7' SECOND)", STREAMS)
    dsl = window(s, range=10, slide=10, offset="-3 s").node
    leaf = next(n for n in tvf.walk() if n.kind == "window")
    assert leaf == dsl == next(n for n in legacy.walk() if n.kind == "window")
    assert leaf.offset_s == 7 and leaf.label().endswith("offset 7 s]")
    cum = window(s, range=10, slide=2, offset=-3, cumulate=True).node
    assert cum.offset_s == 7  # a period's origin: kept modulo the size, not the step
    assert Grid(2, cum.offset_s).offset_s == 1


def test_grids_of_one_query_set_agree():
    """12 s and 2 s are one grid of 5-s slides (windows of different grids in one query:
    tests/test_window_slides.py); the queries of a set share one."""
    q = sql(f"SELECT a.plug_id FROM HOP({T}, 5, 10, 12) a JOIN TUMBLE({T}, 5, 2) b "
            "ON a.plug_id = b.plug_id", STREAMS)
    assert all(n.every_s is None for n in q.walk() if n.kind == "window")
    one = sql(f"SELECT COUNT(*) AS n FROM TUMBLE({T}, 5, 1)", STREAMS, name="one")
    two = sql(f"SELECT COUNT(*) AS n FROM TUMBLE({T}, 5)", STREAMS, name="two")
    with pytest.raises(QueryValidationError, match="share one slide and offset .*one slides "
                       "every 5 s from 1 s"):
        QuerySet((one, two))
    with pytest.raises(SqlError, match=r"TUMBLE takes 3 or 4 arguments, TUMBLE\(TABLE s, "
                       r"DESCRIPTOR\(ts\), size \[, offset\]\); got 5"):
        sql(f"SELECT COUNT(*) AS n FROM TUMBLE({T}, 5, 1, 1)", STREAMS)


def test_an_adaptive_run_migrates_at_offset_instants(tmp_path):
    """Segments in DuckDB migrating at 9 s and 15 s (instants of a 2-s slide from 1 s), the
    state moved: every instant once, equal to the reference; a cut off the grid, and a
    decided run over a grid with no whole second (where it decides), are refused (no
    JVM)."""
    from federation.adaptive import AdaptiveError, Segment, run_adaptive
    from federation.smartplug.datagen import generate

    data = tmp_path / "data"
    generate(data, rate=30, seconds=24, plugs=10, houses=3, seed=2)
    q = sql(f"SELECT plug_id, COUNT(*) AS n, AVG(value) AS a FROM HOP({T}, 2, 6, 1) "
            "GROUP BY plug_id", STREAMS)
    t0 = dt.datetime(2013, 9, 1)
    at = [t0 + dt.timedelta(seconds=s) for s in (9, 15)]
    segs = [Segment(start_at=a, stop_at=b, placement="db", rate=300, reason="test")
            for a, b in zip([None, *at], [*at, None])]
    with pytest.raises(AdaptiveError, match="00:00:10 is not an instant of the query "
                       r"\(1 s plus a multiple of its slide, 2 s\)"):
        run_adaptive(q, data, [segs[0].model_copy(update={"stop_at": at[0] + dt.timedelta(
            seconds=1)}), segs[1].model_copy(update={"start_at": at[0] + dt.timedelta(
                seconds=1)})], work_dir=tmp_path / "off")
    halves = sql(f"SELECT COUNT(*) AS n FROM HOP({T}, 2, 6, 0.5)", STREAMS)
    with pytest.raises(AdaptiveError, match="never fall on a whole event second"):
        run_adaptive(halves, data, work_dir=tmp_path / "halves")
    r = run_adaptive(q, data, segs, seconds_per_batch=3, work_dir=tmp_path / "w")
    assert [s.strategy for s in r.segments] == ["start", "move", "move"]
    rows = pa.concat_tables(pq.read_table(p) for p in sorted(data.glob("part-*.parquet")))
    problem = diff_results(r.rows, reference_result(q, rows))
    assert problem is None, problem
    on_grid(r.rows.sort_by([(r.rows.column_names[0], "ascending")]), 2, 1)
    assert pc.min(r.rows.column(0)).as_py() < at[0] < pc.max(r.rows.column(0)).as_py()


@pytest.mark.spark
@pytest.mark.parametrize("case,placement", sampled(
    [("hop_negative", "spe"), ("session_join", "spe"), ("cumulate", "spe"),
     ("rows_cut", "cut")], keep=[("hop_negative", "spe"), ("rows_cut", "cut")]))
def test_offsets_in_spark_return_the_reference_rows(spark, tmp_path, case, placement):
    """Spark's windows start from the offset (`window_column`), as do its panes, its
    sessions' instants, its interval joins' instants and a cumulating window's periods."""
    from benchmarks.fuzz_queries import alternating_placements
    from federation.smartplug.datagen import generate

    d = tmp_path / "data"
    generate(d, rate=30, seconds=16, plugs=10, houses=3, seed=2)
    text = CASES[case][0] if case in CASES else (
        f"SELECT a.plug_id, a.value, m.mx FROM HOP({T}, 2, 4, 1) a JOIN (SELECT plug_id, "
        f"MAX(value) AS mx FROM HOP({T}, 2, 4, 1) GROUP BY plug_id) m ON a.plug_id = "
        "m.plug_id WHERE a.value >= m.mx")
    q = sql(text, STREAMS)
    if placement == "cut":
        placement = alternating_placements(q)[0]
    run_checked(spark, q, placement, d, tmp_path / "run", 4)


def test_a_live_query_set_with_a_table_on_an_offset_grid_killed_and_resumed(tmp_path):
    """Two queries as one run on one grid (2-s slides from 1 s), one joining a database
    table, over a generator paced in wall time; kill -9 once results are out, the same
    command resumes: each query's Parquet directory equals the reference over what the
    generator landed (no JVM)."""
    import duckdb

    from federation.parts import list_parts
    from tests.test_live_streams import CLI, kill9_then_resume

    db = tmp_path / "houses.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE houses AS SELECT h::INT AS house_id, (0.1 * (h + 1))::DOUBLE "
                "AS tariff FROM range(4) t(h)")
    houses = con.sql("SELECT * FROM houses").to_arrow_table()
    con.close()
    texts = {"hot": f"INSERT INTO hot SELECT plug_id, COUNT(*) AS n FROM HOP({T}, 2, 6, 1) "
                    "GROUP BY plug_id",
             "paid": f"INSERT INTO paid SELECT h.tariff, SUM(w.value) AS s FROM TUMBLE({T}, 2, "
                     "-1) w JOIN houses h ON w.house_id = h.house_id GROUP BY h.tariff"}
    files = []
    for name, text in texts.items():
        (tmp_path / f"{name}.sql").write_text(text)
        files += ["--sql", str(tmp_path / f"{name}.sql")]
    work, out = tmp_path / "work", tmp_path / "out"
    url = ("datagen:smartplug?rate=40&plugs=12&houses=4&speed=4&seconds=24&"
           "start=2013-09-01T00:00:00")
    cmd = [sys.executable, "-c", CLI, "run", *files, "--tables", str(db), "--data", url,
           "--placement", "db", "--seconds-per-batch", "4", "--work-dir", str(work),
           "--output", str(out), "--quiet", "--idle-timeout", "300"]
    kill9_then_resume(cmd, tmp_path / "first.log", out / "hot", lambda: None, lambda: None)
    rows = pa.concat_tables(pq.read_table(p) for p in list_parts(work / "landing" /
                                                                 "smartplug"))
    for name, text in texts.items():
        q = sql(text, STREAMS, tables=db)
        got = read_parquet_sink(out / name)
        problem = diff_results(got, reference_result(q, rows, {"houses": houses}))
        assert problem is None, f"{name}: {problem}"
        on_grid(got.sort_by([(got.column_names[0], "ascending")]), 2, 1)
