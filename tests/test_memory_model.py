"""The memory model and qualified plans (issue 25; costmodel/memory.py). No JVM."""

from __future__ import annotations

import math

import pytest

from costmodel.memory import plan_memory, size_bytes, spe_state_rows
from costmodel.profile import load_profile
from costmodel.sizes import NodeSize
from federation.explain import explain_json, explain_text
from federation.optimizer import optimize, plan_for
from federation.smartplug.queries import QUERIES


def test_spark_aggregate_state_is_groups_per_window_times_open_windows():
    class Aggregate:
        kind = "aggregate"
        mergeable = True  # no COUNT(DISTINCT): a row per group and window

    out = NodeSize(rate=2125.0, size=2125.0, l=1.0, copies=1.0, row_level=False, groups=2125.0)
    # 1,000 rows a second over 300 windows of 300 s reach every one of the 2,125 groups in
    # each window (2,125 x 300 rows), the open pane's 1,000 rows at most 1,000 of them
    rows = NodeSize(rate=1000.0, size=300_000.0, l=1.0, copies=300.0, row_level=True)
    assert spe_state_rows(Aggregate(), out, [rows]) == 2125 * 300 + 1000
    # 5 rows a second over windows of 10 s: 50 groups per window at most
    few = NodeSize(rate=5.0, size=50.0, l=1.0, copies=10.0, row_level=True)
    assert spe_state_rows(Aggregate(), out, [few]) == 50 * 10 + 5
    # COUNT(DISTINCT) keeps a set per group: up to every row of each window, and the pane's
    Aggregate.mergeable = False
    assert spe_state_rows(Aggregate(), out, [rows]) == 300_000 * 300 + 1000


def test_state_grows_with_the_window_and_sits_where_the_operators_run():
    p = load_profile()
    short, long_ = (plan_for(QUERIES["CQ5"](rate=20000, scale=s), "spe", p)[0]
                    for s in (0.1, 1.0))
    a, b = plan_memory(short, p), plan_memory(long_, p)
    assert b.spe_bytes > 5 * a.spe_bytes and a.db_bytes == b.db_bytes == 0
    db = plan_memory(plan_for(QUERIES["CQ5"](rate=20000), "db", p)[0], p)
    assert db.spe_bytes == 0 and db.db_bytes > 0


def test_duckdb_storage_model_follows_a_window_table_through_its_checkpoints():
    """A window table as a DB-op keeps it (db/store.py: rows appended every slide, the
    expired deleted every DB_EXPIRE_SLIDES slides, a CHECKPOINT every DB_CHECKPOINT_SLIDES):
    DuckDB's own peak count within 25% of `Table.bytes` with the compressed bytes per value
    measured on the same table right after a CHECKPOINT. Breaking the uncompressed term
    (rows appended since the CHECKPOINT) fails it at every size."""
    import datetime as dt

    import numpy as np
    import pyarrow as pa

    from costmodel.memory import Table
    from db.store import InputSpec, MigDatabase
    from federation.conventions import DB_CHECKPOINT_SLIDES

    rng = np.random.default_rng(3)
    for per_s, window_s in ((2_000, 30), (20_000, 30), (20_000, 120)):
        db = MigDatabase([InputSpec("w", {"value": "DOUBLE", "plug_id": "INT"},
                                    row_level=True, range_s=window_s)], "SELECT 1")
        t0 = dt.datetime(2013, 9, 1)
        t0_us = round(t0.replace(tzinfo=dt.timezone.utc).timestamp() * 1_000_000)
        peak, after = 0, []
        for sec in range(window_s + 3 * DB_CHECKPOINT_SLIDES):
            ts = t0_us + sec * 1_000_000 + np.sort(rng.integers(0, 999_999, per_s))
            db.insert("w", pa.table({"_ts": pa.array(ts, pa.timestamp("us")),
                                     "value": rng.gamma(2.0, 50.0, per_s),
                                     "plug_id": pa.array(rng.integers(0, 2125, per_s),
                                                         pa.int32())}))
            db.expire(t0 + dt.timedelta(seconds=sec + 1))
            if sec >= window_s:
                m = db.memory_bytes()
                peak = max(peak, m)
                if (sec + 1) % DB_CHECKPOINT_SLIDES == 0:
                    after.append(m)
        rows = per_s * window_s
        per_value = min(after) / (rows * 3)
        model = Table(rows, per_s * DB_CHECKPOINT_SLIDES, ("TIMESTAMP", "DOUBLE", "INT"))
        p = load_profile().model_copy(update={"db_compressed_bytes_per_value": per_value})
        assert 0.75 <= model.bytes(p) / peak <= 1.25, (per_s, window_s, model.bytes(p), peak)
        db.close()


