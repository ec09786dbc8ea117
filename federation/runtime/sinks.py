"""Sinks as connectors: where each query's result rows go (docs/architecture.md, "Sinks":
how to add a kind). A run's `output` names one, by URL or suffix; `console` and the API's
iterator add theirs, `sinks` the user's own objects.

| output | kind | module |
|---|---|---|
| `FILE.parquet`, or a directory of a run over directories (`DIR/results.parquet`, of several queries `DIR/<query>.parquet`) | the whole result as one file, at the end | connectors/parquet_sink.py |
| a directory of a following run (`DIR`, of several queries `DIR/<query>`) | a Parquet part per micro-batch and a manifest | connectors/parquet_sink.py |
| `FILE.duckdb` | a table (`output_table`; of several queries one per query) | connectors/duckdb_sink.py |
| `mqtt://HOST[:PORT]/TOPIC`, `mqtts://...` | a message per query and instant, QoS 1 | connectors/mqtt_sink.py |
| `console=True` / `fedq run --console` | each instant printed | here |
| the API's `start(...).results()` | each instant handed to the iterator | here |

The interface, of every sink (a sink of the user's too, given in `sinks=`):

- `put(key, rows, query=name)`: a micro-batch's rows of the query `name` (`tau` first,
  then the query's columns, sorted by `tau`), right after they are on disk in the work
  directory (recovery.py); `key` is (stage, micro-batch id). When it returns, a durable
  sink has them: the micro-batch commits only then. A replayed batch (after a crash) hands
  the same key again: a durable sink keeps each key once (exactly once).
- `end(name, result)` (optional): the run computed the query's last instant and no
  micro-batch failed; `result()` is the query's whole result (the Parquet file writes it).
- `close()`: once, after the run (whether it ended or failed).
- `durable` (default True): False for a sink that keeps nothing (the console, an
  iterator): it gets each instant once and in order (ResultParts), and a fresh run that
  takes over hands it no old rows (takeover.py). `where`: how errors name it.
"""

from __future__ import annotations

import importlib
import queue
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from federation.runtime.connectors.parquet_sink import read_manifest, read_parquet_sink
from federation.runtime.options import RunOptions, is_topic

__all__ = ["ConsoleSink", "QueueSink", "Sink", "SinkContext", "end_sinks", "is_durable",
           "open_run_sinks", "read_manifest", "read_parquet_sink", "sink_label"]

#: kind -> the module that opens it: `open_sink(output, ctx) -> sink` (module doc)
KINDS = {
    "parquet": "federation.runtime.connectors.parquet_sink",
    "parquet-dir": "federation.runtime.connectors.parquet_sink",
    "duckdb": "federation.runtime.connectors.duckdb_sink",
    "mqtt": "federation.runtime.connectors.mqtt_sink",
}


class Sink(Protocol):
    """What the run calls on a sink (module doc); `end` is optional."""

    def put(self, key: tuple[int, int], rows: pa.Table, query: str) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SinkContext:
    """What a run gives the sinks it opens: the query whose rows they get and whether the
    run has several (`named`: a table, directory or file per query), the run's id (a
    resumed run's is the interrupted one's: sinks know their rows by it), whether an
    earlier run's results are replaced (`replace`), whether the run follows its input,
    the .duckdb table's name and the broker's TLS and credentials."""

    query: str
    named: bool
    run_id: str
    replace: bool = False
    follow: bool = False
    table: str = "results"
    security: object = None


def sink_kind(output: Path | str, follow: bool) -> str:
    """The kind (a key of KINDS) of the sink that `output` names."""
    if is_topic(output):
        return "mqtt"
    suffix = Path(output).suffix
    if suffix == ".duckdb":
        return "duckdb"
    return "parquet-dir" if follow and suffix != ".parquet" else "parquet"


def open_sinks(opt: RunOptions, ctx: SinkContext) -> list:
    """One query's sinks: the output's (by URL or suffix), the console, and the given ones
    (`opt.sinks`, shared by the queries of a set: each put names its query)."""
    sinks = []
    if opt.output is not None:
        kind = sink_kind(opt.output, opt.follow)
        sinks.append(importlib.import_module(KINDS[kind]).open_sink(opt.output, ctx))
    if opt.console:
        sinks.append(ConsoleSink(named=ctx.named))
    return sinks + list(opt.sinks)


