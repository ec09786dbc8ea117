"""The statements on the MIG's DuckDB tables, as text (db.store runs them): CREATE with
DuckDB types for the streams' SQL types, INSERT, and the DELETEs of rows a window no longer
holds (older than a time window's range, or beyond a tuple window's last n rows per
partition, ordered as the DB-op's SQL orders them). Names are quoted.

    >>> create_table("in0", {"_ts": "TIMESTAMP", "load": "DOUBLE"})
    'CREATE TABLE "in0" ("_ts" TIMESTAMP, "load" DOUBLE)'
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from db.sqlgen.terms import session_begins
from federation.conventions import DUCKDB_TYPES, TS


def quoted_column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def quoted_table(name: str) -> exp.Table:
    return exp.to_table(exp.to_identifier(name, quoted=True).sql(dialect="duckdb"))


def render(e: exp.Expression) -> str:
    return e.sql(dialect="duckdb")


def create_table(table: str, columns: dict[str, str]) -> str:
    """CREATE TABLE with DuckDB types for the stream's SQL types."""
    schema = exp.Schema(this=quoted_table(table), expressions=[
        exp.ColumnDef(this=exp.to_identifier(c, quoted=True),
                      kind=exp.DataType.build(DUCKDB_TYPES[t])) for c, t in columns.items()])
    return render(exp.Create(this=schema, kind="TABLE"))


def delete_before(table: str, column: str, range_s: float | None = None) -> str:
    """DELETE the rows whose `column` is before the parameter (minus `range_s` seconds)."""
    bound: exp.Expression = exp.cast(exp.Placeholder(), "TIMESTAMP")
    if range_s is not None:
        bound = exp.Sub(this=bound, expression=exp.Interval(
            this=exp.Literal.string(str(range_s)), unit=exp.Var(this="SECOND")))
    return render(exp.delete(quoted_table(table),
                             where=exp.LT(this=quoted_column(column), expression=bound)))


def delete_closed_sessions(table: str, partition_by: Sequence[str], gap_us: int,
                           slide_us: int, where: str | None = None, origin_us: int = 0) -> str:
    """DELETE the rows of the sessions (db.sqlgen's SessionWindow) that closed at or before
    the instant before the parameter (`$1` - slide): per partition only the last session
    can be open (its end after that instant), and only its rows and later ones stay.
    `where`: the readings sessions are made of (DuckDB SQL); the others go at once."""
    keys = [quoted_column(k).sql("duckdb") for k in partition_by]
    ts, by = quoted_column(TS).sql("duckdb"), (f"PARTITION BY {', '.join(keys)} " if keys else "")
    table_name = quoted_table(table).sql("duckdb")
    src = f"(SELECT * FROM {table_name} WHERE {where})" if where else table_name
    done = f"(CAST($1 AS TIMESTAMP) - to_microseconds({slide_us}))"
    last = (f"SELECT {', '.join(keys + [''])}max({ts}) AS _s_last FROM {src} "
            f"WHERE {ts} < {done}" + (f" GROUP BY {', '.join(keys)}" if keys else ""))
    # a row's session is open when the gaps after it (to the partition's last row before
    # the instant) are all short: its start is the first row after the last long gap
    prev, new = session_begins(ts, by, gap_us, slide_us, origin_us)
    marked = (f"SELECT {', '.join(keys + [''])}{ts}, {new} FROM (SELECT *, {prev} FROM {src} "
              f"WHERE {ts} < {done})")
    on = " AND ".join(f"m.{k} IS NOT DISTINCT FROM l.{k}" for k in keys) or "TRUE"
    opens = (f"SELECT {', '.join([f'm.{k}' for k in keys] + [''])}max(m.{ts}) AS _s_start FROM "
             f"({marked}) AS m JOIN ({last}) AS l ON {on} WHERE m._s_new = 1 AND "
             f"l._s_last + to_microseconds({gap_us}) > {done}"
             + (f" GROUP BY {', '.join(f'm.{k}' for k in keys)}" if keys else ""))
    match = " AND ".join(f"o.{k} IS NOT DISTINCT FROM {table_name}.{k}" for k in keys) \
        or "TRUE"
    return (f"DELETE FROM {table_name} WHERE {ts} < {done} AND {ts} < "
            f"COALESCE((SELECT o._s_start FROM ({opens}) AS o WHERE {match}), {done})"
            + (f" OR NOT COALESCE({where}, FALSE)" if where else ""))


def delete_beyond_last(table: str, columns: list[str], partition_by: Sequence[str],
                       rows: int, where: str | None = None) -> str:
    """DELETE what a tuple window of `rows` rows (per partition) before the parameter no
    longer holds, ordered by event time and then the other columns (as the DB-op's SQL);
    `where`: the readings it counts (DuckDB SQL), the others go at once."""
    order = exp.Order(expressions=[exp.Ordered(this=quoted_column(c), desc=True)
                                   for c in [TS, *columns]])
    rn = exp.Window(this=exp.RowNumber(), order=order,
                    partition_by=[quoted_column(k) for k in partition_by]
                    or [exp.Literal.number(1)])
    inner = (exp.select(exp.column("rowid"), exp.alias_(rn, "rn"))
             .from_(quoted_table(table))
             .where(exp.LT(this=quoted_column(TS), expression=exp.Placeholder())))
    cond = None if where is None else sqlglot.parse_one(where, dialect="duckdb")
    if cond is not None:
        inner = inner.where(cond)
    doomed = (exp.select(exp.column("rowid")).from_(inner.subquery("r"))
              .where(exp.GT(this=exp.column("rn"), expression=exp.Literal.number(rows))))
    gone: exp.Expression = exp.In(this=exp.column("rowid"), query=doomed.subquery())
    if cond is not None:
        gone = exp.or_(gone, exp.not_(exp.func("COALESCE", cond.copy(), exp.false())))
    return render(exp.delete(quoted_table(table), where=gone))
