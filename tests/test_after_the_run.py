"""Issue 41: what a plan's report computes (the memory model, explain) for every way a
DB-op's tables get their columns, and a report that fails without losing anything. No JVM.

The memory model sizes the tables a DB-op's DuckDB creates; it takes their columns from
the DB-op itself (`DbOp.input_columns`, `SliceTable.columns`), and these tests create the
tables in DuckDB (db/store.py, as a run does) and compare: a key computed by a projection
(`v2 = CAST(value AS INT)`), a renamed key, a key from a database table, an integer SUM
(DuckDB's HUGEINT), slices shared by two queries, a shared join's build side; then the
fuzzer's generated queries under each of their placements."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from benchmarks.fuzz_queries import TABLE, Generated, _logical, queries, table_db
from costmodel.memory import plan_memory
from costmodel.profile import load_profile
from federation import count, max_, sum_, window
from federation.conventions import FROM_DUCKDB, TAU, TS
from federation.explain import explain_json, explain_text
from federation.logical import query_set, table
from federation.optimizer import optimize, plan_for
from federation.physical import build_physical_plan, db_cycle, parse_placement, spe_limits
from federation.smartplug import smartplug_stream
from federation.smartplug.queries import QUERIES


def _stream():
    return smartplug_stream(rate=200, plugs=50, houses=5)


def computed_key():
    """The issue's query: grouped by a column a projection computes."""
    return (window(_stream(), range="10 s", slide="1 s")
            .project("plug_id", v2="CAST(value AS INT)")
            .aggregate(by=["v2"], n=count()).rstream("computed_key"))


def renamed_key():
    return (window(_stream(), range="10 s", slide="1 s")
            .project("value", plugId="plug_id")  # mixed case: DuckDB's slice SQL folds it
            .aggregate(by=["plugId"], n=count(), top=max_("value")).rstream("renamed_key"))


def integer_sum():
    return (window(_stream(), range="20 s", slide="2 s").filter("value > 1")
            .project(h="house_id % 3", w="CAST(value AS BIGINT) * 2")
            .aggregate(by=["h"], s=sum_("w"), n=count()).rstream("integer_sum"))


def table_key():
    """Grouped by a column of a database table joined to the window's rows."""
    devices = table(TABLE, db=table_db()).project("house_id", "household_id", tier="rank")
    return (window(_stream(), range="10 s", slide="1 s")
            .join(devices, on=["house_id", "household_id"])
            .aggregate(by=["tier"], n=count()).rstream("table_key"))


def shared_slices():
    """Two queries grouping the same rows by the same computed key: one slice table."""
    rows = window(_stream(), range="10 s", slide="1 s").project(v2="CAST(value AS INT)",
                                                                 h="house_id")
    a = rows.aggregate(by=["v2"], n=count()).rstream("by_v2")
    b = (window(_stream(), range="30 s", slide="1 s").project(v2="CAST(value AS INT)",
                                                               h="house_id")
         .aggregate(by=["v2"], top=max_("h")).rstream("by_v2_30"))
    return query_set([a, b])


def shared_join():
    """CQ1 and CQ2: one join of the window's rows with their aggregate (its build side)."""
    return query_set([QUERIES["CQ1"](rate=2000, scale=0.05), QUERIES["CQ2"](rate=2000,
                                                                           scale=0.05)])


SHAPES = {"computed key": computed_key, "renamed key": renamed_key,
          "integer sum": integer_sum, "key from a table": table_key,
          "slices shared by two queries": shared_slices, "a shared join": shared_join}


