"""Predicted state memory of a physical plan, per engine (issue 25; docs/cost-model.md,
"Memory").

From the same source-driven sizes as the time costs (eqs 1-3, costmodel/sizes.py):

* **Spark** keeps, per stateful SPE-op, the rows of its state store:
  - an aggregate over window rows (panes, spe/translate.py): one row per (group with rows
    in the window) x open window, min(groups, rows per window) x range/slide, plus the
    groups of the open pane;
  - an aggregate over a relation: its groups of the instant in flight;
  - a join of two relations: both sides of the instant in flight;
  - a join of window rows with a relation (the time-interval join): the rows of a window
    range once, and the relation's rows of range/slide instants;
  - a join whose sides are both window rows: each side's rows in every window holding them.
  Selections, projections and joins with a database table keep nothing.
* **DuckDB** keeps, per DB-op, the window rows it reads as rows (the window's size after
  the selections folded in, its kept columns), the slice rows of its sliced aggregates
  (fine slices for the whole range, sealed coarse ones beside them), one instant of each
  relation input and database tables whole.

Spark's bytes: a fixed overhead per state row plus 8 bytes per column (profile fields
`spe_state_bytes_per_row`, `state_bytes_per_column`), fitted to Spark's `memoryUsedBytes`.
DuckDB's bytes follow its storage, as `duckdb_memory()` counts them: at each CHECKPOINT
(every DB_CHECKPOINT_SLIDES slides, db/store.py) a table's rows are compressed
(`db_compressed_bytes_per_value`, fitted) into blocks of 256 KiB that its columns share;
the rows appended until the next CHECKPOINT are held uncompressed, deleted ones included,
each value at its type's width in a segment of each column's own (`segment_bytes`). The
prediction is the peak, just before a CHECKPOINT. `python -m benchmarks.memory` measures
both engines against it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from costmodel.profile import CostProfile
from costmodel.sizes import NodeSize, SourceDrivenSizes, key_groups
from federation.conventions import (
    DB_CHECKPOINT_SLIDES,
    DRIVER_MEMORY,
    DUCKDB_VALUE_BYTES,
    US_PER_S,
    Lowering,
)

#: the rows each operator class keeps in Spark's state store as an SPE-op
SPE_STATE = Lowering("Spark state (memory)", ("operator",))

#: the heap Spark reserves for itself (its RESERVED_SYSTEM_MEMORY_BYTES)
SPARK_RESERVED = 300 * 2**20
#: DuckDB's storage block: the unit its tables' column segments are allocated in
DB_BLOCK = 262_144
#: rows of a DuckDB row group: each appended one holds a block of its own until a CHECKPOINT
DB_ROW_GROUP = 122_880


@dataclass(frozen=True)
class State:
    """The state one operator keeps: rows and bytes."""

    rows: float
    bytes: float


@dataclass(frozen=True)
class PlanMemory:
    """Predicted state per SPE-op and per DB-op, the engines' totals and capacities."""

    spe: dict[str, State] = field(default_factory=dict)
    db: dict[str, State] = field(default_factory=dict)
    spe_capacity: float = math.inf
    db_capacity: float = math.inf
    #: why the model could not size the plan (`checked_memory`); then nothing is known to
    #: exceed, and explain says the prediction is unavailable
    unavailable: str | None = None

    @property
    def spe_bytes(self) -> float:
        return sum(s.bytes for s in self.spe.values())

    @property
    def db_bytes(self) -> float:
        return sum(s.bytes for s in self.db.values())

    def exceeded(self) -> list[str]:
        """What does not fit, one phrase per engine (empty: the plan is qualified)."""
        out = []
        if self.spe_bytes > self.spe_capacity:
            out.append(f"Spark state {mib(self.spe_bytes)} > {mib(self.spe_capacity)}")
        if self.db_bytes > self.db_capacity:
            out.append(f"DuckDB state {mib(self.db_bytes)} > {mib(self.db_capacity)}")
        return out

    @property
    def fits(self) -> bool:
        return not self.exceeded()


def mib(b: float) -> str:
    return "unbounded" if math.isinf(b) else f"{b / 2**20:,.0f} MiB"


def spe_state_rows(node, size: NodeSize, kids: list[NodeSize]) -> float:
    """Rows one SPE-op keeps in Spark's state store (module doc)."""
    return SPE_STATE(node, size, kids)


@SPE_STATE.register("Select", "Project", "Union")
def _stateless(node, size: NodeSize, kids: list[NodeSize]) -> float:
    """None, but where a selection or projection reads a session window's readings as the
    sessions closing at each instant: Spark's session state then holds the open sessions'
    readings (spe/sessions.py, `session_rows`), what the DB holds of them."""
    k = kids[0]
    return k.size if k.row_level and not size.row_level and node.kind != "union" else 0.0


