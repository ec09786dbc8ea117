"""Sliced and raw-row DB-ops (issue 10): what they keep, and their results against the
reference evaluator when the clock completes one or several instants at once.

JVM-free: the MIG is fed window rows directly, as Spark would send them for a DB-op
whose operators are all in DuckDB (or whose selections run in Spark).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from db.reference import reference_result
from federation import count, max_, window
from federation.expressions import avg, min_, sum_
from federation.instants import extent_of, first_instant, last_instant
from federation.logical import NumberedPlan
from federation.physical import build_physical_plan
from federation.results import diff_results
from federation.runtime.mig import MigRuntime
from federation.smartplug import PLUG_KEYS, smartplug_stream
from federation.smartplug.queries import QUERIES

S = smartplug_stream(rate=50, plugs=6, houses=2)
T0 = dt.datetime(2013, 9, 1)


def rows_of(seconds: int, per_s: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = seconds * per_s
    us = np.sort(rng.integers(0, seconds * 1_000_000, n))
    plug = rng.integers(0, 6, n)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "ts": pa.array(np.datetime64(T0, "us") + us.astype("timedelta64[us]"),
                       pa.timestamp("us")),
        "value": pa.array(np.round(rng.random(n) * 100, 3)),
        "property": pa.array(rng.integers(0, 2, n), pa.int32()),
        "plug_id": pa.array(plug % 3, pa.int32()),
        "household_id": pa.array(np.zeros(n, dtype=np.int32)),
        "house_id": pa.array(plug // 3, pa.int32()),
    })


def run_mig(q, placement: str, rows: pa.Table, bursts: list[int]) -> pa.Table:
    """Feed the MIG second by second; the clock completes `bursts[i % len]` seconds at a
    time (several instants per advance), then the end of input."""
    plan = NumberedPlan.of(q)
    pp = build_physical_plan(plan, placement)
    (op,) = pp.db_ops
    wins = [n for n in plan.nodes.values() if n.kind == "window"]
    slide = wins[0].slide_s
    ts = rows.column("ts").to_pylist()
    life = (first_instant(ts[0], slide), last_instant(ts[-1], extent_of(wins), slide))
    mig = MigRuntime(op, slide, threads=2, plan_nodes=plan.nodes, life=life)
    (ci,) = op.inputs
    # what Spark sends: the window rows after its own (SPE-placed) selections
    src = rows
    node = ci.node
    while node.kind == "select":
        src = src.filter(pa.compute.equal(src.column("property"), 1)) \
            if node.predicate.sql() == "property = 1" else src
        node = node.child
    outs = []
    sec, i = 0, 0
    n_s = int(np.ceil((ts[-1] - T0).total_seconds()))
    while sec < n_s:
        step = bursts[i % len(bursts)]
        i += 1
        lo, hi = T0 + dt.timedelta(seconds=sec), T0 + dt.timedelta(seconds=sec + step)
        part = src.filter(pa.compute.and_(pa.compute.greater_equal(src.column("ts"), lo),
                                          pa.compute.less(src.column("ts"), hi)))
        mig.add(ci.table, part.append_column("_ts", part.column("ts")))
        sec += step
        _, out, _ = mig.advance(hi)
        if out is not None:
            outs.append(out)
    _, out, _ = mig.advance(dt.datetime(2100, 1, 1))
    if out is not None:
        outs.append(out)
    got = pa.concat_tables(outs)
    mig.close()
    return got.rename_columns(["tau" if c == "_tau" else c for c in got.column_names])


def assert_matches_reference(q, placement, rows, bursts):
    got = run_mig(q, placement, rows, bursts)
    want = reference_result(q, rows)
    assert want.num_rows > 0
    problem = diff_results(got, want)
    assert problem is None, f"{placement} bursts {bursts}: {problem}"


def test_windows_of_different_ranges_share_one_slice_table():
    q = QUERIES["CQ6"](rate=2000, scale=1 / 6)
    (op,) = build_physical_plan(NumberedPlan.of(q), "db").db_ops
    (st,) = op.slices  # 10, 30 and 50 s windows: one table of 1-s slices
    assert (st.width_us, st.keep_us) == (1_000_000, 50_000_000)
    # and one of sealed 5-s slices: a window reads r / 5 s of them and < 10 fine ones
    assert st.coarse_us == 5_000_000
    assert op.raw == {}  # no window row is kept
    # one scan of each for the three windows
    assert op.sql_text.count('FROM "s0" AS') == 1 and op.sql_text.count('FROM "s0c" AS') == 1


def test_raw_rows_kept_only_where_read_and_only_their_columns():
    placement = "op1=spe,op2=spe,op3=db,op4=db,op5=db,op6=db"
    load = window(S, range=50, slide=1).filter("property = 1")
    q = (load.join(load.aggregate(by=PLUG_KEYS, maxv=max_("value")), on=PLUG_KEYS)
         .filter("value > 0.9 * maxv").aggregate(by=PLUG_KEYS, total=sum_("value")))
    (op,) = build_physical_plan(NumberedPlan.of(q.rstream("q")), placement).db_ops
    assert list(op.raw) == ["in0"]  # the join reads rows; the maximum comes from slices
    assert set(op.raw_columns["in0"]) == {"value", *PLUG_KEYS}
    assert [s.partials for s in op.slices] == [("p0",)]
    assert "taus" not in op.sql_text  # plain bounds, no range join against instants
    # CQ1 counts the rows: it reads them packed (db/sqlgen/packed.py), none kept raw
    q = QUERIES["CQ1"](rate=2000, scale=1 / 6)
    (op,) = build_physical_plan(NumberedPlan.of(q), placement).db_ops
    assert not op.raw
    assert [s.partials for s in op.slices] == [("p0",), ("_pk_n", "_pk_lo", "_pk_hi", "_pk_v")]


def test_coarse_slices_only_for_long_windows():
    q = SHAPES["coarse"]()
    (op,) = build_physical_plan(NumberedPlan.of(q), "db").db_ops
    assert [(s.width_us, s.coarse_us) for s in op.slices] == [(1_000_000, 4_000_000)]
    (op,) = build_physical_plan(NumberedPlan.of(SHAPES["chained"]()), "db").db_ops
    assert [s.coarse_us for s in op.slices] == [None]  # 5 fine slices: one level


def test_slice_width_is_gcd_of_ranges_and_slide():
    w7 = window(S, range=7, slide=2)
    w3 = window(S, range=3, slide=2)
    q = (w7.aggregate(by=["house_id"], a=sum_("value"))
         .join(w3.aggregate(by=["house_id"], b=max_("value")), on=["house_id"]).rstream("Q"))
    (op,) = build_physical_plan(NumberedPlan.of(q), "db").db_ops
    assert [(s.width_us, s.keep_us) for s in op.slices] == [(1_000_000, 7_000_000)]


SHAPES = {
    # slide 2 s does not divide the ranges 7 s and 3 s; every decomposable aggregate
    "mixed_aggregates": lambda: (
        window(S, range=7, slide=2).filter("property = 1")
        .aggregate(by=["house_id", "plug_id"], n=count(), s=sum_("plug_id"), a=avg("value"),
                   lo=min_("value"), hi=max_("value"))
        .join(window(S, range=3, slide=2).filter("property = 1")
              .aggregate(by=["house_id", "plug_id"], a3=avg("value"), c3=count("value")),
              on=["house_id", "plug_id"])
        .rstream("Q")),
    # a global aggregate: one row at every instant, also over empty windows
    "global": lambda: (window(S, range=2.5, slide=0.5).filter("value > 95")
                       .aggregate(by=[], n=count(), m=max_("value"), t=sum_("house_id"))
                       .rstream("Q")),
    # chained: a sliced aggregate feeding another aggregate (CQ5's shape)
    "chained": lambda: (window(S, range=5, slide=1).project("house_id", "plug_id",
                                                             v="value * 2")
                        .aggregate(by=["house_id", "plug_id"], t=sum_("v"))
                        .aggregate(by=["house_id"], m=max_("t")).rstream("Q")),
    # long windows: sealed coarse slices (4 s) and fine ones (1 s) at both ends of a
    # window whose start is not on the coarse grid (range 37 s, slide 2 s)
    "coarse": lambda: (
        window(S, range=37, slide=2).filter("property = 1")
        .aggregate(by=["house_id", "plug_id"], n=count(), hi=max_("value"), a=avg("value"))
        .join(window(S, range=20, slide=2).filter("property = 1")
              .aggregate(by=["house_id", "plug_id"], lo=min_("value"), t=sum_("plug_id")),
              on=["house_id", "plug_id"])
        .rstream("Q")),
    # rows against an aggregate of their own window (raw rows and slices in one DB-op)
    "cq2_shape": lambda: QUERIES["CQ2"](rate=50, scale=1 / 30, plugs=6),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("bursts", [[1], [3, 1, 7], [20]])  # event s per clock advance
def test_sliced_and_raw_db_ops_match_reference(shape, bursts):
    rows = rows_of(90, 20, seed=len(shape))
    assert_matches_reference(SHAPES[shape](), "db", rows, bursts)


@pytest.mark.parametrize("name", ["CQ1", "CQ3", "CQ6"])
def test_selections_in_spark_rest_sliced_match_reference(name):
    q = QUERIES[name](rate=50, scale=1 / 30, plugs=6)
    plan = NumberedPlan.of(q)
    pl = ",".join(f"{o}={'spe' if plan.nodes[o].kind == 'select' and plan.nodes[o].child.kind == 'window' else 'db'}"
                  for o in plan.r2r_ids)
    assert_matches_reference(q, pl, rows_of(40, 40, seed=3), [2, 5])
