"""Queries over several streams (federation/runtime/sources.py): each stream read from its
own directory into its own spool, the query's clock the slowest stream's; a join of windows
over two streams and an aggregate of one joined with the other's rows equal the reference
under spe, db, auto and a placement that alternates engines at every boundary; one
directory for two streams is refused, naming the option."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation import avg, count, sum_, window
from federation.errors import OptionError
from federation.results import diff_results
from federation.runtime.sources import load_inputs, read_clean_inputs
from federation.smartplug import smartplug_stream
from federation.smartplug.datagen import generate
from federation.streams import StreamDecl, StreamStats
from tests.sampling import sampled

HOUSES, SECONDS = 3, 24
PLUGS = smartplug_stream(rate=40, plugs=12, houses=HOUSES)
TARIFF = StreamDecl(name="tariff", schema={"ts": "TIMESTAMP", "house_id": "INT",
                                           "price": "DOUBLE"},
                    stats=StreamStats(rate_tps=HOUSES, distinct={"house_id": HOUSES}))
START = dt.datetime(2013, 9, 1)


def write_tariff(d, first: int = 3, last: int = 18) -> None:
    """One price per house and second, from event second `first` to `last` (the tariff
    stream starts after the plugs and ends before them), and one row without a price."""
    d.mkdir(parents=True)
    for s in range(first, last + 1):
        rows = {"ts": [START + dt.timedelta(seconds=s, milliseconds=300 * h)
                       for h in range(HOUSES)],
                "house_id": list(range(HOUSES)),
                "price": [0.1 + 0.01 * ((7 * s + h) % 13) for h in range(HOUSES)]}
        if s == 10:
            rows["ts"].append(START + dt.timedelta(seconds=s, milliseconds=950))
            rows["house_id"].append(1)
            rows["price"].append(None)  # dead-lettered in the tariff's own letters
        pq.write_table(pa.table(rows, schema=pa.schema([("ts", pa.timestamp("us")),
                                                        ("house_id", pa.int32()),
                                                        ("price", pa.float64())])),
                       d / f"part-{s - first:08d}.parquet")
    (d / "_stream.json").write_text(TARIFF.model_dump_json(by_alias=True))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("streams")
    generate(root / "plugs", rate=40, seconds=SECONDS, plugs=12, houses=HOUSES, seed=5)
    write_tariff(root / "tariff")
    return {"smartplug": root / "plugs", "tariff": root / "tariff"}


def rows_join():
    """A join of window rows over the two streams, aggregated per house."""
    a = (window(PLUGS, range=4, slide=1).filter("property = 1")
         .project("house_id", "plug_id", w="value"))
    b = window(TARIFF, range=3, slide=1).project("house_id", "price")
    return a.join(b, on=["house_id"]).aggregate(
        by=["house_id"], spend=sum_("w * price"), n=count()).rstream("spend")


def aggregate_join():
    """An aggregate of one stream joined with the other's window rows."""
    load = window(PLUGS, range=5, slide=1).aggregate(by=["house_id"], load=avg("value"))
    b = window(TARIFF, range=2, slide=1).project("house_id", "price")
    return load.join(b, on=["house_id"]).project("house_id", "price",
                                                 cost="load * price").rstream("cost")


def alternating(q) -> str:
    """Engines alternating by depth, as the fuzzer places them (one boundary per edge)."""
    from benchmarks.fuzz_queries import alternating_placements

    return alternating_placements(q)[0]


def test_the_reference_reads_each_stream_by_its_name(sources):
    # no JVM: the instants run over both streams; one table for two streams is refused
    plugs = pa.concat_tables(pq.read_table(p) for p in sorted(sources["smartplug"].glob(
        "part-*.parquet")))
    tariff = pa.concat_tables(pq.read_table(p) for p in sorted(sources["tariff"].glob(
        "part-*.parquet")))
    got = reference_result(rows_join(), {"smartplug": plugs, "tariff": tariff})
    taus = set(got.column("tau").to_pylist())
    # a tariff row joins plug rows only while both windows hold rows: seconds 3..18+3
    assert min(taus) == START + dt.timedelta(seconds=4)
    assert max(taus) == START + dt.timedelta(seconds=18 + 3)
    with pytest.raises(ValueError, match="give the rows of each"):
        reference_result(rows_join(), plugs)


