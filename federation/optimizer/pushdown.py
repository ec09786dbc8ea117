"""Phase-One rule: selection push-down (paper section 6).

Each conjunct of a selection moves below joins (to the side that has its columns; below an
outer join only to a side whose every row it keeps) and below projections that pass its
columns through unchanged.
"""

from __future__ import annotations

from federation.conjuncts import conjoin, split_conjuncts
from federation.expressions import referenced_columns
from federation.logical import Join, Node, Project, Select


def push_down_selections(node: Node) -> Node:
    """Move each conjunct of a selection below joins (to the side that has its columns) and
    below projections that pass its columns through unchanged."""
    return node.transform(lambda n: _push(n.child, split_conjuncts(n.predicate), n.selectivity)
                          if isinstance(n, Select) else n)


def _push(child: Node, conjuncts: list, selectivity: float | None) -> Node:
    stay = []
    if isinstance(child, Join):
        left, right = child.left, child.right
        rkeys = {r for _, r in child.keys}
        # below an outer join only to a side it keeps whole: the other side's rows decide
        # which of its rows get NULLs (a right join's key column is the right side's)
        keep_l, keep_r = child.keeps
        moved = False
        for c in conjuncts:
            cols = referenced_columns(c)
            if not keep_r and cols <= set(left.schema):
                left = _push(left, [c], None)
                moved = True
            elif not keep_l and cols <= set(right.schema) - rkeys:
                right = _push(right, [c], None)
                moved = True
            else:
                stay.append(c)
        if moved:
            child = Join(left, right, child.keys, child.how)
    elif isinstance(child, Project):
        passthrough = {n for n, e in child.outputs if getattr(e, "name", None) == n
                       and e.key == "column"}
        down = [c for c in conjuncts if referenced_columns(c) <= passthrough]
        stay = [c for c in conjuncts if c not in down]
        if down:
            child = Project(_push(child.child, down, None), child.outputs)
    else:
        stay = conjuncts
    if not stay:
        return child
    # the given selectivity belongs to the whole predicate; keep it only if nothing moved
    sel = selectivity if len(stay) == len(conjuncts) else None
    return Select(child, conjoin(stay), sel)
