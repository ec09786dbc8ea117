"""Bad input is counted and dead-lettered with its reason; the rest goes on (no JVM)."""

from __future__ import annotations

import datetime as dt
from itertools import pairwise

import pyarrow as pa
import pyarrow.parquet as pq

from federation.conventions import KIND, PUNCTUATION
from federation.runtime.ingest import read_clean_rows, reason_kind
from federation.runtime.sources import prepare_input
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
    assert sorted(map(reason_kind, dead.column("reason").to_pylist())) == \
        sorted(r for r, n in res.dead.items() for _ in range(n))
    assert any("twelve" in r for r in dead.column("raw").to_pylist())
    clean = read_clean_rows(res.spool_dir)
    assert sorted(clean.column("id").to_pylist()) == [0, 1, 4, 5, 7]
    assert clean.column("value").to_pylist()[-1] == 12.5  # "12.5" cast to DOUBLE
    # every file ends with a punctuation row, and a final flush file closes every window
    spool = sorted(res.spool_dir.glob("part-*.parquet"))
    assert len(spool) == 5
    last = pq.read_table(spool[-1])
    assert last.column(KIND).to_pylist() == [PUNCTUATION]


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
    first = pq.read_table(spool[0]).column("_kind").to_pylist()
    assert first[-1] == PUNCTUATION and len(first) == 4 * 2 - 1 + 1


# -- event-time horizon, corrupt files, non-finite readings (issue 8) ------------------------


def seconds_of(data, n, start=0):
    for k in range(n):
        part(data, start + k, [row(10 * k + j, k + j / 10) for j in range(10)])


