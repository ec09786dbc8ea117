"""The S2R window at a leaf of a query over a named stream: time-based (range, slide),
tuple-based (rows, slide) or a session window (gap, slide, partition keys)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from sqlglot import exp

from federation.conventions import SESSION_COLUMNS, US_PER_S, us
from federation.errors import QueryValidationError
from federation.expressions import infer_type
from federation.instants import Grid
from federation.logical.nodes import Node, _canonical
from federation.streams import StreamDecl


@dataclass(frozen=True, eq=True)
class Window(Node):
    """S2R window over a named stream, one of two classes: `TimeWindow` (range, slide) or
    `TupleWindow` (rows, slide). Both answer `range_s`, `rows`, `partition_by`, `where` and
    `is_time_based` (None or () where a field is the other class's)."""

    stream: StreamDecl
    slide_s: float
    #: the instants' origin (Flink's window offset): instants at offset + k * slide, kept in
    #: [0, slide) (a cumulating window: [0, size), its periods' origin too)
    offset_s: float = 0.0
    kind = "window"
    role = ""  # abstract: each subclass is a leaf with its own lowerings
    range_s: float | None = dataclasses.field(default=None, init=False)
    rows: int | None = dataclasses.field(default=None, init=False)
    partition_by: tuple[str, ...] = dataclasses.field(default=(), init=False)
    where: exp.Expression | None = dataclasses.field(default=None, init=False)
    computed_keys: tuple[tuple[str, exp.Expression], ...] = dataclasses.field(
        default=(), init=False)
    #: the query's slide where it is finer than this window's own (windows of different
    #: slides in one query: federation.instants): at an instant off its own grid the window
    #: holds its rows of its own last instant; None on the query's own grid. Set where the
    #: query is made (`hold_windows`)
    every_s: float | None = dataclasses.field(default=None, kw_only=True)
    is_time_based: ClassVar[bool]
    is_session: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not isinstance(self.stream, StreamDecl):
            what = getattr(self.stream, "kind", type(self.stream).__name__)
            raise QueryValidationError(
                "window", "input", f"a window must read a stream at a leaf, not a {what}"
            )
        if self.slide_s <= 0:
            raise QueryValidationError("window", "slide", f"must be positive, got {self.slide_s}")
        period = us(self.range_s) if getattr(self, "cumulate", False) and self.range_s else \
            us(self.slide_s)
        object.__setattr__(self, "offset_s", us(self.offset_s) % period / US_PER_S)

    @cached_property
    def schema(self) -> dict[str, str]:
        return _readings(self)

    @property
    def grid(self) -> Grid:
        """The window's own instants."""
        return Grid(self.slide_s, self.offset_s)

    @property
    def instants(self) -> Grid:
        """The instants it is read at: its own, or the query's finer ones (`every_s`)."""
        return self.grid if self.every_s is None else Grid(self.every_s, self.offset_s)

    @property
    def held_s(self) -> float:
        """How long after its own instant the window is still read with that instant's
        rows: 0 on its own grid, its slide less the query's on a finer one."""
        return 0.0 if self.every_s is None else (us(self.slide_s) - us(self.every_s)) / US_PER_S

    @property
    def extent_s(self) -> float:
        """How long after a reading an instant can still hold it (federation.instants):
        the range, a tuple window's slide, a session's gap and slide; and the time it is
        held on a query's finer grid."""
        return (self.range_s if self.range_s is not None else self.slide_s) + self.held_s


@dataclass(frozen=True, eq=True)
class TimeWindow(Window):
    """The readings of the last `range_s` seconds before each instant. `cumulate`: Flink's
    CUMULATE window instead: the readings since the start of the instant's period of
    `range_s` seconds (periods from the epoch on; instant tau's period is the one that
    holds tau - 1 us, so its last instant is the period's end), i.e. [start, tau) with
    start = floor((tau - 1 us) / range) * range: its range grows by the slide from one
    instant to the next, from the slide to the whole period."""

    range_s: float = 0.0
    cumulate: bool = False
    is_time_based = True
    role = "leaf"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.range_s <= 0:
            raise QueryValidationError("window", "range", f"must be positive, got {self.range_s}")
        if self.slide_s > self.range_s:
            raise QueryValidationError(
                "window", "slide", f"slide {self.slide_s:g} s is larger than range {self.range_s:g} s")
        if self.cumulate and us(self.range_s) % us(self.slide_s):
            raise QueryValidationError(
                "window", "range", f"a cumulating window's size ({self.range_s:g} s) is a "
                f"whole number of its steps ({self.slide_s:g} s), as Flink's CUMULATE")

    def label(self) -> str:
        if self.cumulate:
            return (f"window {self.stream.name} [cumulate {self.range_s:g} s, "
                    f"step {self.slide_s:g} s{_offset(self)}]")
        return (f"window {self.stream.name} [range {self.range_s:g} s, slide "
                f"{self.slide_s:g} s{_offset(self)}]")


@dataclass(frozen=True, eq=True)
class TupleWindow(Window):
    """The last `rows` readings (per `partition_by` key) before each instant."""

    rows: int = 0
    partition_by: tuple[str, ...] = ()
    #: the readings the window counts (a view's selection, federation/sqlfront/views.py):
    #: the last n of those, not those of the last n
    where: exp.Expression | None = None
    #: partition keys computed of each reading, (name, expression over the stream's columns)
    #: (`window(s, gap=2, partition_by={"k": "plug_id % 2"})`; a view's computed key)
    computed_keys: tuple[tuple[str, exp.Expression], ...] = ()
    is_time_based = False
    role = "leaf"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rows <= 0:
            raise QueryValidationError("window", "rows", f"must be positive, got {self.rows}")
        _check_partition(self)
        _check_where(self)

    def label(self) -> str:
        return (f"window {self.stream.name} [rows {self.rows}{_part(self)}, slide "
                f"{self.slide_s:g} s{_offset(self)}{_where(self)}]")


@dataclass(frozen=True, eq=True)
class SessionWindow(Window):
    """Sessions of each `partition_by` key (Flink's SESSION window; docs/sql.md, "Session
    windows"): readings at most `gap_s` apart, one after the other, are one session, from
    its first reading to its last plus the gap (`window_start`, `window_end`). A session is
    in the relation of the first instant tau >= its end, with its readings before tau (a
    reading at exactly tau comes after the session closed: it begins the next one); at
    other instants it is not. So a session's rows stand in exactly one instant; an
    aggregate grouped by `window_start` and `window_end` is its sessions' own
    (`sessions.check_session_aggregate`), any other reader reads those rows."""

    gap_s: float = 0.0
    partition_by: tuple[str, ...] = ()
    #: the readings sessions are made of (a view's selection, federation/sqlfront/views.py)
    where: exp.Expression | None = None
    #: partition keys computed of each reading, (name, expression over the stream's columns)
    #: (`window(s, gap=2, partition_by={"k": "plug_id % 2"})`; a view's computed key)
    computed_keys: tuple[tuple[str, exp.Expression], ...] = ()
    is_time_based = False
    is_session = True
    role = "leaf"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gap_s <= 0:
            raise QueryValidationError("window", "gap", f"must be positive, got {self.gap_s}")
        _check_partition(self)
        _check_where(self)
        for c in SESSION_COLUMNS:
            if c in self.stream.columns:
                raise QueryValidationError(
                    "window", "gap", f"stream {self.stream.name!r} has a column {c!r}: a "
                    "session window adds one of that name (rename the stream's)")

    @cached_property
    def schema(self) -> dict[str, str]:
        return {**_readings(self), **{c: "TIMESTAMP" for c in SESSION_COLUMNS}}

    @property
    def extent_s(self) -> float:
        return self.gap_s + self.slide_s + self.held_s

    def label(self) -> str:
        return (f"session {self.stream.name} [gap {self.gap_s:g} s{_part(self)}, slide "
                f"{self.slide_s:g} s{_offset(self)}{_where(self)}]")


def _readings(w: Window) -> dict[str, str]:
    """The columns of a window's readings: its stream's and its computed keys."""
    return {**w.stream.columns, **{k: infer_type(e, w.stream.columns)
                                   for k, e in w.computed_keys}}


def _check_partition(w: Window) -> None:
    """A tuple or session window's partition keys are columns of its stream or computed of
    them (`computed_keys`, each one a key, named apart from the stream's columns)."""
    computed = []
    for k, e in w.computed_keys:
        if k not in w.partition_by or k in w.stream.columns or k in SESSION_COLUMNS:
            raise QueryValidationError(
                "window", "partition_by", f"computed key {k!r} is " + (
                    "no partition key" if k not in w.partition_by else
                    f"a column of stream {w.stream.name!r}: name it apart"))
        computed.append((k, _canonical("window", k, e, w.stream.columns)))
    object.__setattr__(w, "computed_keys", tuple(computed))
    for k in w.partition_by:
        if k not in w.stream.columns and k not in dict(computed):
            raise QueryValidationError(
                "window", "partition_by", f"unknown column {k!r} of stream {w.stream.name!r}")


def _check_where(w: Window) -> None:
    """A window's own selection is a condition over its stream's columns."""
    if w.where is None:
        return
    pred = _canonical("window", "where", w.where, w.stream.columns)
    object.__setattr__(w, "where", pred)
    if infer_type(pred, w.stream.columns) != "BOOLEAN":
        raise QueryValidationError("window", "where", f"{pred.sql()!r} is not a condition")


def _offset(w: Window) -> str:
    return (f", offset {w.offset_s:g} s" if w.offset_s else "") + (
        f", read every {w.every_s:g} s" if w.every_s is not None else "")


def _where(w: Window) -> str:
    return f", where {w.where.sql(dialect='duckdb')}" if w.where is not None else ""


def _part(w: Window) -> str:
    made = {k: e.sql(dialect="duckdb") for k, e in w.computed_keys}
    keys = [f"{k} = {made[k]}" if k in made else k for k in w.partition_by]
    return f" partition by {', '.join(keys)}" if keys else ""


def _reads_stream(node: Node) -> bool:
    """Whether a window is below `node` (else it reads database tables only)."""
    return any(n.kind == "window" for n in node.walk())
