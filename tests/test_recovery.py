"""Durable MIG state (federation/runtime/recovery.py): a MIG reopened from its DuckDB file
continues exactly after the last micro-batch it committed. JVM-free; the kill -9 test of
whole runs is tests/test_resume.py."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from test_db_store import T0, second_of_rows

from db.reference import reference_result
from federation.logical import NumberedPlan
from federation.physical import build_physical_plan
from federation.results import diff_results
from federation.runtime.mig import MigRuntime
from federation.runtime.recovery import ResultParts, ResumeError, claim
from federation.runtime.sinks import read_manifest
from federation.smartplug.queries import cq1_plan, cq3_plan


def _mig(q, path):
    pp = build_physical_plan(NumberedPlan.of(q), "db")
    (cand,) = pp.db_ops
    return MigRuntime(cand, 1.0, state_path=str(path))


def _batches(n: int, plugs: int, seed: int) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    out = []
    for s in range(n):
        t = second_of_rows(s, 40, plugs, rng)
        out.append(t.append_column("_ts", t.column("ts")))
    return out


def _feed(mig, batch_id: int, t: pa.Table, clock) -> pa.Table | None:
    if not mig.begin(batch_id):
        return None
    mig.add("in0", t)
    _, out, _ = mig.advance(clock)
    mig.commit(batch_id)
    return out


@pytest.mark.parametrize("make,crash_at", [(cq3_plan, 9), (cq3_plan, 31), (cq1_plan, 17)])
def test_reopened_mig_continues_after_its_last_commit(tmp_path, make, crash_at):
    # CQ3 at scale 0.2: windows of 60 s (coarse slices sealed) and 12 s; CQ1: packed rows
    q = make(rate=2000, scale=0.2, plugs=6)
    batches = _batches(50, 6, seed=crash_at)
    clock = [T0 + dt.timedelta(seconds=s) for s in range(50)]
    path = tmp_path / "db1.duckdb"
    mig = _mig(q, path)
    outs = []
    for b in range(crash_at):
        outs.append(_feed(mig, b, batches[b], clock[b]))
    # the crash: batch `crash_at` is half done (rows in, slides not run, nothing committed)
    assert mig.begin(crash_at)
    mig.add("in0", batches[crash_at])
    mig.db.con.close()
    mig = _mig(q, path)
    assert mig.applied == crash_at - 1
    assert not mig.begin(crash_at - 1), "a committed batch must be skipped when replayed"
    for b in range(crash_at, 50):
        outs.append(_feed(mig, b, batches[b], clock[b]))
    assert mig.begin(10**8)
    _, out, _ = mig.advance(dt.datetime(2100, 1, 1))
    mig.commit(10**8)
    outs.append(out)
    got = pa.concat_tables([o for o in outs if o is not None and o.num_rows])
    got = got.rename_columns(["tau" if c == "_tau" else c for c in got.column_names])
    want = reference_result(q, pa.concat_tables([b.drop_columns(["_ts"]) for b in batches]))
    assert diff_results(got, want) is None


def test_a_work_dir_of_another_run_is_refused(tmp_path):
    a = {"query": "CQ3", "placement": "op1=spe", "plan_sha": "x", "seconds_per_batch": 1}
    assert claim(tmp_path, a) is False  # a new run claims the directory
    assert claim(tmp_path, a) is False  # its input was never complete: start over
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "inputs.json").write_text("{}")
    assert claim(tmp_path, a) is True  # same run, input complete: resume
    b = dict(a, placement="op1=db")
    with pytest.raises(ResumeError, match="placement: 'op1=spe' there, 'op1=db' now"):
        claim(tmp_path, b)


def test_result_parts_are_idempotent_by_batch(tmp_path):
    parts = ResultParts(tmp_path, ["n"])
    t = pa.table({"_tau": pa.array([T0], pa.timestamp("us")), "n": [1]})
    parts.put((0, 3), t)
    parts.put((0, 3), t)  # a replayed batch writes the same part again
    parts.put((0, 4), t)
    assert parts.table().num_rows == 2


def test_an_ordered_sink_gets_each_instant_once_and_in_order(tmp_path):
    """Rows that Spark computes as their input arrives (window rows) reach an instant's
    rows over several micro-batches: the API's iterator gets each instant once, complete,
    in order (held until the stage's clock completes it); a durable sink at once."""
    from federation.runtime.connectors.parquet_sink import ParquetDirectorySink
    from federation.runtime.sinks import QueueSink

    q, out = QueueSink(), ParquetDirectorySink(tmp_path / "out")
    parts = ResultParts(tmp_path / "r", ["n"], [q, out])
    s = [T0 + dt.timedelta(seconds=k) for k in range(4)]

    def rows(*taus) -> pa.Table:
        return pa.table({"_tau": pa.array(list(taus), pa.timestamp("us")),
                         "n": list(range(len(taus)))})

    parts.put((0, 1), rows(s[1], s[2], s[3]), complete=False)
    parts.release((0, 1), s[1])
    parts.put((0, 2), rows(s[2], s[3]), complete=False)  # more rows of instants 2 and 3
    parts.release((0, 2), s[2])
    parts.release((0, 3), None)  # the end of the input
    q.close()
    got = list(iter(q.q.get, None))
    assert [t for t, _ in got] == s[1:], "each instant once, in order"
    assert [r.num_rows for _, r in got] == [1, 2, 2]
    assert len(read_manifest(tmp_path / "out")) == 2  # durable: each batch at once
