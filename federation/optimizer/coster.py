"""The coster of Phase-Two: cost vectors of partial plans, from the one cost model in
costmodel/ (eqs 4-6 and the extensions of docs/cost-model.md)."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.feed import feed_cost
from costmodel.ordering import ZERO, CostVector
from costmodel.plan_cost import apply_capacity, db_op_cost, spe_gateway_cost, spe_op_cost
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
    open_inputs: frozenset = frozenset()  # the open DB-op's input positions (op ids)

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
        self._sig: dict[str, object] = {}
        self._db: dict[tuple, float] = {}

    def spe_u(self, oid: str) -> float:
        return self._spe[oid]

    def signature(self, oid: str) -> object:
        """The input key of an input subtree (identical inputs are transferred once)."""
        sig = self._sig.get(oid)
        if sig is None:
            sig = self._sig[oid] = input_key(self.plan.nodes[oid])
        return sig

    def db_u(self, root: str, members: tuple[str, ...], inputs: frozenset) -> float:
        """u of the DB-op rooted at `root` with these members and input positions
        (costmodel.plan_cost.db_op_cost: the same cost as the physical plan's)."""
        key = (root, frozenset(members), inputs)
        u = self._db.get(key)
        if u is None:
            groups: dict[object, list[str]] = {}
            for c in sorted(inputs):
                groups.setdefault(self.signature(c), []).append(c)
            u = self._db[key] = db_op_cost(self.plan, self.sizes, members, groups.values(),
                                           root, self.profile).total
        return u

    def view(self, c: CostVector) -> CostVector:
        """The vector as Definition 1 compares it (gateway and capacity included)."""
        return apply_capacity(c.add(self.gateway) if self.gateway else c, self.profile)

    def final(self, c: CostVector, placement: dict[str, str]) -> CostVector:
        """The vector of a complete plan: its own feed's cost (costmodel/feed.py: no Spark
        query where no SPE-op reads a stream) instead of Spark's."""
        feed = feed_cost(self.sizes, self.plan, self.profile, placement)
        return apply_capacity(c.add(feed) if feed else c, self.profile)