def duckdb_tables(pp) -> dict[str, dict[str, str]]:
    """The tables each DB-op's DuckDB creates for `pp` (db/store.py, as a run does), by
    DB-op and table: column -> fedq type (HUGEINT as itself)."""
    from db.store import MigDatabase
    from federation.runtime.mig import db_op_functions, input_specs

    out = {}
    for d in pp.db_ops:
        w = next(n for n in pp.logical.nodes.values() if n.kind == "window")
        specs, _ = input_specs(d, w.slide_s, pp.logical.nodes)
        db = MigDatabase(specs, d.sql_text, slices=d.slices, functions=db_op_functions(d))
        try:
            for t in [*(s.table for s in specs), *(s.name for s in d.slices)]:
                cols = db.con.execute(f'DESCRIBE "{t}"').fetchall()
                # names as DuckDB compares them (a slice table's SQL may fold an unquoted
                # alias such as propertyMax; the bytes do not depend on it)
                out[f"{d.id}.{t}"] = {c.lower(): FROM_DUCKDB.get(ty.split("(")[0], ty)
                                      for c, ty, *_ in cols if c not in (TS, TAU)}
        finally:
            db.con.close()
    return out


def declared_tables(pp) -> dict[str, dict[str, str]]:
    """What the memory model sizes: each DB-op's own definitions of its tables."""
    out = {}
    for d in pp.db_ops:
        for ci in d.inputs:
            out[f"{d.id}.{ci.table}"] = d.input_columns(ci) if (
                ci.node.kind == "table" or ci.table in d.raw or not ci.row_level
            ) else dict(ci.node.schema)
        for s in d.slices:
            out[f"{d.id}.{s.name}"] = dict(s.columns)
    return {t: {c.lower(): ty for c, ty in cols.items()} for t, cols in out.items()}


def check_report(pp) -> None:
    """The memory model sizes the plan from the tables DuckDB creates, and explain runs."""
    m = plan_memory(pp, load_profile())
    assert m.db_bytes > 0 or not pp.db_ops
    assert declared_tables(pp) == duckdb_tables(pp)


def placements(q) -> list[str]:
    """Pure DB, and each single operator in Spark with the rest in DuckDB (every engine
    boundary at some operator), where Spark can run it and no DB-op reads its own output."""
    plan = _logical(q)
    out = ["db"]
    for o in plan.r2r_ids:
        pl = {x: ("spe" if x == o else "db") for x in plan.r2r_ids}
        if not spe_limits(plan, pl) and not db_cycle(plan, pl):
            out.append(",".join(f"{k}={v}" for k, v in pl.items()))
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_memory_model_sizes_the_tables_duckdb_creates(shape):
    q = SHAPES[shape]()
    plan = _logical(q)
    for pl in placements(q):
        check_report(build_physical_plan(plan, pl))
    r = optimize(q)  # auto: the memory check of every candidate ran
    assert r.memory is not None and r.memory.unavailable is None
    assert "memory: Spark state" in explain_text(r)


def test_the_issue_query_is_planned_under_auto_with_its_memory():
    r = optimize(computed_key())
    assert r.memory.unavailable is None and r.memory.fits
    assert any(s.columns == {"_s": "BIGINT", "v2": "INT", "p0": "BIGINT"}
               for d in r.plan.db_ops for s in d.slices) or not r.plan.db_ops
    pp, _ = plan_for(computed_key(), "db")
    assert plan_memory(pp, load_profile()).db["db1"].bytes > 0


def test_a_plan_whose_memory_cannot_be_predicted_is_still_planned_and_explained(monkeypatch):
    import costmodel.memory

    def broken(*a, **k):
        raise KeyError("v2")

    monkeypatch.setattr(costmodel.memory, "plan_memory", broken)
    r = optimize(computed_key())
    assert r.memory.unavailable == "KeyError: 'v2'" and r.qualified
    text = explain_text(r)
    assert "predicted memory unavailable (KeyError: 'v2'): not checked" in text
    assert "C_b =" in text  # the rest of the explanation is there
    assert explain_json(r)["memory"]["unavailable"] == "KeyError: 'v2'"


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(queries())
def test_generated_queries_are_sized_from_the_tables_duckdb_creates(g: Generated):
    """The fuzzer's queries (computed and renamed keys, tables, joins of every kind) under
    each of their explicit placements: the memory model and DuckDB agree on every table."""
    plan = _logical(g.query)
    for pl in ["db", *g.placements[3:]]:
        if spe_limits(plan, parse_placement(plan, pl)):
            continue
        check_report(build_physical_plan(plan, pl))
