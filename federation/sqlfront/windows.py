"""Window table functions, the leaves of every query: a stream becomes a `Window` node.

Time windows are Flink's: `HOP(TABLE s, DESCRIPTOR(ts), slide, size)` and
`TUMBLE(TABLE s, DESCRIPTOR(ts), size)` (slide = size); `ts` must be the stream's event-time
column. Tuple windows are this project's spelling (Flink has no row-count window table
function): `ROWS_WINDOW(TABLE s, DESCRIPTOR(ts), slide, n [, DESCRIPTOR(k, ...)])`, at each
instant the last n rows (per partition of the keys when given). `TABLE(HOP(...))` is read
as `HOP(...)`. Sizes are `INTERVAL '5' MINUTE`, `INTERVAL '5 minutes'`,
`INTERVAL '500' MILLISECOND` or a number of seconds:

    >>> import sqlglot
    >>> from federation.sqlfront.dialect import FedqSql, SqlText
    >>> sizes = ("INTERVAL '5' MINUTE", "INTERVAL '5 minutes'", "INTERVAL '500' MILLISECOND", "90")
    >>> [duration(SqlText(s), sqlglot.parse_one(s, dialect=FedqSql), "HOP") for s in sizes]
    [300.0, 300.0, 0.5, 90.0]

Session windows are Flink's `SESSION(TABLE s [PARTITION BY k | PARTITION BY (k, ...)],
DESCRIPTOR(ts), gap)`, at the query's instants (the slide of its other windows, else 1 s),
their `window_start` and `window_end` columns of each session (docs/sql.md, "Session
windows"). `CUMULATE(TABLE s, DESCRIPTOR(ts), step, size)` is Flink's cumulating window: at
each instant (every step) the rows since the start of the current period of `size` (periods
from the epoch on; the size a whole number of steps). TUMBLE, HOP and CUMULATE take Flink's
`offset` last: the instants are offset + k * slide from the epoch (a CUMULATE's periods
start at offset + k * size); a SESSION's and a ROWS_WINDOW's instants are the query's.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from federation.errors import QueryValidationError
from federation.instants import Grid, common_grid
from federation.logical.dsl import parse_duration, window
from federation.logical.window import TimeWindow, Window
from federation.sqlfront.dialect import SqlText
from federation.streams import StreamDecl

SIGNATURES = {
    "HOP": "HOP(TABLE s, DESCRIPTOR(ts), slide, size [, offset])",
    "TUMBLE": "TUMBLE(TABLE s, DESCRIPTOR(ts), size [, offset])",
    "ROWS_WINDOW": "ROWS_WINDOW(TABLE s, DESCRIPTOR(ts), slide, n [, DESCRIPTOR(keys)])",
    "SESSION": "SESSION(TABLE s [PARTITION BY k], DESCRIPTOR(ts), gap)",
    "CUMULATE": "CUMULATE(TABLE s, DESCRIPTOR(ts), step, size [, offset])",
}
_ARITY = {"HOP": (4, 5), "TUMBLE": (3, 4), "ROWS_WINDOW": (4, 5), "SESSION": (3,),
          "CUMULATE": (4, 5)}
NOW_GRID = Grid(1.0)  # a query without time windows: every second
_SIZES = {"HOP": 2, "TUMBLE": 1, "CUMULATE": 2}  # durations before the offset
_UNITS = {"millisecond": "ms", "milliseconds": "ms"}


def window_tvf(text: SqlText, streams: Mapping[str, StreamDecl], call: exp.Anonymous,
               grid: Grid = NOW_GRID) -> Window:
    """The window a call of HOP, TUMBLE, ROWS_WINDOW or SESSION in FROM reads (a session
    window's instants: `grid`, the query's; a ROWS_WINDOW's offset too)."""
    fn = call.name.upper()
    args = list(call.expressions)
    if fn == "TABLE" and len(args) == 1 and isinstance(args[0], exp.Anonymous):
        return window_tvf(text, streams, args[0], grid)
    if fn not in SIGNATURES:
        raise text.fail(f"unknown table function {call.name!r} (HOP, TUMBLE, CUMULATE, "
                        "SESSION or ROWS_WINDOW)", "FROM", call)
    if args and isinstance(args[0], exp.Table) and args[0].args.get("partition") \
            and fn != "SESSION":
        raise text.fail(f"PARTITION BY in {fn}: only SESSION partitions its stream",
                        fn, args[0])
    want = _ARITY[fn]
    if len(args) not in want:
        n = " or ".join(map(str, want))
        raise text.fail(f"{fn} takes {n} arguments, {SIGNATURES[fn]}; got {len(args)}",
                        fn, call)
    table, desc = args[0], args[1]
    if not isinstance(table, exp.Table):
        raise text.fail(f"the first argument of {fn} is TABLE <stream>", fn, call)
    sname = table.name
    if sname not in streams:
        raise text.fail(f"unknown stream {sname!r} (known: "
                        f"{', '.join(sorted(streams)) or 'none'})", fn, table)
    stream = streams[sname]
    if not (isinstance(desc, exp.Anonymous) and desc.name.upper() == "DESCRIPTOR"
            and len(desc.expressions) == 1 and isinstance(desc.expressions[0], exp.Column)):
        raise text.fail(f"the second argument of {fn} is DESCRIPTOR(<event-time column>)",
                        fn, desc)
    ts = desc.expressions[0].name
    if ts != stream.ts_column:
        raise text.fail(f"stream {sname!r} has event time {stream.ts_column!r}, not "
                        f"{ts!r}", fn, desc)
    if fn == "ROWS_WINDOW":
        return rows_window(text, stream, call, args, grid)
    if fn == "SESSION":
        part = table.args.get("partition")
        keys = _keys(table, tuple(c.name for c in part.expressions) if part is not None
                     else ())
        gap = duration(text, args[2], fn)
        return text.build(fn, call, lambda: window(stream, gap=gap, slide=grid.slide_s,
                                                   offset=grid.offset_s, partition_by=keys,
                                                   where=table.args.get("where")).node)
    sizes = [duration(text, a, fn) for a in args[2:2 + _SIZES[fn]]]
    slide, size = (sizes[0], sizes[1]) if fn in ("HOP", "CUMULATE") else (sizes[0], sizes[0])
    offset = _offset(text, args, fn)
    return text.build(fn, call, lambda: TimeWindow(stream=stream, slide_s=slide, range_s=size,
                                                   cumulate=fn == "CUMULATE",
                                                   offset_s=offset))


def _offset(text: SqlText, args: list[exp.Expression], fn: str) -> float:
    """A TUMBLE's, HOP's or CUMULATE's offset (its last argument, Flink's), 0 without one:
    an INTERVAL or a number of seconds, negative too (`INTERVAL '-1' MINUTE`)."""
    if len(args) <= 2 + _SIZES[fn]:
        return 0.0
    a = args[2 + _SIZES[fn]]
    if isinstance(a, exp.Neg):
        return -duration(text, a.this, fn)
    if isinstance(a, exp.Interval) and isinstance(a.this, exp.Literal) \
            and a.this.name.strip().startswith("-"):
        return -duration(text, exp.Interval(this=exp.Literal.string(
            a.this.name.strip()[1:]), unit=a.args.get("unit")), fn)
    return duration(text, a, fn)


def query_grid(text: SqlText, tree: exp.Expression) -> Grid:
    """The instants of the window table functions in `tree`: the coarsest grid holding
    those of every TUMBLE, HOP and CUMULATE, and of every ROWS_WINDOW from their origin
    (federation.instants); else 1 s from the epoch: a bare stream's NOW window. A SESSION's
    and a NOW window's instants are the query's."""
    grids, rows = [], []
    for call in tree.find_all(exp.Anonymous):
        fn = call.name.upper()
        if fn in _SIZES and len(call.expressions) in _ARITY[fn]:
            # HOP's slide, TUMBLE's size, CUMULATE's step
            grids.append(Grid(duration(text, call.expressions[2], fn),
                              _offset(text, list(call.expressions), fn)))
        elif fn == "ROWS_WINDOW" and len(call.expressions) in _ARITY[fn]:
            rows.append(duration(text, call.expressions[2], fn))
    if not grids and not rows:
        return NOW_GRID
    origin = common_grid(grids).offset_s if grids else 0.0
    return common_grid([*grids, *(Grid(r, origin) for r in rows)])


def rows_window(text: SqlText, stream: StreamDecl, call: exp.Anonymous,
                args: list[exp.Expression], grid: Grid = NOW_GRID) -> Window:
    """ROWS_WINDOW(TABLE s, DESCRIPTOR(ts), slide, n [, DESCRIPTOR(k, ...)]): at each
    instant the last n rows (per partition when keys are given), the DSL's
    `window(s, rows=n, slide=..., partition_by=...)`."""
    fn = "ROWS_WINDOW"
    slide = duration(text, args[2], fn)
    n = args[3]
    if not (isinstance(n, exp.Literal) and not n.is_string and n.name.isdigit()
            and int(n.name) >= 1):
        raise text.fail(f"the row count of ROWS_WINDOW is a whole number >= 1, not "
                        f"{n.sql()!r}", fn, n)
    keys: tuple[str, ...] = ()
    if len(args) == 5:
        part = args[4]
        if not (isinstance(part, exp.Anonymous) and part.name.upper() == "DESCRIPTOR"
                and part.expressions
                and all(isinstance(c, exp.Column) for c in part.expressions)):
            raise text.fail("the fifth argument of ROWS_WINDOW is DESCRIPTOR(<partition "
                            "columns>)", fn, part)
        keys = tuple(c.name for c in part.expressions)
    where = args[0].args.get("where")  # a view's selection (views.py)
    offset = grid.offset_s  # from the query's origin
    return text.build(fn, call, lambda: window(stream, rows=int(n.name), slide=slide,
                                          offset=offset, partition_by=_keys(args[0], keys),
                                          where=where).node)


def _keys(table: exp.Expression, keys: tuple[str, ...]) -> tuple | dict:
    """A window's partition keys, those a view computes (views.py) with their expressions
    (the DSL's `partition_by={"k": "plug_id % 2"}`)."""
    made = table.args.get("computed") or {}
    return {k: made.get(k, exp.column(k)) for k in keys} if made else keys


def duration(text: SqlText, a: exp.Expression, clause: str) -> float:
    """Seconds of a window size or slide: an INTERVAL or a number of seconds."""
    if isinstance(a, exp.Interval):
        value = a.this.name if isinstance(a.this, exp.Literal) else a.this.sql()
        unit = a.args.get("unit")
        unit_s = unit.name.lower() if unit is not None else ""
        spelled = f"{value} {_UNITS.get(unit_s, unit_s)}".strip()
    elif isinstance(a, exp.Literal):
        spelled = a.name
    else:
        raise text.fail(f"a window size is an INTERVAL or a number of seconds, not "
                        f"{a.sql()!r}", clause, a)
    try:
        return parse_duration(spelled, clause.lower(), "size")
    except QueryValidationError as e:
        raise text.fail(e.message, clause, a) from None
