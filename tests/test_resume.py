"""Kill -9 and resume (federation/runtime/recovery.py): `fedq run` is killed with SIGKILL
(its whole process group: Python, the JVM, Spark's Python workers) at a random moment and
started again with the same command; the result equals the reference evaluator's, every
slide instant once, nothing missing. The longer campaign is `python -m benchmarks.faults`.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES
from tests.sampling import LONG, sampled

pytestmark = pytest.mark.spark

#: windows of at most 30 s over 40 s of data: about ten micro-batches a run
RATE, PLUGS, SECONDS, SCALE = 60, 30, 40, 1 / 10
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"


def fedq_run(query: str, placement: str, data, work, out, per_batch: int = 4,
             *more: str) -> list[str]:
    return [sys.executable, "-c", CLI, "run", query, "--placement", placement,
            "--data", str(data), "--scale", repr(SCALE), "--seconds-per-batch", str(per_batch),
            "--work-dir", str(work), "--output", str(out), "--quiet", "--overwrite", *more]


def run_killed_then_resumed(cmd: list[str], kill: str, work) -> tuple[bool, bool, str]:
    """Run `cmd` and kill it: "after:<s>" seconds after Spark committed its first
    micro-batch (a moment in the middle of the run), or at a fault point "<point>:<n>"
    (recovery.FAULT_POINTS); then run it again to the end. Returns whether the kill hit a
    running process, whether its input was complete by then, the resumed run's stderr."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("FEDQ_FAULT", None)
    if not kill.startswith("after:"):
        env["FEDQ_FAULT"] = kill
    p = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        if kill.startswith("after:"):
            first = work / "checkpoints" / "stage0" / "commits" / "0"
            deadline = time.monotonic() + 600
            while not first.exists() and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            p.wait(timeout=float(kill.split(":")[1]))
        else:
            p.wait(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # Python, the JVM and its workers at once
        p.wait()
    hit = p.returncode == -signal.SIGKILL
    ingested = (work / "input" / "inputs.json").exists()
    env.pop("FEDQ_FAULT", None)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    if r.returncode != 0:  # Spark's exception leads, its query plan follows: show the cause
        cause = [ln for ln in r.stderr.splitlines() if "Exception" in ln or "Error" in ln]
        pytest.fail(f"the resumed run failed: {chr(10).join(cause[:12])}\n"
                    f"--- head ---\n{r.stderr[:4000]}")
    if "could not resume" in r.stderr:  # right result, but the resume itself failed
        import warnings

        warnings.warn("resume fell back to a fresh run: "
                      + next(ln for ln in r.stderr.splitlines() if "could not resume" in ln),
                      stacklevel=2)
    return hit, ingested, r.stderr


#: `make test` kills the mixed plan (a MIG's commit and Spark's); two more kinds of kill, a
#: JVM each twice, are `make test-long`'s
_KILLS = [
    # a DB result re-enters Spark; killed after the MIG committed, before Spark did
    ("CQ3", "op1=db,op2=db,op3=db,op4=db,op5=spe,op6=spe", "after_commit:3"),
    # killed with the MIG's rows inserted but not committed
    ("CQ1", "auto", "mig_rows_in:3"),
    # pure Spark, its state in RocksDB: killed at a random moment after its first batch
    ("CQ2", "spe", f"after:{random.Random(2).uniform(0.5, 3.0):.1f}"),
]


@pytest.mark.parametrize("query,placement,kill", sampled(_KILLS, keep=_KILLS[:1]))
def test_killed_run_resumes_to_the_reference_result(tmp_path, query, placement, kill):
    data = tmp_path / "data"
    generate(data, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=7)
    work, out = tmp_path / "work", tmp_path / "out.parquet"
    # Spark pays about 2 s per micro-batch: 8 event seconds each (5 batches)
    rocks = ("--state-store", "rocksdb") if placement == "spe" else ()
    cmd = fedq_run(query, placement, data, work, out, 8, *rocks)
    hit, ingested, err = run_killed_then_resumed(cmd, kill, work)
    if rocks:  # RocksDB's checkpoint files (the default store writes <version>.delta)
        state = list((work / "checkpoints" / "stage0" / "state").rglob("*"))
        assert any(f.suffix == ".zip" for f in state), sorted(f.name for f in state)[:20]
    assert hit, f"the kill ({kill}) never hit the running process"
    got = pq.read_table(out)
    q = QUERIES[query](rate=RATE, scale=SCALE, plugs=PLUGS)
    want = reference_result(q, read_clean_rows(work / "input" / "smartplug" / "spool"))
    problem = diff_results(got, want)
    assert problem is None, f"{query} killed ({kill}) and resumed: {problem}"
    # killed after its input was ready, the run resumes (else it starts over)
    assert ("fedq: resuming" in err) == (hit and ingested), err[-2000:]
    assert "] micro-batches" not in err  # --quiet: no progress


@LONG
def test_a_checkpoint_spark_cannot_use_starts_the_run_over(tmp_path):
    """The fallback of runtime/execute.py: Spark's operator state is lost after the kill
    (its state directory removed), Spark refuses the restart, the run starts over from the
    spool, says so, keeps Spark's error, and the result is still the reference's."""
    import shutil

    data = tmp_path / "data"
    generate(data, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=7)
    work, out = tmp_path / "work", tmp_path / "out.parquet"
    cmd = fedq_run("CQ5", "spe", data, work, out, per_batch=10)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, FEDQ_FAULT="batch_end:2")
    p = subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=False,
                       start_new_session=True)  # the fault kills its own process group
    assert p.returncode == -signal.SIGKILL, "the fault point batch_end:2 was never reached"
    shutil.rmtree(work / "checkpoints" / "stage0" / "state")
    env.pop("FEDQ_FAULT")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "fedq: resuming" in r.stderr and "could not resume" in r.stderr, r.stderr[-2000:]
    assert (work / "resume-failure.txt").read_text().strip()
    q = QUERIES["CQ5"](rate=RATE, scale=SCALE, plugs=PLUGS)
    want = reference_result(q, read_clean_rows(work / "input" / "smartplug" / "spool"))
    problem = diff_results(pq.read_table(out), want)
    assert problem is None, problem


