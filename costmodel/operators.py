"""The cost of one operator by its class, in each engine: u as an SPE-op (eq. 4 and the
extension's per-slide terms) and the per-row scan cost as a member of a DB-op
(federation.conventions.Lowering; tests/test_lowerings.py checks every class has both)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from costmodel.profile import CostProfile, spe_row_scale
from costmodel.sizes import NodeSize
from federation.conventions import Lowering

if TYPE_CHECKING:  # plan nodes are dispatched on by class name
    from federation.logical import Node

#: u of each operator class as an SPE-op (eq. 4 and the extension)
SPE_COST = Lowering("Spark cost", ("operator",))
#: each operator class's per-slide scan cost as a member of a DB-op, per input row
DB_COST = Lowering("DuckDB cost", ("operator",))


def spe_op_cost(node: Node, size: NodeSize, kids: list[NodeSize], p: CostProfile) -> float:
    """u of one SPE-op: sum_i in_i * c (eq. 4), plus the extension's per-slide terms."""
    return SPE_COST(node, size, kids, p)


@SPE_COST.register("Select", "Project")
def _stateless(node: Node, size: NodeSize, kids: list[NodeSize], p: CostProfile) -> float:
    """Per input row, and a micro-batch's fixed cost per slide (extension)."""
    rate = sum(k.rate for k in kids)
    u = rate * (p.spe_s_per_row.of(node.kind) + python_s_per_row(node, p.spe_udf_s_per_row))
    return u * spe_row_scale(p) + size.l * p.spe_s_per_stateless_op_slide


@SPE_COST.register("Union")
def _union(node: Node, size: NodeSize, kids: list[NodeSize], p: CostProfile) -> float:
    """A pass-through (the projection's unit cost) of each input row, window rows once
    per window holding them (the union is of the instants' relations)."""
    rows = sum(k.rate * (k.copies if k.row_level else 1.0) for k in kids)
    return (rows * p.spe_s_per_row.of("project") * spe_row_scale(p)
            + size.l * p.spe_s_per_stateless_op_slide)


@SPE_COST.register("Aggregate", "Join")
def _stateful(node: Node, size: NodeSize, kids: list[NodeSize], p: CostProfile) -> float:
    """Stateful operators over row-level input pay Spark's sliding-window expansion: each
    row is copied into range/slide windows. An aggregate runs in panes (spe/translate.py):
    each row is copied once, into its pane (one slide), and each pane's partial row per
    group (at most the rows of a slide) into range/slide windows. The per-row terms scale
    with the cores Spark has (spe_row_scale), the per-micro-batch ones do not; every
    stateful operator commits its state store at every micro-batch (extension). An outer
    join is a cogroup in Spark (spe/joins.py): an aggregate's cost per row."""
    c = p.spe_s_per_row.of("aggregate" if getattr(node, "how", "inner") != "inner"
                           else node.kind)
    scale = spe_row_scale(p)
    u = 0.0
    c += python_s_per_row(node, p.spe_udf_s_per_row)
    for k in kids:
        u += k.rate * c
        if k.row_level:
            copied = k.rate * k.copies
            if node.kind == "aggregate" and k.copies > 1:
                copied = k.rate + min(k.rate, max(size.groups, 1.0) * k.l) * k.copies
            u += copied * p.spe_s_per_window_copy
    u = u * scale + size.l * p.spe_s_per_stateful_op_slide
    if p.spe_s_per_state_group_window:
        u += size.l * state_keys(size, kids) * p.spe_s_per_state_group_window * scale
    return u


@SPE_COST.register("RowNumber")
def _row_number(node: Node, size: NodeSize, kids: list[NodeSize], p: CostProfile) -> float:
    """An aggregate's cost (each instant's rows collected per partition, sorted, numbered):
    window rows copied into every window holding them, one state commit per batch."""
    (k,) = kids
    rows = k.rate * (k.copies if k.row_level else 1.0)
    u = rows * (p.spe_s_per_row.of("aggregate") + p.spe_s_per_window_copy) * spe_row_scale(p)
    return u + size.l * p.spe_s_per_stateful_op_slide


def state_keys(size: NodeSize, kids: list[NodeSize]) -> float:
    """State entries a stateful SPE-op updates per slide (extension, docs/cost-model.md): the groups
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


@DB_COST.register("Select", "Project", "Join", "Aggregate")
def _db_scan(node: Node, in_size: float, p: CostProfile) -> float:
    return (p.db_scan_s_per_row.of(node.kind) + python_s_per_row(node, p.db_udf_s_per_row)
            ) * in_size


def python_s_per_row(node: Node, per_call: float) -> float:
    """Per input row: the operator's Python functions (federation.udf), each call's
    engine overhead `per_call` and the functions' own measured or declared time."""
    calls, own = getattr(node, "python_cost", (0, 0.0))
    return calls * per_call + own


@DB_COST.register("Union")
def _db_union(node: Node, in_size: float, p: CostProfile) -> float:
    return p.db_scan_s_per_row.of("project") * in_size  # both inputs read once


@DB_COST.register("RowNumber")
def _db_row_number(node: Node, in_size: float, p: CostProfile) -> float:
    return p.db_scan_s_per_row.of("aggregate") * in_size  # a sort: as a GROUP BY's scan
