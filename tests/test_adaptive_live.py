"""Adaptive runs on live input (federation/adaptive/live.py): one follower for the whole
run, each segment cut from its spools as they grow. Generators paced in wall time are the
sources; every run's sink is compared with the reference over what the sources landed.
Without the JVM: given segments all in DuckDB (state moved), over two streams and two
queries, with a table, and killed with -9 then resumed; with Spark: a run that decides
while the rate changes, and migrates."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.adaptive import Segment, run_adaptive
from federation.cli.status import status_lines
from federation.instants import Grid
from federation.parts import list_parts, list_spool
from federation.results import diff_results
from federation.runtime.sinks import read_parquet_sink
from federation.runtime.status import run_status
from federation.smartplug.queries import QUERIES

ROOT = Path(__file__).resolve().parents[1]
T0 = dt.datetime(2013, 9, 1)
PLUGS = "datagen:smartplug?plugs=40&start=2013-09-01T00:00:00"


def landed(work: Path, stream: str = "smartplug") -> pa.Table:
    """What a source landed in the run's landing directory."""
    return pa.concat_tables(pq.read_table(p) for p in list_parts(work / "landing" / stream))


def db_segments(*cuts: int) -> list[Segment]:
    """Segments all in DuckDB migrating at the given event seconds."""
    at = [None, *(T0 + dt.timedelta(seconds=s) for s in cuts), None]
    return [Segment(start_at=a, stop_at=b, placement="db", rate=150, reason="test")
            for a, b in itertools.pairwise(at)]


def table_of(path: Path, name: str = "results") -> pa.Table:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
    finally:
        con.close()


def test_two_streams_and_two_queries_live_migrate_with_each_instant_once(tmp_path, capsys):
    """Nexmark q8 (person joined with auction) and a query over person alone, as one set,
    from two generators paced in wall time, re-placed at two instants (DuckDB, the state
    moved, each new placement started before the old one ended): each query's Parquet
    directory, written as the segments compute, equals the reference over what the
    generators landed."""
    from test_live_streams import NX_START, _reference, q8_and_persons

    from federation.cli.report import print_adaptive

    url = f"datagen:nexmark?rate=1000&speed=10&seconds=40&start={NX_START}"
    q = q8_and_persons()
    start = dt.datetime.fromisoformat(NX_START)
    at = [start + dt.timedelta(seconds=s) for s in (20, 30)]
    segs = [Segment(start_at=a, stop_at=b, placement="db", rate=1000, reason="test")
            for a, b in zip([None, *at], [*at, None])]
    work, out = tmp_path / "w", tmp_path / "out"
    r = run_adaptive(q, {"person": url, "auction": url}, segs, seconds_per_batch=4,
                     work_dir=work, output=out)
    assert r.rows is None and [s.strategy for s in r.segments] == ["start", "move", "move"]
    # each new placement set up while the old one ran (an overlapped start)
    assert all(s.overlap_s is not None and s.overlap_s > 0 for s in r.segments[1:]), [
        s.overlap_s for s in r.segments]
    # each gap: the old placement's tail, then the new one's first result after its end
    for g, old, new in zip(r.gaps_s, r.segments, r.segments[1:]):
        assert g == pytest.approx(old.tail_s + new.first_after_s, abs=0.5), (g, old, new)
    print_adaptive(r)
    assert capsys.readouterr().out.count(" s from the old placement's last result") == 2
    assert all(s.result_rows > 0 for s in r.segments), [
        (s.segment.start_at, s.result_rows, s.input_seconds) for s in r.segments]
    rows = {n: landed(work, n) for n in ("person", "auction")}
    problem = diff_results(read_parquet_sink(out / "q8"), _reference(rows))
    assert problem is None, problem
    persons = next(m for m in q.queries if m.name != "q8")
    got = read_parquet_sink(out / persons.name)
    problem = diff_results(got, reference_result(persons, rows["person"]))
    assert problem is None, problem


