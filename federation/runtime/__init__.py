"""The runtime: executes a given physical plan across Spark and DuckDB.

`execute(plan, data)` (execute.py) ingests the input (ingest.py), cuts the plan into stages
(stages.py), drives each stage's micro-batches through a BatchHandler (microbatch.py) that
feeds the MIGs (mig.py), and returns the rows and a typed summary (result.py). Placing the
operators is the optimizer's work; `federation.run` does both.
"""

from federation.runtime.execute import execute
from federation.runtime.options import GenerateOptions, RunOptions, work_directory
from federation.runtime.result import BatchMetrics, RunResult, RunSummary

__all__ = ["BatchMetrics", "GenerateOptions", "RunOptions", "RunResult", "RunSummary",
           "execute", "work_directory"]
