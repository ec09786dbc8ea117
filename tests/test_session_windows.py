"""Session windows (docs/sql.md, "Session windows"): readings of one key at most the gap
apart, one after the other, are one session [first, last + gap); it is emitted at the
first instant at or after its end, with its readings before that instant (a reading at
exactly that instant begins the next session).

The rows below are written for the edges: a gap of exactly 2 s whose end is an instant
(a new session) and one whose end is not (the same session), two readings at one time,
NULL keys, a key alone at the end. The expected sessions are worked out by hand; the
reference, pure DuckDB at several batch sizes, pure Spark and a plan cut between the
engines must all give them."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from db.tables import delete_closed_sessions
from federation import sql
from federation.errors import QueryValidationError
from federation.expressions import count, median, percentile, stddev, sum_, variance
from federation.logical import window
from federation.results import diff_results
from federation.sqlfront import SqlError
from federation.streams import StreamDecl, StreamStats
from tests.test_stranger_queries import pure_db

T0 = dt.datetime(2013, 9, 1)
CLICKS = StreamDecl(name="clicks", schema={"ts": "TIMESTAMP", "user": "INT", "amount": "DOUBLE"},
                    stats=StreamStats(rate_tps=2.0, distinct={"user": 3}))
#: (seconds after T0, user, amount)
ROWS = [(0.0, 1, 1.0), (2.0, 1, 2.0), (2.5, 1, 3.0), (4.5, 1, 4.0), (10.0, 1, 5.0),
        (0.3, 2, 10.0), (2.3, 2, 20.0), (2.3, 2, 30.0), (4.3, 2, 40.0),
        (1.0, None, 0.5), (3.0, None, 0.25), (20.0, 3, 7.0)]
#: (tau, window_start, window_end, user, n, total): gap 2 s, slide 1 s, by user
SESSIONS = [
    (2, 0.0, 2.0, 1, 1, 1.0),  # 2.0 is 2 s after 0.0 and 2.0 is an instant: a new session
    (3, 1.0, 3.0, None, 1, 0.5),  # the same for the NULL key at 1.0 and 3.0
    (5, 3.0, 5.0, None, 1, 0.25),
    (7, 2.0, 6.5, 1, 3, 9.0),  # 4.5 is 2 s after 2.5, and 4.5 is no instant: one session
    (7, 0.3, 6.3, 2, 4, 100.0),  # two readings at 2.3
    (12, 10.0, 12.0, 1, 1, 5.0),
    (22, 20.0, 22.0, 3, 1, 7.0),
]

#: the sessions of the readings but user 1's at 2.5 (`where="amount <> 3"`): 2.0 and 4.5 are
#: more than the gap apart then, two sessions where there was one
SESSIONS_WHERE = [r for r in SESSIONS if r[:2] != (7, 2.0)] + [
    (4, 2.0, 4.0, 1, 1, 2.0), (7, 4.5, 6.5, 1, 1, 4.0)]


#: the sessions per `"user" < 3` (a key computed of each reading): users 1 and 2 make one
#: session of 8 readings at most 2 s apart from 0.0 to 4.5, NULL users their own
SESSIONS_KEYED = [(3, 1.0, 3.0, None, 1, 0.5), (5, 3.0, 5.0, None, 1, 0.25),
                  (7, 0.0, 6.5, True, 8, 110.0), (12, 10.0, 12.0, True, 1, 5.0),
                  (22, 20.0, 22.0, False, 1, 7.0)]


def keyed(where: str | None = None):
    """The sessions per a key computed of each reading (`partition_by={name: expr}`)."""
    w = window(CLICKS, gap=2, slide=1, partition_by={"few": '"user" < 3'})
    return (w.filter(where) if where else w).aggregate(
        by=["window_start", "window_end", "few"], n=count(), total=sum_("amount")
    ).rstream("sessions")


def sessions_keyed(keep=lambda k: True) -> pa.Table:
    at = [r for r in SESSIONS_KEYED if keep(r[3])]
    t = sessions(of=[(*r[:3], 0, *r[4:]) for r in at])
    return t.set_column(3, "few", pa.array([r[3] for r in at], pa.bool_()))


def rows() -> pa.Table:
    ts, user, amount = zip(*sorted(ROWS, key=lambda r: r[0]))
    return pa.table({"ts": pa.array([T0 + dt.timedelta(seconds=s) for s in ts],
                                    pa.timestamp("us")),
                     "user": pa.array(user, pa.int32()), "amount": pa.array(amount)})


def sessions(keep=lambda user: True, of=SESSIONS) -> pa.Table:
    at = [r for r in of if keep(r[3])]
    t = (lambda s: T0 + dt.timedelta(seconds=s))
    return pa.table({"tau": pa.array([t(r[0]) for r in at], pa.timestamp("us")),
                     "window_start": pa.array([t(r[1]) for r in at], pa.timestamp("us")),
                     "window_end": pa.array([t(r[2]) for r in at], pa.timestamp("us")),
                     "user": pa.array([r[3] for r in at], pa.int32()),
                     "n": pa.array([r[4] for r in at], pa.int64()),
                     "total": pa.array([r[5] for r in at])})


def query(where: str | None = None, readings: str | None = None, spread: bool = False,
          computed: bool = False):
    """`computed`: the aggregate reads a projection that renames the key and computes
    `amount * 2 - amount` (a view's columns: federation/logical/session_fold.py)."""
    w = window(CLICKS, gap=2, slide=1, partition_by=["user"], where=readings)
    rel = w.filter(where) if where else w
    more = {"sd": stddev("amount"), "vp": variance("amount", population=True),
            "med": median("amount"), "p25": percentile("amount", 0.25),
            "p75d": percentile("amount", 0.25, descending=True),
            "d28": percentile("amount", 0.28, discrete=True),
            "d70d": percentile("amount", 0.7, discrete=True, descending=True)} if spread else {}
    if computed:
        rel = rel.project("window_start", "window_end", u='"user"', a="amount * 2",
                          amount="amount").aggregate(
            by=["window_start", "window_end", "u"], n=count(), total=sum_("a - amount"))
        return rel.project("window_start", "window_end", user="u", n="n",
                           total="total").rstream("sessions")
    return rel.aggregate(by=["window_start", "window_end", "user"], n=count(),
                         total=sum_("amount"), **more).rstream("sessions")


def spread_of(sessions_rows=SESSIONS) -> pa.Table:
    """The sessions with STDDEV_SAMP, VAR_POP, MEDIAN, the interpolated 25th and 75th
    percentiles and the discrete 28th and 70th from the top of their amounts, worked out
    by Python's statistics from ROWS."""
    import math
    import statistics
    from fractions import Fraction

    def disc(xs, p, descending=False):  # PERCENTILE_DISC: position ceil(p n) from 1
        return sorted(xs, reverse=descending)[max(1, math.ceil(Fraction(p) * len(xs))) - 1]

    def q(xs, p):  # PERCENTILE_CONT: position p (n - 1) from 0, interpolated
        xs = sorted(xs)
        k = p * (len(xs) - 1)
        lo = int(k)
        return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (k - lo)

    t = sessions(of=sessions_rows)
    cols: dict[str, list] = {"sd": [], "vp": [], "med": [], "p25": [], "p75d": [], "d28": [],
                             "d70d": []}
    for r in t.to_pylist():
        lo, hi = ((r[c] - T0).total_seconds() for c in ("window_start", "window_end"))
        xs = [a for x, u, a in ROWS if u == r["user"] and lo <= x <= hi - 2]
        assert len(xs) == r["n"]
        cols["sd"].append(statistics.stdev(xs) if len(xs) > 1 else None)
        cols["vp"].append(statistics.pvariance(xs))
        cols["med"].append(float(statistics.median(xs)))
        cols["p25"].append(q(xs, 0.25))
        cols["p75d"].append(q(xs, 0.75))
        cols["d28"].append(disc(xs, "0.28"))
        cols["d70d"].append(disc(xs, "0.7", descending=True))
    for name, values in cols.items():
        t = t.append_column(name, pa.array(values, pa.float64()))
    return t


def test_stddev_variance_median_of_sessions_are_each_engine_s_own():
    # one aggregate reads a session's rows once: Spark's and DuckDB's own functions
    want = spread_of()
    assert diff_results(reference_result(query(spread=True), rows()), want) is None
    assert diff_results(pure_db(query(spread=True), rows(), 2), want) is None


#: one session of 25 readings, amounts 1 to 25 in another order, and one of NULL amounts:
#: PERCENTILE_DISC(0.28) is the 7th of 25 (0.28 * 25 is 7.000000000000001 in floating
#: point, which places it 8th), the 7th from the top DESC
MANY = [(i * 0.1, 1, float((i * 7) % 25 + 1)) for i in range(25)] + [
    (0.5, 2, None), (0.6, 2, None)]


def test_a_session_s_percentile_disc_is_placed_in_integers():
    rows_ = pa.table({"ts": pa.array([T0 + dt.timedelta(seconds=s) for s, _, _ in MANY],
                                     pa.timestamp("us")),
                      "user": pa.array([u for _, u, _ in MANY], pa.int32()),
                      "amount": pa.array([a for _, _, a in MANY], pa.float64())})
    q = window(CLICKS, gap=2, slide=1, partition_by=["user"]).aggregate(
        by=["window_start", "window_end", "user"], d=percentile("amount", 0.28, discrete=True),
        dd=percentile("amount", 0.28, discrete=True, descending=True)).rstream("p")
    t = (lambda *s: pa.array([T0 + dt.timedelta(seconds=x) for x in s], pa.timestamp("us")))
    want = pa.table({"tau": t(5, 3), "window_start": t(0, 0.5), "window_end": t(4.4, 2.6),
                     "user": pa.array([1, 2], pa.int32()),
                     "d": pa.array([7.0, None]), "dd": pa.array([19.0, None])})
    assert diff_results(reference_result(q, rows_), want) is None
    for per_batch_s in (1, 4):
        assert diff_results(pure_db(q, rows_, per_batch_s), want) is None
    text = ("SELECT window_start, window_end, \"user\", PERCENTILE_DISC(0.28) WITHIN GROUP (ORDER BY amount) AS d, "
            "PERCENTILE_DISC(0.28) WITHIN GROUP (ORDER BY amount DESC) AS dd FROM "
            "SESSION(TABLE clicks PARTITION BY \"user\", DESCRIPTOR(ts), INTERVAL '2' SECOND)"
            " GROUP BY window_start, window_end, \"user\"")
    assert diff_results(pure_db(sql(text, {"clicks": CLICKS}), rows_, 2), want) is None


@pytest.mark.spark
def test_spark_s_session_aggregates_are_duckdb_s_bits(spark):
    """Spark's lowerings on a batch: PERCENTILE_DISC of the 25 amounts placed in integers,
    and STDDEV, VARIANCE, MEDIAN, percentiles of values in another order the same bits as
    DuckDB's (a streaming run of sessions is test_spark_and_a_cut_plan_give_the_sessions's
    "spread")."""
    from federation.expressions import to_expression
    from spe.aggregates import agg_column
    from spe.sessions import session_values

    df = spark.createDataFrame([(u, a) for _, u, a in MANY], "user int, amount double")
    got = df.groupBy("user").agg(*(agg_column(
        "percentile_disc", to_expression("amount"), n, "DOUBLE", fraction=(7, 25),
        descending=n == "dd") for n in ("d", "dd"))).orderBy("user").collect()
    assert [tuple(r) for r in got] == [(1, 7.0, 19.0), (2, None, None)]
    xs = spread_values()
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest($1) AS x", [sorted(xs)])
    df = spark.createDataFrame([(x,) for x in reversed(xs)], "x double").repartition(2)
    lists = df.agg(*(agg_column(c.func, c.arg, n, "DOUBLE", fraction=c.fraction,
                                descending=c.descending) for n, c in NATIVES.items()))
    assert tuple(session_values(lists, NATIVES.items()).collect()[0]) == duckdb_natives(con)


def test_the_reference_gives_the_sessions_worked_out_by_hand():
    assert diff_results(reference_result(query(), rows()), sessions()) is None
    got = reference_result(query(readings="amount <> 3"), rows())
    assert diff_results(got, sessions(of=SESSIONS_WHERE)) is None
    got = reference_result(query(readings="amount <> 3", computed=True), rows())
    assert diff_results(got, sessions(of=SESSIONS_WHERE)) is None


def test_a_computed_key_s_sessions_are_those_worked_out_by_hand():
    assert diff_results(reference_result(keyed(), rows()), sessions_keyed()) is None
    for per_batch_s in (1, 3, 7):
        assert diff_results(pure_db(keyed(), rows(), per_batch_s), sessions_keyed()) is None


#: a session's STDDEV, VARIANCE, MEDIAN, percentiles, each computed from its values in order
NATIVES = {"sd": stddev("x", population=True), "vs": variance("x"), "med": median("x"),
           "p28": percentile("x", 0.28), "p30d": percentile("x", 0.3, descending=True)}


def spread_values(seed: int = 5) -> list[float]:
    import random

    rng = random.Random(seed)
    return [rng.uniform(-1e3, 1e3) * 10 ** rng.randint(-3, 6) for _ in range(30)]


def duckdb_natives(con, table: str = "t") -> tuple:
    from db.sqlgen.session_values import finished, values_list

    lists = ", ".join(f"{values_list('x', c.descending)} AS {n}" for n, c in NATIVES.items())
    return con.execute(finished(f"SELECT {lists} FROM {table}", list(NATIVES), NATIVES)
                       ).fetchall()[0]


def test_a_session_s_own_spread_in_duckdb_is_the_same_bits_in_any_row_order():
    """Two DB-ops fed in other orders (one by Spark, one by the direct feed) must agree bit
    for bit where an EXCEPT compares their STDDEV_POP (a targeted fuzz run found one kept
    row), and with the reference where a ranking orders by them (seed 243). DuckDB's own
    STDDEV and VARIANCE add in row order; the SQL computes from the values sorted."""
    import random

    xs = spread_values()
    rng = random.Random(5)
    con = duckdb.connect()
    got, plain = set(), set()
    for _ in range(20):
        rng.shuffle(xs)
        con.execute("CREATE OR REPLACE TABLE t AS SELECT unnest($1) AS x", [xs])
        got.add(duckdb_natives(con))
        plain.add(con.execute("SELECT stddev_pop(x), var_samp(x) FROM t").fetchall()[0])
    assert len(plain) > 1 and len(got) == 1  # DuckDB's own differ by order; the SQL's not
    own = con.execute("SELECT stddev_pop(x), var_samp(x), median(x), quantile_cont(x, 0.28), "
                      "quantile_cont(x, 0.7) FROM t").fetchall()[0]
    assert got.pop() == pytest.approx(own, rel=1e-12)


def test_a_run_in_duckdb_computes_the_key_of_the_readings_it_reads(tmp_path):
    """No JVM: the direct feed hands DuckDB the stream's rows, which gain the key as they
    are stored (the fuzzer found them refused for a column the spool lacks)."""
    from federation.api import run

    write_clicks(tmp_path / "clicks")
    r = run(keyed(), "db", tmp_path / "clicks", work_dir=tmp_path / "w", seconds_per_batch=3)
    assert diff_results(r.rows, sessions_keyed(lambda k: k is not None)) is None


@pytest.mark.parametrize("per_batch_s", [1, 3, 7])
def test_pure_duckdb_gives_them_at_any_batch_size(per_batch_s):
    assert diff_results(pure_db(query(), rows(), per_batch_s), sessions()) is None
    got = pure_db(query(readings="amount <> 3"), rows(), per_batch_s)
    assert diff_results(got, sessions(of=SESSIONS_WHERE)) is None
    got = pure_db(query(readings="amount <> 3", computed=True), rows(), per_batch_s)
    assert diff_results(got, sessions(of=SESSIONS_WHERE)) is None


def test_sql_session_is_the_dsl_session():
    text = ('SELECT window_start, window_end, "user", COUNT(*) AS n, SUM(amount) AS total '
            'FROM SESSION(TABLE clicks PARTITION BY "user", DESCRIPTOR(ts), INTERVAL '
            "'2' SECOND) GROUP BY window_start, window_end, \"user\"")
    q = sql(text, {"clicks": CLICKS})
    assert diff_results(pure_db(q, rows(), 2), sessions()) is None


def test_the_duckdb_table_keeps_only_the_open_sessions_rows():
    """With instant 4 done, the next one 5: user 1's session from 2.0 (it ends at 6.5),
    user 2's (6.3), the NULL key's from 3.0 (5.0) and the rows from 4 on are still
    needed; the sessions that closed by 4 (0.0 and 1.0) are gone."""
    con = duckdb.connect()
    con.register("t", rows().append_column("_ts", rows().column("ts")))
    con.execute("CREATE TABLE w AS SELECT * FROM t")
    con.execute(delete_closed_sessions("w", ["user"], 2_000_000, 1_000_000),
                [T0 + dt.timedelta(seconds=5)])
    kept = sorted((r[0] - T0).total_seconds() for r in con.sql("SELECT ts FROM w").fetchall())
    assert kept == [0.3, 2.0, 2.3, 2.3, 2.5, 3.0, 4.3, 4.5, 10.0, 20.0]
    # sessions of the readings but 2.5's: user 1's from 2.0 closed at 4, and 2.5 goes
    con.execute("DELETE FROM w; INSERT INTO w SELECT * FROM t")
    con.execute(delete_closed_sessions("w", ["user"], 2_000_000, 1_000_000, '"amount" <> 3'),
                [T0 + dt.timedelta(seconds=5)])
    kept = sorted((r[0] - T0).total_seconds() for r in con.sql("SELECT ts FROM w").fetchall())
    assert kept == [0.3, 2.3, 2.3, 3.0, 4.3, 4.5, 10.0, 20.0]


@pytest.mark.parametrize("bad,why", [
    (lambda w: w.aggregate(by=["window_start", "window_end"], n=count()),
     "a session's aggregate is grouped by window_start, window_end, user"),
    (lambda w: w.project("window_start", "window_end", "amount", u='"user" % 2').aggregate(
        by=["window_start", "window_end", "u"], n=count()),
     "'u' is \"user\" % 2 over the rows of session clicks"),
    (lambda w: w.filter("amount > 1").aggregate(by=["window_start", "window_end", "user"],
                                                n=count()),
     "only its partition keys (user) may be selected on"),
    (lambda w: w.filter("amount > 1").distinct(), "may be selected on below an aggregate"),
])
def test_what_reads_a_session_window_but_its_aggregate_is_refused(bad, why):
    with pytest.raises(QueryValidationError, match=why.replace("(", r"\(").replace(")", r"\)")):
        bad(window(CLICKS, gap=2, slide=1, partition_by=["user"])).rstream()


@pytest.mark.parametrize("text,why", [
    # Flink's legacy group window is its TVF (sqlfront/group_windows.py), but over a join
    (("SELECT COUNT(*) AS n FROM clicks AS a JOIN clicks AS b ON a.\"user\" = b.\"user\" "
      "GROUP BY a.\"user\" % 2, SESSION(a.ts, INTERVAL '2' SECOND)"),
     "a group window over a join"),
    (("SELECT \"user\", COUNT(*) AS n FROM TUMBLE(TABLE clicks PARTITION BY \"user\", "
     "DESCRIPTOR(ts), INTERVAL '2' SECOND) GROUP BY window_start, window_end, \"user\""),
     "only SESSION partitions its stream"),
    (("SELECT COUNT(*) AS n FROM SESSION(TABLE clicks, DESCRIPTOR(ts), INTERVAL '0' SECOND) "
     "GROUP BY window_start, window_end"), "gap"),
    # Flink's window_time of a session is its end - 1 ms, not the instant (which fedq's
    # window_time of a TUMBLE or HOP is, dropped for the tau column)
    (("SELECT \"user\", window_time FROM SESSION(TABLE clicks PARTITION BY \"user\", "
      "DESCRIPTOR(ts), INTERVAL '2' SECOND)"), "window_time of a SESSION is a time of the"),
])
def test_session_sql_a_user_gets_wrong_is_refused_where_written(text, why):
    with pytest.raises(SqlError, match=why.replace("(", r"\(")):
        sql(text, {"clicks": CLICKS})


def write_clicks(d) -> None:
    """ROWS as a data directory: one file per event second."""
    d.mkdir(parents=True)
    t = rows()
    secs = [int((x - T0).total_seconds()) for x in t.column("ts").to_pylist()]
    for i, s in enumerate(sorted(set(secs))):
        pq.write_table(t.filter(pa.array([x == s for x in secs])), d / f"part-{i:08d}.parquet")
    (d / "_stream.json").write_text(CLICKS.model_dump_json(by_alias=True))


@pytest.mark.spark
@pytest.mark.parametrize("where,readings,placement", [
    (None, None, "spe"),
    # the selection of the key in Spark, the sessions in DuckDB from the rows it passes on
    ('"user" <> 2', None, "op1=spe,op2=db"),
    # sessions of selected readings, in Spark (read through a projection that computes
    # and renames), and in DuckDB from Spark's selected rows
    (None, "amount <> 3", "computed"),
    ('"user" <> 2', "amount <> 3", "op1=spe,op2=db"),
    # STDDEV, VARIANCE, MEDIAN, percentiles: of the sessions Spark forms, and of the
    # sessions' rows DuckDB hands over (a plain aggregate in Spark; the fuzzer's seed 249)
    (None, "spread", "spe"), ('"user" <> 2', "spread", "op1=db,op2=spe"),
    # a key computed of each reading, in Spark, and in DuckDB from Spark's rows
    (None, "keyed", "spe"), ("few OR NOT few", "keyed", "op1=spe,op2=db"),
])
def test_spark_and_a_cut_plan_give_the_sessions(tmp_path, spark, where, readings, placement):
    from federation.api import run

    write_clicks(tmp_path / "clicks")
    if readings == "keyed":  # a key computed of each reading: by Spark, then by DuckDB
        r = run(keyed(where), placement, tmp_path / "clicks", work_dir=tmp_path / "w",
                seconds_per_batch=3, spark=spark)  # of the rows Spark computes it for
        assert diff_results(r.rows, sessions_keyed(lambda k: k is not None)) is None
        return
    if readings == "spread":
        r = run(query(where, spread=True), placement, tmp_path / "clicks",
                work_dir=tmp_path / "w", seconds_per_batch=3, spark=spark)
        want = spread_of([x for x in SESSIONS if x[3] is not None and (x[3] != 2 or not where)])
        assert diff_results(r.rows, want) is None
        return
    q = query(where, readings, computed=placement == "computed")
    r = run(q, "spe" if placement == "computed" else placement, tmp_path / "clicks", work_dir=tmp_path / "w", seconds_per_batch=3,
            spark=spark)
    # the readings without a user are dead letters of the run's ingest (a NULL key of a
    # session is DuckDB's case above)
    want = sessions(lambda u: u is not None and (u != 2 or not where),
                    SESSIONS_WHERE if readings else SESSIONS)
    assert diff_results(r.rows, want) is None


def test_an_adaptive_run_of_sessions_is_refused_with_the_reason(tmp_path):
    from federation.adaptive import AdaptiveError, run_adaptive

    write_clicks(tmp_path / "clicks")
    with pytest.raises(AdaptiveError, match="no replay of a bounded extent rebuilds"):
        run_adaptive(query(), tmp_path / "clicks", work_dir=tmp_path / "w")


def test_an_aggregate_of_the_sessions_bounds_runs_in_duckdb():
    """Found by the fuzzer (seed 98): COUNT(DISTINCT window_start) over sessions. Spark has
    a session's bounds only as its group's keys: placed in DuckDB (an engine limit the
    placement names), equal to the reference there."""
    from federation.errors import PlacementError
    from federation.expressions import count_distinct, min_
    from federation.optimizer import plan_for

    q = (window(CLICKS, gap=2, slide=1, partition_by=["user"])
         .aggregate(by=["window_start", "window_end", "user"], d=count_distinct("window_end"),
                    lo=min_("window_start")).rstream("bounds"))
    assert plan_for(q, "auto")[0].placement == {"op1": "db"}
    with pytest.raises(PlacementError, match="read window_start or window_end"):
        plan_for(q, "spe")
    want = sessions().select(["tau", "window_start", "window_end", "user"])
    want = want.append_column("d", pa.array([1] * want.num_rows, pa.int64()))
    want = want.append_column("lo", want.column("window_start"))
    assert diff_results(pure_db(q, rows(), 3), want) is None


#: the rows of the sessions that close at each instant (what reads a SESSION but its
#: aggregate): (tau, user, amount, window_start, window_end) of the readings above 1.5,
#: from the sessions worked out by hand above (SESSIONS)
CLOSED = [(7, 1, 2.0, 2.0, 6.5), (7, 1, 3.0, 2.0, 6.5), (7, 1, 4.0, 2.0, 6.5),
          (7, 2, 10.0, 0.3, 6.3), (7, 2, 20.0, 0.3, 6.3), (7, 2, 30.0, 0.3, 6.3),
          (7, 2, 40.0, 0.3, 6.3), (12, 1, 5.0, 10.0, 12.0), (22, 3, 7.0, 20.0, 22.0)]
#: Flink's window Top-N over sessions: the two largest amounts of each session, numbered
TOP2 = [(2, 1, 1.0, 0.0, 2.0, 1), (3, None, 0.5, 1.0, 3.0, 1), (5, None, 0.25, 3.0, 5.0, 1),
        (7, 1, 4.0, 2.0, 6.5, 1), (7, 1, 3.0, 2.0, 6.5, 2), (7, 2, 40.0, 0.3, 6.3, 1),
        (7, 2, 30.0, 0.3, 6.3, 2), (12, 1, 5.0, 10.0, 12.0, 1), (22, 3, 7.0, 20.0, 22.0, 1)]
#: the readings of the sessions closing at each instant per user, without the sessions'
#: bounds (an aggregate grouped by neither): (tau, user, n, total)
BY_USER = [(2, 1, 1, 1.0), (3, None, 1, 0.5), (5, None, 1, 0.25), (7, 1, 3, 9.0),
           (7, 2, 4, 100.0), (12, 1, 1, 5.0), (22, 3, 1, 7.0)]
SESSION_SQL = 'SESSION(TABLE clicks PARTITION BY "user", DESCRIPTOR(ts), INTERVAL \'2\' SECOND)'
CLOSED_SQL = {
    "closed": f'SELECT "user", amount, window_start, window_end FROM {SESSION_SQL} '
              "WHERE amount > 1.5",
    "top2": ('SELECT "user", amount, window_start, window_end, rn FROM (SELECT "user", '
             "amount, window_start, window_end, ROW_NUMBER() OVER (PARTITION BY window_start, "
             f'window_end, "user" ORDER BY amount DESC) AS rn FROM {SESSION_SQL}) WHERE rn <= 2'),
    "by_user": f'SELECT "user", COUNT(*) AS n, SUM(amount) AS total FROM {SESSION_SQL} '
               'GROUP BY "user"',
    # grouped by one bound: the rows of the sessions closing at tau, grouped (a session is
    # its start and key, so this is the sessions' count, without window_end)
    "by_start": f'SELECT "user", window_start, COUNT(*) AS n FROM {SESSION_SQL} '
                'GROUP BY window_start, "user"',
}


def closed_rows(which: str, keep=lambda user: True) -> pa.Table:
    """The hand-worked rows of CLOSED_SQL[which], of the users `keep` holds."""
    t = (lambda s: T0 + dt.timedelta(seconds=s))
    if which == "by_start":
        return sessions(keep).select(["tau", "user", "window_start", "n"])
    at = [r for r in {"closed": CLOSED, "top2": TOP2, "by_user": BY_USER}[which]
          if keep(r[1])]
    cols = {"tau": pa.array([t(r[0]) for r in at], pa.timestamp("us")),
            "user": pa.array([r[1] for r in at], pa.int32())}
    if which == "by_user":
        return pa.table({**cols, "n": pa.array([r[2] for r in at], pa.int64()),
                         "total": pa.array([r[3] for r in at])})
    cols["amount"] = pa.array([r[2] for r in at])
    for i, c in ((3, "window_start"), (4, "window_end")):
        cols[c] = pa.array([t(r[i]) for r in at], pa.timestamp("us"))
    if which == "top2":
        cols["rn"] = pa.array([r[5] for r in at], pa.int64())
    return pa.table(cols)


@pytest.mark.parametrize("which", ["closed", "top2", "by_user", "by_start"])
def test_the_rows_of_the_sessions_that_close_at_each_instant(which):
    """A SESSION read by anything but its sessions' aggregate: each instant's relation is
    the readings of the sessions that close there, with their bounds (a selection of other
    columns than the keys, a window Top-N per session, an aggregate per user)."""
    q = sql(CLOSED_SQL[which], {"clicks": CLICKS})
    want = closed_rows(which)
    assert diff_results(reference_result(q, rows()), want) is None
    for per_batch_s in (1, 4):
        assert diff_results(pure_db(q, rows(), per_batch_s), want) is None


def test_the_dsl_reads_the_rows_of_closed_sessions_as_sql_does():
    w = window(CLICKS, gap=2, slide=1, partition_by=["user"])
    q = w.filter("amount > 1.5").project("user", "amount", "window_start",
                                         "window_end").rstream("closed")
    assert diff_results(pure_db(q, rows(), 3), closed_rows("closed")) is None
    # a window's own rows (SQL's SELECT * FROM SESSION(...)): every reading once
    every = pure_db(window(CLICKS, gap=2, slide=1, partition_by=["user"]).rstream(), rows(), 2)
    assert every.num_rows == len(ROWS)


def test_one_session_window_read_by_its_aggregate_and_as_rows_in_a_query_set():
    """Two queries over one SESSION (a query set shares it): its sessions' aggregate and
    the rows of the sessions closing at each instant, each as alone."""
    from federation.logical.queryset import query_set

    qs = query_set([query(), sql(CLOSED_SQL["closed"], {"clicks": CLICKS})])
    got = pure_db(qs, rows(), 3)
    assert diff_results(got["sessions"], sessions()) is None
    assert diff_results(got[qs.queries[1].name], closed_rows("closed")) is None


def short_gap_top1():
    w = window(CLICKS, gap=0.2, slide=4, partition_by=["user"])
    return w.top(1, [("amount", True)], ["window_start", "window_end", "user"]).project(
        "user", "amount", "window_start").rstream("first")


def test_two_sessions_of_one_key_closing_at_one_instant_are_two_partitions():
    """A gap shorter than the slide: user 1's readings at 0.0, 2.0 and 2.5 make three
    sessions that all close at instant 4, each its own partition of the Top-1."""
    q = short_gap_top1()
    got = pure_db(q, rows(), 2)
    assert diff_results(got, reference_result(q, rows())) is None
    ones = got.filter(pa.compute.equal(got.column("user"), 1)).to_pylist()
    assert [(r["tau"] - T0).total_seconds() for r in ones] == [4, 4, 4, 8, 12]
    assert sorted(r["amount"] for r in ones[:3]) == [1.0, 2.0, 3.0]


@pytest.mark.spark
@pytest.mark.parametrize("which,placement", [
    ("closed", "spe"), ("top2", "spe"), ("by_user", "spe"),
    # the sessions' rows formed in Spark, read by DuckDB; formed in DuckDB, read by Spark
    ("closed", "op1=spe,op2=db"), ("top2", "op1=db,op2=spe,op3=spe"),
    ("short_gap", "spe"),  # three sessions of one key close at one instant
])
def test_spark_and_cut_plans_give_the_rows_of_closed_sessions(tmp_path, spark, which,
                                                             placement):
    from federation.api import run

    write_clicks(tmp_path / "clicks")
    q = short_gap_top1() if which == "short_gap" else sql(CLOSED_SQL[which], {"clicks": CLICKS})
    r = run(q, placement, tmp_path / "clicks", work_dir=tmp_path / "w", seconds_per_batch=3,
            spark=spark)
    # the readings without a user are dead letters of the run's ingest (DuckDB's case above)
    if which == "short_gap":
        want = reference_result(q, rows().filter(pa.compute.is_valid(rows().column("user"))))
    else:
        want = closed_rows(which, lambda u: u is not None)
    assert diff_results(r.rows, want) is None
