"""The equi-join of two relations (a logical plan node)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from federation.errors import QueryValidationError
from federation.logical.nodes import (
    Node,
    _check_child,
    _check_names,
    _check_one_slide,
)


@dataclass(frozen=True, eq=True)
class Join(Node):
    """Equi-join of two relations at each slide instant (eq. 2); without keys, every pair
    of rows of the same instant (Flink's window join on window_start and window_end alone).

    The output keeps the left key columns and every non-key column of both inputs; a
    non-key name present on both sides is ambiguous and must be renamed by a projection.
    """

    left: Node
    right: Node
    keys: tuple[tuple[str, str], ...]
    kind = "join"
    role = "operator"

    def __post_init__(self) -> None:
        _check_child("join", self.left)
        _check_child("join", self.right)
        if not any(n.kind == "window" for side in (self.left, self.right) for n in side.walk()):
            raise QueryValidationError(
                "join", "input", "both inputs read only database tables: join them in the "
                "database (a view) and read that view, or join a table with a window")
        _check_one_slide("join", self.left, self.right)
        ls, rs = self.left.schema, self.right.schema
        for lk, rk in self.keys:
            if lk not in ls:
                raise QueryValidationError(
                    "join", "on", f"unknown column {lk!r} in left input (available: {', '.join(ls)})"
                )
            if rk not in rs:
                raise QueryValidationError(
                    "join", "on",
                    f"unknown column {rk!r} in right input (available: {', '.join(rs)})",
                )
            if ls[lk] != rs[rk]:
                raise QueryValidationError(
                    "join", "on", f"key {lk!r} is {ls[lk]} on the left but {rk!r} is {rs[rk]} "
                    "on the right",
                )
        rkeys = {rk for _, rk in self.keys}
        lkeys = {lk for lk, _ in self.keys}
        for c in rs:
            if c in rkeys:
                continue
            if c in ls:
                raise QueryValidationError(
                    "join", "columns",
                    f"ambiguous column {c!r}: present in both inputs; rename it with project",
                )
        for lk in lkeys:
            if lk in rs and lk not in rkeys:
                raise QueryValidationError(
                    "join", "columns", f"ambiguous column {lk!r}: present in both inputs"
                )
        _check_names("join", list(self.schema))

    child_fields = ("left", "right")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @cached_property
    def schema(self) -> dict[str, str]:
        rkeys = {rk for _, rk in self.keys}
        out = dict(self.left.schema)
        out.update({c: t for c, t in self.right.schema.items() if c not in rkeys})
        return out

    def label(self) -> str:
        on = ", ".join(lk if lk == rk else f"{lk}={rk}" for lk, rk in self.keys)
        return f"join on {on}" if on else "join on the instant"
