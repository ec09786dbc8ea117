"""Numbered plans (operator ids as `fedq explain` shows them) and what a plan's shape says
about its inputs (window rows or relations, shared inputs)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sqlglot import exp

from federation.logical.aggregate import Aggregate
from federation.logical.dsl import window  # noqa: F401 - doctests
from federation.logical.join import Join
from federation.logical.nodes import Node, Project, Rstream, Select
from federation.logical.rank import RowNumber
from federation.logical.table import Table, fold_tables
from federation.logical.union import Union
from federation.logical.window import Window

#: the relation-to-relation operators, the ones the optimizer places
R2R_KINDS = (Select, Project, Join, Aggregate, Union, RowNumber)


def is_row_level(node: Node) -> bool:
    """True for a window leaf and stateless operators over it: rows still carry their ts
    (a session window's: under selections of its keys alone, `Node.row_window`)."""
    return node.row_window() is not None


def input_key(node: Node, window_rows: bool | None = None) -> object:
    """What makes two DB-op inputs one table (transferred and stored once). Window rows
    (after the same stateless operators over the same stream and slide) share a table even
    when their time windows' ranges differ: the rows are the same, the table keeps the
    longest range and each window's range is a predicate in the SQL. A relation: equal
    subtrees. `window_rows` says how the input arrives (default: as its shape says).

    Example:
        >>> from federation.smartplug import smartplug_stream
        >>> s = smartplug_stream()
        >>> a = window(s, range=60).filter("property = 1").node
        >>> b = window(s, range=300).filter("property = 1").node
        >>> input_key(a) == input_key(b)
        True
    """
    if window_rows is None:
        window_rows = is_row_level(node)
    if not window_rows:  # equal subtrees (by their operators' labels: hashable), windows
        # by their whole label: relations over windows of other ranges are other rows
        return ("relation", node.label(), tuple(input_key(c, False) for c in node.children))
    chain = []
    n = node
    while isinstance(n, (Select, Project)):
        chain.append(n.label())
        n = n.child
    w = n
    assert isinstance(w, Window)
    where = w.where
    cond = None if where is None else where.sql()  # the readings the window counts
    keys = (w.partition_by, tuple((k, e.sql()) for k, e in w.computed_keys))
    kind = ("time",) if w.is_time_based else ("session", w.gap_s, keys, cond) \
        if w.is_session else ("rows", w.rows, keys, cond)
    return ("rows", w.stream.name, w.slide_s, w.offset_s, w.every_s, kind, tuple(chain))


def leaf_window(node: Node) -> Window:
    """The window under a row-level chain of selections and projections."""
    w = node.row_window()
    assert isinstance(w, Window), f"{node.label()} reads no window's rows"
    return w


def _value(node: Node) -> tuple:
    """A node's own fields (not its inputs) as a hashable value: equal values over the same
    inputs compute the same rows."""
    def h(v: object) -> object:
        if isinstance(v, exp.Expression):
            return v.sql()
        if hasattr(v, "model_dump_json"):  # a stream declaration
            return v.model_dump_json()  # type: ignore[attr-defined]
        if isinstance(v, dict):
            return tuple((k, h(x)) for k, x in v.items())
        if isinstance(v, (tuple, list)):
            return tuple(h(x) for x in v)
        return v
    if not dataclasses.is_dataclass(node) or isinstance(node, Rstream):
        return (getattr(node, "name", None),)
    return tuple((f.name, h(getattr(node, f.name))) for f in dataclasses.fields(node)
                 if f.name not in node.child_fields and f.name != "queries")


@dataclass(frozen=True)
class NumberedPlan:
    """A logical plan with operator ids by position, in post order.

    Windows are `w1..`, tables `t1..`, R2R operators `op1..`, the root `root`. Ids are
    positional: the same node value used twice in a query (CQ1 reads one window twice)
    gets two ids. Selections and projections over a table fold into it (`fold_tables`).

    Several queries (a QuerySet, federation/logical/queryset.py) are one plan whose root
    reads each query's top operator (`tops`); there equal subtrees are one operator
    (shared: it has several `parents`), and the plan is a DAG.
    """

    root: Rstream
    nodes: dict[str, Node] = field(default_factory=dict)
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    parent: dict[str, str | None] = field(default_factory=dict)  # the first of `parents`
    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tops: dict[str, str] = field(default_factory=dict)  # query name -> its top operator

    @staticmethod
    def of(root: Rstream) -> NumberedPlan:
        root = fold_tables(root)  # type: ignore[assignment]
        plan = NumberedPlan(root)
        counters = {"w": 0, "t": 0, "op": 0}
        many = root.kind == "queries"
        seen: dict[tuple, str] = {}

        def rec(node: Node) -> str:
            child_ids = tuple(rec(c) for c in node.children)
            key = (type(node).__name__, _value(node), child_ids)
            if many and key in seen:  # one operator for equal subtrees of a query set
                return seen[key]
            if node is root:
                oid = "root"
                if many:  # the root reads each query's top (Rstreams are not operators)
                    child_ids = tuple(dict.fromkeys(child_ids))
            elif isinstance(node, Rstream):  # a query of a set: its top
                plan.tops[node.name] = child_ids[0]
                return child_ids[0]
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
                plan.parents[kid] = plan.parents.get(kid, ()) + (oid,)
                plan.parent.setdefault(kid, oid)
            if many:
                seen[key] = oid
            return oid

        rec(root)
        plan.parent["root"] = None
        plan.parents["root"] = ()
        if not many:
            plan.tops[root.name] = plan.children["root"][0]
        return plan

    @property
    def many(self) -> bool:
        """True for several queries (a QuerySet)."""
        return self.root.kind == "queries"

    def queries_of(self) -> dict[str, tuple[str, ...]]:
        """Per node id, the queries that read it (in query order)."""
        out: dict[str, tuple[str, ...]] = {}
        for name, top in self.tops.items():
            for oid in dict.fromkeys(self.subtree(top)):
                out[oid] = out.get(oid, ()) + (name,)
        return out

    def shared_ops(self) -> dict[str, tuple[str, ...]]:
        """The nodes that more than one query reads, with those queries."""
        return {o: q for o, q in self.queries_of().items() if len(q) > 1}

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
