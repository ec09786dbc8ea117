"""What a run returns and writes: its summary and batch metrics (typed records), the
result rows, and the checks of its arguments and output location made before any work."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from federation.conventions import TAU


class BatchMetrics(BaseModel):
    """One micro-batch of one stage, as the batch handler measured it."""

    model_config = ConfigDict(extra="forbid")

    stage: int
    batch: int
    rows_in: int
    result_rows: int
    transfer_s: float
    db_s: float
    handler_s: float
    wall_s: float
    slides: int
    t: float
    watermark: str
    clock: Any = None  # datetime of the stage's clock, None before the first punctuation
    data: bool
    event_seconds_done: int | None = None
    backlog_s: int | None = None
    rho_so_far: float | None = None
    #: DuckDB's own accounting of the stage's MIGs, every 10th batch (None in between)
    db_memory_bytes: int | None = None
    #: rows and bytes in the stage's Spark state stores after the batch before, every
    #: 10th batch (Spark's own metrics: spe/pipeline.state_of)
    spark_state_rows: int | None = None
    spark_state_bytes: int | None = None


class PredictedCost(BaseModel):
    C_b: float
    C_u: float
    feasible: bool


class RunSummary(BaseModel):
    """The summary of a run (written as summary.json in the work directory)."""

    model_config = ConfigDict(extra="forbid")

    query: str
    placement: str
    db_ops: list[str]
    stages: int
    result_rows: int
    event_seconds: int
    input_rows: int
    #: CPU seconds of the ingest (validation and spool; outside rho for a directory read
    #: before Spark starts, inside it while following) and its rows per CPU second
    ingest_cpu_s: float | None = None
    ingest_rows_per_cpu_s: float | None = None
    wall_s: float
    rho: float
    rho_steady: float
    rho_windows_full: float
    warmup_batches: int
    warmup_batch_s: int | None
    drained: bool
    achieved_rate_tps: float
    truncated: bool
    data_batches: int
    dead_lettered: int
    dead_by_reason: dict[str, int]
    files_quarantined: list[dict[str, str]]
    deadletter_dir: str
    predicted: PredictedCost | None
    db_memory_bytes: dict[str, int]
    #: the largest state measured in a batch, summed over the stages: {"spark_rows",
    #: "spark_bytes", "db_bytes"} (against `predicted_memory`: docs/cost-model.md, Memory)
    peak_state: dict[str, int] = {}
    predicted_memory: dict[str, float] = {}
    #: the migration instant a `watch` stopped the run at (the rest of the input was left)
    stopped_at: dt.datetime | None = None
    #: rows (or slice rows) each DB-op took from an old placement at a migration, per table
    moved: dict[str, dict[str, int]] = {}
    output: str | None = None
    #: the cores (and a cluster's executors) the plan was chosen for (spe/session.py)
    spe_capacity: str | None = None
    #: what of this summary could not be computed, one line each ("predicted memory
    #: unavailable: ..."): reporting runs after the results are written and never loses them
    warnings: list[str] = []
    reporting_failures: int = 0
    #: where the time went (federation/runtime/phases.py): wall and CPU seconds and calls
    #: per phase of the data path, the whole call's wall seconds (ingest and start-up
    #: included, unlike `wall_s`), and the CPU seconds of this process and of Spark's JVM
    phases: dict[str, dict[str, float]] = {}
    run_wall_s: float | None = None
    cpu_s: dict[str, float | None] = {}

    def warn(self, line: str) -> None:
        self.warnings.append(line)
        self.reporting_failures = len(self.warnings)


@dataclass
class RunResult:
    """What a run returns: result rows (with `tau`), per-batch metrics and a summary."""

    rows: pa.Table
    metrics: list[BatchMetrics]
    summary: RunSummary
    plan: Any  # the PhysicalPlan that ran
    ingest: Any  # the run's input (sources.InputSet: each stream's spool and counts)
    #: of several queries: each query's rows by its name (`rows` holds the first's)
    results: dict[str, pa.Table] | None = None

    def to_pandas(self):
        return self.rows.to_pandas()

    def of(self, query: str) -> pa.Table:
        """The rows of query `query` (a run of several queries)."""
        return rows_of(self.rows, self.results, query)


def rows_of(rows: pa.Table, results: dict[str, pa.Table] | None, query: str) -> pa.Table:
    """The rows of query `query` of a run's result: `results` by query (a run of several),
    else the one query's `rows`."""
    if results is None:
        return rows
    if query not in results:
        raise KeyError(f"no query {query!r} in this run: {', '.join(results)}")
    return results[query]


def results_table(parts: list[pa.Table], columns: list[str]) -> pa.Table:
    """The query's result from its parts (in (stage, batch id) order): `tau` first, sorted."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return pa.table({"tau": pa.array([], pa.timestamp("us"))})
    t = pa.concat_tables([p.select([TAU, *columns]) for p in parts],
                         promote_options="permissive")
    return t.rename_columns(["tau", *columns]).sort_by("tau")
