"""The smart-plug load model behind `fedq generate`: houses, households and plugs (the
topology), and per plug a device that switches on and off with a log-uniform on-level, its
load readings and a work counter that is reset now and then."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa

from federation.conventions import US_PER_S, ts_us

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

# Load model parameters (per plug, drawn from the seed).
_ON_LEVEL_W = (5.0, 2500.0)  # log-uniform on-level of a device
_MEAN_ON_S = (20.0, 900.0)  # mean duration of an "on" period
_MEAN_OFF_S = (60.0, 3600.0)  # mean duration of an "off" period
_MIN_PERIOD_S = 2.0
_RESET_PROB = 1e-5  # per plug and second: the work counter is reset to 0
_HOUSEHOLDS_PER_HOUSE = (1, 6)
_PLUGS_PER_HOUSEHOLD = (2, 10)


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
