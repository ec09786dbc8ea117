"""The hand-written DuckDB loops of CQ1-CQ6 (benchmarks/peers_smartplug_duckdb.py, the
physical-limit anchor of the smart-plug benchmark) mean what the queries mean: each equals
the reference evaluator on a small input, instants after the input ends included. No JVM."""

from __future__ import annotations

from benchmarks.peers_smartplug_duckdb import SUPPORTED, check
from federation.smartplug.datagen import generate


def test_each_loop_equals_the_reference(tmp_path):
    # windows of 10 s (CQ3/CQ4's short one 2 s, CQ6's 2, 6 and 10 s): two expiry passes
    # (every tenth instant) within the 14 s of input and the 10 s after it
    generate(tmp_path, rate=200, seconds=14, plugs=12, seed=9)
    problems = check(tmp_path, SUPPORTED, 200, 12, 1 / 30)
    assert problems == dict.fromkeys(SUPPORTED), problems
