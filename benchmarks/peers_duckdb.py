"""DuckDB alone: each Nexmark query as a hand-written incremental loop (a peer of
`benchmarks.peers`), the way a DuckDB user would write it without fedq.

The loop reads the event-second Parquet files in order, one `read_parquet` per file, and
keeps per query only what its windows need: q0-q2 and q21-q22 are a SELECT per file; q5
keeps one row per (2-s slice, auction) with its count and at each 2-s instant sums the
last five slices (the 10-s window) and keeps the auctions whose count is the maximum; q7
and q8 keep the current 10-s window's rows (bids; persons and auctions) and at its end
join them and start over. Each instant's rows are fetched as Arrow (as a sink would take
them). `run(data, name)` returns the rows, with `tau` (the window's end) as fedq gives it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

STATELESS = {
    "q0": "SELECT auction, bidder, price, dateTime, extra FROM read_parquet('{f}')",
    "q1": "SELECT auction, bidder, 0.908::DOUBLE * price AS price, dateTime, extra "
          "FROM read_parquet('{f}')",
    "q2": "SELECT auction, price FROM read_parquet('{f}') WHERE auction % 123 = 0",
}
SUPPORTED = (*STATELESS, "q5", "q7", "q8")


def _files(d: Path) -> dict[int, Path]:
    return {int(p.stem.split("-")[1]): p for p in sorted(d.glob("part-*.parquet"))}


def _tagged(t: pa.Table, tau: datetime) -> pa.Table:
    return t.add_column(0, "tau", pa.array([tau] * t.num_rows, pa.timestamp("us")))


def run(data: Path, name: str, start: datetime | None = None) -> pa.Table:
    """The query's rows over the Nexmark directories under `data` (module doc)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    bids = _files(data / "bid")
    first = start or pq.read_table(next(iter(bids.values())),
                                           columns=["dateTime"]).column(0)[0].as_py()
    t0 = first.replace(microsecond=0)
    out: list[pa.Table] = []
    if name in STATELESS:
        for s, f in bids.items():
            t = con.sql(STATELESS[name].format(f=f)).to_arrow_table()
            out.append(_tagged(t, t0 + timedelta(seconds=s + 1)))
    elif name == "q5":
        con.execute("CREATE TABLE slices (s BIGINT, auction BIGINT, n BIGINT)")
        last = max(bids) + 10
        for s in range(last + 1):
            if s in bids:
                con.execute(f"INSERT INTO slices SELECT {s // 2}, auction, count(*) FROM "
                            f"read_parquet('{bids[s]}') GROUP BY auction")
            if s % 2 == 1:  # the instant at the end of slice s // 2
                k = s // 2
                t = con.sql(f"""
                    WITH w AS (SELECT auction, sum(n)::BIGINT AS num FROM slices
                               WHERE s > {k - 5} AND s <= {k} GROUP BY auction)
                    SELECT auction, num FROM w WHERE num = (SELECT max(num) FROM w)
                """).to_arrow_table()
                out.append(_tagged(t, t0 + timedelta(seconds=s + 1)))
                con.execute(f"DELETE FROM slices WHERE s <= {k - 4}")
    elif name in ("q7", "q8"):
        streams = ["bid"] if name == "q7" else ["person", "auction"]
        files = {k: _files(data / k) for k in streams}
        for k in streams:
            con.execute(f"CREATE TABLE w_{k} AS SELECT * FROM read_parquet("
                        f"'{next(iter(files[k].values()))}') LIMIT 0")
        last = max(max(f) for f in files.values())
        for s in range(last + 1):
            for k in streams:
                if s in files[k]:
                    con.execute(f"INSERT INTO w_{k} SELECT * FROM read_parquet('{files[k][s]}')")
            if s % 10 == 9 or s == last:
                if name == "q7":
                    q = ("SELECT auction, price, bidder, dateTime, extra FROM w_bid "
                         "WHERE price = (SELECT max(price) FROM w_bid)")
                else:
                    q = ("SELECT DISTINCT p.id, p.name FROM w_person p JOIN "
                         "(SELECT DISTINCT seller FROM w_auction) a ON p.id = a.seller")
                t = con.sql(q).to_arrow_table()
                out.append(_tagged(t, t0 + timedelta(seconds=(s // 10 + 1) * 10)))
                for k in streams:
                    con.execute(f"DELETE FROM w_{k}")
    else:
        raise ValueError(f"no DuckDB loop for {name} (one of {', '.join(SUPPORTED)})")
    con.close()
    return pa.concat_tables(out) if out else pa.table({})
