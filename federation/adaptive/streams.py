"""The input of an adaptive run, per stream: its spool, validated once when the run starts,
what the watch reads of it (each input file's spool file, event second and good rows, from
the spool's records: what has arrived, as validated, never a file ahead of the clock), and
the spools of a segment cut from it (no row validated again). A query over one stream is
the case of one."""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from federation.adaptive.decide import AdaptiveError
from federation.adaptive.inputs import FileSpans, PartFile
from federation.conventions import SPOOL_MTIME
from federation.parts import write_part
from federation.runtime.ingest import IngestResult, punctuation
from federation.runtime.segment_spool import sub_spool, tick_before
from federation.runtime.sources import (
    InputSet,
    bind_sources,
    load_inputs,
    prepare_input,
    prepare_inputs,
    query_streams,
)
from federation.streams import StreamDecl


@dataclass
class SegmentInput:
    """A segment's input: each stream's part files in its span (a replay's warm-up
    included), how many event seconds are warm-up, and the spools (an InputSet)."""

    files: dict[str, list[PartFile]]
    warm: int  # warm-up event seconds (the most of any stream)
    seconds: int  # event seconds in its span (the most of any stream)
    spools: InputSet | None
    link: object = None  # a live segment's input instead (live.SpoolLink, started)


def spool_files(res: IngestResult) -> list[PartFile]:
    """The input files a spool holds, as the watch reads them: each one's spool file (spool
    file i holds input file i), its event second and its good rows; files without one are
    left out."""
    out = []
    for i, (lo, n) in enumerate(zip(res.file_lo, res.file_rows)):
        if lo is None or not n:
            continue
        if lo.tzinfo is not None:
            lo = lo.astimezone(dt.timezone.utc).replace(tzinfo=None)
        out.append(PartFile(res.spool_dir / f"part-{i:08d}.parquet",
                            lo.replace(microsecond=0), n))
    return out


@dataclass
class AdaptiveInput(FileSpans):
    """Each stream's spool, validated once, and the input files it holds (spool_files)."""

    streams: dict[str, StreamDecl]
    whole: InputSet

    def __post_init__(self) -> None:
        self.files = {n: spool_files(r) for n, r in self.whole.inputs.items()}
        empty = [n for n, fs in self.files.items() if not fs]
        if empty:
            raise AdaptiveError("data", f"no valid reading of stream {empty[0]!r} in its "
                                f"input ({self.whole.inputs[empty[0]].files} files)")

    @classmethod
    def read(cls, query, data, work: Path, opt, flush_s: float, tick_s,
             progress, resuming: bool = False) -> AdaptiveInput:
        """Validate every stream's directory (`data`: one, or {stream: directory}) into
        `work/input/<stream>` with one flush after the last reading of any (`resuming`:
        the spools of the interrupted run, complete, are read back)."""
        streams = query_streams(query.walk())
        sources = bind_sources(streams, data)  # directories: a live input is live.py's

        def prepare(path, out, stream, flush_after_s=None):
            return prepare_input(path, out, stream, progress=progress, flush_after_s=None,
                                 allowed_lateness_s=opt.allowed_lateness_s,
                                 domains=opt.domains_of(stream), tick_s=tick_s,
                                 horizon_s=opt.event_horizon_s)

        if resuming:
            return cls(streams, load_inputs(work / "input"))
        return cls(streams, prepare_inputs(sources, streams, work / "input", prepare, flush_s,
                                           opt.allowed_lateness_s))

    @property
    def first(self) -> dt.datetime:
        return min(fs[0].start for fs in self.files.values())

    @property
    def last(self) -> dt.datetime:
        """The event second of the last file of any stream."""
        return max(fs[-1].start for fs in self.files.values())

    def before_end(self, at: dt.datetime) -> bool:
        """Whether instant `at` is before the input's end (its last file's second)."""
        return at <= self.last

    def segment(self, lo: dt.datetime | None, start_at: dt.datetime | None,
                stop_at: dt.datetime | None, out: Path, fast_warmup: bool,
                flush_after_s: float) -> SegmentInput:
        """The spools of a segment over [lo, stop_at), warm-up [lo, start_at): each
        stream's consecutive spool files linked (`sub_spool`); with `fast_warmup` the
        warm-up files are merged into files of 10 event seconds. A stream without a file
        in the span is quiet there: its clock is at the segment's end at once (a
        punctuation at `stop_at`, or the input's flush); without one a stage's clock (the
        slowest source's) would not exist, and the segment's instants would wait for its
        drain."""
        mine = self.between(lo, stop_at)
        moved = start_at is not None and lo == start_at
        if moved:  # the file the instant falls in (a half second, say) holds rows from it
            for n, fs in self.files.items():
                holds = [f for f in fs if f.start < start_at < f.start + dt.timedelta(seconds=1)]
                if holds and (stop_at is None or holds[-1].start < stop_at):
                    mine[n] = [holds[-1], *mine[n]]
        spools, warm = {}, 0
        for n, fs in mine.items():
            res = self.whole.inputs[n]
            if not fs:
                spools[n] = _quiet_spool(res, self.streams[n], out / n, stop_at,  # no
                                         start_at if lo == start_at and not any(  # tick in
                                             mine.values()) else None)  # another's file
                continue
            span = [int(f.path.stem.removeprefix("part-")) for f in fs]  # spool i: input i
            names = res.file_names[span[0]:span[-1] + 1]
            w = 0 if start_at is None or moved else next(
                (i - span[0] for i, f in zip(span, fs) if f.start >= start_at), len(names))
            warm = max(warm, w)
            spools[n] = sub_spool(res, names, out / n, self.streams[n],
                                  warmup=w if fast_warmup else 0, flush_after_s=flush_after_s,
                                  start_at=start_at if lo == start_at else None)
        seconds = max(len(fs) for fs in mine.values())
        return SegmentInput(mine, warm, seconds, InputSet(inputs=spools))


def _quiet_spool(whole: IngestResult, stream: StreamDecl, out: Path,
                 stop_at: dt.datetime | None, moved_at: dt.datetime | None = None
                 ) -> IngestResult:
    """The spool of a stream with no file in a segment's span: one punctuation at the
    segment's end (`stop_at`), or the input's own flush (the last segment: its clock is
    the input's last, so a segment after the last reading computes the instants up to its
    extent from the moved state, and no more). `moved_at`: a moved segment's start: a tick
    before it comes first (segment_spool.tick_before: Spark's first instant needs one), at
    the input's last clock if that is earlier (its Spark instants end at that one's extent)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.parquet"):
        old.unlink()
    first = out / "part-00000000.parquet"
    if moved_at is not None:  # not after the input's last clock: no instant past its end
        end = None if whole.last_ts is None else whole.last_ts + dt.timedelta(microseconds=1)
        write_part(first, tick_before(stream, min(moved_at, end or moved_at)),
                   SPOOL_MTIME - 1, spool=True)
        first = out / "part-00000001.parquet"
    flush = whole.spool_dir / f"part-{whole.spool_files:08d}.parquet"
    if stop_at is not None:
        write_part(first, punctuation(stream, stop_at), SPOOL_MTIME)
    elif flush.exists():
        os.link(flush, first)
    return IngestResult(spool_dir=out, deadletter_dir=whole.deadletter_dir, files=0,
                        rows_in=0, rows_ok=0, first_ts=None,
                        last_ts=stop_at if stop_at is not None else whole.last_ts,
                        spool_files=0, warmup_files=0, file_names=[], file_rows=[],
                        file_lo=[])


def total(rates: Mapping[str, float]) -> float:
    """The tuples per second of all streams."""
    return math.fsum(rates.values())
