"""Cost profiles: every unit cost of one machine, units in the field names (docs/cost-model.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_PROFILE_PATH = Path(__file__).parent / "profiles" / "default.json"
#: Where `python -m benchmarks.calibrate` writes a measured profile and where the optimizer looks first.
USER_PROFILE_PATH = Path.home() / ".config" / "fedq" / "profile.json"

R2R_KINDS = ("select", "project", "join", "aggregate")


class PerKind(BaseModel):
    """One unit cost per R2R operator kind."""

    model_config = ConfigDict(extra="forbid")

    select: float = Field(ge=0)
    project: float = Field(ge=0)
    join: float = Field(ge=0)
    aggregate: float = Field(ge=0)

    def of(self, kind: str) -> float:
        return float(getattr(self, kind))


class CostProfile(BaseModel):
    """Unit costs for the SPE (Spark) and the DB (DuckDB), in seconds of one core.

    The paper's model (section 5) charges per input tuple only; the `*_per_slide_*`,
    `*_per_state_*` and `capacity_cores` fields extend it (docs/cost-model.md).
    Setting them to 0 / None gives the paper's form back.

    Example:
        >>> p = load_profile()
        >>> p.spe_s_per_row.aggregate >= 0
        True
    """

    model_config = ConfigDict(extra="forbid")

    name: str = "default"
    measured: bool = Field(
        False, description="true when `python -m benchmarks.calibrate` measured it on this machine"
    )
    notes: str = ""
    # -- SPE (Spark Structured Streaming) -------------------------------------------------
    spe_s_per_row: PerKind = Field(description="per input row of each SPE-op kind (eq. 4)")
    spe_s_per_window_copy: float = Field(
        ge=0, description="per copy of a row made by Spark's sliding-window expansion (range/slide)"
    )
    spe_s_per_state_group_window: float = Field(
        0.0, ge=0, description="per slide, per (group x open window) kept in Spark state"
    )
    spe_s_per_slide: float = Field(
        0.0, ge=0, description="fixed cost of one micro-batch (one slide) of the Spark query"
    )
    spe_s_per_stateless_op_slide: float = Field(
        0.0, ge=0, description="fixed cost per slide of each stateless SPE-op (select, project)",
    )
    spe_s_per_stateful_op_slide: float = Field(
        0.0, ge=0,
        description="fixed cost per slide of each stateful SPE-op (state store commit per batch)",
    )
    # -- the feed of a stage without SPE-ops (costmodel/feed.py) --------------------------
    feed: Literal["direct", "spe"] = Field(
        "direct", description="how a stage whose operators are all DB-ops gets its "
        "micro-batches: read by fedq (direct) or forwarded by a Spark query (spe)"
    )
    direct_s_per_slide: float = Field(
        0.0, ge=0, description="fixed cost of one micro-batch of the direct feed"
    )
    direct_s_per_row: float = Field(
        0.0, ge=0, description="per stream row the direct feed reads from the spool"
    )
    # -- DB (DuckDB behind a MIG) --------------------------------------------------------
    db_transfer_in_s_per_row: float = Field(ge=0, description="Arrow from Spark into DuckDB")
    db_transfer_out_s_per_row: float = Field(ge=0, description="Arrow from DuckDB back out")
    db_window_maintain_s_per_row: float = Field(
        0.0, ge=0, description="insert and later delete of one window row in DuckDB"
    )
    db_sql_fixed_s: float = Field(ge=0, description="fixed cost of one SQL execution per slide")
    db_scan_s_per_row: PerKind = Field(description="per input row scanned, per operator kind")
    db_fold_s_per_row: float = Field(
        0.0, ge=0, description="folding one window row into its slice's partial aggregates"
    )
    db_slice_s_per_row: float | None = Field(
        None, ge=0,
        description="combining one slice row per slide (None: the aggregate's scan cost)",
    )
    # -- Python functions (federation.udf); the function's own time is measured per UDF --
    spe_udf_s_per_row: float = Field(
        0.0, ge=0, description="per row and call of a Python function in Spark (the Arrow "
        "round trip to its Python worker), besides the function's own time"
    )
    db_udf_s_per_row: float = Field(
        0.0, ge=0, description="per row and call of a Python function in DuckDB (the Arrow "
        "hand-over in the process), besides the function's own time"
    )
    # -- state memory (issue 25, costmodel/memory.py) -------------------------------------
    spe_state_bytes_per_row: float = Field(
        217.0, ge=0, description="heap bytes of one Spark state-store row besides its columns "
        "(fitted at steady state: benchmarks/results/memory_grid.json, memory_full_spe.json)"
    )
    db_compressed_bytes_per_value: float = Field(
        1.4, gt=0, description="bytes of one value of a DuckDB table after a CHECKPOINT "
        "compressed it (fitted: benchmarks/results/memory_db.json, memory_db_full.json, "
        "memory_grid.json, memory_full.json)"
    )
    state_bytes_per_column: float = Field(8.0, ge=0, description="bytes per column of a kept "
                                          "Spark state row")
    spe_heap_per_state_byte: float = Field(
        3.8, ge=1, description="bytes of Spark's heap one predicted byte of state "
        "takes at a micro-batch's peak: the store's versions in memory and the "
        "batch's own rows (the largest sampled peak: benchmarks/results/README.md, 'Spark's "
        "capacity as what its heap holds')"
    )
    spe_memory_bytes: float | None = Field(
        None, gt=0, description="Spark state capacity (None: the driver heap beside Spark's "
        "reserved memory over spe_heap_per_state_byte)"
    )
    db_memory_bytes: float | None = Field(
        None, gt=0, description="DuckDB capacity of all DB-ops (None: half the machine's RAM)"
    )
    # -- the SPE's cores (issue 25): Spark's data-parallel work spreads over them ------------
    spe_profile_cores: float = Field(
        2.0, gt=0, description="cores Spark had when the spe_s_* costs were measured (local[2])"
    )
    spe_cores: float | None = Field(
        None, gt=0,
        description="cores Spark has for this plan (a cluster's executors; None: as measured)",
    )
    # -- capacity (extension): all operators share these cores ----------------------------
    capacity_cores: float | None = Field(
        None, gt=0, description="if set, C_b is at least C_u / cores (shared cores)"
    )

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n")
        return path


def spe_row_scale(p: CostProfile) -> float:
    """Factor on Spark's per-row costs for the cores Spark has: its per-row work is
    partitioned by key over them (shuffle partitions = cores), its per-micro-batch fixed
    costs are not.

    Example:
        >>> spe_row_scale(load_profile().model_copy(update={"spe_cores": 8}))
        0.25
    """
    return p.spe_profile_cores / p.spe_cores if p.spe_cores else 1.0


def load_profile(path: Path | str | None = None) -> CostProfile:
    """Load a profile: the given path, else the user's calibrated one, else the default."""
    if path is None:
        path = USER_PROFILE_PATH if USER_PROFILE_PATH.exists() else DEFAULT_PROFILE_PATH
    data = json.loads(Path(path).read_text())
    return CostProfile.model_validate(data)


def paper_form(profile: CostProfile) -> CostProfile:
    """The same profile without the extension terms: the paper's per-tuple model."""
    return profile.model_copy(
        update={
            "spe_s_per_state_group_window": 0.0,
            "spe_s_per_slide": 0.0,
            "spe_s_per_stateful_op_slide": 0.0,
            "spe_s_per_stateless_op_slide": 0.0,
            "capacity_cores": None,
        }
    )
