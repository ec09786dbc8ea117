"""UNION ALL of two relations at each slide instant (a logical plan node); INTERSECT and
EXCEPT [ALL] are built of it (federation/logical/builder.py)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from federation.errors import QueryValidationError
from federation.logical.nodes import Node, _check_child
from federation.logical.window import _reads_stream


@dataclass(frozen=True, eq=True)
class Union(Node):
    """Every row of both inputs at each instant (a bag: SQL's UNION ALL; UNION is its
    `.distinct()`). Both inputs have the same columns, by name and type, in the same
    order (the SQL front end renames the right side's by position); the windows of both
    share one slide (the query's instants)."""

    left: Node
    right: Node
    kind = "union"
    role = "operator"
    child_fields = ("left", "right")

    def __post_init__(self) -> None:
        _check_child("union", self.left)
        _check_child("union", self.right)
        check_same_columns("union", self.left, self.right)
        for side in (self.left, self.right):
            if not _reads_stream(side):
                raise QueryValidationError(
                    "union", "input", "an input reads only database tables: its rows would "
                    "be the same at every instant; union windows (or join the table)")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @cached_property
    def schema(self) -> dict[str, str]:
        return dict(self.left.schema)

    def label(self) -> str:
        return "union all"


def check_same_columns(op: str, left: Node, right: Node) -> None:
    ls, rs = left.schema, right.schema
    if list(ls.items()) != list(rs.items()):
        raise QueryValidationError(
            op, "columns", "both inputs need the same columns and types in the same order: "
            f"({_cols(ls)}) and ({_cols(rs)})")


def _cols(schema: dict[str, str]) -> str:
    return ", ".join(f"{c} {t}" for c, t in schema.items())

