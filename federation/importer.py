"""Any stream in: CSV or Parquet files with a declared schema become a data directory that
`fedq run` reads (one Parquet file per event second, `part-<second>.parquet`, sorted by
event time), with the stream's declaration and measured statistics in `_stream.json`.

`fedq import SRC... --schema S --out DIR` reads the files with DuckDB: a row that does not
fit the schema (wrong column count, a value that does not cast, a missing event time) is
skipped and written to `_rejected.csv` with its file, line and reason; the run's ingest
counts those with its other dead letters. `fedq stats DIR` measures what the optimizer needs
(rate, distinct values per column, group counts per key set, value fractions) from the data.

Example:
    >>> parse_schema("ts:TIMESTAMP, room:VARCHAR, temp:DOUBLE")
    {'ts': 'TIMESTAMP', 'room': 'VARCHAR', 'temp': 'DOUBLE'}
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel

from federation.conventions import REJECTED_CSV, TYPES, US_PER_S
from federation.errors import FedqError
from federation.parts import arrow_schema
from federation.streams import STREAM_FILE, StreamDecl, StreamStats

#: columns with at most this many values get value fractions
MAX_FRACTION_VALUES = 20
#: key sets of up to this many columns get group counts
MAX_KEY_SET = 3


class StreamImportError(FedqError, ValueError):
    """The import cannot start (bad schema, no files); names the option."""


class ImportSummary(BaseModel):
    rows: int
    files: int
    rejected: int
    first_ts: str | None
    last_ts: str | None
    out: str


def parse_schema(text: str) -> dict[str, str]:
    """`name:TYPE, ...` as an ordered mapping (types as `federation.streams` knows them)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, typ = item.partition(":")
        name, typ = name.strip(), typ.strip().upper()
        if not sep or not name or not typ:
            raise StreamImportError(f"--schema: want name:TYPE, got {item.strip()!r}")
        if typ not in TYPES:
            raise StreamImportError(f"--schema: column {name!r}: unsupported type {typ!r} "
                               f"(one of {', '.join(TYPES)})")
        if name in out:
            raise StreamImportError(f"--schema: column {name!r} named twice")
        out[name] = typ
    if not out:
        raise StreamImportError("--schema: no columns")
    return out


def read_declaration(schema: str, name: str | None, ts: str | None) -> dict:
    """The declaration from `--schema` (a JSON file with name/schema/ts_column, or
    `name:TYPE,...`), `--name` and `--ts`; statistics are measured later."""
    path = Path(schema)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise StreamImportError(f"--schema: {path} is not a file")
        try:
            d = json.loads(path.read_text())
        except ValueError as e:
            raise StreamImportError(f"--schema: {path}: not JSON ({e})") from None
        cols = d.get("schema")
        if not isinstance(cols, dict) or not cols:
            raise StreamImportError(f"--schema: {path}: needs \"schema\": {{column: type}}")
        cols = parse_schema(",".join(f"{k}:{v}" for k, v in cols.items()))
        name = name or d.get("name")
        ts = ts or d.get("ts_column")
        domains = d.get("domains", {})
    else:
        cols, domains = parse_schema(schema), {}
    ts = ts or next((c for c, t in cols.items() if t == "TIMESTAMP"), None)
    if ts is None or cols.get(ts) != "TIMESTAMP":
        raise StreamImportError(f"--ts: the event-time column must be a TIMESTAMP column of the "
                           f"schema (got {ts!r})")
    name = name or "stream"
    return {"name": name, "schema": cols, "ts_column": ts, "domains": domains}


def import_stream(sources: list[Path], out: Path, decl: dict, *, header: bool = True,
                  delim: str = ",", progress: Callable[[str, int, int], None] | None = None
                  ) -> ImportSummary:
    """Read CSV/Parquet `sources` (files or directories) into `out` (module doc)."""
    files = _expand(sources)
    if not files:
        raise StreamImportError("no .csv or .parquet files in " + ", ".join(map(str, sources)))
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("part-*.parquet"):
        old.unlink()
    cols, ts = decl["schema"], decl["ts_column"]
    rejected: list[tuple[str, object, str, str]] = []
    parts = []
    for i, f in enumerate(files):
        if progress:
            progress("read", i, len(files))
        if f.suffix.lower() == ".parquet":
            t = _read_parquet(f, cols, rejected)
        else:
            t = _read_csv(f, cols, header, delim, rejected)
        if t is not None:
            parts.append(t)
    if progress:
        progress("read", len(files), len(files))
    schema = arrow_schema(cols)
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    missing_ts = table.column(ts).is_null()
    n_missing = pc.sum(missing_ts).as_py() or 0
    rejected.extend(("", "", "", f"missing event time {ts}") for _ in range(n_missing))
    table = table.filter(pc.invert(missing_ts))
    table = table.take(pc.sort_indices(table, sort_keys=[(ts, "ascending")]))
    rows = table.num_rows
    written = 0
    first = last = None
    if rows:
        secs = pc.cast(table.column(ts), pa.int64()).to_numpy() // US_PER_S
        first, last = table.column(ts)[0].as_py(), table.column(ts)[-1].as_py()
        sec0, total = int(secs[0]), int(secs[-1] - secs[0] + 1)
        bounds = np.flatnonzero(np.diff(secs)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [rows]])
        for a, b in zip(starts, ends):
            s = int(secs[a]) - sec0
            pq.write_table(table.slice(a, b - a), out / f"part-{s:08d}.parquet")
            written += 1
            if progress:
                progress("write", s + 1, total)
    _write_rejected(out, rejected)
    d = dict(decl)
    stats = stats_of(table, StreamDecl(**d, stats=StreamStats(rate_tps=1.0))) if rows else \
        StreamStats(rate_tps=1.0)
    d["stats"] = stats.model_dump()
    (out / STREAM_FILE).write_text(json.dumps(d, indent=2, default=str))
    return ImportSummary(rows=rows, files=written, rejected=len(rejected),
                         first_ts=None if first is None else str(first),
                         last_ts=None if last is None else str(last), out=str(out))


