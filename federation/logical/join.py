"""The equi-join of two relations (a logical plan node)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from federation.errors import QueryValidationError
from federation.logical.nodes import (
    Node,
    _check_child,
    _check_names,
)
from federation.logical.window import _reads_stream

#: the joins of two relations at an instant: inner, and the three outer ones
HOWS = ("inner", "left", "right", "full")


@dataclass(frozen=True, eq=True)
class Join(Node):
    """Equi-join of two relations at each slide instant (eq. 2); without keys, every pair
    of rows of the same instant (Flink's window join on window_start and window_end alone).

    The output keeps the left key columns and every non-key column of both inputs; a
    non-key name present on both sides is ambiguous and must be renamed by a projection.

    `how`: "inner", or an outer join of the instant's two relations: "left" keeps every
    left row (a row without a match gets NULL right columns), "right" every right row,
    "full" both. A key column is SQL's `USING` column: the value of the side the row has
    (COALESCE(left, right)); a NULL key matches nothing.
    """

    left: Node
    right: Node
    keys: tuple[tuple[str, str], ...]
    how: str = "inner"
    kind = "join"
    role = "operator"

    def __post_init__(self) -> None:
        if self.how not in HOWS:
            raise QueryValidationError("join", "how", f"how={self.how!r}: one of "
                                       + ", ".join(map(repr, HOWS)))
        _check_child("join", self.left)
        _check_child("join", self.right)
        if not (_reads_stream(self.left) or _reads_stream(self.right)):
            raise QueryValidationError(
                "join", "input", "both inputs read only database tables: join them in the "
                "database (a view) and read that view, or join a table with a window")
        for keep, side in zip(self.keeps, ("left", "right")):
            if keep and not _reads_stream(getattr(self, side)):
                raise QueryValidationError(
                    "join", "how", f"a {self.how} outer join would keep every row of the "
                    f"database table on its {side}, at every instant, also where no "
                    "stream row arrived: a table is looked up by stream rows (as in Flink's "
                    "lookup joins, inner or outer on the stream's side only)")
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
        what = "join" if self.how == "inner" else f"{self.how} outer join"
        return f"{what} on {on}" if on else f"{what} on the instant"

    @property
    def keeps(self) -> tuple[bool, bool]:
        """Whether every left / right row is kept (an outer join's preserved sides)."""
        return self.how in ("left", "full"), self.how in ("right", "full")
