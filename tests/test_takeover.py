"""A resumed run that cannot go on (its stage's offset log unreadable here; Spark refusing
its checkpoint in test_resume) starts over, and takes its sinks over from the interrupted
run (federation/runtime/takeover.py): each instant reaches a Parquet directory or a DuckDB
table exactly once, and a followed directory is not refused as another run's. No JVM: the
plans are all in DuckDB (the direct feed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.parts import land_files
from federation.results import diff_results
from federation.runtime.sinks import read_parquet_sink
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

RATE, PLUGS, SECONDS, SCALE = 60, 30, 40, 0.1  # CQ1: 3-s windows sliding every 0.1 s
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> list[Path]:
    src = tmp_path_factory.mktemp("source")
    generate(src, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=11)
    return sorted(src.glob("part-*.parquet"))


def killed_then_started_over(cmd: list[str], work: Path, between=None) -> str:
    """Run `cmd` killed after its first micro-batch (the fault point batch_end:1), make its
    offset log unreadable, run `between`, then run `cmd` again; its stderr."""
    env = dict(os.environ, FEDQ_FAULT="batch_end:1")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                       start_new_session=True, check=False)
    assert p.returncode == -signal.SIGKILL, p.stderr[-3000:]
    (work / "checkpoints" / "stage0" / "feed.json").write_text("{torn")
    if between:
        between()
    env.pop("FEDQ_FAULT")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "could not resume" in r.stderr and "starting over" in r.stderr, r.stderr[-3000:]
    return r.stderr


def want(files: list[Path]) -> pa.Table:
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    return reference_result(q, pa.concat_tables(pq.read_table(p) for p in files))


def test_a_followed_run_that_starts_over_keeps_its_directory_each_instant_once(
        tmp_path, source):
    landing, work, out = tmp_path / "landing", tmp_path / "work", tmp_path / "out"
    landing.mkdir()
    land_files(source[:20], landing)
    cmd = [sys.executable, "-c", CLI, "run", "CQ1", "--follow", "--data", str(landing),
           "--until", "2013-09-01T00:00:39", "--placement", "db", "--scale", repr(SCALE),
           "--work-dir", str(work), "--output", str(out), "--quiet", "--idle-timeout", "300"]
    killed_then_started_over(cmd, work, lambda: land_files(source[20:], landing))
    before = [e for e in (out / "_manifest.jsonl").read_text().splitlines()]
    assert before, "the interrupted run delivered nothing: nothing was taken over"
    problem = diff_results(read_parquet_sink(out), want(source))
    assert problem is None, problem
    assert (work / "takeover.json").exists()


def test_a_run_into_a_duckdb_table_that_starts_over_adds_each_instant_once(tmp_path, source):
    data, work, db = tmp_path / "data", tmp_path / "work", tmp_path / "out.duckdb"
    land_files(source, data)
    cmd = [sys.executable, "-c", CLI, "run", "CQ1", "--data", str(data), "--placement", "db",
           "--scale", repr(SCALE), "--seconds-per-batch", "8", "--work-dir", str(work),
           "--output", str(db), "--quiet"]
    killed_then_started_over(cmd, work)
    con = duckdb.connect(str(db))
    got = con.sql("SELECT * FROM results").to_arrow_table()
    batches = con.sql("SELECT count(DISTINCT run), sum(rows) FROM fedq_batches").fetchall()[0]
    assert batches == (1, got.num_rows), batches  # one run id; every row in one batch
    problem = diff_results(got, want(source))
    assert problem is None, problem
