"""What a new user sees: clone the repository into a scratch folder, run `make demo` there
(venv, install, Java check, the demo), and time every line of its output.

Writes benchmarks/results/first_hour.json: the total time, the longest silences (with the
lines before and after them) and the phases' times. `--no-pip-cache` makes pip download
every package as on a fresh machine.

    python -m benchmarks.first_hour [--no-pip-cache] [--out first_hour.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from benchmarks.common import say, write_result

REPO = Path(__file__).resolve().parents[1]


def timed_lines(cmd: list[str], cwd: Path, env: dict) -> tuple[int, list[tuple[float, str]]]:
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lines = []
    for ln in p.stdout:
        lines.append((round(time.monotonic() - t0, 2), ln.rstrip("\n")))
        say(ln.rstrip("\n"))
    rc = p.wait()
    return rc, [*lines, (round(time.monotonic() - t0, 2), "<exit>")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-pip-cache", action="store_true")
    ap.add_argument("--out", default="first_hour.json")
    a = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="fedq-first-hour-"))
    try:
        clone = scratch / "fedq"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, check=True,
                                capture_output=True, text=True).stdout.strip()
        env = {**os.environ, **({"PIP_NO_CACHE_DIR": "1"} if a.no_pip_cache else {})}
        env.pop("VIRTUAL_ENV", None)
        rc, lines = timed_lines(["make", "demo"], clone, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stamps = [(0.0, "<start>"), *lines]
    gaps = sorted(((b[0] - a_[0], a_[1], b[1]) for a_, b in pairwise(stamps)),
                  reverse=True)
    marks = {k: t for t, ln in lines for k in ("installing", "demo took", "== 3/5", "== 4/5",
                                               "== 5/5", "outputs equal") if k in ln}
    doc = {"commit": commit, "pip_cache": not a.no_pip_cache, "exit_code": rc,
           "total_s": lines[-1][0], "longest_silence_s": round(gaps[0][0], 2),
           "longest_silences": [{"s": round(g, 2), "after": x[:160], "before": y[:160]}
                                for g, x, y in gaps[:5]],
           "marks_s": marks, "lines": len(lines)}
    path = write_result(a.out, doc)
    say(f"make demo from a fresh clone: {doc['total_s']:.0f} s, exit {rc}, longest silence "
        f"{doc['longest_silence_s']:.1f} s; wrote {path}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
