"""Live input (federation/runtime/follow.py, live.py, sinks.py): a following run reads files
as they land, delivers each instant as it is computed, survives kill -9 (each instant once
in its sinks), closes the windows of a quiet stream, and ends at --until."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.parts import land_files
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.runtime.sinks import read_manifest, read_parquet_sink
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES
from tests.sampling import sampled

pytestmark = pytest.mark.spark

RATE, PLUGS, SECONDS, SCALE = 60, 30, 40, 0.1  # CQ1: 30-s windows sliding every second
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"


def land(files: list[Path], landing: Path, delay: float = 0.0) -> None:
    for p in files:
        land_files([p], landing)
        time.sleep(delay)


def reference(files: list[Path], work: Path, query: str = "CQ1",
              scale: float = SCALE) -> pa.Table:
    """The reference over the source files' rows (not over the run's spool, so that a
    reading spooled twice or lost would show), which all passed validation."""
    q = QUERIES[query](rate=RATE, scale=scale, plugs=PLUGS)
    rows = pa.concat_tables(pq.read_table(p) for p in files)
    assert read_clean_rows(work / "input" / "smartplug" / "spool").num_rows == rows.num_rows
    return reference_result(q, rows)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> list[Path]:
    src = tmp_path_factory.mktemp("source")
    generate(src, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=11)
    return sorted(src.glob("part-*.parquet"))


@pytest.mark.long  # make test kills and resumes two followed streams (test_live_streams)
def test_a_following_run_killed_and_resumed_delivers_each_instant_once(tmp_path, source):
    """Files land while a run of two queries follows; results reach the sinks while it
    runs; kill -9; more files land while nothing runs; the same command resumes, follows on
    and ends at --until: each query's Parquet directory equals its reference, each instant
    once."""
    landing, work = tmp_path / "landing", tmp_path / "work"
    out = tmp_path / "out"
    until = "2013-09-01T00:00:39"  # the last file's event second: the input ends there
    # the idle timeout is far off: a first run slow to its first result (a loaded machine)
    # must not idle its clock past `until` before the kill (then the input has ended, and
    # the files landed while it is down are not read: the resumed run says so)

    cmd = [sys.executable, "-c", CLI, "run", "CQ1", "CQ3", "--follow", "--data", str(landing),
           "--until", until, "--scale", repr(SCALE), "--seconds-per-batch", "4",
           "--work-dir", str(work), "--output", str(out), "--quiet", "--idle-timeout", "300"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    landing.mkdir()
    with open(tmp_path / "first.log", "w") as log:
        p = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                             stderr=log)
        land(source[:25], landing, delay=0.3)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not read_manifest(out / "CQ1") and \
                p.poll() is None:
            time.sleep(0.2)
        time.sleep(1)
        os.killpg(p.pid, signal.SIGKILL)  # kill -9 in the middle of following
        p.wait()
    partial = len(read_manifest(out / "CQ1"))
    assert p.returncode == -signal.SIGKILL and partial, (tmp_path / "first.log").read_text()
    land(source[25:], landing)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "fedq: resuming" in r.stderr, r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["CQ1", "CQ3"]
    assert len(read_manifest(out / "CQ1")) > partial
    for name, last in (("CQ1", 69), ("CQ3", 45)):  # 39 s + the (longest, inner-joined) range
        want = reference(source, work, name)
        assert want.num_rows and pc.max(want["tau"]).as_py().second == last % 60  # all closed
        problem = diff_results(read_parquet_sink(out / name), want)
        assert problem is None, f"{name}: {problem}"


def test_a_quiet_stream_closes_its_windows_and_the_iterator_yields_instants_in_order(
        tmp_path, source, spark, capfd):
    """No file lands after the first 20: after the idle timeout the clock moves on with
    wall time and the windows over the last readings close; the API's iterator yields
    every instant in order, each equal to the reference, and the DuckDB table sink holds
    the same rows, each batch once; stop() ends the run without Spark's error log."""
    from federation.api import start

    landing, work = tmp_path / "landing", tmp_path / "work"
    landing.mkdir()
    # 15-s windows (half CQ1's scale): the idle clock moves with wall time to close them
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE / 2, plugs=PLUGS)
    db = tmp_path / "sink.duckdb"
    h = start(q, "auto", landing, follow=True, idle_timeout_s=1.0, seconds_per_batch=2,
              work_dir=work, spark=spark, output=db, output_table="cq1")
    feeder = threading.Thread(target=land, args=(source[:20], landing, 0.1))
    feeder.start()
    feeder.join()
    # the last reading is at 00:00:19; its window (15 s) closes at instant 00:00:34
    seen, parts = [], []
    for tau, rows in h.results(timeout=180):
        seen.append(tau)
        parts.append(rows)
        if tau.minute == 0 and tau.second >= 34:
            break
    r = h.stop(timeout=120)
    assert r is not None and r.summary.result_rows >= sum(p.num_rows for p in parts)
    err = capfd.readouterr().err  # a stop on purpose prints no Spark error (fd 2: the JVM's)
    assert "terminated with error" not in err, err[-3000:]
    assert seen == sorted(seen) and len(set(seen)) == len(seen), "instants out of order"
    want = reference(source[:20], work, scale=SCALE / 2)
    got = pa.concat_tables(parts)
    hi = pc.max(got["tau"])
    assert diff_results(got, want.filter(pc.less_equal(want["tau"], hi))) is None
    assert pc.max(want["tau"]).as_py().second == 34  # every window of the data closed
    assert h.status()["running"] is False
    con = duckdb.connect(str(db))
    in_db = con.sql("SELECT * FROM cq1").to_arrow_table()
    assert diff_results(in_db.filter(pc.less_equal(in_db["tau"], hi)), got) is None
    n = con.sql("SELECT count(*), sum(rows) FROM fedq_batches").fetchall()[0]
    assert n[0] >= 1 and n[1] == in_db.num_rows


