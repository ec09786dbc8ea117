"""Sums of doubles compared for equality come from one engine (docs/sql.md, "Sums of
doubles"; federation/logical/float_sums.py). No JVM: placements are checked, not run (the
run across the engines is test_flink_sql's `test_plain_double_sums_compared_in_one_engine`).
"""

from __future__ import annotations

import pytest

from federation import optimize, sql
from federation.errors import PlacementError
from federation.expressions import avg, count, max_, sum_, sum_distinct
from federation.logical import window
from federation.logical.float_sums import compared_sums
from federation.logical.plan import NumberedPlan
from federation.physical import build_physical_plan, spe_limits
from federation.smartplug import smartplug_stream
from tests.test_sql import STREAMS

S = smartplug_stream(rate=2000, plugs=28, houses=4)


def side(**aggs):
    return window(S, range=10, slide=5).aggregate(by=["house_id"], **aggs)


def twins(**aggs):
    """The fuzzer's seed 204: one aggregate on both sides of an INTERSECT."""
    aggs = aggs or {"m": avg("value"), "t": sum_("value")}
    return side(**aggs).intersect(side(**aggs).filter("house_id >= 0")).rstream()


def met(q) -> list[set[str]]:
    return [set(ids) for ids in compared_sums(NumberedPlan.of(q)).values()]


def test_an_intersect_of_twin_double_sums_is_not_split_between_the_engines():
    q = twins()
    plan = NumberedPlan.of(q)
    assert plan.nodes["op1"].kind == plan.nodes["op3"].kind == "aggregate"
    assert met(q) == [{"op1", "op3"}]  # op7, the INTERSECT's group by, compares them
    split = "op1=spe," + ",".join(f"op{i}=db" for i in range(2, 10))
    with pytest.raises(PlacementError, match=r"op1 \(aggregate\) adds DOUBLE values that op7 "
                       r"compares for equality with the sums of op3 in the DB.*Sums of doubles"):
        build_physical_plan(plan, split)
    # the comparison itself may run in either engine: the twins only add in one
    for ok in ("spe", "db", "op7=db,op8=db,op9=db", "op1=db,op2=db,op3=db,op4=db"):
        build_physical_plan(plan, ok)
    for rate in (200, 20000):  # the optimizer drops its plans that split them
        s = smartplug_stream(rate=rate, plugs=28, houses=4)
        h = window(s, range=10, slide=5).aggregate(by=["house_id"], m=avg("value"))
        pl = optimize(h.intersect(h.filter("m > 0")).rstream()).plan.placement
        assert pl["op1"] == pl["op3"], pl


def test_twin_sums_fed_across_an_engine_boundary_are_refused_and_kept_together():
    # the fuzzer's seed 222: both AVGs in the DB, each fed by Spark along its own path,
    # differed in the last bits (an INTERSECT ALL lost 3 of 8 rows)
    h = window(S, range=10, slide=5).filter("property = 0").aggregate(by=["house_id"],
                                                                      m=avg("value"))
    plan = NumberedPlan.of(h.intersect(h.filter("house_id >= 0")).rstream())
    assert [plan.nodes[o].kind for o in ("op1", "op2", "op4", "op5")] == [
        "select", "aggregate", "select", "aggregate"]
    assert set(compared_sums(plan).popitem()[1]) == {"op2", "op5"}
    fed = "op1=spe," + ",".join(f"op{i}=db" for i in range(2, 12))
    with pytest.raises(PlacementError, match=r"op1 \(select\) feeds op2 \(aggregate\), whose "
                       r"DOUBLE sums op9 compares for equality with those of op5, across an "
                       r"engine boundary.*Sums of doubles"):
        build_physical_plan(plan, fed)
    both = {o: "db" for o in plan.r2r_ids} | {"op1": "spe", "op4": "spe"}
    assert {o for o, _ in spe_limits(plan, both)} == {"op1", "op4"}
    aggs_in_spe = {"op1": "db", "op2": "spe", "op4": "db", "op5": "spe"}
    assert {o for o, _ in spe_limits(plan, aggs_in_spe)} == {"op2", "op5"}
    for ok in ("spe", "db", "op1=db,op2=db,op4=db,op5=db", "op9=db,op10=db,op11=db"):
        build_physical_plan(plan, ok)


def test_joins_selections_and_distinct_rows_over_two_sums_compare_them():
    a = side(t=sum_("value"))
    b = side(u=sum_("value"))
    on_sum = a.join(b.project("u", h="house_id"), on=[("t", "u")]).rstream()
    assert met(on_sum) == [{"op1", "op2"}]
    where = a.join(b, on=["house_id"]).filter("t = u").rstream()
    assert {"op1", "op2"} in met(where)
    distinct = a.union_all(side(t=sum_("value"))).distinct().rstream()
    assert met(distinct) == [{"op1", "op2"}]


def test_exact_aggregates_and_a_lone_sum_are_placed_freely():
    # integers add exactly, MIN/MAX/COUNT pick, DISTINCT sums add in one order (108dcb4)
    for aggs in ({"n": count()}, {"x": max_("value")}, {"t": sum_("plug_id")},
                 {"t": sum_distinct("value")}):
        assert met(twins(**aggs)) == []
    # one aggregate's sums grouped by themselves: each value from one engine
    alone = side(t=sum_("value")).aggregate(by=["t"], n=count()).rstream()
    assert met(alone) == []
    plan = NumberedPlan.of(alone)
    assert spe_limits(plan, {"op1": "spe", "op2": "db"}) == []


def test_sql_intersect_of_a_cte_read_twice():
    q = sql("""WITH h AS (SELECT house_id, AVG(value) AS m FROM HOP(TABLE smartplug, DESCRIPTOR(ts),
      INTERVAL '5' SECOND, INTERVAL '10' SECOND) GROUP BY window_start, window_end, house_id)
      SELECT * FROM h INTERSECT SELECT * FROM h WHERE m > 0""", STREAMS)
    (ids,) = met(q)
    assert len(ids) == 2
    spe = min(ids)
    with pytest.raises(PlacementError, match="Sums of doubles"):
        build_physical_plan(NumberedPlan.of(q), f"{spe}=spe," + ",".join(
            f"{o}=db" for o in NumberedPlan.of(q).r2r_ids if o != spe))


def test_a_top_n_over_twin_sums_orders_them():
    a, b = side(t=sum_("value")), side(t=sum_("value"))
    q = a.union_all(b).top(3, ["t DESC"]).rstream()
    assert met(q) == [{"op1", "op2"}]


def test_a_db_op_holding_compared_sums_runs_duckdb_on_one_thread():
    # two threads add a sum over more than a row group (122,880 rows) in the order they
    # finish: 6 runs of one GROUP BY over 3M doubles gave 6 different sums (2026-12-05)
    import os

    from federation.runtime.mig import mig_resources

    plan = NumberedPlan.of(twins())
    threads, _ = mig_resources(build_physical_plan(plan, "db"))
    assert threads == {"db1": 1}
    threads, _ = mig_resources(build_physical_plan(plan, "op1=db,op2=db,op3=db,op4=db"))
    assert threads == {"db1": 1, "db2": 1}  # each twin in a DB-op of its own
    lone = NumberedPlan.of(side(t=sum_("value")).aggregate(by=["t"], n=count()).rstream())
    threads, _ = mig_resources(build_physical_plan(lone, "db"))
    assert threads == {"db1": os.cpu_count() or 1}
