"""The re-entry spool: a DB-op's rows that SPE-ops of a later stage read, written as the
Parquet files of that stage's streaming source (docs/architecture.md, stages)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from federation.conventions import NEUTRAL, PUNCT, WT
from federation.parts import arrow_type, atomic_write_parquet
from federation.runtime.mig import tau_to_wt
from federation.runtime.stages import StagedPlan


class ReentrySpool:
    """Writes a DB-op's result (tagged `_wt`) and a punctuation row to the Parquet spool
    that the next stage reads as a streaming source."""

    def __init__(self, staged: StagedPlan, dirs: dict[str, Path]) -> None:
        self.staged = staged
        self.dirs = dirs

    def write(self, oid: str, key: tuple, out: pa.Table | None, done) -> None:
        """The rows of DB-op output `oid` (with `_tau`) and the punctuation `done`."""
        schema = self.staged.plan.logical.nodes[oid].schema
        cols = list(schema)
        parts = []
        if out is not None and out.num_rows:
            parts.append(pa.table({WT: tau_to_wt(out), **{c: out.column(c) for c in cols},
                                   PUNCT: pa.array([False] * out.num_rows)}))
        # punctuation: everything up to `done` is complete; non-null neutral values, as
        # Spark adds isnotnull(keys) below the watermark of joins
        parts.append(pa.table({WT: pa.array([done], pa.timestamp("us")),
                               **{c: pa.array([NEUTRAL[t]], arrow_type(t))
                                  for c, t in schema.items()},
                               PUNCT: pa.array([True])}))
        table = pa.concat_tables(parts, promote_options="permissive")
        path = self.dirs[oid] / f"part-{key[0]}-{key[1]:08d}.parquet"
        atomic_write_parquet(path, table)
