"""ROW_NUMBER(), RANK() and DENSE_RANK() OVER (PARTITION BY ... ORDER BY ...) at each
instant (a logical plan node): the ranking under Flink's window Top-N (`WHERE rownum <= n`
above it) and under ORDER BY ... LIMIT n of a query's result per instant."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from federation.errors import QueryValidationError
from federation.logical.nodes import Unary, _check_child, _check_names


@dataclass(frozen=True, eq=True)
class RowNumber(Unary):
    """The input's rows at each instant, each with its position (1, 2, ...) in its
    partition (the rows equal in `partition_by`) under `order_by` ((column, descending)
    pairs). The order is total, so every engine numbers alike: after `order_by`, the other
    columns in their order, ascending; NULLs last in every column (`sort_keys`). Rows equal
    in every column are interchangeable: which gets which number changes no result.
    `function` "rank": rows equal in `order_by` share the number of the first of them (1, 1,
    3); "dense_rank": they share it and the next value has the next number (1, 1, 2); only
    `order_by` decides ties then, and NULLs are equal to each other."""

    child: object
    partition_by: tuple[str, ...]
    order_by: tuple[tuple[str, bool], ...]
    name: str = "row_number"
    function: str = "row_number"
    kind = "row_number"
    role = "operator"

    def __post_init__(self) -> None:
        _check_child("row_number", self.child)
        if self.function not in FUNCTIONS:
            raise QueryValidationError("row_number", "function", f"{self.function!r}: one of "
                                       f"{', '.join(FUNCTIONS)}")
        object.__setattr__(self, "order_by", order_items(self.order_by))
        if not any(n.kind == "window" for n in self.child.walk()):
            raise QueryValidationError(
                "row_number", "input", "the input reads only database tables: its rows "
                "would be numbered alike at every instant; number a window's rows")
        schema = self.child.schema
        for c in (*self.partition_by, *(c for c, _ in self.order_by)):
            if c not in schema:
                raise QueryValidationError("row_number", "columns", f"unknown column {c!r} "
                                           f"(available: {', '.join(schema)})")
        if not self.order_by:
            raise QueryValidationError("row_number", "order_by", "needs at least one column "
                                       "to order by")
        if self.name in schema:
            raise QueryValidationError("row_number", "name", f"{self.name!r} is a column of "
                                       "the input: name the row number otherwise")
        _check_names("row_number", [*schema, self.name])

    @cached_property
    def schema(self) -> dict[str, str]:
        return {**self.child.schema, self.name: "BIGINT"}

    @property
    def sort_keys(self) -> list[tuple[str, bool]]:
        """The total order: `order_by`, then every other column ascending (NULLs last)."""
        named = {c for c, _ in self.order_by}
        return [*self.order_by, *((c, False) for c in self.child.schema if c not in named)]

    def label(self) -> str:
        by = ", ".join(f"{c} DESC" if d else c for c, d in self.order_by)
        part = f"partition by {', '.join(self.partition_by)} " if self.partition_by else ""
        return f"{self.function} {self.name} ({part}order by {by})"


#: the ranking functions, SQL's names in lower case
FUNCTIONS = ("row_number", "rank", "dense_rank")


def order_items(order_by) -> tuple[tuple[str, bool], ...]:
    """`["price DESC", "auction"]` (or (column, descending) pairs) as (column, descending)."""
    out = []
    for item in [order_by] if isinstance(order_by, str) else order_by:
        if isinstance(item, tuple):
            out.append((item[0], bool(item[1])))
            continue
        words = item.split()
        if len(words) == 2 and words[1].upper() in ("ASC", "DESC"):
            out.append((words[0], words[1].upper() == "DESC"))
        elif len(words) == 1:
            out.append((words[0], False))
        else:
            raise QueryValidationError("row_number", "order_by", f"{item!r}: a column, "
                                       "optionally followed by ASC or DESC")
    return tuple(out)
