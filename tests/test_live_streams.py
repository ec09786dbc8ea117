"""Several streams live, each from its own source (federation/runtime/connectors/): the
source URLs, the generators as live sources, the follower of several streams (its start,
idling and end: no JVM), and whole runs of Nexmark q8 against the reference: from two
generators, and from a followed directory and a generator killed with -9 and resumed."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.conventions import KIND, PUNCTUATION
from federation.errors import OptionError
from federation.nexmark import nexmark_streams
from federation.parts import land_files, list_parts
from federation.results import diff_results
from federation.runtime.connectors import SourceContext, parse_source
from federation.runtime.sinks import read_manifest, read_parquet_sink

ROOT = Path(__file__).resolve().parents[1]
Q8 = ROOT / "benchmarks" / "queries_sql" / "nexmark" / "q8.sql"
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"
NX_START = "2015-07-15T00:00:00"  # the Nexmark generator's default start (BASE_TIME)


PERSONS = ("INSERT INTO persons SELECT state, COUNT(*) AS n, MAX(id) AS last_id FROM "
           "TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND) "
           "GROUP BY window_start, window_end, state")


def q8(rate: float = 1000.0):
    from federation.sqlfront import sql

    return sql(Q8.read_text(), nexmark_streams(rate))


def q8_and_persons():
    """q8 and a query over one of its streams, as one run of two queries."""
    from federation.logical import query_set
    from federation.sqlfront import sql

    return query_set([q8(), sql(PERSONS, nexmark_streams(1000.0))])


def check_outputs(out: Path, q, rows: dict[str, pa.Table]) -> None:
    """Every query's Parquet directory (`out/<query>` for several) equals its reference
    over `rows` (what the sources produced)."""
    members = getattr(q, "queries", [q])
    for m in members:
        used = {w.stream.name for w in m.walk() if w.kind == "window"}
        want = reference_result(m, {k: rows[k] for k in used})
        assert want.num_rows > 0, m.name
        problem = diff_results(read_parquet_sink(out / m.name if len(members) > 1 else out),
                               want)
        assert problem is None, f"{m.name}: {problem}"


def kill9_then_resume(cmd: list[str], log: Path, results: Path, while_up, while_down) -> None:
    """Start `cmd` (a `fedq run` that follows), feed it (`while_up()`), kill -9 once the
    Parquet directory `results` lists a part, feed more while nothing runs
    (`while_down()`), then the same command: it resumes, ends, and adds parts."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                             stderr=f)
        while_up()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not read_manifest(results) and p.poll() is None:
            time.sleep(0.2)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    partial = len(read_manifest(results))
    assert p.returncode == -signal.SIGKILL and partial, log.read_text()
    while_down()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "fedq: resuming" in r.stderr, r.stderr[-2000:]
    assert len(read_manifest(results)) > partial


def test_source_urls_and_their_errors(tmp_path):
    from federation.cli.args import data_dirs, declared_streams

    kinds = {u: parse_source(u) for u in ("data/", "follow:data/", "mqtts://h/t",
                                          "datagen:nexmark?rate=500")}
    assert [(s.kind, s.live) for s in kinds.values()] == [
        ("dir", False), ("follow", True), ("mqtts", True), ("datagen", True)]
    with pytest.raises(ValueError, match="no source kind 'kafka'"):
        parse_source("kafka://h/t")
    assert data_dirs(["person=datagen:nexmark?rate=500", "auction=data/a"]) == {
        "person": "datagen:nexmark?rate=500", "auction": Path("data/a")}
    decl = {d.name: d for d in declared_streams({"person": "datagen:nexmark?rate=500",
                                                 "plugs": "datagen:smartplug?rate=40"})}
    assert decl["person"].columns == nexmark_streams()["person"].columns
    assert decl["plugs"].stats.rate_tps == 40
    ctx = SourceContext("t", start=dt.datetime(2026, 1, 1))
    for url, said in (("datagen:nexmark?rat=1", "takes no 'rat'"),
                      ("datagen:nexmark?speed=0", "speed must be > 0"),
                      ("datagen:weather", "no generator 'weather'"),
                      ("datagen:smartplug?start=noon", "start='noon' is not a time")):
        with pytest.raises(OptionError, match=said) as e:
            parse_source(url).open(tmp_path / "x", nexmark_streams()["person"], ctx)
        assert e.value.option == "data"
    with pytest.raises(OptionError, match="the generator's columns"):  # not the stream's
        parse_source("datagen:smartplug").open(tmp_path / "y", nexmark_streams()["bid"], ctx)


