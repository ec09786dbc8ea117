"""Driving a run: every stage's streaming query processes its input in stage order, then
the stage's DB-ops finish their windows (drain); a wall-time budget stops them all."""

from __future__ import annotations

import sys
import threading

from federation.runtime.microbatch import Execution
from federation.runtime.progress import RunProgress


def drive(ex: Execution, budget_s: float | None, drain: bool, prog: RunProgress) -> bool:
    """Process every stage's input in stage order; True when the budget stopped the run."""
    stages = ex.staged.stages
    truncated = threading.Event()
    timer = None
    if budget_s is not None:
        def stop_all() -> None:
            truncated.set()
            stop_queries(stages)

        timer = threading.Timer(budget_s, stop_all)
        timer.daemon = True
        timer.start()
    try:
        for st in stages:
            if st.query is None or truncated.is_set():
                continue
            if st.index:
                prog.phase(f"micro-batches (stage {st.index})")
            try:
                st.query.processAllAvailable()
            except Exception:
                if truncated.is_set() or ex.halt.is_set():
                    break  # a budget, or a halt while a following run drains its end
                if not (st.index == 0 and ex.stopping.is_set()):
                    raise
            if truncated.is_set() or ex.halt.is_set():
                break
            exc = st.query.exception()
            if exc is not None and not (st.index == 0 and ex.stopping.is_set()):
                raise RuntimeError(f"stage {st.index} failed: {exc}")
            if drain:
                prog.phase("finishing windows" + (f" (stage {st.index})" if st.index else ""))
                ex.drain(st.index)
    finally:
        if timer is not None:
            timer.cancel()
        for st in stages:
            if st.query is not None:
                st.query.stop()
    return truncated.is_set()


def drive_following(ex: Execution, follower, halt: threading.Event, prog: RunProgress) -> bool:
    """A following run: the stages work on the spool as the follower grows it, until
    `halt` (then the micro-batch in progress finishes and commits, and no other starts: a
    resumed run goes on from there) or until the input ends (`until`: then as a run over a
    directory, every window is finished). Returns False (no budget)."""
    stages = ex.staged.stages
    while not halt.is_set():
        ended = follower.ended.wait(0.25)  # at once when it ends (a migration waits on it)
        if halt.is_set():
            break
        if follower.error is not None:
            raise follower.error
        for st in stages:
            exc = None if st.query is None else st.query.exception()
            if exc is not None:
                raise RuntimeError(f"stage {st.index} failed: {exc}")
        if ended:  # the DB-ops know their last instant (when_ended)
            return drive(ex, None, True, prog)
    follower.stop()
    ex.halt.set()
    with ex.lock:  # the micro-batch in progress has committed
        pass
    stop_queries(stages)  # a batch started after the halt fails its query: reported only
    return False


def stop_queries(stages) -> None:
    """Stop every stage's query, best effort (an error is reported, not raised)."""
    for st in stages:
        if st.query is not None:
            try:
                st.query.stop()
            except Exception as e:  # noqa: BLE001 - stopping is best effort
                print(f"fedq: stopping stage {st.index}: {e}", file=sys.stderr)
