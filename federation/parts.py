"""Part files: the on-disk form of a stream (one Parquet file per event second, in name
order) and the Arrow types of stream columns. Shared by the data producers of a domain and
the runtime's ingest."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from federation.conventions import ARROW_TYPES

_PART = re.compile(r"^part-.*\.parquet$")
_SPOOL_PART = re.compile(r"^part-.*\.(parquet|arrow)$")
#: the formats of a spool (docs/architecture.md, "Feeds"): Parquet, which Spark's file
#: source reads; Arrow IPC files where only the direct feed reads the spool (written 2-5x
#: and read 10x faster, about the rows' Arrow size on disk)
SPOOL_FORMATS = ("parquet", "arrow")


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type of a stream column's SQL type (federation.conventions.ARROW_TYPES)."""
    return pa.type_for_alias(ARROW_TYPES[sql_type])


def arrow_schema(columns: Mapping[str, str]) -> pa.Schema:
    """Arrow schema of a stream declaration's columns."""
    return pa.schema([(c, arrow_type(t)) for c, t in columns.items()])


def list_parts(data_dir: Path) -> list[Path]:
    """Event-second files of a directory, in name order (= event-time order)."""
    return sorted(p for p in Path(data_dir).iterdir() if _PART.match(p.name))


def list_spool(spool_dir: Path) -> list[Path]:
    """A spool's files (either format: SPOOL_FORMATS), in name order."""
    return sorted(p for p in Path(spool_dir).iterdir() if _SPOOL_PART.match(p.name))


def spool_part(spool_dir: Path, i: int, fmt: str = "parquet") -> Path:
    """Spool file `i` of a spool in format `fmt`."""
    return Path(spool_dir) / f"part-{i:08d}.{fmt}"


def read_spool_part(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A spool file's rows, Parquet or Arrow IPC (by its suffix)."""
    if path.suffix == ".arrow":
        with pa.memory_map(str(path)) as src:
            t = pa.ipc.open_file(src).read_all()
        return t if columns is None else t.select(columns)
    return pq.read_table(path, columns=columns)


def spool_part_metadata(path: Path) -> dict:
    """A spool file's schema metadata, Parquet or Arrow IPC."""
    if path.suffix == ".arrow":
        with pa.memory_map(str(path)) as src:
            return pa.ipc.open_file(src).schema.metadata or {}
    return pq.read_schema(path).metadata or {}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file atomically and durably: a hidden temporary name, fsync, a rename."""
    tmp = path.with_name("." + path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def land_files(files: Iterable[Path], landing: Path) -> None:
    """Land part files in a followed directory the way a writer should: each copied under
    a hidden temporary name, then renamed into place (a follower never reads half a file)."""
    landing.mkdir(parents=True, exist_ok=True)
    for p in files:
        tmp = landing / ("." + p.name + ".tmp")
        shutil.copy(p, tmp)
        os.replace(tmp, landing / p.name)


def atomic_write_parquet(path: Path, table: pa.Table) -> None:
    """Write a Parquet file atomically (a hidden temporary name, then a rename)."""
    tmp = path.with_name("." + path.name + ".tmp")
    _write_table(table, tmp, path)
    os.replace(tmp, path)


#: how spool files are written: read once or twice within the run, so written fast (no
#: compression, no dictionary: 3x faster than snappy on the smart-plug readings, 1.5x on
#: Nexmark's bids; ~2x larger on disk)
SPOOL_PARQUET = {"compression": "none", "use_dictionary": False}


def _write_table(table: pa.Table, tmp: Path, path: Path, **options) -> None:
    """`table` to `tmp`, for `path`: Parquet (pq.write_table with `options`), or an Arrow
    IPC file where `path` ends in .arrow (a spool only the direct feed reads: SPOOL_FORMATS).
    An error names `path` (Arrow's message of a full disk names no file) and leaves no
    temporary file behind, where it can."""
    try:
        if path.suffix == ".arrow":
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
                w.write_table(table)
        else:
            pq.write_table(table, tmp, **options)
    except OSError as e:
        with contextlib.suppress(OSError):  # a read-only file system refuses this too
            tmp.unlink(missing_ok=True)
        if e.errno is None or e.filename is not None:
            raise
        raise OSError(e.errno, os.strerror(e.errno), str(path)) from e


def write_part(path: Path, table: pa.Table, mtime: float, spool: bool = False) -> None:
    """Write one Parquet file atomically for a streaming reader: a hidden temporary name,
    the given mtime (Spark's file source orders by it), then a rename (`spool`: written
    as SPOOL_PARQUET says)."""
    tmp = path.with_name("." + path.name + ".tmp")
    _write_table(table, tmp, path, **(SPOOL_PARQUET if spool else {}))
    os.utime(tmp, (mtime, mtime))
    os.replace(tmp, path)