def test_a_generator_is_paced_in_wall_time_and_resumes_with_the_same_files(tmp_path):
    """A bounded generator (`seconds`) writes its burst at once and the rest at `speed`
    event seconds per wall second; started again over its landing directory it goes on
    after the last file, and a second written again is the same rows."""
    from federation.smartplug import smartplug_stream

    spec = parse_source("datagen:smartplug?rate=50&plugs=10&speed=20&burst=4&seconds=12")
    ctx, stream, land = SourceContext("t", start=dt.datetime(2026, 1, 1)), smartplug_stream(), \
        tmp_path / "land"
    t0 = time.monotonic()
    f = spec.open(land, stream, ctx)
    assert f.finished.wait(10) and f.error is None
    took = time.monotonic() - t0
    assert 0.35 <= took < 5, took  # 8 paced seconds at 20 per wall second
    files = list_parts(land)
    assert [p.name for p in files] == [f"part-{s:08d}.parquet" for s in range(12)]
    first = pq.read_table(files[0])
    assert first.num_rows == 50 and first["ts"][0].as_py() >= dt.datetime(2026, 1, 1)
    assert pq.read_table(files[-1])["ts"][0].as_py() >= dt.datetime(2026, 1, 1, 0, 0, 11)
    kept = {p.name: pq.read_table(p) for p in files}
    for p in files[7:]:
        p.unlink()  # a crash lost them: the source writes them again, the same
    f.stop()
    g = spec.open(land, stream, ctx)
    assert g.finished.wait(10) and g.error is None and g.seconds == 5
    assert all(pq.read_table(p).equals(kept[p.name]) for p in list_parts(land))


def _lane(tmp_path: Path, name: str):
    from federation.runtime.follow import Lane
    from federation.runtime.ingest import Ingestor
    from federation.smartplug import smartplug_stream

    landing = tmp_path / "landing" / name
    landing.mkdir(parents=True)
    ing = Ingestor(tmp_path / "input" / name, smartplug_stream(rate=20, plugs=4, name=name),
                   file_list=False)
    return Lane(landing, ing)


