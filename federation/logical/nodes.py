"""Logical plan nodes (operators of the continuous query algebra): selection, projection,
RSTREAM and the base class; the others in their own modules (aggregate.py, join.py, ...).

Nodes are immutable values validated when they are built, so a mistake fails where the
query is written, with the operator and the field named. They carry no DSL: the query
DSL (`Relation`, federation/logical/builder.py) builds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from sqlglot import exp

from federation.canonical import canonical
from federation.conjuncts import split_conjuncts
from federation.errors import QueryValidationError
from federation.expressions import (
    infer_type,
    referenced_columns,
    to_expression,
)
from federation.instants import query_grid
from federation.logical.sessions import per_session, readings_kept


class Node:
    """Base of logical plan nodes: children, output schema and traversal."""

    kind: str = "node"
    #: "operator" (placed by the optimizer), "leaf" (a window, a table) or "root" (RSTREAM,
    #: a query set): the lowerings each class needs (federation.conventions.Lowering)
    role: ClassVar[str] = ""
    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @cached_property
    def python_cost(self) -> tuple[int, float]:
        """The Python function calls of this operator's own expressions (federation.udf)
        and their seconds per input row (measured or declared), read by the cost model."""
        from federation.python_functions import own_calls

        schema: dict[str, str] = {}
        for c in self.children:
            schema.update(c.schema)
        values = [getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name not in self.child_fields]
        return own_calls(values, schema)

    def functions(self) -> list:
        """The Python functions (federation.udf) this plan calls, as the engines register
        them."""
        from federation.python_functions import plan_functions

        return plan_functions(self)

    @cached_property
    def schema(self) -> dict[str, str]:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- traversal ---------------------------------------------------------------------
    child_fields: tuple[str, ...] = ()

    def with_children(self, *children: Node) -> Node:
        """The same operator over other inputs (validated again)."""
        if not self.child_fields:
            return self
        return dataclasses.replace(self, **dict(zip(self.child_fields, children)))

    def transform(self, rule: Callable[[Node], Node | None], top_down: bool = False) -> Node:
        """The tree rewritten by `rule`, the one tree rewrite of the optimizer's rules.

        Bottom up (the default): `rule` sees each node over its already rewritten inputs and
        returns its rewrite. Top down: `rule` sees each node first; a node it returns is the
        rewrite of the whole subtree (the rule recursed itself, or kept the subtree as it
        is), None rewrites the inputs instead. Unchanged subtrees are kept (the same
        objects)."""
        if top_down:
            out = rule(self)
            if out is not None:
                return out
        kids = [c.transform(rule, top_down) for c in self.children]
        node = self if all(a is b for a, b in zip(kids, self.children)) else \
            self.with_children(*kids)
        return node if top_down else rule(node)

    def walk(self) -> Iterator[Node]:
        """Nodes in post order (children first)."""
        for c in self.children:
            yield from c.walk()
        yield self

    def label(self) -> str:
        return self.kind

    def row_window(self) -> Node | None:
        """The window whose rows this node yields (under selections and projections only),
        or None for a relation. A session window's rows stay its readings only under
        selections of its partition keys (`sessions.readings_kept`): above anything else
        they are the relation of the sessions that close at each instant. The engines and
        the cost model call it by duck typing."""
        if self.kind == "window":
            return self
        if self.kind in ("select", "project"):
            w = self.child.row_window()  # type: ignore[attr-defined]
            return w if w is None or not w.is_session or readings_kept(self, w) else None
        return None

    def reads_closed_sessions(self) -> bool:
        """Over a session window's readings: True when this node reads them as the relation
        of the sessions that close at each instant (Spark then collects each session's
        readings, spe/sessions.py), False for a selection of its keys or its sessions'
        aggregate (`sessions.per_session`), which read the readings."""
        if self.kind == "select":
            return self.row_window() is None
        return not per_session(self)


def _expr(operator: str, field_name: str, value: object) -> exp.Expression:
    try:
        return to_expression(value)  # type: ignore[arg-type]
    except Exception as e:  # sqlglot.ParseError and bad types
        raise QueryValidationError(operator, field_name, f"cannot parse {value!r}: {e}") from e


def _check_columns(operator: str, field_name: str, e: exp.Expression, schema: Mapping) -> None:
    for c in sorted(referenced_columns(e)):
        if c not in schema:
            raise QueryValidationError(
                operator, field_name, f"unknown column {c!r} (available: {', '.join(schema)})"
            )


def _canonical(operator: str, field_name: str, e: exp.Expression, schema: Mapping
               ) -> exp.Expression:
    """`e` with its columns checked, in the form every engine computes alike."""
    _check_columns(operator, field_name, e, schema)
    try:
        return canonical(e, dict(schema))
    except ValueError as err:
        raise QueryValidationError(operator, field_name, str(err)) from None


def _check_names(operator: str, names: Sequence[str]) -> None:
    """Output names are compared without case by both engines: `maxLoad` and `maxload`
    would be one column."""
    seen: dict[str, str] = {}
    for n in names:
        if n.lower() in seen and seen[n.lower()] != n:
            raise QueryValidationError(
                operator, n, f"differs from {seen[n.lower()]!r} only in letter case; Spark "
                "and DuckDB compare names without case: rename one")
        seen[n.lower()] = n


class Unary(Node):
    """An operator over one input (`child`); its output columns are the input's unless it
    says otherwise."""

    child: Node
    child_fields = ("child",)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @cached_property
    def schema(self) -> dict[str, str]:
        return self.child.schema


@dataclass(frozen=True, eq=True)
class Select(Unary):
    """Selection: keep rows matching a predicate (eq. 1: out = f * in)."""

    child: Node
    predicate: exp.Expression
    selectivity: float | None = None
    kind = "select"
    role = "operator"

    def __post_init__(self) -> None:
        _check_child("select", self.child)
        object.__setattr__(self, "predicate", _canonical(
            "select", "predicate", self.predicate, self.child.schema))
        if infer_type(self.predicate, self.child.schema) != "BOOLEAN":
            raise QueryValidationError(
                "select", "predicate", f"{self.predicate.sql()!r} is not a condition"
            )
        if self.selectivity is not None and not 0 <= self.selectivity <= 1:
            raise QueryValidationError(
                "select", "selectivity", f"must be in [0, 1], got {self.selectivity}"
            )

    @property
    def conjuncts(self) -> list[exp.Expression]:
        """The predicate's conjuncts (`a AND b AND c`: a, b, c), read by the cost model."""
        return split_conjuncts(self.predicate)

    def label(self) -> str:
        return f"select {self.predicate.sql(dialect='duckdb')}"


