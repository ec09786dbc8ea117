"""The DuckDB side of a MIG: window contents, per-slide relations, SQL execution.

One connection per MIG with thread and memory settings. Row-level inputs keep a window's
contents (rows inserted from Arrow, rows no later slide needs deleted after each run);
relation-level inputs hold SPE-op results per slide instant and lose them once used.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa

_DUCK = {"BIGINT": "BIGINT", "INT": "INTEGER", "DOUBLE": "DOUBLE", "TIMESTAMP": "TIMESTAMP",
         "VARCHAR": "VARCHAR", "BOOLEAN": "BOOLEAN"}


@dataclass(frozen=True)
class InputSpec:
    """One input table of a DB-op as the store keeps it."""

    table: str
    columns: dict[str, str]  # without the _ts / _tau column
    row_level: bool
    range_s: float | None = None  # time window: rows older than tau - range expire
    rows: int | None = None  # tuple window
    partition_by: tuple[str, ...] = ()


def naive_timestamps(t: pa.Table) -> pa.Table:
    """Drop time zones (Spark sends UTC instants) so columns match DuckDB TIMESTAMP."""
    cols = []
    for f, c in zip(t.schema, t.columns):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            c = c.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))
        elif pa.types.is_timestamp(f.type) and f.type.unit != "us":
            c = c.cast(pa.timestamp("us"))
        cols.append(c)
    return pa.table(cols, names=t.column_names)


class MigDatabase:
    """DuckDB state and execution of one DB-op."""

    def __init__(self, inputs: Sequence[InputSpec], sql: str, threads: int = 1,
                 memory_limit: str = "4GB") -> None:
        self.con = duckdb.connect(config={"threads": threads, "memory_limit": memory_limit})
        self.inputs = {i.table: i for i in inputs}
        self.sql = sql
        self._exec("CREATE TABLE taus (_tau TIMESTAMP)")
        for spec in inputs:
            tcol = "_ts" if spec.row_level else "_tau"
            cols = ", ".join([f'"{tcol}" TIMESTAMP'] + [f'"{c}" {_DUCK[t]}'
                                                         for c, t in spec.columns.items()])
            self._exec(f'CREATE TABLE "{spec.table}" ({cols})')
        self.timings = {"insert_s": 0.0, "sql_s": 0.0, "expire_s": 0.0}

    def _exec(self, sql: str, params: list | None = None) -> list:
        # DuckDB 2.0 keeps a statement's result open until fetched: always finish it
        return self.con.execute(sql, params or []).fetchall()

    def insert(self, table: str, rows: pa.Table) -> None:
        """Append rows (Arrow) to an input table; columns are matched by name."""
        if rows.num_rows == 0:
            return
        t0 = time.perf_counter()
        spec = self.inputs[table]
        tcol = "_ts" if spec.row_level else "_tau"
        rows = naive_timestamps(rows)
        names = [tcol, *spec.columns]
        self.con.register("_batch", rows.select(names))
        cols = ", ".join(f'"{n}"' for n in names)
        self._exec(f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM _batch')
        self.con.unregister("_batch")
        self.timings["insert_s"] += time.perf_counter() - t0

    def run(self, taus: Sequence) -> pa.Table:
        """Run the DB-op's SQL for the given slide instants; rows tagged with `_tau`."""
        t0 = time.perf_counter()
        self._exec("DELETE FROM taus")
        self.con.register("_taus", pa.table({"_tau": pa.array(list(taus), pa.timestamp("us"))}))
        self._exec("INSERT INTO taus SELECT _tau FROM _taus")
        self.con.unregister("_taus")
        out = self.con.sql(self.sql).to_arrow_table()
        self.timings["sql_s"] += time.perf_counter() - t0
        return out

    def expire(self, next_tau) -> None:
        """Delete what no slide instant >= next_tau needs."""
        t0 = time.perf_counter()
        for spec in self.inputs.values():
            if not spec.row_level:
                self._exec(f'DELETE FROM "{spec.table}" WHERE _tau < ?', [next_tau])
            elif spec.range_s is not None:
                self._exec(
                    f'DELETE FROM "{spec.table}" WHERE _ts < ?::TIMESTAMP - INTERVAL '
                    f"'{spec.range_s}' SECOND", [next_tau])
            else:  # tuple window: keep the newest `rows` before next_tau per partition
                part = ", ".join(f'"{k}"' for k in spec.partition_by) or "1"
                # the same order as the DB-op's SQL (ties broken by the other columns)
                order = ", ".join(f'"{c}" DESC' for c in ["_ts", *spec.columns])
                self._exec(
                    f'DELETE FROM "{spec.table}" WHERE rowid IN (SELECT rowid FROM (SELECT rowid,'
                    f" row_number() OVER (PARTITION BY {part} ORDER BY {order}) AS rn FROM "
                    f'"{spec.table}" WHERE _ts < ?) WHERE rn > {int(spec.rows)})', [next_tau])
        self.timings["expire_s"] += time.perf_counter() - t0

    def row_counts(self) -> dict[str, int]:
        return {t: self._exec(f'SELECT count(*) FROM "{t}"')[0][0] for t in self.inputs}

    def memory_bytes(self) -> int:
        """DuckDB's own accounting of the memory it holds."""
        r = self._exec("SELECT sum(memory_usage_bytes) FROM duckdb_memory()")[0]
        return int(r[0] or 0)

    def close(self) -> None:
        self.con.close()

