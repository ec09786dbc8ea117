"""DuckDB alone: CQ1-CQ6 as hand-written incremental loops, the physical-limit anchor beside
fedq's plans (issue 45, part 4; the Nexmark one is `benchmarks.peers_duckdb`).

What a DuckDB user would write without fedq, one loop per query over the event-second
Parquet files of `fedq generate` (part-NNNNNNNN.parquet, file N holding the readings of
second N after the first reading's second):

- every file is read once (`read_parquet`), its loads (`property = 1`) folded into one
  slice row per plug and second: count, sum and maximum of the value;
- CQ1 and CQ2 (rows against their window's aggregate) also keep the window's load rows;
- at each instant tau (every second; the window [tau - range, tau)) one statement
  aggregates the slices of each window, joins and projects as the query says (CQ1/CQ2:
  joins the rows with the window's maximum or average), and fetches the rows as Arrow (as
  a sink would take them); every tenth instant the slices and rows older than the largest
  window are deleted.

The instants are those of fedq and the reference: every second after the first reading up
to the last reading plus the largest range (the windows empty out after the input ends),
the rows with `tau` first. `run(data, name, scale)` returns them; `check` compares with the
reference evaluator. `python -m benchmarks.peers_smartplug_duckdb --check` runs that
comparison on a small input (no JVM).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

KEYS = "house_id, household_id, plug_id"
HOUSEHOLD = "house_id, household_id"
#: window ranges in seconds at scale 1 (federation/smartplug/queries.py)
MINUTES = {"CQ1": (5,), "CQ2": (5,), "CQ3": (5, 1), "CQ4": (5, 1), "CQ5": (5,),
           "CQ6": (1, 3, 5)}
SUPPORTED = tuple(MINUTES)


def _agg(r: int, k: int, cols: str) -> str:
    """Each plug's aggregates over the slices of the window of `r` seconds at slice k."""
    return f"SELECT {KEYS}, {cols} FROM sl WHERE s > {k - r} GROUP BY {KEYS}"


def instant_sql(name: str, ranges: tuple[int, ...], k: int) -> str:
    """The statement of instant tau = second k + 1 (module doc)."""
    if name == "CQ5":
        (r,) = ranges
        return (f"SELECT {HOUSEHOLD}, max(total) AS max_total FROM "
                f"({_agg(r, k, 'sum(total) AS total')}) GROUP BY {HOUSEHOLD}")
    if name == "CQ3":
        r5, r1 = ranges
        return (f"SELECT {KEYS}, max1 - max5 AS max_diff, avg1 - avg5 AS avg_diff FROM "
                f"({_agg(r5, k, 'max(mx) AS max5, sum(total) / sum(n) AS avg5')}) "
                f"JOIN ({_agg(r1, k, 'max(mx) AS max1, sum(total) / sum(n) AS avg1')}) "
                f"USING ({KEYS})")
    if name == "CQ4":
        r5, r1 = ranges
        return (f"SELECT {KEYS}, avg1 - avg2 AS spread FROM "
                f"({_agg(r5, k, 'sum(total) / sum(n) AS avg1')}) "
                f"JOIN ({_agg(r1, k, 'sum(total) / sum(n) AS avg2')}) USING ({KEYS})")
    if name == "CQ6":
        a = [f"({_agg(r, k, f'sum(total) / sum(n) AS avg{m}')})"
             for r, m in zip(ranges, (1, 3, 5))]
        return (f"SELECT {KEYS}, avg1, avg3, avg5 FROM {a[0]} JOIN {a[1]} USING ({KEYS}) "
                f"JOIN {a[2]} USING ({KEYS})")
    (r,) = ranges  # CQ1, CQ2: the window's rows against its maximum or average
    agg, cond, out = (("max(mx) AS m", "value > 0.9 * m", "n_high") if name == "CQ1" else
                      ("sum(total) / sum(n) AS m", "value > m + 1e-9", "n_above"))
    return (f"SELECT {KEYS}, count(*) AS {out} FROM (SELECT * FROM w WHERE s > {k - r}) "
            f"JOIN ({_agg(r, k, agg)}) USING ({KEYS}) WHERE {cond} GROUP BY {KEYS}")


