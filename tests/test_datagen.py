"""Tests of the DEBS 2014 smart-plug stream generator (no JVM)."""

from __future__ import annotations

import csv
import itertools
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from federation.smartplug.csvload import load_csv
from federation.smartplug.datagen import SCHEMA, generate, read_manifest

START = datetime(2013, 9, 1)


def _parts(d: Path) -> list[Path]:
    """Return the spool files of ``d`` in name order."""
    return sorted(d.glob("part-*.parquet"))


def _read_all(d: Path) -> pa.Table:
    """Concatenate all spool files of ``d`` in name order."""
    return pa.concat_tables(pq.read_table(p) for p in _parts(d))


@pytest.fixture(scope="module")
def spool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, pa.Table]:
    """Generate a small default-shaped stream once for several tests."""
    d = tmp_path_factory.mktemp("spool")
    calls: list[tuple[int, int]] = []
    summary = generate(
        d, rate=500, seconds=40, houses=10, seed=3, progress=lambda i, n: calls.append((i, n))
    )
    assert calls and calls[-1] == (40, 40)
    assert len(calls) == 20
    return d, summary, _read_all(d)


def test_schema_and_manifest(spool: tuple[Path, object, pa.Table]) -> None:
    """Files carry SCHEMA; manifest and summary agree."""
    d, summary, table = spool
    assert table.schema == SCHEMA
    m = read_manifest(d)
    assert m.rows == summary.rows == table.num_rows == 500 * 40
    assert m.files == summary.files == 40
    assert m.seconds == 40 and m.rate == 500 and m.seed == 3
    assert m.houses == summary.houses == 10
    assert m.plugs == summary.plugs
    assert m.start == START
    assert m.schema_ == SCHEMA.names


def test_file_naming_rows_per_second_and_ts_range(spool: tuple[Path, object, pa.Table]) -> None:
    """One file per second with exactly round(rate) rows, ts inside the second and sorted."""
    d, _, _ = spool
    parts = _parts(d)
    assert [p.name for p in parts] == [f"part-{s:08d}.parquet" for s in range(40)]
    mtimes = [os.stat(p).st_mtime for p in parts]
    assert all(a < b for a, b in itertools.pairwise(mtimes))
    assert not list(d.glob(".*"))  # no temporary files left
    for s, p in enumerate(parts):
        t = pq.read_table(p)
        assert t.num_rows == 500
        ts = t.column("ts").to_numpy()
        lo = np.datetime64(START + timedelta(seconds=s), "us")
        assert (ts >= lo).all() and (ts < lo + np.timedelta64(1, "s")).all()
        assert (np.diff(ts.astype(np.int64)) >= 0).all()


def test_ids_global_and_properties(spool: tuple[Path, object, pa.Table]) -> None:
    """Ids run 0..rows-1 in file order; both properties and id ranges are present."""
    _, summary, table = spool
    ids = table.column("id").to_numpy()
    assert (ids == np.arange(len(ids))).all()
    props = set(table.column("property").to_pylist())
    assert props == {0, 1}
    df = table.to_pandas()
    assert df.house_id.min() == 0 and df.house_id.max() == 9
    # household/plug ids are contiguous from 0 within their parent
    for _, g in df.groupby("house_id"):
        hh = sorted(g.household_id.unique())
        assert hh == list(range(len(hh)))
    for _, g in df.groupby(["house_id", "household_id"]):
        pl = sorted(g.plug_id.unique())
        assert pl == list(range(len(pl)))
    n_plugs = len(df.groupby(["house_id", "household_id", "plug_id"]))
    assert n_plugs == summary.plugs
    assert (df.value.round(3) == df.value).all()


def test_load_has_many_near_zero_readings(spool: tuple[Path, object, pa.Table]) -> None:
    """Plugs are often off: more than 20 % of load readings are below 1 W, some are large."""
    _, _, table = spool
    df = table.to_pandas()
    load = df[df.property == 1].value
    assert (load >= 0).all()
    assert (load < 1.0).mean() > 0.2
    assert (load == 0.0).any()
    assert load.max() > 100


