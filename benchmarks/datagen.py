"""Deterministic generator of the DEBS 2014 Grand Challenge smart-plug stream.

The DEBS 2014 data set consists of measurements of smart plugs deployed in households of
houses.  Every row is ``id, timestamp, value, property, plug_id, household_id, house_id``
where ``property`` is 0 for *work* (cumulative energy in kWh) and 1 for *load* (power in W).

This module writes such a stream as a *spool directory*: one Parquet file per event second
(``part-{second:08d}.parquet``) plus ``_manifest.json``.  File modification times increase
with the second so that a Spark file source (which orders new files by mtime) replays the
stream in event-time order.  Files are written under a hidden temporary name and renamed, so
a streaming reader watching the directory never sees a half-written file.

Two producers share the format:

* :func:`generate` synthesises the stream with numpy (vectorised per event second), fully
  determined by its arguments;
* :func:`load_csv` converts (a prefix of) the real data set's CSV file.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from federation.ingest import write_part

__all__ = ["SCHEMA", "GenerateSummary", "generate", "load_csv", "read_manifest"]

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("value", pa.float64()),
        pa.field("property", pa.int32()),
        pa.field("plug_id", pa.int32()),
        pa.field("household_id", pa.int32()),
        pa.field("house_id", pa.int32()),
    ]
)
"""Arrow schema of every spool file (``ts`` is naive and means UTC)."""

PROPERTY_WORK = 0
PROPERTY_LOAD = 1

MANIFEST_NAME = "_manifest.json"
REJECTED_NAME = "_rejected.csv"
_PART_RE = re.compile(r"^part-\d{8,}\.parquet$")
_EPOCH = datetime(1970, 1, 1)
_US = 1_000_000

# Load model parameters (per plug, drawn from the seed).
_ON_LEVEL_W = (5.0, 2500.0)  # log-uniform on-level of a device
_MEAN_ON_S = (20.0, 900.0)  # mean duration of an "on" period
_MEAN_OFF_S = (60.0, 3600.0)  # mean duration of an "off" period
_MIN_PERIOD_S = 2.0
_RESET_PROB = 1e-5  # per plug and second: the work counter is reset to 0
_HOUSEHOLDS_PER_HOUSE = (1, 6)
_PLUGS_PER_HOUSEHOLD = (2, 10)

ProgressFn = Callable[[int, int], Any]


@dataclass
class GenerateSummary:
    """What a producer wrote to a spool directory (mirrors ``_manifest.json``)."""

    out_dir: str
    source: str
    rate: float
    seconds: int
    houses: int
    plugs: int
    seed: int | None
    start: datetime | None
    rows: int
    files: int
    schema: list[str] = field(default_factory=lambda: list(SCHEMA.names))
    rejected: int = 0
    households: int = 0
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (``start`` as ISO string)."""
        d = asdict(self)
        d["start"] = self.start.isoformat() if self.start is not None else None
        return d


# --------------------------------------------------------------------------------------------
# spool helpers


def _clean_spool(out: Path) -> None:
    """Remove files of a previous spool in ``out`` (only names this module writes)."""
    for p in out.iterdir():
        name = p.name
        if (
            _PART_RE.match(name)
            or name in (MANIFEST_NAME, REJECTED_NAME)
            or (name.startswith(".part-") and name.endswith(".tmp"))
        ):
            p.unlink()


def _write_part(out: Path, second: int, table: pa.Table, mtime: float) -> None:
    write_part(out / f"part-{second:08d}.parquet", table, mtime)


def _write_manifest(out: Path, summary: GenerateSummary) -> None:
    """Write ``_manifest.json`` atomically."""
    tmp = out / f".{MANIFEST_NAME}.tmp"
    tmp.write_text(json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / MANIFEST_NAME)


def _mtime_base(seconds: int) -> float:
    """Base mtime so that ``base + second`` is increasing and lies in the past."""
    return float(math.floor(time.time()) - max(seconds, 0) - 1)