@SPE_STATE.register("Aggregate")
def _aggregate(node, size: NodeSize, kids: list[NodeSize]) -> float:
    (k,) = kids
    groups = max(size.groups, 1.0)
    # COUNT(DISTINCT) keeps each group's set of values: at most one entry per input row
    sets = not node.mergeable
    if not k.row_level:
        return max(k.size, 1.0) if sets else groups
    slide = 1.0 / max(size.l, 1e-12)
    rows, pane = max(k.rate * slide * k.copies, 1.0), max(k.rate * slide, 1.0)
    per_window = rows if sets else min(groups, rows)
    per_pane = pane if sets else min(groups, pane)
    return per_window * k.copies + (per_pane if k.copies > 1 else 0.0)


@SPE_STATE.register("RowNumber")
def _row_number(node, size: NodeSize, kids: list[NodeSize]) -> float:
    """Each open instant's rows, collected per partition (as COUNT(DISTINCT)'s sets)."""
    (k,) = kids
    if not k.row_level:
        return max(k.size, 1.0)
    return max(k.rate / max(size.l, 1e-12), 1.0) * k.copies * k.copies


@SPE_STATE.register("Join")
def _join(node, size: NodeSize, kids: list[NodeSize]) -> float:
    if any(k.row_level is False and k.rate == 0.0 for k in kids):
        return 0.0  # a database table: Spark's stream-static join keeps no state
    rows = [k for k in kids if k.row_level]
    rels = [k for k in kids if not k.row_level]
    if len(rows) == 1 and node.keys and node.how == "inner":  # the time-interval join
        return rows[0].size + rels[0].size * rows[0].copies
    return sum(k.size * (k.copies if k.row_level else 1.0) for k in kids)


@dataclass(frozen=True)
class Table:
    """One table a DB-op keeps: its rows after a CHECKPOINT, the rows appended until the
    next one (per DB_CHECKPOINT_SLIDES slides) and its column types."""

    rows: float
    appended: float
    types: tuple[str, ...]
    row_groups: bool = True  # False: the child values of another table's LIST column

    def bytes(self, p: CostProfile) -> float:
        """DuckDB's memory for it just before a CHECKPOINT (module doc): the kept rows
        compressed; the appended ones at their type's width in a segment of each column's
        own (`segment_bytes`), and a block per row group. Unbounded (inf) when its rows
        are: a tuple window partitioned by a column of unknown distinct values."""
        if math.isinf(self.rows) or math.isinf(self.appended):
            return math.inf
        kept = math.ceil(self.rows * len(self.types) * p.db_compressed_bytes_per_value
                         / DB_BLOCK) * DB_BLOCK
        if not self.appended:
            return kept
        fresh = sum(segment_bytes(self.appended * DUCKDB_VALUE_BYTES[t]) for t in self.types)
        if not self.row_groups:
            return kept + fresh
        return kept + fresh + math.ceil(self.appended / DB_ROW_GROUP) * DB_BLOCK


def segment_bytes(b: float) -> float:
    """What DuckDB allocates for `b` bytes of one column appended: a segment that doubles
    from a small size up to a block, then whole blocks."""
    if b >= DB_BLOCK:
        return math.ceil(b / DB_BLOCK) * DB_BLOCK
    return 2.0 ** math.ceil(math.log2(max(b, 4096.0)))


def db_tables(sizes: SourceDrivenSizes, d) -> list[Table]:
    """The tables one DB-op keeps (module doc); `appended` over DB_CHECKPOINT_SLIDES slides
    of the DB-op's slide."""
    l = sizes[d.root].l  # instants per second (none known: one a second)
    slide_s = 1.0 / l if l > 0 else 1.0
    cycle_s = DB_CHECKPOINT_SLIDES * slide_s
    out = []
    for ci in d.inputs:
        s = sizes[ci.op_ids[0]]
        types = tuple(d.input_columns(ci).values())  # the table as DuckDB creates it
        if ci.node.kind == "table":
            out.append(Table(s.size, 0.0, types))
        elif ci.table in d.raw:  # a held window's rows: kept for its own last instant too
            w = ci.node.row_window()
            held = s.rate * w.held_s if w is not None else 0.0
            out.append(Table(s.size + held, s.rate * cycle_s, ("TIMESTAMP", *types)))
        elif not ci.row_level:  # one instant kept, one appended per slide
            out.append(Table(s.size, s.size * DB_CHECKPOINT_SLIDES, ("TIMESTAMP", *types)))
    for sl in d.slices:
        ci = next((c for c in d.inputs if c.table == sl.source), None)
        if ci is not None:
            types = tuple(sl.columns.values())  # slice start, keys, partials
            if sl.meaning[:1] == ("packed",):  # a pack's values: the window's (db/sqlgen/packed.py)
                s = sizes[ci.op_ids[0]]
                out.append(Table(s.size, s.rate * cycle_s, (types[-1].removesuffix("[]"),),
                                 row_groups=False))
                types = types[:-1]
            out += [Table(kept, per_s * cycle_s, types)
                    for kept, per_s in slice_rows(sl, ci.node, sizes[ci.op_ids[0]])]
    return out


