"""Parquet sinks (federation/runtime/sinks.py): the whole result of a query as one file,
written when the run ends, or a directory of parts, one per micro-batch, as they are
computed (a following run's directory output)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from federation.errors import OptionError
from federation.parts import atomic_write_parquet

MANIFEST = "_manifest.jsonl"


def open_sink(output: Path, ctx):
    """The Parquet sink `output` names for the query of `ctx` (sinks.sink_kind)."""
    output = Path(output)
    if ctx.follow and output.suffix != ".parquet":
        out = output / ctx.query if ctx.named else output
        _claim_directory(out, ctx.run_id, ctx.replace)
        return ParquetDirectorySink(out)
    if ctx.named:
        return ParquetFileSink(output / f"{ctx.query}.parquet")
    return ParquetFileSink(output if output.suffix == ".parquet" else output / "results.parquet")


class ParquetFileSink:
    """The query's whole result as one Parquet file (`tau` first, sorted by it), written
    atomically when the run has computed its last instant (`end`): a run that fails
    writes nothing, a resumed one writes it whole. Its rows wait in the run's result parts
    (recovery.py) until then: `put` keeps nothing."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.where = f"Parquet file {self.path}"
        self.written: Path | None = None

    def put(self, key: tuple[int, int], rows: pa.Table, query: str = "") -> None:
        pass

    def end(self, query: str, result) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)  # as Spark's writers do
        atomic_write_parquet(self.path, result())  # whole or not at all
        self.written = self.path

    def close(self) -> None:
        pass


class ParquetDirectorySink:
    """A directory of Parquet parts, one per micro-batch with rows (`part-<stage>-<batch>`,
    written atomically: a reader never sees half a part), and `_manifest.jsonl`, one line per
    part in the order they were written (file, rows, first and last instant). A replayed
    batch rewrites its part with the same rows and its manifest line is not repeated."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.where = f"Parquet directory {self.dir}"  # how errors name it (sink_label)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest = self.dir / MANIFEST
        self.listed = {e["file"] for e in read_manifest(self.dir)}

    def put(self, key: tuple[int, int], rows: pa.Table, query: str = "") -> None:
        if not rows.num_rows:
            return
        name = f"part-{key[0]}-{key[1]:09d}.parquet"
        atomic_write_parquet(self.dir / name, rows)
        if name in self.listed:
            return
        taus = rows.column("tau")
        line = json.dumps({"file": name, "rows": rows.num_rows, "first_tau": str(taus[0]),
                           "last_tau": str(taus[-1])})
        with open(self.manifest, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.listed.add(name)

    def close(self) -> None:
        pass


def read_manifest(directory: Path) -> list[dict]:
    """The parts of a Parquet directory sink, in the order they were written (a line torn
    by a crash is ignored: its part is listed again when its batch is replayed)."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        return []
    out, seen = [], set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e["file"] not in seen:
            seen.add(e["file"])
            out.append(e)
    return out


def read_parquet_sink(directory: Path) -> pa.Table:
    """Every row of a Parquet directory sink, sorted by `tau`."""
    parts = [pq.read_table(Path(directory) / e["file"]) for e in read_manifest(directory)]
    return pa.concat_tables(parts).sort_by("tau") if parts else pa.table({})


def _claim_directory(out: Path, rid: str, replace: bool) -> None:
    """A following run's directory is its own: another run's is replaced only if asked."""
    owner = out / "_run"
    if owner.exists() and owner.read_text().strip() != rid:
        if not replace:
            raise OptionError("output", f"{out} holds the results of another run; pass "
                              "--overwrite to replace them, or name another directory")
        shutil.rmtree(out)
    elif out.exists() and not owner.exists() and any(out.iterdir()) and not replace:
        raise OptionError("output", f"{out} is not empty; pass --overwrite to replace it")
    elif out.exists() and not owner.exists() and replace:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    owner.write_text(rid + "\n")
