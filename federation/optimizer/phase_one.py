"""Phase-One: the logical plan (paper section 6), as a sequence of rules: selection
push-down (pushdown.py), join ordering (join_order.py), then dropping the column-order
projections that ordering made redundant (projections.py); last, each stream's windows
narrowed to the columns the plan reads (columns.py)."""

from __future__ import annotations

from costmodel.profile import CostProfile
from federation.logical import Rstream
from federation.optimizer.columns import narrow_streams
from federation.optimizer.join_order import join_shape, order_joins  # noqa: F401
from federation.optimizer.projections import drop_reorders
from federation.optimizer.pushdown import push_down_selections


def phase_one(root: Rstream, profile: CostProfile, reorder: bool = True) -> Rstream:
    """Selection push-down, then join ordering (when `reorder`), of each query of a set;
    then every stream's windows narrowed to the columns the plan (the whole set) reads
    (columns.py)."""
    if root.kind == "queries":
        return narrow_streams(root.with_children(  # type: ignore[return-value]
            *(_rules(q, profile, reorder) for q in root.children)))
    return narrow_streams(_rules(root, profile, reorder))  # type: ignore[return-value]


def _rules(root: Rstream, profile: CostProfile, reorder: bool) -> Rstream:
    out = push_down_selections(root)
    if reorder:
        out = drop_reorders(order_joins(out, profile))
    assert isinstance(out, Rstream)
    return out
