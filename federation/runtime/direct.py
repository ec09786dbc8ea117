"""The direct feed (docs/architecture.md, "Feeds"): a stage with no SPE-op reads its spools
itself instead of through a Spark streaming query.

A stage whose every output is a window's rows handed to a DB-op (no SPE-op below a MIG, no
result that Spark computes: every pure-DB plan, and stage 0 of plans whose DB-ops read the
windows) needs Spark only to read the spool and hand each micro-batch over as Arrow. The
direct feed does that in the process: the same files per micro-batch (each stream's next
`files_per_batch` spool files, in the order Spark reads them), the same rows (data rows
with `_ts`, the clock from punctuation rows), the same BatchHandler, MIG commits and stage
clocks. It stands where Spark's StreamingQuery stands (drive.py: `processAllAvailable`,
`exception`, `stop`).

Exactly-once: before a micro-batch is handed over, the files it reads are written to
`checkpoints/stage<i>/feed.json` (Spark's offset log); a resumed run replays that batch
with the same files (skipped by its id where it had committed) and goes on after them.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from federation.conventions import DATA, KIND, PUNCTUATION, TS, stored_columns
from federation.errors import FedqError
from federation.logical import Table, Window
from federation.parts import atomic_write_bytes, read_spool_part, spool_part
from federation.runtime.stages import Stage, StagedPlan


class Halted(RuntimeError):
    """A micro-batch that arrived after the run was halted (left to a resumed run)."""


@dataclass(frozen=True)
class DirectInput:
    """One stream a direct stage reads: its spool and event-time column."""

    name: str
    spool: Path
    ts_column: str
    fmt: str = "parquet"  # the spool files' format (federation.parts.SPOOL_FORMATS)


@dataclass
class Unpacked:
    """One micro-batch as the BatchHandler takes it: the rows of each output, and the
    largest punctuation of each clock source (None: none in this batch)."""

    parts: dict[int, pa.Table]
    clocks: dict[int, dt.datetime | None]


def direct_ok(staged: StagedPlan, st: Stage) -> bool:
    """True when stage `st` has no SPE-op: every input of its DB-ops is a window's rows or
    a database table, and Spark computes no result there."""
    lg = staged.plan.logical
    ops = staged.db_ops_of(st.index)
    if not ops or staged.spe_results(st.index):
        return False
    for op_id in ops:
        c = next(x for x in staged.plan.db_ops if x.id == op_id)
        for ci in c.inputs:
            if isinstance(ci.node, Table):
                continue
            if not (ci.row_level and isinstance(lg.nodes[ci.op_ids[0]], Window)):
                return False
    return True


def needs_spark(staged: StagedPlan, direct: set[int]) -> bool:
    """True when a stage not fed directly has work (a Spark streaming query)."""
    return any(st.index not in direct and (staged.db_ops_of(st.index)
                                           or staged.spe_results(st.index))
               for st in staged.stages)


def direct_stages(staged: StagedPlan, feed: str) -> set[int]:
    """The stages a run with `feed` ("direct" or "spe") feeds directly."""
    return {st.index for st in staged.stages if feed == "direct" and direct_ok(staged, st)}


def spool_format(staged: StagedPlan, feed: str) -> str:
    """The input spools' format (federation.parts.SPOOL_FORMATS): Arrow IPC files where no
    Spark query runs, so only the direct feed reads them; Parquet for Spark's file source."""
    return "parquet" if needs_spark(staged, direct_stages(staged, feed)) else "arrow"


def stage_feeds(plan, feed: str = "direct") -> list[str]:
    """How each stage of `plan` gets its micro-batches: "direct" or "spark" (`fedq explain`)."""
    staged = StagedPlan.of(plan)
    return ["direct" if feed == "direct" and direct_ok(staged, st) else "spark"
            for st in staged.stages
            if staged.db_ops_of(st.index) or staged.spe_results(st.index)]


def build_direct(staged: StagedPlan, st: Stage, spools: dict,
                 formats: dict[str, str] | None = None) -> tuple[list, list]:
    """Set the stage's outputs and clock sources as StageBuilder.build does; returns, per
    output, (stream index, its columns) and the streams read, in clock-source order
    (`formats`: each stream's spool format, sources.spool_formats; default Parquet)."""
    lg = staged.plan.logical
    streams: list[DirectInput] = []
    layout = []
    for op_id in staged.db_ops_of(st.index):
        c = next(x for x in staged.plan.db_ops if x.id == op_id)
        for ci in c.inputs:
            if isinstance(ci.node, Table):  # loaded by the MIG from the run's copy
                continue
            name = lg.nodes[ci.op_ids[0]].stream.name
            idx = next((i for i, s in enumerate(streams) if s.name == name), None)
            if idx is None:
                decl, spool = spools[name]
                streams.append(DirectInput(name, Path(spool), decl.ts_column,
                                           (formats or {}).get(name, "parquet")))
                idx = len(streams) - 1
            st.outputs.append(("mig", (c.id, ci.table)))
            made = {k for k, _ in lg.nodes[ci.op_ids[0]].computed_keys}  # the DB computes
            layout.append((idx, (TS, *(c for c in stored_columns(ci.node) if c not in made))))
    st.clock_sources = list(range(len(streams)))
    return layout, streams