def test_a_followed_file_across_a_migration_instant_is_cut_by_rows(tmp_path):
    """A followed directory whose files hold three event seconds each, migration instants
    inside two of them (DuckDB, the state moved): the old placement keeps the readings
    before the instant, the new one takes only those from it on, and a late reading below
    the instant (within the allowed lateness) in the file after it is the old placement's;
    the output equals the reference, each reading counted once."""
    from federation.smartplug.datagen import generate

    gen = tmp_path / "gen"
    generate(gen, rate_profile=[(150, 42)], plugs=40, seed=4)
    parts = [pq.read_table(p) for p in list_parts(gen)]
    landing = tmp_path / "landing"
    landing.mkdir()
    for i in range(0, len(parts), 3):
        t = pa.concat_tables(parts[i:i + 3])
        if i == 18:  # second 18's file also holds a late reading of second 15
            t = pa.concat_tables([t, parts[15].slice(0, 1)])
        pq.write_table(t, landing / f"part-{i:08d}.parquet")
    q = QUERIES["CQ3"](rate=150, scale=0.05, plugs=40)
    work, out = tmp_path / "w", tmp_path / "out.duckdb"
    r = run_adaptive(q, f"follow:{landing}", db_segments(16, 28), seconds_per_batch=3,
                     work_dir=work, output=str(out), allowed_lateness_s=3,
                     until=T0 + dt.timedelta(seconds=41))
    assert [s.strategy for s in r.segments] == ["start", "move", "move"]
    rows = pa.concat_tables(pq.read_table(p) for p in list_parts(landing))
    problem = diff_results(table_of(out), reference_result(q, rows))
    assert problem is None, problem
    # an old placement's input ends at its instant plus the lateness: the file reaching
    # past it is cut there (none of the next placement's readings in its last batch)
    for k, end in ((0, 19), (1, 31)):
        last = pq.read_table(list_spool(work / f"segment{k}" / "spool" / "smartplug")[-1])
        assert max(last.column("ts").to_pylist()) == T0 + dt.timedelta(seconds=end)


@pytest.mark.parametrize("live,strategy", [(True, "move"), (False, "move"),
                                           (False, "replay")])
def test_a_migration_after_the_last_reading_computes_from_the_moved_state(
        live, strategy, tmp_path):
    """A directory whose last reading is at second 19, followed or replayed, migration
    instants at 10 and 21 (DuckDB): the last segment has no reading of its own, only the
    windows' rows moved to it (or a replay's warm-up), and computes the instants up to the
    last reading's extent from them (CQ3 joins a 15-s and a 3-s window: rows up to instant
    22); the output equals the reference. (Followed, it crashed: no clock in its spool;
    replayed, its drain counted instants up to the far-future flush.)"""
    from federation.smartplug.datagen import generate

    landing = tmp_path / "landing"
    generate(landing, rate_profile=[(150, 20)], plugs=40, seed=5)
    q = QUERIES["CQ3"](rate=150, scale=0.05, plugs=40)
    work, out = tmp_path / "w", tmp_path / "out.duckdb"
    r = run_adaptive(q, f"follow:{landing}" if live else landing, db_segments(10, 21),
                     seconds_per_batch=3, work_dir=work, output=str(out), strategy=strategy,
                     **({"until": T0 + dt.timedelta(seconds=19)} if live else {}))
    assert [s.strategy for s in r.segments] == ["start", strategy, strategy]
    want = reference_result(q, pa.concat_tables(pq.read_table(p)
                                                for p in list_parts(landing)))
    got = table_of(out)
    problem = diff_results(got, want)
    assert problem is None, problem
    assert r.segments[2].result_rows > 0


def test_a_live_adaptive_run_reads_the_table_copied_at_its_start(tmp_path):
    """Smart-plug readings joined with a DuckDB table, live, re-placed from a replay of the
    last extent (no JVM): the table is updated during the first segment, and both
    segments read the copy made when the run started."""
    from federation.expressions import count, sum_
    from federation.logical import table, window
    from federation.smartplug import smartplug_stream

    db = tmp_path / "ref.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE houses (house_id INTEGER, tariff DOUBLE, active BOOLEAN)")
    con.execute("INSERT INTO houses SELECT i, 0.1 + i / 100, i % 3 <> 0 FROM range(4) t(i)")
    before = con.sql("SELECT * FROM houses").to_arrow_table()
    con.close()
    a = (window(smartplug_stream(rate=40, plugs=12, houses=4), range=4, slide=1)
         .filter("property = 1").project("house_id", w="value"))
    t = table("houses", db=db).filter("active").project("house_id", "tariff")
    q = a.join(t, on=["house_id"]).aggregate(by=["house_id"], spend=sum_("w * tariff"),
                                             n=count()).rstream("spend")

    def update(m):
        if not (tmp_path / "updated").exists():
            c = duckdb.connect(str(db))
            c.execute("UPDATE houses SET tariff = tariff * 10")
            c.close()
            (tmp_path / "updated").touch()

    work, out = tmp_path / "w", tmp_path / "out.duckdb"
    url = "datagen:smartplug?rate=40&plugs=12&houses=4&speed=10&seconds=24&" \
          "start=2013-09-01T00:00:00"
    r = run_adaptive(q, url, db_segments(12), seconds_per_batch=4, work_dir=work,
                     output=str(out), progress=update, strategy="replay")
    assert (tmp_path / "updated").exists() and [s.strategy for s in r.segments] == [
        "start", "replay"]
    assert r.segments[1].warmup_seconds == 0 and all(s.result_rows for s in r.segments)
    want = reference_result(q, landed(work), {"houses": before})
    problem = diff_results(table_of(out), want)
    assert problem is None, problem


