"""Sinks as connectors (federation/runtime/sinks.py): every output kind, in a run over a
directory and in a following run, of one query and of two (pairwise: each kind sees both
modes and both counts), holds each query's rows as the reference computes them; the
console and a sink of the user's run beside it, each told the query whose rows it gets;
a run that fails writes no Parquet file. No JVM: all in DuckDB."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.logical import query_set
from federation.parts import list_parts
from federation.results import diff_results
from federation.runtime.sinks import read_parquet_sink
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

RATE, PLUGS, SECONDS, SCALE = 20, 4, 12, 0.01  # 3-s windows
START = dt.datetime(2013, 9, 1)


def queries(n: int):
    return [QUERIES[q](rate=RATE, scale=SCALE, plugs=PLUGS) for q in ("CQ1", "CQ5")[:n]]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("plugs")
    generate(d, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=5)
    return d


class Recorder:
    """A sink of the user's: what it was handed, by query."""

    def __init__(self) -> None:
        self.rows: dict[str, list[pa.Table]] = {}
        self.keys: list[tuple] = []
        self.closed = 0

    def put(self, key, rows, query) -> None:
        self.rows.setdefault(query, []).append(rows)
        self.keys.append((query, key))

    def close(self) -> None:
        self.closed += 1


CASES = [  # (output kind, followed, queries)
    ("file", False, 1), ("file", True, 2),
    ("directory", False, 2), ("directory", True, 1),
    ("duckdb", False, 1), ("duckdb", True, 2),
    ("mqtt", False, 2), ("mqtt", True, 1),
]


@pytest.mark.parametrize("kind,follow,n", CASES)
def test_every_sink_kind_holds_each_querys_rows(kind, follow, n, data, tmp_path, monkeypatch):
    from federation.api import run

    qs = queries(n)
    broker = got = sub = None
    if kind == "mqtt":
        from federation.runtime.broker import start_broker
        from tests.test_mqtt import collect

        broker = start_broker()
        output = broker.url_for("results/out")
        sub, got = collect(output, "t-sinks")
    else:
        output = {"file": tmp_path / "out.parquet", "directory": tmp_path / "out",
                  "duckdb": tmp_path / "out.duckdb"}[kind]
    rec, console = Recorder(), io.StringIO()
    monkeypatch.setattr("sys.stdout", console)
    live = {"follow": True, "until": START + dt.timedelta(seconds=SECONDS - 1)} if follow \
        else {}
    try:
        r = run(query_set(qs), "db", data, output=output, console=True, sinks=(rec,),
                work_dir=tmp_path / "work", seconds_per_batch=4, **live)
        if sub is not None:
            import time

            time.sleep(1)
            sub.disconnect()
    finally:
        if broker is not None:
            broker.stop()
    monkeypatch.undo()
    rows = pa.concat_tables(pq.read_table(p) for p in list_parts(data))
    printed = console.getvalue()
    assert rec.closed == 1 and len(set(rec.keys)) == len(rec.keys), rec.keys
    for q in qs:
        want = reference_result(q, rows)
        assert want.num_rows > 0, q.name
        mine = {"user's sink": pa.concat_tables(rec.rows[q.name]),
                kind: written(kind, output, q.name, n, follow, got, want.schema)}
        for where, t in mine.items():
            problem = diff_results(t, want)
            assert problem is None, f"{q.name} in the {where}: {problem}"
        named = f"-- {q.name} " in printed  # the console names the query of several
        assert named == (n > 1), printed[:300]
    assert r.summary.output == str(
        output / "results.parquet" if kind == "directory" and n == 1 and not follow
        else output)


def written(kind, output, name, n, follow, got, schema) -> pa.Table:
    """The rows of query `name` as the output of `kind` holds them."""
    if kind == "file":
        return pq.read_table(output / f"{name}.parquet" if n > 1 else output)
    if kind == "directory" and follow:
        return read_parquet_sink(output / name if n > 1 else output)
    if kind == "directory":
        return pq.read_table(output / (f"{name}.parquet" if n > 1 else "results.parquet"))
    if kind == "duckdb":
        con = duckdb.connect(str(output), read_only=True)
        try:
            return con.sql(f'SELECT * FROM "{name if n > 1 else "results"}"').to_arrow_table()
        finally:
            con.close()
    docs = {m["id"]: m for m in got if m["query"] == name}  # a replay's duplicate once
    return pa.Table.from_pylist(
        [{"tau": dt.datetime.fromisoformat(d["instant"]), **row}
         for d in docs.values() for row in d["rows"]], schema=schema)


def test_a_run_that_fails_writes_no_parquet_file(data, tmp_path):
    """A sink that fails midway fails the run (resumable, naming the sink); the Parquet
    file is written only when every instant is computed, so none is there."""
    from federation.api import run
    from federation.runtime.failure import RunFailed

    class Breaks(Recorder):
        def put(self, key, rows, query) -> None:
            if len(self.keys) == 1:
                raise OSError("the disk of the user's sink is gone")
            super().put(key, rows, query)

    out = tmp_path / "out.parquet"
    with pytest.raises(RunFailed) as e:
        run(queries(1)[0], "db", data, output=out, sinks=(Breaks(),),
            work_dir=tmp_path / "work", seconds_per_batch=4)
    assert "Breaks" in str(e.value) and "gone" in str(e.value)
    assert not out.exists()


def test_a_sink_whose_put_takes_no_query_is_named_in_the_error(data, tmp_path):
    """The run calls put(key, rows, query=name) on every sink; an old one-query sink
    fails at its first rows with an error that names it and says what put takes; an
    object with no put is refused before any work, naming the option."""
    from federation.api import run
    from federation.errors import OptionError
    from federation.runtime.failure import RunFailed

    class Old:
        def put(self, key, rows):
            pass

        def close(self):
            pass

    with pytest.raises(RunFailed) as e:
        run(queries(1)[0], "db", data, sinks=(Old(),), work_dir=tmp_path / "w1",
            seconds_per_batch=4)
    assert "Old" in str(e.value) and "put takes (key, rows, query)" in str(e.value)
    with pytest.raises(OptionError) as e:
        run(queries(1)[0], "db", data, sinks=(object(),), work_dir=tmp_path / "w2")
    assert e.value.option == "sinks"
