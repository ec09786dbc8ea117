"""The coster of Phase-Two: cost vectors of partial plans, from the one cost model in
costmodel/ (eqs 4-6 and the extensions of docs/cost-model.md)."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.ordering import ZERO, CostVector
from costmodel.plan_cost import (
    apply_capacity,
    db_input_cost,
    db_op_cost_of,
    db_scan_cost,
    spe_gateway_cost,
    spe_op_cost,
)
from costmodel.profile import CostProfile
from costmodel.sizes import SourceDrivenSizes
from federation.logical import NumberedPlan, input_key


@dataclass(frozen=True)
class Partial:
    """A partial plan of the subtree under one operator."""

    db_placed: frozenset[str]  # operators of the subtree placed in the DB
    closed: CostVector  # cost of its physical operators other than an open DB-op
    open_members: tuple[str, ...] = ()  # the DB-op rooted here, still open to merging
    cost: CostVector = ZERO  # closed + the open DB-op's cost: the subtree as a whole
    open_inputs: frozenset = frozenset()  # signatures of the open DB-op's inputs
    open_scan: float = 0.0  # sum over its members of scan cost x input size

    @property
    def db_rooted(self) -> bool:
        return bool(self.open_members)


class PartialCoster:
    """Cost vectors of partial plans (eqs 4-6) for one plan and profile."""

    def __init__(self, plan: NumberedPlan, profile: CostProfile) -> None:
        self.plan = plan
        self.profile = profile
        self.sizes = SourceDrivenSizes.of(plan)
        self._spe = {
            o: spe_op_cost(plan.nodes[o], self.sizes[o],
                           [self.sizes[c] for c in plan.children[o]], profile)
            for o in plan.r2r_ids
        }
        self.gateway = spe_gateway_cost(self.sizes, plan, profile)
        self._sig: dict[str, tuple] = {}
        self._in_cost: dict[tuple, float] = {}

    def spe_u(self, oid: str) -> float:
        return self._spe[oid]

    def signature(self, oid: str) -> object:
        """The input key of an input subtree (identical inputs are transferred once)."""
        sig = self._sig.get(oid)
        if sig is None:
            sig = input_key(self.plan.nodes[oid])
            self._sig[oid] = sig
            self._in_cost[sig] = db_input_cost(self.sizes[oid], self.profile)
        return sig

    def scan(self, oid: str) -> float:
        """Per-slide scan cost of one DB-op member."""
        return db_scan_cost(self.plan, self.sizes, oid, self.profile)

    def db_u(self, root: str, inputs: frozenset, scan: float) -> float:
        """u of the DB-op rooted at `root` (costmodel.plan_cost), from incremental parts."""
        t_in = sum(self._in_cost[i][0] for i in inputs)
        maintain = sum(self._in_cost[i][1] for i in inputs)
        return db_op_cost_of(t_in, maintain, scan, self.sizes[root], self.profile).total

    def view(self, c: CostVector) -> CostVector:
        """The vector as Definition 1 compares it (gateway and capacity included)."""
        return apply_capacity(c.add(self.gateway) if self.gateway else c, self.profile)
