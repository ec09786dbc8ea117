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

from federation.errors import QueryValidationError
from federation.expressions import infer_type
from federation.logical.nodes import Node, Select, _expr


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

    def filter(self, predicate: str | exp.Expression, selectivity: float | None = None) -> Table:
        sel = Select(self, _expr("select", "predicate", predicate), selectivity)  # checked
        return dataclasses.replace(self, steps=self.steps + (("where", sel.predicate),))

    where = filter

    def project(self, *columns: str, **outputs: str | exp.Expression) -> Table:
        p = Node.project(self, *columns, **outputs)  # checked as any projection
        return dataclasses.replace(self, steps=self.steps + (("select", p.outputs),))

    def distinct_rows(self) -> Table:
        """The table's distinct rows (SQL's SELECT DISTINCT): a step of the leaf, as its
        selections and projections are (no instants to group at; `distinct` is the
        statistics' field)."""
        return dataclasses.replace(self, steps=self.steps + (("distinct", None),))

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


def table(name: str, *, db: str | Path) -> Table:
    """Table `name` of the DuckDB database file `db` as a relation of the query: its columns
    and size are read now (the file is opened read-only and closed again).

    Example:
        >>> import duckdb, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "ref.duckdb")
        >>> con = duckdb.connect(path)
        >>> _ = con.execute("CREATE TABLE houses AS SELECT range::INT AS house_id, "
        ...                 "'h' || range AS city FROM range(4)")
        >>> con.close()
        >>> t = table("houses", db=path)
        >>> t.schema, t.rows
        ({'house_id': 'INT', 'city': 'VARCHAR'}, 4)
    """
    from db.catalog import CatalogError, describe_table

    path = Path(db).expanduser().resolve()
    try:
        info = describe_table(path, name)
    except CatalogError as e:
        raise QueryValidationError("table", name, str(e)) from None
    return Table(name, str(path), tuple(info.columns.items()), info.rows,
                 tuple(info.distinct.items()))


def fold_tables(node: Node) -> Node:
    """Selections and projections directly over a table folded into it (the optimizer's
    rules build them as nodes: a conjunct pushed to a table's side of a join)."""
    def rule(n: Node) -> Node:
        if n.kind == "select" and isinstance(n.child, Table):  # type: ignore[attr-defined]
            return n.child.filter(n.predicate)  # type: ignore[attr-defined]
        if n.kind == "project" and isinstance(n.child, Table):  # type: ignore[attr-defined]
            return dataclasses.replace(n.child, steps=n.child.steps + (  # type: ignore
                ("select", n.outputs),))  # type: ignore[attr-defined]
        return n
    return node.transform(rule)