SESSIONS_SQL = """SELECT house_id, household_id, plug_id, COUNT(*) AS n, MAX(value) AS peak,
       window_start, window_end
FROM SESSION(TABLE smartplug PARTITION BY (house_id, household_id, plug_id), DESCRIPTOR(ts),
             INTERVAL '600' MILLISECOND)
GROUP BY window_start, window_end, house_id, household_id, plug_id"""


#: the readings above 50 of the sessions closing at each instant (docs/sql.md, "Session
#: windows"): in Spark, each session's readings collected in its session state
SESSION_ROWS_SQL = """SELECT plug_id, household_id, value, window_start, window_end
FROM SESSION(TABLE smartplug PARTITION BY (house_id, household_id, plug_id), DESCRIPTOR(ts),
             INTERVAL '600' MILLISECOND)
WHERE value > 50"""


#: Python aggregates (tests/test_udaf.py) in Spark's state (each group's collected values),
#: their result selected in DuckDB
UDAF_SQL = """CREATE FUNCTION ranked_sum AS 'tests.test_udaf.ranked_sum' LANGUAGE PYTHON;
CREATE FUNCTION dotted AS 'tests.test_udaf.dotted' LANGUAGE PYTHON;
SELECT house_id, rs, d, n FROM (
  SELECT house_id, ranked_sum(value) AS rs, dotted(DISTINCT plug_id) AS d, COUNT(*) AS n
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)
  GROUP BY window_start, window_end, house_id) WHERE n > 3"""
_SESSION_KILLS = [
    (SESSIONS_SQL, "db", "mig_rows_in:3"),
    # Spark's sessions' rows (op1, the selection) handed to DuckDB (op2, the projection),
    # killed after the MIG committed, before Spark did
    (SESSION_ROWS_SQL, "op1=spe,op2=db", "after_commit:3"),
    (UDAF_SQL, "op1=spe,op2=db", "after_commit:3"),
]


# `make test` kills the sessions in DuckDB; Spark's sessions handed to DuckDB (58 s of
# make test's 877 s on 2026-12-07, loop 0.32 s) are `make test-long`'s, as the CQ3 kill
# between the MIG's commit and Spark's is make test's
@pytest.mark.parametrize("text,placement,kill", sampled(_SESSION_KILLS,
                                                        keep=_SESSION_KILLS[:1]))
def test_killed_session_run_resumes_with_each_session_once(tmp_path, text, placement, kill):
    """Sessions in DuckDB (their open sessions' readings held in its tables, closed ones
    deleted), killed with a MIG's rows inserted but not committed, resumed; the rows of
    Spark's sessions, killed between the MIG's commit and Spark's, and likewise Python
    aggregates in Spark's state (both make test-long)."""
    from federation.smartplug import smartplug_stream
    from federation.sqlfront import sql

    data = tmp_path / "data"
    generate(data, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=7)
    (tmp_path / "sessions.sql").write_text(text)
    work, out = tmp_path / "work", tmp_path / "out.parquet"
    cmd = fedq_run("--sql", placement, data, work, out, 8)
    i = cmd.index("--scale")
    cmd[i:i + 2] = []  # the SQL's own sizes
    cmd.insert(cmd.index("--sql") + 1, str(tmp_path / "sessions.sql"))
    hit, _, _ = run_killed_then_resumed(cmd, kill, work)
    assert hit
    q = sql(text, {"smartplug": smartplug_stream(rate=RATE, plugs=PLUGS)})
    want = reference_result(q, read_clean_rows(work / "input" / "smartplug" / "spool"))
    assert want.num_rows > 100
    assert diff_results(pq.read_table(out), want) is None
