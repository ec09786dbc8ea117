"""UNION ALL of two relations at each slide instant (a logical plan node), and INTERSECT
and EXCEPT [ALL] built of it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from federation.errors import QueryValidationError
from federation.expressions import sum_
from federation.logical.nodes import Node, _check_child
from federation.logical.window import _check_one_slide, _reads_stream


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
        _check_same_columns("union", self.left, self.right)
        for side in (self.left, self.right):
            if not _reads_stream(side):
                raise QueryValidationError(
                    "union", "input", "an input reads only database tables: its rows would "
                    "be the same at every instant; union windows (or join the table)")
        _check_one_slide("union", self.left, self.right)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @cached_property
    def schema(self) -> dict[str, str]:
        return dict(self.left.schema)

    def label(self) -> str:
        return "union all"

    @staticmethod
    def set_operation(left: Node, right: Node, op: str, all_: bool = False) -> Node:
        """INTERSECT (`op` "intersect") or EXCEPT ("except") of two relations at each
        instant, distinct rows or with `all_` SQL's multiplicities (INTERSECT ALL: min(a, b)
        copies of a row the sides hold a and b times; EXCEPT ALL: a - b). Built of plan
        nodes every engine runs: each side's rows tagged (with ALL numbered 1, 2, ... among
        identical rows), a UNION ALL, a group by every column (NULLs equal, as SQL's set
        operations compare), kept where both sides hold the row (INTERSECT) or the left
        only (EXCEPT)."""
        if op not in ("intersect", "except"):
            raise QueryValidationError(op, "op", "intersect or except")
        _check_same_columns(op, left, right)
        cols = list(left.schema)
        keys = [*cols, "_set_n"] if all_ else cols

        def tagged(side: Node, mine: int) -> Node:
            if all_:
                side = side.row_number(cols, cols, "_set_n")
            return side.project(*keys, _set_l=str(mine), _set_r=str(1 - mine))

        both = tagged(left, 1).union_all(tagged(right, 0)).aggregate(
            by=keys, _set_l=sum_("_set_l"), _set_r=sum_("_set_r"))
        keep = "_set_l > 0 AND " + ("_set_r > 0" if op == "intersect" else "_set_r = 0")
        return both.filter(keep).project(*cols)


def _check_same_columns(op: str, left: Node, right: Node) -> None:
    ls, rs = left.schema, right.schema
    if list(ls.items()) != list(rs.items()):
        raise QueryValidationError(
            op, "columns", "both inputs need the same columns and types in the same order: "
            f"({_cols(ls)}) and ({_cols(rs)})")


def _cols(schema: dict[str, str]) -> str:
    return ", ".join(f"{c} {t}" for c, t in schema.items())

