"""A table of a DuckDB database file as a sink (`--output FILE.duckdb`, table
`--output-table`, of several queries a table per query): db/sink.DuckDBTableSink, each
micro-batch's rows and key in one transaction (exactly once across a replay)."""

from __future__ import annotations

from pathlib import Path

from db.sink import DuckDBTableSink


def open_sink(output: Path, ctx) -> DuckDBTableSink:
    return DuckDBTableSink(Path(output), ctx.table, ctx.run_id, replace=ctx.replace)
