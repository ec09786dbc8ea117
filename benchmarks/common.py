"""What every benchmark result records: the command, machine, versions and date."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def environment() -> dict:
    """Machine, versions and date of a measurement."""
    versions = {}
    for pkg in ("pyspark", "duckdb", "sqlglot", "pyarrow", "pydantic", "pandas"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "commit": commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "versions": versions,
    }


def commit() -> str | None:
    """The commit the measurement ran on (with "+dirty" when the tree had changes)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty.strip() else "")


def write_result(name: str | Path, payload: dict, out_dir: Path | None = None) -> Path:
    """Write a result JSON (with the environment): a bare file name goes to `out_dir`
    (benchmarks/results/, where the committed results are), a path where it says."""
    path = Path(name)
    if path.parent == Path("."):
        path = (out_dir or RESULTS) / path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**environment(), **payload}, indent=2, default=str) + "\n")
    return path


def say(msg: str) -> None:
    """Progress of a benchmark, on stderr."""
    print(msg, file=sys.stderr, flush=True)
