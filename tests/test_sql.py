"""The SQL front end (federation/sqlfront/): CQ1-CQ6 in SQL are the DSL's plans, the
supported forms mean what their DSL forms mean, and what the engine cannot run is refused
with the clause and its position. JVM-free."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.reference import reference_result
from federation import sql
from federation.expressions import avg, count, max_, min_
from federation.logical import window
from federation.results import diff_results
from federation.smartplug import PLUG_KEYS, smartplug_stream
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES
from federation.sqlfront import SqlError

SQL_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "queries_sql"
S = smartplug_stream(rate=50, plugs=12)
STREAMS = {"smartplug": S}
H10 = "HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
H30 = "HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '30' SECOND)"


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_cq_in_sql_is_the_dsl_plan(name):
    # equal plans (every field of every node, the stream's statistics too) place alike:
    # the optimizer reads nothing else
    q_sql = sql((SQL_DIR / f"{name.lower()}.sql").read_text(),
                {"smartplug": smartplug_stream()})
    assert q_sql == QUERIES[name]()
    assert q_sql.name == name


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("sqldata")
    generate(d, rate=50, seconds=40, plugs=12, seed=5)
    return pa.concat_tables(pq.read_table(p) for p in sorted(d.glob("part-*.parquet")))


def _same(sql_text: str, dsl, rows) -> None:
    """Same plan, or else the same reference result on the data."""
    q = sql(sql_text, STREAMS)
    if q != dsl:
        problem = diff_results(reference_result(q, rows), reference_result(dsl, rows))
        assert problem is None, problem


def test_tumble_and_interval_spellings(rows):
    dsl = window(S, range=10, slide=10).aggregate(by=["plug_id"], n=count()).rstream()
    for size in ("INTERVAL '10' SECOND", "INTERVAL '10 seconds'", "10"):
        assert sql(f"SELECT plug_id, COUNT(*) AS n FROM TUMBLE(TABLE smartplug, "
                   f"DESCRIPTOR(ts), {size}) GROUP BY window_start, window_end, plug_id",
                   STREAMS) == dsl
    hop = sql("SELECT plug_id, COUNT(*) AS n FROM HOP(TABLE smartplug, DESCRIPTOR(ts), "
              "INTERVAL '2' SECOND, INTERVAL '1' MINUTE) GROUP BY plug_id", STREAMS)
    w = next(n for n in hop.walk() if n.kind == "window")
    assert (w.slide_s, w.range_s) == (2.0, 60.0)


def test_bare_stream_is_the_now_window_and_group_by_keys_alone_is_distinct(rows):
    # CQL's NOW window: a stream without a window table function reads each row once, at
    # the query's slide (1 s alone; that of the other windows beside one)
    now = sql("SELECT plug_id, value FROM smartplug WHERE property = 1", STREAMS)
    assert now == (window(S, range=1, slide=1).filter("property = 1")
                   .project("plug_id", "value").rstream())
    # a join or an aggregate over a stream without a window would keep one instant's rows
    # where Flink SQL keeps every row so far: refused where it is written
    for text, clause in (
            ((f"SELECT a.plug_id, n FROM smartplug AS a JOIN (SELECT plug_id, COUNT(*) AS n "
             f"FROM {H10} GROUP BY plug_id) AS b ON a.plug_id = b.plug_id"), "JOIN"),
            ("SELECT plug_id, COUNT(*) AS n FROM smartplug GROUP BY plug_id", "GROUP BY"),
            ("SELECT MAX(value) AS m FROM (SELECT value FROM smartplug)", "GROUP BY")):
        with pytest.raises(SqlError, match="without a window") as e:
            sql(text, STREAMS)
        assert e.value.clause == clause, e.value
    every = reference_result(now, rows)
    assert every.num_rows == sum(1 for p in rows.column("property").to_pylist() if p == 1)
    # GROUP BY keys without an aggregate: each group once per instant
    keys = sql(f"SELECT house_id, plug_id FROM {H10} GROUP BY window_end, house_id, plug_id",
               STREAMS)
    got = reference_result(keys, rows)
    counted = reference_result(sql(f"SELECT house_id, plug_id, COUNT(*) AS n FROM {H10} "
                                   "GROUP BY house_id, plug_id", STREAMS), rows)
    assert got.column_names == ["tau", "house_id", "plug_id"]
    assert diff_results(got, counted.drop_columns(["n"])) is None


def test_rows_window_is_the_dsl_tuple_window(rows):
    dsl = (window(S, rows=20, slide=2, partition_by=["plug_id"]).filter("property = 1")
           .aggregate(by=["plug_id"], peak=max_("value")).rstream())
    assert sql("SELECT plug_id, MAX(value) AS peak FROM ROWS_WINDOW(TABLE smartplug, "
               "DESCRIPTOR(ts), INTERVAL '2' SECOND, 20, DESCRIPTOR(plug_id)) "
               "WHERE property = 1 GROUP BY window_end, plug_id", STREAMS) == dsl
    glob = sql("SELECT COUNT(*) AS n FROM ROWS_WINDOW(TABLE smartplug, DESCRIPTOR(ts), 1, 50)",
               STREAMS)
    w = next(n for n in glob.walk() if n.kind == "window")
    assert (w.rows, w.slide_s, w.partition_by, w.range_s) == (50, 1.0, (), None)
    # the rows of each house's window: a result per house and instant, as the DSL's
    got = reference_result(sql("SELECT house_id, MAX(value) AS peak FROM ROWS_WINDOW(TABLE "
                               "smartplug, DESCRIPTOR(ts), 2, 20, DESCRIPTOR(house_id)) WHERE "
                               "property = 1 GROUP BY house_id", STREAMS), rows)
    want = reference_result(window(S, rows=20, slide=2, partition_by=["house_id"])
                            .filter("property = 1").aggregate(by=["house_id"],
                                                              peak=max_("value")).rstream(), rows)
    assert got.num_rows > 50 and diff_results(got, want) is None


def test_having_and_expressions_over_aggregates(rows):
    load = window(S, range=10, slide=1).filter("property = 1")
    agg = load.aggregate(by=["plug_id"], hi=max_("value"), lo=min_("value"))
    dsl = agg.filter("hi > 10").project("plug_id", spread="hi - lo").rstream()
    _same(f"SELECT plug_id, MAX(value) - MIN(value) AS spread FROM {H10} "
          "WHERE property = 1 GROUP BY plug_id HAVING MAX(value) > 10", dsl, rows)


def test_projection_renames_and_join_with_extra_condition(rows):
    a = window(S, range=10, slide=1).filter("property = 1").aggregate(
        by=list(PLUG_KEYS), a10=avg("value"))
    b = window(S, range=30, slide=1).filter("property = 1").aggregate(
        by=list(PLUG_KEYS), a30=avg("value"))
    dsl = a.join(b, on=list(PLUG_KEYS)).filter("a10 > a30").project(
        "plug_id", hot="a10 - a30").rstream()
    text = f"""
        WITH s AS (SELECT house_id, household_id, plug_id, AVG(value) AS a10 FROM {H10}
                   WHERE property = 1 GROUP BY house_id, household_id, plug_id),
             l AS (SELECT house_id, household_id, plug_id, AVG(value) AS a30 FROM {H30}
                   WHERE property = 1 GROUP BY house_id, household_id, plug_id)
        SELECT s.plug_id, a10 - a30 AS hot
        FROM s JOIN l ON s.house_id = l.house_id AND s.household_id = l.household_id
                     AND s.plug_id = l.plug_id AND s.a10 > l.a30"""
    assert sql(text, STREAMS) == dsl
    _same(text, dsl, rows)
    renamed = sql(f"SELECT plug_id AS p, MAX(value) AS m FROM {H10} GROUP BY plug_id",
                  STREAMS)
    assert list(renamed.child.schema) == ["p", "m"]


def test_selectivity_hint_reaches_the_plan():
    q = sql(f"SELECT * FROM {H10} WHERE value > 3 /* selectivity 0.25 */", STREAMS)
    assert q.child.selectivity == 0.25


def test_result_name_from_insert_or_argument():
    text = f"SELECT plug_id, COUNT(*) AS n FROM {H10} GROUP BY plug_id"
    assert sql(text, STREAMS).name == "result"
    assert sql(text, STREAMS, name="mine").name == "mine"
    assert sql("INSERT INTO peaks " + text, STREAMS).name == "peaks"


G = f"(SELECT plug_id, MAX(value) AS m FROM {H10} GROUP BY plug_id)"
G2 = f"(SELECT plug_id, AVG(value) AS a FROM {H30} GROUP BY plug_id)"

#: case: (query, clause named, words of the message)
REFUSED = {
    "outer join on a name both sides have": (
        f"SELECT * FROM {G} x LEFT JOIN {G2} y ON x.plug_id = y.plug_id AND plug_id > 1",
        "JOIN ON", "a name both sides have"),
    "outer join without a side": (
        f"SELECT * FROM {G} x OUTER JOIN {G2} y ON x.plug_id = y.plug_id",
        "OUTER JOIN", "names no side"),
    "semi join without on": (f"SELECT * FROM {G} x SEMI JOIN {G2} y", "SEMI JOIN",
                             "needs ON or USING"),
    "distinct on without order": (f"SELECT DISTINCT ON (plug_id) plug_id FROM {H10}",
                                  "DISTINCT ON", "without ORDER BY"),
    "lag without order": (
        f"SELECT plug_id, LAG(value) OVER (PARTITION BY plug_id) AS p FROM {H10}", "OVER",
        "without an order"),
    "frame on lag": (
        (f"SELECT LAG(value) OVER (PARTITION BY plug_id ORDER BY ts ROWS 2 PRECEDING) AS p "
        f"FROM {H10}"), "OVER", "takes no frame"),
    "range of a number over a timestamp": (
        (f"SELECT SUM(value) OVER (ORDER BY ts RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) AS p "
        f"FROM {H10}"), "OVER", "a timestamp (offsets time spans"),
    "frame without order": (
        f"SELECT SUM(value) OVER (ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS p FROM {H10}",
        "OVER", "a frame needs an ORDER BY"),
    "ignore nulls of ntile": (
        f"SELECT NTILE(2) IGNORE NULLS OVER (ORDER BY ts) AS p FROM {H10}",
        "OVER", "IGNORE NULLS picks a row by its value"),
    "lag in an aggregated select": (
        f"SELECT plug_id, LAG(MAX(value)) OVER (ORDER BY plug_id) AS p FROM {H10} GROUP BY 1",
        "OVER", "aggregate in a subquery"),
    "distinct on a constant": (
        f"SELECT DISTINCT ON (2) plug_id FROM {H10} ORDER BY plug_id",
        "DISTINCT ON", "a column of the result, or an expression"),
    "sum distinct": (
        f"SELECT plug_id, SUM(DISTINCT house_id, value) AS n FROM {H10} GROUP BY plug_id",
        "SELECT", "takes one argument"),
    "order by": (f"SELECT plug_id, value FROM {H10}\nORDER BY value", "ORDER BY",
                 "without LIMIT"),
    "limit": (f"SELECT plug_id, value FROM {H10} LIMIT 10", "LIMIT", "without ORDER BY"),
    "distinct ordered by an expression": (
        f"SELECT DISTINCT plug_id FROM {H10} ORDER BY value * 2 LIMIT 2",
        "ORDER BY", "the order is of the distinct rows, so by their columns"),
    "order by a position past the items": (
        f"SELECT plug_id, value FROM {H10} ORDER BY 3 LIMIT 2", "ORDER BY",
        "ORDER BY 3: the SELECT has 2 items"),
    "row number by a constant": (
        f"SELECT plug_id, ROW_NUMBER() OVER (ORDER BY 1 + 1) AS r FROM {H10}", "ORDER BY",
        "a constant orders and partitions nothing"),
    "limit of no number": (f"SELECT plug_id, value FROM {H10} ORDER BY value LIMIT 0",
                           "LIMIT", "whole number >= 1"),
    "nulls first": (f"SELECT plug_id, value FROM {H10} ORDER BY value NULLS FIRST LIMIT 2",
                    "ORDER BY", "NULLs come last"),
    "unnamed row number": (f"SELECT plug_id, ROW_NUMBER() OVER (ORDER BY value) FROM {H10}",
                           "OVER", "name the row number"),
    "row number beside aggregates": (
        (f"SELECT plug_id, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY plug_id) AS r "
         f"FROM {H10} GROUP BY plug_id"), "OVER", "aggregate in a subquery"),
    "row number without order": (
        f"SELECT plug_id, ROW_NUMBER() OVER (PARTITION BY window_end) AS r FROM {H10}",
        "OVER", "order by at least one column"),
    "unknown function": (f"SELECT plug_id, foo(value) AS f FROM {H10}", "SELECT",
                         "unknown function foo"),
    "unsupported function": (
        f"SELECT plug_id, reverse(CAST(plug_id AS VARCHAR)) AS f FROM {H10}", "SELECT",
        "REVERSE"),
    "unsupported aggregate": (
        f"SELECT plug_id, KURTOSIS(value) AS m FROM {H10} GROUP BY plug_id",
        "SELECT", "KURTOSIS"),
    "intersect": (f"SELECT plug_id, value FROM {H10} INTERSECT SELECT plug_id FROM {H30}",
                  "INTERSECT", "INTERSECT of 2 and 1 columns"),
    "window function": (
        (f"SELECT plug_id, KURTOSIS(value) OVER (PARTITION BY plug_id ORDER BY ts) AS s "
        f"FROM {H10}"), "OVER", "window functions"),
    "having correlated by an ungrouped column": (
        (f"SELECT a.plug_id, SUM(a.value) AS s FROM {H10} AS a GROUP BY a.plug_id HAVING "
         f"EXISTS (SELECT * FROM {H10} AS b WHERE b.plug_id = a.house_id)"), "HAVING",
        "unknown column a.house_id (available: plug_id)"),
    "subquery of rows in filter": (
        (f"SELECT plug_id, COUNT(*) FILTER (WHERE value > (SELECT value FROM {H30})) "
         f"AS n FROM {H10} GROUP BY plug_id"), "FILTER", "a subquery as a value is one aggregate"),
    "grouped by the instant only": (
        f"SELECT window_end FROM {H10} GROUP BY window_start, window_end", "GROUP BY",
        "selects nothing"),
    "unknown stream": ("SELECT x FROM HOP(TABLE sensors, DESCRIPTOR(ts), 1, 60)", "HOP",
                       "unknown stream 'sensors'"),
    "unknown column": (f"SELECT plug, value FROM {H10}", "SELECT", "unknown column 'plug'"),
    "group by a constant": (f"SELECT plug_id, COUNT(*) AS n FROM {H10} GROUP BY 'a'",
                            "GROUP BY", "a constant groups nothing"),
    "group by an aggregate's position": (
        f"SELECT plug_id, COUNT(*) AS n FROM {H10} GROUP BY 2", "GROUP BY", "is an aggregate"),
    "group by a position past the items": (
        f"SELECT plug_id, COUNT(*) AS n FROM {H10} GROUP BY 3", "GROUP BY", "has 2 items"),
    "aggregate in where": (f"SELECT plug_id FROM {H10} WHERE MAX(value) > 3", "WHERE",
                           "aggregate"),
    "nested aggregate": (f"SELECT plug_id, MAX(COUNT(*)) AS m FROM {H10} GROUP BY plug_id",
                         "SELECT", "nested aggregate"),
    "column not grouped": (
        f"SELECT plug_id, value, MAX(value) AS m FROM {H10} GROUP BY plug_id",
        "SELECT", "neither grouped nor aggregated"),
    "window arguments": (
        ("SELECT * FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, "
         "INTERVAL '1' MINUTE, INTERVAL '1' SECOND, 1)"),
        "HOP", ("HOP takes 4 or 5 arguments, HOP(TABLE s, DESCRIPTOR(ts), slide, size "
        "[, offset]); got 6")),
    "event time column": ("SELECT * FROM HOP(TABLE smartplug, DESCRIPTOR(id), 1, 60)", "HOP",
                          "event time 'ts'"),
    "two statements": (f"SELECT * FROM {H10}; SELECT * FROM {H30}", "statement",
                       "one statement"),
    "not a query": ("DELETE FROM smartplug WHERE id = 1", "statement", "DELETE"),
    "qualify an aggregate": (
        f"SELECT plug_id FROM {H10} GROUP BY plug_id QUALIFY COUNT(*) > 1",
        "QUALIFY", "aggregate in HAVING"),
    "qualify of an unknown column": (f"SELECT * FROM {H10} QUALIFY nope > 1", "QUALIFY",
                                     "by its names"),
    "offset without order": (f"SELECT plug_id, value FROM {H10} OFFSET 2", "OFFSET",
                             "without ORDER BY"),
    "unnamed expression": (f"SELECT plug_id, value * 2 FROM {H10}", "SELECT", "AS name"),
    "syntax error": (f"SELECT plug_id, FROM {H10} WHERE", "syntax", "cannot parse"),
    "rows window count": (
        "SELECT plug_id FROM ROWS_WINDOW(TABLE smartplug, DESCRIPTOR(ts), 1, 2.5)",
        "ROWS_WINDOW", "whole number >= 1"),
    "rows window partition": (
        "SELECT plug_id FROM ROWS_WINDOW(TABLE smartplug, DESCRIPTOR(ts), 1, 10, plug_id)",
        "ROWS_WINDOW", "DESCRIPTOR(<partition columns>)"),
    "rows window arguments": (
        "SELECT plug_id FROM ROWS_WINDOW(TABLE smartplug, DESCRIPTOR(ts), 10)",
        "ROWS_WINDOW", "takes 4 or 5 arguments"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unsupported_sql_is_refused_with_clause_and_position(case):
    text, clause, words = REFUSED[case]
    with pytest.raises(SqlError) as e:
        sql(text, STREAMS)
    err = e.value
    assert err.clause == clause, str(err)
    assert words in err.message, str(err)
    assert err.line is not None and err.col is not None, str(err)
    assert str(err).startswith(f"SQL line {err.line}, col {err.col} ({clause})")


def test_position_points_at_the_clause():
    with pytest.raises(SqlError) as e:
        sql(f"SELECT plug_id, value\nFROM {H10}\nORDER BY value", STREAMS)
    assert (e.value.line, e.value.col) == (3, 1)


@pytest.mark.parametrize("name", ["CQ1", "CQ4", "CQ6"])
@pytest.mark.parametrize("rate", [1000, 40000])
def test_fedq_explain_sql_prints_the_dsl_plan(name, rate, capsys):
    from federation.cli import main

    assert main(["explain", name, "--rate", str(rate)]) == 0
    dsl = capsys.readouterr().out.splitlines()
    assert main(["explain", "--sql", str(SQL_DIR / f"{name.lower()}.sql"),
                 "--rate", str(rate)]) == 0
    got = capsys.readouterr().out.splitlines()
    timing = [i for i, t in enumerate(dsl) if t.startswith("phase one:")]
    assert [t for i, t in enumerate(got) if i not in timing] == \
        [t for i, t in enumerate(dsl) if i not in timing]


def test_fedq_explain_a_dsl_query_from_a_file(tmp_path, capsys):
    from federation.cli import main

    f = tmp_path / "mine.py"
    f.write_text(
        "from federation import window, max_\n"
        "from federation.smartplug import smartplug_stream\n"
        "def peaks(rate=2000, plugs=2125):\n"
        "    s = smartplug_stream(rate=rate, plugs=plugs)\n"
        "    return window(s, range='1 min', slide=1).aggregate(by=['plug_id'], "
        "m=max_('value')).rstream('peaks')\n")
    assert main(["explain", "--query", f"{f}:peaks", "--rate", "5000"]) == 0
    assert capsys.readouterr().out.startswith("query peaks: placement ")
    with pytest.raises(SystemExit, match="has no 'nope' \\(it has: peaks\\)"):
        main(["explain", "--query", f"{f}:nope"])
    # two queries run together, each under its own name (cq1.sql is INSERT INTO CQ1)
    with pytest.raises(SystemExit, match="two queries are named 'CQ1'"):
        main(["explain", "CQ1", "--sql", str(SQL_DIR / "cq1.sql")])
    with pytest.raises(SystemExit, match="give a query"):
        main(["explain"])
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT plug_id FROM smartplug ORDER BY plug_id")
    with pytest.raises(SystemExit, match=r"bad.sql: SQL line 1, col 31 \(ORDER BY\)"):
        main(["explain", "--sql", str(bad)])


def test_star_beside_other_items_is_every_column_and_them():
    """`*, value * 2 AS v2` (Flink's `SELECT *, PROCTIME() AS p` form) and `a.*` of one side
    of a join: the columns as the list written out gives them."""
    cols = "id, ts, value, property, plug_id, household_id, house_id"
    assert sql(f"SELECT *, value * 2 AS v2 FROM {H10} WHERE value > 100", STREAMS) == sql(
        f"SELECT {cols}, value * 2 AS v2 FROM {H10} WHERE value > 100", STREAMS)
    a_cols = ", ".join(f"a.{c}" for c in cols.split(", "))
    joined = f"FROM {H10} AS a JOIN {H10} AS b ON a.id = b.id WHERE a.value > 105"
    q = sql(f"SELECT a.*, b.value AS bv {joined}", STREAMS)
    assert q == sql(f"SELECT {a_cols}, b.value AS bv {joined}", STREAMS)
    assert list(sql(f"SELECT b.*, a.id AS aid {joined}", STREAMS).schema) == [
        *cols.split(", "), "aid"]  # named as b names them
    with pytest.raises(SqlError, match="unknown table or alias 'c'"):
        sql(f"SELECT c.*, value FROM {H10} AS a", STREAMS)


def test_a_qualified_column_is_named_as_written():
    """`b.value` of a join whose sides are renamed apart in the plan is `value`, as SQL names
    it, unless another item is named so too; likewise a grouped `b.house_id`."""
    on = f"FROM {H10} AS a JOIN {H10} AS b ON a.id = b.id"
    assert list(sql(f"SELECT a.plug_id, b.value {on}", STREAMS).schema) == ["plug_id", "value"]
    assert list(sql(f"SELECT b.value, a.value {on}", STREAMS).schema) == ["value_b", "value"]
    assert list(sql(f"SELECT b.house_id, COUNT(*) AS n {on} GROUP BY window_end, b.house_id",
                    STREAMS).schema) == ["house_id", "n"]
