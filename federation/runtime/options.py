"""Run options checked once, before any work, each error naming its option (OptionError),
and the one place that makes work directories."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from federation.errors import OptionError


def output_path(output: Path) -> Path:
    """Where `output` is written: the file itself (.parquet) or results.parquet inside."""
    return output if output.suffix == ".parquet" else output / "results.parquet"


def check_output(output: Path | str | None, overwrite: bool = False) -> str | None:
    """Why the results cannot be written to `output`, or None; checked before any work."""
    if output is None:
        return None
    output = Path(output)
    path = output_path(output)
    if path.exists() and not overwrite:
        return f"{path} exists; pass --overwrite to replace it"
    parent = path.parent
    if output.suffix == ".parquet" and not parent.is_dir():
        return f"directory {parent} does not exist"
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        return f"cannot write to {parent} ({probe} is not a writable directory)"
    return None


def work_directory(given: str | Path | None, prefix: str = "fedq-run-") -> Path:
    """The work directory of a run: the given one (made if missing) or a new temporary one
    (the one place that makes them)."""
    work = Path(given) if given else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return work


def check_arguments(**kw) -> None:
    """Refuse a bad argument of a run before any work, naming it (OptionError.option)."""
    for name in ("seconds", "plugs", "seconds_per_batch"):
        if name not in kw:
            continue
        v = kw[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise OptionError(name, f"must be a whole number >= 1, got {v!r}")
    for name in ("rate", "event_horizon_s"):
        if name not in kw:
            continue
        v = kw[name]
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise OptionError(name, f"must be a finite number > 0, got {v!r}")
    v = kw.get("allowed_lateness_s", 0.0)
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise OptionError("allowed_lateness_s", f"must be a finite number >= 0, got {v!r}")
