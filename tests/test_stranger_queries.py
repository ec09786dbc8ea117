"""Queries a little off the beaten path, as a new user writes them (issue 20): names that
SQL reserves (`load`), camelCase names, casts and other conversions, joins of two
windows' rows that differ in range, selection and projection, never-NULL computed columns
beside other outputs of a Spark stage, a query over two streams.

The JVM-free part runs the pure-DuckDB placement through the DB-op runtime (MigRuntime,
fed micro-batch by micro-batch as the batch handler feeds it) and compares it with the
reference evaluator; the Spark part runs every placement end to end.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings

from benchmarks.fuzz_queries import HOUSES, PLUGS, RATE, queries
from costmodel.profile import load_profile
from db.reference import reference_result
from federation import count, max_, sum_, window
from federation.canonical import canonical
from federation.errors import QueryValidationError
from federation.expressions import infer_type, to_expression
from federation.instants import extent_of, first_instant, last_instant, query_grid
from federation.logical import NumberedPlan
from federation.optimizer.phase_one import phase_one
from federation.physical import build_physical_plan
from federation.results import diff_results
from federation.runtime.mig import MigRuntime, split_outputs
from federation.smartplug import PLUG_KEYS, smartplug_stream
from tests.sampling import sampled

T0 = dt.datetime(2013, 9, 1)
S = smartplug_stream(rate=40000, plugs=28, houses=4)


def rows_of(seconds: int, rate: int, plugs: int, houses: int, seed: int = 3) -> pa.Table:
    """Smart-plug readings, `rate` a second, over `plugs` plugs in `houses` houses."""
    rng = np.random.default_rng(seed)
    n = seconds * rate
    ts = np.sort(rng.integers(0, seconds * 1_000_000, n))
    plug = rng.integers(0, plugs, n).astype(np.int32)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "ts": pa.array([T0 + dt.timedelta(microseconds=int(x)) for x in ts],
                       pa.timestamp("us")),
        # halves (x.5) and negatives now and then: casts and rounding of halves differ
        "value": pa.array(np.where(rng.random(n) < 0.2, np.round(rng.random(n) * 100) + 0.5,
                                   np.round(rng.random(n) * 120 - 10, 3))),
        "property": pa.array(rng.integers(0, 2, n), pa.int32()),
        "plug_id": pa.array(plug % 5, pa.int32()),
        "household_id": pa.array(plug // 5, pa.int32()),
        "house_id": pa.array(plug % houses, pa.int32()),
    })


def distinct_placements(q, placements) -> list[str]:
    """`placements` of `q` without the ones that give a plan already in the list ("auto"
    is often "db"): the same plan over the same data is one run, not two."""
    from federation.optimizer import plan_for

    seen, out = set(), []
    for pl in placements:
        resolved = plan_for(q, pl)[0].placement_string
        if resolved not in seen:
            seen.add(resolved)
            out.append(pl)
    return out


def pure_db(q, rows: pa.Table | dict[str, pa.Table], per_batch_s: int = 3):
    """The pure-DuckDB placement of `q` over `rows` (or each stream's rows by its name),
    fed `per_batch_s` event seconds per micro-batch through the DB-op runtime; the result
    as `run` returns it (of a query set: {query name: its rows})."""
    plan = NumberedPlan.of(phase_one(q, load_profile()))
    ops = build_physical_plan(plan, "db").db_ops
    windows = [n for n in plan.nodes.values() if n.kind == "window"]
    slide = query_grid(windows)
    if isinstance(rows, pa.Table):
        rows = {windows[0].stream.name: rows}
    ts = {w.stream.name: w.stream.ts_column for w in windows}
    lo = min(pc.min(t.column(ts[n])).as_py() for n, t in rows.items())
    hi = max(pc.max(t.column(ts[n])).as_py() for n, t in rows.items())
    t0 = lo.replace(microsecond=0)
    last = last_instant(hi, extent_of(windows), slide)
    migs = [MigRuntime(op, slide, life=(first_instant(lo, slide), last), plan_nodes=plan.nodes)
            for op in ops]
    rows = {n: t.append_column("_ts", t.column(ts[n])) for n, t in rows.items()}
    outs: dict[str, list[pa.Table]] = {name: [] for name in plan.tops}
    batches = math.ceil((hi - t0).total_seconds() / per_batch_s) + 1
    for b in range(batches):
        clock = t0 + dt.timedelta(seconds=(b + 1) * per_batch_s)
        lo_b = pa.scalar(t0 + dt.timedelta(seconds=b * per_batch_s), pa.timestamp("us"))
        for mig in migs:
            assert mig.begin(b)
            for ci in mig.db_op.inputs:
                if ci.node.kind == "table":  # loaded by the MIG from its file
                    continue
                t = rows[ci.node.stream.name]
                mig.add(ci.table, t.filter(pc.and_(
                    pc.greater_equal(t.column("_ts"), lo_b),
                    pc.less(t.column("_ts"), pa.scalar(clock, pa.timestamp("us"))))))
            _, out, _ = mig.advance(clock if b < batches - 1 else last)
            mig.commit(b)
            for oid, part in split_outputs(mig.db_op, plan.nodes, out).items():
                for name in (n for n, t in plan.tops.items() if t == oid):
                    if part is not None:
                        outs[name].append(part)
    for mig in migs:
        mig.close()
    got = {}
    for name, parts in outs.items():
        t = pa.concat_tables(parts) if parts else None
        got[name] = None if t is None else t.rename_columns(
            ["tau" if c == "_tau" else c for c in t.column_names])
    return got if plan.many else got[next(iter(got))]


def check_db(q, rows, per_batch_s=3):
    want = reference_result(q, rows)
    got = pure_db(q, rows, per_batch_s)
    assert want.num_rows > 0
    problem = diff_results(got, want)
    assert problem is None, problem
    return got


# -- the reproducers ------------------------------------------------------------------------

def two_windows(r_load: float = 4, r_work: float = 2):
    """Class 1: two windows of one stream, different ranges, selections and renaming
    projections (`load` is also an SQL command), joined and aggregated."""
    load = (window(S, range=r_load, slide=1).filter("property = 1")
            .project("house_id", "household_id", "plug_id", load="value"))
    work = (window(S, range=r_work, slide=1).filter("property = 0")
            .project("house_id", "household_id", "plug_id", work="value"))
    return (load.join(work, on=list(PLUG_KEYS))
            .aggregate(by=["house_id"], n=count(), ml=max_("load"), sw=sum_("work"))
            .project("house_id", "ml", "sw").rstream("q"))


CAMEL = (window(S, range=4, slide=1).filter("property = 1")
         .aggregate(by=["plug_id"], maxLoad=max_("value")).rstream("q"))
CAST = (window(S, range=4, slide=1).project("plug_id", v2="CAST(value AS INT)")
        .aggregate(by=["v2"], n=count()).rstream("q"))


def never_null_beside_another_output():
    """Class 2: a never-NULL computed column (CASE) travels to DuckDB beside another
    output of the same Spark stage."""
    big = (window(S, range=12, slide=2).filter("property = 1")
           .project("house_id", "household_id", "plug_id", "value",
                    v2="CASE WHEN value > 50 THEN 1 ELSE 0 END"))
    small = window(S, range=4, slide=2).filter("property = 0")
    per_plug = big.aggregate(by=list(PLUG_KEYS), hi=sum_("v2"), m=max_("value"))
    per_household = small.aggregate(by=["house_id", "household_id"], c=count())
    return (per_plug.join(per_household, on=["house_id", "household_id"])
            .aggregate(by=[], n=count(), s=sum_("hi")).rstream("q"))


CLASS2_PLACEMENT = "op1=spe,op2=spe,op3=db,op4=spe,op5=db,op6=db,op7=db"


# -- JVM-free ---------------------------------------------------------------------------

def test_a_bare_name_is_a_column_even_an_sql_keyword():
    for name in ("load", "order", "select", "value", "maxLoad"):
        e = to_expression(name)
        assert e.name == name and e.key == "column"
    assert to_expression("load * 2").sql() == "load * 2"  # not the LOAD command
    with pytest.raises(ValueError, match='double quotes'):
        to_expression("select + 1")
    assert to_expression('"select" + 1').this.name == "select"
    with pytest.raises(ValueError, match="no AS"):
        to_expression("value AS v")


@pytest.mark.parametrize("text,types,duck,typ", [
    ("CAST(v AS INT)", {"v": "DOUBLE"}, "TRY_CAST(TRUNC(v) AS INT)", "INT"),
    ("CAST(s AS INT)", {"s": "VARCHAR"}, "TRY_CAST(TRUNC(TRY_CAST(s AS DOUBLE)) AS INT)", "INT"),
    ("k * 2 + 1", {"k": "INT"}, "TRY_CAST(k AS BIGINT) * 2 + 1", "BIGINT"),
    ("v / k", {"v": "DOUBLE", "k": "INT"}, "v / NULLIF(k, 0)", "DOUBLE"),
    ("k % 3", {"k": "INT"}, "k % 3", "INT"),
    ("k * 1.5", {"k": "INT"}, "k * 1.5e0", "DOUBLE"),
    ("FLOOR(v)", {"v": "DOUBLE"},
     "CASE WHEN ABS(v) < 4503599627370496e0 THEN TRY_CAST(FLOOR(v) AS DOUBLE) ELSE v END",
     "DOUBLE"),
    ("CASE WHEN v > 50 THEN 1 ELSE 0 END", {"v": "DOUBLE"},
     "CASE WHEN v > 50 THEN 1 ELSE 0 END", "INT"),
])
def test_conversions_have_one_meaning(text, types, duck, typ):
    c = canonical(to_expression(text), types)
    assert c.sql("duckdb") == duck
    assert canonical(c, types).sql("duckdb") == duck  # idempotent: plans are rebuilt
    assert infer_type(c, types) == typ


@pytest.mark.parametrize("text,why", [
    ("CAST(ts AS INT)", "does not convert"),
    ("CAST(value AS VARCHAR)", "prints differently"),
    ("value // 2", "divides integers"),
    ("CAST(value AS FLOAT)", "the types are"),
])
def test_conversions_the_engines_cannot_agree_on_are_refused(text, why):
    with pytest.raises(QueryValidationError, match=why) as e:
        window(S, range=4, slide=1).project(x=text)
    assert "project: x:" in str(e.value)


def test_names_differing_only_in_case_are_refused():
    with pytest.raises(QueryValidationError, match="only in letter case"):
        window(S, range=4, slide=1).aggregate(by=["plug_id"], maxLoad=max_("value"),
                                              maxload=max_("value"))


def test_a_query_over_two_streams_names_each_and_one_directory_is_refused(tmp_path, capsys):
    """Both front ends build a query over two streams (tests/test_many_streams.py runs
    them); the CLI refuses to read both from one directory, naming --data NAME=DIR, and
    explains the query without data."""
    from federation import sql
    from federation.cli import main
    from federation.smartplug.datagen import generate

    other = smartplug_stream(rate=40000, plugs=28, houses=4, name="other")
    a = window(S, range=4, slide=1).aggregate(by=["plug_id"], n=count())
    b = window(other, range=4, slide=1).aggregate(by=["plug_id"], m=count())
    q = a.join(b, on=["plug_id"]).rstream("q")
    text = """SELECT a.plug_id, a.n, b.m FROM
      (SELECT plug_id, COUNT(*) AS n FROM HOP(TABLE smartplug, DESCRIPTOR(ts),
         INTERVAL '1' SECOND, INTERVAL '4' SECOND) GROUP BY window_end, plug_id) a
      JOIN (SELECT plug_id, COUNT(*) AS m FROM HOP(TABLE other, DESCRIPTOR(ts),
         INTERVAL '1' SECOND, INTERVAL '4' SECOND) GROUP BY window_end, plug_id) b
      ON a.plug_id = b.plug_id"""
    streams = {w.stream.name for w in sql(text, streams={"smartplug": S, "other": other})
               .walk() if w.kind == "window"}
    assert streams == {w.stream.name for w in q.walk() if w.kind == "window"} == {
        "other", "smartplug"}

    generate(tmp_path / "data", rate=10, seconds=2, plugs=4, seed=1)
    f = tmp_path / "two.py"
    f.write_text(
        "from federation import window, count\n"
        "from federation.smartplug import smartplug_stream\n"
        "s, o = smartplug_stream(), smartplug_stream(name='other')\n"
        "def q():\n"
        "    a = window(s, range=4, slide=1).aggregate(by=['plug_id'], n=count())\n"
        "    b = window(o, range=4, slide=1).aggregate(by=['plug_id'], m=count())\n"
        "    return a.join(b, on=['plug_id']).rstream('q')\n")
    assert main(["explain", "--query", f"{f}:q"]) == 0
    assert "C_b" in capsys.readouterr().out
    rc = main(["run", "--data", str(tmp_path / "data"), "--query", f"{f}:q"])
    err = capsys.readouterr().err
    assert rc == 2 and "--data: the query reads 2 streams (other, smartplug)" in err, err
    assert "NAME=DIR" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def plug_rows():
    return rows_of(seconds=14, rate=60, plugs=28, houses=4)


@pytest.mark.parametrize("q", [two_windows(4, 2), two_windows(4, 6), CAMEL, CAST],
                         ids=["join-4-2", "join-4-6", "camelCase", "cast"])
def test_pure_duckdb_returns_the_reference_rows(q, plug_rows):
    got = check_db(q, plug_rows, per_batch_s=3)
    if q is CAMEL:
        assert "maxLoad" in got.column_names


def test_cast_to_int_truncates_toward_zero(plug_rows):
    # the oracle here is Python's int(): toward zero, whatever engine runs the cast
    got = pure_db(CAST, plug_rows, per_batch_s=5)
    tau = T0 + dt.timedelta(seconds=6)
    window_rows = plug_rows.filter(pc.and_(
        pc.greater_equal(plug_rows.column("ts"), pa.scalar(tau - dt.timedelta(seconds=4))),
        pc.less(plug_rows.column("ts"), pa.scalar(tau))))
    want: dict[int, int] = {}
    for v in window_rows.column("value").to_pylist():
        want[int(v)] = want.get(int(v), 0) + 1
    at = got.filter(pc.equal(got.column("tau"), pa.scalar(tau, pa.timestamp("us"))))
    assert dict(zip(at.column("v2").to_pylist(), at.column("n").to_pylist())) == want
    assert any(v < 0 and v != int(v) for v in window_rows.column("value").to_pylist())


@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(queries())
def test_pure_duckdb_matches_the_reference_for_generated_queries(g):
    """The fuzzer's queries in the placement that should be the safest, without the JVM:
    the DB-op runtime against the reference evaluator, at the query's batch size."""
    from benchmarks.fuzz_queries import OTHER

    rows = rows_of(seconds=12, rate=RATE, plugs=PLUGS, houses=HOUSES, seed=7)
    streams = {n.stream.name for n in g.query.walk() if n.kind == "window"}
    if OTHER in streams:  # the second stream: another seed, 2 s later, 5 s shorter
        other = rows_of(seconds=7, rate=RATE, plugs=PLUGS, houses=HOUSES, seed=8)
        other = other.set_column(1, "ts", pc.add(other.column("ts"),
                                                 pa.scalar(dt.timedelta(seconds=2))))
        rows = {n: other if n == OTHER else rows for n in streams}
    want = reference_result(g.query, rows)
    got = pure_db(g.query, rows, per_batch_s=g.batch_s)
    problem = diff_results(got, want) if want.num_rows else (
        None if got.num_rows == 0 else f"{got.num_rows} rows, none expected")
    assert problem is None, f"{g!r}: {problem}"


# -- every placement, end to end ----------------------------------------------------------

def generated_plugs(tmp_path_factory, name: str, seed: int, seconds: int = 16,
                    plugs: int = 28, houses: int = 4):
    """A smart-plug data directory of 60 readings a second (a module's `plug_data`)."""
    from federation.smartplug.datagen import generate

    d = tmp_path_factory.mktemp(name)
    generate(d, rate=60, seconds=seconds, plugs=plugs, houses=houses, seed=seed)
    return d


@pytest.fixture(scope="module")
def plug_data(tmp_path_factory):
    return generated_plugs(tmp_path_factory, "stranger", seed=1)


def run_checked(spark, q, placement, data, tmp_path, per_batch):
    from federation.api import run
    from federation.runtime.ingest import read_clean_rows

    r = run(q, placement, data, work_dir=tmp_path, seconds_per_batch=per_batch, spark=spark)
    want = reference_result(q, read_clean_rows(r.ingest.spool_dir))
    assert want.num_rows > 0
    problem = diff_results(r.rows, want)
    assert problem is None, f"{placement} at {per_batch} s per batch: {problem}"


# every placement of the two crash classes at 1, 3 and 5 event seconds per batch (24 runs:
# `make test-long`); `make test` runs each crash class in its own placement, pure DuckDB
# and auto, each batch size by one of them (pure Spark: the join-key aggregate below)
CLASS1_PLACEMENT = "op1=spe,op2=spe,op3=db,op4=db,op5=spe,op6=db,op7=db"
DIAGONAL = [
    ("two_windows", "db", 1), ("two_windows", "auto", 3), ("two_windows", CLASS1_PLACEMENT, 5),
    ("never_null", CLASS2_PLACEMENT, 1),
]
FULL = [(w, pl, b) for w, pl in dict.fromkeys((w, pl) for w, pl, _ in DIAGONAL)
        for b in (1, 3, 5)]


@pytest.mark.spark
@pytest.mark.parametrize("which,placement,per_batch",
                         sampled(FULL, keep=DIAGONAL))
def test_crash_classes_return_the_reference_rows(spark, plug_data, tmp_path, which,
                                                 placement, per_batch):
    q = two_windows() if which == "two_windows" else never_null_beside_another_output()
    run_checked(spark, q, placement, plug_data, tmp_path, per_batch)


@pytest.mark.spark
@pytest.mark.parametrize("q,placement", [(CAMEL, "op1=spe,op2=db"), (CAST, "op1=spe,op2=db")],
                         ids=["camel", "cast"])  # a DB-op names the result; Spark casts
def test_camel_case_and_cast_agree_in_every_placement(spark, plug_data, tmp_path, q,
                                                      placement):
    run_checked(spark, q, placement, plug_data, tmp_path, 5)


@pytest.mark.spark
def test_both_engines_compute_each_conversion_alike(spark):
    """The table of docs/sql.md ("Conversions"), computed by Spark and by DuckDB from the
    canonical expressions, against the meaning written there."""
    import duckdb

    from spe.aggregates import spark_expr

    types = {"d": "DOUBLE", "h": "DOUBLE", "i": "INT", "z": "INT", "s": "VARCHAR",
             "bad": "VARCHAR", "big": "DOUBLE"}
    row = {"d": 17.786, "h": -2.5, "i": 7, "z": 0, "s": "12.7", "bad": "abc", "big": 1e12}
    cases = {
        "CAST(d AS INT)": 17, "CAST(-d AS INT)": -17, "CAST(h AS INT)": -2,
        "CAST(h AS BIGINT)": -2, "CAST(s AS INT)": 12, "CAST(bad AS INT)": None,
        "CAST(big AS INT)": None, "CAST(bad AS DOUBLE)": None, "i / z": None,
        "i // z": None, "i % z": None, "d / z": None, "i / 2": 3.5, "i // 2": 3,
        "(0 - i) // 2": -3, "(0 - i) % 3": -1, "ROUND(2.5 + z)": 3.0, "ROUND(h)": -3.0,
        "i * 2147483647": 7 * 2147483647, "i * 1.5": 10.5, "FLOOR(d)": 17.0,
        "CEIL(h)": -2.0, "CASE WHEN d > 50 THEN 1 ELSE 0 END": 0, "CAST(i > 1 AS INT)": 1,
        "CAST(CAST(i AS VARCHAR) AS INT)": 7, "CAST(i AS DOUBLE) / 4": 1.75,
    }
    con = duckdb.connect()
    con.sql("CREATE TABLE t AS SELECT 17.786::DOUBLE d, -2.5::DOUBLE h, 7::INT i, 0::INT z, "
            "'12.7' s, 'abc' bad, 1e12::DOUBLE big")
    sdf = spark.createDataFrame([tuple(row.values())],
                                "d double, h double, i int, z int, s string, bad string, "
                                "big double")
    for text, want in cases.items():
        e = canonical(to_expression(text), types)
        (duck,) = con.sql(f"SELECT {e.sql(dialect='duckdb', identify=True)} FROM t"
                          ).fetchall()[0]
        (sp,) = sdf.select(spark_expr(e)).collect()[0]
        assert duck == want and sp == want, f"{text} ({e.sql('duckdb')}): DuckDB {duck!r}, " \
            f"Spark {sp!r}, meant {want!r}"
        typ = infer_type(e, types)
        assert isinstance(sp, {"INT": int, "BIGINT": int, "DOUBLE": float}[typ]) \
            or sp is None, text


def aggregate_by_the_join_key():
    """Found by the widened fuzzer (seed 1, query 26): aggregates over a join of two
    windows' rows, joined with each other on a computed key, aggregated by that key.
    Pure Spark returned no row: the self-join's second branch ran over a ReusedExchange
    whose stateful operators got watermark 0 (spe/pipeline.py start_query)."""
    rows = (window(S, range=4, slide=2).filter("property = 1")
            .project("plug_id", "household_id", a="value")
            .join(window(S, range=2.5, slide=2).filter("property = 1")
                  .project("plug_id", "household_id", b="value"),
                  on=["household_id", "plug_id"])
            .project("plug_id", "household_id", c="CASE WHEN household_id = 1 THEN 10 ELSE 0 END")
            .aggregate(by=["household_id", "c"], n=count()))
    return (rows.join(rows.project("c", h2="household_id", n2="n"), on=["c"])
            .aggregate(by=["c"], a7=max_("n2")).rstream("q"))


def aggregate_named_window():
    """Found by the fuzzer (seed 94, query 12): an aggregate named `window`, the name Spark's
    group by gave its window() struct column: AMBIGUOUS_REFERENCE, the run failed."""
    return (window(S, range=4, slide=2)
            .aggregate(by=["plug_id", "house_id"], **{"from": count()}, window=sum_("household_id"))
            .aggregate(by=["plug_id"], sumLow=sum_("window"))
            .project("plug_id", "sumLow", x1="0").rstream("Q"))


@pytest.mark.spark
def test_spark_aggregate_named_window(spark, plug_data, tmp_path):
    run_checked(spark, aggregate_named_window(), "spe", plug_data, tmp_path, 8)


@pytest.mark.spark
def test_spark_aggregate_by_the_key_of_the_join_below(spark, plug_data, tmp_path):
    run_checked(spark, aggregate_by_the_join_key(), "spe", plug_data, tmp_path, 8)


def test_duckdb_aggregate_by_the_key_of_the_join_below(plug_rows):
    check_db(aggregate_by_the_join_key(), plug_rows, per_batch_s=5)
