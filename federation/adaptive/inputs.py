"""What the watch reads of the input: its part files and their rates (Parquet metadata only,
no row read)."""


from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq


@dataclasses.dataclass(frozen=True)
class PartFile:
    path: Path
    start: dt.datetime  # the event second the file holds: [start, start + 1 s)
    rows: int


def part_files(data: str | Path, ts_column: str) -> list[PartFile]:
    """The part files of a data directory with their event second and row count, from the
    Parquet metadata (row-group statistics of the event-time column). Files that cannot be
    read are left out (the run's ingest quarantines them)."""
    out = []
    for p in sorted(Path(data).glob("part-*.parquet")):
        try:
            md = pq.read_metadata(p)
        except Exception:  # noqa: BLE001, S112 - an unreadable file: quarantined by the run
            continue
        if md.num_rows == 0:
            continue
        idx = md.schema.to_arrow_schema().get_field_index(ts_column)
        lo = None
        for g in range(md.num_row_groups):
            st = md.row_group(g).column(idx).statistics if idx >= 0 else None
            if st is None or not st.has_min_max:
                lo = None
                break
            lo = st.min if lo is None else min(lo, st.min)
        if lo is None:
            col = pq.read_table(p, columns=[ts_column]).column(0)
            lo = pc.min(col).as_py()
        if isinstance(lo, dt.datetime) and lo.tzinfo is not None:
            lo = lo.astimezone(dt.timezone.utc).replace(tzinfo=None)
        out.append(PartFile(p, lo.replace(microsecond=0), md.num_rows))
    return out


def measured_rates(files: Sequence[PartFile], points: Sequence[dt.datetime],
                   window_s: float) -> list[float]:
    """Tuples per second in [T - window_s, T) for each decision point T."""
    w = dt.timedelta(seconds=window_s)
    return [sum(f.rows for f in files if t - w <= f.start < t) / window_s for t in points]


class FileSpans:
    """What the watch asks of an adaptive run's input (streams.AdaptiveInput, replayed;
    live.LiveInput): each stream's input files by event second (`files`)."""

    files: dict[str, list[PartFile]]

    def between(self, lo: dt.datetime | None, hi: dt.datetime | None
                ) -> dict[str, list[PartFile]]:
        """Each stream's files of the event seconds in [lo, hi) (None: unbounded)."""
        return {n: [f for f in fs if (lo is None or f.start >= lo)
                    and (hi is None or f.start < hi)] for n, fs in self.files.items()}

    def rates(self, lo: dt.datetime, hi: dt.datetime) -> dict[str, float]:
        """Each stream's tuples per second in [lo, hi)."""
        s = (hi - lo).total_seconds()
        return {n: sum(f.rows for f in fs) / s for n, fs in self.between(lo, hi).items()}
