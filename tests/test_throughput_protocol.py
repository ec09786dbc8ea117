"""benchmarks.throughput's replay protocol (issue 22), without a JVM: at least 60 measured
one-second batches unless --quick, every point records its protocol, commit and the
ingest's cost, and the committed results (protocol v1) still load and report it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import report, throughput
from benchmarks.common import RESULTS
from costmodel.profile import load_profile
from federation.logical import NumberedPlan
from federation.optimizer.phase_one import phase_one


def _fake_run(q, placement, data, **kw):
    """What federation.api.run returns, as far as the benchmark reads it."""
    s = SimpleNamespace(rho_windows_full=2.0, truncated=False, rho_steady=2.1,
                        placement=placement if "=" in placement else "op1=db",
                        warmup_batch_s=kw.get("warmup_batch_s"), data_batches=70,
                        result_rows=5, ingest_cpu_s=0.5, ingest_rows_per_cpu_s=2e6)
    plan = SimpleNamespace(logical=NumberedPlan.of(phase_one(q, load_profile())))
    return SimpleNamespace(summary=s, plan=plan)


@pytest.fixture
def no_runs(monkeypatch):
    import federation.api

    monkeypatch.setenv("FEDQ_SPE_ROWS_JOIN", "interval")  # main sets them: restored after
    monkeypatch.setenv("FEDQ_SPE_WINDOW_AGG", "panes")
    monkeypatch.setattr(federation.api, "run", _fake_run)
    monkeypatch.setattr(throughput, "generate", lambda *a, **k: None)
    monkeypatch.setattr(throughput, "summarize", lambda doc, path: None)


def _args(out: Path, *more: str) -> list[str]:
    return ["--scale", "0.05", "--rates", "2000", "--queries", "CQ1", "--plans", "db",
            "--out", str(out), "--data-dir", str(out.parent / "data"), *more]


def test_fewer_than_60_measured_batches_are_refused_without_quick(tmp_path):
    with pytest.raises(SystemExit):
        throughput.main(_args(tmp_path / "r.json", "--measure-seconds", "12"))
    assert not (tmp_path / "r.json").exists()


def test_a_point_records_protocol_commit_and_ingest(tmp_path, no_runs):
    out = tmp_path / "r.json"
    assert throughput.main(_args(out)) == 0
    (p,) = json.loads(out.read_text())["points"]
    assert p["protocol"] == throughput.PROTOCOL and p["protocol"].startswith("v2: 60+")
    assert p["measure_seconds"] == 60
    assert p["ingest_cpu_s"] == 0.5 and p["ingest_rows_per_cpu_s"] == 2e6
    assert "commit" in p  # None only outside a git checkout
    assert p["warmup_batch_s"] == 10  # every plan fast-forwards the warm-up


def test_quick_marks_every_point(tmp_path, no_runs):
    out = tmp_path / "r.json"
    assert throughput.main(_args(out, "--quick", "--measure-seconds", "12",
                                 "--plans", "db,spe")) == 0
    pts = json.loads(out.read_text())["points"]
    assert len(pts) == 2 and {p["protocol"] for p in pts} == {throughput.QUICK}
    assert pts[1]["warmup_batch_s"] == 10  # pure-SPE too


@pytest.mark.parametrize("name", ["throughput_full", "throughput_sliced"])
def test_committed_results_load_and_say_v1(name):
    doc = json.loads((RESULTS / f"{name}.json").read_text())
    pts = throughput.load_points(doc)
    assert pts and all(p.protocol.startswith("v1: 12 one-second batches") for p in pts)
    assert all(p.commit is None and p.ingest_cpu_s is None for p in pts)


def test_every_committed_throughput_point_has_a_protocol():
    for f in RESULTS.glob("throughput*.json"):
        assert all(p.get("protocol") for p in json.loads(f.read_text())["points"]), f


def test_the_report_says_which_protocol(tmp_path):
    db = "op1=db,op2=db,op3=db,op4=db,op5=db,op6=db"
    doc = {"scale": 0.05, "plugs": 2125, "profile": "x", "points": [
        {"query": "CQ1", "rate": 2000.0, "plan": plan, "placement": db, "rho": rho,
         "steady": True, "achieved_tps": 2000.0, "processed_tps": 2000.0 * rho,
         "predicted_C_b": 0.2, "predicted_C_u": 0.2, "predicted_feasible": True,
         "wall_s": 10.0, "data_batches": 70, "result_rows": 1, "protocol": proto,
         **({"commit": "abc123"} if proto != throughput.QUICK else {})}
        for plan, rho, proto in (("auto", 2.0, throughput.PROTOCOL), ("db", 1.5, "v1: old"),
                                 ("spe", 0.5, throughput.QUICK))]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    lines = report.report(path).splitlines()
    assert any(ln.endswith("| v2 |") and "| auto |" in ln for ln in lines)
    assert any(ln.endswith("| v1 |") and "| db |" in ln for ln in lines)
    assert any(ln.endswith("| quick |") for ln in lines)
    assert any("v2: 60+" in ln and "abc123" in ln for ln in lines)
    assert any("quick: a --quick run" in ln for ln in lines)
    assert report.protocols(doc["points"]) == "quick+v1+v2"