def _files(data: Path) -> dict[int, Path]:
    return {int(p.stem.split("-")[1]): p for p in sorted(data.glob("part-*.parquet"))}


def run(data: Path, name: str, scale: float = 1.0) -> pa.Table:
    """The query's rows over the smart-plug files in `data` (module doc)."""
    if name not in MINUTES:
        raise ValueError(f"no DuckDB loop for {name} (one of {', '.join(SUPPORTED)})")
    ranges = tuple(round(60 * m * scale) for m in MINUTES[name])
    if any(60 * m * scale != r for m, r in zip(MINUTES[name], ranges)):
        raise ValueError(f"scale {scale}: the windows must be whole seconds")
    files = _files(data)
    t0 = pq.read_table(files[min(files)], columns=["ts"]).column(0)[0].as_py().replace(
        microsecond=0)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE sl (s BIGINT, house_id INT, household_id INT, plug_id INT, "
                "n BIGINT, total DOUBLE, mx DOUBLE)")
    rows = name in ("CQ1", "CQ2")
    if rows:
        con.execute("CREATE TABLE w (s BIGINT, house_id INT, household_id INT, plug_id INT, "
                    "value DOUBLE)")
    extent = max(ranges)
    out: list[pa.Table] = []
    for k in range(min(files), max(files) + extent):
        f = files.get(k)
        if f is not None:
            con.execute(f"INSERT INTO sl SELECT {k}, {KEYS}, count(*), sum(value), "
                        f"max(value) FROM read_parquet('{f}') WHERE property = 1 "
                        f"GROUP BY {KEYS}")
            if rows:
                con.execute(f"INSERT INTO w SELECT {k}, {KEYS}, value FROM read_parquet("
                            f"'{f}') WHERE property = 1")
        t = con.sql(instant_sql(name, ranges, k)).to_arrow_table()
        if t.num_rows:
            tau = t0 + dt.timedelta(seconds=k + 1)
            out.append(t.add_column(0, "tau", pa.array([tau] * t.num_rows,
                                                       pa.timestamp("us"))))
        if k % 10 == 9:
            con.execute(f"DELETE FROM sl WHERE s <= {k - extent}")
            if rows:
                con.execute(f"DELETE FROM w WHERE s <= {k - extent}")
    con.close()
    return pa.concat_tables(out) if out else pa.table({"tau": pa.array([], pa.timestamp("us"))})


def check(data: Path, names: tuple[str, ...], rate: float, plugs: int, scale: float) -> dict:
    """Each loop's rows against the reference evaluator's over the same files: name ->
    None (equal) or the difference."""
    from db.reference import reference_result
    from federation.results import diff_results
    from federation.smartplug.queries import QUERIES

    rows = pa.concat_tables(pq.read_table(p) for p in sorted(data.glob("part-*.parquet")))
    return {n: diff_results(run(data, n, scale),
                            reference_result(QUERIES[n](rate=rate, scale=scale, plugs=plugs),
                                             rows))
            for n in names}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare every loop with the reference on a small input")
    ap.add_argument("--queries", default=",".join(SUPPORTED))
    a = ap.parse_args(argv)
    if not a.check:
        ap.error("nothing to do: --check (benchmarks.peers_smartplug times the loops)")
    from federation.smartplug.datagen import generate

    with tempfile.TemporaryDirectory() as d:
        rate, plugs, scale = 400, 30, 0.1
        generate(Path(d), rate=rate, seconds=45, plugs=plugs, seed=5)
        bad = {n: p for n, p in check(Path(d), tuple(a.queries.split(",")), rate, plugs,
                                      scale).items() if p}
    for n, p in bad.items():
        print(f"{n}: {p}", file=sys.stderr)
    print("every loop equals the reference" if not bad else f"{len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
