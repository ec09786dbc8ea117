"""An adaptive run on live input (docs/architecture.md, "Re-optimization while running"):
one follower for the whole run validates every stream's source into the run's spools
(`input/<stream>/`, federation/runtime/follow.py) and is never stopped by a migration; each
segment reads those spools from its cut on while they grow (`SpoolLink`: its execute
follows it as a following run follows its landing directories), and the watch measures
what has arrived (`LiveInput`: the spool files' records), never a file ahead of the clock.

A segment's cut is by rows, not files (a followed spool file holds whatever landed: several
event seconds, a slice of a burst, an idle step): from the first spool file whose clock
reaches the cut on, every file is the segment's, linked, or copied without the readings
below the cut (a moved state holds those already; a replay's warm-up does not need them).
A segment whose migration instant is decided ends once each stream's clock in it is past
the instant by the stage's tail (Spark's own results before it, the allowed lateness): the
file that reaches past that end is cut there (its later readings are the next placement's,
a punctuation at the end keeps the clock), so the segment's last micro-batch is not a
burst of readings it would skip; the last segment ends with the input (the whole spools'
flush)."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.adaptive.inputs import FileSpans, PartFile
from federation.conventions import DATA, KIND, SPOOL_MTIME
from federation.parts import list_spool, spool_part, spool_part_metadata, write_part
from federation.runtime.ingest import INPUTS_KEY, SLICE_KEY, STATE_KEY, IngestResult
from federation.runtime.segment_spool import cut_at, tick_before, with_rows
from federation.runtime.sources import InputSet
from federation.streams import StreamDecl

_US = dt.timedelta(microseconds=1)
LINK_FILE = ".link.json"  # its first whole-spool file (hidden: Spark reads the rest)


def _naive(t: dt.datetime | None) -> dt.datetime | None:
    if t is not None and t.tzinfo is not None:
        return t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return t


class _Index:
    """What the watch reads of one stream's growing spool: each spool file's first event
    second and good rows (from its record of the inputs it holds), the last `keep_s` event
    seconds of them (bounded: a live run never ends)."""

    def __init__(self, spool: Path, keep_s: float) -> None:
        self.spool, self.keep = spool, dt.timedelta(seconds=keep_s)
        self.next = 0
        self.files: deque[PartFile] = deque()

    def refresh(self) -> list[PartFile]:
        while (p := spool_part(self.spool, self.next)).exists():
            self.next += 1
            meta = spool_part_metadata(p)
            inputs = json.loads(meta[INPUTS_KEY]) if INPUTS_KEY in meta else []
            los = [_naive(dt.datetime.fromisoformat(lo)) for _, n, lo in inputs if n and lo]
            rows = sum(n for _, n, _ in inputs)
            if los and rows:
                self.files.append(PartFile(p, min(los).replace(microsecond=0), rows))
        if self.files:
            newest = max(f.start for f in self.files)
            while self.files[0].start < newest - self.keep:
                self.files.popleft()
        return sorted(self.files, key=lambda f: f.start)


class LiveInput(FileSpans):
    """The adaptive run's view of a live input (streams.AdaptiveInput's, for the watch and
    the first segment): `follower` validates every stream into its spool."""

    def __init__(self, streams: Mapping[str, StreamDecl], follower, keep_s: float) -> None:
        self.streams, self.follower = dict(streams), follower
        self.index = {n: _Index(lane.ing.spool, keep_s) for n, lane in follower.lanes.items()}

    @property
    def whole(self) -> InputSet:
        return self.follower.res

    @property
    def files(self) -> dict[str, list[PartFile]]:
        return {n: ix.refresh() for n, ix in self.index.items()}

    @property
    def first(self) -> dt.datetime:
        return _naive(self.whole.first_ts).replace(microsecond=0)

    @property
    def last(self) -> dt.datetime:
        """The event second of the newest reading (or idle step) of any stream."""
        return _naive(self.whole.last_ts).replace(microsecond=0)

    def before_end(self, at: dt.datetime) -> bool:
        """Whether instant `at` is before the end of input (a live input has none until
        its follower ends it)."""
        return not self.follower.ended.is_set() or at <= self.last


class _Lane:
    """One stream's part of a segment's spool: whole-spool file `first + j` is its file j."""

    def __init__(self, name: str, stream: StreamDecl, whole: IngestResult, out: Path,
                 lo: dt.datetime | None, prime: bool = False) -> None:
        self.name, self.stream, self.whole, self.out, self.lo = name, stream, whole, out, lo
        out.mkdir(parents=True, exist_ok=True)
        self.res = IngestResult(spool_dir=out, deadletter_dir=whole.deadletter_dir)
        link = out / LINK_FILE
        linked = json.loads(link.read_text()) if link.exists() else {}
        self.first: int | None = linked.get("first")
        # the clock of the files below the cut: the input's end when none is past it (a
        # migration instant after the last reading: the instants from it are computed from
        # the moved state alone, up to the last reading's extent)
        self.res.last_ts = _naive(dt.datetime.fromisoformat(linked["below"])) \
            if linked.get("below") else None
        self.flushed = False
        # a moved segment's spool begins with a tick, at once: its first micro-batch (its
        # planning, code generation) then runs while the old placement finishes. Not past
        # the clock the stream has reached (the input may end before `lo`: a Spark global
        # aggregate would make instants past its end); Spark's instant `lo` needs a tick
        # before it (segment_spool.tick_before): its first own file carries it (_top_up)
        self.primed = int(prime and lo is not None)
        self.prime_at = None
        if self.primed:
            tick = spool_part(out, 0)
            if not tick.exists():
                at = lo if whole.last_ts is None else min(lo, _naive(whole.last_ts) + _US)
                write_part(tick, tick_before(stream, at), SPOOL_MTIME - 1, spool=True)
            self.prime_at = _naive(pc.max(pq.read_table(tick).column(stream.ts_column)
                                          ).as_py())
            self.res.spool_files = 1
        for p in list_spool(out)[self.primed:] if self.first is not None else []:  # resumed
            self._account(pq.read_table(p, columns=[stream.ts_column, KIND]),
                          self._is_flush(self.first + self.res.spool_files - self.primed))
            self.res.spool_files += 1
        self.cursor = (self.first or 0) + self.res.spool_files - self.primed

    def _top_up(self, flush: bool) -> pa.Table | None:
        """The tick the segment's first own file adds when the primed one is earlier than
        `lo`: before `lo` (its input reached it), or at the input's end if that is earlier
        (its flush: a migration instant after the last reading)."""
        if self.prime_at is None or self.prime_at >= self.lo - _US:
            return None
        end = self.res.last_ts
        at = min(self.lo, end + _US) if flush and end is not None else self.lo
        return tick_before(self.stream, at) if at - _US > self.prime_at else None

    def _is_flush(self, i: int) -> bool:
        meta = spool_part_metadata(spool_part(self.whole.spool_dir, i))
        return STATE_KEY not in meta and SLICE_KEY not in meta

    def _account(self, t: pa.Table, flush: bool) -> None:
        ts = t.column(self.stream.ts_column)
        data = ts.filter(pc.equal(t.column(KIND), DATA))
        if data.length():
            lo = _naive(pc.min(data).as_py())
            self.res.first_ts = lo if self.res.first_ts is None else min(self.res.first_ts, lo)
            self.res.rows_ok += data.length()
        if flush:
            self.flushed = True  # the end of input: not a clock (Ingestor.finish)
        elif ts.length():
            hi = _naive(pc.max(ts).as_py())
            self.res.last_ts = hi if self.res.last_ts is None else max(self.res.last_ts, hi)
        self.res.files += 1

    def step(self, end: dt.datetime | None = None) -> bool:
        """Take the whole spool's next file, if it has landed; whether one was taken.
        `end`: the segment's end as known now (its migration instant and tail): a file
        reaching past it is cut there (segment_spool.cut_at)."""
        src = spool_part(self.whole.spool_dir, self.cursor)
        if not src.exists():
            return False
        flush = self._is_flush(self.cursor)
        cols = pq.read_table(src, columns=[self.stream.ts_column, KIND])
        ts = cols.column(self.stream.ts_column)
        hi = _naive(pc.max(ts).as_py()) if not flush and ts.length() else None
        past = hi is not None and end is not None and hi > end
        if self.first is None:
            if self.lo is not None and hi is not None and hi < self.lo:
                self.cursor += 1  # every reading in it is below the cut, and its clock
                self.res.last_ts = hi if self.res.last_ts is None else max(
                    self.res.last_ts, hi)
                return True
            self.first = self.cursor
            below = self.res.last_ts
            (self.out / LINK_FILE).write_text(json.dumps({
                "first": self.first, "below": below.isoformat() if below else None}))
        dst = spool_part(self.out, self.res.spool_files)
        below = None if self.lo is None else pc.and_(
            pc.equal(cols.column(KIND), DATA),
            pc.less(ts, pa.scalar(self.lo, ts.type)))
        tick = self._top_up(flush) if self.first == self.cursor else None
        if past or tick is not None or (below is not None and pc.any(below).as_py()):
            t = pq.read_table(src)
            if below is not None:
                t = t.filter(pc.invert(below))
            if past:
                t = cut_at(t, self.stream, end)
            if tick is not None:
                t = with_rows(t, tick)
            write_part(dst, t, src.stat().st_mtime, spool=True)
            cols = t.select([self.stream.ts_column, KIND])
        else:
            dst.unlink(missing_ok=True)
            os.link(src, dst)
        self._account(cols, flush)
        self.res.spool_files += 1
        self.cursor += 1
        return True


class SpoolLink:
    """A segment's input while the run's follower grows the whole spools: a thread takes
    every stream's new spool files into the segment's spools (module doc). It is what a
    following `execute` follows (`Handoff(follower=...)`: the Follower's interface: `res`,
    `started`, `ended`, `error`, `when_ended`, `stop`).

    `lo`: the cut (None: from the first file); `stop()`: the segment's migration instant
    as known now (None: not decided); `tail_s`: how far past it every stream's clock must be
    before the segment's input ends; `prime`: a moved segment's (it starts at `lo`): each
    spool begins with a tick before `lo`, written at once (_Lane)."""

    def __init__(self, whole, streams: Mapping[str, StreamDecl], out: Path,
                 lo: dt.datetime | None, stop: Callable[[], dt.datetime | None],
                 tail_s: float, poll_s: float = 0.1, prime: bool = False) -> None:
        self.whole, self.stop_at, self.tail = whole, stop, dt.timedelta(seconds=tail_s)
        self.lanes = {n: _Lane(n, streams[n], r, out / n, lo, prime)
                      for n, r in whole.res.inputs.items()}
        self.res = InputSet(inputs={n: lane.res for n, lane in self.lanes.items()})
        self.poll_s = poll_s
        self.halt, self.started, self.ended = (threading.Event() for _ in range(3))
        self.error: BaseException | None = None
        self._on_end, self._end_lock = None, threading.Lock()
        self._thread = threading.Thread(target=self._main, name="fedq-segment-link",
                                        daemon=True)

    @property
    def description(self) -> str:
        return f"the run's spools ({', '.join(self.lanes)})"

    def given(self) -> dt.datetime | None:
        """The latest reading (or clock) of any stream it has given the segment, less the
        tail: a migration instant after it ends the segment at a file not given yet."""
        last = [lane.res.last_ts for lane in self.lanes.values() if lane.res.last_ts]
        return max(last) - self.tail if last else None

    def when_ended(self, fn) -> None:
        with self._end_lock:
            self._on_end = fn
            if self.ended.is_set():
                fn()

    def start(self) -> SpoolLink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.halt.set()
        self._thread.join()

    def _main(self) -> None:
        try:
            while not self.halt.is_set():
                if self.whole.error is not None:
                    raise self.whole.error
                whole_ended = self.whole.ended.is_set()  # its flush is written before
                took = False
                stop = self.stop_at()
                end = None if stop is None else stop + self.tail
                for lane in self.lanes.values():  # a file each: the cut is checked after it
                    took = lane.step(end) or took
                if all(lane.res.spool_files for lane in self.lanes.values()):
                    self.started.set()
                if self._done(whole_ended):
                    self._end()
                    return
                if not took:
                    self.halt.wait(self.poll_s)
        except BaseException as e:  # noqa: BLE001 - handed to the run, which raises it
            self.error = e
            self.started.set()
            self.ended.set()

    def _done(self, whole_ended: bool) -> bool:
        lanes = self.lanes.values()
        if whole_ended and all(lane.flushed or not spool_part(
                lane.whole.spool_dir, lane.cursor).exists() for lane in lanes):
            return True
        stop = self.stop_at()
        return stop is not None and all(
            lane.res.last_ts is not None and lane.res.last_ts >= stop + self.tail
            for lane in lanes)

    def _end(self) -> None:
        with self._end_lock:
            if self._on_end is not None:
                self._on_end()
            self.started.set()
            self.ended.set()


def follow_input(query, data, work: Path, opt, rid: str, resuming: bool, grid,
                 flush_s: float, keep_s: float, halt: threading.Event, prog):
    """The run's follower of every stream's source (runtime/live.start_following: a
    resumed run's goes on from its spools), started, once the run's first instant is
    known; and the LiveInput over it. RunHalted when halted before the first reading."""
    from federation.runtime.live import RunHalted, start_following, wait_for_first
    from federation.runtime.sources import bind_sources, query_streams

    streams = query_streams(query.walk())
    follower = start_following(bind_sources(streams, data, opt), streams, work, rid, opt,
                               grid, resuming, flush_s, "parquet")  # Spark reads it
    try:
        if not wait_for_first(follower, halt, prog):
            raise RunHalted("halted before the first reading landed")
    except BaseException:
        follower.stop()
        raise
    return follower, LiveInput(streams, follower, 2 * keep_s + 60)


def live_source(query, data, opt) -> bool:
    """Whether a stream's source is live (a broker, a generator, follow:DIR)."""
    from federation.runtime.sources import bind_sources, query_streams

    return any(s.live for s in bind_sources(query_streams(query.walk()), data, opt).values())


def owned_seconds(seg, sin, r, inp) -> int:
    """The event seconds a segment owns (of its input files; live: its clock's span)."""
    if sin.link is None:
        return max(sum(1 for f in fs if (seg.start_at is None or f.start >= seg.start_at)
                       and (seg.stop_at is None or f.start < seg.stop_at))
                   for fs in sin.files.values())
    clocks = [m.clock for m in r.metrics if m.stage == 0 and m.clock is not None]
    if not clocks:
        return 0
    hi = max(clocks) if seg.stop_at is None else min(max(clocks), seg.stop_at)
    return max(0, int((hi - (seg.start_at or inp.first)).total_seconds()))
