"""`execute`: run a given physical plan over a directory of part files (docs/architecture.md).

Ingest validates the input into a spool; the plan is cut into stages (stages.py), each a
Spark streaming query whose foreachBatch is a BatchHandler (microbatch.py) feeding the MIGs
(mig.py); at the end of input the MIGs finish every remaining slide; the summary and the
result rows are returned (result.py). The runtime never re-plans: placement, DB-ops and
their SQL come with the plan.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pyarrow.parquet as pq

from federation.errors import OutputError
from federation.instants import extent_of, first_instant, last_instant
from federation.logical import Join, Node, Window
from federation.physical import PhysicalPlan
from federation.runtime.drive import drive
from federation.runtime.handoff import Handoff
from federation.runtime.ingest import IngestResult, prepare_input
from federation.runtime.microbatch import BatchHandler, Execution, ReentrySpool
from federation.runtime.mig import MigRuntime, mig_resources
from federation.runtime.options import check_arguments, check_output, output_path, work_directory
from federation.runtime.progress import RunProgress, as_progress
from federation.runtime.recovery import RUN_FILE, ResultParts, StageLog, claim, run_identity
from federation.runtime.result import BatchMetrics, RunResult, RunSummary
from federation.runtime.stages import StageBuilder, StagedPlan
from federation.runtime.summary import run_summary


class _ResumeFailed(Exception):
    """Spark failed on a resumed run (its checkpoint could not be used)."""


def execute(plan: PhysicalPlan, data: str | Path, **kw) -> RunResult:
    """Run `plan` over the part files of `data` (see `_execute` for the options).

    A resumed run whose Spark queries fail (a checkpoint Spark cannot use after a kill)
    starts over from the spool instead, saying so on stderr and keeping Spark's error in
    `<work-dir>/resume-failure.txt`: a fresh run is always right, only slower."""
    try:
        return _execute(plan, data, **kw)
    except _ResumeFailed as e:
        cause = str(e.__cause__).strip().splitlines()
        first = next((ln for ln in cause if "Exception" in ln or "Error" in ln),
                     cause[0] if cause else repr(e.__cause__))
        print(f"fedq: could not resume ({first[:300]}); starting over", file=sys.stderr)
        return _execute(plan, data, **{**kw, "fresh": True})


def _execute(
    plan: PhysicalPlan,
    data: str | Path,
    *,
    seconds_per_batch: int = 1,
    allowed_lateness_s: float = 0.0,
    output: str | Path | None = None,
    overwrite: bool = False,
    work_dir: str | Path | None = None,
    realtime: bool = False,
    max_files: int | None = None,
    spark=None,
    progress: RunProgress | Callable[[BatchMetrics], None] | None = None,
    domains: Mapping[str, set] | None = None,
    budget_s: float | None = None,
    warmup_batch_s: int | None = None,
    drain: bool = True,
    event_horizon_s: float = 3600.0,
    predicted=None,
    fresh: bool = False,
    handoff: Handoff | None = None,
) -> RunResult:
    """Run `plan` over the part files of `data`.

    A `work_dir` that holds an interrupted run of the same plan is resumed where its last
    micro-batch committed (federation/runtime/recovery.py); `fresh=True` discards it first.

    `warmup_batch_s` fast-forwards the warm-up: the first (largest window range) event
    seconds go in micro-batches of that many seconds, the rest one `seconds_per_batch` each.
    Results are the same; only the wall time until the windows are full shrinks.
    `drain=False` (throughput measurement only) skips the end of input: the windows that
    would close after the last event second are not computed, so the result is incomplete.
    `budget_s` stops the run after that many seconds of wall time (the summary says so).
    `predicted`: the plan's cost vector (C_b, C_u), recorded in the summary beside rho.
    `handoff`: one segment of an adaptive run (start and stop instants, carried state,
    watch, prepared spool: federation/runtime/handoff.py).
    `progress`: a RunProgress told every phase and micro-batch (federation/runtime/progress.py),
    or a callable receiving the micro-batches.
    """
    prog = as_progress(progress)
    h = handoff or Handoff()
    check_arguments(seconds_per_batch=seconds_per_batch, allowed_lateness_s=allowed_lateness_s,
                    event_horizon_s=event_horizon_s)
    why = check_output(output, overwrite)
    if why:
        raise OutputError(f"output: {why}")
    if warmup_batch_s is not None and seconds_per_batch != 1:
        raise ValueError("warmup_batch_s needs seconds_per_batch=1, "
                         f"got seconds_per_batch={seconds_per_batch}")
    work = work_directory(work_dir)
    lg = plan.logical
    windows = [n for n in lg.nodes.values() if isinstance(n, Window)]
    stream = windows[0].stream
    slide_s = windows[0].slide_s  # one slide per query (checked where the query is built)
    max_range = max((w.range_s or 0.0) for w in windows)
    extent_s = extent_of(windows)
    if domains is None:
        domains = {c: set(v) for c, v in stream.domains.items()}

    identity = run_identity(plan, seconds_per_batch, allowed_lateness_s, warmup_batch_s, drain)
    identity.update({"data": str(Path(data).resolve()), "max_files": max_files,
                     "start_at": str(h.start_at), "stop_at": str(h.stop_at)})
    resuming = _claim_work(work, identity, fresh)
    ff_s = math.ceil(max_range) if warmup_batch_s else 0
    flush_s = end_flush_s(lg.nodes.values())
    if resuming:  # the spool is complete and Spark's checkpoints refer to it
        ingest = IngestResult.model_validate_json((work / "input" / "ingest.json").read_text())
    elif h.prepared is not None:
        ingest = h.prepared
        (work / "input").mkdir(parents=True, exist_ok=True)
        (work / "input" / "ingest.json").write_text(ingest.model_dump_json(indent=2))
    else:
        prog.phase("reading input", unit="files")
        ingest = prepare_input(data, work / "input", stream, progress=prog.advance,
                               allowed_lateness_s=allowed_lateness_s,
                               flush_after_s=flush_s if drain else None,
                               max_files=max_files, domains=domains, fast_forward_s=ff_s,
                               fast_forward_batch=warmup_batch_s or 1, tick_s=slide_s,
                               horizon_s=event_horizon_s)
    life = None if ingest.first_ts is None else (
        first_instant(ingest.first_ts, slide_s), last_instant(ingest.last_ts, extent_s, slide_s))
    if life is not None and h.start_at is not None:
        life = (h.start_at, life[1])
    ff_batches = ingest.warmup_files
    ff_seconds = min(ff_s, ingest.files)

    def event_seconds_done(batches: int) -> int:
        if batches <= ff_batches:
            return min(ff_seconds, batches * (warmup_batch_s or 1))
        return min(ff_seconds + (batches - ff_batches) * seconds_per_batch, ingest.files)

    staged = StagedPlan.of(plan)
    reentry_dirs = {}
    for c in plan.db_ops:
        if c is not staged.root_db_op:
            reentry_dirs[c.id] = work / "reentry" / c.id
            reentry_dirs[c.id].mkdir(parents=True, exist_ok=True)
    threads, memory = mig_resources(len(plan.db_ops))
    migs = {c.id: MigRuntime(c, slide_s, allowed_lateness_s, threads=threads,
                             memory_limit=memory, plan_nodes=lg.nodes, life=life,
                             state_path=str(work / "state" / f"{c.id}.duckdb"),
                             carry=h.carry.get(c.id), stop_at=h.stop_at)
            for c in plan.db_ops}
    ex = Execution(staged, migs, ResultParts(work / "results", staged.result_columns),
                   ReentrySpool(staged, reentry_dirs), ingest, allowed_lateness_s,
                   event_seconds_done, prog.batch, watch=h.watch,
                   tail_s=_spark_tail_s(plan, seconds_per_batch))
    resumed_at = None
    for st in staged.stages:
        log = ex.stage_logs[st.index] = StageLog(work / "state" / f"stage{st.index}.json")
        saved = log.load() if resuming else None
        if saved:
            st.clock, st.last_done = saved["clock"], saved["batch"]
            st.data_batches = saved["data_batches"]
            if st.index == 0:
                resumed_at = (saved["batch"] + 1, min(saved["clock"].values(), default=None))
    if resuming:
        b, t = resumed_at or (0, None)
        say_resume = f"fedq: resuming {lg.root.name} in {work} at batch {b}"
        print(say_resume + (f", event time {t}" if t else "") , file=sys.stderr)

    from spe.pipeline import start_query
    from spe.session import get_spark

    if spark is None:
        prog.phase("starting Spark")
        spark = get_spark()
    chk_root = work / "checkpoints"  # kept for a resumed run (Spark's exactly-once)
    builder = StageBuilder(spark, staged, stream, ingest.spool_dir, reentry_dirs,
                           seconds_per_batch, round(allowed_lateness_s * 1000), extent_s, slide_s)
    for st in staged.stages:
        builder.build(st)
    prog.phase("micro-batches", total=ingest.files, unit="event seconds")
    ex.t_start = time.perf_counter()
    for st in staged.stages:
        if st.outputs:
            st.query = start_query(st.df, BatchHandler(ex, st), str(chk_root / f"stage{st.index}"),
                                   f"fedq_{lg.root.name}_s{st.index}_{id(st)}",
                                   seconds_per_batch if realtime else None)
    try:
        truncated = drive(ex, budget_s, drain, prog)
    except Exception as e:
        if not resuming:
            raise
        for m in migs.values():
            m.close()
        (work / "resume-failure.txt").write_text(f"{type(e).__name__}: {e}")
        raise _ResumeFailed() from e
    wall = time.perf_counter() - ex.t_start
    rows = ex.collector.table()
    summary = run_summary(ex, plan, rows.num_rows, wall, truncated, warmup_batch_s, drain,
                       seconds_per_batch, max_range, slide_s, predicted)
    for m in migs.values():
        m.close()
    _write_results(work, rows, summary, output, prog)
    return RunResult(rows, ex.metrics, summary, plan, ingest)


def _claim_work(work: Path, identity: dict, fresh: bool) -> bool:
    """Claim the work directory for this run; True when it resumes an interrupted run of
    the same identity (recovery.py), else everything of an earlier run is removed."""
    if fresh:
        (work / RUN_FILE).unlink(missing_ok=True)
    resuming = claim(work, identity)
    if not resuming:  # a new run: nothing of an earlier one may leak into it
        for sub in ("input", "checkpoints", "state", "results", "reentry"):
            shutil.rmtree(work / sub, ignore_errors=True)
        (work / "summary.json").unlink(missing_ok=True)
    (work / "state").mkdir(exist_ok=True)
    return resuming


def _write_results(work: Path, rows, summary: RunSummary, output, prog: RunProgress) -> None:
    """summary.json in the work directory, and the result rows at `output` if asked."""
    (work / "summary.json").write_text(summary.model_dump_json(indent=2))
    if output is not None:
        prog.phase("writing output")
        path = output_path(Path(output))
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, path)
        summary.output = str(path)
        (work / "summary.json").write_text(summary.model_dump_json(indent=2))


def _holdback(nodes: Iterable[Node]) -> tuple[float, float, int]:
    """The largest window range, the slide, and the joins in a plan's nodes: Spark holds
    back the watermark below a join of window rows (spe.translate._rows_join) by the
    window's range (a bound: only joins of rows do)."""
    nodes = list(nodes)
    windows = [n for n in nodes if isinstance(n, Window)]
    joins = sum(1 for n in nodes if isinstance(n, Join))
    return max((w.range_s or 0.0) for w in windows), windows[0].slide_s, joins


def end_flush_s(nodes: Iterable[Node]) -> float:
    """How far after the last reading the end-of-input punctuation goes so that every
    window closes in every engine: the largest range, once more per join of window rows
    (Spark's watermark hold-back), and ten slides."""
    max_range, slide_s, joins = _holdback(nodes)
    return max_range * (1 + joins) + 10 * slide_s


def _spark_tail_s(plan: PhysicalPlan, seconds_per_batch: int) -> float:
    """How far past a migration's instant stage 0 must go for Spark to emit its own results
    of the instants before it: 0 when Spark keeps no window state at stage 0; else a few
    batches' event time (Spark moves its watermark a batch after the data), and the range
    of every join of window rows below (Spark holds the watermark back by it)."""
    from federation.runtime.carry import spark_window_state

    if not spark_window_state(plan):
        return 0.0
    max_range, slide_s, joins = _holdback(plan.logical.nodes.values())
    return max_range * joins + 3 * max(slide_s, seconds_per_batch)
