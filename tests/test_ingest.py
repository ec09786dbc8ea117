"""Bad input is counted and dead-lettered with its reason; the rest goes on (no JVM)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

from federation.ingest import PUNCTUATION_ID, _reason_kind, prepare_input, read_clean_rows
from federation.smartplug import smartplug_stream

T0 = dt.datetime(2013, 9, 1)
LATE = "late: event time is before the watermark (largest earlier event time - allowed lateness)"


def part(d, k, rows, schema=None):
    t = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(t, d / f"part-{k:08d}.parquet")


def row(i, sec, value=1.0, prop=1, plug=0):
    return {"id": i, "ts": T0 + dt.timedelta(seconds=sec), "value": value, "property": prop,
            "plug_id": plug, "household_id": 0, "house_id": 0}


def test_each_kind_of_bad_row_is_counted_and_dead_lettered(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    part(data, 0, [row(0, 0.1), row(1, 0.5), row(2, 0.9, prop=7)])
    nul = row(3, 1.2)
    nul["value"] = None
    part(data, 1, [nul, row(4, 1.5)])
    part(data, 2, [row(5, 2.1), row(6, 0.3)])  # 0.3 s is behind the watermark (1.5 s)
    bad_type = [{**row(7, 3.2), "value": "12.5"}, {**row(8, 3.4), "value": "twelve"}]
    part(data, 3, bad_type, schema=pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")),
                                             ("value", pa.string()), ("property", pa.int32()),
                                             ("plug_id", pa.int32()),
                                             ("household_id", pa.int32()),
                                             ("house_id", pa.int32())]))
    res = prepare_input(data, tmp_path / "work", smartplug_stream(),
                        domains={"property": {0, 1}})
    assert res.rows_in == 9 and res.rows_ok == 5 and res.rows_dead == 4
    assert res.dead == {
        "unknown property code 7": 1,
        "null in column 'value'": 1,
        LATE: 1,
        "wrong type in column 'value' (want DOUBLE)": 1,
    }
    dead = pa.concat_tables([pq.read_table(p)
                             for p in sorted(res.deadletter_dir.glob("dead-*.parquet"))])
    assert sorted(map(_reason_kind, dead.column("reason").to_pylist())) == \
        sorted(res.dead.elements())
    assert any("twelve" in r for r in dead.column("raw").to_pylist())
    clean = read_clean_rows(res.spool_dir)
    assert sorted(clean.column("id").to_pylist()) == [0, 1, 4, 5, 7]
    assert clean.column("value").to_pylist()[-1] == 12.5  # "12.5" cast to DOUBLE
    # every file ends with a punctuation row, and a final flush file closes every window
    spool = sorted(res.spool_dir.glob("part-*.parquet"))
    assert len(spool) == 5
    last = pq.read_table(spool[-1])
    assert last.column("id").to_pylist() == [PUNCTUATION_ID]


def test_allowed_lateness_keeps_rows_within_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    part(data, 0, [row(0, 0.5), row(1, 5.0)])
    part(data, 1, [row(2, 3.5), row(3, 1.0)])
    res = prepare_input(data, tmp_path / "w", smartplug_stream(), allowed_lateness_s=2.0)
    assert res.rows_ok == 3 and res.dead == {LATE: 1}


def test_missing_directory_content_is_a_clear_error(tmp_path):
    import pytest

    with pytest.raises(FileNotFoundError, match="no part-"):
        prepare_input(tmp_path, tmp_path / "w", smartplug_stream())


def test_fast_forward_merges_the_warmup_and_keeps_every_row(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for k in range(10):
        part(data, k, [row(2 * k, k + 0.2), row(2 * k + 1, k + 0.7, prop=5 if k == 3 else 1)])
    plain = prepare_input(data, tmp_path / "a", smartplug_stream(), domains={"property": {0, 1}})
    ff = prepare_input(data, tmp_path / "b", smartplug_stream(), domains={"property": {0, 1}},
                       fast_forward_s=6, fast_forward_batch=4)
    assert ff.dead == plain.dead == {"unknown property code 5": 1}
    assert read_clean_rows(ff.spool_dir).equals(read_clean_rows(plain.spool_dir))
    assert (plain.files, plain.spool_files, plain.warmup_files) == (10, 10, 0)
    # seconds 0-3 and 4-5 merged, then 6, 7, 8, 9 one each; plus the flush file
    assert (ff.files, ff.spool_files, ff.warmup_files) == (10, 6, 2)
    spool = sorted(ff.spool_dir.glob("part-*.parquet"))
    assert len(spool) == 7
    first = pq.read_table(spool[0]).column("id").to_pylist()
    assert first[-1] == PUNCTUATION_ID and len(first) == 4 * 2 - 1 + 1
