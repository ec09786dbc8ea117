"""The segment log of an adaptive run (`<work>/segments.json`, docs/architecture.md,
"Re-optimization while running"): which placement runs from which instant, the decision
that ends a segment and the segment it starts, and each finished segment's record. It is
written atomically at every change, so a run killed at any moment (kill -9) resumes with the
same command: the finished segments are read back (their rows from their result parts),
the segment in progress resumes from its own checkpoints (execute's resume; a migration
decided in it is completed at the logged instant), and a segment logged but not started
starts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from federation.adaptive.decide import Segment
from federation.adaptive.output import SegmentRun, owned
from federation.parts import atomic_write_bytes
from federation.runtime.recovery import ResultParts, claim, results_dir

LOG_FILE = "segments.json"


class LogEntry(BaseModel):
    """One segment: as it started (its `stop_at` once decided), the segment a decision
    taken in it starts (`next`), and its record once it finished (`run`)."""

    model_config = ConfigDict(extra="forbid")

    segment: Segment
    next: Segment | None = None
    run: SegmentRun | None = None


class SegmentLog:
    """The log of the run in `work` (module doc)."""

    def __init__(self, work: Path, resuming: bool) -> None:
        self.path = work / LOG_FILE
        self.entries: list[LogEntry] = []
        # two segments' threads write it during an overlapped start (segment.py)
        self._lock = threading.RLock()
        if resuming and self.path.exists():
            doc = json.loads(self.path.read_text())
            self.entries = [LogEntry.model_validate(e) for e in doc["segments"]]

    def _save(self) -> None:
        doc = {"segments": [json.loads(e.model_dump_json()) for e in self.entries]}
        atomic_write_bytes(self.path, json.dumps(doc, indent=2).encode())

    def start(self, k: int, seg: Segment) -> None:
        """Segment k starts (again, when resumed: its entry is kept)."""
        with self._lock:
            if k < len(self.entries):
                return
            self.entries.append(LogEntry(segment=seg))
            self._save()

    def decided(self, k: int, at: dt.datetime, nxt: Segment) -> None:
        """A decision in segment k migrates at `at` to the segment `nxt`."""
        with self._lock:
            e = self.entries[k]
            e.segment = e.segment.model_copy(update={"stop_at": at})
            e.next = nxt
            self._save()

    def finished(self, k: int, run: SegmentRun) -> None:
        with self._lock:
            self.entries[k].run = run
            self._save()

    def resume_at(self, segments, first) -> Segment | None:
        """The segment to run first: the one in progress when the run was killed, the next
        after its finished ones (given, or decided), or `first()`, a new run's."""
        k = len(self.done)
        if k < len(self.entries):
            return self.entries[k].segment
        if segments is not None:
            return segments[k] if k < len(segments) else None
        return self.entries[k - 1].next if k else first()

    @property
    def done(self) -> list[LogEntry]:
        """The finished segments, in order."""
        return [e for e in self.entries if e.run is not None]


class Decided:
    """The watch of a segment resumed after a decision was logged in it: it stops the run
    at the logged instant (its first micro-batch asks), as the decision did."""

    def __init__(self, at: dt.datetime) -> None:
        self.chosen = (SimpleNamespace(at=at), None)
        self.decisions: list = []

    def __call__(self, clock: dt.datetime) -> dt.datetime:
        return self.chosen[0].at

    def batch(self, m) -> None:
        pass


def claim_adaptive(work: Path, identity: dict) -> bool:
    """True when `work` holds an interrupted adaptive run of this identity (its input was
    read: the segments resume); else the directory is claimed anew, emptied of an earlier
    run's input and segments."""
    resuming = claim(work, identity) and (work / LOG_FILE).exists()
    if not resuming:
        for old in [work / "input", *work.glob("segment*")]:
            shutil.rmtree(old, ignore_errors=True)
        (work / LOG_FILE).unlink(missing_ok=True)
    return resuming


def finished_rows(seg_work: Path, seg: Segment, columns: dict[str, list[str]]
                  ) -> dict[str, pa.Table]:
    """The rows a finished segment owns, by query, read from its result parts."""
    return {q: owned(ResultParts(results_dir(seg_work, q), cols).table(), seg.start_at,
                     seg.stop_at) for q, cols in columns.items()}


def adaptive_identity(query, data, opt, strategy: str, segments, dec) -> dict:
    """What must not change between an adaptive run and its resumption: the plan, its
    input (each stream's directory or source), the options that shape its batches."""
    from federation.logical import NumberedPlan
    from federation.runtime.connectors import source_identity as where

    lg = NumberedPlan.of(query)
    text = repr(sorted((k, repr(n)) for k, n in lg.nodes.items()))
    return {"adaptive": True, "query": lg.root.name,
            "plan_sha": hashlib.sha256(text.encode()).hexdigest()[:16],
            "data": {str(k): where(v) for k, v in data.items()}
            if isinstance(data, Mapping) else where(data),
            "strategy": strategy, "feed": opt.feed, "follow": opt.follow,
            "seconds_per_batch": opt.seconds_per_batch,
            "allowed_lateness_s": opt.allowed_lateness_s,
            "segments": None if segments is None else [
                s.model_dump(mode="json") for s in segments],
            "decide": None if segments is not None else dec.model_dump(mode="json")}
