"""A run's summary from its micro-batches: rho over the whole run, at steady state and with
the windows full, and what was dead-lettered, moved and predicted.

The summary is reporting: it runs after the results are durable in their sinks and output
(runtime/execute.py), and a part of it that fails (the memory model's prediction, DuckDB's
accounting, rho) becomes a warning in it (`RunSummary.warnings`, counted in
`reporting_failures`), never a lost result or a traceback (`safe_summary`)."""

from __future__ import annotations

import datetime as dt
import math
import statistics
import traceback
from collections.abc import Callable
from typing import TypeVar

from federation.physical import PhysicalPlan
from federation.runtime.microbatch import Execution
from federation.runtime.result import PredictedCost, RunSummary

T = TypeVar("T")


class ReportingWarning(UserWarning):
    """A part of a run's report (its summary) that could not be computed; the results
    were written before it."""


def safe_summary(ex: Execution, plan: PhysicalPlan, result_rows: int, wall: float,
                 truncated: bool, opt, max_range: float, slide_s: float,
                 predicted) -> RunSummary:
    """`run_summary`, or where it fails as a whole, the counts alone with the failure as
    a warning (what a run computed is never lost to its report)."""
    warnings: list[str] = []
    try:
        s = run_summary(ex, plan, result_rows, wall, truncated, opt.warmup_batch_s, opt.drain,
                        opt.seconds_per_batch, max_range, slide_s, predicted, warnings)
    except Exception as e:  # noqa: BLE001 - reporting: a warning, the results are written
        nan = float("nan")
        ing = ex.ingest
        s = RunSummary(
            query=plan.logical.root.name, placement=plan.placement_string,
            db_ops=[c.id + ":" + "+".join(c.members) for c in plan.db_ops],
            stages=len(ex.staged.stages), result_rows=result_rows, event_seconds=ing.files,
            input_rows=ing.rows_in, wall_s=wall, rho=nan, rho_steady=nan,
            rho_windows_full=nan, warmup_batches=0, warmup_batch_s=opt.warmup_batch_s,
            drained=opt.drain, achieved_rate_tps=nan, truncated=truncated,
            data_batches=sum(1 for m in ex.metrics if m.stage == 0 and m.data),
            dead_lettered=ing.rows_dead, dead_by_reason=dict(ing.dead),
            files_quarantined=ing.quarantined, deadletter_dir=str(ing.deadletter_dir),
            predicted=None, db_memory_bytes={}, warnings=warnings,
            reporting_failures=len(warnings))
        s.warn(f"summary unavailable: {_failure(e)}")
    return s


def _failure(e: BaseException) -> str:
    """'KeyError: 'v2' (costmodel/memory.py:165)': the error and where it was raised."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" ({'/'.join(tb[-1].filename.split('/')[-2:])}:{tb[-1].lineno})" if tb else ""
    return f"{type(e).__name__}: {e}{where}"


def reported(warnings: list[str], what: str, fn: Callable[[], T], default: T) -> T:
    """`fn()`, or `default` with "`what` unavailable: <error>" in `warnings` when it fails."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reporting: a warning, the results are written
        warnings.append(f"{what} unavailable: {_failure(e)}")
        return default


