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
from federation.instants import Grid, query_grid
from federation.logical.nodes import Node, Rstream


@dataclass(frozen=True)
class QuerySet(Node):
    """The root of several queries (each an Rstream with its own name and result)."""

    queries: tuple[Rstream, ...]
    kind = "queries"
    role = "root"

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
        grids: dict[Grid, str] = {}
        for q in self.queries:
            grids.setdefault(query_grid(n for n in q.walk() if n.kind == "window"), q.name)
        if len(grids) > 1:
            told = ", ".join(f"{q} slides every {g.slide_s:g} s" + (
                f" from {g.offset_s:g} s" if g.offset_s else "") for g, q in grids.items())
            raise QueryValidationError(
                "queries", "slide", f"queries run together share one slide and offset "
                f"({told}): run them separately")

        _check_extents(self.queries)

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


def _check_extents(queries: tuple[Rstream, ...]) -> None:
    """A set's instants are those of its longest window over all its streams
    (federation/instants.py): a query whose windows reach back less, or that reads fewer
    streams, sees more instants than alone, with its windows empty. Its result is empty
    there unless it has rows without a reading (a tuple window keeps its last rows, a global
    aggregate counts zero): such a query needs the set's extent and streams."""
    from federation.instants import extent_of

    def windows(q: Rstream) -> list:
        return [n for n in q.walk() if n.kind == "window"]

    extent = {q.name: extent_of(windows(q)) for q in queries}
    streams = {q.name: {w.stream.name for w in windows(q)} for q in queries}
    longest = max(extent.values())
    every = set().union(*streams.values())
    for q in queries:
        if extent[q.name] >= longest and streams[q.name] == every:
            continue
        nodes = list(q.walk())
        why = ("a tuple window" if any(n.kind == "window" and n.rows is not None  # type: ignore[attr-defined]
                                       for n in nodes) else
               "a global aggregate" if any(n.kind == "aggregate" and not n.keys  # type: ignore[attr-defined]
                                           for n in nodes) else None)
        if why:
            short = (f"its windows reach back {extent[q.name]:g} s, less than the set's "
                     f"{longest:g} s" if extent[q.name] < longest else
                     f"it reads {', '.join(sorted(streams[q.name]))}, the set also "
                     f"{', '.join(sorted(every - streams[q.name]))}")
            raise QueryValidationError(
                "queries", "windows", f"{q.name} has {why}, which yields rows at instants "
                f"without readings, and {short}: it would see instants it does not have "
                "alone; run it separately (or in a set whose instants are its own)")


def query_set(queries: Sequence[Rstream] | Rstream) -> Rstream | QuerySet:
    """One query as it is, several as a QuerySet."""
    if isinstance(queries, Node):
        return queries  # type: ignore[return-value]
    queries = tuple(queries)
    return queries[0] if len(queries) == 1 else QuerySet(queries)
