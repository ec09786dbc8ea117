"""What a Python function's call costs each engine per row, besides the function's own time.

Run: python -m benchmarks.udf_cost [--rows 4000000] [--spark-rows 2000000] [--repeats 7]
Writes benchmarks/results/udf_cost.json: per engine the median seconds of `SUM(x)` and of
`SUM(f(x))` over the same rows (f the identity over Arrow arrays, registered the way a run
registers a plan's functions: db/functions.py, spe/functions.py), their difference per row
(the profile's `db_udf_s_per_row` and `spe_udf_s_per_row`: the Arrow hand-over to the
function and back, in DuckDB's process, or to Spark's Python workers and back), and the
per-repeat timings. DuckDB on one thread (a MIG's), Spark in local[2] over a cached
DataFrame (batch, not streaming: the hand-over is the same Arrow path). Nothing else may
run meanwhile.
"""

from __future__ import annotations

import argparse
import statistics
import time

import pyarrow as pa

from benchmarks.common import say, write_result
from federation.python_functions import Function, udf


def _identity(x: pa.Array) -> pa.Array:
    return x


#: the identity as a run registers a plan's function (its arguments' and result's checks)
IDENTITY = udf(_identity, returns="DOUBLE", name="fz_id")


def _timed(f, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out


def duckdb_cost(rows: int, repeats: int) -> dict:
    import duckdb

    from db.functions import register_functions

    con = duckdb.connect(config={"threads": 1})
    register_functions(con, [Function("fz_id", "DOUBLE", IDENTITY.apply)])
    con.execute(f"CREATE TABLE t AS SELECT random() * 100 AS x FROM range({rows})")
    plain = _timed(lambda: con.sql("SELECT SUM(x) FROM t").fetchall(), repeats)
    called = _timed(lambda: con.sql("SELECT SUM(fz_id(x)) FROM t").fetchall(), repeats)
    return _summary(rows, plain, called)


def spark_cost(rows: int, repeats: int) -> dict:
    from spe.functions import register_functions
    from spe.session import get_spark

    spark = get_spark()
    register_functions(spark, [Function("fz_id", "DOUBLE", IDENTITY.apply)])
    df = spark.range(rows).selectExpr("CAST(id AS DOUBLE) * 0.5 AS x").cache()
    df.count()
    plain = _timed(lambda: df.selectExpr("SUM(x)").collect(), repeats)
    called = _timed(lambda: df.selectExpr("SUM(fz_id(x))").collect(), repeats)
    return _summary(rows, plain, called)


def _summary(rows: int, plain: list[float], called: list[float]) -> dict:
    p, c = statistics.median(plain[1:]), statistics.median(called[1:])  # the first warms
    return {"rows": rows, "plain_s": plain, "called_s": called, "plain_median_s": p,
            "called_median_s": c, "s_per_row": max(c - p, 0.0) / rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--spark-rows", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="udf_cost.json")
    a = ap.parse_args(argv)
    say("DuckDB ...")
    db = duckdb_cost(a.rows, a.repeats)
    say(f"  {db['s_per_row'] * 1e9:.1f} ns a row")
    say("Spark ...")
    spe = spark_cost(a.spark_rows, a.repeats)
    say(f"  {spe['s_per_row'] * 1e9:.1f} ns a row")
    path = write_result(a.out, {
        "command": "python -m benchmarks.udf_cost " + " ".join(argv or []),
        "what": "per row and call of an identity Python function, the median of SUM(f(x)) "
                "less that of SUM(x) (first repeat left out)",
        "duckdb": db, "spark": spe,
        "profile": {"db_udf_s_per_row": db["s_per_row"],
                    "spe_udf_s_per_row": spe["s_per_row"]}})
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
