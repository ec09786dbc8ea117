"""A Spark standalone cluster (issues 12, 25): a master and two workers started from the
installed PySpark's launch classes (spe/standalone.py). `fedq explain --master` and
`fedq run --master spark://...` read the executors' cores and heap from the cluster and
plan for them (shuffle partitions follow the cores); the SPE part runs on the executors,
the MIGs on the driver, and the result equals the reference evaluator's. `make
cluster-test` runs only this (and `make test-long`; `make test` does not)."""

from __future__ import annotations

import json
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

# three more JVMs (a master, two workers) and two applications: `make cluster-test` and
# `make test-long` run it, `make test` does not
pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.long]
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"
RATE, PLUGS, SCALE = 60, 20, 1 / 6


def _fedq(*args: str, env: dict) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-c", CLI, *args], env=env, capture_output=True,
                       text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_cq1_auto_on_a_two_worker_cluster_plans_for_its_cores_and_equals_the_reference(
        tmp_path):
    from spe.standalone import local_cluster

    data, work, out = tmp_path / "data", tmp_path / "work", tmp_path / "out.parquet"
    generate(data, rate=RATE, seconds=40, plugs=PLUGS, seed=3)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with local_cluster(cores=2, memory="1g", workers=2) as cluster:
        ex = json.loads(_fedq("explain", "CQ1", "--master", cluster.url, "--json",
                              env=env).stdout)
        r = _fedq("run", "CQ1", "--placement", "auto", "--master", cluster.url, "--data",
                  str(data), "--scale", repr(SCALE), "--seconds-per-batch", "10",
                  "--work-dir", str(work), "--output", str(out), "--quiet", "--json", env=env)
        assert cluster.executors_launched() >= 4, "the runs did not use both workers"
    # the cluster's capacity, read from it: 2 executors x 2 cores (local mode plans for 2)
    assert ex["spe_cores"] == 4, ex["spe_capacity"]
    assert "2 executors" in ex["spe_capacity"] and cluster.url in ex["spe_capacity"]
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["spe_capacity"] == ex["spe_capacity"]
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    want = reference_result(q, read_clean_rows(work / "input" / "smartplug" / "spool"))
    assert want.num_rows > 0
    problem = diff_results(pq.read_table(out), want)
    assert problem is None, problem
