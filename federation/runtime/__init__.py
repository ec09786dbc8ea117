"""The runtime: executes a given physical plan across Spark and DuckDB.

`execute(plan, data)` (execute.py) ingests the input (ingest.py), cuts the plan into stages
(stages.py), drives each stage's micro-batches through a BatchHandler (handler.py) that
feeds the MIGs (mig.py), and returns the rows and a typed summary (records.py). Placing the
operators is the optimizer's work; `federation.run` does both.
"""

from federation.runtime.execute import execute
from federation.runtime.records import (
    BatchMetrics,
    RunResult,
    RunSummary,
    check_arguments,
    check_output,
    work_directory,
)

__all__ = ["BatchMetrics", "RunResult", "RunSummary", "check_arguments", "check_output",
           "execute", "work_directory"]