KILLED = """
import datetime as dt, sys
from federation.adaptive import Segment, run_adaptive
from federation.cli.status import status_lines
from federation.smartplug.queries import QUERIES
T0 = dt.datetime(2013, 9, 1)
url, work, out = sys.argv[1:4]
q = QUERIES["CQ3"](rate=150, scale=0.05, plugs=40)
at = [None, T0 + dt.timedelta(seconds=15), T0 + dt.timedelta(seconds=27), None]
segs = [Segment(start_at=a, stop_at=b, placement="db", rate=150, reason="t")
        for a, b in zip(at, at[1:])]
r = run_adaptive(q, url, segs, seconds_per_batch=5, work_dir=work, output=out)
print("segments", len(r.segments), "rows", sum(s.result_rows for s in r.segments))
"""


@pytest.mark.parametrize("fault", ["migration:2", pytest.param("after_commit:4",
                                                   marks=pytest.mark.long)])
def test_a_live_adaptive_run_killed_resumes_with_each_instant_once(fault, tmp_path):
    """kill -9 as the third placement starts while the second still runs (`migration`),
    or in the middle of a segment (`after_commit`), while the generator goes on in wall
    time; then the same command: the run's follower goes on from its spools (the
    generator from what landed), the segment in progress from its checkpoints and its
    spool's cut, and the DuckDB table has every instant once, equal to the reference."""
    url = f"{PLUGS}&rate=150&speed=8&seconds=42"
    work, out = tmp_path / "w", tmp_path / "out.duckdb"
    cmd = [sys.executable, "-c", KILLED, url, str(work), str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDQ_FAULT": fault}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                       start_new_session=True, check=False)
    assert p.returncode == -9, p.stderr[-2000:]
    lines = status_lines(run_status(work))  # fedq status: what the work directory says
    assert lines[0] == "adaptive run CQ3: not running" and "following" in lines[1], lines
    segs = [x for x in lines if x.startswith("  segment ")]
    # killed in a segment (with an overlapped start, the next may be setting up too)
    assert "in progress" in segs[-1] and "segment 1: db  the first instant" in segs[0], lines
    env.pop("FEDQ_FAULT")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                       start_new_session=True, check=False)
    assert r.returncode == 0 and "segments 3" in r.stdout, r.stderr[-2000:] + r.stdout
    segs = [x for x in status_lines(run_status(work)) if x.startswith("  segment ")]
    assert [x.split(": ")[-1].split(" (")[0] for x in segs] == ["finished"] * 3, segs
    want = reference_result(QUERIES["CQ3"](rate=150, scale=0.05, plugs=40), landed(work))
    assert want.num_rows > 100
    problem = diff_results(table_of(out), want)  # a multiset: an instant twice fails here
    assert problem is None, problem


