"""Live input (federation/runtime/follow.py, live.py, sinks.py): a following run reads files
as they land, delivers each instant as it is computed, survives kill -9 (each instant once
in its sinks), closes the windows of a quiet stream, and ends at --until."""

from __future__ import annotations

import os
import shutil
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
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.runtime.sinks import read_manifest, read_parquet_sink
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

pytestmark = pytest.mark.spark

RATE, PLUGS, SECONDS, SCALE = 60, 30, 40, 0.1  # CQ1: 30-s windows sliding every second
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"


def land(files: list[Path], landing: Path, delay: float = 0.0) -> None:
    """The writer's convention: write under a hidden name, then rename into place."""
    landing.mkdir(parents=True, exist_ok=True)
    for p in files:
        tmp = landing / ("." + p.name + ".tmp")
        shutil.copy(p, tmp)
        os.replace(tmp, landing / p.name)
        time.sleep(delay)


def reference(files: list[Path], work: Path) -> pa.Table:
    """The reference over the source files' rows (not over the run's spool, so that a
    reading spooled twice or lost would show), which all passed validation."""
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    rows = pa.concat_tables(pq.read_table(p) for p in files)
    assert read_clean_rows(work / "input" / "spool").num_rows == rows.num_rows
    return reference_result(q, rows)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> list[Path]:
    src = tmp_path_factory.mktemp("source")
    generate(src, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=11)
    return sorted(src.glob("part-*.parquet"))


def test_a_following_run_killed_and_resumed_delivers_each_instant_once(tmp_path, source):
    """Files land while the run follows; results reach the sinks while it runs; kill -9;
    more files land while nothing runs; the same command resumes, follows on and ends at
    --until: the Parquet directory and the DuckDB table equal the reference, each instant
    once."""
    landing, work = tmp_path / "landing", tmp_path / "work"
    out, db = tmp_path / "out", tmp_path / "sink.duckdb"
    until = "2013-09-01T00:00:39"  # the last file's event second: the input ends there

    def cmd(output: Path) -> list[str]:
        return [sys.executable, "-c", CLI, "run", "CQ1", "--follow", "--data", str(landing),
                "--until", until, "--scale", repr(SCALE), "--seconds-per-batch", "2",
                "--work-dir", str(work / (output.suffix.strip(".") or "dir")),
                "--output", str(output), "--quiet", "--idle-timeout", "30"]

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    landing.mkdir()
    logs = [open(tmp_path / f"first-{k}.log", "w") for k in range(2)]  # noqa: SIM115
    runs = [subprocess.Popen(cmd(o), start_new_session=True, env=env,
                             stdout=subprocess.DEVNULL, stderr=log)
            for o, log in zip((out, db), logs)]
    land(source[:25], landing, delay=0.3)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (read_manifest(out) and db.exists()):
        time.sleep(0.2)
    assert read_manifest(out) and db.exists(), "no result while following: " + "".join(
        (tmp_path / f"first-{k}.log").read_text()[-1500:] for k in range(2))
    time.sleep(2)
    for p in runs:  # kill -9 in the middle of following
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert all(p.returncode == -signal.SIGKILL for p in runs)  # it was running
    for log in logs:
        log.close()
    partial = len(read_manifest(out))
    land(source[25:], landing)
    for o in (out, db):
        r = subprocess.run(cmd(o), env=env, capture_output=True, text=True, timeout=600,
                           check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "fedq: resuming" in r.stderr, r.stderr[-2000:]
    want = reference(source, work / "dir")
    assert want.num_rows and pc.max(want["tau"]).as_py().second == 9  # 00:01:09: all closed
    got = read_parquet_sink(out)
    assert len(read_manifest(out)) > partial
    assert diff_results(got, want) is None, diff_results(got, want)
    con = duckdb.connect(str(db))
    got_db = con.sql("SELECT * FROM results").to_arrow_table()
    assert diff_results(got_db, reference(source, work / "duckdb")) is None


def test_a_quiet_stream_closes_its_windows_and_the_iterator_yields_instants_in_order(
        tmp_path, source, spark):
    """No file lands after the first 20: after the idle timeout the clock moves on with
    wall time and the windows over the last readings close; the API's iterator yields
    every instant in order, each equal to the reference; stop() ends the run."""
    from federation.api import start

    landing, work = tmp_path / "landing", tmp_path / "work"
    landing.mkdir()
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    h = start(q, "auto", landing, follow=True, idle_timeout_s=1.0, seconds_per_batch=2,
              work_dir=work, spark=spark)
    feeder = threading.Thread(target=land, args=(source[:20], landing, 0.1))
    feeder.start()
    feeder.join()
    # the last reading is at 00:00:19; its window (30 s) closes at instant 00:00:49
    seen, parts = [], []
    for tau, rows in h.results(timeout=180):
        seen.append(tau)
        parts.append(rows)
        if tau.minute == 0 and tau.second >= 49:
            break
    r = h.stop(timeout=120)
    assert r is not None and r.summary.result_rows >= sum(p.num_rows for p in parts)
    assert seen == sorted(seen) and len(set(seen)) == len(seen), "instants out of order"
    want = reference(source[:20], work)
    got = pa.concat_tables(parts)
    hi = pc.max(got["tau"])
    assert diff_results(got, want.filter(pc.less_equal(want["tau"], hi))) is None
    assert pc.max(want["tau"]).as_py().second == 49  # every window of the data closed
    assert h.status()["running"] is False
