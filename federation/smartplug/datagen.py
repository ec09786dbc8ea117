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

from federation.conventions import REJECTED_CSV, US_PER_S, ts_us
from federation.parts import write_part

__all__ = ["SCHEMA", "GenerateSummary", "generate", "read_manifest"]

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
_PART_RE = re.compile(r"^part-\d{8,}\.parquet$")

# Load model parameters (per plug, drawn from the seed).
_ON_LEVEL_W = (5.0, 2500.0)  # log-uniform on-level of a device
_MEAN_ON_S = (20.0, 900.0)  # mean duration of an "on" period
_MEAN_OFF_S = (60.0, 3600.0)  # mean duration of an "off" period
_MIN_PERIOD_S = 2.0
_RESET_PROB = 1e-5  # per plug and second: the work counter is reset to 0
_HOUSEHOLDS_PER_HOUSE = (1, 6)
_PLUGS_PER_HOUSEHOLD = (2, 10)

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
        self.start_us = ts_us(start)

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

    def second(self, s: int, rows: int | None = None) -> pa.Table:
        """Return the rows of event second ``s`` (must be called with s = 0, 1, 2, ...):
        ``rows`` of them (default: the model's rate)."""
        rng = self.rng
        n = self.n_plugs
        r = self.rows_per_second if rows is None else rows
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

        offs = np.sort(rng.integers(0, US_PER_S, size=r))
        # A work report directly after its plug's load report shares that timestamp.
        pair = np.flatnonzero(~is_load[1:] & is_load[:-1]) + 1
        offs[pair] = offs[pair - 1]
        ts = self.start_us + s * US_PER_S + offs

        pl = level[plug]
        on = self.on[plug]
        noise = rng.standard_normal(r)
        load_on = pl * (1.0 + self.noise[plug] * noise)
        # Standby: exact zeros for zero-standby plugs, tiny jittering values otherwise.
        load_off = np.where(pl > 0.0, pl * (1.0 + 0.2 * noise), 0.0)
        load = np.maximum(np.where(on, load_on, load_off), 0.0)
        work = self.work[plug] + pl * (offs / US_PER_S) / 3.6e6
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
    rate_profile: list[tuple[float, int]] | None = None,
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
        _write_part(out, s, model.second(s, None if per_second is None else per_second[s]),
                    base + s)
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
