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
            for st in stages:
                if st.query is not None:
                    try:
                        st.query.stop()
                    except Exception as e:  # noqa: BLE001 - stopping is best effort
                        print(f"fedq: stopping stage {st.index}: {e}", file=sys.stderr)

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
                if truncated.is_set():
                    break
                if not (st.index == 0 and ex.stopping.is_set()):
                    raise
            if truncated.is_set():
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
