"""What a work directory says about its run, running or stopped (`fedq status WORK_DIR`):
read from the files the run keeps for its resumption (recovery.py), never from the run's
process, so it works as well after kill -9 as during the run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.conventions import TAU
from federation.runtime.recovery import RUN_FILE, lock_holder
from federation.runtime.takeover import TAKEOVER


def run_status(work: Path | str) -> dict:
    """The run in `work`: identity, running or not, each stage's last batch and clock, its
    input, its results per query, and how it ended (summary) or why it started over."""
    work = Path(work)
    if not (work / RUN_FILE).exists():
        raise FileNotFoundError(f"{work} holds no fedq run (no {RUN_FILE})")
    out: dict = {"work_dir": str(work), "run": json.loads((work / RUN_FILE).read_text())}
    pid = lock_holder(work)
    out["running"] = pid is not None
    out["process"] = pid if pid and pid > 0 else None
    if out["run"].get("adaptive"):
        return {**out, **_adaptive(work)}
    out["stages"] = {p.stem.removeprefix("stage"): json.loads(p.read_text())
                     for p in sorted((work / "state").glob("stage*.json"))}
    out["input"] = _input(work / "input")
    out["results"] = _results(work / "results")
    for key, name in (("summary", "summary.json"), ("takeover", TAKEOVER)):
        path = work / name
        out[key] = json.loads(path.read_text()) if path.exists() else None
    failure = work / "resume-failure.txt"
    out["resume_failure"] = failure.read_text().strip()[:500] if failure.exists() else None
    return out


def _adaptive(work: Path) -> dict:
    """An adaptive run (federation/adaptive/): its input, and each segment of its log
    (segments.json): placement, span, how it started, finished or not, and what its own
    work directory says (stages, results, the rows it computed, warm-up included)."""
    path = work / "segments.json"
    log = json.loads(path.read_text())["segments"] if path.exists() else []
    segments = []
    for k, e in enumerate(log):
        seg, run = e["segment"], e.get("run")
        sub = work / f"segment{k}" / "work"
        st = run_status(sub) if (sub / RUN_FILE).exists() else None
        segments.append({"placement": seg["placement"], "start_at": seg["start_at"],
                         "stop_at": seg["stop_at"], "reason": seg["reason"],
                         "strategy": run["strategy"] if run else None,
                         "finished": run is not None,
                         "result_rows": run["result_rows"] if run else None,
                         "stages": st["stages"] if st else {},
                         "results": st["results"] if st else {}})
    return {"input": _input(work / "input"), "segments": segments}


def _input(d: Path) -> dict:
    """Per stream: files, rows in, accepted and dead (by reason), quarantined files (each
    stream's ingest.json: written as its input is read and followed)."""
    found = sorted(d.glob("*/ingest.json")) if d.is_dir() else []
    inputs = {p.parent.name: json.loads(p.read_text()) for p in found}
    return {n: {"files": r.get("files", 0), "rows_in": r.get("rows_in", 0),
                "rows_ok": r.get("rows_ok", 0), "dead": r.get("dead", {}),
                "quarantined": len(r.get("quarantined", [])), "last_ts": r.get("last_ts")}
            for n, r in inputs.items()}


def _results(d: Path) -> dict:
    """Per query: parts, rows, first and last instant written (parts are in instant order:
    the first and last with rows are read, the rest counted)."""
    dirs = sorted(p for p in d.iterdir() if p.is_dir()) if d.exists() else []
    out = {}
    for sub in dirs:
        q = sub.name
        parts = sorted(sub.glob("part-*.parquet"))
        sizes = [(p, pq.read_metadata(p).num_rows) for p in parts]
        full = [p for p, n in sizes if n]
        taus = [pq.read_table(p, columns=[TAU]).column(0) for p in full[:1] + full[-1:]]
        out[q] = {"parts": len(parts), "rows": sum(n for _, n in sizes),
                  "first_instant": str(pc.min(taus[0]).as_py()) if taus else None,
                  "last_instant": str(pc.max(taus[-1]).as_py()) if taus else None}
    return out
