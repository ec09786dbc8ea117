"""Operator and plan costs: u per operator (eq. 4), C_b and C_u (eqs 5, 6), DB-op cost.

The functions take sizes (costmodel.sizes) and a profile; they never see engines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from costmodel.ordering import ZERO, CostVector
from costmodel.profile import CostProfile
from costmodel.sizes import NodeSize, SourceDrivenSizes

if TYPE_CHECKING:  # plan nodes are read by their `kind`
    from federation.logical import Node, NumberedPlan


STATEFUL = ("aggregate", "join")


def spe_op_cost(node: Node, size: NodeSize, kids: list[NodeSize], p: CostProfile) -> float:
    """u of one SPE-op: sum_i in_i * c (eq. 4), plus the extension's per-slide state term.

    Stateful operators over row-level input pay Spark's sliding-window expansion: each row
    is copied into range/slide windows.
    """
    kind = node.kind
    c = p.spe_s_per_row.of(kind)
    u = 0.0
    for k in kids:
        u += k.rate * c
        if node.kind in STATEFUL and k.row_level:
            u += k.rate * k.copies * p.spe_s_per_window_copy
    if node.kind in STATEFUL:
        # every stateful operator commits its state store at every micro-batch (extension)
        u += size.l * p.spe_s_per_stateful_op_slide
    else:
        u += size.l * p.spe_s_per_stateless_op_slide
    if node.kind in STATEFUL and p.spe_s_per_state_group_window:
        u += size.l * state_keys(size, kids) * p.spe_s_per_state_group_window
    return u


def state_keys(size: NodeSize, kids: list[NodeSize]) -> float:
    """State entries a stateful SPE-op updates per slide (extension, DESIGN 5): the groups
    that receive rows in that slide (at most the rows of one slide) x the windows open per
    group (range / slide for row-level input, one for a relation). Measured at full window
    size: Spark's batch time follows this, not the input rate (benchmarks/results)."""
    n = 0.0
    for k in kids:
        groups = max(size.groups, 1.0)
        if k.row_level:
            n += min(groups, k.rate / max(size.l, 1e-12)) * k.copies
        else:
            n += min(groups, max(k.size, 1.0))
    return n


@dataclass(frozen=True)
class DbOpCost:
    """Cost per second of a DB-op, split as DESIGN 5: transfer in, SQL per slide, transfer out."""

    transfer_in: float
    maintain: float
    sql: float
    transfer_out: float

    @property
    def total(self) -> float:
        return self.transfer_in + self.maintain + self.sql + self.transfer_out


def db_op_cost(
    plan: NumberedPlan,
    sizes: SourceDrivenSizes,
    members: Iterable[str],
    inputs: Iterable[str],
    root: str,
    p: CostProfile,
) -> DbOpCost:
    """Cost of a migration candidate with the given member ops and (deduplicated) inputs.

    transfer in = rows/s of each input x Arrow cost (row-level inputs also pay window
    maintenance in DuckDB); SQL = l x (fixed + sum over members of scan cost x input size);
    transfer out = l x result relation size x Arrow cost.
    """
    t_in = maintain = 0.0
    for i in inputs:
        s = sizes[i]
        rows = s.rate if s.row_level else s.l * s.size
        t_in += rows * p.db_transfer_in_s_per_row
        if s.row_level:
            maintain += rows * p.db_window_maintain_s_per_row
    l = sizes[root].l
    scan = 0.0
    for m in members:
        node = plan.nodes[m]
        in_size = sum(sizes[c].size for c in plan.children[m])
        scan += p.db_scan_s_per_row.of(node.kind) * in_size
    sql = l * (p.db_sql_fixed_s + scan)
    t_out = l * sizes[root].size * p.db_transfer_out_s_per_row
    return DbOpCost(t_in, maintain, sql, t_out)


def apply_capacity(c: CostVector, p: CostProfile) -> CostVector:
    """Capacity constraint (extension): operators share `capacity_cores` cores, so the plan
    keeps up only if C_u / cores <= 1 as well; C_b becomes max(C_b, C_u / cores)."""
    if p.capacity_cores is None:
        return c
    return CostVector(max(c.bottleneck_cost, c.utilization_cost / p.capacity_cores),
                      c.utilization_cost)


def spe_gateway_cost(sizes: SourceDrivenSizes, plan: NumberedPlan, p: CostProfile) -> float:
    """Per-slide fixed cost of the Spark query that every plan runs (the SPE is the gateway
    of all streams); 0 in the paper's form."""
    if not p.spe_s_per_slide:
        return 0.0
    return max(s.l for s in sizes.values()) * p.spe_s_per_slide


def reentry_cost(size: NodeSize, p: CostProfile) -> float:
    """A DB-op result that feeds SPE-ops re-enters Spark as a source of one more streaming
    query, which pays the per-micro-batch fixed cost again (measured: a plan with a
    re-entry stage ran at 0.6x the rho of the same work in one stage)."""
    return size.l * p.spe_s_per_slide


def vector(us: Iterable[float]) -> CostVector:
    out = ZERO
    for u in us:
        out = out.add(u)
    return out


__all__ = [
    "DbOpCost",
    "apply_capacity",
    "db_op_cost",
    "reentry_cost",
    "spe_gateway_cost",
    "spe_op_cost",
    "vector",
]
