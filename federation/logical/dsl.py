"""The entries of the DSL: `window(stream, range=..., slide=...)`, `table(name, db=...)`
and durations."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from sqlglot import exp

from federation.errors import QueryValidationError
from federation.logical.builder import Relation
from federation.logical.nodes import _expr
from federation.logical.table import Table
from federation.logical.window import SessionWindow, TimeWindow, TupleWindow
from federation.streams import StreamDecl

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hour|hours|d|day|days)?\s*$")
_UNIT_S = {None: 1.0, "ms": 0.001, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0,
           "seconds": 1.0, "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0,
           "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
           "d": 86400.0, "day": 86400.0, "days": 86400.0}


def parse_duration(value: float | str, operator: str, field_name: str) -> float:
    """Seconds of a duration given as a number of seconds or a string like '5 min'.

    Example:
        >>> parse_duration("5 min", "window", "range")
        300.0
    """
    if isinstance(value, bool):
        raise QueryValidationError(operator, field_name, f"expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    m = _DURATION.match(str(value))
    if not m:
        raise QueryValidationError(operator, field_name, f"cannot read duration {value!r}")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def window(
    stream: StreamDecl | str,
    *,
    range: float | str | None = None,
    slide: float | str = 1,
    rows: int | None = None,
    partition_by: Sequence[str] | Mapping[str, str | exp.Expression] = (),
    gap: float | str | None = None,
    cumulate: bool = False,
    where: str | exp.Expression | None = None,
    offset: float | str = 0,
    catalog: Mapping[str, StreamDecl] | None = None,
) -> Relation:
    """An S2R window at a leaf: `range` and `slide` (seconds or '5 min'), `rows` and `slide`,
    or a session window: `gap` and `slide` (the instants), per `partition_by` key;
    `cumulate=True` with `range`: Flink's CUMULATE window of size `range` and step `slide`.
    `offset`: the instants are offset + k * slide from the epoch (Flink's window offset; a
    cumulating window's periods start at offset + k * range), negative or positive.
    `where` (a tuple or session window): the readings it counts, the last n of them or the
    sessions they make (a time window's is a `.filter()` after it, the same rows).
    `partition_by` may map a key's name to an expression of the stream's columns
    (`{"k": "plug_id % 2"}`): a key computed of each reading, a column of the window.
    The query's first relation (federation/logical/builder.py).

    Example:
        >>> from federation.smartplug import smartplug_stream
        >>> window(smartplug_stream(), range="1 min", slide="1 s").node.range_s
        60.0
    """
    if isinstance(stream, str):
        known = dict(catalog or {})
        if stream not in known:
            raise QueryValidationError(
                "window", "stream",
                f"unknown stream {stream!r} (known: {', '.join(sorted(known)) or 'none'})",
            )
        stream = known[stream]
    if isinstance(partition_by, str):
        partition_by = (partition_by,)
    computed: tuple[tuple[str, exp.Expression], ...] = ()
    if isinstance(partition_by, Mapping):
        exprs = {k: _expr("window", k, e) for k, e in partition_by.items()}
        computed = tuple((k, e) for k, e in exprs.items()
                         if not (isinstance(e, exp.Column) and e.name == k))
        partition_by = tuple(exprs)
    slide_s = parse_duration(slide, "window", "slide")
    offset_s = _offset(offset)
    if (range is not None) + (rows is not None) + (gap is not None) != 1:
        raise QueryValidationError("window", "range", "give exactly one of range, rows or gap")
    cond = None if where is None else _expr("window", "where", where)
    if gap is not None:
        return Relation(SessionWindow(stream=stream, slide_s=slide_s, offset_s=offset_s,  # type: ignore[arg-type]
                                      gap_s=parse_duration(gap, "window", "gap"),
                                      partition_by=tuple(partition_by), where=cond,
                                      computed_keys=computed))
    if cond is not None and range is not None:
        raise QueryValidationError("window", "where", "a time window's rows are selected "
                                   "after it: window(s, range=...).filter(...)")
    if computed and range is not None:
        raise QueryValidationError("window", "partition_by", "a time window has no partition "
                                   "keys: window(s, range=...).project(k=...)")
    if range is not None:
        return Relation(TimeWindow(stream=stream, slide_s=slide_s, offset_s=offset_s,  # type: ignore[arg-type]
                                   range_s=parse_duration(range, "window", "range"),
                                   cumulate=cumulate))
    if cumulate:
        raise QueryValidationError("window", "cumulate", "a cumulating window has a range (its "
                                   "size) and a slide (its step): window(s, range=60, slide=10, "
                                   "cumulate=True)")
    return Relation(TupleWindow(stream=stream, slide_s=slide_s, offset_s=offset_s, rows=rows,  # type: ignore
                                partition_by=tuple(partition_by), where=cond,
                                computed_keys=computed))


def _offset(offset: float | str) -> float:
    """A window offset in seconds: a duration, negative with a leading minus."""
    if isinstance(offset, str) and offset.strip().startswith("-"):
        return -parse_duration(offset.strip()[1:], "window", "offset")
    return parse_duration(offset, "window", "offset")


def table(name: str, *, db: str | Path) -> Relation:
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
        >>> t.schema, t.node.rows
        ({'house_id': 'INT', 'city': 'VARCHAR'}, 4)
    """
    from db.catalog import CatalogError, describe_table

    path = Path(db).expanduser().resolve()
    try:
        info = describe_table(path, name)
    except CatalogError as e:
        raise QueryValidationError("table", name, str(e)) from None
    return Relation(Table(name, str(path), tuple(info.columns.items()), info.rows,
                          tuple(info.distinct.items())))
