"""Source-driven sizes (eqs 1-3), u (eq 4), C_b/C_u (eqs 5-6), Definition 1, profiles."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from costmodel.ordering import CostVector, better, sort_key
from costmodel.plan_cost import plan_cost
from costmodel.profile import DEFAULT_PROFILE_PATH, CostProfile, load_profile, paper_form
from costmodel.sizes import SourceDrivenSizes
from federation import max_, sum_, window
from federation.logical import NumberedPlan
from federation.physical import build_physical_plan
from federation.smartplug import smartplug_stream
from federation.smartplug.queries import cq1_plan, cq3_plan, cq5_plan


def sizes_of(q):
    plan = NumberedPlan.of(q)
    return plan, SourceDrivenSizes.of(plan)


def test_eq1_selection_and_window_sizes():
    _plan, s = sizes_of(cq5_plan(rate=4000, plugs=100))
    assert s["w1"].rate == 4000 and s["w1"].size == 4000 * 300
    assert s["w1"].copies == 300
    assert s["op1"].rate == pytest.approx(2000)  # property = 1 is half the tuples
    assert s["op1"].size == pytest.approx(600_000)


def test_eq3_aggregation_is_slides_times_groups():
    _plan, s = sizes_of(cq5_plan(rate=4000, plugs=100))
    assert s["op2"].rate == pytest.approx(1.0 * 100)  # l = 1/slide, g = 100 plugs
    assert s["op2"].size == 100
    assert s["op3"].size == 40  # households: at least one per house (40 houses)


def test_eq2_join():
    _plan, s = sizes_of(cq1_plan(rate=2000, plugs=100))
    left, right, join = s["op1"], s["op3"], s["op4"]
    f = 1 / 100
    assert join.rate == pytest.approx(left.rate * f * right.size + right.rate * f * left.size)
    assert join.size == pytest.approx(f * left.size * right.size)


def test_eq4_to_6_plan_cost_is_max_and_sum():
    p = paper_form(load_profile(DEFAULT_PROFILE_PATH))
    pc = plan_cost(build_physical_plan(NumberedPlan.of(cq3_plan(rate=2000)), "spe"), p)
    us = list(pc.spe.values())
    assert pc.vector.C_b == pytest.approx(max(us))
    assert pc.vector.C_u == pytest.approx(sum(us))
    # eq. 4 for a selection: u = in * c
    assert pc.spe["op1"] == pytest.approx(2000 * p.spe_s_per_row.select)


def test_db_op_cost_split():
    p = paper_form(load_profile(DEFAULT_PROFILE_PATH))
    pp = build_physical_plan(NumberedPlan.of(cq5_plan(rate=2000, plugs=100)), "op2=db,op3=db")
    pc = plan_cost(pp, p)
    (d,) = pp.db_ops
    c = pc.db[d.id]
    s = SourceDrivenSizes.of(pp.logical)
    assert c.transfer_in == pytest.approx(s["op1"].rate * p.db_transfer_in_s_per_row)
    # op2 folds its rows into 1-s slices (no row is kept: a fold per row, no upkeep) and
    # combines per slide 300 / 12 coarse slices and 12 fine ones of the 100 plugs (1,000
    # load rows/s fill every plug's slice); op3 scans op2's relation of 100 rows
    assert c.maintain == pytest.approx(1000 * p.db_fold_s_per_row)
    combine = (300 / 12 * 100 + 12 * 100) * (p.db_slice_s_per_row
                                              if p.db_slice_s_per_row is not None
                                              else p.db_scan_s_per_row.aggregate)
    scan = combine + p.db_scan_s_per_row.aggregate * s["op2"].size
    assert c.sql == pytest.approx(1.0 * (p.db_sql_fixed_s + scan))
    assert c.transfer_out == pytest.approx(1.0 * 40 * p.db_transfer_out_s_per_row)
    assert pc.vector.C_u == pytest.approx(c.total + pc.spe["op1"])


def test_raw_rows_pay_upkeep_sliced_rows_do_not():
    p = load_profile(DEFAULT_PROFILE_PATH)
    s = SourceDrivenSizes.of(NumberedPlan.of(cq1_plan(rate=2000)))
    load = window(smartplug_stream(rate=2000), range=300, slide=1).filter("property = 1")
    peak = load.aggregate(by=["plug_id"], maxv=max_("value"))
    raw = load.join(peak, on=["plug_id"]).aggregate(by=["plug_id"], total=sum_("value"))
    pcr = plan_cost(build_physical_plan(NumberedPlan.of(raw.rstream("q")), "db"), p)
    pc1 = plan_cost(build_physical_plan(NumberedPlan.of(cq1_plan(rate=2000)), "db"), p)
    pc5 = plan_cost(build_physical_plan(NumberedPlan.of(cq5_plan(rate=2000)), "db"), p)
    # a join that sums the rows reads them raw: kept, with their upkeep, and the max folded
    assert pcr.db["db1"].maintain == pytest.approx(
        2000 * (p.db_window_maintain_s_per_row + p.db_fold_s_per_row))
    # CQ1 counts them against the max: folded twice, into slices and packs, no upkeep
    assert pc1.db["db1"].maintain == pytest.approx(2 * 2000 * p.db_fold_s_per_row)
    # CQ5's only reader folds them: no upkeep
    assert pc5.db["db1"].maintain == pytest.approx(2000 * p.db_fold_s_per_row)
    assert s["w1"].rate == 2000


@pytest.mark.parametrize("name", ["CQ1", "CQ2", "CQ3", "CQ4", "CQ5", "CQ6"])
@pytest.mark.parametrize("selections", ["db", "spe"])
def test_cost_model_folds_what_the_sql_folds(name, selections):
    # costmodel.plan_cost.sliced_aggregates and db.sqlgen decide the same: the input
    # positions the cost model folds (into slices or packs) are those the SQL does not
    # read raw
    from costmodel.plan_cost import packed_counts, sliced_aggregates
    from federation.smartplug.queries import QUERIES

    plan = NumberedPlan.of(QUERIES[name](rate=2000))
    pl = {o: (selections if plan.nodes[o].kind == "select"
              and plan.nodes[o].child.kind == "window" else "db") for o in plan.r2r_ids}
    (d,) = build_physical_plan(plan, pl).db_ops
    sliced = sliced_aggregates(plan, set(d.members))
    folded = {pos for pos, _ in sliced.values()}
    folded |= {pc.input for pc in packed_counts(plan, d.members, sliced).values()}
    from_slices = {o for ci in d.inputs if ci.row_level for o in ci.op_ids
                   if o not in d.raw.get(ci.table, ())}
    assert folded == from_slices and folded


def test_identical_inputs_are_transferred_once():
    pp = build_physical_plan(NumberedPlan.of(cq1_plan()), "db")
    (c,) = pp.db_ops
    assert len(c.inputs) == 1 and c.inputs[0].op_ids == ("w1", "w2")


def test_definition_1():
    feas_cheap, feas_dear = CostVector(0.9, 1.0), CostVector(0.2, 1.5)
    inf_low, inf_high = CostVector(1.1, 50), CostVector(3.0, 3.0)
    assert better(feas_cheap, feas_dear)
    assert better(feas_dear, inf_low)
    assert better(inf_low, inf_high)
    assert not better(inf_high, inf_low)
    # with the check off only C_u counts
    assert better(inf_high, inf_low, feasibility_check=False)
    vs = [inf_high, feas_dear, inf_low, feas_cheap]
    assert sorted(vs, key=sort_key) == [feas_cheap, feas_dear, inf_low, inf_high]


def test_capacity_constraint_extension():
    p = load_profile(DEFAULT_PROFILE_PATH).model_copy(update={"capacity_cores": 2})
    v = plan_cost(build_physical_plan(NumberedPlan.of(cq3_plan(rate=2000)), "spe"), p).vector
    assert v.C_b >= v.C_u / 2


def test_profile_is_strict_and_round_trips(tmp_path):
    p = load_profile(DEFAULT_PROFILE_PATH)
    path = p.save(tmp_path / "p.json")
    assert load_profile(path) == p
    data = json.loads(path.read_text())
    data["db_sql_fixed_ms"] = 1
    with pytest.raises(ValidationError, match="db_sql_fixed_ms"):
        CostProfile.model_validate(data)
    data.pop("db_sql_fixed_ms")
    data["db_sql_fixed_s"] = -1
    with pytest.raises(ValidationError, match="db_sql_fixed_s"):
        CostProfile.model_validate(data)


def test_the_feed_is_spark_where_an_spe_op_reads_a_stream_else_direct():
    """costmodel/feed.py: a plan whose streams no SPE-op reads pays the direct feed's cost,
    not Spark's per-slide cost (issue 45); with --feed spe, or an SPE-op over a window, it
    pays Spark's; a DB-op below an SPE-op leaves the streams to the direct feed."""
    p = load_profile(DEFAULT_PROFILE_PATH).model_copy(update={
        "direct_s_per_slide": 1e-3, "direct_s_per_row": 1e-7})
    plan = NumberedPlan.of(cq5_plan(rate=4000, plugs=100))
    slides = max(s.l for s in SourceDrivenSizes.of(plan).values())
    for placement, feed in (("db", "direct"), ("spe", "spark"), ("op1=spe", "spark"),
                            ("op1=db,op2=db,op3=spe", "direct")):
        pc = plan_cost(build_physical_plan(plan, placement), p)
        assert pc.feed == feed, placement
        want = slides * (p.spe_s_per_slide if feed == "spark" else p.direct_s_per_slide) + (
            4000 * p.direct_s_per_row if feed == "direct" else 0.0)
        assert pc.gateway == pytest.approx(want), placement
        spe_fed = plan_cost(build_physical_plan(plan, placement), p.model_copy(
            update={"feed": "spe"}))
        assert spe_fed.feed == "spark" and spe_fed.gateway == pytest.approx(
            slides * p.spe_s_per_slide)
