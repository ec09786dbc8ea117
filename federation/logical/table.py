"""A table of a DuckDB database file read by a query (a logical plan leaf): the same rows at
every slide instant, joined with window rows or aggregates (a device registry, tariffs,
thresholds).

Selections and projections over a table fold into the leaf (`steps`): the table's side of
a join is one input wherever the join runs (read in place in a DB-op, a broadcast static
DataFrame in Spark). Which version of the table a run reads: the table as it is when the
run starts, copied once into the run's work directory (federation/runtime/tables.py);
docs in docs/user-guide.md, "Database tables in a query".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sqlglot import exp

from federation.expressions import infer_type
from federation.logical.nodes import Node, Project, Select


@dataclass(frozen=True, eq=True)
class TableStats:
    """What the cost model knows of a table: its rows and distinct values per column (read
    when the query is written). Shaped like a stream's statistics where the size rules
    read them (costmodel/sizes.py)."""

    rows: int
    distinct: Mapping[str, int]
    groups: Mapping[str, int] = dataclasses.field(default_factory=dict)
    value_fractions: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    selectivities: Mapping[str, float] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, eq=True)
class Table(Node):
    """Table `name` of the DuckDB database file `db`, through selections, projections and
    de-duplication (`steps`: ("where", predicate), ("select", outputs) or ("distinct",
    None), in order)."""

    name: str
    db: str
    columns: tuple[tuple[str, str], ...]
    rows: int = 0
    distinct: tuple[tuple[str, int], ...] = ()
    steps: tuple[tuple[str, object], ...] = ()
    kind = "table"
    role = "leaf"

    @cached_property
    def schema(self) -> dict[str, str]:
        s = dict(self.columns)
        for what, v in self.steps:
            if what == "select":
                s = {n: infer_type(e, s) for n, e in v}  # type: ignore[union-attr]
        return s

    @property
    def stats(self) -> TableStats:
        return TableStats(self.rows, dict(self.distinct))

    def step(self, what: str, value: object) -> Table:
        """The table through one more step (`where` a checked predicate, `select` checked
        outputs): the DSL's selections and projections of a table fold into it
        (federation/logical/builder.py)."""
        return dataclasses.replace(self, steps=self.steps + ((what, value),))

    def distinct_rows(self) -> Table:
        """The table's distinct rows (SQL's SELECT DISTINCT): a step of the leaf, as its
        selections and projections are (no instants to group at; `distinct` is the
        statistics' field)."""
        return self.step("distinct", None)

    def label(self) -> str:
        out = f"table {self.name} ({Path(self.db).name})"
        for what, v in self.steps:
            if what == "distinct":
                out += " distinct"
            elif what == "where":
                out += f" where {v.sql(dialect='duckdb')}"  # type: ignore[union-attr]
            else:
                out += " select " + ", ".join(
                    n if isinstance(e, exp.Column) and e.name == n else f"{e.sql()} AS {n}"
                    for n, e in v)  # type: ignore[union-attr]
        return out


def fold_tables(node: Node) -> Node:
    """Selections and projections directly over a table folded into it (the optimizer's
    rules build them as nodes: a conjunct pushed to a table's side of a join)."""
    def rule(n: Node) -> Node:
        if isinstance(n, Select) and isinstance(n.child, Table):
            return n.child.step("where", n.predicate)
        if isinstance(n, Project) and isinstance(n.child, Table):
            return n.child.step("select", n.outputs)
        return n
    return node.transform(rule)
