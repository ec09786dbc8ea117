"""Phase-One: the logical plan (paper section 6), as a sequence of rules: selection
push-down (pushdown.py), join ordering (join_order.py), then dropping the column-order
projections that ordering made redundant (projections.py)."""

from __future__ import annotations

from costmodel.profile import CostProfile
from federation.logical import Rstream
from federation.optimizer.join_order import join_shape, order_joins  # noqa: F401
from federation.optimizer.projections import drop_reorders
from federation.optimizer.pushdown import push_down_selections


def phase_one(root: Rstream, profile: CostProfile, reorder: bool = True) -> Rstream:
    """Selection push-down, then join ordering (when `reorder`); of several queries (a
    QuerySet), each query's."""
    if root.kind == "queries":
        return root.with_children(*(phase_one(q, profile, reorder)  # type: ignore[return-value]
                                    for q in root.children))
    out = push_down_selections(root)
    if reorder:
        out = drop_reorders(order_joins(out, profile))
    assert isinstance(out, Rstream)
    return out
