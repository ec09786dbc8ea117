"""A DuckDB database table as the sink of a query's results (federation/runtime/sinks.py)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa


class DuckDBTableSink:
    """A table of a DuckDB database file: each micro-batch's rows and its key (table
    `fedq_batches`: table, run, stage, batch) are inserted in one transaction, and a key
    already there is skipped, so every row is in the table exactly once across crashes. A
    new run appends to the table (`replace`: drops it first)."""

    def __init__(self, path: Path, table: str, run: str, replace: bool = False) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(path))
        self.table, self.run = table, run
        self.where = f"table {table} of {path}"
        self.con.execute("CREATE TABLE IF NOT EXISTS fedq_batches (tbl VARCHAR, run VARCHAR, "
                         "stage INTEGER, batch BIGINT, rows BIGINT, "
                         "PRIMARY KEY (tbl, run, stage, batch))")
        if replace:
            self.con.execute(f"DROP TABLE IF EXISTS {self._quoted()}")
            self.con.execute("DELETE FROM fedq_batches WHERE tbl = ?", [table])

    def _quoted(self) -> str:
        return '"' + self.table.replace('"', '""') + '"'

    def put(self, key: tuple[int, int], rows: pa.Table, query: str = "") -> None:
        if not rows.num_rows:
            return
        con, q = self.con, self._quoted()
        con.execute("BEGIN")
        try:
            done = con.execute("SELECT count(*) FROM fedq_batches WHERE tbl = ? AND run = ? "
                               "AND stage = ? AND batch = ?",
                               [self.table, self.run, key[0], key[1]]).fetchall()[0][0]
            if done:
                con.execute("ROLLBACK")
                return
            con.register("fedq_rows", rows)
            con.execute(f"CREATE TABLE IF NOT EXISTS {q} AS SELECT * FROM fedq_rows LIMIT 0")
            con.execute(f"INSERT INTO {q} BY NAME SELECT * FROM fedq_rows")
            con.unregister("fedq_rows")
            con.execute("INSERT INTO fedq_batches VALUES (?, ?, ?, ?, ?)",
                        [self.table, self.run, key[0], key[1], rows.num_rows])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.con.close()
