"""The output of an adaptive run: the run's sinks, opened once, get every instant once and
in order across its segments (docs/architecture.md, "Re-optimization while running").

Each segment is a run of its own (`execute`), whose result rows a segment's sinks hand on:
only the rows of the instants the segment owns ([start_at, stop_at): a replay's warm-up
computes earlier instants again, and a placement stopped at a migration instant leaves the
later ones to the next), to the run's sinks, under keys no other segment uses (segment k's
micro-batch b is batch `k * SEGMENT_KEYS + b`). A durable sink of the run (a DuckDB table, a
Parquet directory, a topic, a sink of the user's) gets each micro-batch's owned rows at
once; one that keeps nothing (the console, an iterator) gets each instant once and in
order, as in a plain run. The whole result (a `.parquet` file's `end`) is written after
the last segment, before any report.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from federation.adaptive.decide import Segment
from federation.adaptive.watch import Decision
from federation.runtime.result import rows_of
from federation.runtime.sinks import is_durable

#: segment k's micro-batch b reaches the run's sinks as batch k * SEGMENT_KEYS + b
SEGMENT_KEYS = 10**9


def owned(rows: pa.Table, start_at: dt.datetime | None, stop_at: dt.datetime | None
          ) -> pa.Table:
    """The rows of the instants in [start_at, stop_at) (None: unbounded)."""
    tau = rows.column("tau")
    keep = None
    if start_at is not None:
        keep = pc.greater_equal(tau, pa.scalar(start_at, tau.type))
    if stop_at is not None:
        lt = pc.less(tau, pa.scalar(stop_at, tau.type))
        keep = lt if keep is None else pc.and_(keep, lt)
    return rows if keep is None else rows.filter(keep)


class SegmentSink:
    """One segment's sink (a RunOptions sink of its `execute`) in front of the run's sinks
    of one kind: durable (each micro-batch's rows, keyed) or not (each instant once, in
    order: ResultParts hands it so because `durable` is False). `stop()`: the segment's
    migration instant as known now (a watch decides it while the segment runs)."""

    where = "an adaptive run's segment"

    def __init__(self, k: int, start_at: dt.datetime | None,
                 stop: Callable[[], dt.datetime | None], sinks: Mapping[str, list],
                 durable: bool, after: Callable[[], None] | None = None) -> None:
        self.k, self.start_at, self.stop, self.durable = k, start_at, stop, durable
        self.after = after  # returns once the segment before has finished (or raises)
        self.rows = 0  # the rows it passed on (owned)
        self.sinks = {q: [s for s in ss if is_durable(s) == durable] for q, ss in sinks.items()}

    def put(self, key: tuple[int, int], rows: pa.Table, query: str) -> None:
        mine = owned(rows, self.start_at, self.stop())
        if not mine.num_rows:
            return
        if self.after is not None:  # an overlapped start: the old placement's rows first
            self.after()
            self.after = None
        key = (key[0], self.k * SEGMENT_KEYS + key[1])
        self.rows += mine.num_rows
        for s in self.sinks[query]:
            s.put(key, mine, query=query)

    def close(self) -> None:
        pass  # the run's sinks are closed once, by the adaptive run


def segment_sinks(k: int, start_at: dt.datetime | None, stop: Callable[[], dt.datetime | None],
                  sinks: Mapping[str, list], after: Callable[[], None] | None = None
                  ) -> tuple[SegmentSink, ...]:
    """The sinks of segment k's run in front of the run's `sinks` (by query): one for the
    durable ones, one for the others, each only where there are such. `after`: wait for
    the segment before to finish before the first owned rows (segment.py)."""
    out = []
    for durable in (True, False):
        s = SegmentSink(k, start_at, stop, sinks, durable, after)
        if any(s.sinks.values()):
            out.append(s)
    return tuple(out)


class SegmentRun(BaseModel):
    """How one segment ran."""

    model_config = ConfigDict(extra="forbid")

    segment: Segment
    #: how it started: "start" (the first), "replay" (parallel track, and why a move did
    #: not apply when it was asked for) or "move"
    strategy: str = "start"
    #: rows (or slice rows) its DB-ops took from the previous segment's, per DB-op and table
    moved: dict[str, dict[str, int]] = {}
    input_seconds: int  # event seconds read, warm-up included
    warmup_seconds: int
    result_rows: int
    wall_s: float  # the whole segment: ingest, Spark start, warm-up, its batches, drain
    rho: float  # event seconds it owns over its wall time
    #: wall time from the segment's call until its first result at its first instant
    #: (the output gap of a migration: the new placement's start and warm-up)
    first_result_s: float | None
    #: wall time before its first micro-batch (ingest of its input, Spark's queries)
    setup_s: float
    #: wall time from the old segment's stop to the end of its run (its tail and drain)
    stop_s: float | None = None
    #: a live run's overlapped start: wall time from its start to the old placement's end
    #: (its set-up, meanwhile); None when it started after it (segment.py)
    overlap_s: float | None = None
    #: the two parts of a migration's output gap: the old placement's last owned result to
    #: its end (`tail_s`, its own), and the old one's end to the new one's first owned
    #: result (`first_after_s`, the new one's: its adoption and first micro-batch, and
    #: without an overlap its set-up)
    tail_s: float | None = None
    first_after_s: float | None = None
    #: its stage-0 data micro-batches: (event time reached, wall seconds of the batch)
    batches: list[tuple[dt.datetime, float]]
    decisions: list[Decision] = []  # taken while it ran (online runs)


class AdaptiveResult(BaseModel):
    """What an adaptive run returns (its rows are in its sinks too, written first)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    #: the query's (of several: the first's); None for a live run (in its sinks only)
    rows: pa.Table | None = None
    #: of several queries: each query's rows by its name
    results: dict[str, pa.Table] | None = None
    #: where the result files are (a Parquet file sink's path), if any
    output: str | None = None
    segments: list[SegmentRun]
    wall_s: float
    #: the output gap of each migration: wall seconds from the old placement's last
    #: micro-batch that produced results to the new one's first result
    gaps_s: list[float | None] = []
    #: bad rows of the input (validated once, before the first segment), per reason; their
    #: records, and the files that could not be read, are in `deadletter_dir`
    dead_lettered: int = 0
    dead_by_reason: dict[str, int] = {}
    quarantined: list[dict[str, str]] = []  # part files that could not be read
    deadletter_dir: str | None = None

    halted: bool = False  # a live run stopped by its `halt` (the same call resumes it)

    @property
    def migrations(self) -> int:
        return len(self.segments) - 1

    def of(self, query: str) -> pa.Table:
        """The rows of query `query` (a run of several queries)."""
        return rows_of(self.rows, self.results, query)
