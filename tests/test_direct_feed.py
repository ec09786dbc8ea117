"""The direct feed (federation/runtime/direct.py): a plan without SPE-ops runs without a
JVM, returns the reference result, and resumes after a kill -9 at every fault point with
each instant once. Beside Spark's feed of the same plan in tests/test_differential.py.
"""

from __future__ import annotations

import json
import subprocess

import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.api import run
from federation.errors import OptionError
from federation.explain import explain_json
from federation.optimizer import optimize
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES
from tests.sampling import sampled
from tests.test_resume import fedq_run, run_killed_then_resumed

RATE, PLUGS, SECONDS, SCALE = 60, 30, 40, 1 / 10


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("smartplug")
    generate(d, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=7)
    return d


@pytest.fixture
def no_spark(monkeypatch):
    """Starting Spark fails the test: a direct-fed plan must not need it."""
    import spe.session

    def refuse(*a, **k):
        raise AssertionError("Spark was started for a plan without SPE-ops")

    monkeypatch.setattr(spe.session, "get_spark", refuse)


def make(name: str):
    return QUERIES[name](rate=RATE, scale=SCALE, plugs=PLUGS)


@pytest.mark.parametrize("name,per_batch", sampled(
    [(n, b) for n in sorted(QUERIES) for b in (1, 7)],
    keep=[("CQ1", 7), ("CQ3", 1), ("CQ4", 7), ("CQ5", 1), ("CQ6", 7)]))