def test_two_streams_followed_start_together_idle_and_end_with_one_flush(tmp_path, capfd):
    """Files land in stream a only: the run starts after the idle timeout, b's clock
    starting at a's first reading; then b idles along with wall time; once both clocks pass
    `until`, both spools end with the same flush punctuation; resumed then, a file landed
    since is named as not read."""
    from federation.runtime.follow import Follower
    from federation.smartplug.datagen import generate

    src = tmp_path / "src"
    generate(src, rate=20, seconds=4, plugs=4, houses=2, seed=3)
    files = sorted(src.glob("part-*.parquet"))
    t0 = pq.read_table(files[0])["ts"][0].as_py()
    lanes = {n: _lane(tmp_path, n) for n in ("a", "b")}
    f = Follower(lanes, idle_timeout_s=0.5, poll_s=0.05, flush_after_s=60,
                 until=t0 + dt.timedelta(seconds=5)).start()
    land_files(files[:2], lanes["a"].data)
    time.sleep(0.25)
    assert not f.started.is_set()  # b may still come
    assert f.started.wait(5) and f.error is None
    assert lanes["b"].ing.clock == lanes["a"].ing.res.first_ts
    assert f.res.first_ts == lanes["a"].ing.res.first_ts  # what the run reads: both streams
    land_files(files[2:], lanes["a"].data)
    assert f.ended.wait(20), "the input did not end once both clocks passed until"
    f.stop()
    assert f.error is None
    flush = [pq.read_table(list_parts(lane.ing.spool)[-1]) for lane in lanes.values()]
    assert all(t.column(KIND).to_pylist() == [PUNCTUATION] for t in flush)
    assert flush[0]["ts"].equals(flush[1]["ts"])
    a, b = lanes["a"].ing.res, lanes["b"].ing.res
    # a idled too while b was awaited: its later rows below its clock are late
    assert a.rows_in == 4 * 20 and a.rows_ok + a.rows_dead == a.rows_in and b.rows_in == 0
    # resumed after its input ended: a file landed since is not read, and the run says so
    from federation.runtime.follow import Lane
    from federation.runtime.ingest import Ingestor

    late = tmp_path / "late" / "part-00000099.parquet"
    late.parent.mkdir()
    shutil.copy(files[-1], late)
    land_files([late], lanes["a"].data)
    again = {n: Lane(lane.data, Ingestor.resumed(lane.ing.work, lane.ing.stream))
             for n, lane in lanes.items()}
    f = Follower(again, idle_timeout_s=0.5, poll_s=0.05, flush_after_s=60,
                 until=t0 + dt.timedelta(seconds=5)).start()
    assert f.ended.wait(5) and f.error is None
    f.stop()
    err = capfd.readouterr().err
    assert "stream a: 1 file(s) landed" in err and "part-00000099.parquet" in err, err
    assert "stream b" not in err, err


def _reference(rows: dict[str, pa.Table]) -> pa.Table:
    want = reference_result(q8(), rows)
    assert want.num_rows > 0
    return want


@pytest.mark.spark
def test_nexmark_q8_live_from_two_generators_equals_the_reference(tmp_path, spark):
    """`datagen:nexmark` for person and for auction, bounded: the run follows both and
    ends when both have ended; under pure DuckDB and with the join in Spark."""
    from federation.api import run
    from federation.runtime.sources import read_clean_inputs

    url = f"datagen:nexmark?rate=1000&speed=10&seconds=40&start={NX_START}"
    for placement in ("db", "op1=db,op2=db,op3=db,op4=db,op5=spe"):
        out = tmp_path / placement[:6] / "out"
        r = run(q8(), placement, {"person": url, "auction": url}, spark=spark,
                work_dir=out.parent / "work", output=out, seconds_per_batch=4)
        rows = read_clean_inputs(r.ingest)
        landed = {n: pa.concat_tables(pq.read_table(p) for p in list_parts(
            out.parent / "work" / "landing" / n)) for n in ("person", "auction")}
        assert {n: t.num_rows for n, t in rows.items()} == {
            n: t.num_rows for n, t in landed.items()}  # nothing lost between
        problem = diff_results(read_parquet_sink(out), _reference(landed))
        assert problem is None, f"{placement}: {problem}"


@pytest.mark.spark
def test_a_followed_directory_and_a_generator_killed_and_resumed(tmp_path):
    """person from a followed directory (files landed by the test), auction from the
    generator: kill -9 once results are out, more person files land while nothing runs,
    the same command resumes both streams: every instant once, equal to the reference."""
    from federation.nexmark.datagen import generate

    nx = tmp_path / "nx"
    generate(nx, rate=1000, seconds=40)
    persons = sorted((nx / "person").glob("part-*.parquet"))
    landing, work, out = tmp_path / "landing", tmp_path / "work", tmp_path / "out"
    landing.mkdir()
    shutil.copy(nx / "person" / "_stream.json", landing)  # the stream it holds, declared
    (tmp_path / "persons.sql").write_text(PERSONS)
    cmd = [sys.executable, "-c", CLI, "run", "--sql", str(Q8), "--sql",
           str(tmp_path / "persons.sql"), "--data",
           f"person=follow:{landing}", "--data",
           f"auction=datagen:nexmark?rate=1000&speed=4&seconds=40&start={NX_START}",
           "--until", "2015-07-15T00:00:39", "--placement", "db", "--seconds-per-batch", "4",
           "--work-dir", str(work), "--output", str(out), "--quiet", "--idle-timeout", "300"]
    kill9_then_resume(cmd, tmp_path / "first.log", out / "q8",
                      lambda: land_files(persons[:25], landing),
                      lambda: land_files(persons[25:], landing))
    rows = {n: pa.concat_tables(pq.read_table(p) for p in list_parts(nx / n))
            for n in ("person", "auction")}
    check_outputs(out, q8_and_persons(), rows)