def _to_naive_utc(start: datetime) -> datetime:
    """Return ``start`` as a naive datetime meaning UTC."""
    if start.tzinfo is not None:
        start = start.astimezone(timezone.utc).replace(tzinfo=None)
    return start


def read_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Return the parsed ``_manifest.json`` of a spool directory."""
    with open(Path(out_dir) / MANIFEST_NAME, encoding="utf-8") as f:
        return json.load(f)


# --------------------------------------------------------------------------------------------
# synthetic generator


def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Split ``total`` into integers proportional to ``weights`` (deterministic ties)."""
    w = np.asarray(weights, dtype=np.float64)
    q = total * w / w.sum()
    base = np.floor(q).astype(np.int64)
    rem = int(total - base.sum())
    if rem > 0:
        order = np.argsort(-(q - base), kind="stable")
        base[order[:rem]] += 1
    return base


def _topology(
    rng: np.random.Generator, houses: int, plugs: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return per-plug (house_id, household_id, plug_id) arrays.

    Every house gets 1-6 households with 2-10 plugs each.  If ``plugs`` is given, the total is
    rescaled to exactly that number: every house keeps at least one plug while
    ``plugs >= houses`` (otherwise only the first ``plugs`` houses get one), the rest is split
    proportionally to the natural sizes, and empty households are dropped; ids are renumbered
    to stay contiguous from 0.
    """
    n_hh = rng.integers(_HOUSEHOLDS_PER_HOUSE[0], _HOUSEHOLDS_PER_HOUSE[1] + 1, size=houses)
    hh_plugs = [
        rng.integers(_PLUGS_PER_HOUSEHOLD[0], _PLUGS_PER_HOUSEHOLD[1] + 1, size=int(k))
        for k in n_hh
    ]
    if plugs is not None:
        natural = np.array([c.sum() for c in hh_plugs], dtype=np.float64)
        if plugs < houses:
            per_house = np.zeros(houses, dtype=np.int64)
            per_house[:plugs] = 1
        else:
            per_house = 1 + _largest_remainder(plugs - houses, natural)
        hh_plugs = [
            _largest_remainder(int(n), c) if n > 0 else np.zeros(0, dtype=np.int64)
            for n, c in zip(per_house, hh_plugs)
        ]
        hh_plugs = [c[c > 0] for c in hh_plugs]
        hh_plugs = [c for c in hh_plugs if len(c) > 0]
    house_ids: list[np.ndarray] = []
    household_ids: list[np.ndarray] = []
    plug_ids: list[np.ndarray] = []
    for h, counts in enumerate(hh_plugs):
        counts = np.asarray(counts, dtype=np.int64)
        house_ids.append(np.full(int(counts.sum()), h, dtype=np.int32))
        household_ids.append(np.repeat(np.arange(len(counts), dtype=np.int32), counts))
        plug_ids.append(np.concatenate([np.arange(c, dtype=np.int32) for c in counts]))
    return (
        np.concatenate(house_ids),
        np.concatenate(household_ids),
        np.concatenate(plug_ids),
    )


class _PlugModel:
    """State of all plugs; produces the rows of one event second at a time."""

    def __init__(
        self, *, rate: float, houses: int, plugs: int | None, seed: int, start: datetime
    ) -> None:
        topo_rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
        self.house, self.household, self.plug = _topology(topo_rng, houses, plugs)
        n = len(self.house)
        self.n_plugs = n
        self.n_households = len(np.unique(self.house.astype(np.int64) * 1024 + self.household))
        self.rows_per_second = round(rate)
        self.start_us = (start - _EPOCH) // timedelta(microseconds=1)

        rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
        self.rng = rng
        lo, hi = np.log(_ON_LEVEL_W[0]), np.log(_ON_LEVEL_W[1])
        self.on_level = np.exp(rng.uniform(lo, hi, n))
        # Standby draw when off: 60 % of the plugs read exactly 0, the others < 1 W.
        self.standby = np.where(rng.random(n) < 0.6, 0.0, rng.uniform(0.01, 0.9, n))
        self.mean_on = rng.uniform(*_MEAN_ON_S, n)
        self.mean_off = rng.uniform(*_MEAN_OFF_S, n)
        self.noise = rng.uniform(0.005, 0.05, n)  # relative noise when on
        p_on = self.mean_on / (self.mean_on + self.mean_off)
        self.on = rng.random(n) < p_on
        self.phase_end = self._durations(self.on) * rng.random(n)
        self.work = np.round(rng.uniform(0.0, 50.0, n), 3)  # kWh at the start
        # Round-robin order of the 2n (plug, property) streams: a fixed random plug order.
        self.order = rng.permutation(n)
        self.next_slot = 0
        self.next_id = 0

    def _durations(self, on: np.ndarray) -> np.ndarray:
        """Draw one period length (s) per plug for the on/off states ``on``."""
        means = np.where(on, self.mean_on, self.mean_off)
        return np.maximum(self.rng.exponential(means), _MIN_PERIOD_S)

    def _advance_phases(self, t: float) -> None:
        """Toggle on/off of every plug whose period ended at or before ``t``."""
        while True:
            due = np.flatnonzero(self.phase_end <= t)
            if len(due) == 0:
                return
            self.on[due] = ~self.on[due]
            means = np.where(self.on[due], self.mean_on[due], self.mean_off[due])
            self.phase_end[due] += np.maximum(self.rng.exponential(means), _MIN_PERIOD_S)

    def second(self, s: int) -> pa.Table:
        """Return the rows of event second ``s`` (must be called with s = 0, 1, 2, ...)."""
        rng = self.rng
        n = self.n_plugs
        r = self.rows_per_second
        self._advance_phases(float(s))
        resets = np.flatnonzero(rng.random(n) < _RESET_PROB)
        if len(resets):
            self.work[resets] = 0.0
        level = np.where(self.on, self.on_level, self.standby)  # mean W during this second

        slots = np.arange(self.next_slot, self.next_slot + r, dtype=np.int64)
        self.next_slot += r
        stream = slots % (2 * n)
        plug = self.order[stream // 2]
        is_load = (stream % 2) == 0
        prop = np.where(is_load, PROPERTY_LOAD, PROPERTY_WORK).astype(np.int32)

        offs = np.sort(rng.integers(0, _US, size=r))
        # A work report directly after its plug's load report shares that timestamp.
        pair = np.flatnonzero(~is_load[1:] & is_load[:-1]) + 1
        offs[pair] = offs[pair - 1]
        ts = self.start_us + s * _US + offs

        pl = level[plug]
        on = self.on[plug]
        noise = rng.standard_normal(r)
        load_on = pl * (1.0 + self.noise[plug] * noise)
        # Standby: exact zeros for zero-standby plugs, tiny jittering values otherwise.
        load_off = np.where(pl > 0.0, pl * (1.0 + 0.2 * noise), 0.0)
        load = np.maximum(np.where(on, load_on, load_off), 0.0)
        work = self.work[plug] + pl * (offs / _US) / 3.6e6
        value = np.round(np.where(is_load, load, work), 3)
        self.work += level / 3.6e6

        ids = np.arange(self.next_id, self.next_id + r, dtype=np.int64)
        self.next_id += r
        return pa.Table.from_arrays(
            [
                pa.array(ids, type=pa.int64()),
                pa.array(ts, type=pa.timestamp("us")),
                pa.array(value, type=pa.float64()),
                pa.array(prop, type=pa.int32()),
                pa.array(self.plug[plug], type=pa.int32()),
                pa.array(self.household[plug], type=pa.int32()),
                pa.array(self.house[plug], type=pa.int32()),
            ],
            schema=SCHEMA,
        )


def _progress_step(seconds: int) -> int:
    """Seconds between two progress calls (about every 5 %)."""
    return max(1, seconds // 20)


def generate(
    out_dir: str | os.PathLike[str],
    *,
    rate: float = 2000,
    seconds: int = 600,
    houses: int = 40,
    plugs: int | None = None,
    seed: int = 0,
    start: datetime = datetime(2013, 9, 1),
    progress: ProgressFn | None = None,
) -> GenerateSummary:
    """Write a synthetic DEBS 2014 smart-plug stream as one Parquet file per event second.

    ``out_dir/part-{second:08d}.parquet`` holds exactly ``round(rate)`` rows with
    ``start + second <= ts < start + second + 1``, sorted by ``ts``; ``id`` increases globally
    from 0.  Each plug reports load (property 1, W) and work (property 0, cumulative kWh)
    round-robin; a higher ``rate`` raises the report frequency, not the number of plugs.
    Files of an earlier spool in ``out_dir`` are removed first.  The row content depends only
    on the arguments (not on ``progress``); file mtimes increase with the second.
    ``progress(done, seconds)`` is called about every 5 %.
    """
    if rate <= 0 or round(rate) < 1:
        raise ValueError(f"rate must be >= 0.5 rows/s, got {rate!r}")
    if seconds < 0:
        raise ValueError(f"seconds must be >= 0, got {seconds!r}")
    if houses < 1:
        raise ValueError(f"houses must be >= 1, got {houses!r}")
    if plugs is not None and plugs < 1:
        raise ValueError(f"plugs must be >= 1, got {plugs!r}")
    t0 = time.perf_counter()
    start = _to_naive_utc(start)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _clean_spool(out)

    model = _PlugModel(rate=rate, houses=houses, plugs=plugs, seed=seed, start=start)
    base = _mtime_base(seconds)
    step = _progress_step(seconds)
    for s in range(seconds):
        _write_part(out, s, model.second(s), base + s)
        if progress is not None and ((s + 1) % step == 0 or s + 1 == seconds):
            progress(s + 1, seconds)

    summary = GenerateSummary(
        out_dir=str(out),
        source="synthetic",
        rate=float(rate),
        seconds=seconds,
        houses=len(np.unique(model.house)),
        plugs=model.n_plugs,
        seed=seed,
        start=start,
        rows=model.next_id,
        files=seconds,
        households=model.n_households,
    )
    summary.elapsed_s = round(time.perf_counter() - t0, 3)
    _write_manifest(out, summary)
    return summary


# --------------------------------------------------------------------------------------------
# real data set (CSV)

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
    path = out / REJECTED_NAME
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
) -> GenerateSummary:
    """Convert the real DEBS 2014 CSV into the spool format of :func:`generate`.

    The CSV has no header and the columns ``id,timestamp,value,property,plug_id,household_id,
    house_id`` (``timestamp`` in integer unix seconds).  Rows are written one Parquet file per
    event second, numbered relative to the smallest timestamp's second (seconds without rows get
    no file), sorted by ``(ts, id)``; with ``rows_per_file_second=False`` everything goes into a
    single ``part-00000000.parquet``.  Rows that do not parse (wrong column count, bad number,
    missing value, property not 0/1, NaN, timestamp out of range) are skipped, written to
    ``_rejected.csv`` with a reason and counted in ``rejected``.
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
        start: datetime | None = _EPOCH + timedelta(seconds=t_min)
    else:
        t_min, span, start = 0, 0, None
    spool = pa.Table.from_arrays(
        [
            table.column("id"),
            pa.array(ts_s * _US, type=pa.timestamp("us")),
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
            _write_part(out, sec, spool.slice(a, b - a), base + sec)
            files += 1
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


# --------------------------------------------------------------------------------------------
# command line


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m benchmarks.datagen OUT_DIR [--rate R --seconds S ...]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--houses", type=int, default=40)
    ap.add_argument("--plugs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=datetime.fromisoformat, default=datetime(2013, 9, 1))
    ap.add_argument("--csv", default=None, help="convert this DEBS 2014 CSV instead")
    args = ap.parse_args(argv)
    if args.csv:
        summary = load_csv(args.csv, args.out_dir)
    else:
        summary = generate(
            args.out_dir,
            rate=args.rate,
            seconds=args.seconds,
            houses=args.houses,
            plugs=args.plugs,
            seed=args.seed,
            start=args.start,
            progress=lambda i, n: print(f"{i}/{n} s", flush=True),
        )
    print(json.dumps(summary.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
