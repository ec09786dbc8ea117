"""Tables of a DuckDB database file that a query reads (federation/logical/table.py): what
a table holds (its columns in the six SQL types, its rows, distinct values per column for
the cost model), and its snapshot as Parquet, the version of the table a run reads.

The file is opened read-only and closed at once, so another process may update the table
while a query runs (DuckDB lets one process write a file; a run never holds it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from federation.conventions import DUCKDB_TYPES, FROM_DUCKDB


class CatalogError(ValueError):
    """A table cannot be read: the message names the file, the table or the column."""


@dataclass(frozen=True)
class TableInfo:
    columns: dict[str, str]  # name -> one of the six SQL types
    rows: int
    distinct: dict[str, int]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _connect(path: Path) -> duckdb.DuckDBPyConnection:
    if not path.is_file():
        raise CatalogError(f"no database file {path}")
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        first = str(e).splitlines()[0]
        raise CatalogError(f"cannot open {path} read-only ({first}); a process that holds "
                           "it open for writing must close it first") from None


def _columns(con, path: Path, name: str) -> dict[str, str]:
    found = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position", [name]).fetchall()
    if not found:
        tables = [r[0] for r in con.execute(
            "SELECT DISTINCT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
        raise CatalogError(f"no table {name!r} in {path} (it has: "
                           f"{', '.join(tables) or 'no tables'})")
    out = {}
    for col, typ in found:
        base = "DECIMAL" if typ.startswith("DECIMAL") else typ
        if base not in FROM_DUCKDB:
            raise CatalogError(
                f"column {col!r} of table {name!r} is {typ}, which no engine of fedq reads; "
                f"cast it in a view (one of {', '.join(DUCKDB_TYPES.values())})")
        out[col] = FROM_DUCKDB[base]
    return out


def describe_table(path: str | Path, name: str) -> TableInfo:
    """The columns, row count and distinct values per column of table `name` now."""
    path = Path(path)
    con = _connect(path)
    try:
        cols = _columns(con, path, name)
        counts = ", ".join(f"approx_count_distinct({_q(c)})" for c in cols)
        row = con.execute(f"SELECT count(*), {counts} FROM {_q(name)}").fetchall()[0]
    finally:
        con.close()
    return TableInfo(cols, int(row[0]), {c: int(n) for c, n in zip(cols, row[1:])})


def snapshot_table(path: str | Path, name: str, columns: dict[str, str], out: Path) -> None:
    """Write table `name` as it is now to the Parquet file `out`, its columns cast to the
    declared types (`columns`: what the query was checked against). A column the query
    reads that the table lost, or whose type changed, is an error."""
    path = Path(path)
    con = _connect(path)
    try:
        now = _columns(con, path, name)
        for c, t in columns.items():
            if now.get(c) != t:
                raise CatalogError(
                    f"table {name!r} in {path} changed since the query was written: column "
                    f"{c!r} is {now.get(c, 'gone')}, the query reads it as {t}")
        sel = ", ".join(f"CAST({_q(c)} AS {DUCKDB_TYPES[t]}) AS {_q(c)}"
                        for c, t in columns.items())
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name("." + out.name + ".tmp")
        con.execute(f"COPY (SELECT {sel} FROM {_q(name)}) TO {_lit(tmp)} (FORMAT parquet)")
    finally:
        con.close()
    tmp.replace(out)


def write_table(path: str | Path, name: str, rows: pa.Table) -> None:
    """A DuckDB database file holding one table `name` with `rows` (written under a
    temporary name, then moved into place): a side table for a query to read."""
    path = Path(path)
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.register("rows_in", rows)
        con.execute(f"CREATE TABLE {_q(name)} AS SELECT * FROM rows_in")
    finally:
        con.close()
    tmp.replace(path)
