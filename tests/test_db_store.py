"""DuckDB side of the MIG: window contents, expiry and flat memory over a long run."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from db.reference import reference_result
from federation.conventions import DB_EXPIRE_SLIDES
from federation.logical import NumberedPlan
from federation.physical import build_physical_plan
from federation.results import diff_results
from federation.runtime.mig import MigRuntime
from federation.smartplug.queries import cq5_plan

T0 = dt.datetime(2013, 9, 1)


def second_of_rows(sec: int, n: int, plugs: int, rng) -> pa.Table:
    ts = [T0 + dt.timedelta(seconds=sec, microseconds=int(x)) for x in
          np.sort(rng.integers(0, 999_999, n))]
    return pa.table({
        "id": pa.array(np.arange(sec * n, (sec + 1) * n), pa.int64()),
        "ts": pa.array(ts, pa.timestamp("us")),
        "value": pa.array(np.round(rng.random(n) * 100, 3)),
        "property": pa.array(rng.integers(0, 2, n), pa.int32()),
        "plug_id": pa.array(rng.integers(0, plugs, n), pa.int32()),
        "household_id": pa.array(np.zeros(n, dtype=np.int32)),
        "house_id": pa.array(np.zeros(n, dtype=np.int32)),
    })


def pure_db_mig(scale: float, plugs: int):
    q = cq5_plan(rate=2000, scale=scale, plugs=plugs)
    pp = build_physical_plan(NumberedPlan.of(q), "db")
    (cand,) = pp.db_ops
    return q, MigRuntime(cand, 1.0)


def feed(mig, t: pa.Table) -> None:
    mig.add("in0", t.append_column("_ts", t.column("ts")))


def test_memory_stays_flat_over_many_slides():
    rng = np.random.default_rng(1)
    _, mig = pure_db_mig(scale=0.1, plugs=100)  # 30 s window
    samples = {}
    for sec in range(700):
        feed(mig, second_of_rows(sec, 2000, 100, rng))
        mig.advance(T0 + dt.timedelta(seconds=sec))
        if sec >= 100 and sec % 25 == 0 or sec == 699:
            samples[sec] = mig.memory_bytes()
    rows = mig.db.row_counts()
    # CQ5's aggregation folds its rows into 1-s slices: no row is kept, one slice row per
    # plug and second of the window (31 s: the window and the slice being filled), plus the
    # slides since the last DELETE pass (DB_EXPIRE_SLIDES)
    assert rows["in0"] == 0
    assert 0 < rows["s0"] <= (31 + DB_EXPIRE_SLIDES) * 100, rows
    print("DuckDB memory bytes by slide:", samples)
    early = max(v for k, v in samples.items() if k <= 300)
    late = max(v for k, v in samples.items() if k >= 500)
    assert late <= 1.5 * early + 2**20


def test_long_batches_hold_no_more_memory_than_one_second_ones():
    """The CHECKPOINT that frees deleted rows and compresses comes every
    DB_CHECKPOINT_SLIDES slides whatever the micro-batch's length: 10 slides per batch
    peak at about what one slide per batch does (counted in calls, it came every 200
    slides there and held 10x the rows uncompressed)."""
    peaks = {}
    for per_batch in (1, 10):
        rng = np.random.default_rng(1)
        _, mig = pure_db_mig(scale=0.1, plugs=2000)  # 30 s window
        peak = 0
        for sec in range(300):
            feed(mig, second_of_rows(sec, 2000, 2000, rng))
            if sec % per_batch == per_batch - 1:
                mig.advance(T0 + dt.timedelta(seconds=sec))
                if sec >= 100:
                    peak = max(peak, mig.memory_bytes())
        peaks[per_batch] = peak
    print("DuckDB peak bytes by slides per batch:", peaks)
    assert peaks[10] <= 1.5 * peaks[1] + 2**20, peaks


def test_mig_matches_reference_when_slides_complete_in_bursts():
    rng = np.random.default_rng(2)
    q, mig = pure_db_mig(scale=1 / 30, plugs=5)  # 10 s window
    tables = [second_of_rows(s, 50, 5, rng) for s in range(30)]
    outs = []
    for s, t in enumerate(tables):
        feed(mig, t)
        if s % 7 == 6:  # the clock advances in bursts: several slides at once
            _, out, _ = mig.advance(T0 + dt.timedelta(seconds=s))
            outs.append(out)
    _, out, _ = mig.advance(dt.datetime(2100, 1, 1))
    outs.append(out)
    got = pa.concat_tables([o for o in outs if o is not None])
    got = got.rename_columns(["tau" if c == "_tau" else c for c in got.column_names])
    want = reference_result(q, pa.concat_tables(tables))
    assert diff_results(got, want) is None