def test_one_directory_for_two_streams_is_refused(sources, tmp_path, capsys):
    from federation.api import run
    from federation.cli import main

    with pytest.raises(OptionError, match=r"2 streams \(smartplug, tariff\).*NAME=DIR"):
        run(rows_join(), "db", sources["smartplug"], work_dir=tmp_path / "w")
    with pytest.raises(OptionError, match="no source for stream 'tariff'"):
        run(rows_join(), "db", {"smartplug": sources["smartplug"]}, work_dir=tmp_path / "w")
    with pytest.raises(OptionError, match="no stream 'weather'"):
        run(rows_join(), "db", {**sources, "weather": sources["tariff"]},
            work_dir=tmp_path / "w")
    sql = tmp_path / "q.sql"
    sql.write_text(
        "SELECT a.house_id, a.n, b.m FROM (SELECT house_id, COUNT(*) AS n FROM "
        "HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '4' SECOND) "
        "GROUP BY window_end, house_id) a JOIN (SELECT house_id, COUNT(*) AS m FROM "
        "HOP(TABLE tariff, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '4' SECOND) "
        "GROUP BY window_end, house_id) b ON a.house_id = b.house_id")
    assert main(["run", "--sql", str(sql), "--data", str(sources["smartplug"]),
                 "--data", f"tariff={sources['tariff']}"]) == 2
    assert "--data: " in capsys.readouterr().err
    assert main(["run", "--sql", str(sql), "--data", f"tariff={sources['tariff']}",
                 "--work-dir", str(tmp_path / "w2")]) == 2
    err = capsys.readouterr().err
    assert "--data: no source for stream 'smartplug'" in err, err


def check(q, placement, sources, work, spark, per_batch=8):
    """Run `q` and compare with the reference over what the run read: its spools and its
    copy of each database table (federation/runtime/tables.py)."""
    from federation.api import run

    r = run(q, placement, sources, work_dir=work, seconds_per_batch=per_batch, spark=spark)
    copies = {p.stem: pq.read_table(p) for p in (work / "input" / "tables").glob("*.parquet")}
    want = reference_result(q, read_clean_inputs(r.ingest), copies)
    assert want.num_rows > 20
    problem = diff_results(r.rows, want)
    assert problem is None, f"{q.name} under {r.summary.placement}: {problem}"
    return r


def placements_of(q, which: str) -> str:
    return alternating(q) if which == "alternating" else which


#: every placement of each query: `make test` runs a pairwise sample
PLACEMENTS = ("spe", "db", "auto", "alternating")


@pytest.mark.spark
@pytest.mark.parametrize("make,which", sampled(
    [(m, p) for m in (rows_join, aggregate_join) for p in PLACEMENTS],
    keep=[(rows_join, "alternating"), (aggregate_join, "db")]),
    ids=lambda v: getattr(v, "__name__", v))
def test_a_query_over_two_streams_equals_the_reference_in_every_placement(
        make, which, sources, tmp_path, spark):
    q = make()
    r = check(q, placements_of(q, which), sources, tmp_path / "w", spark)
    if which == "db":
        # each stream validated on its own: the tariff's row without a price is its dead
        # letter
        assert r.summary.dead_lettered == 1
        assert any(k.startswith("tariff: ") for k in r.summary.dead_by_reason), \
            r.summary.dead_by_reason
        spools = json.loads((tmp_path / "w" / "input" / "inputs.json").read_text())["inputs"]
        assert set(spools) == {"smartplug", "tariff"}


@pytest.mark.spark
def test_the_cli_runs_a_query_over_two_streams(sources, tmp_path, spark):
    # in this process (its Spark session): a CLI run in a process of its own pays a JVM
    from federation.cli import main

    out = tmp_path / "out.parquet"
    spec = tmp_path / "two.py"
    spec.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})\n"
        "from test_many_streams import aggregate_join as q\n")
    assert main(["run", "--query", f"{spec}:q",
                 "--data", f"smartplug={sources['smartplug']}",
                 "--data", f"tariff={sources['tariff']}", "--placement", "auto",
                 "--seconds-per-batch", "6", "--output", str(out), "--quiet",
                 "--work-dir", str(tmp_path / "w")]) == 0
    ingest = __import__("federation.runtime.sources", fromlist=["load_inputs"]).load_inputs(
        tmp_path / "w" / "input")
    want = reference_result(aggregate_join(), read_clean_inputs(ingest))
    assert diff_results(pq.read_table(out), want) is None