def open_run_sinks(opt: RunOptions, rid: str, resuming: bool, queries: list[str],
                   many: bool) -> dict[str, list]:
    """Each query's sinks (open_sinks), the ones opened so far closed if one fails."""
    opened: dict[str, list] = {}
    try:
        for q in queries:
            opened[q] = open_sinks(opt, SinkContext(
                q, many, rid, replace=opt.overwrite and not resuming, follow=opt.follow,
                table=q if many else opt.output_table, security=opt.mqtt_security))
    except BaseException:
        close_sinks(opened, opt)
        raise
    return opened


def end_sinks(opened: Mapping[str, list], results: Mapping[str, Callable[[], pa.Table]],
              phase=None) -> None:
    """Tell each query's sinks that its last instant is computed (`results[q]()`: its
    whole result); `phase` is told first when a sink writes at the end."""
    told = False
    for q, sinks in opened.items():
        for s in sinks:
            end = getattr(s, "end", None)
            if end is None:
                continue
            if phase is not None and not told:
                phase("writing output")
                told = True
            end(q, results[q])


def close_sinks(opened: Mapping[str, list], opt: RunOptions) -> None:
    """Close the sinks a run opened, each once (the given ones, `opt.sinks`, are closed by
    execute after the run's last attempt: a fresh run that takes over hands them on)."""
    done = {id(s) for s in opt.sinks}
    for s in (s for q in opened.values() for s in q):
        if id(s) not in done:
            done.add(id(s))
            s.close()


def output_written(opened: Mapping[str, list]):
    """Where the run's result files are (a Parquet file sink's path; of several queries
    their directory), or None."""
    paths = [p for ss in opened.values() for s in ss if (p := getattr(s, "written", None))]
    if not paths:
        return None
    return paths[0] if len(paths) == 1 else paths[0].parent


class ConsoleSink:
    """Prints each instant's rows as it is computed (`fedq run --console`); of several
    queries (`named`), each instant's header names its query."""

    durable = False  # keeps nothing: a fresh run that takes over hands it no old rows
    where = "the console"

    def __init__(self, out=None, named: bool = False) -> None:
        self.out, self.named = out, named

    def put(self, key: tuple[int, int], rows: pa.Table, query: str = "") -> None:
        out = self.out or sys.stdout
        label = f"{query} " if self.named and query else ""
        for tau, part in group_by_instant(rows):
            n = f"{part.num_rows} row{'s' if part.num_rows != 1 else ''}"
            print(f"-- {label}{tau} ({n})", file=out)
            print(part.drop_columns(["tau"]).to_pandas().to_string(index=False), file=out)
        out.flush()

    def close(self) -> None:
        pass


class QueueSink:
    """Hands each instant's rows to a queue (`RunHandle.results()`): (instant, rows), of
    several queries (`named`) (query, instant, rows); None marks the end."""

    durable = False
    where = "the API's results() iterator"

    def __init__(self, maxsize: int = 1000, named: bool = False) -> None:
        self.q: queue.Queue = queue.Queue(maxsize)
        self.named = named

    def put(self, key: tuple[int, int], rows: pa.Table, query: str = "") -> None:
        for item in group_by_instant(rows):
            self.q.put((query, *item) if self.named else item)

    def close(self) -> None:
        self.q.put(None)


def is_durable(sink) -> bool:
    """Whether `sink` keeps what it was handed (the console and an iterator do not)."""
    return getattr(sink, "durable", True)


def sink_label(sink) -> str:
    """How an error and the status page name a sink: its `where` (a sink of the user's
    own: its class), through the wrapper of a take-over (`.sink`)."""
    while hasattr(sink, "sink"):
        sink = sink.sink
    return getattr(sink, "where", None) or type(sink).__name__


def group_by_instant(rows: pa.Table) -> list[tuple[object, pa.Table]]:
    """(instant, its rows) in instant order."""
    if not rows.num_rows:
        return []
    taus = rows.column("tau").to_pylist()
    out, start = [], 0
    for i in range(1, len(taus) + 1):
        if i == len(taus) or taus[i] != taus[start]:
            out.append((taus[start], rows.slice(start, i - start)))
            start = i
    return out
