"""Following landing directories, one per stream: input files are validated into each
stream's spool as they land, while Spark and DuckDB work on the spools
(docs/architecture.md, "Live streams"). A source that is not a directory (a broker, a
generator: federation/runtime/connectors/) fills a landing directory of its own.

The writer's convention: write a file under a name that does not match `part-*.parquet`
(or in another directory of the same file system), then rename it into place; a file is
read once, when it first appears under its final name (names in event-time order, as a
data directory's; a file landing after a later one is read all the same, and the lateness
rule decides on its rows).

Each stream has its own clock (its largest event time). A quiet stream still closes its
windows: when no file of it has landed for `idle_timeout_s` of wall time, its clock moves
on with wall time (the event time of its last reading plus the wall seconds since it
landed), once per `idle_timeout_s`; a reading that lands later below that clock minus the
allowed lateness is late (dead-lettered), as any late reading. The query's progress is the
slowest stream's (Spark's watermark and a DB-op's clock are the smallest over the streams),
so a quiet stream holds the others back by at most its idle timeout.

The start: the run starts once every stream has a reading, or `idle_timeout_s` after the
first reading of any stream; a stream with no reading then starts its clock at the run's
first reading (its readings below it minus the lateness are late). The end (`until`):
once every stream's clock has reached it, every spool ends with the same flush, after the
last reading of all streams (as at the end of directories replayed together).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from federation.parts import list_parts
from federation.runtime.ingest import Ingestor

FILES_PER_PASS = 32  # files of a lane validated before the others and the start are seen


@dataclass
class Lane:
    """One stream followed: its landing directory, its ingestor (spool), and what fills
    the directory in this process (a broker's subscriber, a generator), if anything: its
    failure is the run's, and it stops first."""

    data: Path
    ing: Ingestor
    feeder: object = None
    seen: set = field(default_factory=set)
    landed: float = 0.0  # wall time of the last file (or of the start)
    idled: float = 0.0  # wall time of the last idle step
    base: dt.datetime | None = None  # the clock when the last file landed
    done: bool = False  # a bounded source ended, and its every file was read
    more: bool = False  # files left for the next pass (Follower._read)


class Follower:
    """A thread that follows every lane into its spool until `stop()`, or until every
    stream's clock reaches `until` (then the input ends there: a flush punctuation
    `flush_after_s` past the last reading closes every window, as at the end of a
    directory). `res`: what the run reads of the input (the InputSet, updated as files
    land)."""

    def __init__(self, lanes: Mapping[str, Lane], *, idle_timeout_s: float = 5.0,
                 until: dt.datetime | None = None, flush_after_s: float = 600.0,
                 poll_s: float = 0.2) -> None:
        from federation.runtime.sources import InputSet

        self.lanes = dict(lanes)
        self.idle_timeout_s = idle_timeout_s
        self.until = until
        self.flush_after_s = flush_after_s
        self.poll_s = poll_s
        self.halt = threading.Event()
        self.ended = threading.Event()  # the input ended (`until`) or the thread failed
        self.started = threading.Event()  # the run's first instant is known (module doc)
        self.error: BaseException | None = None
        self._on_end, self._ending = None, False  # when_ended
        self._end_lock = threading.Lock()
        self.res = InputSet(inputs={n: lane.ing.res for n, lane in self.lanes.items()})
        self._thread = threading.Thread(target=self._main, name="fedq-follow", daemon=True)

    @property
    def description(self) -> str:
        return ", ".join(str(lane.data) for lane in self.lanes.values())

    def when_ended(self, fn) -> None:
        """`fn()` once the input ends, before the end's flush is written (at once if it
        has ended): the run bounds its DB-ops' last instant (execute._end_life)."""
        with self._end_lock:
            self._on_end = fn
            if self._ending:
                fn()

    def start(self) -> Follower:
        if all(lane.ing.clock is not None for lane in self.lanes.values()):
            self.started.set()  # a resumed run: every stream had started
        self._thread.start()
        return self

    def stop(self) -> None:
        """Read no more files (the one being validated is finished first)."""
        for lane in self.lanes.values():
            if lane.feeder is not None:
                lane.feeder.stop()
        self.halt.set()
        self._thread.join()

    def _main(self) -> None:
        try:
            self._follow()
        except BaseException as e:  # noqa: BLE001 - handed to the run, which raises it
            self.error = e
            self.ended.set()
            self.started.set()

    def _reached_until(self) -> bool:
        """True when every stream's input ended (its clock reached `until`, or its bounded
        source wrote its last file and it was read): the input ends (the flush is written
        once, at the same event time in every spool)."""
        lanes = self.lanes.values()
        if not all(lane.ing.finished or lane.done or (
                self.until is not None and lane.ing.clock is not None
                and lane.ing.clock >= self.until) for lane in lanes):
            return False
        if all(lane.ing.clock is None for lane in lanes):
            return False  # nothing read at all: no life to end
        last = max(lane.ing.clock for lane in lanes if lane.ing.clock is not None)
        with self._end_lock:
            self._ending = True
            if self._on_end is not None:
                self._on_end()
        for lane in lanes:
            if not lane.ing.finished:
                lane.ing.finish(self.flush_after_s, last=last)
        self.started.set()
        self.ended.set()
        return True

    def _follow(self) -> None:
        now = time.monotonic()
        for lane in self.lanes.values():
            lane.seen = set(lane.ing.inputs_read)  # a resumed spool's inputs (its metadata)
            lane.landed = lane.idled = now
            lane.base = lane.ing.clock
        if self._reached_until():  # a resumed run whose input had ended already
            self._warn_unread()
            return
        first_landed = None  # wall time the run's first reading landed
        while not self.halt.is_set():
            fresh = {}
            for name, lane in self.lanes.items():
                if lane.feeder is not None and lane.feeder.error is not None:
                    raise lane.feeder.error
                finished = getattr(lane.feeder, "finished", None)
                ended = finished is not None and finished.is_set()  # before its last read
                fresh[name] = self._read(lane)
                lane.done = lane.done or (ended and not lane.more)
                if fresh[name] is None:
                    return  # halted
            now = time.monotonic()
            clocks = [lane.ing.clock for lane in self.lanes.values()]
            if not self.started.is_set() and any(c is not None for c in clocks):
                first_landed = first_landed or now
                if all(c is not None for c in clocks) or \
                        now - first_landed >= self.idle_timeout_s:
                    self._start(now)
            if self.started.is_set():
                for name, lane in self.lanes.items():
                    self._idle(lane, fresh[name], now)
            if self._reached_until():
                return
            if not any(lane.more for lane in self.lanes.values()):
                self.halt.wait(self.poll_s)

    def _warn_unread(self) -> None:
        """Files that landed after the input ended (a resumed run whose streams had reached
        `until`, by their readings or by the idle clock) are not read: say so."""
        import sys

        for name, lane in self.lanes.items():
            unread = [p.name for p in list_parts(lane.data) if p.name not in lane.seen]
            if unread:
                print(f"fedq: stream {name}: {len(unread)} file(s) landed in {lane.data} after "
                      f"its input ended at {lane.ing.clock} (--until, or the idle clock) and "
                      f"are not read: {', '.join(unread[:3])}{' ...' if len(unread) > 3 else ''}",
                      file=sys.stderr)

    def _read(self, lane: Lane) -> bool | None:
        """Validate the files new in the lane's directory; whether there were any (None:
        halted meanwhile)."""
        fresh = [p for p in list_parts(lane.data) if p.name not in lane.seen]
        if lane.ing.partial is not None:  # a stopped run's input split across spool files
            fresh.sort(key=lambda p: p.name != lane.ing.partial)  # first (stable)
            if not fresh or fresh[0].name != lane.ing.partial:
                raise FileNotFoundError(
                    f"the spool in {lane.ing.spool} ends in the middle of input file "
                    f"{lane.ing.partial}, which is no longer in {lane.data}: put it back, or "
                    "start afresh (--fresh)")
        # a pass takes a bounded number (a burst landed at once: the run starts, and every
        # stream is read, after its first files, not after all of them)
        lane.more = len(fresh) > FILES_PER_PASS
        for p in fresh[:FILES_PER_PASS]:
            if self.halt.is_set():
                return None
            lane.ing.add(p)
            lane.ing.save()
            lane.seen.add(p.name)
            lane.landed = lane.idled = time.monotonic()
            lane.base = lane.ing.clock
        return bool(fresh)

    def _start(self, now: float) -> None:
        """The run starts: a stream without a reading starts its clock at the first
        reading of the others (module doc)."""
        first = min(lane.ing.res.first_ts for lane in self.lanes.values()
                    if lane.ing.res.first_ts is not None)
        for lane in self.lanes.values():
            if lane.ing.clock is None:
                lane.ing.start_clock(first)
                lane.ing.save()
                lane.base, lane.landed, lane.idled = lane.ing.clock, now, now
        self.started.set()

    def _idle(self, lane: Lane, fresh: bool, now: float) -> None:
        if (not fresh and lane.base is not None and now - lane.landed >= self.idle_timeout_s
                and now - lane.idled >= self.idle_timeout_s):
            lane.ing.idle_to(lane.base + dt.timedelta(seconds=now - lane.landed))
            lane.ing.save()
            lane.idled = now
