"""Random Nexmark queries in SQL, the way a stranger writes them over bids, auctions and
persons: a Hypothesis strategy of query texts (`nexmark_sql()`), for the differential
checks: tests/test_nexmark.py runs them in pure DuckDB against the reference, and

    python -m benchmarks.fuzz_nexmark --queries 12 --seed 1

runs them through the runtime under spe, db, auto and the placements that alternate
engines by depth (`placements_of`), a random number of event seconds per micro-batch each,
against the reference (report: benchmarks/results/fuzz_nexmark.json).

Each query reads the bid stream through a NOW, HOP or TUMBLE window (sizes that the slide
divides or not), filters on a price, an auction modulo or a channel (LOWER, ||,
SPLIT_PART, REGEXP_EXTRACT), then one of: the rows themselves, an aggregate of a random
function by a random key subset (or global, or keys alone), that aggregate joined back
with the window's rows on its keys or on the instant alone (a window join with a
comparison, Nexmark q5's shape), or a join with the auctions' or the persons' window (two
streams, on auction = id or bidder = id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import strategies as st

KEYS = ("auction", "bidder", "channel")
WHERE = ("", "price > 10000", "auction % 7 = 0", "LOWER(channel) IN ('apple', 'google')",
         "SPLIT_PART(url, '/', 4) <> ''",
         "REGEXP_EXTRACT(url, 'channel_id=([0-9]+)', 1) IS NOT NULL",
         "(channel || '-x') LIKE 'channel-1%'", "price BETWEEN 100 AND 500000")
ROW_COLUMNS = ("auction, price", "auction, bidder, 0.908 * price AS euro",
               "bidder, UPPER(channel) AS ch, dateTime")
FUNCS = ("COUNT(*)", "SUM(price)", "MAX(price)", "MIN(price)", "AVG(price)")


def write_query(pick: Callable[[Sequence], object]) -> str:
    """One query text, each choice made by `pick` (one of a sequence's items)."""
    slide = pick([1, 2])
    size = slide * pick([1, 2, 3, 5]) + pick([0, 0, 1])
    kind = pick(["now", "hop", "tumble"])
    if kind == "now":
        src = "bid"
    elif kind == "tumble":
        src = f"TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '{size}' SECOND)"
    else:
        src = (f"HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '{slide}' SECOND, "
               f"INTERVAL '{max(size, slide)}' SECOND)")
    where = pick(WHERE)
    where_sql = f" WHERE {where}" if where else ""
    shape = pick(["rows", "aggregate", "agg_join", "instant_join", "stream_join"])
    if kind == "now":
        shape = "rows"  # a stream without a window feeds selections and projections only
    if shape == "rows":
        return f"SELECT {pick(ROW_COLUMNS)} FROM {src}{where_sql}"
    keys: list[str] = []
    for _ in range(pick([0, 1, 1, 2])):
        k = pick([c for c in KEYS if c not in keys])
        keys.append(str(k))
    func = pick(FUNCS)
    group = ", ".join(["window_start", "window_end", *keys])
    agg = f"SELECT {', '.join([*keys, f'{func} AS v'])} FROM {src}{where_sql} GROUP BY {group}"
    if shape == "aggregate":
        return agg
    if shape == "agg_join" and keys:
        on = " AND ".join(f"b.{k} = a.{k}" for k in keys)
        return (f"SELECT b.auction, b.price, a.v FROM {src} AS b JOIN ({agg}) AS a "
                f"ON b.window_end = a.window_end AND {on}")
    if shape in ("agg_join", "instant_join"):
        top = f"SELECT MAX(v) AS top FROM ({agg}) GROUP BY window_start, window_end"
        cols = ", ".join(["x.v", *[f"x.{k}" for k in keys]])
        return (f"SELECT {cols} FROM ({agg}) AS x JOIN ({top}) AS m "
                f"ON x.window_end = m.window_end AND x.v {pick(['>=', '=', '<'])} m.top")
    other, key = pick([("auction", "auction = o.id"), ("person", "bidder = o.id")])
    osrc = src.replace("TABLE bid", f"TABLE {other}")
    col = "o.category" if other == "auction" else "o.state"
    return (f"SELECT b.auction, b.bidder, {col} FROM {src} AS b JOIN {osrc} AS o "
            f"ON b.window_end = o.window_end AND b.{key}")


@st.composite
def nexmark_sql(draw) -> str:
    """`write_query` as a Hypothesis strategy (shrinks to a simpler query on a failure)."""
    return write_query(lambda xs: draw(st.sampled_from(list(xs))))


def placements_of(q) -> list[str]:
    """spe, db, auto and the placements that alternate engines by depth (every parent and
    child in different engines, where Spark can run its operator)."""
    from benchmarks.fuzz_queries import alternating_placements

    return ["spe", "db", "auto", *alternating_placements(q)]


def main(argv: list[str] | None = None) -> int:
    """python -m benchmarks.fuzz_nexmark --queries 12 --seed 1: generated Nexmark queries
    through the runtime in every placement of `placements_of`, against the reference;
    a report in benchmarks/results/fuzz_nexmark.json."""
    import argparse
    import random
    import tempfile
    import time
    from pathlib import Path

    from benchmarks.common import say, write_result
    from db.reference import reference_result
    from federation.api import run
    from federation.nexmark import SCHEMAS
    from federation.nexmark.datagen import generate
    from federation.results import diff_results
    from federation.runtime.sources import read_clean_inputs
    from federation.sqlfront import sql
    from federation.streams import load_stream_decl
    from spe.session import get_spark

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="fuzz_nexmark.json")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedq-fuzz-nexmark-"))
    generate(work / "data", rate=500, seconds=30, seed=a.seed)
    streams = {k: load_stream_decl(work / "data" / k) for k in SCHEMAS}
    rng = random.Random(a.seed)
    texts = [write_query(rng.choice) for _ in range(a.queries)]
    spark, records, t0 = get_spark(), [], time.time()
    for i, text in enumerate(texts):
        q = sql(text, streams, name=f"n{i}")
        used = sorted({w.stream.name for w in q.walk() if w.kind == "window"})
        for j, pl in enumerate(placements_of(q)):
            per = rng.choice([2, 3, 5, 10])
            r = run(q, pl, {k: work / "data" / k for k in used}, spark=spark,
                    work_dir=work / f"q{i}p{j}", seconds_per_batch=per)
            want = reference_result(q, read_clean_inputs(r.ingest))
            problem = diff_results(r.rows, want) if want.num_rows else (
                None if r.rows.num_rows == 0 else f"{r.rows.num_rows} rows, none expected")
            records.append({"query": text, "placement": r.summary.placement,
                            "seconds_per_batch": per, "rows": want.num_rows,
                            "outcome": "match" if problem is None else "mismatch",
                            "problem": problem})
            say(f"q{i} {pl[:40]}: {'match' if problem is None else problem}")
    bad = [r for r in records if r["outcome"] != "match"]
    write_result(a.out, {"queries": a.queries, "seed": a.seed, "runs": len(records),
                         "mismatches": len(bad), "wall_s": round(time.time() - t0, 1),
                         "records": records})
    say(f"{len(records)} runs of {a.queries} queries, {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
