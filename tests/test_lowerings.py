"""Every plan node class has what every engine and model needs (issue 44, part 1): a Spark
lowering (or a declared Spark limit), a DuckDB lowering, a size, a cost in each engine, a
Spark state estimate, a reference evaluation, a column narrowing, and the fuzzer draws it.
A new operator class that misses one fails here, naming the class and what it lacks, not
in a user's run (docs/architecture.md, "Adding an operator"). No JVM: the lowerings are
registered when their modules are imported (federation.conventions.Lowering).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, seed, settings

import costmodel.memory
import costmodel.operators
import costmodel.sizes
import db.reference
import db.sqlgen.operators
import federation.optimizer.columns
import spe.translate
from benchmarks.fuzz_queries import as_query_set, queries
from federation import logical
from federation.conventions import EngineLimit, Lowering

#: every lowering a plan node class of some role needs, by the module that registers it
LOWERINGS = {
    "Spark lowering": spe.translate.SPARK,
    "DuckDB lowering": db.sqlgen.operators.DUCKDB,
    "size": costmodel.sizes.SIZE,
    "Spark cost": costmodel.operators.SPE_COST,
    "DuckDB cost": costmodel.operators.DB_COST,
    "Spark state (memory)": costmodel.memory.SPE_STATE,
    "reference evaluation": db.reference.REFERENCE,
    "column narrowing": federation.optimizer.columns.READS,
}


def node_classes() -> list[type]:
    """The concrete plan node classes (those with a role), found by walking the subclasses
    of `Node`: a class added anywhere is in the list."""
    out, todo = [], [logical.Node]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.role:
            out.append(cls)
    return sorted(set(out), key=lambda c: c.__name__)


def test_the_node_classes_are_the_plan_s_operators_leaves_and_roots():
    names = {c.__name__: c.role for c in node_classes()}
    assert names == {"Aggregate": "operator", "Join": "operator", "Project": "operator",
                     "Select": "operator", "Union": "operator", "RowNumber": "operator",
                     "SessionWindow": "leaf", "TimeWindow": "leaf",
                     "TupleWindow": "leaf",
                     "Table": "leaf", "Rstream": "root", "QuerySet": "root"}, names
    # every lowering the engines and models register is checked here
    assert set(Lowering.ALL) == set(LOWERINGS), sorted(Lowering.ALL)


def missing(lowerings: dict[str, Lowering]) -> list[str]:
    return [f"{cls.__name__} ({cls.role}) has no {name}"
            for cls in node_classes() for name, low in lowerings.items()
            if cls.role in low.roles and not low.covers(cls)]


def test_every_node_class_has_every_lowering_its_role_needs():
    assert missing(LOWERINGS) == []


def test_a_missing_lowering_is_named(monkeypatch):
    """The check above can fail: take Join's DuckDB SQL away (as a new operator without
    one would be) and the class and the lowering are named; a declared limit counts."""
    duck = LOWERINGS["DuckDB lowering"]
    monkeypatch.delitem(duck.funcs, "Join")
    assert missing(LOWERINGS) == ["Join (operator) has no DuckDB lowering"]
    with pytest.raises(TypeError, match="no DuckDB lowering for Join"):
        duck.find(logical.Join.__new__(logical.Join))
    monkeypatch.setitem(duck.limits, "Join", "for the test")
    assert missing(LOWERINGS) == []
    with pytest.raises(EngineLimit, match="for the test"):
        duck.find(logical.Join.__new__(logical.Join))


def drawn_classes(seed_value: int) -> list[str]:
    """The node classes of 80 queries `seed_value` draws, and of their query sets."""
    seen: set[str] = set()

    @seed(seed_value)
    @settings(max_examples=80, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(queries())
    def collect(g):
        seen.update(type(n).__name__ for n in g.query.walk())
        seen.update(type(n).__name__ for n in as_query_set(g).query.walk())

    collect()
    return sorted(seen)


def test_the_fuzzer_draws_every_node_class():
    """The fuzzer's generator builds every node class (a query set through `--sets`).
    Drawn in a fresh interpreter, as tests/test_fuzz.py's shapes: Hypothesis draws also
    from constants of the modules loaded, so one seed draws other queries after other
    tests (seed 9 stopped drawing a session window once offsets were drawn, 1 once windows
    of other slides were; 3 once CUMULATE was drawn more often on a coarser grid; 4-8
    do)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = ("import json; from tests.test_lowerings import drawn_classes; "
            "print(json.dumps(drawn_classes(4)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(root)})
    seen = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {c.__name__ for c in node_classes()} - seen == set()


def test_plan_nodes_carry_no_dsl():
    # issue 44: the DSL is a class of its own (federation/logical/builder.py `Relation`)
    # that wraps a plan node; no node class offers its methods (Rstream's `rstream` only
    # names the mistake of ending a query twice; a table's `distinct` is its statistics)
    dsl = {n for n in vars(logical.Relation) if not n.startswith("_")} - {"node", "schema",
                                                                          "kind"}
    assert {"filter", "project", "join", "aggregate", "rstream", "top"} <= dsl
    for cls in [logical.Node, *node_classes()]:
        offered = {n for n in dsl if callable(getattr(cls, n, None))} - (
            {"rstream"} if cls is logical.Rstream else set())
        assert not offered, (cls.__name__, sorted(offered))