def test_a_broker_topic_gives_the_rows_of_the_directory(tmp_path, source, spark):
    """The same readings published to a real broker process (the embedded amqtt one) and
    followed with `source=mqtt://...` by two queries in one run give each query's reference
    over the source files, in its own directory and from the iterator, which names the
    query of each instant."""
    from federation.api import start
    from federation.runtime.broker import start_broker
    from federation.smartplug.publish import publish

    broker = start_broker()
    try:
        url = broker.url_for("plugs/readings")
        qs = [QUERIES[n](rate=RATE, scale=SCALE, plugs=PLUGS) for n in ("CQ1", "CQ5")]
        out, work = tmp_path / "out", tmp_path / "work"
        h = start(qs, "auto", None, follow=True, source=url, until="2013-09-01T00:00:39",
                  work_dir=work, output=out, spark=spark)
        deadline = time.monotonic() + 120
        while not (work / "input").exists() and time.monotonic() < deadline:
            time.sleep(0.2)  # subscribed: the spool is made once the topic is subscribed
        publish(source[0].parent, url, realtime=False, per_message=25, fmt="csv")
        seen: dict[str, list] = {"CQ1": [], "CQ5": []}
        for name, _tau, rows in h.results(timeout=300):
            seen[name].append(rows)
        r = h.wait(timeout=300)
        assert r is not None, h.status()
        for name, parts in seen.items():
            want = reference(source, work, name)
            problem = diff_results(read_parquet_sink(out / name), want)
            assert problem is None, f"{name}: {problem}"
            assert diff_results(pa.concat_tables(parts), want) is None, name
    finally:
        broker.stop()


#: `make test`: the plan all in DuckDB stopped and resumed, the Spark plan stopped (its
#: resume is two cold JVMs' first batches, 60 s more; a Spark run killed and resumed is in
#: test_resume); `make test-long` the Spark plan resumed too
@pytest.mark.parametrize("placement,resume", sampled(
    [("db", True), ("spe", False), ("spe", True)], keep=[("db", True), ("spe", False)]))
def test_ctrl_c_stops_a_following_run_after_its_batch_and_the_same_command_resumes(
        tmp_path, source, placement, resume):
    """SIGINT to the whole process group (Ctrl-C in a terminal, the JVM included): the run
    says it stops after the micro-batch in progress and exits 0; the same command resumes
    and ends at --until with each instant once. A plan all in DuckDB starts no JVM (its
    stage is fed directly); a Spark plan starts Spark inside the run, after the CLI
    installed its handler, and Spark keeps it (spe/session.get_spark)."""
    landing, work, out = tmp_path / "landing", tmp_path / "work", tmp_path / "out"
    # 24 of the 40 event seconds (two JVMs: each second more is a Spark second twice)
    files = source[:24]
    cmd = [sys.executable, "-c", CLI, "run", "CQ1", "--follow", "--data", str(landing),
           "--until", "2013-09-01T00:00:23", "--placement", placement, "--scale", repr(SCALE),
           "--seconds-per-batch", "8", "--work-dir", str(work), "--output", str(out),
           "--quiet", "--idle-timeout", "300"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    landing.mkdir()
    land(files[:12], landing)
    p = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    # after its first micro-batch (pure Spark emits CQ1's first instants a batch later)
    handled = work / "state" / "stage0.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not handled.exists() and p.poll() is None:
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 0 and handled.exists(), err[-3000:]
    assert "SIGINT: stopping after the micro-batch in progress" in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    if not resume:
        return
    land(files[12:], landing)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0 and "fedq: resuming" in r.stderr, r.stderr[-3000:]
    problem = diff_results(read_parquet_sink(out), reference(files, work))
    assert problem is None, f"{placement}: {problem}"
