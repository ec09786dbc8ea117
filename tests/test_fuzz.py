"""The fast profile of the differential fuzzer: a handful of generated queries, fixed seed,
every placement against the reference evaluator (the long profile: benchmarks.fuzz)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.fuzz import fuzz
from benchmarks.fuzz_queries import queries
from federation.logical import Rstream


@pytest.mark.spark
def test_generated_queries_match_the_reference_in_every_placement(spark, tmp_path):
    records, failure = fuzz(5, seed_value=20261126, work=tmp_path, spark=spark)
    assert failure is None, failure
    assert len({r["query"] for r in records}) == 5
    runs = [r for r in records if r["outcome"] != "refused"]
    assert len(runs) >= 15 and all(r["outcome"] == "match" for r in runs)


@settings(max_examples=60, deadline=None, database=None)
@given(queries(), st.data())
def test_generator_gives_valid_queries_with_runnable_explicit_placements(g, data):
    # no JVM: every generated query is valid DSL and its placements name its operators
    from benchmarks.fuzz_queries import _logical
    from federation.physical import parse_placement, spe_limits

    assert isinstance(g.query, Rstream)
    plan = _logical(g.query)
    assert {"spe", "db", "auto"} <= set(g.placements)
    for pl in g.placements[3:]:
        assert not spe_limits(plan, parse_placement(plan, pl))
