"""The database tables a query reads, as a run reads them: each copied once, when the run
starts, from its DuckDB file into the work directory (`input/tables/<name>.parquet`). Every
engine reads that copy: DB-ops load it into their DuckDB, Spark broadcasts it. So every
instant of a run sees the table as it was when the run started, whatever the placement;
a resumed run (kill -9) reads the copy it made; an update to the table reaches the
query's next run (docs/user-guide.md, "Database tables in a query")."""

from __future__ import annotations

from pathlib import Path

from db.catalog import CatalogError, snapshot_table
from federation.errors import QueryValidationError


def query_tables(nodes) -> dict:
    """The table leaves of a plan's nodes by table name; one name, one table."""
    out: dict = {}
    for n in nodes:
        if n.kind != "table":
            continue
        if n.name in out and out[n.name].db != n.db:
            raise QueryValidationError("table", n.name, f"two tables of this name "
                                       f"({out[n.name].db} and {n.db}): read one through a "
                                       "view of another name")
        out.setdefault(n.name, n)
    return out


def snapshot_tables(nodes, out_dir: Path, resuming: bool) -> dict[str, Path]:
    """{table name: its Parquet copy}: made now, or the copy of the run being resumed."""
    files = {}
    for name, node in query_tables(nodes).items():
        path = out_dir / f"{name}.parquet"
        if not (resuming and path.exists()):
            try:
                snapshot_table(node.db, name, dict(node.columns), path)
            except CatalogError as e:
                raise QueryValidationError("table", name, str(e)) from None
        files[name] = path
    return files
