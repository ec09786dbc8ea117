"""Progress on the console from the first second of a long command, drawn by rich.

On a terminal: rich's live progress bars (phase, done/total, elapsed, time left), refreshed
by rich's own thread, so a phase that blocks (the JVM starting, Spark planning its first
micro-batch) still shows its clock moving. Elsewhere (a pipe, a log file, CI): one plain line
when a phase starts and then at least every `every_s` seconds, with the same numbers (rich
keeps the counts and estimates the time left), so that no phase is silent.
"""

from __future__ import annotations

import sys
import threading
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from federation.runtime.progress import RunProgress
from federation.runtime.result import BatchMetrics


class ConsoleProgress(RunProgress):
    """`with ConsoleProgress() as p: run(..., progress=p)`; also `p.phase(...)` and
    `p.advance(...)` for a command's own phases (generating data, importing files)."""

    def __init__(self, *, every_s: float = 5.0, console: Console | None = None,
                 prefix: str = "") -> None:
        self.console = console or Console(file=sys.stderr)
        self.live = self.console.is_terminal
        self.every_s = every_s
        self.prefix = prefix
        self.bars = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
            MofNCompleteColumn(), TextColumn("{task.fields[unit]}"),
            TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
            TextColumn("left"), TimeRemainingColumn(),
            console=self.console, disable=not self.live, refresh_per_second=4)
        self.task: TaskID | None = None
        self.t0 = time.monotonic()
        self.last_line = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ticker: threading.Thread | None = None

    # --- context -------------------------------------------------------------------------
    def __enter__(self) -> ConsoleProgress:  # noqa: PYI034 - Self needs Python 3.11
        self.t0 = time.monotonic()
        if self.live:
            self.bars.start()
        else:
            self.ticker = threading.Thread(target=self._tick, name="fedq-progress", daemon=True)
            self.ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        with self.lock:
            self._finish_task()
            if not self.live and self.task is not None and exc[0] is None:
                self._line("done")
        if self.ticker is not None:
            self.ticker.join(timeout=2)
        if self.live:
            self.bars.stop()

    # --- RunProgress ---------------------------------------------------------------------
    def phase(self, name: str, total: int | None = None, unit: str = "") -> None:
        with self.lock:
            self._finish_task()
            self.task = self.bars.add_task(f"{self.prefix}{name}", total=total, unit=unit,
                                           info="", counted=True, start=True)
            if not self.live:
                self._line("")

    def advance(self, done: int, total: int | None = None) -> None:
        with self.lock:
            if self.task is None:
                return
            if total is not None:
                self.bars.update(self.task, total=total)
            self.bars.update(self.task, completed=done)

    def batch(self, m: BatchMetrics) -> None:
        info = f"stage {m.stage} batch {m.batch}"
        if m.rho_so_far is not None:
            info += f" · rho {m.rho_so_far:.2f} · backlog {m.backlog_s} s"
        with self.lock:
            if self.task is None:
                return
            self.bars.update(self.task, info=info)
            if m.event_seconds_done is not None:
                self.bars.update(self.task, completed=m.event_seconds_done)

    # --- plain lines (not a terminal) ----------------------------------------------------
    def _finish_task(self) -> None:
        if self.task is None:
            return
        t = self._current()
        if t.total is None:  # a phase without steps: its bar shows it complete
            self.bars.update(self.task, total=1, completed=1, counted=False)
        self.bars.stop_task(self.task)

    def _current(self):
        """The current phase's rich Task (its counts, fields and time-left estimate)."""
        return next(t for t in self.bars.tasks if t.id == self.task)

    def _line(self, note: str) -> None:
        """One plain line for the current phase (the lock is held)."""
        t = self._current()
        parts = [t.description]
        if not t.fields["counted"]:
            pass
        elif t.total is not None:
            parts.append(f"{int(t.completed)}/{int(t.total)} {t.fields['unit']}".rstrip())
        elif t.completed:
            parts.append(f"{int(t.completed)} {t.fields['unit']}".rstrip())
        if t.fields.get("info"):
            parts.append(t.fields["info"])
        if note != "done" and t.total and t.completed and t.time_remaining is not None:
            parts.append(f"~{t.time_remaining:.0f} s left")
        if note:
            parts.append(note)
        el = time.monotonic() - self.t0
        self.console.print(f"[{el:5.0f} s] " + " · ".join(parts), highlight=False,
                           soft_wrap=True)
        self.last_line = time.monotonic()

    def _tick(self) -> None:
        while not self.stop.wait(min(0.5, self.every_s / 3)):
            with self.lock:
                if self.task is not None and time.monotonic() - self.last_line >= self.every_s:
                    self._line("")