@pytest.mark.spark
def test_two_topics_of_a_broker_for_two_streams_and_two_queries(tmp_path, spark):
    """person and auction each on its own topic of the embedded broker, published while
    the run follows both; q8 and a query over person alone, in one run, end at --until,
    their results published to a third topic: each query's messages (deduped on `id`)
    equal its reference over every published reading."""
    from federation.api import start
    from federation.nexmark.datagen import generate
    from federation.runtime.broker import start_broker
    from federation.smartplug.publish import publish
    from tests.test_mqtt import collect

    nx = tmp_path / "nx"
    generate(nx, rate=1000, seconds=30)
    broker = start_broker()
    try:
        urls = {n: broker.url_for(f"nexmark/{n}") for n in ("person", "auction")}
        sub, got = collect(broker.url_for("nexmark/results"), "t-results")
        h = start(q8_and_persons(), "db", urls, iterate=False, spark=spark,
                  output=broker.url_for("nexmark/results"), work_dir=tmp_path / "work",
                  seconds_per_batch=4, idle_timeout_s=60,
                  until=dt.datetime.fromisoformat(NX_START) + dt.timedelta(seconds=29))
        deadline = time.monotonic() + 120
        while not (tmp_path / "work" / "input" / "person").exists() and \
                time.monotonic() < deadline:
            time.sleep(0.2)  # both subscribed once the spools exist
        for n, url in urls.items():
            publish(nx / n, url, realtime=False, per_message=50)
        r = h.wait(timeout=600)
        assert r is not None and r.summary.dead_lettered == 0
        time.sleep(1)
        sub.disconnect()
    finally:
        broker.stop()
    rows = {n: pa.concat_tables(pq.read_table(p) for p in list_parts(nx / n))
            for n in ("person", "auction")}
    messages = {m["id"]: m for m in got}
    for m in q8_and_persons().queries:
        used = {w.stream.name for w in m.walk() if w.kind == "window"}
        want = reference_result(m, {k: rows[k] for k in used})
        mine = [{"tau": dt.datetime.fromisoformat(d["instant"]), **row}
                for d in messages.values() if d["query"] == m.name for row in d["rows"]]
        assert want.num_rows > 0 and mine, m.name
        problem = diff_results(pa.Table.from_pylist(mine, schema=want.schema), want)
        assert problem is None, f"{m.name}: {problem}"


