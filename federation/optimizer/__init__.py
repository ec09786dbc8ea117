"""The optimizer: Phase-One (phase_one.py and its rules), then Phase-Two (phase_two.py, the
enumerator, with coster.py), and the report of both.

Example:
    >>> from federation.smartplug.queries import cq4_plan
    >>> r = optimize(cq4_plan(rate=2000))
    >>> r.plans_examined
    11
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from costmodel.memory import PlanMemory, checked_memory
from costmodel.ordering import CostVector
from costmodel.plan_cost import PlanCost, plan_cost
from costmodel.profile import CostProfile, load_profile
from federation.logical import NumberedPlan, Rstream
from federation.optimizer.join_order import join_shape
from federation.optimizer.phase_one import phase_one
from federation.optimizer.phase_two import phase_two
from federation.optimizer.query_set import place_query_set
from federation.physical import PhysicalPlan, build_physical_plan, spe_limits


@dataclass(frozen=True)
class OptimizationResult:
    """The chosen physical plan, what it costs, and how it was found."""

    plan: PhysicalPlan
    plan_cost: PlanCost
    feasible: bool
    plans_examined: int
    subplans: int
    phase_one_s: float
    phase_two_s: float
    join_shape: str
    kept: tuple[tuple[dict[str, str], CostVector], ...]  # every complete plan, best first
    feasibility_check: bool
    memory: PlanMemory | None = None  # the chosen plan's predicted state per engine
    #: kept plans better by Definition 1 whose state does not fit, with what it exceeds
    unqualified: tuple[tuple[str, tuple[str, ...]], ...] = ()
    memory_check: bool = True
    spe_cores: float = 2.0  # the cores Spark has in the profile it was chosen with

    @property
    def qualified(self) -> bool:
        """It keeps up (feasible) and its state fits each engine's memory."""
        return self.feasible and (self.memory is None or self.memory.fits)

    @property
    def cost(self) -> CostVector:
        """The chosen plan's cost vector (C_b, C_u)."""
        return self.plan_cost.vector


def optimize(
    query: Rstream,
    profile: CostProfile | None = None,
    feasibility_check: bool = True,
    max_subplan_ops: int = 15,
    reorder_joins: bool = True,
    memory_check: bool = True,
) -> OptimizationResult:
    """Place every R2R operator of `query` in the SPE or the DB: the best plan by
    Definition 1 among those whose predicted state fits each engine's memory
    (costmodel/memory.py; `memory_check=False`: the best whatever its memory). Where no
    kept plan fits, the best one, not qualified, with what each exceeds."""
    profile = profile or load_profile()
    t0 = time.perf_counter()
    logical = NumberedPlan.of(phase_one(query, profile, reorder=reorder_joins))
    t1 = time.perf_counter()
    if logical.many:  # several queries: a DAG, placed by local search (query_set.py)
        res = place_query_set(logical, profile, feasibility_check)
        res.subplans = 1
    else:
        res = phase_two(logical, profile, feasibility_check, max_subplan_ops)
    t2 = time.perf_counter()
    # the enumeration never chooses what an engine cannot run (physical.spe_limits); as a
    # guard, the first kept plan that every engine can run, else pure-DB
    runnable = [pl for pl, _ in res.plans if not spe_limits(logical, pl)]
    if not runnable:
        runnable = [{o: "db" for o in logical.r2r_ids}]
    unqualified: list[tuple[str, tuple[str, ...]]] = []
    chosen = None
    for pl in runnable:
        physical = build_physical_plan(logical, pl)
        memory = checked_memory(physical, profile)
        if memory.fits or not memory_check:
            chosen = physical, memory
            break
        unqualified.append((physical.placement_string, tuple(memory.exceeded())))
    if chosen is None:  # nothing fits: the best plan, reported as not qualified
        physical = build_physical_plan(logical, runnable[0])
        chosen = physical, checked_memory(physical, profile)
    physical, memory = chosen
    cost = plan_cost(physical, profile)
    return OptimizationResult(
        plan=physical,
        plan_cost=cost,
        feasible=cost.vector.is_feasible,
        plans_examined=res.examined,
        subplans=res.subplans,
        phase_one_s=t1 - t0,
        phase_two_s=t2 - t1,
        join_shape="several queries" if logical.many else join_shape(logical.root),
        kept=tuple(res.plans),
        feasibility_check=feasibility_check,
        memory=memory,
        unqualified=tuple(unqualified),
        memory_check=memory_check,
        spe_cores=profile.spe_cores or profile.spe_profile_cores,
    )


def plan_for(query: Rstream, placement: str | Mapping[str, str] = "auto",
             profile: CostProfile | None = None, feasibility_check: bool = True,
             memory_check: bool = True) -> tuple[PhysicalPlan, PlanCost]:
    """The physical plan that `run` executes and its cost: the optimizer's choice for
    "auto", else the named placement ("spe", "db" or op=engine items) over the Phase-One
    plan."""
    profile = profile or load_profile()
    if isinstance(placement, str) and placement.strip().lower() == "auto":
        r = optimize(query, profile=profile, feasibility_check=feasibility_check,
                     memory_check=memory_check)
        return r.plan, r.plan_cost
    pp = build_physical_plan(NumberedPlan.of(phase_one(query, profile)), placement)
    return pp, plan_cost(pp, profile)