def test_one_far_future_reading_loses_nothing_else(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    seconds_of(data, 6)
    t = pq.read_table(data / "part-00000002.parquet").to_pylist()
    t[3]["ts"] = dt.datetime(2030, 1, 1)
    part(data, 2, t)
    res = prepare_input(data, tmp_path / "w", smartplug_stream())
    assert res.rows_in == 60 and res.rows_ok == 59
    assert res.dead == {"event time is more than 3600 s ahead of the stream's clock "
                        "(--event-horizon)": 1}
    assert res.last_ts < T0 + dt.timedelta(seconds=10)  # the clock did not move


def test_far_future_reading_in_the_first_file_does_not_start_the_clock(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    seconds_of(data, 4)
    t = pq.read_table(data / "part-00000000.parquet").to_pylist()
    t[0]["ts"] = dt.datetime(2031, 5, 5)  # a far-future reading first
    t[1]["ts"] = dt.datetime(1960, 1, 1)  # and a pre-epoch one
    t[2]["ts"] = dt.datetime(1999, 1, 1)  # far before the other readings of the file
    part(data, 0, t)
    res = prepare_input(data, tmp_path / "w", smartplug_stream())
    assert res.rows_ok == 37
    assert res.dead == {
        "event time is more than 3600 s ahead of the stream's clock (--event-horizon)": 1,
        "event time is before 1970-01-01": 1,
        "event time is more than 3600 s before the other readings of the first file": 1,
    }
    assert res.first_ts >= T0 and res.last_ts < T0 + dt.timedelta(seconds=10)


def test_horizon_is_configurable(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    seconds_of(data, 3)
    part(data, 3, [row(99, 3 + 120)])  # two minutes ahead
    assert prepare_input(data, tmp_path / "a", smartplug_stream()).rows_ok == 31
    assert prepare_input(data, tmp_path / "b", smartplug_stream(), horizon_s=60).rows_ok == 30


def test_corrupt_empty_and_wrong_schema_files_are_quarantined(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    seconds_of(data, 6)
    whole = (data / "part-00000001.parquet").read_bytes()
    (data / "part-00000001.parquet").write_bytes(whole[: len(whole) // 2])  # truncated
    (data / "part-00000003.parquet").write_bytes(b"")  # 0 bytes
    pq.write_table(pa.table({"a": [1, 2]}), data / "part-00000004.parquet")  # wrong schema
    res = prepare_input(data, tmp_path / "w", smartplug_stream())
    assert res.rows_ok == 30 and res.files == 6
    reasons = {q["file"]: q["reason"] for q in res.quarantined}
    assert reasons["part-00000001.parquet"].startswith("unreadable Parquet")
    assert reasons["part-00000003.parquet"] == "empty file (0 bytes)"
    assert reasons["part-00000004.parquet"].startswith("wrong schema: missing column(s) id, ts")
    q = res.deadletter_dir / "quarantine"
    assert sorted(p.name for p in q.glob("*.parquet")) == sorted(reasons)


def test_nan_and_infinite_readings_are_dead_lettered(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    part(data, 0, [row(0, 0.1, value=float("nan")), row(1, 0.2, value=float("inf")),
                   row(2, 0.3, value=-float("inf")), row(3, 0.4)])
    res = prepare_input(data, tmp_path / "w", smartplug_stream())
    assert res.rows_ok == 1
    assert res.dead == {"not a finite number (NaN or infinite) in column 'value'": 3}


def test_csv_loader_rejects_count_with_their_line_numbers(tmp_path):
    from federation.smartplug.csvload import load_csv

    csv_path = tmp_path / "in.csv"
    csv_path.write_text("0,1377986401,68.451,0,11,0,0\n"
                        "1,1377986401,nan,1,11,0,0\n"
                        "2,1377986402,19.1,1,11,0,0\n"
                        "3,1377986402,19.1,1\n"
                        "4,1377986403,19.2,7,11,0,0\n")
    load_csv(csv_path, tmp_path / "data")
    res = prepare_input(tmp_path / "data", tmp_path / "w", smartplug_stream())
    assert res.rows_in == 5 and res.rows_ok == 2 and res.rows_dead == 3
    import csv

    with open(res.deadletter_dir / "_rejected.csv") as f:
        lines = sorted(int(r["line"]) for r in csv.DictReader(f))
    assert lines == [2, 4, 5]


def test_a_reused_work_directory_keeps_earlier_dead_letters(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    part(data, 0, [row(0, 0.1, value=float("nan")), row(1, 0.2)])
    a = prepare_input(data, tmp_path / "w", smartplug_stream(), run_id="a")
    b = prepare_input(data, tmp_path / "w", smartplug_stream(), run_id="b")
    assert a.deadletter_dir != b.deadletter_dir
    assert list(a.deadletter_dir.glob("dead-*.parquet"))


def test_a_resumed_follower_whose_input_had_reached_until_ends(tmp_path):
    """A following run killed after its input reached --until ends when resumed (it used to
    wait for a file that never comes), and writes the end-of-input flush exactly once."""
    from federation.parts import land_files
    from federation.runtime.follow import Follower, Lane
    from federation.runtime.ingest import Ingestor
    from federation.smartplug.datagen import generate

    src = tmp_path / "src"
    generate(src, rate=20, seconds=6, plugs=4, houses=2, seed=3)
    land_files(sorted(src.glob("part-*.parquet")), tmp_path / "landing")
    stream, until = smartplug_stream(rate=20, plugs=4, houses=2), T0 + dt.timedelta(seconds=4)

    def follow(ing):
        f = Follower({"smartplug": Lane(tmp_path / "landing", ing)}, until=until,
                     poll_s=0.05).start()
        assert f.ended.wait(20), "the follower did not end at --until"
        f.stop()
        assert f.error is None, f.error
        return sorted((tmp_path / "in" / "spool").glob("part-*.parquet"))

    first = follow(Ingestor(tmp_path / "in", stream, file_list=False))
    assert follow(Ingestor.resumed(tmp_path / "in", stream, file_list=False)) == first
    first[-1].unlink()  # killed before the flush was written: the resumed run writes it
    again = follow(Ingestor.resumed(tmp_path / "in", stream, file_list=False))
    assert [p.name for p in again] == [p.name for p in first]
    flush = pq.read_table(again[-1])
    assert flush.column(KIND).to_pylist() == [PUNCTUATION]


def test_a_burst_landed_at_once_starts_the_run_after_its_first_files(tmp_path, monkeypatch):
    """A follower reads a bounded number of files per pass (FILES_PER_PASS): a burst landed
    at once starts the run (its first instant known, a Spark stage may begin) after its
    first files, not after every one of them (an adaptive run planned its first segment
    only then: seconds at 5-minute windows); every file is still read, once, in order."""
    from federation.parts import land_files
    from federation.runtime import follow
    from federation.runtime.follow import Follower, Lane
    from federation.runtime.ingest import Ingestor
    from federation.smartplug.datagen import generate

    monkeypatch.setattr(follow, "FILES_PER_PASS", 8)
    src = tmp_path / "src"
    generate(src, rate=20, seconds=30, plugs=4, houses=2, seed=3)
    landed = sorted(src.glob("part-*.parquet"))
    land_files(landed, tmp_path / "landing")
    stream, until = smartplug_stream(rate=20, plugs=4, houses=2), T0 + dt.timedelta(seconds=29)
    read_at_start = []
    start = Follower._start
    monkeypatch.setattr(Follower, "_start", lambda self, now: (
        read_at_start.append(len(self.lanes["smartplug"].seen)), start(self, now)))
    ing = Ingestor(tmp_path / "in", stream, file_list=False)
    f = Follower({"smartplug": Lane(tmp_path / "landing", ing)}, until=until,
                 poll_s=0.05).start()
    assert f.ended.wait(20), "the follower did not end at --until"
    f.stop()
    assert f.error is None, f.error
    assert read_at_start == [8], read_at_start  # 30 files landed
    spooled = [pq.read_table(p) for p in sorted((tmp_path / "in" / "spool").glob("part-*"))]
    ids = [i for t in spooled for i, k in zip(t.column("id").to_pylist(),
                                               t.column(KIND).to_pylist()) if k != PUNCTUATION]
    assert ids == [i for p in landed for i in pq.read_table(p).column("id").to_pylist()]


def test_a_slice_of_a_burst_never_splits_the_readings_of_one_timestamp(tmp_path):
    """A burst whose readings share timestamps (several plugs report at one instant): the
    slices are cut only between two timestamps, so the punctuation after a slice is a clock
    no later reading reaches (a session closed there has all its readings); a slice is
    larger than `max_file_rows` only where one timestamp holds more readings."""
    from federation.runtime.ingest import Ingestor

    data = tmp_path / "data"
    data.mkdir()
    secs = [1.0] * 3 + [1.5] * 4 + [2.0] * 9 + [2.5] + [3.0] * 2  # 19 readings, 5 times
    part(data, 0, [row(i, sec, plug=i % 7) for i, sec in enumerate(reversed(secs))])
    ing = Ingestor(tmp_path / "w", smartplug_stream(), file_list=False, max_file_rows=5,
                   tick_s=1.0)
    ing.add(data / "part-00000000.parquet")
    spool = [pq.read_table(p) for p in sorted((tmp_path / "w" / "spool").glob("part-*"))]
    slices = [t.filter(pa.compute.equal(t[KIND], 0))["ts"].to_pylist() for t in spool]
    assert [len(s) for s in slices] == [3, 4, 9, 3]  # 9 readings at 2.0 s: one slice
    for a, b in pairwise(slices):
        assert max(a) < min(b)  # no timestamp in two slices
    assert sorted(ts for s in slices for ts in s) == sorted(r["ts"] for r in [
        row(i, sec) for i, sec in enumerate(secs)])


def test_an_input_above_max_file_rows_is_split_in_event_time_order_and_resumes_between_slices(
        tmp_path):
    """A following run's burst (issue 46): an input file with more good rows than
    `max_file_rows` becomes several spool files of at most that many, ordered by event time,
    each ending with a punctuation no later row is behind (no engine drops a row as late);
    a run stopped between two slices reads that input first again and writes the same
    slices, and an input gone from the landing directory meanwhile is a clear error."""
    import json
    import random
    import shutil
    import time

    from federation.runtime.follow import Follower, Lane
    from federation.runtime.ingest import Ingestor

    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(4)
    part(data, 0, [row(i, 0.5) for i in range(3)])
    burst = [row(10 + i, 1 + rng.random() * 2, plug=i % 5) for i in range(25)]  # shuffled
    part(data, 1, burst)
    part(data, 2, [row(40, 3.5), row(41, 3.1)])
    stream = smartplug_stream()

    def ingest(work, ing=None, files=(0, 1, 2)):
        ing = ing or Ingestor(work, stream, file_list=False, max_file_rows=10, tick_s=1.0)
        for k in files:
            ing.add(data / f"part-{k:08d}.parquet")
        return [pq.read_table(p) for p in sorted((work / "spool").glob("part-*.parquet"))]

    whole = ingest(tmp_path / "a")
    data_rows = [t.filter(pa.compute.equal(t[KIND], 0)) for t in whole]
    assert [t.num_rows for t in data_rows] == [3, 10, 10, 5, 2]
    sliced = pa.concat_tables(data_rows[1:4])["ts"].to_pylist()
    assert sliced == sorted(sliced) and sorted(sliced) == sorted(r["ts"] for r in burst)
    clock = None  # Spark's watermark rule over the spool files in order (no lateness)
    for t, d in zip(whole, data_rows, strict=True):
        assert clock is None or all(ts >= clock for ts in d["ts"].to_pylist())
        punct = t.filter(pa.compute.equal(t[KIND], PUNCTUATION))["ts"].to_pylist()
        assert punct and punct[-1] >= max(d["ts"].to_pylist(), default=punct[-1])
        clock = punct[-1]
    # stopped after the first slice of the burst: the resumed ingestor reads it first again
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    for p in sorted((tmp_path / "b" / "spool").glob("part-*.parquet"))[2:]:
        p.unlink()
    ing = Ingestor.resumed(tmp_path / "b", stream, file_list=False, max_file_rows=10, tick_s=1.0)
    assert ing.partial == "part-00000001.parquet" and ing.res.files == 1
    again = ingest(tmp_path / "b", ing, files=(1, 2))
    assert [t.to_pylist() for t in again] == [t.to_pylist() for t in whole]

    def meta(t):  # the state without its paths and CPU time
        m = {k.decode(): json.loads(v) if k != b"fedq.slice" else v.decode()
             for k, v in t.schema.metadata.items()}
        for k in ("spool_dir", "deadletter_dir", "cpu_s"):
            m.get("fedq.ingest", {}).pop(k, None)
        return m

    assert [meta(t) for t in again] == [meta(t) for t in whole]
    assert [sorted(meta(t)) for t in whole[1:4]] == [["fedq.slice"]] * 2 + [
        ["fedq.ingest", "fedq.inputs"]]
    # the same stop, followed on, with a file landed meanwhile under an earlier name: the
    # input is read first again; then the same stop with the input gone: a clear error
    landing = tmp_path / "landing"
    landing.mkdir()
    for k in range(3):
        shutil.copy(data / f"part-{k:08d}.parquet", landing)
    part(landing, 0, [row(50, 3.6)])
    (landing / "part-00000000.parquet").rename(landing / "part-00000000b.parquet")
    shutil.copy(data / "part-00000000.parquet", landing)
    for gone in (False, True):
        for p in sorted((tmp_path / "b" / "spool").glob("part-*.parquet"))[2:]:
            p.unlink()
        if gone:
            (landing / "part-00000001.parquet").unlink()
        ing = Ingestor.resumed(tmp_path / "b", stream, file_list=False, max_file_rows=10,
                               tick_s=1.0)
        f = Follower({"smartplug": Lane(landing, ing)}, poll_s=0.05).start()
        spool = tmp_path / "b" / "spool"
        for _ in range(200):
            if f.ended.is_set() or len(list(spool.glob("part-*.parquet"))) >= 6:
                break
            time.sleep(0.05)
        f.stop()
        got = [pq.read_table(p) for p in sorted(spool.glob("part-*.parquet"))]
        if gone:
            assert isinstance(f.error, FileNotFoundError), f.error
            assert "part-00000001.parquet" in str(f.error) and len(got) == 2
        else:
            assert f.error is None, f.error
            assert [t.to_pylist() for t in got[:4]] == [t.to_pylist() for t in whole[:4]]
