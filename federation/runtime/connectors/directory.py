"""A directory of part files as a source: replayed to its end (`DIR`), or followed as
files land (`follow:DIR`, or any directory with `--follow`; federation/runtime/follow.py
says how a writer lands a file). Someone else fills it: there is no feeder."""

from __future__ import annotations

from pathlib import Path

from federation.errors import OptionError


def open_source(spec, landing: Path, stream, ctx) -> None:
    if not Path(landing).is_dir():
        raise OptionError("data", f"{stream.name}={spec.path}: not a directory")