def run_summary(ex: Execution, plan: PhysicalPlan, result_rows: int, wall: float,
             truncated: bool, warmup_batch_s: int | None, drain: bool, seconds_per_batch: int,
             max_range: float, slide_s: float, predicted,
             warnings: list[str] | None = None) -> RunSummary:
    """The summary; what fails of the memory figures is a line in `warnings` (`reported`)."""
    warnings = [] if warnings is None else warnings
    ingest, metrics = ex.ingest, ex.metrics
    ff_batches = ingest.warmup_files
    data_batches = [m for m in metrics if m.stage == 0 and m.data]
    # per-batch wall time of the regular batches (after a fast-forwarded warm-up, if any)
    regular = data_batches[ff_batches:]
    steady = [m.wall_s for m in regular[3:]] or [m.wall_s for m in regular]
    per_batch = statistics.median(steady) if steady else float("nan")
    secs_per_batch = seconds_per_batch
    if not steady and data_batches:  # stopped within a fast-forwarded warm-up
        steady = [m.wall_s for m in data_batches[1:]] or [data_batches[0].wall_s]
        per_batch = statistics.median(steady)
        secs_per_batch = warmup_batch_s or 1
    # rho after the windows are full: event seconds from then on over the wall time until
    # every stage has processed the last event second; the end-of-input flush (the windows
    # that close after the data end, all at once) is not steady-state work
    warm = ff_batches if ff_batches else round(max_range / seconds_per_batch)
    last = ingest.last_ts
    end = next((i for i, m in enumerate(data_batches)
                if last is not None and m.clock is not None and m.clock >= last),
               len(data_batches) - 1)
    t_end = data_batches[end].t if data_batches else wall
    for st in ex.staged.stages[1:]:  # re-entry stages: their clock lags the DB-op by a slide
        near = [m.t for m in metrics if m.stage == st.index and m.clock is not None
                and last is not None and m.clock >= last - dt.timedelta(seconds=2 * slide_s)]
        t_end = max(t_end, near[0] if near else wall)
    if end > warm and not truncated:
        rho_full = (end - warm) * seconds_per_batch / max(t_end - data_batches[warm].t, 1e-9)
    else:
        rho_full = float("nan")
    nan = float("nan")
    return RunSummary(
        query=plan.logical.root.name,
        placement=plan.placement_string,
        db_ops=[c.id + ":" + "+".join(c.members) for c in plan.db_ops],
        stages=len(ex.staged.stages),
        result_rows=result_rows,
        event_seconds=ingest.files,
        input_rows=ingest.rows_in,
        ingest_cpu_s=ingest.cpu_s,
        ingest_rows_per_cpu_s=ingest.rows_in / ingest.cpu_s if ingest.cpu_s else None,
        wall_s=wall,
        rho=ingest.files / wall if wall else nan,
        rho_steady=secs_per_batch / per_batch if per_batch and not math.isnan(per_batch)
        else nan,
        rho_windows_full=rho_full,
        warmup_batches=warm,
        warmup_batch_s=warmup_batch_s,
        drained=drain,
        achieved_rate_tps=ingest.rows_ok / wall if wall else nan,
        truncated=truncated,
        stopped_at=ex.stop_at,
        data_batches=len(data_batches),
        dead_lettered=ingest.rows_dead,
        dead_by_reason=dict(ingest.dead),
        files_quarantined=ingest.quarantined,
        deadletter_dir=str(ingest.deadletter_dir),
        predicted=None if predicted is None else PredictedCost(
            C_b=predicted.C_b, C_u=predicted.C_u,
            feasible=predicted.is_feasible),
        db_memory_bytes=reported(warnings, "DuckDB's measured memory", lambda: {
            op_id: m.memory_bytes() for op_id, m in ex.migs.items()}, {}),
        peak_state=reported(warnings, "peak state", lambda: largest_state(ex.metrics), {}),
        predicted_memory=reported(warnings, "predicted memory", lambda: predicted_memory(plan),
                                  {}),
        moved={op_id: m.moved for op_id, m in ex.migs.items() if m.moved},
        spe_capacity=plan.chosen_for,
        warnings=warnings, reporting_failures=len(warnings),  # evaluated last
    )


def largest_state(metrics) -> dict[str, int]:
    """The largest state measured in any of these batches of each stage, summed over the
    stages (a run's peak: all its batches)."""
    out = {"spark_rows": 0, "spark_bytes": 0, "db_bytes": 0}
    for stage in {m.stage for m in metrics}:
        ms = [m for m in metrics if m.stage == stage]
        for key, field in (("spark_rows", "spark_state_rows"),
                           ("spark_bytes", "spark_state_bytes"), ("db_bytes", "db_memory_bytes")):
            out[key] += max((getattr(m, field) or 0 for m in ms), default=0)
    return out


def predicted_memory(plan: PhysicalPlan, profile=None) -> dict[str, float]:
    """The memory model's state per engine for this plan (costmodel/memory.py), under
    `profile` (default: the user's calibrated one, else the shipped one)."""
    from costmodel.memory import plan_memory
    from costmodel.profile import load_profile

    m = plan_memory(plan, profile or load_profile())
    return {"spark_rows": sum(s.rows for s in m.spe.values()), "spark_bytes": m.spe_bytes,
            "db_rows": sum(s.rows for s in m.db.values()), "db_bytes": m.db_bytes}
