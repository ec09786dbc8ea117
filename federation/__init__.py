"""Federated continuous queries over Spark Structured Streaming and DuckDB.

The query DSL, plan model, optimizer and explain are importable without a JVM; `run`
loads the runtime (Spark and DuckDB) on first use.
"""

from __future__ import annotations

from federation.errors import (
    PlacementError,
    QueryValidationError,
    UnsupportedOperationError,
)
from federation.expressions import (
    avg,
    avg_distinct,
    col,
    count,
    count_distinct,
    listagg,
    lit,
    max_,
    median,
    min_,
    percentile,
    stddev,
    sum_,
    sum_distinct,
    variance,
)
from federation.logical import NumberedPlan, Relation, Rstream, table, window
from federation.python_aggregates import udaf
from federation.python_functions import udf
from federation.streams import StreamDecl, StreamStats


def stream(name: str, schema: dict[str, str], rate: float, **stats: object) -> StreamDecl:
    """Declare a stream: name, schema (column -> type), rate in tuples/s, other statistics.

    Example:
        >>> s = stream("s", {"ts": "TIMESTAMP", "k": "INT", "v": "DOUBLE"}, rate=100)
        >>> s.stats.rate_tps
        100.0
    """
    return StreamDecl(name=name, schema=schema, stats=StreamStats(rate_tps=rate, **stats))


def sql(text, streams=None, name=None, tables=None):
    """A streaming SQL query as a logical plan; see federation.sqlfront.sql (`tables`: a
    DuckDB database file whose tables the query reads by their plain names)."""
    from federation.sqlfront import sql as _sql

    return _sql(text, streams, name, tables)


def optimize(query, **kw):
    """Phase-One and Phase-Two; see federation.optimizer.optimize."""
    from federation.optimizer import optimize as _optimize

    return _optimize(query, **kw)


def run(query, placement="auto", **kw):
    """Plan a query, then run it across Spark and DuckDB; see federation.api.run."""
    from federation.api import run as _run

    return _run(query, placement=placement, **kw)


__all__ = [
    "NumberedPlan",
    "PlacementError",
    "QueryValidationError",
    "Relation",
    "Rstream",
    "StreamDecl",
    "StreamStats",
    "UnsupportedOperationError",
    "avg",
    "avg_distinct",
    "col",
    "count",
    "count_distinct",
    "listagg",
    "lit",
    "max_",
    "median",
    "min_",
    "optimize",
    "percentile",
    "run",
    "sql",
    "stddev",
    "stream",
    "sum_",
    "sum_distinct",
    "table",
    "udaf",
    "udf",
    "variance",
    "window",
]
