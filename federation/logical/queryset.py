"""Several queries run together (issue 23): one plan whose root has one input per query.

Operators that compute the same thing over the same input in different queries (equal
subtrees: the same window, selections, projections, aggregates) are one operator of the
merged plan (`NumberedPlan.of`), placed once and computed once where its engine can share
it (docs/architecture.md, "Many queries in one run").

Example:
    >>> from federation.smartplug.queries import cq3_plan, cq4_plan
    >>> from federation.logical import NumberedPlan
    >>> p = NumberedPlan.of(QuerySet((cq3_plan(), cq4_plan())))
    >>> p.tops
    {'CQ3': 'op6', 'CQ4': 'op10'}
    >>> p.shared_ops()
    {'w1': ('CQ3', 'CQ4'), 'op1': ('CQ3', 'CQ4'), 'w2': ('CQ3', 'CQ4'), 'op3': ('CQ3', 'CQ4')}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from federation.errors import QueryValidationError
from federation.logical.nodes import Node, Rstream


@dataclass(frozen=True)
class QuerySet(Node):
    """The root of several queries (each an Rstream with its own name and result)."""

    queries: tuple[Rstream, ...]
    kind = "queries"

    def __post_init__(self) -> None:
        if not self.queries:
            raise QueryValidationError("queries", "queries", "no query given")
        names: dict[str, int] = {}
        for i, q in enumerate(self.queries):
            if not isinstance(q, Rstream):
                raise QueryValidationError("queries", "queries", f"query {i + 1} is not a query "
                                           f"ending in RSTREAM: {q!r}")
            if q.name in names:
                raise QueryValidationError(
                    "queries", "name", f"two queries are named {q.name!r} (queries "
                    f"{names[q.name] + 1} and {i + 1}): each query's result needs its own name")
            names[q.name] = i
        slides = {}
        for q in self.queries:
            for n in q.walk():
                if n.kind == "window":
                    slides.setdefault(n.slide_s, q.name)  # type: ignore[attr-defined]
        if len(slides) > 1:
            told = ", ".join(f"{q} slides every {s:g} s" for s, q in slides.items())
            raise QueryValidationError(
                "queries", "slide", f"queries run together share one slide ({told}): run "
                "them separately")

    @property
    def children(self) -> tuple[Node, ...]:
        return self.queries

    def with_children(self, *children: Node) -> Node:
        return QuerySet(tuple(children))  # type: ignore[arg-type]

    @property
    def name(self) -> str:
        return "+".join(q.name for q in self.queries)

    @cached_property
    def schema(self) -> dict[str, str]:
        return {}

    def label(self) -> str:
        return "queries " + ", ".join(q.name for q in self.queries)


def query_set(queries: Sequence[Rstream] | Rstream) -> Rstream | QuerySet:
    """One query as it is, several as a QuerySet."""
    if isinstance(queries, Node):
        return queries  # type: ignore[return-value]
    queries = tuple(queries)
    return queries[0] if len(queries) == 1 else QuerySet(queries)
