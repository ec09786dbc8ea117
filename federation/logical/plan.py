"""Numbered plans (operator ids as `fedq explain` shows them) and what a plan's shape says
about its inputs (window rows or relations, shared inputs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from federation.logical.aggregate import Aggregate
from federation.logical.dsl import window  # noqa: F401 - doctests
from federation.logical.join import Join
from federation.logical.nodes import Node, Project, Rstream, Select
from federation.logical.table import Table, fold_tables
from federation.logical.window import Window

#: the relation-to-relation operators, the ones the optimizer places
R2R_KINDS = (Select, Project, Join, Aggregate)


def is_row_level(node: Node) -> bool:
    """True for a window leaf and stateless operators over it: rows still carry their ts."""
    while isinstance(node, (Select, Project)):
        node = node.child
    return isinstance(node, Window)


def input_key(node: Node, window_rows: bool | None = None) -> object:
    """What makes two DB-op inputs one table (transferred and stored once). Window rows
    (after the same stateless operators over the same stream and slide) share a table even
    when their time windows' ranges differ: the rows are the same, the table keeps the
    longest range and each window's range is a predicate in the SQL. A relation: equal
    subtrees. `window_rows` says how the input arrives (default: as its shape says).

    Example:
        >>> from federation.smartplug import smartplug_stream
        >>> s = smartplug_stream()
        >>> a = window(s, range=60).filter("property = 1")
        >>> b = window(s, range=300).filter("property = 1")
        >>> input_key(a) == input_key(b)
        True
    """
    if window_rows is None:
        window_rows = is_row_level(node)
    if not window_rows:  # equal subtrees (by their operators' labels: hashable)
        return ("relation", node.label(), tuple(input_key(c) for c in node.children))
    chain = []
    n = node
    while isinstance(n, (Select, Project)):
        chain.append(n.label())
        n = n.child
    w = n
    assert isinstance(w, Window)
    kind = ("time",) if w.is_time_based else ("rows", w.rows, w.partition_by)
    return ("rows", w.stream.name, w.slide_s, kind, tuple(chain))


def leaf_window(node: Node) -> Window:
    """The window under a row-level chain of selections and projections."""
    w = node.row_window()
    assert isinstance(w, Window), f"{node.label()} reads no window's rows"
    return w


@dataclass(frozen=True)
class NumberedPlan:
    """A logical plan with operator ids by position, in post order.

    Windows are `w1..`, tables `t1..`, R2R operators `op1..`, the root `root`. Ids are
    positional: the same node value used twice in a query (CQ1 reads one window twice)
    gets two ids. Selections and projections over a table fold into it (`fold_tables`).
    """

    root: Rstream
    nodes: dict[str, Node] = field(default_factory=dict)
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    parent: dict[str, str | None] = field(default_factory=dict)

    @staticmethod
    def of(root: Rstream) -> NumberedPlan:
        root = fold_tables(root)  # type: ignore[assignment]
        plan = NumberedPlan(root)
        counters = {"w": 0, "t": 0, "op": 0}

        def rec(node: Node) -> str:
            child_ids = tuple(rec(c) for c in node.children)
            if isinstance(node, Rstream):
                oid = "root"
            elif isinstance(node, Window):
                counters["w"] += 1
                oid = f"w{counters['w']}"
            elif isinstance(node, Table):
                counters["t"] += 1
                oid = f"t{counters['t']}"
            else:
                counters["op"] += 1
                oid = f"op{counters['op']}"
            plan.nodes[oid] = node
            plan.children[oid] = child_ids
            for kid in child_ids:
                plan.parent[kid] = oid
            return oid

        rec(root)
        plan.parent["root"] = None
        return plan

    @property
    def r2r_ids(self) -> list[str]:
        """R2R operator ids in post order."""
        return [i for i, n in self.nodes.items() if isinstance(n, R2R_KINDS)]

    def post_order(self) -> list[str]:
        return list(self.nodes)

    def subtree(self, oid: str) -> list[str]:
        """Ids of the subtree rooted at `oid`, post order."""
        out: list[str] = []
        for c in self.children[oid]:
            out.extend(self.subtree(c))
        out.append(oid)
        return out