@dataclass(frozen=True, eq=True)
class Project(Unary):
    """Projection: named output expressions (eq. 1 with f = 1)."""

    child: Node
    outputs: tuple[tuple[str, exp.Expression], ...]
    kind = "project"
    role = "operator"

    def __post_init__(self) -> None:
        _check_child("project", self.child)
        if not self.outputs:
            raise QueryValidationError("project", "outputs", "needs at least one column")
        seen: set[str] = set()
        outputs = []
        for name, e in self.outputs:
            if name in seen:
                raise QueryValidationError("project", name, "output column named twice")
            seen.add(name)
            outputs.append((name, _canonical("project", name, e, self.child.schema)))
        _check_names("project", [n for n, _ in outputs])
        object.__setattr__(self, "outputs", tuple(outputs))

    @cached_property
    def schema(self) -> dict[str, str]:
        return {n: infer_type(e, self.child.schema) for n, e in self.outputs}

    def label(self) -> str:
        parts = [
            n if isinstance(e, exp.Column) and e.name == n else f"{e.sql()} AS {n}"
            for n, e in self.outputs
        ]
        return "project " + ", ".join(parts)


@dataclass(frozen=True, eq=True)
class Rstream(Unary):
    """R2S root: the whole result relation at every slide instant, tagged with tau."""

    child: Node
    name: str = "result"
    kind = "rstream"
    role = "root"

    def __post_init__(self) -> None:
        _check_child("rstream", self.child)
        if self.child.kind == "window":
            raise QueryValidationError(
                "rstream", "input", "a query needs at least one R2R operator above its window"
            )
        if not any(n.kind == "window" for n in self.child.walk()):
            raise QueryValidationError(
                "rstream", "input", "the query reads no stream: a continuous query reads at "
                "least one window (a database table is joined with one)")
        object.__setattr__(self, "child", hold_windows(self.child))

    def label(self) -> str:
        return f"rstream {self.name}"

    def rstream(self, name: str = "result") -> Rstream:  # the DSL's mistake, named
        raise QueryValidationError("rstream", "input", "the query already ends in RSTREAM")


def hold_windows(node: Node) -> Node:
    """`node` with each window off the query's grid (the coarsest holding every window's
    instants, federation.instants) read on it (`Window.every_s`): held between its own
    instants. A session window is refused there: its rows stand at the one instant after
    the session closes."""
    g = query_grid(n for n in node.walk() if n.kind == "window")

    def rule(n: Node) -> Node:
        if n.kind != "window":
            return n
        every = None if n.grid == g else g.slide_s  # type: ignore[attr-defined]
        if every is not None and n.is_session:  # type: ignore[attr-defined]
            raise QueryValidationError(
                "window", "slide", f"the session window of {n.stream.name!r} slides every "  # type: ignore[attr-defined]
                f"{n.slide_s:g} s{_from(n.grid)}, the query's instants are every "  # type: ignore[attr-defined]
                f"{g.slide_s:g} s{_from(g)}: a session's rows stand at the one instant after "
                f"it closes, on the query's grid: give it slide {g.slide_s:g} s{_from(g)}")
        if n.every_s == every:  # type: ignore[attr-defined]
            return n
        return dataclasses.replace(n, every_s=every)

    return node.transform(rule)


def _from(g) -> str:
    return f" from {g.offset_s:g} s" if g.offset_s else ""


def _check_child(operator: str, child: object) -> None:
    if not isinstance(child, Node):
        raise QueryValidationError(operator, "input", f"expected a plan node, got {child!r}"
                                   + (" (a DSL relation: its plan is .node)"
                                      if hasattr(child, "node") else ""))
    if isinstance(child, Rstream):
        raise QueryValidationError(operator, "input", "cannot read the output of RSTREAM")
