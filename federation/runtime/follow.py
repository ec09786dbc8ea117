"""Following a landing directory: input files are validated into the spool as they land,
while Spark and DuckDB work on the spool (docs/architecture.md, "Live streams").

The writer's convention: write a file under a name that does not match `part-*.parquet`
(or in another directory of the same file system), then rename it into place; a file is
read once, when it first appears under its final name (names in event-time order, as a
data directory's; a file landing after a later one is read all the same, and the lateness
rule decides on its rows).

A quiet stream still closes its windows: when no file has landed for `idle_timeout_s` of
wall time, the stream's clock moves on with wall time (the event time of the last reading
plus the wall seconds since it landed), once per `idle_timeout_s`; a reading that lands
later below that clock minus the allowed lateness is late (dead-lettered), as any late
reading.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

from federation.parts import list_parts
from federation.runtime.ingest import Ingestor


class Follower:
    """A thread that follows `data_dir` into the ingestor's spool until `stop()`, or until
    the stream's clock reaches `until` (then the input ends there: a flush punctuation
    `flush_after_s` ahead closes every window, as at the end of a directory)."""

    def __init__(self, data_dir: Path, ingestor: Ingestor, *, idle_timeout_s: float = 5.0,
                 until: dt.datetime | None = None, flush_after_s: float = 600.0,
                 poll_s: float = 0.2) -> None:
        self.data = Path(data_dir)
        self.ing = ingestor
        self.idle_timeout_s = idle_timeout_s
        self.until = until
        self.flush_after_s = flush_after_s
        self.poll_s = poll_s
        self.halt = threading.Event()
        self.ended = threading.Event()  # the input ended (`until`) or the thread failed
        self.started = threading.Event()  # the spool holds a reading: the life is known
        self.error: BaseException | None = None
        #: what fills the landing directory in this process (an MQTT subscriber), if any:
        #: its failure is the follower's, and it stops first
        self.feeder = None
        self._thread = threading.Thread(target=self._main, name="fedq-follow", daemon=True)

    def start(self) -> Follower:
        if self.ing.res.first_ts is not None:
            self.started.set()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Read no more files (the one being validated is finished first)."""
        if self.feeder is not None:
            self.feeder.stop()
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
        """True when the clock reached `until`: the input ends (the flush written once)."""
        ing = self.ing
        if self.until is None or ing.clock is None or ing.clock < self.until:
            return False
        if not ing.finished:
            ing.finish(self.flush_after_s)
        self.started.set()
        self.ended.set()
        return True

    def _follow(self) -> None:
        ing = self.ing
        seen = set(ing.inputs_read)  # a resumed spool's inputs (from its metadata)
        if self._reached_until():  # a resumed run whose input had ended already
            return
        landed = time.monotonic()  # wall time of the last file (or of the start)
        base = ing.clock  # the clock when the last file landed
        idled = landed
        while not self.halt.is_set():
            if self.feeder is not None and self.feeder.error is not None:
                raise self.feeder.error
            fresh = [p for p in list_parts(self.data) if p.name not in seen]
            for p in fresh:
                if self.halt.is_set():
                    return
                ing.add(p)
                ing.save()
                seen.add(p.name)
                landed = idled = time.monotonic()
                base = ing.clock
                if ing.clock is not None:
                    self.started.set()
                if self._reached_until():
                    return
            now = time.monotonic()
            if (not fresh and base is not None and now - landed >= self.idle_timeout_s
                    and now - idled >= self.idle_timeout_s):
                ing.idle_to(base + dt.timedelta(seconds=now - landed))
                ing.save()
                idled = now
            self.halt.wait(self.poll_s)
