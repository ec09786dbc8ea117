"""Move at a migration (federation/runtime/move.py): which migrations can move DuckDB
window state over and why others cannot (no JVM), and that a DB-op started from moved
state continues exactly where an uninterrupted one would be (real DuckDB)."""

from __future__ import annotations

import datetime as dt
import math
import re
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz_queries import queries
from db.functions import register_functions
from federation.errors import PlacementError
from federation.expressions import count
from federation.instants import Grid, as_grid, extent_of, first_instant, last_instant, query_grid
from federation.logical import NumberedPlan, Window, window
from federation.logical.plan import is_row_level
from federation.physical import build_physical_plan, placement_string
from federation.results import diff_results
from federation.runtime.mig import MigRuntime
from federation.runtime.move import NotMovable, plan_move, spark_window_state
from federation.smartplug.queries import QUERIES
from tests.test_db_store import T0, second_of_rows

_CON = duckdb.connect()
CQ3_HYBRID = "op1=db,op2=db,op3=db,op4=db,op5=spe,op6=spe"
CQ1_TOP_IN_SPARK = "op1=db,op2=db,op3=db,op4=db,op5=db,op6=spe"


def plans(name: str, old: str, new: str, scale: float = 0.05):
    q = QUERIES[name](rate=2000, scale=scale, plugs=20)
    lg = NumberedPlan.of(q)
    return q, build_physical_plan(lg, old), build_physical_plan(lg, new)


def test_spark_window_state_names_the_operators_spark_keeps_rows_for():
    _, spe, db = plans("CQ1", "spe", "db")
    assert spark_window_state(db) == []
    assert spark_window_state(spe) == ["op3", "op4"]  # the aggregate and the join of rows
    _, hybrid, _ = plans("CQ3", CQ3_HYBRID, "db")
    assert spark_window_state(hybrid) == []  # op5/op6 read the DB-ops' results


@pytest.mark.parametrize("old,new,why", [
    ("db", "spe", "the new placement keeps window rows in Spark: op3 (aggregate), op4 (join)"),
    ("spe", "db", "new db1: no DB-op of the old placement holds window smartplug"),
    # CQ1's count keeps packs of one column (db/sqlgen/packed.py), no rows to read again
    ("db", CQ1_TOP_IN_SPARK, ("db1 of the old placement keeps no rows of window smartplug "
                              "[range 15 s, slide 1 s], only partial aggregates")),
])
def test_move_refused_names_the_reason(old, new, why):
    _, po, pn = plans("CQ1", old, new)
    with pytest.raises(NotMovable, match=re.escape(why)):
        plan_move(po, "state", pn, 1.0)


def test_rows_kept_without_a_column_are_not_moved():
    from federation import max_, sum_
    from federation.smartplug import smartplug_stream

    load = window(smartplug_stream(rate=2000, plugs=20), range=15, slide=1).filter(
        "property = 1")
    q = (load.join(load.aggregate(by=["plug_id"], maxv=max_("value")), on=["plug_id"])
         .filter("value > 0.9 * maxv").aggregate(by=["plug_id"], total=sum_("value")))
    lg = NumberedPlan.of(q.rstream("q"))  # the old DB-op keeps the rows' value and key only
    po, pn = build_physical_plan(lg, "db"), build_physical_plan(lg, CQ1_TOP_IN_SPARK)
    with pytest.raises(NotMovable, match=re.escape(
            "db1 of the old placement keeps window smartplug [range 15 s, slide 1 s] without "
            'a column the new DB-op needs (Referenced column "id" not found')):
        plan_move(po, "state", pn, 1.0)


