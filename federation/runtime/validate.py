"""Reading one input file (or quarantining it) and validating its table: types, nulls, NaN and infinite readings, domains, and
event time (pre-epoch, late, or beyond the horizon of the stream's clock). Each bad row
gets a reason; the caller dead-letters it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.conventions import EPOCH, REJECTED_CSV, ts_us, us
from federation.parts import arrow_schema
from federation.streams import StreamDecl

if TYPE_CHECKING:
    from federation.runtime.ingest import IngestResult


def _cast_column(arr: pa.ChunkedArray, typ: pa.DataType) -> tuple[pa.Array, list[int]]:
    """Cast a column; rows whose value cannot be cast become null and are reported."""
    if arr.type == typ:  # as read: chunked where the file has several row groups
        return arr, []
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if pa.types.is_timestamp(arr.type) and pa.types.is_timestamp(typ):
        return arr.cast(pa.timestamp("us", tz=arr.type.tz)).cast(typ), []
    try:
        return pc.cast(arr, typ, safe=True), []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values, bad = [], []
    for i, v in enumerate(arr.to_pylist()):
        try:
            values.append(pc.cast(pa.array([v]), typ, safe=True)[0].as_py() if v is not None
                          else None)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
            values.append(None)
            bad.append(i)
    return pa.array(values, type=typ), bad


def validate_table(
    raw: pa.Table,
    stream: StreamDecl,
    watermark,
    domains: Mapping[str, set] | None = None,
    clock=None,
    horizon_s: float = 3600.0,
) -> tuple[pa.Table, list[tuple[int, str]]]:
    """Split a raw table into clean rows (typed) and (row index, reason) of the bad ones.

    Event time must be plausible: not before 1970, not late (below `watermark`), and not
    more than `horizon_s` ahead of the stream's `clock` (the largest event time accepted
    so far). Within one table, readings are taken in event-time order and a gap of more
    than `horizon_s` to the readings before it marks the rest as far-future; with no clock
    yet (the first file), the gap is measured from the file's median reading both ways,
    so one outlier can neither start nor move the clock."""
    schema = arrow_schema(stream.columns)
    n = raw.num_rows
    reasons: dict[int, str] = {}
    cols = {}
    for f in schema:
        if f.name not in raw.column_names:
            for i in range(n):
                reasons.setdefault(i, f"missing column {f.name!r}")
            cols[f.name] = pa.nulls(n, f.type)
            continue
        arr, bad = _cast_column(raw.column(f.name), f.type)
        for i in bad:
            reasons.setdefault(i, f"wrong type in column {f.name!r} (want {stream.columns[f.name]})")
        for i in _true_indices(pc.is_null(arr)) if arr.null_count else []:
            reasons.setdefault(i, f"null in column {f.name!r}")
        if pa.types.is_floating(f.type):
            for i in _true_indices(pc.invert(pc.is_finite(arr))):
                reasons.setdefault(i, f"not a finite number (NaN or infinite) in column "
                                      f"{f.name!r}")
        cols[f.name] = arr
    for colname, allowed in (domains or {}).items():
        arr = cols[colname]
        outside = pc.and_(pc.invert(pc.is_in(arr, pa.array(sorted(allowed), arr.type))),
                          pc.is_valid(arr))
        for i in _true_indices(outside):
            reasons.setdefault(i, f"unknown {colname} code {arr[i].as_py()!r}")
    ts = cols[stream.ts_column]
    for i in _true_indices(pc.less(ts, pa.scalar(EPOCH, ts.type))):
        reasons.setdefault(i, f"event time {ts[i].as_py()} is before 1970-01-01")
    if watermark is not None:
        late = pc.less(ts, pa.scalar(watermark, ts.type))
        for i in _true_indices(late):
            reasons.setdefault(i, f"late: event time {ts[i].as_py()} is before the watermark "
                                  f"{watermark} (largest earlier event time - allowed lateness)")
    for i, why in _far_from_clock(ts, reasons, clock, horizon_s):
        reasons.setdefault(i, why)
    table = pa.table(cols, schema=schema)
    if reasons:
        table = table.filter(pa.array(_good_mask(n, reasons)))
    return table, sorted(reasons.items())


def _good_mask(n: int, reasons: dict):
    """A numpy mask of the `n` rows: True where a row has no reason."""
    import numpy as np

    mask = np.ones(n, dtype=bool)
    if reasons:
        mask[np.fromiter(reasons, dtype=np.int64, count=len(reasons))] = False
    return mask


def _far_from_clock(ts: pa.Array, reasons: dict, clock, horizon_s: float):
    """(row, reason) of readings more than `horizon_s` away from the stream's clock (see
    `validate_table`); vectorized over the sorted event times of the rows still good."""
    import numpy as np

    micros = ts.cast(pa.int64()).to_numpy(zero_copy_only=False)
    good = np.flatnonzero(_good_mask(len(ts), reasons))
    if not len(good):
        return []
    if len(good) < len(ts):
        micros = micros[good]
    if len(micros) > 1 and (np.diff(micros) < 0).any():  # in order already, as a rule
        order = np.argsort(micros, kind="stable")
        v, idx = micros[order], good[order]
    else:
        v, idx = micros, good
    h = us(horizon_s)
    out: list[tuple[int, str]] = []
    if clock is None:  # anchor at the median; walk down, then up
        m = len(v) // 2
        gaps_down = np.flatnonzero(np.diff(v[: m + 1]) > h)
        lo = gaps_down[-1] + 1 if len(gaps_down) else 0
        for i in idx[:lo]:
            why = (f"event time {ts[int(i)].as_py()} is more than {horizon_s:g} s before the "
                   "other readings of the first file")
            out.append((int(i), why))
        v, idx, start = v[m:], idx[m:], v[m]
    else:
        start = ts_us(clock)
    steps = np.diff(np.concatenate([[start], np.maximum.accumulate(v)]))
    jump = np.flatnonzero(steps > h)
    if len(jump):
        for i in idx[jump[0]:]:
            why = (f"event time {ts[int(i)].as_py()} is more than {horizon_s:g} s ahead of "
                   "the stream's clock (--event-horizon)")
            out.append((int(i), why))
    return out




def _true_indices(mask: pa.Array) -> list[int]:
    """Row indices where a boolean mask is true (nulls count as false); vectorized."""
    return pc.indices_nonzero(pc.fill_null(mask, False)).to_pylist()


def read_part(path: Path, stream: StreamDecl) -> tuple[pa.Table | None, str | None]:
    """A part file's columns of the stream (a query's stream is narrowed to the columns it
    reads: federation/optimizer/columns.py), or the reason it cannot be used (unreadable,
    wrong schema)."""
    try:
        if path.stat().st_size == 0:
            return None, "empty file (0 bytes)"
        f = pq.ParquetFile(path)  # the footer once: the schema, then the columns
        names = f.schema_arrow.names
        missing = [c for c in stream.columns if c not in names]
        if missing:
            return None, (f"wrong schema: missing column(s) {', '.join(missing)} "
                          f"(has {', '.join(names)})")
        t = f.read(columns=list(stream.columns))
    except (OSError, pa.ArrowException) as e:
        return None, f"unreadable Parquet: {str(e).splitlines()[0][:200]}"
    return t, None


def dead_letter(name: str, raw: pa.Table, bad: list[tuple[int, str]], path: Path,
                res: IngestResult) -> None:
    """Write the rejected rows of input file `name` (row index, reason) to `path`, and
    count them per reason."""
    rows = raw.take(pa.array([i for i, _ in bad]))
    pq.write_table(pa.table({
        "file": [name] * len(bad), "row": [i for i, _ in bad], "reason": [r for _, r in bad],
        "raw": [json.dumps(r, default=str) for r in rows.to_pylist()]}), path)
    res.count_dead(reason_kind(r) for _, r in bad)


def reason_kind(reason: str) -> str:
    """The reason without the row's own values, for counting."""
    return re.sub(r" -?[0-9]{4,}-[0-9]{2}-[0-9]{2}[ T][0-9:.]+", "", reason)


def quarantine(path: Path, dead_dir: Path, why: str, res: IngestResult) -> None:
    qdir = dead_dir / "quarantine"
    qdir.mkdir(exist_ok=True)
    import shutil

    shutil.copy2(path, qdir / path.name)
    (qdir / (path.name + ".reason.txt")).write_text(why + "\n")
    res.quarantined.append({"file": path.name, "reason": why})


def count_csv_rejects(data: Path, dead_dir: Path, res: IngestResult) -> None:
    """Rows the CSV loader rejected (its `_rejected.csv`: line, raw, reason) count as dead
    letters of this run, with their line numbers."""
    path = data / REJECTED_CSV
    if not path.exists():
        return
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    import shutil

    shutil.copy2(path, dead_dir / REJECTED_CSV)
    res.rows_in += len(rows)
    res.count_dead("csv: " + r.get("reason", "?") for r in rows)