@pytest.mark.spark
def test_a_live_run_decides_as_the_rate_changes_and_migrates(spark, tmp_path):
    """CQ3 from a generator whose rate steps 150 -> 600 -> 150 readings/s (paced in wall
    time): the watch measures what has arrived and migrates DuckDB -> Spark -> DuckDB while
    the source goes on; the DuckDB table equals the reference over what landed, each
    instant once, and each migration's output gap is measured."""
    from test_adaptive import by_rate

    url = f"{PLUGS}&profile=150:20,600:20,150:25&speed=4&seconds=65"
    q = QUERIES["CQ3"](rate=150, scale=0.05, plugs=40)
    work, out = tmp_path / "w", tmp_path / "out.duckdb"
    r = run_adaptive(q, url, decide={"every_s": 5, "min_interval_s": 10, "margin": 0.1},
                     seconds_per_batch=5, spark=spark, work_dir=work, output=str(out),
                     planner=by_rate("db", "spe", 300), alternatives=lambda q: [])
    migrations = [d for s in r.segments for d in s.decisions if d.migrate]
    assert len(r.segments) >= 2 and migrations, [s.segment for s in r.segments]
    assert migrations[0].rate > 300 and 20 <= (migrations[0].at - T0).total_seconds() <= 35
    assert all(g is not None and g > 0 for g in r.gaps_s)
    want = reference_result(q, landed(work))
    problem = diff_results(table_of(out), want)
    assert problem is None, problem
    assert sum(s.result_rows for s in r.segments) == want.num_rows


@pytest.mark.parametrize("backlog_s,migrates", [(0, False), (30, True)])
def test_a_caught_up_live_run_is_not_taken_for_falling_behind(backlog_s, migrates):
    """On a live input a micro-batch waits for the input, so a run that keeps up measures a
    pace near the input's (rho about 1, here 0.5): with no backlog the watch does not take
    that for falling behind (rho is left out); with a backlog of 30 s it does, and the
    best other feasible plan is taken (no JVM: the watch alone)."""
    w, other = cq3_watch(backlog_s)
    at = w(T0 + dt.timedelta(seconds=19, microseconds=950000))
    (d,) = w.decisions
    assert (at is not None) == migrates == d.migrate, d.reason
    assert (d.rho is None) == (not migrates) and f"backlog {backlog_s} s" in d.reason
    if migrates:
        assert d.best == other and d.rho == pytest.approx(0.5)


def cq3_watch(backlog_s: int):
    """A watch over CQ3 in DuckDB after 19 one-second batches of two wall seconds each,
    and the placement it would take (the selections in Spark)."""
    from types import SimpleNamespace

    from federation.adaptive import Watch, with_rate
    from federation.api import plan_for
    from federation.runtime.progress import RunProgress

    q = with_rate(QUERIES["CQ3"](rate=2000), 2000)
    db = plan_for(q, "db")[0].placement_string
    other = plan_for(q, "op1=spe,op2=db,op3=spe,op4=db,op5=db,op6=db")[0].placement_string
    stream = next(w.stream for w in q.walk() if w.kind == "window")
    inp = SimpleNamespace(follower=object(), streams={stream.name: stream}, first=T0,
                          before_end=lambda at: True,
                          between=lambda lo, hi: {stream.name: []},
                          rates=lambda lo, hi: {stream.name: 2000.0})
    w = Watch(q, inp, db, None, None, every_s=10, window_s=10, margin=0.1,
              min_interval_s=30, grid=Grid(1), planner=plan_for, alternatives=lambda _: [db, other],
              progress=RunProgress())
    for s in range(1, 20):  # a second of event time per batch, two wall seconds each
        w.batch(SimpleNamespace(stage=0, data=True, clock=T0 + dt.timedelta(seconds=s),
                                wall_s=2.0, backlog_s=backlog_s))
    return w, other


@pytest.mark.parametrize("given_s,lead_s,at_s", [
    (None, 0, 20), (27.4, 0, 28), (90, 0, 20), (None, 4, 24), (27.4, 4, 28), (21, 4, 24)])
def test_a_live_migration_instant_follows_what_the_old_placement_was_given(
        given_s, lead_s, at_s):
    """Behind by 30 s, the old placement has been given readings up to `given_s` already
    (its segment's spool: its next micro-batch reads them whatever is decided): the
    migration instant is the first after them, so it computes with them and its input
    ends there instead of the new one reading them again; the decision's own instant when
    nothing is given past it, or more than one micro-batch of a following run (60 s); and
    at least `lead_s` after the decision (the new placement starts meanwhile)."""
    w, _ = cq3_watch(30)
    w.given = None if given_s is None else (lambda: T0 + dt.timedelta(seconds=given_s))
    w.lead_s = lead_s
    at = w(T0 + dt.timedelta(seconds=19, microseconds=950000))
    (d,) = w.decisions
    assert at == T0 + dt.timedelta(seconds=at_s) and d.at == T0 + dt.timedelta(seconds=20)
    assert d.since == (None if at_s == 20 else at)
