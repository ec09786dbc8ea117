"""What a run reports while it works: its phases, how far each is, and every micro-batch.

The runtime calls a `RunProgress`; the CLI shows it (federation/cli/progress.py, with rich).
A plain callable given as `progress` receives the micro-batches only, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from federation.runtime.result import BatchMetrics


class RunProgress:
    """A run's observer; every method is optional to override (the default does nothing).

    Phases of `execute`, in order: "reading input" (files; a following run: "waiting for
    the first file"), "starting Spark", "setting up the stages", "micro-batches" (event
    seconds; following: no total), "finishing windows", "writing output"."""

    def phase(self, name: str, total: int | None = None, unit: str = "") -> None:
        """A new phase starts; `total` steps of `unit` when known."""

    def advance(self, done: int, total: int | None = None) -> None:
        """`done` steps of the current phase are finished."""

    def batch(self, m: BatchMetrics) -> None:
        """A micro-batch of one stage finished."""


class _Callback(RunProgress):
    def __init__(self, fn: Callable[[BatchMetrics], None]):
        self.fn = fn

    def batch(self, m: BatchMetrics) -> None:
        self.fn(m)


def as_progress(p: RunProgress | Callable[[BatchMetrics], None] | None) -> RunProgress:
    """`p` as a RunProgress: None reports nothing, a callable receives the micro-batches."""
    if p is None:
        return RunProgress()
    if isinstance(p, RunProgress):
        return p
    if not callable(p):
        raise TypeError(f"progress: a RunProgress or a callable, got {type(p).__name__}")
    return _Callback(p)
