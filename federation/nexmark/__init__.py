"""Nexmark, the benchmark of stream engines: an online auction's persons, auctions and bids.

The three streams carry the schema of the Nexmark project's Flink tables (Beam's model,
with the bid's `channel` and `url` that Flink's generator adds); the event time of each is
`dateTime`. `datagen.generate` writes them, `fedq generate --nexmark` runs it, and the
queries are SQL files in `benchmarks/queries_sql/nexmark/` (docs/nexmark.md).
"""

from __future__ import annotations

from federation.streams import StreamDecl, StreamStats

PERSON_SCHEMA: dict[str, str] = {
    "id": "BIGINT", "name": "VARCHAR", "emailAddress": "VARCHAR", "creditCard": "VARCHAR",
    "city": "VARCHAR", "state": "VARCHAR", "dateTime": "TIMESTAMP", "extra": "VARCHAR",
}
AUCTION_SCHEMA: dict[str, str] = {
    "id": "BIGINT", "itemName": "VARCHAR", "description": "VARCHAR", "initialBid": "BIGINT",
    "reserve": "BIGINT", "dateTime": "TIMESTAMP", "expires": "TIMESTAMP", "seller": "BIGINT",
    "category": "BIGINT", "extra": "VARCHAR",
}
BID_SCHEMA: dict[str, str] = {
    "auction": "BIGINT", "bidder": "BIGINT", "price": "BIGINT", "channel": "VARCHAR",
    "url": "VARCHAR", "dateTime": "TIMESTAMP", "extra": "VARCHAR",
}
SCHEMAS = {"person": PERSON_SCHEMA, "auction": AUCTION_SCHEMA, "bid": BID_SCHEMA}
#: of every 50 events: 1 person, 3 auctions, 46 bids (by the event number modulo 50)
PROPORTIONS = {"person": 1, "auction": 3, "bid": 46}
TOTAL_PROPORTION = 50
TS = "dateTime"


def nexmark_streams(rate: float = 10_000.0) -> dict[str, StreamDecl]:
    """The three streams, by name, with statistics for `rate` events per second in all
    (a generated directory's `_stream.json` has measured ones).

    >>> {n: round(s.stats.rate_tps) for n, s in nexmark_streams(50_000).items()}
    {'person': 1000, 'auction': 3000, 'bid': 46000}
    """
    out = {}
    for name, schema in SCHEMAS.items():
        r = rate * PROPORTIONS[name] / TOTAL_PROPORTION
        distinct: dict[str, int] = {}
        if name == "bid":  # hot auctions and bidders: about 100 auctions in flight
            distinct = {"auction": 110, "bidder": 1010, "channel": 10_000}
        elif name == "auction":
            distinct = {"seller": 1010, "category": 5}
        out[name] = StreamDecl(name=name, schema=schema, ts_column=TS,
                               stats=StreamStats(rate_tps=r, distinct=distinct))
    return out
