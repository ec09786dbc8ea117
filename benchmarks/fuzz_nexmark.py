"""Random Nexmark queries in SQL, the way a stranger writes them over bids, auctions and
persons: a Hypothesis strategy of query texts (`nexmark_sql()`), for the differential
checks (tests/test_nexmark.py runs them in pure DuckDB against the reference; the fuzzer's
placements run them through `benchmarks.fuzz --nexmark`).

Each query reads the bid stream through a NOW, HOP or TUMBLE window (sizes that the slide
divides or not), filters on a price, an auction modulo or a channel (LOWER, ||,
SPLIT_PART, REGEXP_EXTRACT), then one of: the rows themselves, an aggregate of a random
function by a random key subset (or global, or keys alone), that aggregate joined back
with the window's rows on its keys or on the instant alone (a window join with a
comparison, Nexmark q5's shape), or a join with the auctions' or the persons' window (two
streams, on auction = id or bidder = id).
"""

from __future__ import annotations

from hypothesis import strategies as st

KEYS = ("auction", "bidder", "channel")
FUNCS = ("COUNT(*)", "SUM(price)", "MAX(price)", "MIN(price)", "AVG(price)")


@st.composite
def nexmark_sql(draw) -> str:
    slide = draw(st.sampled_from([1, 2]))
    size = slide * draw(st.sampled_from([1, 2, 3, 5])) + draw(st.sampled_from([0, 0, 1]))
    kind = draw(st.sampled_from(["now", "hop", "tumble"]))
    if kind == "now":
        src = "bid"
    elif kind == "tumble":
        src = f"TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '{size}' SECOND)"
    else:
        src = (f"HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '{slide}' SECOND, "
               f"INTERVAL '{max(size, slide)}' SECOND)")
    where = draw(st.sampled_from([
        "", "price > 10000", "auction % 7 = 0", "LOWER(channel) IN ('apple', 'google')",
        "SPLIT_PART(url, '/', 4) <> ''", ("REGEXP_EXTRACT(url, 'channel_id=([0-9]+)', 1) "
        "IS NOT NULL"), "(channel || '-x') LIKE 'channel-1%'", "price BETWEEN 100 AND 500000"]))
    where_sql = f" WHERE {where}" if where else ""
    shape = draw(st.sampled_from(["rows", "aggregate", "agg_join", "instant_join",
                                  "stream_join"]))
    if kind == "now" and shape != "rows":
        shape = "rows"  # a stream without a window feeds selections and projections only
    if shape == "rows":
        cols = draw(st.sampled_from(["auction, price", ("auction, bidder, 0.908 * price AS "
                                     "euro"), "bidder, UPPER(channel) AS ch, dateTime"]))
        return f"SELECT {cols} FROM {src}{where_sql}"
    keys = list(draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True)))
    func = draw(st.sampled_from(FUNCS))
    group = ", ".join(["window_start", "window_end", *keys])
    agg = f"SELECT {', '.join([*keys, f'{func} AS v'])} FROM {src}{where_sql} GROUP BY {group}"
    if shape == "aggregate":
        return agg
    if shape == "agg_join" and keys:
        on = " AND ".join(f"b.{k} = a.{k}" for k in keys)
        return (f"SELECT b.auction, b.price, a.v FROM {src} AS b JOIN ({agg}) AS a "
                f"ON b.window_end = a.window_end AND {on}")
    if shape in ("agg_join", "instant_join"):
        top = (f"SELECT MAX(v) AS top FROM ({agg}) GROUP BY window_start, window_end")
        cmp = draw(st.sampled_from([">=", "=", "<"]))
        cols = ", ".join(["x.v", *[f"x.{k}" for k in keys]])
        return (f"SELECT {cols} FROM ({agg}) AS x JOIN ({top}) AS m "
                f"ON x.window_end = m.window_end AND x.v {cmp} m.top")
    other, key = draw(st.sampled_from([("auction", "auction = o.id"),
                                       ("person", "bidder = o.id")]))
    osrc = src.replace("TABLE bid", f"TABLE {other}")
    col = "o.category" if other == "auction" else "o.state"
    return (f"SELECT b.auction, b.bidder, {col} FROM {src} AS b JOIN {osrc} AS o "
            f"ON b.window_end = o.window_end AND b.{key}")