@pytest.mark.spark
def test_nexmark_q5_from_a_followed_directory_and_q7_from_the_generator(tmp_path, spark):
    """The bid stream live: q5 (the hottest auctions, sliding windows) following a
    directory whose files land while it runs, ended by `until`; q7 (the highest bids of
    each tumbling window) from `datagen:nexmark`, bounded. Each equals the reference."""
    import threading

    from federation.api import run
    from federation.nexmark.datagen import generate
    from federation.sqlfront import sql

    nx = tmp_path / "nx"
    generate(nx, rate=1000, seconds=24)
    bids = pa.concat_tables(pq.read_table(p) for p in list_parts(nx / "bid"))
    streams = nexmark_streams(1000.0)
    text = {n: (ROOT / "benchmarks" / "queries_sql" / "nexmark" / f"{n}.sql").read_text()
            for n in ("q5", "q7")}
    landing = tmp_path / "landing"
    landing.mkdir()
    files = list_parts(nx / "bid")
    lander = threading.Thread(target=lambda: [  # a file every 0.1 s while the run follows
        (land_files([p], landing), time.sleep(0.1)) for p in files])
    lander.start()
    until = dt.datetime.fromisoformat(NX_START) + dt.timedelta(seconds=23)
    generator = f"datagen:nexmark?rate=1000&speed=10&seconds=24&start={NX_START}"
    for name, data in (("q5", f"follow:{landing}"), ("q7", generator)):
        out = tmp_path / name
        run(sql(text[name], streams), "auto", data, spark=spark, output=out,
            work_dir=tmp_path / f"w{name}", seconds_per_batch=4, idle_timeout_s=60,
            until=until if name == "q5" else None)
        lander.join()
        want = reference_result(sql(text[name], streams), {"bid": bids})
        assert want.num_rows > 0
        problem = diff_results(read_parquet_sink(out), want)
        assert problem is None, f"{name}: {problem}"


def test_nexmark_generated_in_real_time_is_the_same_events(tmp_path):
    """`fedq generate --nexmark --realtime`: the stream declarations come first (a
    follower needs them), each second lands at its wall time, and the events equal the
    ones generated at once from the same start."""
    from federation.nexmark.datagen import generate
    from federation.streams import load_stream_decl

    start = dt.datetime(2026, 1, 1)
    t0 = time.monotonic()
    generate(tmp_path / "live", rate=100, seconds=6, start=start, realtime=20)
    assert time.monotonic() - t0 >= 0.3
    generate(tmp_path / "once", rate=100, seconds=6, start=start)
    for n in ("person", "auction", "bid"):
        assert load_stream_decl(tmp_path / "live" / n).columns == nexmark_streams()[n].columns
        live, once = (pa.concat_tables(pq.read_table(p) for p in list_parts(tmp_path / k / n))
                      for k in ("live", "once"))
        assert live.num_rows and live.equals(once)


@pytest.mark.spark
@pytest.mark.long  # make test kills and resumes a followed directory and a generator
def test_two_topics_killed_and_resumed_deliver_each_instant_once(tmp_path):
    """The whole run over two MQTT topics (persons, auctions): readings published while it
    runs, kill -9, more published while it is down (Mosquitto keeps them for each stream's
    session, QoS 1), the same command again: it resumes both streams, and each query's
    Parquet directory equals the reference over every published reading, each instant once.
    Needs Mosquitto (amqtt drops unacknowledged messages of a killed client, amqtt#401)."""
    from federation.nexmark.datagen import generate
    from federation.runtime.broker import start_mosquitto
    from federation.smartplug.publish import publish

    if shutil.which("mosquitto") is None:
        pytest.skip("mosquitto is not installed: amqtt cannot redeliver to a killed client")
    nx = tmp_path / "nx"
    generate(nx, rate=1000, seconds=40)
    halves = {}
    for n in ("person", "auction"):
        files = list_parts(nx / n)
        for part, chosen in (("first", files[:22]), ("rest", files[22:])):
            d = tmp_path / part / n
            d.mkdir(parents=True)
            for p in chosen:
                shutil.copy(p, d / p.name)
            halves[part, n] = d
    (tmp_path / "persons.sql").write_text(PERSONS)
    broker = start_mosquitto()
    try:
        urls = {n: broker.url_for(f"nexmark/{n}") for n in ("person", "auction")}
        work, out = tmp_path / "work", tmp_path / "out"
        cmd = [sys.executable, "-c", CLI, "run", "--sql", str(Q8), "--sql",
               str(tmp_path / "persons.sql"), *(x for n, u in urls.items()
                                                for x in ("--data", f"{n}={u}")),
               # a topic declares no stream: its declaration, as fedq import writes it
               "--stream", str(nx / "person" / "_stream.json"),
               "--stream", str(nx / "auction" / "_stream.json"),
               "--until", "2015-07-15T00:00:39", "--placement", "db",
               "--seconds-per-batch", "4", "--work-dir", str(work), "--output", str(out),
               "--quiet", "--idle-timeout", "300"]

        def publish_first() -> None:
            deadline = time.monotonic() + 120
            while not (work / "input" / "auction").exists() and time.monotonic() < deadline:
                time.sleep(0.2)  # subscribed once the spools exist
            for n, u in urls.items():
                publish(halves["first", n], u, realtime=False, per_message=50)

        def publish_rest() -> None:  # while it is down
            for n, u in urls.items():
                publish(halves["rest", n], u, realtime=False, per_message=50)

        kill9_then_resume(cmd, tmp_path / "first.log", out / "q8", publish_first, publish_rest)
    finally:
        broker.stop()
    rows = {n: pa.concat_tables(pq.read_table(p) for p in list_parts(nx / n))
            for n in ("person", "auction")}
    check_outputs(out, q8_and_persons(), rows)


