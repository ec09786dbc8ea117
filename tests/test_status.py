"""One run per work directory (recovery.WorkLock), and `fedq status WORK_DIR` while a run
works and after it stopped (federation/runtime/status.py). No JVM: a plan all in DuckDB."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from federation.parts import land_files
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

RATE, PLUGS, SECONDS, SCALE = 60, 30, 12, 0.1
CLI = "import sys; from federation.cli import main; sys.exit(main(sys.argv[1:]))"


def fedq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_second_run_on_a_work_dir_is_refused_and_status_tells_the_run(tmp_path):
    from federation.api import start

    src, landing, work = tmp_path / "src", tmp_path / "landing", tmp_path / "work"
    generate(src, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=11)
    landing.mkdir()
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    h = start(q, "db", landing, follow=True, work_dir=work, seconds_per_batch=2,
              idle_timeout_s=300)
    land_files(sorted(src.glob("part-*.parquet")), landing)
    for tau, _ in h.results(timeout=120):
        if tau.second >= SECONDS - 1:
            break
    # the same run in another terminal (without the lock it would resume the running one
    # and follow on beside it): refused, the running one untouched
    second = fedq("run", "CQ1", "--follow", "--data", str(landing), "--placement", "db",
                  "--scale", repr(SCALE), "--rate", str(RATE), "--plugs", str(PLUGS),
                  "--seconds-per-batch", "2", "--idle-timeout", "300",
                  "--work-dir", str(work), "--quiet")
    assert second.returncode == 2, second.stderr
    assert second.stderr.strip() == (f"fedq run: --work-dir: {work} is in use by another fedq "
                                     f"run (process {os.getpid()}); wait for it to end, stop "
                                     "it, or name another work directory"), second.stderr
    running = fedq("status", str(work))
    assert running.returncode == 0, running.stderr
    lines = running.stdout.splitlines()
    assert lines[0] == f"run CQ1: running (process {os.getpid()})", lines
    assert "placement op1=db" in lines[1] and "following" in lines[1], lines
    assert any(ln.startswith("  stage 0: last batch ") for ln in lines), lines
    rows = sum(1 for _ in src.glob("part-*.parquet"))
    assert any(f"input smartplug: {rows} files" in ln for ln in lines), lines
    assert any(ln.startswith("  results CQ1: ") and "instants 2013-09-01" in ln for ln in lines)
    h.stop(timeout=60)
    stopped = json.loads(fedq("status", str(work), "--json").stdout)
    assert stopped["running"] is False and stopped["process"] is None
    assert stopped["results"]["CQ1"]["rows"] == stopped["summary"]["result_rows"] > 0
    assert fedq("status", str(tmp_path)).stderr.strip() == \
        f"fedq status: {tmp_path} holds no fedq run (no run.json)"