def test_two_streams_killed_while_their_input_is_read_resume_with_the_same_spools(
        sources, tmp_path):
    """All in DuckDB, the direct feed works while both streams' files are read (their files
    alternate: runtime/ahead.py); killed between two input files once a micro-batch is done,
    the resumed run reads on from both spools, which end as a run's not killed, and its
    result is the reference's (no JVM)."""
    import subprocess
    import sys

    from tests.test_resume import CLI, run_killed_then_resumed

    spec = tmp_path / "two.py"
    spec.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})\n"
        "from test_many_streams import rows_join as q\n")

    def cmd(work, out):
        return [sys.executable, "-c", CLI, "run", "--query", f"{spec}:q",
                "--data", f"smartplug={sources['smartplug']}",
                "--data", f"tariff={sources['tariff']}", "--placement", "db",
                "--seconds-per-batch", "2", "--output", str(out), "--quiet", "--overwrite",
                "--work-dir", str(work)]

    work, out = tmp_path / "w", tmp_path / "out.parquet"
    hit, _, err = run_killed_then_resumed(cmd(work, out), "ingest_file:20", work)
    assert hit, "the kill at the 20th of 40 input files never hit"
    assert "fedq: resuming" in err, err[-2000:]
    subprocess.run(cmd(tmp_path / "fresh", tmp_path / "f.parquet"), check=True,
                   capture_output=True)
    fresh = read_clean_inputs(load_inputs(tmp_path / "fresh" / "input"))
    got = read_clean_inputs(load_inputs(work / "input"))
    assert all(got[n].equals(fresh[n]) for n in fresh)
    assert diff_results(pq.read_table(out), reference_result(rows_join(), fresh)) is None


@pytest.mark.parametrize("make", [rows_join, aggregate_join], ids=lambda m: m.__name__)
def test_an_adaptive_run_over_two_streams_equals_the_reference(make, sources, tmp_path):
    """An adaptive run over both streams, migrating at three instants (all in DuckDB, the
    state moved where it can be; no JVM): each stream is cut into every segment's spool
    on its own; the tariff stream, which ends at second 18, is quiet in the last two
    segments (its clock at the segment's end, then the input's flush), and every instant
    is produced once and equals the reference, which a plain run also returns."""
    from federation.adaptive import Segment, run_adaptive

    q = make()
    at = [START + dt.timedelta(seconds=s) for s in (10, 19, 21)]
    segs = [Segment(start_at=None, stop_at=at[0], placement="db", rate=40, reason="t"),
            Segment(start_at=at[0], stop_at=at[1], placement="db", rate=40, reason="t"),
            Segment(start_at=at[1], stop_at=at[2], placement="db", rate=40, reason="t"),
            Segment(start_at=at[2], stop_at=None, placement="db", rate=40, reason="t")]
    r = run_adaptive(q, sources, segs, seconds_per_batch=4, work_dir=tmp_path / "w")
    assert len(r.segments) == 4 and r.dead_lettered == 1  # the tariff's row, once
    assert any(k.startswith("tariff: ") for k in r.dead_by_reason), r.dead_by_reason
    spools = load_inputs(tmp_path / "w" / "input")
    want = reference_result(q, read_clean_inputs(spools))
    assert want.num_rows > 20 and sum(s.result_rows for s in r.segments) == r.rows.num_rows
    if make is rows_join:  # the tariff's 3-s window at 21 still holds its last readings
        assert r.segments[-1].result_rows > 0
    problem = diff_results(r.rows, want)
    assert problem is None, problem


def test_a_stream_quiet_in_a_segment_holds_no_instant_back(sources, tmp_path):
    """A segment's spools cut from the input validated once: the tariff stream has no
    file after second 18, so in a segment from 19 to 21 its spool is one punctuation at
    21 (its clock is there from the first batch), and in the last segment the input's
    flush; the plugs' spool links its own files."""
    from federation.adaptive.streams import AdaptiveInput
    from federation.conventions import KIND, PUNCTUATION
    from federation.runtime.ingest import read_spool_part
    from federation.runtime.options import RunOptions

    inp = AdaptiveInput.read(rows_join(), sources, tmp_path, RunOptions(), 600.0, 1.0, None)
    t = [START + dt.timedelta(seconds=s) for s in (19, 21)]
    mid = inp.segment(t[0], t[0], t[1], tmp_path / "mid", False, 600.0).spools.inputs
    end = inp.segment(t[1], t[1], None, tmp_path / "end", False, 600.0).spools.inputs
    assert (mid["smartplug"].files, end["smartplug"].files) == (2, 3)
    for res, at in ((mid["tariff"], t[1]), (end["tariff"], inp.whole.last_ts)):
        (part,) = sorted(res.spool_dir.glob("part-*"))
        marks = read_spool_part(part)
        assert set(marks.column(KIND).to_pylist()) == {PUNCTUATION}
        assert min(marks.column("ts").to_pylist()) >= at
