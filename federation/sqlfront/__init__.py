"""Streaming SQL in: a SELECT over window table functions becomes the DSL's logical plan.

`sql(text, streams)` parses with sqlglot (DuckDB's dialect, extended only so that a
`TABLE name` argument of a table function is read as a table reference) and builds the
same `federation.logical` nodes the Python DSL builds, so the optimizer, explain and every
placement treat both alike.

What a query may use (docs/sql.md has the full reference):

* windows at the leaves, Flink-style: `HOP(TABLE s, DESCRIPTOR(ts), slide, size)` and
  `TUMBLE(TABLE s, DESCRIPTOR(ts), size)`, sizes as `INTERVAL '5' MINUTE`,
  `INTERVAL '5 minutes'` or seconds; the window's instants are implicit: `window_start`
  and `window_end` may appear in GROUP BY, in a join's ON and as bare SELECT items, and are
  dropped there (every result row carries its slide instant as `tau`); tuple windows as
  `ROWS_WINDOW(TABLE s, DESCRIPTOR(ts), slide, n [, DESCRIPTOR(k, ...)])` (this project's
  spelling: Flink has no row-count window table function);
* WHERE, projections with expressions, GROUP BY columns with COUNT/SUM/AVG/MIN/MAX, HAVING,
  equi-joins, inner and LEFT/RIGHT/FULL OUTER (`JOIN ... ON a.k = b.k AND ...` or `USING
  (k)`; an inner join's further conditions in ON become a selection above it), subqueries
  in FROM and CTEs (WITH);
* the result is RSTREAM (the whole result relation at every slide instant), named by
  `INSERT INTO name SELECT ...` or by the `name` argument;
* a selectivity hint for the optimizer in a comment of a WHERE or HAVING condition:
  `WHERE value > 0.9 * maxv /* selectivity 0.1 */`.

Everything else is refused with a `SqlError` naming the clause, the line and the column.

One module per concept:

* dialect.py: the text, parsed in the dialect; `SqlError` and where it points; the
  expression forms every engine evaluates alike; the selectivity hint;
* query.py: a statement clause by clause (INSERT INTO, WITH, WHERE), refused modifiers;
* windows.py: the window table functions HOP, TUMBLE and ROWS_WINDOW;
* from_clause.py: FROM items (windows, CTEs, subqueries) and equi-joins;
* scopes.py: names in scope and the columns they reach;
* select_list.py: projections, GROUP BY, aggregates and HAVING.

Example:
    >>> q = sql("SELECT plug_id, MAX(value) AS peak"
    ...         " FROM HOP(TABLE smartplug, DESCRIPTOR(ts),"
    ...         " INTERVAL '1' SECOND, INTERVAL '1' MINUTE)"
    ...         " GROUP BY window_start, window_end, plug_id")
    >>> [n.kind for n in q.walk()]
    ['window', 'aggregate', 'rstream']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from federation.logical import Rstream
from federation.sqlfront.dialect import SqlError
from federation.sqlfront.query import Translator
from federation.sqlfront.scopes import WINDOW_COLUMNS
from federation.streams import StreamDecl


def sql(text: str, streams: Mapping[str, StreamDecl] | Sequence[StreamDecl] | None = None,
        name: str | None = None, tables: str | Path | None = None) -> Rstream:
    """The logical plan of a streaming SELECT (see the package's docstring).

    `streams` maps names to stream declarations (default: the smart-plug stream as
    `smartplug`); `name` names the result (default: the INSERT INTO target, or "result");
    `tables`: a DuckDB database file whose tables the query reads by their plain names.
    """
    if streams is None:
        from federation.smartplug import smartplug_stream

        streams = {"smartplug": smartplug_stream()}
    elif not isinstance(streams, Mapping):
        streams = {s.name: s for s in streams}
    return Translator(text, dict(streams), tables).translate(name)


__all__ = ["WINDOW_COLUMNS", "SqlError", "sql"]
