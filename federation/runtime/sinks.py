"""Where result rows go as they are computed: each micro-batch's rows are handed to the
run's sinks right after they are on disk in the work directory (recovery.py), keyed by
(stage, micro-batch id). A replayed batch (after a crash) hands the same key again: the
Parquet directory and the DuckDB table keep each key once (exactly once); the console and
an iterator of a run in this process see what this process computed.

Every sink receives the rows as the user sees them: `tau` (the slide instant) first, then
the query's columns, sorted by `tau`.
"""

from __future__ import annotations

import json
import os
import queue
import sys
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from db.sink import DuckDBTableSink
from federation.parts import atomic_write_parquet
from federation.runtime.options import output_path

MANIFEST = "_manifest.jsonl"
__all__ = ["ConsoleSink", "DuckDBTableSink", "ParquetDirectorySink", "QueueSink", "Sink",
           "is_durable", "sink_label"]


class Sink(Protocol):
    """put: a micro-batch's rows; a sink given to a run of several queries is also told
    whose, put(key, rows, query=name) (federation.runtime.live.QuerySink)."""

    def put(self, key: tuple[int, int], rows: pa.Table) -> None: ...

    def close(self) -> None: ...


class ParquetDirectorySink:
    """A directory of Parquet parts, one per micro-batch with rows (`part-<stage>-<batch>`,
    written atomically: a reader never sees half a part), and `_manifest.jsonl`, one line per
    part in the order they were written (file, rows, first and last instant). A replayed
    batch rewrites its part with the same rows and its manifest line is not repeated."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.where = f"Parquet directory {self.dir}"  # how errors name it (sink_label)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest = self.dir / MANIFEST
        self.listed = {e["file"] for e in read_manifest(self.dir)}

    def put(self, key: tuple[int, int], rows: pa.Table) -> None:
        if not rows.num_rows:
            return
        name = f"part-{key[0]}-{key[1]:09d}.parquet"
        atomic_write_parquet(self.dir / name, rows)
        if name in self.listed:
            return
        taus = rows.column("tau")
        line = json.dumps({"file": name, "rows": rows.num_rows, "first_tau": str(taus[0]),
                           "last_tau": str(taus[-1])})
        with open(self.manifest, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.listed.add(name)

    def close(self) -> None:
        pass


def read_manifest(directory: Path) -> list[dict]:
    """The parts of a Parquet directory sink, in the order they were written (a line torn
    by a crash is ignored: its part is listed again when its batch is replayed)."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        return []
    out, seen = [], set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e["file"] not in seen:
            seen.add(e["file"])
            out.append(e)
    return out


def read_parquet_sink(directory: Path) -> pa.Table:
    """Every row of a Parquet directory sink, sorted by `tau`."""
    parts = [pq.read_table(Path(directory) / e["file"]) for e in read_manifest(directory)]
    return pa.concat_tables(parts).sort_by("tau") if parts else pa.table({})


class ConsoleSink:
    """Prints each instant's rows as it is computed (`fedq run --console`)."""

    durable = False  # keeps nothing: a fresh run that takes over hands it no old rows
    where = "the console"

    def __init__(self, out=None, label: str | None = None) -> None:
        self.out = out
        self.label = f"{label} " if label else ""  # the query's name, of several

    def put(self, key: tuple[int, int], rows: pa.Table) -> None:
        out = self.out or sys.stdout
        for tau, part in group_by_instant(rows):
            n = f"{part.num_rows} row{'s' if part.num_rows != 1 else ''}"
            print(f"-- {self.label}{tau} ({n})", file=out)
            print(part.drop_columns(["tau"]).to_pandas().to_string(index=False), file=out)
        out.flush()

    def close(self) -> None:
        pass


class QueueSink:
    """Hands each instant's rows to a queue (`RunHandle.results()`): (instant, rows), of
    several queries (query, instant, rows); None marks the end."""

    durable = False
    where = "the API's results() iterator"

    def __init__(self, maxsize: int = 1000) -> None:
        self.q: queue.Queue = queue.Queue(maxsize)

    def put(self, key: tuple[int, int], rows: pa.Table, query: str | None = None) -> None:
        for item in group_by_instant(rows):
            self.q.put(item if query is None else (query, *item))

    def close(self) -> None:
        self.q.put(None)


def is_durable(sink) -> bool:
    """Whether `sink` keeps what it was handed (the console and an iterator do not)."""
    return getattr(sink, "durable", True)


def sink_label(sink) -> str:
    """How an error and the status page name a sink: its `where` (a sink of the user's
    own: its class), through the wrappers of a query set and a take-over (`.sink`)."""
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


def write_output(tables: dict, output, phase=None, many: bool = False) -> Path | None:
    """The result rows at `output` if asked (of several queries: `<output>/<query>.parquet`
    each), before any reporting; where they were written (`phase`: told it starts)."""
    if output is None:
        return None
    if phase is not None:
        phase("writing output")
    for q, rows in tables.items():
        path = Path(output) / f"{q}.parquet" if many else output_path(Path(output))
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(path, rows)  # whole or not at all
    return Path(output) if many else path
