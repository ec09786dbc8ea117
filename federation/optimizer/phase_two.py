"""Phase-Two: engine placement, bottom-up over the Phase-One plan (paper section 7).

At each R2R operator keep exactly one SPE-rooted partial plan (the operator in Spark over
the best partial plan of each child, by Definition 1) and every DB-rooted partial plan
(the operator in DuckDB, each child either feeding it from the SPE side or merging its own
DB-rooted partial plan into the same DB-op). A unary chain of n operators so
yields n + 1 complete plans instead of 2^n. Plans larger than `max_subplan_ops` operators
are decomposed into subplans of at most that many operators, optimized in post order: at a
subplan boundary only the best DB-rooted partial plan of a child survives.

The enumeration never sees the cost formulas: it asks `PartialCoster` for cost vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from costmodel.ordering import ZERO, CostVector, better, sort_key
from costmodel.plan_cost import plan_cost, reentry_cost
from costmodel.profile import CostProfile
from costmodel.sizes import SourceDrivenSizes
from federation.logical import NumberedPlan, Table, Window
from federation.logical.sessions import spark_limit
from federation.optimizer.coster import Partial, PartialCoster
from federation.physical import build_physical_plan, spe_limits


@dataclass
class PhaseTwoResult:
    """Every complete plan kept at the root, best first, and the enumeration counts."""

    plans: list[tuple[dict[str, str], CostVector]]
    examined: int
    subplans: int


def phase_two(
    plan: NumberedPlan,
    profile: CostProfile,
    feasibility_check: bool = True,
    max_subplan_ops: int = 15,
) -> PhaseTwoResult:
    """Bottom-up placement with the paper's pruning; returns the kept complete plans."""
    coster = PartialCoster(plan, profile)

    def key(p: Partial) -> tuple:
        return sort_key(coster.view(p.cost), feasibility_check)

    spe_rooted: dict[str, Partial] = {}
    db_rooted: dict[str, list[Partial]] = {}
    pending: dict[str, int] = {}
    subplans = 1
    top = plan.children["root"][0]
    for oid in plan.post_order():
        node = plan.nodes[oid]
        if isinstance(node, (Window, Table)) or oid == "root":  # leaves: not placed
            pending[oid] = 0
            continue
        kids = [c for c in plan.children[oid] if not isinstance(plan.nodes[c], (Window, Table))]
        count = 1 + sum(pending[c] for c in kids)
        if count > max_subplan_ops:
            # decomposition: the children's subplans are finished; keep their best DB-rooted
            for c in kids:
                if pending[c] and db_rooted[c]:
                    db_rooted[c] = [min(db_rooted[c], key=key)]
                    subplans += 1
            count = 1
        pending[oid] = count
        # SPE-rooted: this operator in Spark over each child's best partial plan
        closed = ZERO
        db_placed: frozenset[str] = frozenset()
        # what Spark cannot run (a tuple window's reader, ...) runs in the DB (spe_limits)
        if spark_limit(plan.nodes[oid], [plan.nodes[c] for c in plan.children[oid]]):
            closed = closed.add(float("inf"))
        for c in kids:
            # a DB-rooted child feeding this SPE-op re-enters Spark: one more query
            reenter = reentry_cost(coster.sizes[c], profile)
            options = [spe_rooted[c].cost] + [
                d.cost.add(reenter) if reenter else d.cost for d in db_rooted[c]]
            parts = [spe_rooted[c]] + db_rooted[c]
            bi = 0
            for i in range(1, len(options)):
                if better(coster.view(options[i]), coster.view(options[bi]), feasibility_check):
                    bi = i
            closed = closed.combine(options[bi])
            db_placed |= parts[bi].db_placed
        u = coster.spe_u(oid)
        spe_rooted[oid] = Partial(db_placed, closed.add(u), (), closed.add(u))
        # DB-rooted: each child feeds from the SPE side or merges its DB-rooted plans
        all_kids = plan.children[oid]
        choices = [
            [(spe_rooted[c], False)] + [(d, True) for d in db_rooted[c]]
            if c in spe_rooted
            else [(None, False)]
            for c in all_kids
        ]
        out: list[Partial] = []
        for combo in product(*choices):
            closed = ZERO
            members: tuple[str, ...] = ()
            inputs: frozenset = frozenset()
            db_placed = frozenset((oid,))
            for c, (part, merged) in zip(all_kids, combo):
                if merged:
                    closed = closed.combine(part.closed)
                    members += part.open_members
                    inputs |= part.open_inputs
                    db_placed |= part.db_placed
                else:
                    if part is not None:
                        closed = closed.combine(part.cost)
                        db_placed |= part.db_placed
                    inputs |= {c}
            members += (oid,)
            u = coster.db_u(oid, members, inputs)
            out.append(Partial(db_placed, closed, members, closed.add(u), inputs))
        db_rooted[oid] = out
    finals = [spe_rooted[top]] + db_rooted[top]
    ops = plan.r2r_ids
    placed = [{o: ("db" if o in p.db_placed else "spe") for o in ops} for p in finals]
    plans = [(pl, coster.final(p.cost, pl)) for pl, p in zip(placed, finals)]
    plans.sort(key=lambda t: sort_key(t[1], feasibility_check))  # each with its own feed
    return PhaseTwoResult(plans, len(finals), subplans)


def exhaustive(plan: NumberedPlan, profile: CostProfile, feasibility_check: bool = True):
    """All 2^n placements with their cost vectors, best first (for checks on small plans)."""
    ops = plan.r2r_ids
    sizes = SourceDrivenSizes.of(plan)
    out = []
    for engines in product(("spe", "db"), repeat=len(ops)):
        pl = dict(zip(ops, engines))
        if spe_limits(plan, pl):
            continue
        out.append((pl, plan_cost(build_physical_plan(plan, pl), profile, sizes).vector))
    out.sort(key=lambda t: sort_key(t[1], feasibility_check))
    return out