def test_work_monotonic_except_resets(tmp_path: Path) -> None:
    """Work never decreases per plug except on a (rare) reset to about 0 kWh."""
    generate(tmp_path, rate=2000, seconds=120, houses=40, seed=1)
    df = _read_all(tmp_path).to_pandas()
    w = df[df.property == 0].sort_values(["ts", "id"])
    keys = ["house_id", "household_id", "plug_id"]
    diff = w.groupby(keys).value.diff()
    drops = w[diff < 0]
    assert (drops.value <= 0.01).all()
    assert len(drops) <= 0.001 * len(w)
    assert (w.groupby(keys).value.max() > 0).any()
    assert (w.value >= 0).all()


def test_deterministic(tmp_path: Path) -> None:
    """Same arguments give identical tables; another seed gives different values."""
    kw = {"rate": 300, "seconds": 15, "houses": 5, "seed": 7}
    generate(tmp_path / "a", **kw)
    generate(tmp_path / "b", **kw, progress=lambda i, n: None)
    generate(tmp_path / "c", **{**kw, "seed": 8})
    a, b, c = (_read_all(tmp_path / x) for x in "abc")
    assert a.equals(b)
    for pa_, pb in zip(_parts(tmp_path / "a"), _parts(tmp_path / "b")):
        assert pq.read_table(pa_).equals(pq.read_table(pb))
    assert not a.equals(c)


def test_rerun_replaces_old_spool(tmp_path: Path) -> None:
    """A second run into the same directory leaves no stale part files."""
    generate(tmp_path, rate=100, seconds=10, houses=2)
    generate(tmp_path, rate=100, seconds=4, houses=2)
    assert len(_parts(tmp_path)) == 4
    assert read_manifest(tmp_path).files == 4


@pytest.mark.parametrize("plugs,houses", [(7, 40), (57, 10), (2125, 40)])
def test_plugs_argument(tmp_path: Path, plugs: int, houses: int) -> None:
    """plugs= gives exactly that many distinct (house, household, plug) triples."""
    s = generate(tmp_path, rate=2 * plugs, seconds=2, houses=houses, plugs=plugs)
    df = _read_all(tmp_path).to_pandas()
    triples = df[["house_id", "household_id", "plug_id"]].drop_duplicates()
    assert len(triples) == plugs == s.plugs
    assert s.houses == df.house_id.nunique() == min(houses, plugs)
    assert sorted(df.house_id.unique()) == list(range(s.houses))
    # round-robin: every plug reports load and work once per second here
    per_plug = df.groupby(["house_id", "household_id", "plug_id", "property"]).size()
    assert (per_plug == 2).all()


def test_higher_rate_means_more_reports_not_more_plugs(tmp_path: Path) -> None:
    """Raising the rate keeps the plug population and raises per-plug reports."""
    lo = generate(tmp_path / "lo", rate=1000, seconds=2, houses=8, seed=2)
    hi = generate(tmp_path / "hi", rate=10000, seconds=2, houses=8, seed=2)
    assert lo.plugs == hi.plugs and hi.rows == 10 * lo.rows


def test_invalid_arguments(tmp_path: Path) -> None:
    """Nonsensical arguments are rejected."""
    with pytest.raises(ValueError):
        generate(tmp_path, rate=0)
    with pytest.raises(ValueError):
        generate(tmp_path, plugs=0)
    with pytest.raises(ValueError):
        generate(tmp_path, houses=0)


def test_speed_report(tmp_path: Path) -> None:
    """Generate 2000 rows/s x 60 s and print the time (no timing assertion)."""
    t0 = time.perf_counter()
    s = generate(tmp_path, rate=2000, seconds=60)
    print(f"\n2000 rows/s x 60 s: {s.rows} rows in {time.perf_counter() - t0:.2f} s")
    assert s.rows == 120_000


