"""The console progress of long commands (federation/cli/progress.py), without Spark."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from federation.cli.progress import ConsoleProgress
from federation.runtime.progress import RunProgress, as_progress
from federation.runtime.result import BatchMetrics


def _metrics(done: int) -> BatchMetrics:
    return BatchMetrics(stage=0, batch=done, rows_in=10, result_rows=1, transfer_s=0.0,
                        db_s=0.0, handler_s=0.0, wall_s=0.1, slides=1, t=0.1, watermark="",
                        data=True, event_seconds_done=done, backlog_s=10 - done,
                        rho_so_far=2.5)


def test_plain_lines_name_each_phase_and_never_fall_silent():
    out = io.StringIO()
    with ConsoleProgress(every_s=0.3, console=Console(file=out, width=200)) as p:
        p.phase("starting Spark")
        time.sleep(1.3)  # a phase that blocks: the ticker must still speak
        p.phase("micro-batches", total=10, unit="event seconds")
        for k in range(1, 5):
            p.batch(_metrics(k))
            time.sleep(0.1)
    lines = out.getvalue().splitlines()
    spark = [ln for ln in lines if "starting Spark" in ln]
    assert len(spark) >= 4, lines  # at the start, then every 0.3 s for 1.3 s
    assert spark[0].startswith("[    0 s] starting Spark") and "/" not in spark[0]
    last = lines[-1]
    assert re.search(r"micro-batches · 4/10 event seconds · stage 0 batch 4 · rho 2\.50 "
                     r"· backlog 6 s · done$", last), lines


def test_a_terminal_gets_live_bars():
    out = io.StringIO()
    with ConsoleProgress(console=Console(file=out, force_terminal=True, width=150)) as p:
        assert p.live
        p.phase("generating", total=4, unit="event seconds")
        for k in range(5):
            p.advance(k)
    text = out.getvalue()
    assert "generating" in text and "4/4" in text and "\x1b[" in text


def test_a_callable_receives_the_batches_only():
    seen = []
    p = as_progress(seen.append)
    p.phase("reading input", total=3, unit="files")
    p.advance(1)
    p.batch(_metrics(1))
    assert [m.batch for m in seen] == [1]
    assert type(as_progress(None)) is RunProgress
