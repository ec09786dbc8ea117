"""Deterministic generator of the DEBS 2014 Grand Challenge smart-plug stream.

The DEBS 2014 data set consists of measurements of smart plugs deployed in households of
houses.  Every row is ``id, timestamp, value, property, plug_id, household_id, house_id``
where ``property`` is 0 for *work* (cumulative energy in kWh) and 1 for *load* (power in W).

This module writes such a stream as a *spool directory*: one Parquet file per event second
(``part-{second:08d}.parquet``) plus ``_manifest.json``.  File modification times increase
with the second so that a Spark file source (which orders new files by mtime) replays the
stream in event-time order.  Files are written under a hidden temporary name and renamed, so
a streaming reader watching the directory never sees a half-written file.

Two producers share the format: :func:`generate` synthesises the stream with numpy
(vectorised per event second), fully determined by its arguments; `csvload.load_csv`
converts (a prefix of) the real data set's CSV file. `fedq generate` runs either.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from federation.conventions import REJECTED_CSV
from federation.parts import write_part
from federation.smartplug.plugs import PROPERTY_LOAD, PROPERTY_WORK, SCHEMA, _PlugModel

__all__ = ["PROPERTY_LOAD", "PROPERTY_WORK", "SCHEMA", "GenerateSummary", "generate",
           "read_manifest"]

MANIFEST_NAME = "_manifest.json"
_PART_RE = re.compile(r"^part-\d{8,}\.parquet$")


ProgressFn = Callable[[int, int], Any]


class GenerateSummary(BaseModel):
    """What a producer wrote to a spool directory (``_manifest.json``)."""

    model_config = ConfigDict(extra="forbid")

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
    schema_: list[str] = Field(default_factory=lambda: list(SCHEMA.names), alias="schema")
    rejected: int = 0
    households: int = 0
    elapsed_s: float = 0.0
    #: (tuples/s, event seconds) phases when the rate changes over event time (`rate` is the
    #: mean then)
    rate_profile: list[tuple[float, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON-ready values (``start`` as ISO string)."""
        return self.model_dump(mode="json", by_alias=True)


# --------------------------------------------------------------------------------------------
# spool helpers


def _clean_spool(out: Path) -> None:
    """Remove files of a previous spool in ``out`` (only names this module writes)."""
    for p in out.iterdir():
        name = p.name
        if (
            _PART_RE.match(name)
            or name in (MANIFEST_NAME, REJECTED_CSV)
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


def read_manifest(out_dir: str | os.PathLike[str]) -> GenerateSummary:
    """The ``_manifest.json`` of a spool directory."""
    return GenerateSummary.model_validate_json(
        (Path(out_dir) / MANIFEST_NAME).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# synthetic generator


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
    rate_profile: list[tuple[float, int]] | None = None,
    realtime: float | None = None,
    burst_s: int = 0,
) -> GenerateSummary:
    """Write a synthetic DEBS 2014 smart-plug stream as one Parquet file per event second.

    ``out_dir/part-{second:08d}.parquet`` holds exactly ``round(rate)`` rows with
    ``start + second <= ts < start + second + 1``, sorted by ``ts``; ``id`` increases globally
    from 0.  Each plug reports load (property 1, W) and work (property 0, cumulative kWh)
    round-robin; a higher ``rate`` raises the report frequency, not the number of plugs.
    Files of an earlier spool in ``out_dir`` are removed first.  The row content depends only
    on the arguments (not on ``progress``); file mtimes increase with the second.
    ``progress(done, seconds)`` is called about every 5 %. ``rate_profile`` (phases of
    (tuples/s, event seconds), e.g. ``[(2000, 120), (40000, 120)]``) replaces ``rate`` and
    ``seconds``: the rate changes over event time, the plugs stay the same.
    ``realtime`` (a speed, 1.0 = real time): second ``s`` is written when ``s / realtime``
    wall seconds have passed since the start (a live producer for ``fedq run --follow``;
    each file appears at once under its final name, as the follower expects); the first
    ``burst_s`` seconds are written at once (a backlog that fills the windows).
    """
    if rate_profile is not None:
        rate_profile = [(float(r), int(n)) for r, n in rate_profile]
        if not rate_profile or any(r <= 0 or round(r) < 1 or n < 1 for r, n in rate_profile):
            raise ValueError(f"rate_profile: phases of (rate >= 0.5, seconds >= 1), "
                             f"got {rate_profile!r}")
        seconds = sum(n for _, n in rate_profile)
        rate = sum(r * n for r, n in rate_profile) / seconds
    per_second = (None if rate_profile is None else
                  [round(r) for r, n in rate_profile for _ in range(n)])
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
        table = model.second(s, None if per_second is None else per_second[s])
        if realtime and s >= burst_s:
            time.sleep(max(0.0, t0 + (s + 1 - burst_s) / realtime - time.perf_counter()))
        _write_part(out, s, table, base + s)
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
        rate_profile=rate_profile,
    )
    summary.elapsed_s = round(time.perf_counter() - t0, 3)
    _write_manifest(out, summary)
    return summary