def test_slice_tables_keep_the_fine_slices_of_the_whole_range():
    """CQ5 at the paper's 5-minute window as one DB-op: its fine 1-s slices stay for the
    whole range (each one is an edge of a later window), beside the sealed 12-s coarse
    ones; the model's rows per slice table follow DuckDB's counts within 5% (the model
    that kept only the open coarse slice's fine slices predicted 600 fine rows, not
    15,000)."""
    import datetime as dt

    import numpy as np
    import pyarrow as pa

    from costmodel.memory import db_tables
    from costmodel.sizes import SourceDrivenSizes
    from federation.logical import NumberedPlan
    from federation.physical import build_physical_plan
    from federation.runtime.mig import MigRuntime

    plugs, per_s = 50, 400
    q = QUERIES["CQ5"](rate=per_s, scale=1.0, plugs=plugs)
    pp = build_physical_plan(NumberedPlan.of(q), "db")
    (cand,) = pp.db_ops
    assert [bool(sl.coarse_us) for sl in cand.slices] == [True]
    mig = MigRuntime(cand, 1.0)
    rng = np.random.default_rng(4)
    t0 = dt.datetime(2013, 9, 1)
    for sec in range(330):
        ts = [t0 + dt.timedelta(seconds=sec, microseconds=int(x))
              for x in np.sort(rng.integers(0, 999_999, per_s))]
        plug = np.arange(per_s, dtype=np.int32) % plugs  # every plug, both properties
        mig.add("in0", pa.table({
            "_ts": pa.array(ts, pa.timestamp("us")),
            "ts": pa.array(ts, pa.timestamp("us")),
            "id": pa.array(np.arange(per_s) + sec * per_s, pa.int64()),
            "value": rng.gamma(2.0, 50.0, per_s),
            "property": pa.array((np.arange(per_s) // plugs) % 2, pa.int32()),
            "plug_id": plug, "household_id": plug // 5, "house_id": plug // 25}))
        mig.advance(t0 + dt.timedelta(seconds=sec))
    counts = mig.db.row_counts()
    fine, coarse = (t.rows for t in db_tables(SourceDrivenSizes.of(pp.logical), cand))
    sl = cand.slices[0]
    assert 0.95 <= counts[sl.name] / fine <= 1.05, (counts, fine)
    assert 0.95 <= counts[sl.coarse] / coarse <= 1.05, (counts, coarse)


def test_size_bytes_reads_spark_and_duckdb_spellings():
    assert size_bytes("4g") == 4 * 2**30
    assert size_bytes("512MB") == 512 * 2**20
    assert size_bytes("1024") == 1024


def test_a_lower_capacity_changes_the_choice():
    """CQ1 at 2,000/s: pure DuckDB keeps every window row (its selection folded in); with
    DuckDB's capacity just below that, the plan with the selection in Spark (DuckDB keeps
    only the selected rows) is chosen, and the pure-DuckDB plan is named as passed over."""
    p = load_profile()
    q = QUERIES["CQ1"](rate=2000)
    free = optimize(q, profile=p)
    assert free.qualified and free.memory.db_bytes > 0
    cap = free.memory.db_bytes * 0.9
    r = optimize(q, profile=p.model_copy(update={"db_memory_bytes": cap}))
    assert r.plan.placement_string != free.plan.placement_string
    assert r.qualified and r.memory.db_bytes <= cap
    assert r.unqualified and r.unqualified[0][0] == free.plan.placement_string
    assert "DuckDB state" in r.unqualified[0][1][0]
    text = explain_text(r)
    assert "passed over (memory)" in text and "memory: Spark state" in text
    # the check off: the plan the optimizer chose before
    off = optimize(q, profile=p.model_copy(update={"db_memory_bytes": cap}),
                   memory_check=False)
    assert off.plan.placement_string == free.plan.placement_string
    assert "memory check off" in explain_text(off)


def test_when_nothing_fits_the_plan_says_so():
    p = load_profile().model_copy(update={"spe_memory_bytes": 1.0, "db_memory_bytes": 1.0})
    r = optimize(QUERIES["CQ3"](rate=20000), profile=p)
    assert not r.qualified
    j = explain_json(r)
    assert j["qualified"] is False and j["memory"]["exceeded"]
    assert "NOT qualified" in explain_text(r)


def test_default_capacities_come_from_the_machine():
    p = load_profile()
    m = plan_memory(plan_for(QUERIES["CQ1"](rate=2000), "db")[0], p)
    # the default 4 GB driver heap beside Spark's reserved 300 MiB, over the heap a state
    # byte takes at a batch's peak
    assert m.spe_capacity == pytest.approx((4096 - 300) * 2**20 / p.spe_heap_per_state_byte)
    assert 0 < m.db_capacity < math.inf


def test_a_small_heap_does_not_qualify_pure_spark_at_five_minute_windows():
    """benchmarks/results/memory_limits.json: with a 512 MB heap pure Spark CQ5 (5-minute
    windows, 2,125 plugs, 1,000/s) ran out of memory; the verdict must say so (it said
    qualified while the capacity was half the heap), and at the default heap it fits."""
    p = load_profile()
    spe = plan_for(QUERIES["CQ5"](rate=1000, plugs=2125), "spe")[0]
    small = plan_memory(spe, p, driver_memory="512m")
    assert not small.fits and small.exceeded()[0].startswith("Spark state")
    assert plan_memory(spe, p).fits


def test_more_spark_cores_move_a_long_tumbling_aggregate_into_spark(capsys):
    """The SPE's cores (issue 25): Spark's per-row costs spread over its cores, its
    per-micro-batch ones do not. Nexmark q17 (a daily tumble) is cheaper in DuckDB on the
    profile's two cores and in Spark on 32; `fedq explain --spe-cores` shows the capacity."""
    from pathlib import Path

    from costmodel.plan_cost import spe_op_cost
    from costmodel.sizes import SourceDrivenSizes
    from federation.cli import main
    from federation.logical import NumberedPlan
    from federation.nexmark import nexmark_streams
    from federation.sqlfront import sql

    text = (Path(__file__).parent.parent / "benchmarks" / "queries_sql" / "nexmark"
            / "q17.sql").read_text()
    q = sql(text, nexmark_streams(100_000))
    p = load_profile()
    lg = NumberedPlan.of(q)
    sizes = SourceDrivenSizes.of(lg)
    agg = next(o for o in lg.r2r_ids if lg.nodes[o].kind == "aggregate")

    def u(cores: float) -> float:
        return spe_op_cost(lg.nodes[agg], sizes[agg], [sizes[c] for c in lg.children[agg]],
                           p.model_copy(update={"spe_cores": cores}))

    fixed = u(1e9)  # the per-micro-batch part: what no number of cores removes
    assert fixed > 0 and u(4) - fixed == pytest.approx((u(2) - fixed) / 2)
    two = optimize(q, profile=p).plan.placement
    many = optimize(q, profile=p.model_copy(update={"spe_cores": 32})).plan.placement
    assert set(two.values()) == {"db"} and set(many.values()) == {"spe"}, (two, many)
    assert main(["explain", "CQ1", "--spe-cores", "32"]) == 0
    assert "capacity: Spark 32 cores (32 cores, given by --spe-cores)" in capsys.readouterr().out
    assert main(["explain", "CQ1"]) == 0
    assert "capacity: Spark 2 cores\n" in capsys.readouterr().out


def test_a_run_without_a_session_plans_for_the_default_one_without_a_jvm():
    """api.run with no Spark session plans for the session it will start (local[2]), and
    says so like a cluster's run does (summary spe_capacity); no JVM is needed for it."""
    from federation.api import spe_profile

    profile, cap = spe_profile(None, None)
    assert (cap.cores, cap.executors, cap.source) == (2, 0, "local[2]")
    assert cap.describe() == "2 cores (in the driver; local[2])"
    assert profile.spe_cores == 2
    rocks, _ = spe_profile(None, None, "rocksdb")
    assert rocks.spe_memory_bytes > 0  # the disk's free space


def test_a_local_session_plans_for_its_own_driver_heap():
    """A session started with a smaller heap (memory_limits' --driver-memory) gets the
    state that heap holds as Spark's capacity, not the default 4 GB's."""
    from costmodel.memory import heap_state_capacity
    from federation.api import spe_profile

    class Session:  # what spe_profile reads of a local session
        class sparkContext:
            master = "local[2]"

            @staticmethod
            def getConf():
                return {"spark.driver.memory": "1g"}

    p = load_profile()
    profile, _ = spe_profile(p, Session())
    assert profile.spe_memory_bytes == heap_state_capacity(2**30, p)
    assert profile.spe_memory_bytes < spe_profile(p, None)[0].spe_memory_bytes


#: the measured state the model is held to (issue 25: within 25%), recorded by
#: `python -m benchmarks.memory` (commands in benchmarks/results/README.md, "State memory")
#: CQ1 and CQ2 under DuckDB again after their counts read packed rows (db/sqlgen/packed.py):
#: a later file's point replaces an earlier one's of the same query, rate, plan and scale
MEASURED = ("memory_grid.json", "memory_full.json", "memory_full_spe.json",
            "memory_packed.json", "memory_full_packed.json")


#: recorded points the model over-predicts by more than a quarter, each with its bound and
#: why: CQ1 at 1,000/s with 5-minute windows holds about one reading per pack (500 loads a
#: second over 2,125 plugs), whose pack rows DuckDB compresses better than the model's
#: bytes per value (1.27: the memory check errs on the safe side there)
OVER = {("memory_full_packed.json", "CQ1", 1000.0, "db"): 1.35}


def test_the_model_predicts_the_recorded_state_within_a_quarter():
    """Today's model and profile against every recorded point (CQ1-CQ6 under pure Spark,
    pure DuckDB and the optimizer's plan at three rates, 30-s windows; CQ1, CQ3, CQ5 at
    the paper's 5-minute windows): each engine's bytes within 25% of what it counted at
    steady state (OVER: a higher bound, each with its reason). No run: the plans are
    rebuilt from the recorded placements."""
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
    p = load_profile()
    out, n = [], 0
    points = {}
    for name in MEASURED:
        rec = json.loads((results / name).read_text())
        for pt in rec["points"]:
            points[pt["query"], pt["rate"], pt["plan"], rec["scale"]] = name, rec, pt
    for name, rec, pt in points.values():
        q = QUERIES[pt["query"]](rate=pt["rate"], scale=rec["scale"], plugs=rec["plugs"])
        m = plan_memory(plan_for(q, pt["placement"], p)[0], p)
        hi = OVER.get((name, pt["query"], pt["rate"], pt["plan"]), 1.25)
        for pred, key in ((m.spe_bytes, "spark_bytes"), (m.db_bytes, "db_bytes")):
            meas = pt["measured"][key]
            if meas:
                n += 1
                if not 0.75 <= pred / meas <= hi:
                    out.append((name, pt["query"], pt["rate"], pt["plan"], key,
                                round(pred / meas, 2)))
    assert n >= 60 and not out, out