def _expand(sources: list[Path]) -> list[Path]:
    files: list[Path] = []
    for s in sources:
        if s.is_dir():
            files += sorted(p for p in s.iterdir()
                            if p.suffix.lower() in (".csv", ".parquet") and
                            not p.name.startswith(("_", ".")))
        elif s.is_file():
            files.append(s)
        else:
            raise StreamImportError(f"{s}: no such file or directory")
    return files


def _duck(t: str) -> str:
    return "INTEGER" if t == "INT" else t


def _read_csv(f: Path, cols: dict[str, str], header: bool, delim: str,
              rejected: list) -> pa.Table | None:
    """The file's good rows; every bad one into `rejected` (file, line, raw, reason)."""
    from db.files import read_csv_checked

    try:
        t, bad = read_csv_checked(f, {c: _duck(ty) for c, ty in cols.items()}, header, delim)
    except Exception as e:  # noqa: BLE001 - an unreadable file costs only itself
        rejected.append((f.name, "", "", f"unreadable CSV: {str(e).splitlines()[0][:200]}"))
        return None
    rejected.extend((f.name, line, raw, why) for line, raw, why in bad)
    return t.cast(arrow_schema(cols))


def _read_parquet(f: Path, cols: dict[str, str], rejected: list) -> pa.Table | None:
    from db.files import cast_checked

    try:
        t = pq.read_table(f)
    except (OSError, pa.ArrowException) as e:
        rejected.append((f.name, "", "", f"unreadable Parquet: {str(e).splitlines()[0][:200]}"))
        return None
    missing = [c for c in cols if c not in t.column_names]
    if missing:
        rejected.append((f.name, "", "", f"missing column(s) {', '.join(missing)}"))
        return None
    good, n_bad = cast_checked(t, {c: _duck(ty) for c, ty in cols.items()})
    rejected.extend((f.name, "", "", "a value does not cast to the schema's type")
                    for _ in range(n_bad))
    return good.cast(arrow_schema(cols))


def _write_rejected(out: Path, rows: list) -> None:
    path = out / REJECTED_CSV
    if not rows:
        path.unlink(missing_ok=True)
        return
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["file", "line", "raw", "reason"])
        w.writerows(rows)


def measure_stats(data_dir: Path, decl: StreamDecl, max_files: int | None = None
                  ) -> StreamStats:
    """The stream's statistics measured from a data directory's part files (all of them,
    or the first `max_files`): rate, distinct values per column (not DOUBLE or the event
    time), group counts of every key set of up to MAX_KEY_SET such columns, and value
    fractions of columns with at most MAX_FRACTION_VALUES values."""
    files = sorted(Path(data_dir).glob("part-*.parquet"))[:max_files]
    if not files:
        raise StreamImportError(f"no part-*.parquet files in {data_dir}")
    return stats_of(pa.concat_tables(pq.read_table(f, columns=list(decl.columns))
                                     for f in files), decl)


def stats_of(t: pa.Table, decl: StreamDecl) -> StreamStats:
    """The statistics of `measure_stats`, of rows in memory."""
    ts = decl.ts_column
    n = t.num_rows
    seconds = 1.0
    if n:
        lo, hi = pc.min(t.column(ts)).as_py(), pc.max(t.column(ts)).as_py()
        seconds = max(1.0, math.floor(hi.timestamp()) - math.floor(lo.timestamp()) + 1.0)
    keys = [c for c, typ in decl.columns.items() if c != ts and typ != "DOUBLE"]
    distinct = {c: pc.count_distinct(t.column(c)).as_py() for c in keys}
    # key-like columns: not unique per row (an id), at least 2 values
    group_cols = [c for c in keys if 1 <= distinct[c] < max(2, n // 2)]
    groups = {}
    for k in range(1, MAX_KEY_SET + 1):
        for combo in itertools.combinations(sorted(group_cols), k):
            groups[",".join(combo)] = t.group_by(list(combo)).aggregate([]).num_rows
    fractions = {}
    for c in keys:
        if 0 < distinct[c] <= MAX_FRACTION_VALUES:
            vc = pc.value_counts(t.column(c)).to_pylist()
            fractions[c] = {str(x["values"]): x["counts"] / n for x in vc}
    return StreamStats(rate_tps=max(n / seconds, 1e-9),
                       distinct={c: v for c, v in distinct.items() if v > 0},
                       groups={k: v for k, v in groups.items() if v > 0},
                       value_fractions=fractions)


def stats_table(stats: StreamStats) -> str:
    """The statistics as `fedq stats` prints them."""
    lines = [f"rate            {stats.rate_tps:,.1f} tuples/s"]
    for c, v in stats.distinct.items():
        lines.append(f"distinct        {c:<20} {v:,}")
    for k, v in stats.groups.items():
        lines.append(f"groups          {k:<20} {v:,}")
    for c, fr in stats.value_fractions.items():
        shown = ", ".join(f"{v}: {f:.3f}" for v, f in sorted(fr.items())[:8])
        more = f", ... ({len(fr)} values)" if len(fr) > 8 else ""
        lines.append(f"fractions       {c:<20} {shown}{more}")
    return "\n".join(lines)
