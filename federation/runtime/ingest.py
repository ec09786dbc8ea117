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
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from federation.conventions import DATA, KIND, NEUTRAL, PUNCTUATION, REJECTED_CSV, SPOOL_MTIME, TICK
from federation.parts import arrow_schema, list_parts, write_part
from federation.runtime.validate import validate_table
from federation.streams import StreamDecl


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
    #: per input file, in order: its name, good rows and first event time (a spool without
    #: fast-forward has one spool file per input file, in the same order: `sub_spool`)
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
    n = len(tss)
    row = {c: [NEUTRAL[t]] * n for c, t in stream.columns.items()}
    row[stream.ts_column] = tss
    row[KIND] = [kind] * n
    return pa.table(row, schema=spool_schema(stream.columns))


def spool_schema(columns: Mapping[str, str]) -> pa.Schema:
    """The spool's schema: the stream's columns and the marker column `_kind`."""
    return arrow_schema(columns).append(pa.field(KIND, pa.int32()))


def _as_data(good: pa.Table) -> pa.Table:
    return good.append_column(KIND, pa.array([DATA] * good.num_rows, pa.int32()))


def prepare_input(
    data_dir: Path | str,
    work_dir: Path | str,
    stream: StreamDecl,
    *,
    allowed_lateness_s: float = 0.0,
    flush_after_s: float | None = 600.0,
    max_files: int | None = None,
    domains: Mapping[str, set] | None = None,
    progress: Callable[[int, int], None] | None = None,
    fast_forward_s: int = 0,
    fast_forward_batch: int = 1,
    tick_s: float | None = None,
    horizon_s: float = 3600.0,
    run_id: str | None = None,
) -> IngestResult:
    """Validate every event-second file of `data_dir` into `work_dir/spool` (see module doc).

    `fast_forward_s` > 0 merges the first that many event seconds into spool files of
    `fast_forward_batch` event seconds each (one micro-batch each: a warm-up that fills the
    windows in fewer batches); every later event second is a spool file of its own.
    Validation and dead letters are per input file either way, so the rows are the same.
    `flush_after_s=None` writes no flush file (the windows open at the end stay open).
    `tick_s` writes a tick row (id TICK) at every instant of that slide's grid from the
    first reading on, and one at each file's largest event time (`federation.instants`).
    `horizon_s`: the event-time horizon of `validate_table`. A file that cannot be read, or
    lacks a column of the stream, is quarantined (copied to the dead-letter directory with
    its reason) and the run goes on. Dead letters go to `work_dir/deadletter/<run_id>`, so
    a reused work directory keeps the letters of earlier runs.
    """
    from federation.instants import grid_floor, grid_points

    if fast_forward_batch < 1:
        raise ValueError(f"fast_forward_batch must be >= 1, got {fast_forward_batch}")
    work = Path(work_dir)
    run_id = run_id or datetime.now().strftime("run-%Y%m%d-%H%M%S-%f")
    spool, dead_dir = work / "spool", work / "deadletter" / run_id
    spool.mkdir(parents=True, exist_ok=True)
    for old in spool.glob("*.parquet"):
        old.unlink()
    dead_dir.mkdir(parents=True, exist_ok=True)
    data = Path(data_dir)
    if not data.is_dir():
        raise FileNotFoundError(f"data directory {data} does not exist")
    parts = list_parts(data)
    if not parts:
        raise FileNotFoundError(f"no part-*.parquet files in {data_dir}")
    if max_files is not None:
        parts = parts[:max_files]
    res = IngestResult(spool_dir=spool, deadletter_dir=dead_dir)
    _count_csv_rejects(data, dead_dir, res)
    max_ts = None
    tick_hi = None
    lateness = timedelta(seconds=allowed_lateness_s)
    ts_col = stream.ts_column
    pending: list[pa.Table] = []
    pending_files = 0
    for k, path in enumerate(parts):
        raw, why = _read_part(path, stream)
        if why is not None:
            _quarantine(path, dead_dir, why, res)
            raw = arrow_schema(stream.columns).empty_table()
        wm = None if max_ts is None else max_ts - lateness
        good, bad = validate_table(raw, stream, wm, domains, clock=max_ts, horizon_s=horizon_s)
        res.rows_in += raw.num_rows
        res.rows_ok += good.num_rows
        if bad:
            idx = pa.array([i for i, _ in bad])
            rows = raw.take(idx)
            dl = pa.table({
                "file": [path.name] * len(bad),
                "row": [i for i, _ in bad],
                "reason": [r for _, r in bad],
                "raw": [json.dumps(r, default=str) for r in rows.to_pylist()],
            })
            pq.write_table(dl, dead_dir / f"dead-{k:08d}.parquet")
            res.count_dead(reason_kind(r) for _, r in bad)
        ticks: list = []
        res.file_names.append(path.name)
        res.file_rows.append(good.num_rows)
        res.file_lo.append(None)
        if good.num_rows:
            hi = pc.max(good.column(ts_col)).as_py()
            lo = pc.min(good.column(ts_col)).as_py()
            res.file_lo[-1] = lo
            max_ts = hi if max_ts is None else max(max_ts, hi)
            res.first_ts = lo if res.first_ts is None else min(res.first_ts, lo)
            if tick_s:
                start = grid_floor(lo, tick_s)
                if tick_hi is not None and start <= tick_hi:
                    start = tick_hi + timedelta(microseconds=1)
                ticks = grid_points(start, max_ts, tick_s)
                tick_hi = ticks[-1] if ticks else tick_hi
                ticks.append(max_ts)
        pending.append(_as_data(good))
        pending_files += 1
        if ticks:
            pending.append(punctuation(stream, ticks, TICK))
        res.files += 1
        in_warmup = k < fast_forward_s
        if (not in_warmup or pending_files >= fast_forward_batch or k == fast_forward_s - 1
                or k == len(parts) - 1):
            out = pa.concat_tables(pending)
            if max_ts is not None:
                out = pa.concat_tables([out, punctuation(stream, max_ts)])
            write_part(spool / f"part-{res.spool_files:08d}.parquet", out,
                       SPOOL_MTIME + res.spool_files)
            res.spool_files += 1
            res.warmup_files += 1 if in_warmup else 0
            pending, pending_files = [], 0
        if progress:
            progress(k + 1, len(parts))
    res.last_ts = max_ts
    if max_ts is not None and flush_after_s is not None:
        flush = max_ts + timedelta(seconds=flush_after_s + allowed_lateness_s)
        write_part(spool / f"part-{res.spool_files:08d}.parquet", punctuation(stream, flush),
                   SPOOL_MTIME + res.spool_files)
    (dead_dir / "ingest.json").write_text(res.model_dump_json(indent=2))
    (work / "ingest.json").write_text(res.model_dump_json(indent=2))
    return res


