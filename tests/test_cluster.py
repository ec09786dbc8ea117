"""A Spark standalone cluster (issue 12): a master and one worker started from the installed
PySpark's launch classes (spe/standalone.py); `fedq run CQ1 --master spark://...` runs the
SPE part on the cluster's executor and the MIGs on the driver, and returns the reference
evaluator's result. `make cluster-test` runs only this."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.results import diff_results
from federation.runtime.ingest import read_clean_rows
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

pytestmark = [pytest.mark.spark, pytest.mark.cluster]
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"
RATE, PLUGS, SCALE = 60, 20, 1 / 6


def test_cq1_auto_on_a_standalone_cluster_equals_the_reference(tmp_path):
    from spe.standalone import local_cluster

    data, work, out = tmp_path / "data", tmp_path / "work", tmp_path / "out.parquet"
    generate(data, rate=RATE, seconds=40, plugs=PLUGS, seed=3)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with local_cluster(cores=1, memory="1g") as cluster:
        r = subprocess.run(
            [sys.executable, "-c", CLI, "run", "CQ1", "--placement", "auto",
             "--master", cluster.url, "--data", str(data), "--scale", repr(SCALE),
             "--seconds-per-batch", "4", "--work-dir", str(work), "--output", str(out),
             "--quiet"], env=env, capture_output=True, text=True, timeout=900, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        assert cluster.executors_launched() >= 1, "the run did not use the cluster"
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    want = reference_result(q, read_clean_rows(work / "input" / "spool"))
    assert want.num_rows > 0
    problem = diff_results(pq.read_table(out), want)
    assert problem is None, problem