def test_what_is_moved():
    _, po, pn = plans("CQ1", CQ1_TOP_IN_SPARK, "db")  # rows: the old DB-op kept every column
    ((c,),) = plan_move(po, "st", pn, 1.0).values()
    assert str(c.path) == "st/db1.duckdb" and c.rows[0][0] == "in0" and not c.slices
    assert '_moved."in0"' in c.rows[0][1]
    _, po, pn = plans("CQ3", CQ3_HYBRID, "db")  # slices: of equal folds, kept long enough
    ((c,),) = plan_move(po, "st", pn, 1.0).values()
    assert c.slices == (("s0", "s0"),) and not c.rows
    _, po, pn = plans("CQ3", "db", "op1=spe,op2=db,op3=spe,op4=db,op5=db,op6=db")
    ((c,),) = plan_move(po, "st", pn, 1.0).values()  # the selections moved to Spark:
    assert c.slices == (("s0", "s0"),)  # the same slices, whichever engine filtered
    _, po, pn = plans("CQ1", "op1=db,op2=db,op3=db,op4=db,op5=spe,op6=spe",
                      "op1=spe,op2=spe,op3=db,op4=db,op5=spe,op6=spe")
    ((c,),) = plan_move(po, "st", pn, 1.0).values()  # rows: filtered in DuckDB as moved
    assert "WHERE" in c.rows[0][1] and "property" in c.rows[0][1]
    _, po, pn = plans("CQ1", "db", "op1=spe,op2=spe,op3=db,op4=db,op5=db,op6=db")
    ((c,),) = plan_move(po, "st", pn, 1.0).values()  # CQ1's count reads packs
    assert c.slices == (("s0", "s0"), ("k0", "k0")) and not c.rows  # (db/sqlgen/packed.py)


def _spark_side(t: pa.Table, node) -> pa.Table:
    """The window rows `t` through the selections and projections Spark runs below a MIG
    input (`node`), each as the reference evaluator (db/reference.py) does, on DuckDB
    relations: not through `row_chain`, which a move uses on the moved rows."""
    register_functions(_CON, node.functions())  # a chain's Python functions (federation.udf)
    chain = []
    while not isinstance(node, Window):
        chain.append(node)
        node = node.child
    if not chain:
        return t
    rel = _CON.from_arrow(t)
    for n in chain[::-1]:
        if n.kind == "select":  # every column on: the DB-op picks the ones it reads
            rel = rel.filter(n.predicate.sql(dialect="duckdb", identify=True))
        else:
            rel = rel.project(", ".join(['"_ts"', *(
                f"{e.sql(dialect='duckdb', identify=True)} AS \"{c}\"" for c, e in n.outputs)]))
    return rel.to_arrow_table()


def _feed(mig: MigRuntime, batch: int, t: pa.Table, upto: dt.datetime) -> pa.Table | None:
    """One micro-batch as the handler runs it: begin, rows in, slides, commit."""
    assert mig.begin(batch)
    for ci in mig.db_op.inputs:
        mig.add(ci.table, _spark_side(t.append_column("_ts", t.column("ts")), ci.node))
    _, out, _ = mig.advance(upto)
    mig.commit(batch)
    return out