def reason_kind(reason: str) -> str:
    """The reason without the row's own values, for counting."""
    return re.sub(r" -?[0-9]{4,}-[0-9]{2}-[0-9]{2}[ T][0-9:.]+", "", reason)


def _read_part(path: Path, stream: StreamDecl) -> tuple[pa.Table | None, str | None]:
    """A part file's table, or the reason it cannot be used (unreadable, wrong schema)."""
    try:
        if path.stat().st_size == 0:
            return None, "empty file (0 bytes)"
        t = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        return None, f"unreadable Parquet: {str(e).splitlines()[0][:200]}"
    missing = [c for c in stream.columns if c not in t.column_names]
    if missing:
        return None, (f"wrong schema: missing column(s) {', '.join(missing)} "
                      f"(has {', '.join(t.column_names)})")
    return t, None


def _quarantine(path: Path, dead_dir: Path, why: str, res: IngestResult) -> None:
    qdir = dead_dir / "quarantine"
    qdir.mkdir(exist_ok=True)
    import shutil

    shutil.copy2(path, qdir / path.name)
    (qdir / (path.name + ".reason.txt")).write_text(why + "\n")
    res.quarantined.append({"file": path.name, "reason": why})


def _count_csv_rejects(data: Path, dead_dir: Path, res: IngestResult) -> None:
    """Rows the CSV loader rejected (its `_rejected.csv`: line, raw, reason) count as dead
    letters of this run, with their line numbers."""
    path = data / REJECTED_CSV
    if not path.exists():
        return
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    import shutil

    shutil.copy2(path, dead_dir / REJECTED_CSV)
    res.rows_in += len(rows)
    res.count_dead("csv: " + r.get("reason", "?") for r in rows)


