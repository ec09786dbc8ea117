"""What a run takes over from the placement before it, or hands to the one after it, at a
migration (federation/adaptive): one object instead of five options of `execute`."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from federation.runtime.move import MovedState
    from federation.runtime.sources import InputSet


class Gate:
    """The end of the segment before, for a segment of an adaptive run started while that
    one still runs (federation/adaptive/segment.py): `open` once it has finished (its
    results written, its DuckDB files closed), `fail` when it stopped without finishing."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.ok = False
        self.opened_at: float | None = None  # perf_counter

    def open(self) -> None:
        self.ok, self.opened_at = True, time.perf_counter()
        self._event.set()

    def fail(self) -> None:
        self._event.set()

    def wait(self, halt: threading.Event | None = None) -> None:
        """Until the segment before has finished; Halted (the micro-batch in progress is
        left to a resumed run) when the run is halted or that segment failed."""
        from federation.runtime.direct import Halted

        while not self._event.wait(0.05):
            if halt is not None and halt.is_set():
                raise Halted("halted while the segment before was finishing")
        if not self.ok:
            raise Halted("the segment before stopped without finishing")


@dataclass(frozen=True)
class Handoff:
    """A segment of an adaptive run (all fields optional; `Handoff()` is a whole run).

    `start_at` / `stop_at` (slide instants: the migration instants the run starts and stops
    at): the DB-ops compute the instants from `start_at` (instead of the first the input
    has) and before `stop_at` only, and keep the state that the instants from `stop_at` on
    need.
    `moved` (DB-op id -> MovedState, federation/runtime/move.py): the window state the
    DB-ops start with (move).
    `watch(clock)` is asked at every stage-0 micro-batch; when it returns an instant (the
    migration instant) the run stops there: the DB-ops compute the instants before it and
    keep their state as it is there, Spark's stage 0 goes on until its own results before
    it are out, and the rest of the input is left to the next placement
    (`summary.stopped_at`).
    `prepared`: input already validated into spools (an InputSet of `segment_spool.sub_spool`
    spools); the run's data directory is then only named in its identity.
    `follower`: a live segment's input (adaptive/live.SpoolLink, started): the run follows
    it as a following run follows its landing directories (`follow` is set).
    `tables`: {table name: its Parquet copy} made when the adaptive run started
    (tables.snapshot_tables): every segment reads that version, none copies it again.
    `segments`: the adaptive run's segments so far, this one last ({"placement", "since",
    "strategy", "reason"}), for its metrics and status page (federation/runtime/metrics.py).
    `after`: the end of the segment before (a Gate), when this one started before it
    ended: the DB-ops adopt their moved state at their first micro-batch, once it is open.
    """

    start_at: dt.datetime | None = None
    stop_at: dt.datetime | None = None
    moved: Mapping[str, MovedState] = field(default_factory=dict)
    watch: Callable[[dt.datetime], dt.datetime | None] | None = None
    prepared: InputSet | None = None
    follower: object = None
    tables: Mapping[str, Path] = field(default_factory=dict)
    segments: tuple[Mapping[str, str], ...] = ()
    after: Gate | None = None
