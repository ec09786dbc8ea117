"""The Nexmark generator: persons, auctions and bids as three data directories.

Event `n` (from 0) is a person when `n % 50 == 0`, an auction when it is 1-3 and a bid
otherwise; its event time is `start + n / rate` (milliseconds, as Nexmark's). Ids and
references follow Beam's generator (`sdks/java/testing/nexmark`, GeneratorConfig and the
Person/Auction/BidGenerator):

* person ids count from 1000, one per 50 events; auction ids from 1000, three per 50;
* an auction's seller is, 3 times in 4, the "hot" person `(last person / 100) * 100`, else
  one of the last 1000 persons (up to 10 ahead); its category is one of 10..14, its
  reserve its initial bid plus another price, and it expires within twice the time of the
  next 1666 events;
* a bid's auction is, 1 time in 2, the hot auction `(last auction / 100) * 100`, else one of
  the last 100 auctions (up to 10 ahead); its bidder 3 times in 4 the hot bidder `(last
  person / 100) * 100 + 1`, else one of the last 1000 persons; its price Beam's
  `10 ** (6 u) * 100` cents; its channel 1 time in 2 one of four hot ones, else one of
  10,000 (Flink's Nexmark adds channel and url; its double `+ 1000` on bidders is not kept);
* `extra` pads an event to Nexmark's average size (person 200, auction 500, bid 100 bytes).

Random values are functions of (seed, event number) (fields.py), so the data are the same
whatever the rate of generation or the second a file holds. Each stream's directory holds
one Parquet file per event second and its declaration with measured statistics
(`_stream.json`), which `fedq run --data bid=DIR/bid` reads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from federation.importer import stats_of
from federation.nexmark import SCHEMAS, TOTAL_PROPORTION, nexmark_streams
from federation.nexmark.fields import (
    FIRST_NAMES,
    LAST_NAMES,
    US_CITIES,
    US_STATES,
    Texts,
    below,
    channels,
    price,
    take,
    uniform,
)
from federation.parts import arrow_schema, list_parts, write_part
from federation.streams import STREAM_FILE, StreamDecl

#: Beam's NexmarkUtils.BASE_TIME
BASE_TIME = datetime(2015, 7, 15)
FIRST_ID = 1000
ACTIVE_PEOPLE, IN_FLIGHT_AUCTIONS, ID_LEAD, HOT_GROUP = 1000, 100, 10, 100
#: the events whose time bounds an auction's length (numInFlightAuctions * 50 / 3)
AUCTION_HORIZON_EVENTS = IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // 3
#: rows of each stream read to measure its statistics
STATS_ROWS = 200_000


#: the DuckDB file of q13's side table (key 0..9999 and a value)
SIDE_INPUT = "side_input.duckdb"
SIDE_KEYS = 10_000


def side_input(path: Path) -> None:
    """Nexmark q13's bounded side input as a DuckDB table `side_input(key, value)`."""
    from db.catalog import write_table

    keys = np.arange(SIDE_KEYS, dtype=np.int64)
    write_table(path, "side_input", pa.table({
        "key": keys, "value": pa.array([f"side-{k}" for k in keys.tolist()])}))


class NexmarkSummary(BaseModel):
    out: str
    rate: int
    seconds: int
    seed: int
    events: int
    rows: dict[str, int]
    elapsed_s: float


def last_person(n: np.ndarray) -> np.ndarray:
    """Beam's lastBase0PersonId: persons so far, minus one."""
    return n // TOTAL_PROPORTION


def last_auction(n: np.ndarray) -> np.ndarray:
    """Beam's lastBase0AuctionId: the last auction at or before event n."""
    epoch, off = n // TOTAL_PROPORTION, n % TOTAL_PROPORTION
    return np.where(off < 1, (epoch - 1) * 3 + 2, epoch * 3 + np.where(off >= 4, 2, off - 1))


