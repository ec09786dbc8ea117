"""Placing several queries together (issue 23): Definition 1 over the merged plan.

The merged plan of a query set is a DAG (an operator that two queries share has two
readers), and Phase-Two's bottom-up enumeration needs a tree. The set is placed by a local
search over the merged plan instead:

1. seeds: every query's own optimum (Phase-Two on the query alone) carried onto the merged
   operators, a shared operator in the DB when any of its queries puts it there (where it
   is computed once) or in Spark when all do, and pure Spark and pure DuckDB;
2. from the best seed, the single-operator change that improves the cost vector most
   (Definition 1, `costmodel.ordering.better`) is taken until none does (hill climbing;
   `max_rounds` bounds it).

Each candidate is costed by `plan_cost` over the whole set, where a shared operator is
costed once (in a DB-op) or once per query path (in Spark: a streaming query has no
shared subplans, costmodel.plan_cost.spe_copies). A placement the runtime cannot run (a
DB-op reading its own output through Spark, an SPE-op over a tuple window) is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.ordering import CostVector, better, sort_key
from costmodel.plan_cost import plan_cost
from costmodel.profile import CostProfile
from costmodel.sizes import SourceDrivenSizes
from federation.errors import PlacementError
from federation.logical import NumberedPlan
from federation.optimizer.phase_two import phase_two
from federation.physical import build_physical_plan


@dataclass
class SetSearch:
    """The kept plans (best first) and how many placements were costed."""

    plans: list[tuple[dict[str, str], CostVector]]
    examined: int
    seeds: dict[str, dict[str, str]]  # name -> the seed placement
    subplans: int = 1


def aligned(merged: NumberedPlan, local: NumberedPlan, name: str) -> dict[str, str]:
    """Each id of query `name` numbered alone -> its id in the merged plan."""
    out: dict[str, str] = {}

    def walk(lo: str, mo: str) -> None:
        out[lo] = mo
        for lc, mc in zip(local.children[lo], merged.children[mo]):
            walk(lc, mc)

    walk(local.children["root"][0], merged.tops[name])
    return out


def place_query_set(merged: NumberedPlan, profile: CostProfile, feasibility_check: bool = True,
                    max_rounds: int = 50) -> SetSearch:
    """Search the placements of a merged plan (module doc)."""
    sizes = SourceDrivenSizes.of(merged)
    ops = merged.r2r_ids
    costs: dict[tuple, CostVector | None] = {}

    def cost(pl: dict[str, str]) -> CostVector | None:
        key = tuple(pl[o] for o in ops)
        if key not in costs:
            try:
                pp = build_physical_plan(merged, pl, sql=False)
                costs[key] = plan_cost(pp, profile, sizes).vector
            except PlacementError:
                costs[key] = None
        return costs[key]

    def lt(a: CostVector | None, b: CostVector | None) -> bool:
        return a is not None and (b is None or better(a, b, feasibility_check))

    seeds = {"spe": {o: "spe" for o in ops}, "db": {o: "db" for o in ops}}
    any_db: dict[str, str] = {o: "spe" for o in ops}
    all_db: dict[str, str] = {o: "db" for o in ops}
    for q in merged.root.children:
        local = NumberedPlan.of(q)
        best = phase_two(local, profile, feasibility_check).plans[0][0]
        for lo, mo in aligned(merged, local, q.name).items():
            if lo in best:
                if best[lo] == "db":
                    any_db[mo] = "db"
                else:
                    all_db[mo] = "spe"
    seeds["each query's optimum, shared in the DB"] = any_db
    seeds["each query's optimum, shared in Spark"] = all_db
    current = min(seeds.values(), key=lambda pl: _key(cost(pl), feasibility_check))
    for _ in range(max_rounds):
        best_next, best_cost = None, cost(current)
        for o in ops:
            pl = dict(current, **{o: "db" if current[o] == "spe" else "spe"})
            c = cost(pl)
            if lt(c, best_cost):
                best_next, best_cost = pl, c
        if best_next is None:
            break
        current = best_next
    # the end point is the best costed (it only ever improved on the best seed); among
    # equal costs it comes first
    kept = sorted(((dict(zip(ops, k)), c) for k, c in costs.items() if c is not None),
                  key=lambda t: (*sort_key(t[1], feasibility_check), t[0] != current))
    return SetSearch(kept, len(costs), seeds)


def _key(c: CostVector | None, feasibility_check: bool) -> tuple:
    return (1,) if c is None else (0, *sort_key(c, feasibility_check))