def test_a_plan_all_in_duckdb_runs_without_spark_and_returns_the_reference(
        no_spark, tmp_path, data_dir, name, per_batch):
    r = run(make(name), "db", data_dir, work_dir=tmp_path / "w", seconds_per_batch=per_batch)
    want = reference_result(make(name), read_clean_rows(r.ingest.spool_dir))
    assert want.num_rows > 0
    assert diff_results(r.rows, want) is None, diff_results(r.rows, want)
    # the files of every micro-batch are logged before it is handed over (the offset log)
    log = json.loads((tmp_path / "w" / "checkpoints" / "stage0" / "feed.json").read_text())
    assert log["files"]["smartplug"][1] == r.ingest.spool_files + 1
    assert r.summary.data_batches == -(-(r.ingest.spool_files + 1) // per_batch)


def test_the_spark_feed_is_refused_where_spark_cannot_start(no_spark, tmp_path, data_dir):
    with pytest.raises(AssertionError, match="Spark was started"):
        run(make("CQ5"), "db", data_dir, work_dir=tmp_path / "w", seconds_per_batch=10,
            feed="spe")
    with pytest.raises(OptionError, match="feed"):
        run(make("CQ5"), "db", data_dir, feed="kafka")


def test_explain_names_the_feed_of_each_stage():
    assert explain_json(optimize(make("CQ1")))["stage_feeds"] == ["direct"]
    from costmodel.profile import load_profile
    from federation.explain import feed_line
    from federation.logical import NumberedPlan
    from federation.optimizer.phase_one import phase_one
    from federation.physical import build_physical_plan

    lg = NumberedPlan.of(phase_one(make("CQ5"), load_profile()))
    assert feed_line(build_physical_plan(lg, "spe")).startswith("feed: stage 0 spark")
    # a DB-op over the windows below an SPE-op: stage 0 direct, stage 1 Spark
    mixed = build_physical_plan(lg, "op1=db,op2=db,op3=spe")
    assert feed_line(mixed).startswith("feed: stage 0 direct, stage 1 spark"), feed_line(mixed)


#: a kill -9 at every fault point of a micro-batch (recovery.FAULT_POINTS) on the direct
#: feed: before the batch's files are handed over, with the MIG's rows inserted, before and
#: after its commit, after the stage's clock is saved
_KILLS = [("CQ3", "batch_start:3"), ("CQ1", "mig_rows_in:2"), ("CQ6", "before_commit:4"),
          ("CQ3", "after_commit:2"), ("CQ5", "batch_end:3")]


@pytest.mark.parametrize("query,kill", sampled(_KILLS, keep=[_KILLS[0], _KILLS[3]]))
def test_a_direct_run_killed_at_a_fault_point_resumes_each_instant_once(
        tmp_path, data_dir, query, kill):
    work, out = tmp_path / "work", tmp_path / "out.parquet"
    hit, ingested, err = run_killed_then_resumed(
        fedq_run(query, "db", data_dir, work, out, 4), kill, work)
    assert hit and ingested, f"the kill ({kill}) never hit the running process"
    assert "fedq: resuming" in err, err[-2000:]
    got = pq.read_table(out)
    want = reference_result(make(query), read_clean_rows(work / "input" / "smartplug" / "spool"))
    assert diff_results(got, want) is None, f"{query} killed ({kill}): {diff_results(got, want)}"


@pytest.mark.parametrize("query,kill", [("CQ5", "ingest_file:30"), ("CQ2", "ingest_file:9")])
def test_a_run_killed_while_its_input_is_read_resumes_with_the_same_spool(
        tmp_path, data_dir, query, kill):
    """The direct feed works while the input is read (runtime/ahead.py): a run killed
    between two input files goes on from its spool, reads only the files it did not, and
    every instant is there once (the reference over the spool of a run not killed)."""
    work, out = tmp_path / "work", tmp_path / "out.parquet"
    hit, ingested, err = run_killed_then_resumed(
        fedq_run(query, "db", data_dir, work, out, 2), kill, work)
    assert hit and not ingested, f"the kill ({kill}) hit no run reading its input"
    assert "fedq: resuming" in err, err[-2000:]
    fresh = tmp_path / "fresh"
    subprocess.run(fedq_run(query, "db", data_dir, fresh, tmp_path / "f.parquet", 2), check=True,
                   capture_output=True)
    spool = read_clean_rows(fresh / "input" / "smartplug" / "spool")
    assert read_clean_rows(work / "input" / "smartplug" / "spool").equals(spool)
    want = reference_result(make(query), spool)
    got = pq.read_table(out)
    assert diff_results(got, want) is None, f"{query} killed ({kill}): {diff_results(got, want)}"


def test_the_summary_says_where_the_time_went(no_spark, tmp_path, data_dir):
    """Each phase of the data path is timed (federation/runtime/phases.py): they add up to
    the run's wall time, and a run without a JVM says so."""
    r = run(make("CQ3"), "db", data_dir, work_dir=tmp_path / "w", seconds_per_batch=5)
    s = r.summary
    want = {"ingest.read", "ingest.validate", "ingest.spool", "start", "feed", "feed.plan",
            "mig.rows", "db.insert", "db.fold", "db.sql", "db.expire", "db.commit", "results",
            "end"}
    assert want <= set(s.phases), want - set(s.phases)
    assert "spark" not in s.phases
    assert s.phases["ingest.read"]["calls"] == SECONDS
    assert s.phases["feed"]["calls"] == s.data_batches
    assert s.phases["db.sql"]["calls"] >= s.data_batches
    # the ingest runs in a thread of its own, ahead of the direct feed (ahead.py): its
    # phases overlap the others', and each thread's add up to at most the run's wall
    ingest = sum(p["wall_s"] for k, p in s.phases.items() if k.startswith("ingest."))
    rest = sum(p["wall_s"] for k, p in s.phases.items() if not k.startswith("ingest."))
    assert ingest <= s.run_wall_s + 0.01 and rest <= s.run_wall_s + 0.01, (ingest, rest)
    assert 0.6 * s.run_wall_s <= ingest + rest, (ingest, rest, s.run_wall_s)
    assert s.phases["feed"]["calls"] > 1 and s.phases["ingest.read"]["calls"] > 1
    assert s.cpu_s["python"] > 0 and s.cpu_s["jvm"] is None
    # no Spark query reads the spool: Arrow IPC files (federation.parts.SPOOL_FORMATS)
    assert r.ingest.spool_formats == {"smartplug": "arrow"}
    spool = sorted(p.suffix for p in r.ingest.spool_dir.iterdir() if p.name.startswith("part-"))
    assert spool == [".arrow"] * (r.ingest.spool_files + 1)
    saved = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert saved["phases"]["db.sql"] == s.phases["db.sql"]