class DirectFeed:
    """A stage's micro-batches read from its spools in this process (module doc)."""

    POLL_S = 0.02

    def __init__(self, handle, layout, streams: list[DirectInput], files_per_batch: int,
                 checkpoint: Path, name: str, complete: bool,
                 trigger_s: float | None = None, ahead=None) -> None:
        self.handle, self.layout, self.streams = handle, layout, streams
        self.ahead = ahead  # an ingest still writing the spools (ahead.py), or None
        self.files_per_batch, self.trigger_s, self.complete = files_per_batch, trigger_s, complete
        self.log = checkpoint / "feed.json"
        checkpoint.mkdir(parents=True, exist_ok=True)
        self.lastProgress = None  # no Spark state (spe/pipeline.state_of)
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._cv = threading.Condition()
        self._polls = self._idle_at = 0
        self._done = False
        try:
            saved = json.loads(self.log.read_text()) if self.log.exists() else None
        except ValueError as e:  # a resumed run starts over (execute.py)
            raise FedqError(f"the offset log {self.log} is unreadable ({e})") from None
        self.batch = 0
        self.next = {s.name: 0 for s in streams}
        self._replay = None
        if saved:  # the last batch planned: replayed with the same files (skipped if done)
            self.batch = saved["batch"]
            self._replay = {n: tuple(r) for n, r in saved["files"].items()}
        self.thread = threading.Thread(target=self._loop, name=f"fedq-feed-{name}",
                                       daemon=True)
        self.thread.start()

    # -- what drive.py asks of a streaming query -------------------------------------------
    def processAllAvailable(self) -> None:
        with self._cv:
            want = self._polls
            self._cv.wait_for(lambda: self._done or self._idle_at > want)
        if self._error is not None:
            raise self._error

    def exception(self):
        return self._error

    def stop(self) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        if threading.current_thread() is not self.thread:
            self.thread.join()

    # -- the loop ----------------------------------------------------------------------------
    def _loop(self) -> None:
        t0 = time.monotonic()
        try:
            if self._replay is not None:
                self._run(self._replay)
                self.batch += 1
            while not self._stop.is_set():
                with self._cv:
                    self._polls += 1
                    poll = self._polls
                read = self.ahead is None or self.ahead.ended.is_set()  # before listing
                if self.ahead is not None and self.ahead.error is not None:
                    raise self.ahead.error
                files = self._next_files(whole=not read)
                if files is None and not read:  # the ingest ahead writes the next files
                    self._stop.wait(self.POLL_S)
                    continue
                if files is None:
                    with self._cv:
                        self._idle_at = poll
                        self._cv.notify_all()
                        if self.complete:
                            break
                        self._cv.wait(self.POLL_S)
                    continue
                if self.trigger_s:  # one micro-batch per interval of wall time
                    due = t0 + self.batch * self.trigger_s
                    self._stop.wait(max(0.0, due - time.monotonic()))
                atomic_write_bytes(self.log, json.dumps(
                    {"batch": self.batch, "files": files}).encode())
                self._run(files)
                self.batch += 1
                if self.ahead is not None:
                    self.ahead.fed.set()
        except Halted:
            pass  # a halted run: this batch is left to the resumed run
        except BaseException as e:  # noqa: BLE001 - reported by processAllAvailable
            self._error = e
        finally:
            with self._cv:
                self._done = True
                self._cv.notify_all()

    def _next_files(self, whole: bool = False) -> dict[str, tuple[int, int]] | None:
        """Each stream's next spool files (consecutive, landed), or None when none has one
        (`whole`: unless every stream has its `files_per_batch`, as a spool that is complete
        would give them: module ahead.py)."""
        out, any_new = {}, False
        for s in self.streams:
            lo = hi = self.next[s.name]
            while hi - lo < self.files_per_batch and spool_part(s.spool, hi, s.fmt).exists():
                hi += 1
            if whole and hi - lo < self.files_per_batch:
                return None
            out[s.name] = (lo, hi)
            any_new |= hi > lo
        return out if any_new else None

    def _run(self, files: dict[str, tuple[int, int]]) -> None:
        for s in self.streams:
            self.next[s.name] = max(self.next[s.name], files[s.name][1])
        self.handle(self.batch, lambda: self._read(files))

    def _read(self, files) -> Unpacked:
        rows, clocks = [], {}
        for j, s in enumerate(self.streams):
            lo, hi = files[s.name]
            data, clocks[j] = _read_spool(s, lo, hi)
            rows.append(data)
        parts = {}
        for k, (j, cols) in enumerate(self.layout):
            if rows[j] is not None and rows[j].num_rows:
                parts[k] = rows[j].select(list(cols))
        return Unpacked(parts, clocks)


def _read_spool(s: DirectInput, lo: int, hi: int):
    """Spool files [lo, hi) of stream `s`: (its data rows with `_ts`, its largest
    punctuation), as spe/pipeline.spool_source selects them."""
    if hi <= lo:
        return None, None
    t = pa.concat_tables([read_spool_part(spool_part(s.spool, i, s.fmt))
                          for i in range(lo, hi)], promote_options="permissive")
    kind, ts = t.column(KIND), t.column(s.ts_column)
    punct = t.filter(pc.and_(pc.equal(kind, PUNCTUATION), pc.is_valid(ts)))
    clock = pc.max(punct.column(s.ts_column)).as_py() if punct.num_rows else None
    if isinstance(clock, dt.datetime) and clock.tzinfo is not None:
        clock = clock.astimezone(dt.timezone.utc).replace(tzinfo=None)
    data = t.filter(pc.or_kleene(pc.equal(kind, DATA), pc.is_null(ts)))
    data = data.drop_columns([KIND]).append_column(TS, data.column(s.ts_column))
    return data, clock
