"""Ingest: validate a directory of event-second files into the spool that both engines read.

Bad input never crashes a run and is never lost silently: rows with nulls, values of the
wrong type, codes outside a column's domain, or timestamps later than the allowed lateness
are counted per reason and written to a dead-letter directory with the reason. Good rows go
to the spool, one Parquet file per input file, each followed by a punctuation row
(`KIND = PUNCTUATION`, `ts` = the largest event time seen so far) that carries event-time
progress to every operator, and the spool ends with a flush punctuation far enough ahead that every
window closes. The lateness rule is the watermark's: a row is late when its ts is below
(largest ts of the earlier files) - allowed lateness, so no engine ever drops it itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from federation.conventions import DATA, KIND, NEUTRAL, PUNCTUATION, SPOOL_MTIME, TICK
from federation.instants import Grid, grid_floor, grid_points
from federation.parts import (
    arrow_schema,
    atomic_write_bytes,
    list_spool,
    read_spool_part,
    spool_part,
    spool_part_metadata,
    write_part,
)
from federation.runtime.bursts import burst_slices
from federation.runtime.phases import timed
from federation.runtime.validate import (
    count_csv_rejects,
    dead_letter,
    quarantine,
    read_part,
    reason_kind,  # noqa: F401 - where tests and tools import it from
    validate_table,
)
from federation.streams import StreamDecl

#: metadata of each spool file: the ingest's state after it and its inputs; of a slice of an
#: input split across spool files (all but its last): the input's name
STATE_KEY, INPUTS_KEY, SLICE_KEY = b"fedq.ingest", b"fedq.inputs", b"fedq.slice"


class IngestResult(BaseModel):
    """The spool written for the engines, and what was dead-lettered (ingest.json)."""

    model_config = ConfigDict(extra="forbid")

    spool_dir: Path
    deadletter_dir: Path
    files: int = 0
    rows_in: int = 0
    rows_ok: int = 0
    dead: dict[str, int] = Field(default_factory=dict, description="dead rows per reason")
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    spool_files: int = 0  # data files of the spool (< files when fast-forwarded)
    warmup_files: int = 0  # of which merged warm-up files
    quarantined: list[dict[str, str]] = Field(default_factory=list)  # unreadable files
    tick_hi: datetime | None = None  # the last grid tick written
    spool_format: str = "parquet"  # federation.parts.SPOOL_FORMATS ("arrow": direct feed)
    cpu_s: float = 0.0  # CPU time of validating and spooling (the ingest's thread)
    #: per input file in order: name, good rows, first event time (`sub_spool`)
    file_names: list[str] = Field(default_factory=list)
    file_rows: list[int] = Field(default_factory=list)
    file_lo: list[datetime | None] = Field(default_factory=list)

    @property
    def rows_dead(self) -> int:
        return sum(self.dead.values())

    def count_dead(self, reasons) -> None:
        for r in reasons:
            self.dead[r] = self.dead.get(r, 0) + 1


def punctuation(stream: StreamDecl, ts, kind: int = PUNCTUATION) -> pa.Table:
    """Punctuation rows: `KIND` PUNCTUATION (or TICK), event time `ts` (one or a list), every
    other column a neutral value."""
    tss = ts if isinstance(ts, list) else [ts]
    row = {c: [NEUTRAL[t]] * len(tss) for c, t in stream.columns.items()}
    row[stream.ts_column] = tss
    row[KIND] = [kind] * len(tss)
    return pa.table(row, schema=spool_schema(stream.columns))


def spool_schema(columns: Mapping[str, str]) -> pa.Schema:
    """The spool's schema: the stream's columns and the marker column `_kind`."""
    return arrow_schema(columns).append(pa.field(KIND, pa.int32()))


def _as_data(good: pa.Table) -> pa.Table:
    return good.append_column(KIND, pa.array(np.full(good.num_rows, DATA, dtype=np.int32)))


class Ingestor:
    """Validates input files one at a time into the spool (module doc): a directory read
    once (`sources.prepare_input`) or followed while it grows (federation/runtime/follow.py).

    `fast_forward_s` > 0 merges the first that many event seconds into spool files of
    `fast_forward_batch` event seconds each (one micro-batch each: a warm-up that fills the
    windows in fewer batches); later event seconds are a spool file each. Validation and dead
    letters are per input file either way, so the rows are the same. `tick_s` writes a tick
    row (id TICK) at every instant of that grid (a Grid, or a slide from the epoch) from the
    first reading on, and one
    at each file's largest event time (`federation.instants`). `horizon_s`: the event-time
    horizon of `validate_table`. A file that cannot be read, or lacks a column of the
    stream, is quarantined (copied to the dead-letter directory with its reason) and the run
    goes on. Dead letters go to `work_dir/deadletter/<run_id>` (a reused work directory
    keeps earlier runs' letters). `resume`: the state of a spool written before (its
    ingest.json): the spool is kept and goes on. `file_list=False` (a following run, which
    never ends): the input files are not listed in the result (`file_names`, ... are for
    adaptive runs), so neither memory nor ingest.json grows with every file; each spool
    file's metadata still names its inputs. `max_file_rows` (a following run: a micro-batch
    reads at most so many spool files): an input file with more good rows is split, ordered
    by event time, into spool files of about that many (`bursts.burst_slices`), each with its
    punctuation (its largest event time so far: no later row is late): a burst is caught up
    in micro-batches of bounded size. Only the last slice carries the state: a run stopped
    between two slices reads that input again first (`partial`) and writes the same slices
    under the same names. `spool_format`: "parquet", or "arrow" (Arrow IPC files) where only
    the direct feed reads the spool (federation.parts.SPOOL_FORMATS)."""

    def __init__(self, work_dir: Path | str, stream: StreamDecl, *,
                 allowed_lateness_s: float = 0.0, domains: Mapping[str, set] | None = None,
                 fast_forward_s: int = 0, fast_forward_batch: int = 1,
                 tick_s: Grid | float | None = None, horizon_s: float = 3600.0,
                 run_id: str | None = None, resume: IngestResult | None = None,
                 file_list: bool = True, max_file_rows: int | None = None,
                 spool_format: str = "parquet") -> None:
        if fast_forward_batch < 1:
            raise ValueError(f"fast_forward_batch must be >= 1, got {fast_forward_batch}")
        self.work = Path(work_dir)
        self.stream, self.domains, self.tick_s, self.horizon_s = stream, domains, tick_s, horizon_s
        self.lateness = timedelta(seconds=allowed_lateness_s)
        self.allowed_lateness_s = allowed_lateness_s
        self.ff_s, self.ff_batch = fast_forward_s, fast_forward_batch
        self.file_list, self.max_file_rows = file_list, max_file_rows
        self.partial: str | None = None  # the input whose slices a stopped run left unfinished
        self.inputs_read: set[str] = set()  # input files a resumed spool holds (by name)
        self.finished = False  # the spool ends with the flush of finish()
        self.spool = self.work / "spool"
        self.spool.mkdir(parents=True, exist_ok=True)
        if resume is not None:
            self.res = resume
            self.dead_dir = resume.deadletter_dir
        else:
            for old in list_spool(self.spool):
                old.unlink()
            run_id = run_id or datetime.now().strftime("run-%Y%m%d-%H%M%S-%f")
            self.dead_dir = self.work / "deadletter" / run_id
            self.res = IngestResult(spool_dir=self.spool, deadletter_dir=self.dead_dir,
                                    spool_format=spool_format)
        self.dead_dir.mkdir(parents=True, exist_ok=True)
        self.pending: list[pa.Table] = []
        self.pending_files = 0
        self.pending_inputs: list[list] = []  # [name, good rows, first ts] since the write

    @classmethod
    def resumed(cls, work_dir: Path | str, stream: StreamDecl, **options) -> Ingestor:
        """An ingestor that goes on with the spool in `work_dir` (a followed run after a
        crash): its state is the one the last spool file carries (written with it in one
        atomic rename, so the state and the spool agree whatever the moment of the crash)."""
        spool = Path(work_dir) / "spool"
        files = list_spool(spool) if spool.is_dir() else []
        state, inputs, meta, written, partial = None, [], {}, 0, None
        for k, p in enumerate(files):
            meta = spool_part_metadata(p)
            if STATE_KEY in meta:
                state, written, partial = json.loads(meta[STATE_KEY]), k + 1, None
                inputs.extend(json.loads(meta[INPUTS_KEY]))
            elif SLICE_KEY in meta:
                partial = meta[SLICE_KEY].decode()
        if state is None:  # nothing read before, or the first input left unfinished
            ing = cls(work_dir, stream, **options)
            ing.partial = partial
            return ing
        listed = options.get("file_list", True)
        res = IngestResult.model_validate({
            **state, "spool_files": written if partial else len(files), **({
                "file_names": [i[0] for i in inputs], "file_rows": [i[1] for i in inputs],
                "file_lo": [i[2] for i in inputs]} if listed else {})})
        ing = cls(work_dir, stream, resume=res, **options)
        ing.inputs_read = {i[0] for i in inputs}
        ing.partial = partial
        # the last spool file is finish()'s flush
        ing.finished = STATE_KEY not in meta and SLICE_KEY not in meta
        return ing

    @property
    def clock(self) -> datetime | None:
        """The stream's clock: the largest event time accepted (or idled to) so far."""
        return self.res.last_ts

    def count_csv_rejects(self, data: Path) -> None:
        count_csv_rejects(data, self.dead_dir, self.res)

    def add(self, path: Path, last: bool = True) -> None:
        """Validate one input file into the spool (`last`: no later file is known yet, so
        a fast-forward group ends here)."""
        cpu0 = time.thread_time()
        try:
            self._add(path, last)
        finally:
            self.res.cpu_s += time.thread_time() - cpu0

    def _add(self, path: Path, last: bool) -> None:
        res, stream = self.res, self.stream
        k = res.files
        with timed("ingest.read"):
            raw, why = read_part(path, stream)
        if why is not None:
            quarantine(path, self.dead_dir, why, res)
            raw = arrow_schema(stream.columns).empty_table()
        max_ts = res.last_ts
        wm = None if max_ts is None else max_ts - self.lateness
        with timed("ingest.validate"):
            good, bad = validate_table(raw, stream, wm, self.domains, clock=max_ts,
                                       horizon_s=self.horizon_s)
        res.rows_in += raw.num_rows
        res.rows_ok += good.num_rows
        if bad:
            with timed("ingest.dead_letter"):
                dead_letter(path.name, raw, bad, self.dead_dir / f"dead-{k:08d}.parquet", res)
        with timed("ingest.spool"):
            self._spool_file(path, last, good)

    def _spool_file(self, path: Path, last: bool, good: pa.Table) -> None:
        """A file's good rows to the spool (slices, warm-up groups)."""
        res, ts_col, k = self.res, self.stream.ts_column, self.res.files
        n_good = good.num_rows
        lo = pc.min(good.column(ts_col)).as_py() if good.num_rows else None
        if lo is not None:
            res.first_ts = lo if res.first_ts is None else min(res.first_ts, lo)
        in_warmup = k < self.ff_s
        cap = self.max_file_rows
        if cap and not in_warmup and good.num_rows > cap:
            *first, good = burst_slices(good, ts_col, cap)
            for piece in first:  # every slice but the last
                self._spool_rows(piece)
                self._write(pa.concat_tables(self.pending), slice_of=path.name)
        self._spool_rows(good)
        self.pending_files += 1
        if self.file_list:
            res.file_names.append(path.name)
            res.file_rows.append(n_good)
            res.file_lo.append(lo)
        self.pending_inputs.append([path.name, n_good, None if lo is None else str(lo)])
        res.files += 1
        self.partial = None
        if (not in_warmup or self.pending_files >= self.ff_batch or k == self.ff_s - 1
                or last):
            self._write(pa.concat_tables(self.pending), in_warmup)

    def _spool_rows(self, good: pa.Table) -> None:
        """Good rows to the pending spool file: they move the clock, and the ticks of the
        grid up to it follow them."""
        res = self.res
        self.pending.append(_as_data(good))
        if good.num_rows:
            hi = pc.max(good.column(self.stream.ts_column)).as_py()
            lo = pc.min(good.column(self.stream.ts_column)).as_py()
            res.last_ts = hi if res.last_ts is None else max(res.last_ts, hi)
            ticks = self._ticks(lo, res.last_ts)
            if ticks:
                self.pending.append(punctuation(self.stream, ticks, TICK))

    def _ticks(self, lo: datetime, hi: datetime) -> list:
        if not self.tick_s:
            return []
        start = grid_floor(lo, self.tick_s)
        if self.res.tick_hi is not None and start <= self.res.tick_hi:
            start = self.res.tick_hi + timedelta(microseconds=1)
        ticks = grid_points(start, hi, self.tick_s)
        self.res.tick_hi = ticks[-1] if ticks else self.res.tick_hi
        return [*ticks, hi]

    def _write(self, out: pa.Table, in_warmup: bool = False, slice_of: str | None = None
               ) -> None:
        res = self.res
        if res.last_ts is not None:
            out = pa.concat_tables([out, punctuation(self.stream, res.last_ts)])
        res.spool_files += 1
        res.warmup_files += 1 if in_warmup else 0
        if slice_of is not None:  # not a state: the input is not read until its last slice
            meta = {SLICE_KEY: slice_of.encode()}
        else:
            state = res.model_dump(mode="json", exclude={"file_names", "file_rows", "file_lo"})
            meta = {STATE_KEY: json.dumps(state).encode(),
                    INPUTS_KEY: json.dumps(self.pending_inputs).encode()}
        out = out.replace_schema_metadata({**(out.schema.metadata or {}), **meta})
        write_part(spool_part(self.spool, res.spool_files - 1, res.spool_format), out,
                   SPOOL_MTIME + res.spool_files - 1, spool=True)
        self.pending, self.pending_files, self.pending_inputs = [], 0, []

    def idle_to(self, ts: datetime) -> None:
        """No input for a while: the clock moves to `ts` (ticks and a punctuation, no rows),
        so windows close; a later reading below it minus the lateness is late."""
        res = self.res
        if res.last_ts is None or ts <= res.last_ts:
            return
        ticks = self._ticks(res.last_ts, ts)
        res.last_ts = ts
        self._write(punctuation(self.stream, ticks, TICK) if ticks
                    else punctuation(self.stream, ts).slice(0, 0))

    def start_clock(self, ts: datetime) -> None:
        """A stream with no reading yet starts its clock at `ts` (a punctuation, no rows):
        its windows close with the others', and a reading below it minus the lateness is
        late (federation/runtime/follow.py, the start of several streams)."""
        if self.res.last_ts is None:
            self.res.last_ts = ts
            self._write(punctuation(self.stream, ts).slice(0, 0))

    def save(self) -> None:
        """The spool's state so far (ingest.json): what a resumed run goes on from."""
        text = self.res.model_dump_json(indent=2).encode()
        atomic_write_bytes(self.dead_dir / "ingest.json", text)
        atomic_write_bytes(self.work / "ingest.json", text)

    def finish(self, flush_after_s: float | None, last: datetime | None = None
               ) -> IngestResult:
        """The end of input: a flush punctuation far enough ahead that every window closes
        (None: none, the windows open at the end stay open), and ingest.json. `last`: the
        last reading of every stream the query reads (default: this one's clock)."""
        res = self.res
        last = last or res.last_ts
        if last is not None and flush_after_s is not None:
            flush = last + timedelta(seconds=flush_after_s + self.allowed_lateness_s)
            write_part(spool_part(self.spool, res.spool_files, res.spool_format),
                       punctuation(self.stream, flush), SPOOL_MTIME + res.spool_files)
            self.finished = True
        self.save()
        return res


def read_clean_rows(spool_dir: Path | str) -> pa.Table:
    """Every clean row of a spool (punctuation removed): what the engines see."""
    tables = [read_spool_part(p) for p in list_spool(Path(spool_dir))]
    t = pa.concat_tables(tables)
    return t.filter(pc.equal(t.column(KIND), DATA)).drop_columns([KIND])
