"""Phase-One rule: join ordering (paper section 6).

System-R style dynamic programming over the join orders (bushy trees) of every join
region under the (C_b, C_u) ordering of Definition 1, costing each candidate as an all-SPE
plan. The principle of optimality holds for this ordering, so the best plan of a set of
branches is built from the best plans of its two halves.
"""

from __future__ import annotations

from itertools import combinations

from sqlglot import exp

from costmodel.ordering import ZERO, CostVector, sort_key
from costmodel.plan_cost import spe_op_cost
from costmodel.profile import CostProfile
from costmodel.sizes import NodeSize, node_size
from federation.errors import QueryValidationError
from federation.logical import Join, Node, Project, Rstream, Window


class _SpeCoster:
    """All-SPE sizes and cost vectors of logical subtrees, memoized per node object."""

    def __init__(self, profile: CostProfile) -> None:
        self.profile = profile
        self.memo: dict[int, tuple[Node, NodeSize, CostVector]] = {}

    def __call__(self, node: Node) -> tuple[NodeSize, CostVector]:
        hit = self.memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1], hit[2]
        kids = [self(c) for c in node.children]
        size = node_size(node, [k[0] for k in kids])
        cost = ZERO
        for _, c in kids:
            cost = cost.combine(c)
        if not isinstance(node, (Window, Rstream)) and node.kind != "table":
            cost = cost.add(spe_op_cost(node, size, [k[0] for k in kids], self.profile))
        self.memo[id(node)] = (node, size, cost)
        return size, cost


def spe_cost(node: Node, profile: CostProfile | _SpeCoster) -> CostVector:
    """All-SPE cost vector of a logical subtree."""
    coster = profile if isinstance(profile, _SpeCoster) else _SpeCoster(profile)
    return coster(node)[1]


def _region(node: Node) -> tuple[list[Node], list[tuple[int, int, tuple]]]:
    """Branches (non-join inputs) of a join region and its join edges (branch a, branch b, keys)."""
    branches: list[Node] = []
    edges: list[tuple[int, int, tuple]] = []

    def rec(n: Node) -> list[int]:
        if not _inner(n):
            branches.append(n)
            return [len(branches) - 1]
        left, right = rec(n.left), rec(n.right)
        # attach the keys to a pair of branches that hold them
        lk = [a for a, _ in n.keys]
        rk = [b for _, b in n.keys]
        a = next((i for i in left if all(k in branches[i].schema for k in lk)), left[0])
        b = next((i for i in right if all(k in branches[i].schema for k in rk)), right[0])
        edges.append((a, b, n.keys))
        return left + right

    rec(node)
    return branches, edges


def order_joins(node: Node, profile: CostProfile | _SpeCoster) -> Node:
    """System-R dynamic programming over the join orders (bushy trees) of each join region."""
    if not isinstance(profile, _SpeCoster):
        profile = _SpeCoster(profile)
    return node.transform(lambda n: _order_region(n, profile) if _inner(n) else None,
                          top_down=True)


def _inner(n: Node) -> bool:
    """An inner join: a region's joins (an outer join's sides are not reordered across it:
    which rows it keeps depends on them)."""
    return isinstance(n, Join) and n.how == "inner"


def _order_region(node: Join, profile: _SpeCoster) -> Node:
    """The cheapest order of the join region rooted at `node` (its branches ordered too)."""
    branches, edges = _region(node)
    branches = [order_joins(b, profile) for b in branches]
    n = len(branches)
    best: dict[int, tuple[Node, CostVector]] = {}
    for i, b in enumerate(branches):
        best[1 << i] = (b, spe_cost(b, profile))
    full = (1 << n) - 1
    for size in range(2, n + 1):
        for subset in combinations(range(n), size):
            mask = sum(1 << i for i in subset)
            cands: list[tuple[Node, CostVector]] = []
            sub = (mask - 1) & mask
            while sub:
                other = mask ^ sub
                if sub in best and other in best and sub < other:
                    keys = _keys_between(sub, other, edges)
                    if keys:
                        for lm, rm in ((sub, other), (other, sub)):
                            lk = keys if lm == sub else tuple((b, a) for a, b in keys)
                            try:
                                j = Join(best[lm][0], best[rm][0], lk)
                            except QueryValidationError:
                                continue
                            cands.append((j, spe_cost(j, profile)))
                sub = (sub - 1) & mask
            if cands:
                best[mask] = min(cands, key=lambda t: (sort_key(t[1]), join_shape(t[0])))
    if full not in best:
        return node  # not connected by equi-join keys: keep the written order
    out = best[full][0]
    if list(out.schema) != list(node.schema):  # keep the column order the user wrote
        # a join keeps its left key: a renamed key (a = b) may come out as the other name
        same = {}
        for _, _, keys in edges:
            for a, b in keys:
                same.setdefault(a, set()).add(b)
                same.setdefault(b, set()).add(a)

        def named(c: str) -> str:
            seen, todo = {c}, [c]
            while todo:
                for o in same.get(todo.pop(), ()):
                    if o in out.schema:
                        return o
                    if o not in seen:
                        seen.add(o)
                        todo.append(o)
            return c
        out = Project(out, tuple((c, exp.column(c if c in out.schema else named(c)))
                                 for c in node.schema))
    return out


def _keys_between(a: int, b: int, edges) -> tuple:
    for x, y, keys in edges:
        if (a >> x) & 1 and (b >> y) & 1:
            return keys
        if (a >> y) & 1 and (b >> x) & 1:
            return tuple((r, lft) for lft, r in keys)
    return ()


def join_shape(node: Node) -> str:
    """The join tree of a plan with branches written B, e.g. '((B B) B)'.

    Example:
        >>> from federation.smartplug.queries import kway_plan, PAPER_SHAPES
        >>> join_shape(kway_plan(5, shape=PAPER_SHAPES[5]))
        '(((B B) B) (B B))'
    """
    if isinstance(node, Join):
        return f"({join_shape(node.left)} {join_shape(node.right)})"
    for c in node.children:
        if any(isinstance(n, Join) for n in c.walk()):
            return join_shape(c)
    return "B"