def tiers_of_two_streams():
    """Two smart-plug-shaped streams `a` and `b` (40 readings/s, 6 plugs, 2 houses), each
    joined with the fuzzer's DuckDB table and counted per tier: a set of two queries."""
    from benchmarks.fuzz_queries import TABLE, table_db
    from federation import count, window
    from federation.logical import query_set, table
    from federation.smartplug import smartplug_stream

    devices = table(TABLE, db=table_db()).project("house_id", "household_id", tier="rank")
    streams = {n: smartplug_stream(rate=40, plugs=6, houses=2, name=n) for n in ("a", "b")}
    return query_set([(window(streams[n], range="4 s", slide="2 s")
                       .join(devices, on=["house_id", "household_id"])
                       .aggregate(by=["tier"], n=count()).rstream(f"tiers_{n}"))
                      for n in ("a", "b")])


def check_tiers(qs, dirs: dict[str, Path], out: Path, label: str = "") -> None:
    """Each query of `tiers_of_two_streams` in `out` equals its reference over the part
    files of its stream's directory in `dirs` and the table (not empty)."""
    import duckdb

    from benchmarks.fuzz_queries import TABLE, table_db

    con = duckdb.connect(str(table_db()), read_only=True)
    rows_t = con.sql(f"SELECT * FROM {TABLE}").to_arrow_table()
    con.close()
    for m in qs.queries:
        name = m.name[len("tiers_"):]
        rows = pa.concat_tables(pq.read_table(p) for p in list_parts(dirs[name]))
        want = reference_result(m, {name: rows}, {TABLE: rows_t})
        assert want.num_rows > 0, m.name
        problem = diff_results(read_parquet_sink(out / m.name), want)
        assert problem is None, f"{label} {m.name}: {problem}"


@pytest.mark.spark
def test_two_live_streams_and_a_database_table(tmp_path, spark):
    """Two smart-plug-shaped streams from two generators (different seeds), each joined
    with a DuckDB table's rows and counted per tier, as two queries of one following run;
    under pure DuckDB and under the optimizer's plan: each equals its reference over
    what the generators wrote and the table."""
    from federation.api import run

    qs = tiers_of_two_streams()
    urls = {n: f"datagen:smartplug?rate=40&plugs=6&houses=2&seed={k}&speed=10&seconds=16"
               f"&start=2026-01-01T00:00:00" for k, n in enumerate(("a", "b"))}
    for placement in ("db", "auto"):
        out, work = tmp_path / placement / "out", tmp_path / placement / "work"
        run(qs, placement, urls, spark=spark, output=out, work_dir=work,
            seconds_per_batch=4)
        check_tiers(qs, {n: work / "landing" / n for n in urls}, out, placement)
