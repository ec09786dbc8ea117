"""Any stream from the CLI (issue 12): a user's CSV with a declared schema is imported
(`fedq import`), measured (`fedq stats`) and queried in SQL (`fedq run --sql`); every
placement returns the reference evaluator's result. The example is the README's:
docs/examples/sensors.csv and docs/examples/warm_rooms.sql."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.cli import main
from federation.results import diff_results
from federation.sqlfront import sql
from federation.streams import load_stream_decl

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"
SCHEMA = "ts:TIMESTAMP,room:VARCHAR,sensor:INT,temp:DOUBLE,humidity:DOUBLE"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("sensors") / "data"
    assert main(["import", str(EXAMPLES / "sensors.csv"), "--schema", SCHEMA,
                 "--name", "sensors", "--out", str(out), "--quiet"]) == 0
    return out


def test_import_writes_event_seconds_a_declaration_and_the_rejects(imported):
    parts = sorted(imported.glob("part-*.parquet"))
    assert len(parts) == 60  # 08:00:00 .. 08:00:59
    rows = pa.concat_tables(pq.read_table(p) for p in parts)
    assert rows.num_rows == 1200
    assert rows.schema.field("room").type == pa.string()
    ts = rows.column("ts").to_pylist()
    assert ts == sorted(ts)
    for p in parts[:5]:  # one event second per file
        t = pq.read_table(p).column("ts").to_pylist()
        assert len({x.replace(microsecond=0) for x in t}) == 1
    with open(imported / "_rejected.csv") as f:
        rej = list(csv.DictReader(f))
    assert [r["line"] for r in rej] == ["701", "901"]
    assert "hot" in rej[0]["reason"] and "columns" in rej[1]["reason"].lower()
    decl = load_stream_decl(imported)
    assert (decl.name, decl.ts_column) == ("sensors", "ts")
    assert decl.stats.distinct == {"room": 4, "sensor": 12}
    assert decl.stats.groups["room,sensor"] == 12
    assert abs(decl.stats.rate_tps - 1200 / 60) < 1e-6


def test_stats_prints_and_writes(imported, capsys):
    assert main(["stats", str(imported), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["value_fractions"]["room"].keys() == {"hall", "kitchen", "lab", "office"}
    assert abs(sum(data["value_fractions"]["room"].values()) - 1) < 1e-9


def test_explain_prices_a_declared_stream_at_the_rate_given(imported, capsys):
    def cost(*extra: str) -> dict:
        assert main(["explain", "--sql", str(EXAMPLES / "warm_rooms.sql"), "--data",
                     str(imported), "--json", *extra]) == 0
        d = json.loads(capsys.readouterr().out)
        return {"C_b": d["C_b"], "C_u": d["C_u"]}

    declared, same, faster = cost(), cost("--rate", "20"), cost("--rate", "20000")
    assert declared == same  # the example declares 20 readings/s (measured by fedq import)
    assert faster["C_u"] > declared["C_u"]


def test_import_errors_name_the_option(tmp_path, capsys):
    assert main(["import", str(EXAMPLES / "sensors.csv"), "--schema", "ts:TIMESTAMP,x:FLOAT",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--schema: column 'x': unsupported type 'FLOAT'" in capsys.readouterr().err
    assert main(["import", str(EXAMPLES / "sensors.csv"), "--schema", "room:VARCHAR",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--ts: the event-time column must be a TIMESTAMP" in capsys.readouterr().err


def _run_timed(cmd: list[str], env: dict | None = None) -> tuple[int, list[tuple[float, str]]]:
    """Run `cmd` with stdout and stderr merged into a pipe; every line with the seconds since
    the start at which it arrived (the process's exit is the last entry)."""
    import subprocess
    import time

    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    lines = [(time.monotonic() - t0, ln.rstrip("\n")) for ln in p.stdout]
    rc = p.wait(timeout=600)
    return rc, [*lines, (time.monotonic() - t0, "<exit>")]


@pytest.mark.spark
def test_sql_over_an_imported_csv_equals_the_reference(imported, tmp_path):
    """`fedq run --sql` (auto: every operator of warm_rooms.sql in DuckDB, `fedq explain`),
    also the progress of `fedq run` when its output is not a terminal: every phase is named
    as it starts, and no stretch of the run is silent for 10 s; and what a run without
    --work-dir leaves in the temporary directory: its dead letters only."""
    import os

    out = tmp_path / "out.parquet"
    cmd = [sys.executable, "-c", CLI, "run", "--sql", str(EXAMPLES / "warm_rooms.sql"),
           "--data", str(imported), "--placement", "auto", "--seconds-per-batch", "6",
           "--output", str(out)]
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    rc, lines = _run_timed(cmd, {**os.environ, "TMPDIR": str(tmp)})
    text = "\n".join(ln for _, ln in lines)
    assert rc == 0, text[-3000:]
    assert "dead-lettered rows 2" in text
    left = [p.relative_to(tmp) for p in tmp.rglob("*") if p.is_file()]
    assert all("deadletter" in p.parts or p.name == "summary.json" for p in left), left
    # a plan all in DuckDB: its stage is fed directly, no JVM (federation/runtime/direct.py)
    assert "starting Spark" not in text, text
    phases = ["planning", "reading input", "setting up the stages", "micro-batches",
              "finishing windows", "writing output"]
    at = [next((i for i, (_, ln) in enumerate(lines) if f"] {ph}" in ln), None)
          for ph in phases]
    assert None not in at and at == sorted(at), f"phases {dict(zip(phases, at))}:\n{text}"
    gaps = [b[0] - a[0] for a, b in zip([(0.0, "<start>"), *lines], lines)]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    assert gaps[worst] <= 10, f"silent for {gaps[worst]:.1f} s before line {worst}:\n{text}"
    q = sql((EXAMPLES / "warm_rooms.sql").read_text(), {"sensors": load_stream_decl(imported)})
    rows = pa.concat_tables(pq.read_table(p) for p in sorted(imported.glob("part-*.parquet")))
    want = reference_result(q, rows)
    assert want.num_rows > 50
    problem = diff_results(pq.read_table(out), want)
    assert problem is None, f"auto: {problem}"


@pytest.mark.spark
@pytest.mark.long  # make test runs this text under auto (all in DuckDB) above
def test_sql_over_an_imported_csv_in_spark_equals_the_reference(imported, tmp_path, spark):
    from federation.api import run

    q = sql((EXAMPLES / "warm_rooms.sql").read_text(), {"sensors": load_stream_decl(imported)})
    rows = pa.concat_tables(pq.read_table(p) for p in sorted(imported.glob("part-*.parquet")))
    want = reference_result(q, rows)
    # pure Spark pays about 2 s per micro-batch: 30 event seconds each
    r = run(q, "spe", imported, seconds_per_batch=30, spark=spark, work_dir=tmp_path / "spe")
    assert r.summary.dead_lettered == 2
    problem = diff_results(r.rows, want)
    assert problem is None, f"spe: {problem}"
