"""The real DEBS 2014 data set's CSV file, converted into the spool format of `datagen`.

Rows that do not parse (wrong column count, bad number, missing value, property not 0/1,
NaN or infinite, timestamp out of range) are skipped and written to ``_rejected.csv`` with
their line number and reason; ingest counts them with the other dead letters.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from federation.conventions import EPOCH, REJECTED_CSV, US_PER_S
from federation.smartplug.datagen import (
    PROPERTY_LOAD,
    PROPERTY_WORK,
    SCHEMA,
    GenerateSummary,
    _clean_spool,
    _mtime_base,
    _write_manifest,
    _write_part,
)

_CSV_COLUMNS = ["id", "timestamp", "value", "property", "plug_id", "household_id", "house_id"]
_CSV_TYPES: dict[str, pa.DataType] = {
    "id": pa.int64(),
    "timestamp": pa.int64(),
    "value": pa.float64(),
    "property": pa.int32(),
    "plug_id": pa.int32(),
    "household_id": pa.int32(),
    "house_id": pa.int32(),
}
_CSV_SCHEMA = pa.schema(list(_CSV_TYPES.items()))
_INT_RE = r"^[+-]?\d{1,18}$"
_FLOAT_RE = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$"
_TS_MAX_S = 2**33  # unix seconds beyond year 2242 are rejected as out of range
_I32 = (-(2**31), 2**31 - 1)


def _read_typed(path: Path, bad: list[tuple[int | None, str, str]]) -> pa.Table:
    """Read the CSV with its explicit column types (raises ArrowInvalid on a bad value)."""

    def on_invalid(row: pacsv.InvalidRow) -> str:
        reason = f"expected {row.expected_columns} columns, got {row.actual_columns}"
        bad.append((row.number, row.text, reason))
        return "skip"

    return pacsv.read_csv(
        path,
        # one thread: the invalid-row handler then knows each row's line number
        read_options=pacsv.ReadOptions(column_names=_CSV_COLUMNS, use_threads=False),
        parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
        convert_options=pacsv.ConvertOptions(column_types=_CSV_TYPES),
    )


def _read_as_strings(
    path: Path, bad: list[tuple[int | None, str, str]]
) -> tuple[pa.Table, np.ndarray, list[list[str]]]:
    """Read the CSV as strings, validate each field and cast the good rows.

    Returns the typed table of all rows (bad fields as null), per row the reason of the first
    bad field (``""`` if none) and the raw string columns.
    """

    def on_invalid(row: pacsv.InvalidRow) -> str:
        reason = f"expected {row.expected_columns} columns, got {row.actual_columns}"
        bad.append((row.number, row.text, reason))
        return "skip"

    raw = pacsv.read_csv(
        path,
        # one thread: the invalid-row handler then knows each row's line number
        read_options=pacsv.ReadOptions(column_names=_CSV_COLUMNS, use_threads=False),
        parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
        convert_options=pacsv.ConvertOptions(
            column_types={c: pa.string() for c in _CSV_COLUMNS},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    n = raw.num_rows
    reasons = np.full(n, "", dtype=object)
    arrays = []
    for name in _CSV_COLUMNS:
        col = pc.utf8_trim_whitespace(raw.column(name))
        typ = _CSV_TYPES[name]
        pattern = _FLOAT_RE if pa.types.is_floating(typ) else _INT_RE
        ok = pc.match_substring_regex(col, pattern).to_numpy(zero_copy_only=False)
        ok = ok.astype(bool)
        vals = pc.if_else(pa.array(ok), col, pa.scalar("0"))
        casted = pc.cast(vals, pa.float64() if pa.types.is_floating(typ) else pa.int64())
        if pa.types.is_int32(typ):
            v = casted.to_numpy()
            ok &= (v >= _I32[0]) & (v <= _I32[1])
            casted = pc.cast(pc.if_else(pa.array(ok), casted, pa.scalar(0, pa.int64())), typ)
        newly = ~ok & (reasons == "")
        if newly.any():
            texts = col.to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(newly):
                reasons[i] = f"bad {name}: {texts[i]!r}"
        arrays.append(pc.if_else(pa.array(ok), casted, pa.scalar(None, typ)))
    table = pa.Table.from_arrays(arrays, names=_CSV_COLUMNS)
    raw_cols = [raw.column(c).to_pylist() for c in _CSV_COLUMNS]
    return table, reasons, raw_cols


def _semantic_reasons(table: pa.Table, reasons: np.ndarray) -> np.ndarray:
    """Add reasons for rows with missing values, NaN/inf, bad property or timestamp."""
    reasons = reasons.copy()

    def mark(mask: np.ndarray, reason: str) -> None:
        sel = mask & (reasons == "")
        reasons[sel] = reason

    for name in _CSV_COLUMNS:
        mark(table.column(name).is_null().to_numpy(zero_copy_only=False), f"missing {name}")
    value = table.column("value").fill_null(0.0).to_numpy()
    mark(~np.isfinite(value), "non-finite value")
    prop = table.column("property").fill_null(0).to_numpy()
    mark((prop != PROPERTY_WORK) & (prop != PROPERTY_LOAD), "property not 0 or 1")
    ts = table.column("timestamp").fill_null(0).to_numpy()
    mark((ts < 0) | (ts >= _TS_MAX_S), "timestamp out of range")
    return reasons


def _line_numbers(n: int, skipped: list[int | None]) -> np.ndarray:
    """Line numbers (1-based) of the `n` rows kept by the reader, around the skipped lines."""
    skip = np.array(sorted(x for x in skipped if x is not None), dtype=np.int64)
    return np.setdiff1d(np.arange(1, n + len(skip) + 1, dtype=np.int64), skip)[:n]


def _write_rejected(out: Path, rows: list[tuple[int | None, str, str]]) -> None:
    """Write ``_rejected.csv`` (line, raw, reason) or remove a stale one."""
    path = out / REJECTED_CSV
    if not rows:
        if path.exists():
            path.unlink()
        return
    rows = sorted(rows, key=lambda r: (r[0] is None, r[0] if r[0] is not None else 0))
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["line", "raw", "reason"])
        for line, raw, reason in rows:
            w.writerow(["" if line is None else line, raw, reason])


def load_csv(
    csv_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    rows_per_file_second: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> GenerateSummary:
    """Convert the real DEBS 2014 CSV into the spool format of :func:`generate`.

    The CSV has no header and the columns ``id,timestamp,value,property,plug_id,household_id,
    house_id`` (``timestamp`` in integer unix seconds).  Rows are written one Parquet file per
    event second, numbered relative to the smallest timestamp's second (seconds without rows get
    no file), sorted by ``(ts, id)``; with ``rows_per_file_second=False`` everything goes into a
    single ``part-00000000.parquet``.  Rows that do not parse (wrong column count, bad number,
    missing value, property not 0/1, NaN, timestamp out of range) are skipped, written to
    ``_rejected.csv`` with a reason and counted in ``rejected``. `progress(done, total)` is
    called as the files are written (first with done 0, once the CSV is read).
    """
    t0 = time.perf_counter()
    path = Path(csv_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _clean_spool(out)

    bad: list[tuple[int | None, str, str]] = []
    raw_cols: list[list[str]] | None = None
    try:
        if path.stat().st_size == 0:
            table = _CSV_SCHEMA.empty_table()
        else:
            table = _read_typed(path, bad)
        reasons = np.full(table.num_rows, "", dtype=object)
    except pa.ArrowInvalid:
        bad = []
        table, reasons, raw_cols = _read_as_strings(path, bad)
    reasons = _semantic_reasons(table, reasons)
    rejected_idx = np.flatnonzero(reasons != "")
    lines = _line_numbers(table.num_rows, [b[0] for b in bad])
    for i in rejected_idx:
        if raw_cols is not None:
            text = ",".join(str(c[i]) for c in raw_cols)
        else:
            text = ",".join(
                "" if v is None else str(v) for v in table.slice(int(i), 1).to_pylist()[0].values()
            )
        bad.append((int(lines[i]), text, str(reasons[i])))
    if len(rejected_idx):
        table = table.filter(pa.array(reasons == ""))
    _write_rejected(out, bad)

    ts_s = table.column("timestamp").to_numpy().astype(np.int64)
    n = table.num_rows
    if n:
        t_min = int(ts_s.min())
        span = int(ts_s.max()) - t_min + 1
        start: datetime | None = EPOCH + timedelta(seconds=t_min)
    else:
        t_min, span, start = 0, 0, None
    spool = pa.Table.from_arrays(
        [
            table.column("id"),
            pa.array(ts_s * US_PER_S, type=pa.timestamp("us")),
            table.column("value"),
            table.column("property"),
            table.column("plug_id"),
            table.column("household_id"),
            table.column("house_id"),
        ],
        schema=SCHEMA,
    )
    order = pc.sort_indices(spool, sort_keys=[("ts", "ascending"), ("id", "ascending")])
    spool = spool.take(order)
    seconds_sorted = np.sort(ts_s) - t_min

    base = _mtime_base(span)
    files = 0
    if n and rows_per_file_second:
        uniq = np.unique(seconds_sorted)
        lo = np.searchsorted(seconds_sorted, uniq, side="left")
        hi = np.searchsorted(seconds_sorted, uniq, side="right")
        for sec, a, b in zip(uniq.tolist(), lo.tolist(), hi.tolist()):
            if progress and files % 10 == 0:
                progress(files, len(uniq))
            _write_part(out, sec, spool.slice(a, b - a), base + sec)
            files += 1
        if progress:
            progress(files, len(uniq))
    elif n:
        _write_part(out, 0, spool, base)
        files = 1

    keys = spool.select(["house_id", "household_id", "plug_id"])
    summary = GenerateSummary(
        out_dir=str(out),
        source=f"csv:{path.name}",
        rate=round(n / span, 3) if span else 0.0,
        seconds=span,
        houses=len(pc.unique(spool.column("house_id"))),
        plugs=keys.group_by(keys.column_names).aggregate([]).num_rows,
        seed=None,
        start=start,
        rows=n,
        files=files,
        rejected=len(bad),
        households=keys.group_by(["house_id", "household_id"]).aggregate([]).num_rows,
    )
    summary.elapsed_s = round(time.perf_counter() - t0, 3)
    _write_manifest(out, summary)
    return summary


