"""The spool of one segment of an adaptive run: consecutive input files of an input
ingested once, linked, not validated again (federation/adaptive/migrate.py)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.conventions import DATA, KIND, PUNCTUATION, SPOOL_MTIME, TICK
from federation.parts import write_part
from federation.runtime.ingest import IngestResult, punctuation
from federation.streams import StreamDecl


def tick_before(stream: StreamDecl, at: datetime) -> pa.Table:
    """A spool row: a tick just before instant `at`, for a segment that starts at `at` with
    its state moved. Spark's instants (a global aggregate's rows where its input is empty,
    spe/pipeline.instants_relation) come from ticks, instant `at` from one before it, which
    the input files from `at` on do not hold (it is the file before the cut's). It makes no
    instant before `at`."""
    return punctuation(stream, at - timedelta(microseconds=1), TICK)


def with_tick_before(t: pa.Table, stream: StreamDecl, at: datetime) -> pa.Table:
    """Spool rows `t` (a replayed segment's first file) with `tick_before(stream, at)`."""
    return with_rows(t, tick_before(stream, at))


def from_instant(t: pa.Table, stream: StreamDecl, at: datetime) -> tuple[pa.Table, int]:
    """Spool rows `t` (the file a moved segment's instant `at` falls in) from `at` on, and
    how many readings were left out: the old placement kept those (its MIGs keep no row
    from `at` on, mig.stop_before), the new one takes them over as moved state."""
    ts = t.column(stream.ts_column)
    keep = pc.greater_equal(ts, pa.scalar(at, ts.type))
    left = t.filter(pc.and_(pc.invert(keep), pc.equal(t.column(KIND), DATA)))
    return t.filter(keep), left.num_rows


def with_rows(t: pa.Table, extra: pa.Table) -> pa.Table:
    """Spool rows `t` and then `extra` (same columns), keeping `t`'s file metadata."""
    meta = t.schema.metadata
    out = pa.concat_tables([t.replace_schema_metadata(None), extra.cast(
        t.schema.remove_metadata())])
    return out.replace_schema_metadata(meta)


def cut_at(t: pa.Table, stream: StreamDecl, at: datetime) -> pa.Table:
    """Spool rows `t` (the file of a segment's input that reaches past its end `at`: its
    migration instant and tail) without the rows from `at` on, and a punctuation at `at`:
    its clock still reaches `at` (the segment then stops in that micro-batch), but it does
    not process the next placement's readings."""
    ts = t.column(stream.ts_column)
    kept = t.filter(pc.less(ts, pa.scalar(at, ts.type)))
    return with_rows(kept, punctuation(stream, at))


def sub_spool(whole: IngestResult, names: list[str], out: Path, stream: StreamDecl, *,
              warmup: int = 0, warmup_batch: int = 10,
              flush_after_s: float | None = None,
              start_at: datetime | None = None) -> IngestResult:
    """A spool over consecutive input files of an input ingested without fast-forward, for
    a run over part of it (an adaptive run's segment): no row is validated again. Their
    spool files are hard-linked (same content and mtime, the order Spark reads them in);
    the first `warmup` are merged into files of `warmup_batch` event seconds (a fast warm-up,
    as `prepare_input` does); a flush file follows the last one (the input's own when the
    last is the input's last). Dead letters stay counted in `whole`. `start_at`: the
    instant a segment whose state is moved starts at (its first file is the one the instant
    falls in): that file is copied from the instant on (`from_instant`) with a tick before
    it (`with_tick_before`)."""
    at = {n: i for i, n in enumerate(whole.file_names)}
    idx = [at[n] for n in names]
    if idx != list(range(idx[0], idx[0] + len(idx))):
        raise ValueError("sub_spool: the files are not consecutive input files")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.parquet"):
        old.unlink()

    def spool(i: int) -> Path:
        return whole.spool_dir / f"part-{i:08d}.parquet"

    n, dropped = 0, 0
    warm = idx[:warmup]
    for g in range(0, len(warm), warmup_batch):
        group = warm[g:g + warmup_batch]
        write_part(out / f"part-{n:08d}.parquet",
                   pa.concat_tables(pq.read_table(spool(i)) for i in group),
                   SPOOL_MTIME + group[0], spool=True)
        n += 1
    for i in idx[warmup:]:
        if n == 0 and start_at is not None:
            t, dropped = from_instant(pq.read_table(spool(i)), stream, start_at)
            write_part(out / f"part-{n:08d}.parquet", with_tick_before(t, stream, start_at),
                       spool(i).stat().st_mtime, spool=True)
        else:
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
    rows = sum(whole.file_rows[i] for i in idx) - dropped
    first = min(los) if los else None
    if first is not None and start_at is not None:
        first = max(first, start_at)
    return IngestResult(spool_dir=out, deadletter_dir=whole.deadletter_dir, files=len(idx),
                        rows_in=rows, rows_ok=rows, first_ts=first,
                        last_ts=hi, spool_files=n, warmup_files=-(-len(warm) // warmup_batch),
                        file_names=list(names), file_rows=[whole.file_rows[i] for i in idx],
                        file_lo=[whole.file_lo[i] for i in idx])