def _write_csv(path: Path, base: int) -> list[list[str]]:
    """Write a small DEBS-style CSV with one bad row; return the good rows."""
    good = [
        ["0", str(base), "12.5", "1", "0", "0", "0"],
        ["1", str(base), "3.216", "0", "0", "0", "0"],
        ["2", str(base + 1), "0", "1", "1", "0", "0"],
        ["3", str(base + 1), "0.5", "0", "1", "0", "0"],
        ["5", str(base + 3), "99.1", "1", "0", "1", "2"],
        ["4", str(base + 3), "1.25", "0", "0", "1", "2"],
    ]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerows(good[:3])
        w.writerow(["9", str(base + 1), "oops", "1", "0", "0", "0"])  # bad value
        w.writerows(good[3:])
    return good


def test_load_csv_round_trip(tmp_path: Path) -> None:
    """The real CSV layout converts to the spool format; a bad row is rejected and counted."""
    base = 1377986401
    src = tmp_path / "sorted100M.csv"
    good = _write_csv(src, base)
    out = tmp_path / "spool"
    s = load_csv(src, out)
    assert s.rows == 6 and s.rejected == 1
    assert s.seconds == 4 and s.files == 3
    assert [p.name for p in _parts(out)] == [
        "part-00000000.parquet",
        "part-00000001.parquet",
        "part-00000003.parquet",
    ]
    table = _read_all(out)
    assert table.schema == SCHEMA
    assert table.column("id").to_pylist() == [0, 1, 2, 3, 4, 5]  # sorted by (ts, id)
    ts0 = datetime(1970, 1, 1) + timedelta(seconds=base)
    assert s.start == ts0
    got = {
        (
            r["id"],
            r["ts"],
            r["value"],
            r["property"],
            r["plug_id"],
            r["household_id"],
            r["house_id"],
        )
        for r in table.to_pylist()
    }
    want = {
        (
            int(g[0]),
            datetime(1970, 1, 1) + timedelta(seconds=int(g[1])),
            float(g[2]),
            int(g[3]),
            int(g[4]),
            int(g[5]),
            int(g[6]),
        )
        for g in good
    }
    assert got == want
    with open(out / "_rejected.csv", newline="") as f:
        rej = list(csv.DictReader(f))
    assert len(rej) == 1 and "value" in rej[0]["reason"] and "oops" in rej[0]["raw"]
    m = read_manifest(out)
    assert m.rejected == 1 and m.rows == 6 and m.houses == 2 and m.plugs == 3


def test_load_csv_structural_and_semantic_rejects(tmp_path: Path) -> None:
    """Wrong column counts, missing values and bad properties are rejected, not fatal."""
    base = 1377986401
    src = tmp_path / "x.csv"
    src.write_text(
        f"0,{base},1.0,1,0,0,0\n"
        f"1,{base},2.0,0,0,0\n"  # too few columns
        f"2,{base},,1,0,0,0\n"  # missing value
        f"3,{base},1.0,7,0,0,0\n"  # bad property
        f"4,{base + 2},4.0,0,0,0,0\n"
    )
    s = load_csv(src, tmp_path / "o", rows_per_file_second=False)
    assert s.rows == 2 and s.rejected == 3 and s.files == 1 and s.seconds == 3
    assert _read_all(tmp_path / "o").column("id").to_pylist() == [0, 4]
    with open(tmp_path / "o" / "_rejected.csv", newline="") as f:
        reasons = sorted(r["reason"] for r in csv.DictReader(f))
    assert any("columns" in r for r in reasons)
    assert any("property" in r for r in reasons)
    assert any("value" in r for r in reasons)


def test_load_csv_empty_file(tmp_path: Path) -> None:
    """An empty CSV yields an empty spool, not an error."""
    src = tmp_path / "empty.csv"
    src.write_text("")
    s = load_csv(src, tmp_path / "o")
    assert s.rows == 0 and s.files == 0 and s.rejected == 0
    assert read_manifest(tmp_path / "o").rows == 0