def slice_rows(sl, node, s: NodeSize) -> list[tuple[float, float]]:
    """(rows kept, rows gained per second) of each table of one slice table: the groups
    with rows in a slice x the slices of its longest range; for long windows also, in a
    table of their own, the sealed coarse slices of that range (db/sqlgen/slices.py: the
    fine slices stay for the whole range, each one an edge of some later window)."""
    groups = key_groups(node, sl.keys, s.size) if sl.keys else 1.0

    def per(width_us: int) -> float:
        return min(groups, max(s.rate * width_us / US_PER_S, 1.0))

    fine = (sl.keep_us / sl.width_us * per(sl.width_us),
            per(sl.width_us) * US_PER_S / sl.width_us)
    if not sl.coarse_us:
        return [fine]
    return [fine, (sl.keep_us / sl.coarse_us * per(sl.coarse_us),
                   per(sl.coarse_us) * US_PER_S / sl.coarse_us)]


def size_bytes(text: str) -> float:
    """'4g', '512m', '4GB' as bytes (Spark's and DuckDB's spelling)."""
    t = text.strip().lower().rstrip("bi")
    unit = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}.get(t[-1:], 1)
    return float(t[:-1] if unit != 1 else t) * unit


def capacities(p: CostProfile, driver_memory: str = DRIVER_MEMORY) -> tuple[float, float]:
    """(Spark, DuckDB) state capacity in bytes: the profile's, else the state the driver's
    heap holds (heap_state_capacity) and half the machine's RAM (what the MIGs share,
    runtime/mig.py)."""
    spe = p.spe_memory_bytes or heap_state_capacity(size_bytes(driver_memory), p)
    return spe, p.db_memory_bytes or machine_ram() / 2


def heap_state_capacity(heap: float, p: CostProfile) -> float:
    """The predicted Spark state (plan_memory's bytes) a JVM heap of `heap` bytes holds: the
    heap beside Spark's reserved memory, over the heap one predicted byte of state takes at
    a micro-batch's peak (`spe_heap_per_state_byte`: the HDFS state store keeps two versions
    of its map and writes a third, and the batch has its own rows)."""
    return max(heap - SPARK_RESERVED, 0.0) / p.spe_heap_per_state_byte


def machine_ram() -> int:
    """The machine's physical memory in bytes (8 GB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def plan_memory(pp, p: CostProfile, sizes: SourceDrivenSizes | None = None,
                driver_memory: str = DRIVER_MEMORY) -> PlanMemory:
    """Predicted state of a physical plan per engine, with the capacities."""
    plan = pp.logical
    sizes = sizes if sizes is not None else SourceDrivenSizes.of(plan)
    col = p.state_bytes_per_column
    spe = {}
    for o in plan.r2r_ids:
        if pp.placement.get(o, "spe") != "spe":
            continue
        node = plan.nodes[o]
        rows = spe_state_rows(node, sizes[o], [sizes[c] for c in plan.children[o]])
        if rows:
            ncols = len(node.schema) + 1
            spe[o] = State(rows, rows * (p.spe_state_bytes_per_row + col * ncols))
    db = {}
    for d in pp.db_ops:
        tables = db_tables(sizes, d)
        db[d.id] = State(sum(t.rows for t in tables), sum(t.bytes(p) for t in tables))
    return PlanMemory(spe, db, *capacities(p, driver_memory))


def checked_memory(pp, p: CostProfile, driver_memory: str = DRIVER_MEMORY) -> PlanMemory:
    """`plan_memory`, or where the model fails on a plan, a PlanMemory that says why
    (`unavailable`) with nothing predicted: a plan is still planned and explained when its
    memory cannot be predicted (the check passes it; explain says so)."""
    try:
        return plan_memory(pp, p, driver_memory=driver_memory)
    except Exception as e:  # noqa: BLE001 - a gap in the model never refuses a plan
        return PlanMemory(spe_capacity=math.inf, db_capacity=math.inf,
                          unavailable=f"{type(e).__name__}: {e}")