def read_clean_rows(spool_dir: Path | str) -> pa.Table:
    """Every clean row of a spool (punctuation removed): what the engines see."""
    tables = [pq.read_table(p) for p in list_parts(Path(spool_dir))]
    t = pa.concat_tables(tables)
    return t.filter(pc.equal(t.column(KIND), DATA)).drop_columns([KIND])


def sub_spool(whole: IngestResult, names: list[str], out: Path, stream: StreamDecl, *,
              warmup: int = 0, warmup_batch: int = 10,
              flush_after_s: float | None = None) -> IngestResult:
    """A spool over consecutive input files of an input ingested without fast-forward, for
    a run over part of it (an adaptive run's segment): no row is validated again. Their
    spool files are hard-linked (same content and mtime, the order Spark reads them in);
    the first `warmup` are merged into files of `warmup_batch` event seconds (a fast warm-up,
    as `prepare_input` does); a flush file follows the last one (the input's own when the
    last is the input's last). Dead letters stay counted in `whole`."""
    import os

    at = {n: i for i, n in enumerate(whole.file_names)}
    idx = [at[n] for n in names]
    if idx != list(range(idx[0], idx[0] + len(idx))):
        raise ValueError("sub_spool: the files are not consecutive input files")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.parquet"):
        old.unlink()

    def spool(i: int) -> Path:
        return whole.spool_dir / f"part-{i:08d}.parquet"

    n = 0
    warm = idx[:warmup]
    for g in range(0, len(warm), warmup_batch):
        group = warm[g:g + warmup_batch]
        write_part(out / f"part-{n:08d}.parquet",
                   pa.concat_tables(pq.read_table(spool(i)) for i in group),
                   SPOOL_MTIME + group[0])
        n += 1
    for i in idx[warmup:]:
        os.link(spool(i), out / f"part-{n:08d}.parquet")
        n += 1
    last = idx[-1]
    kinds = pq.read_table(spool(last), columns=[stream.ts_column, KIND])
    punct = kinds.filter(pc.equal(kinds.column(KIND), PUNCTUATION))
    hi = pc.max(punct.column(0)).as_py() if punct.num_rows else None
    if isinstance(hi, datetime) and hi.tzinfo is not None:
        hi = hi.replace(tzinfo=None)
    if last == len(whole.file_names) - 1 and spool(whole.spool_files).exists():
        os.link(spool(whole.spool_files), out / f"part-{n:08d}.parquet")
    elif hi is not None and flush_after_s is not None:
        write_part(out / f"part-{n:08d}.parquet",
                   punctuation(stream, hi + timedelta(seconds=flush_after_s)),
                   SPOOL_MTIME + last + 0.5)
    los = [whole.file_lo[i] for i in idx if whole.file_lo[i] is not None]
    rows = sum(whole.file_rows[i] for i in idx)
    return IngestResult(spool_dir=out, deadletter_dir=whole.deadletter_dir, files=len(idx),
                        rows_in=rows, rows_ok=rows, first_ts=min(los) if los else None,
                        last_ts=hi, spool_files=n, warmup_files=-(-len(warm) // warmup_batch),
                        file_names=list(names), file_rows=[whole.file_rows[i] for i in idx],
                        file_lo=[whole.file_lo[i] for i in idx])