@pytest.mark.parametrize("name,old,new,scale", [
    ("CQ1", CQ1_TOP_IN_SPARK, "db", 0.05),  # window rows, folded again into slices
    ("CQ5", "db", "db", 0.2),  # coarse slices, sealed up to where they were
    ("CQ3", CQ3_HYBRID, "db", 0.05),  # two DB-ops' slices into one
    ("CQ3", "db", CQ3_HYBRID, 0.05),  # one DB-op's slices into two
    ("CQ1", "db", "op1=spe,op2=spe,op3=db,op4=db,op5=db,op6=db", 0.05),  # rows filtered
    ("CQ6", "db", "op1=spe,op2=db,op3=spe,op4=db,op5=db,op6=spe,op7=db,op8=db", 0.05),
])
def test_a_db_op_started_from_moved_state_continues_exactly(name, old, new, scale, tmp_path):
    """The old placement's DB-ops run to the migration instant (`stop_at`), the new one's
    start there from their state; from it on they return what DB-ops that saw the whole
    input return."""
    _, po, pn = plans(name, old, new, scale)
    windows = [n for n in po.logical.nodes.values() if isinstance(n, Window)]
    rng = np.random.default_rng(5)
    seconds = [second_of_rows(s, 200, 20, rng) for s in range(3 * int(extent_of(windows)))]
    stop_at = T0 + dt.timedelta(seconds=len(seconds) // 2)
    runs = _continuation(po, pn, seconds, stop_at, 1.0, extent_of(windows), tmp_path)
    for c, (got, want, moved) in runs.items():
        assert moved and all(moved.values()), c
        assert got.num_rows > 0 and min(got.column("_tau").to_pylist()) == stop_at
        problem = diff_results(got, want)
        assert problem is None, f"{c}: {problem}"


def test_a_move_takes_rows_through_a_python_function_the_new_db_op_does_not_call(tmp_path):
    """The old DB-op keeps the window's rows; the new one reads them through a projection
    that calls a Python function, run in Spark after the migration: the move computes it
    on the moved rows, so the function is registered where the move's SELECT binds and
    where it runs (CI at c5d5b40 failed without)."""
    from federation.expressions import count_distinct
    from federation.smartplug import smartplug_stream
    from tests.test_udf import scaled

    q = (window(smartplug_stream(rate=2000), range=3, slide=1)
         .project("plug_id", x=scaled("value", "plug_id"))
         .aggregate(by=["plug_id"], m=count_distinct("x")).rstream())  # keeps the rows
    lg = NumberedPlan.of(q)
    po, pn = build_physical_plan(lg, "db"), build_physical_plan(lg, "op1=spe,op2=db")
    rng = np.random.default_rng(5)
    seconds = [second_of_rows(s, 200, 20, rng) for s in range(9)]
    runs = _continuation(po, pn, seconds, T0 + dt.timedelta(seconds=4), 1.0, 3.0, tmp_path)
    for c, (got, want, moved) in runs.items():
        assert moved and all(moved.values()) and got.num_rows > 0, c
        assert diff_results(got, want) is None


def _continuation(po, pn, seconds: list[pa.Table], stop_at: dt.datetime, slide_s: Grid | float,
                  extent_s: float, where, t0: dt.datetime = T0
                  ) -> dict[str, tuple[pa.Table, pa.Table, dict]]:
    """Run `po`'s DB-ops to `stop_at` (stopped there as a migration stops them), `pn`'s
    from their moved state on, and `pn`'s over the whole input; per new DB-op: its output
    from `stop_at` on, the uninterrupted one's, and what it took from `po`'s. The k-th
    table of `seconds` holds the rows of [t0 + k s, t0 + (k + 1) s): its batch's clock."""
    first = first_instant(t0, slide_s)
    last = last_instant(t0 + dt.timedelta(seconds=len(seconds)), extent_s, slide_s)
    olds = [MigRuntime(c, slide_s, life=(first, last), plan_nodes=po.logical.nodes,
                       state_path=str(where / f"{c.id}.duckdb")) for c in po.db_ops]
    for m in olds:
        m.stop_before(stop_at)
    moved = plan_move(po, where, pn, as_grid(slide_s).slide_us / 1e6)
    wholes = {c.id: MigRuntime(c, slide_s, life=(first, last), plan_nodes=pn.logical.nodes)
              for c in pn.db_ops}
    got = {c: [] for c in wholes}
    want = {c: [] for c in wholes}
    news = {}
    for s, t in enumerate(seconds):
        clock = t0 + dt.timedelta(seconds=s + 1)
        for c, m in wholes.items():
            out = _feed(m, s, t, clock)
            if out is not None:
                want[c].append(out.filter(pa.compute.greater_equal(
                    out.column("_tau"), pa.scalar(stop_at, pa.timestamp("us")))))
        if clock <= stop_at:
            for m in olds:
                _feed(m, s, t, clock)
            if clock == stop_at:
                for m in olds:
                    m.close()
                news = {c.id: MigRuntime(c, slide_s, life=(stop_at, last),
                                         plan_nodes=pn.logical.nodes, moved=moved[c.id])
                        for c in pn.db_ops}
            continue
        for c, m in news.items():
            out = _feed(m, s, t, clock)
            if out is not None:
                got[c].append(out)
    for m in [*wholes.values(), *news.values()]:
        m.close()
    return {c: (pa.concat_tables(got[c]), pa.concat_tables(want[c]), news[c].moved)
            for c in wholes}


def _shifted(t: pa.Table, by: dt.timedelta) -> pa.Table:
    i = t.schema.get_field_index("ts")
    return t.set_column(i, "ts", pa.compute.add(t.column("ts"), pa.scalar(by)))


@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(queries(), st.data())
def test_move_continues_exactly_for_generated_queries(g, data):
    """The fuzzer's random queries: between every pair of their placements (all in DuckDB,
    the selections and projections over window rows in Spark, the generated ones) where
    a move applies and every DB-op reads window rows only, the new DB-ops started from the
    moved state return from the migration instant on exactly what uninterrupted ones return
    (a tuple window's last n rows too). A query without such a pair is drawn again
    (`assume`), so every example
    migrates; `--hypothesis-show-statistics` shows how often rows or slices moved."""
    from benchmarks.fuzz_queries import PLUGS, RATE, _logical

    lg = _logical(g.query)
    windows = [n for n in lg.nodes.values() if isinstance(n, Window)]
    slide_s, extent_s = windows[0].slide_s, extent_of(windows)
    all_db = {o: "db" for o in lg.r2r_ids}
    rows_in_spark = {o: "spe" if is_row_level(lg.nodes[o]) else "db" for o in lg.r2r_ids}
    cands = list(dict.fromkeys([placement_string(all_db), placement_string(rows_in_spark),
                                *g.placements[3:]]))
    plans = []
    for p in cands:
        try:
            plans.append(build_physical_plan(lg, p))
        except PlacementError:  # a tuple window's readers in Spark: it has none
            continue
    pairs = []
    for po in plans:
        for pn in plans:
            if po is pn or any(not ci.row_level for p in (po, pn) for c in p.db_ops
                               for ci in c.inputs):
                continue
            try:
                plan_move(po, "x", pn, slide_s)
            except NotMovable:
                continue
            pairs.append((po, pn))
    assume(pairs)  # Hypothesis draws another query in its place
    po, pn = data.draw(st.sampled_from(pairs))
    event("a tuple window" if not all(w.is_time_based for w in windows) else "time windows")
    event("moved " + ("rows" if any(p.rows for c in plan_move(po, "x", pn, slide_s).values()
                                    for p in c) else "slices"))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    # the batches' clocks (every second) on the query's grid (its offset): every row moved
    # by its origin; the stop at a clock on the grid, every lcm(1 s, slide) (windows of
    # other slides draw grids of up to 8 s, and 1.5 s)
    grid = query_grid(windows)
    step = math.lcm(1_000_000, grid.slide_us) // 1_000_000
    n = max(12, 3 * math.ceil(extent_s), 3 * step)
    shift = dt.timedelta(microseconds=grid.origin_us)
    seconds = [_shifted(second_of_rows(s, RATE, PLUGS, rng), shift) for s in range(n)]
    stop_at = T0 + shift + dt.timedelta(seconds=max(step, n // 2 // step * step))
    assert grid.floor(stop_at) == stop_at
    with tempfile.TemporaryDirectory() as where:
        runs = _continuation(po, pn, seconds, stop_at, grid, extent_s, Path(where), T0 + shift)
    event("rows from stop_at on: " + ("some" if any(got.num_rows for got, _, _ in runs.values())
                                  else "none"))
    diffs = {c: diff_results(got, want) for c, (got, want, _) in runs.items()}
    bad = {c: d for c, d in diffs.items() if d is not None}
    assert not bad, f"{g!r}: {po.placement_string} -> {pn.placement_string}: {bad}"


def test_a_moved_db_op_adopts_its_state_at_the_first_batch_that_needs_it(tmp_path):
    """An overlapped start: the new DB-op's moved state waits for the old placement's end
    (`moved_after`). A micro-batch with no row for it and a clock before its first
    instant (a moved segment's first tick) goes through without waiting; the next one
    adopts the state (the wait is called then, once)."""
    _, po, pn = plans("CQ3", "db", "db", 0.05)
    rng = np.random.default_rng(5)
    stop_at = T0 + dt.timedelta(seconds=6)
    olds = [MigRuntime(c, 1.0, life=(T0 + dt.timedelta(seconds=1), None),
                       plan_nodes=po.logical.nodes, state_path=str(tmp_path / f"{c.id}.duckdb"))
            for c in po.db_ops]
    for s in range(6):
        for m in olds:
            m.stop_before(stop_at)
            _feed(m, s, second_of_rows(s, 200, 20, rng), T0 + dt.timedelta(seconds=s + 1))
    for m in olds:
        m.close()
    moved = plan_move(po, tmp_path, pn, 1.0)
    waited = []
    (c,) = pn.db_ops
    new = MigRuntime(c, 1.0, life=(stop_at, None), plan_nodes=pn.logical.nodes,
                     moved=moved[c.id], moved_after=lambda: waited.append(1))
    assert not new.begin(0, stop_at - dt.timedelta(microseconds=1)) and not waited
    assert new.begin(1) and waited == [1] and new.moved and all(new.moved.values())
    new.close()


@pytest.mark.parametrize("spark_state,before_s,stops", [
    (True, -5, False),  # one batch took the clock from 5 s before the stop past its tail
    (True, 15, True),  # the batch after it (Spark's watermark is past the tail now)
    (False, -5, True),  # no window rows in Spark: the clock of the batch itself
])
def test_a_segment_stops_once_spark_has_moved_its_watermark_past_the_tail(
        spark_state, before_s, stops):
    """A migrating segment's stage 0 stops when its clock is the tail past the migration
    instant; Spark's watermark in a micro-batch is the clock of the batches before it, so
    with window rows in Spark's state the clock before the batch counts (CI: a batch that
    took 20 event seconds at once stopped Spark before it emitted the 4 instants before
    the stop)."""
    import threading
    from types import SimpleNamespace

    from federation.runtime.microbatch import Execution

    stopped = threading.Event()
    stop = T0 + dt.timedelta(seconds=60)
    ex = SimpleNamespace(stop_at=stop, tail_s=15.0, spark_state=spark_state,
                         stopping=threading.Event())
    st = SimpleNamespace(query=SimpleNamespace(stop=stopped.set))
    Execution.stop_due(ex, st, stop + dt.timedelta(seconds=15),
                       stop + dt.timedelta(seconds=before_s))
    assert stopped.wait(1.0 if stops else 0.2) == stops == ex.stopping.is_set()


@pytest.mark.parametrize("make", [
    lambda s: (window(s, rows=5, slide=0.5).filter("value > 0.01")
               .project("id", x2="CASE WHEN value > 20 THEN 1 ELSE 0 END").distinct()),
    lambda s: window(s, range=2, slide=0.5).aggregate(by=["house_id"], n=count()),
], ids=["tuple_window", "time_window"])
def test_a_move_at_a_half_second_takes_the_rest_of_that_second(make, tmp_path):
    """A migration instant inside an input file's second (3.5 with a 0.5-s slide): the old
    placement keeps the readings before it, the moved segment reads that file from the
    instant on (found by the fuzzer: it read the files from 4.0 on, so a tuple window at
    4.0 held the five readings before 3.5). No JVM: DuckDB only, the direct feed."""
    from db.reference import reference_result
    from federation.adaptive import Segment, run_adaptive
    from federation.runtime.sources import load_inputs, read_clean_inputs
    from federation.smartplug import smartplug_stream
    from federation.smartplug.datagen import generate

    generate(tmp_path / "d", rate=30, seconds=10, plugs=6, houses=2, seed=3)
    q = make(smartplug_stream(rate=30, plugs=6, houses=2)).rstream("Q")
    start = T0.replace(microsecond=0)
    at = [start + dt.timedelta(seconds=s) for s in (3.5, 6.5)]
    segs = [Segment(start_at=None, stop_at=at[0], placement="db", rate=30, reason="t"),
            Segment(start_at=at[0], stop_at=at[1], placement="db", rate=30, reason="t"),
            Segment(start_at=at[1], stop_at=None, placement="db", rate=30, reason="t")]
    r = run_adaptive(q, tmp_path / "d", segs, seconds_per_batch=3, work_dir=tmp_path / "w",
                     feed="direct")
    assert [s.strategy for s in r.segments] == ["start", "move", "move"], r.segments
    want = reference_result(q, read_clean_inputs(load_inputs(tmp_path / "w" / "input")))
    assert diff_results(r.rows, want) is None