def next_person(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """Beam's nextBase0PersonId: one of the last 1000 persons, up to 10 ahead."""
    people = last_person(n) + 1
    active = np.minimum(people, ACTIVE_PEOPLE)
    return people - active + below(seed, n, field, active + ID_LEAD)


def next_auction(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """Beam's nextBase0AuctionId: one of the last 100 auctions, up to 10 ahead."""
    hi = last_auction(n)
    lo = np.maximum(hi - IN_FLIGHT_AUCTIONS, 0)
    return lo + below(seed, n, field, hi - lo + 1 + ID_LEAD)


class Events:
    """The events of one seed and rate, by event number."""

    def __init__(self, rate: int, seed: int, start: datetime) -> None:
        self.rate, self.seed = rate, seed
        self.start_ms = int((start - datetime(1970, 1, 1)).total_seconds() * 1000)
        self.texts = Texts(seed)
        names, urls = channels(seed)
        self.channel_names = pa.array(names, pa.string())
        self.channel_urls = pa.array(urls, pa.string())

    def ms(self, n: np.ndarray) -> np.ndarray:
        return self.start_ms + (n * 1000) // self.rate

    def times(self, n: np.ndarray) -> pa.Array:
        return pa.array(self.ms(n) * 1000, pa.timestamp("us"))

    def person(self, n: np.ndarray) -> pa.Table:
        s, t = self.seed, self.texts
        name = pc.binary_join_element_wise(take(FIRST_NAMES, below(s, n, 1, 11)),
                                           take(LAST_NAMES, below(s, n, 2, 9)), " ")
        email = pc.binary_join_element_wise(
            t.string(n, 3, 7), pc.binary_join_element_wise(t.string(n, 5, 5), "com", "."),
            "@")
        digits = [np.char.zfill(below(s, n, 7 + i, 10_000).astype(str), 4) for i in range(4)]
        card = pc.binary_join_element_wise(*[pa.array(d) for d in digits], " ")
        city, state = take(US_CITIES, below(s, n, 11, 10)), take(US_STATES, below(s, n, 12, 6))
        size = 8 + sum(pc.utf8_length(c).to_numpy(zero_copy_only=False)
                       for c in (name, email, card, city, state))
        return pa.table([pa.array(last_person(n) + FIRST_ID), name, email, card, city, state,
                         self.times(n), t.extra(n, 13, size, 200)],
                        schema=arrow_schema(SCHEMAS["person"]))

    def auction(self, n: np.ndarray) -> pa.Table:
        s, t = self.seed, self.texts
        hot = below(s, n, 1, 4) > 0
        seller = np.where(hot, (last_person(n) // HOT_GROUP) * HOT_GROUP,
                          next_person(s, n, 2)) + FIRST_ID
        initial = price(s, n, 4)
        horizon = self.ms(n + AUCTION_HORIZON_EVENTS) - self.ms(n)
        expires = self.ms(n) + 1 + np.floor(
            uniform(s, n, 5) * np.maximum(horizon * 2, 1)).astype(np.int64)
        item, desc = t.string(n, 6, 20), t.string(n, 8, 100)
        size = 48 + pc.utf8_length(item).to_numpy(zero_copy_only=False) \
            + pc.utf8_length(desc).to_numpy(zero_copy_only=False)
        return pa.table([pa.array(last_auction(n) + FIRST_ID), item, desc, pa.array(initial),
                         pa.array(initial + price(s, n, 10)), self.times(n),
                         pa.array(expires * 1000, pa.timestamp("us")), pa.array(seller),
                         pa.array(10 + below(s, n, 3, 5)), t.extra(n, 11, size, 500)],
                        schema=arrow_schema(SCHEMAS["auction"]))

    def bid(self, n: np.ndarray) -> pa.Table:
        s, t = self.seed, self.texts
        auction = np.where(below(s, n, 1, 2) > 0,
                           (last_auction(n) // HOT_GROUP) * HOT_GROUP, next_auction(s, n, 2))
        bidder = np.where(below(s, n, 3, 4) > 0,
                          (last_person(n) // HOT_GROUP) * HOT_GROUP + 1, next_person(s, n, 4))
        hot = below(s, n, 6, 2) > 0
        chan = pa.array(np.where(hot, 10_000 + below(s, n, 7, 4), below(s, n, 8, 10_000)))
        return pa.table([pa.array(auction + FIRST_ID), pa.array(bidder + FIRST_ID),
                         pa.array(price(s, n, 5)), self.channel_names.take(chan),
                         self.channel_urls.take(chan), self.times(n),
                         t.extra(n, 9, np.full(len(n), 32), 100)],
                        schema=arrow_schema(SCHEMAS["bid"]))

    def second(self, sec: int, only: str | None = None) -> dict[str, pa.Table]:
        """The events of event second `sec` (from the start), by stream (`only`: of that
        stream alone, the others not made)."""
        n = np.arange(sec * self.rate, (sec + 1) * self.rate, dtype=np.int64)
        kind = n % TOTAL_PROPORTION
        masks = {"person": kind == 0, "auction": (kind >= 1) & (kind <= 3), "bid": kind >= 4}
        return {k: getattr(self, k)(n[m]) for k, m in masks.items() if only in (None, k)}


def _declare(dirs: dict[str, Path], streams: dict[str, StreamDecl]) -> None:
    for name, decl in streams.items():
        text = json.dumps(json.loads(decl.model_dump_json(by_alias=True)), indent=2)
        tmp = dirs[name] / f".{STREAM_FILE}.tmp"
        tmp.write_text(text)
        tmp.replace(dirs[name] / STREAM_FILE)


def generate(out: str | Path, *, rate: float = 10_000, seconds: int = 60, seed: int = 0,
             start: datetime = BASE_TIME,
             progress: Callable[[int, int], object] | None = None,
             realtime: float | None = None) -> NexmarkSummary:
    """Write `seconds` event seconds of `rate` events per second into out/person,
    out/auction and out/bid (module doc); files of an earlier run there are removed.
    `realtime` (a speed, 1.0 = real time): second `s` is written once `(s + 1) / speed`
    wall seconds have passed (a live producer for `fedq run --follow`; the stream
    declarations are written first, so a follower knows the schemas at once)."""
    rate = round(float(rate))
    if rate < TOTAL_PROPORTION:
        raise ValueError(f"rate: at least {TOTAL_PROPORTION} events per second (one person "
                         f"in every {TOTAL_PROPORTION}), got {rate}")
    if seconds < 1:
        raise ValueError(f"seconds: at least 1, got {seconds}")
    t0 = time.perf_counter()
    root = Path(out)
    dirs = {k: root / k for k in SCHEMAS}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
        for p in list_parts(d):
            p.unlink()
    events = Events(rate, seed, start)
    if realtime:  # the declarations first (from the declared rate): a follower needs them
        _declare(dirs, nexmark_streams(rate))
    rows = dict.fromkeys(SCHEMAS, 0)
    sample: dict[str, list[pa.Table]] = {k: [] for k in SCHEMAS}
    mtime = time.time() - seconds - 1
    for sec in range(seconds):
        if realtime:
            time.sleep(max(0.0, t0 + (sec + 1) / realtime - time.perf_counter()))
        for name, t in events.second(sec).items():
            if t.num_rows:
                write_part(dirs[name] / f"part-{sec:08d}.parquet", t,
                           time.time() if realtime else mtime + sec)
            if rows[name] < STATS_ROWS:
                sample[name].append(t)
            rows[name] += t.num_rows
        if progress is not None:
            progress(sec + 1, seconds)
    measured = {}
    for name, decl in nexmark_streams(rate).items():
        d = json.loads(decl.model_dump_json(by_alias=True))
        d["stats"] = json.loads(stats_of(pa.concat_tables(sample[name]), decl).model_dump_json())
        measured[name] = StreamDecl.model_validate(d)
    _declare(dirs, measured)
    side_input(root / SIDE_INPUT)
    return NexmarkSummary(out=str(root), rate=rate, seconds=seconds, seed=seed,
                          events=rate * seconds, rows=rows,
                          elapsed_s=round(time.perf_counter() - t0, 3))
