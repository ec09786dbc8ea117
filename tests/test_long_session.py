"""A long-lived Spark session (a fuzz worker, a live run's migrations, a notebook) runs
one run after another: a run must leave neither its streaming queries nor a Py4J
connection behind. Both did: the foreachBatch handler reached its StreamingQuery, and Py4J
holds the handler until the JVM collects the query, which the JVM keeps while Python
holds its StreamingQuery (a cycle across two collectors; fuzz workers' 4-GB heaps full
after about 330 runs); and every query's thread left a socket and a Python thread."""

from __future__ import annotations

import gc
import threading

from pyspark.sql.streaming import StreamingQuery

from federation.api import run
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES


def _left_behind() -> tuple[int, int]:
    """(StreamingQuery objects alive in Python, threads) after a full collection."""
    gc.collect()
    return (sum(isinstance(o, StreamingQuery) for o in gc.get_objects()),
            threading.active_count())


def test_a_run_leaves_no_query_and_no_connection_behind(spark, tmp_path):
    generate(tmp_path / "d", rate=40, seconds=12, plugs=10, seed=3)
    query = QUERIES["CQ5"](rate=40, scale=1 / 30, plugs=10)
    counts = []
    for i in range(3):  # a Spark query each (the selection; the rest in DuckDB); the third
        halt = threading.Event()  # halted in its first batch: the batch raises (PySpark
        # keeps that error while Py4J keeps its wrapper: its traceback held the run)
        r = run(query, {"op1": "spe"}, tmp_path / "d", spark=spark, halt=halt,
                progress=(lambda m, h=halt: h.set()) if i == 2 else None,
                work_dir=tmp_path / f"w{i}", seconds_per_batch=3 if i == 2 else 6)
        assert r.rows.num_rows > 0 or i == 2
        del r
        counts.append(_left_behind())
    (q1, t1), _, (q3, t3) = counts
    assert q3 <= q1, f"StreamingQuery objects kept by finished runs: {counts}"
    assert t3 <= t1, f"threads kept by finished runs (Py4J connections): {counts}"
    kept = [o for o in gc.get_objects()
            if type(o).__name__ == "ForeachBatchFunction" and hasattr(o, "error")]
    assert not kept, f"foreachBatch wrappers keeping their batch's error: {kept}"
