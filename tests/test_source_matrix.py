"""Every source kind x one and two streams x one and two queries (issue 42), pairwise:
each kind runs one stream with one query and two streams with two, or one stream with two
queries and two streams with one; every query equals the reference over the readings its
sources gave. No JVM: all in DuckDB (the placements are the fuzzer's and
test_many_streams' subject). Kill -9 and resume per kind: test_live_streams (generator,
followed directory, broker), test_many_streams (directories), test_direct_feed."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.parts import list_parts
from federation.results import diff_results
from federation.smartplug.datagen import generate

RATE, PLUGS, HOUSES, SECONDS = 20, 4, 2, 12
START = dt.datetime(2013, 9, 1)


def queries(streams: int, n: int):
    """`n` queries over `streams` streams (a, b): counts of one stream, and the counts of
    both joined per house."""
    from federation import count, max_, window
    from federation.smartplug import smartplug_stream

    s = {k: smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES, name=k) for k in "ab"}

    def per_house(k, **agg):
        return window(s[k], range="4 s", slide="2 s").aggregate(by=["house_id"], **agg)

    if streams == 1:
        qs = [per_house("a", n=count()).rstream("count_a"),
              per_house("a", top=max_("value")).rstream("max_a")]
    else:
        qs = [per_house("a", na=count()).join(per_house("b", nb=count()), on=["house_id"])
              .rstream("both"), per_house("b", n=count()).rstream("count_b")]
    return qs[:n]


class Recorder:
    def __init__(self) -> None:
        self.rows: dict[str, list[pa.Table]] = {}

    def put(self, key, rows, query) -> None:
        self.rows.setdefault(query, []).append(rows)

    def close(self) -> None:
        pass


CASES = [  # (kind, streams, queries)
    ("directory", 1, 2), ("directory", 2, 1),
    ("follow", 1, 1), ("follow", 2, 2),
    ("mqtt", 1, 2), ("mqtt", 2, 1),
    ("datagen", 1, 1), ("datagen", 2, 2),
]


@pytest.mark.parametrize("kind,streams,n", CASES)
def test_every_source_kind_with_one_and_two_streams_and_queries(kind, streams, n, tmp_path):
    from federation.api import start
    from federation.logical import query_set

    names = "ab"[:streams]
    src = {k: tmp_path / f"src_{k}" for k in names}
    if kind != "datagen":
        for i, (k, d) in enumerate(src.items()):
            generate(d, rate=RATE, seconds=SECONDS, plugs=PLUGS, houses=HOUSES, seed=i)
    work, rec = tmp_path / "work", Recorder()
    until = {"until": START + dt.timedelta(seconds=SECONDS - 1)}
    broker = None
    if kind == "directory":
        data, live = {k: str(d) for k, d in src.items()}, {}
    elif kind == "follow":
        data, live = {k: f"follow:{d}" for k, d in src.items()}, until
    elif kind == "mqtt":
        from federation.runtime.broker import start_broker

        broker = start_broker()
        data, live = {k: broker.url_for(f"plugs/{k}") for k in names}, \
            {**until, "idle_timeout_s": 60}
    else:
        data = {k: f"datagen:smartplug?rate={RATE}&plugs={PLUGS}&houses={HOUSES}&seed={i}"
                   f"&speed=10&seconds={SECONDS}&start={START.isoformat()}"
                for i, k in enumerate(names)}
        live = {}
    qs = queries(streams, n)
    try:
        h = start(query_set(qs), "db", data if streams > 1 else next(iter(data.values())),
                  iterate=False, sinks=(rec,), work_dir=work, seconds_per_batch=4, **live)
        if broker is not None:
            from federation.smartplug.publish import publish

            spools = [work / "input" / k for k in names] if streams > 1 else [work / "input"]
            deadline = time.monotonic() + 60
            while not all(p.exists() for p in spools) and time.monotonic() < deadline:
                time.sleep(0.1)  # subscribed once the spools exist
            for k in names:
                publish(src[k], data[k], realtime=False, per_message=40, fmt="csv")
        r = h.wait(timeout=300)
        assert r is not None and r.summary.dead_lettered == 0, h.status()
    finally:
        if broker is not None:
            broker.stop()
    if kind == "datagen":  # what the generators wrote
        src = {k: work / "landing" / k for k in names}
    rows = {k: pa.concat_tables(pq.read_table(p) for p in list_parts(Path(d)))
            for k, d in src.items()}
    for q in qs:
        used = {w.stream.name for w in q.walk() if w.kind == "window"}
        want = reference_result(q, {k: rows[k] for k in used})
        assert want.num_rows > 0 and q.name in rec.rows, q.name
        problem = diff_results(pa.concat_tables(rec.rows[q.name]), want)
        assert problem is None, f"{kind} {q.name}: {problem}"
