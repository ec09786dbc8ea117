"""Re-optimization while a query runs: watch, decide, migrate (issue 13).

A run is a chain of **segments** of event time, each under one placement
(docs/architecture.md "Re-optimization while running"):

* **Watch.** At every decision point (`every_s`, on the slide grid) a `Watch`, asked by the
  running segment's stage-0 micro-batches, measures the window before it: the input rate
  (Parquet metadata, no row read), the selectivities of the selections over window rows
  (DuckDB over the window's files) and the running plan's pace (rho, from its batch times).
* **Decide.** The optimizer plans the query for those statistics; the run migrates when
  that plan beats the running placement, priced at the same statistics, by a margin
  (Definition 1 with hysteresis), or when the running placement falls behind (rho below
  1) and the optimizer kept a plan it calls feasible; at most once per `min_interval_s`.
* **Migrate** at the migration instant (`Segment.stop_at` of the running segment,
  `start_at` of the next): the running placement stops there (its DB-ops keep their state
  as it is there; Spark finishes its results before it), and the new one takes over: its
  DB-ops take the window state over from DuckDB where it is there (move,
  federation/runtime/move.py), else it replays the last extent of input before it
  (parallel track). Each segment owns the instants [start_at, stop_at): each instant is
  produced exactly once.

`run_adaptive` with given segments replays a decision (tests, benchmarks); without, it
decides while it runs (`decide_and_run`). `plan_segments` and `migrations_over` decide from
the rates alone (no JVM: `fedq explain --sweep --margin`).

Modules: inputs.py (part files and rates), decide.py, watch.py, migrate.py, output.py
(the run's sinks across its segments; what it returns).
"""

from federation.adaptive.decide import (
    AdaptiveError,
    Segment,
    _decide,
    better_by_margin,
    migrations_over,
    plan_segments,
    with_rate,
)
from federation.adaptive.inputs import PartFile, measured_rates, part_files
from federation.adaptive.migrate import STRATEGIES, decide_and_run, run_adaptive
from federation.adaptive.output import AdaptiveResult, SegmentRun
from federation.adaptive.watch import Decision, Watch, row_predicates

__all__ = ["STRATEGIES", "AdaptiveError", "AdaptiveResult", "Decision", "PartFile",
           "Segment", "SegmentRun", "Watch", "_decide", "better_by_margin", "decide_and_run",
           "measured_rates", "migrations_over", "part_files", "plan_segments",
           "row_predicates", "run_adaptive", "with_rate"]
