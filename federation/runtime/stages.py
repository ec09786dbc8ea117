"""The plan cut into stages, each one Spark streaming query (docs/architecture.md).

Stage 0 reads the validated input spool. A DB-op whose result feeds further SPE-ops writes
it to a re-entry spool that the next stage's query reads as a streaming source. Each stage's
`foreachBatch` receives, in one Arrow transfer, every output of the stage tagged by `_out`:
the inputs of each MIG of the stage, the query result if the stage produces it, and the
event-time clock (punctuation rows).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from federation.conventions import stored_columns
from federation.instants import Grid
from federation.logical import Table, Window
from federation.physical import DbOp, PhysicalPlan


def assign_stages(pp: PhysicalPlan) -> tuple[dict[str, int], dict[str, int]]:
    """Stage of every node (SPE side) and of every DB-op: a DB-op runs at the stage of its
    latest input, and its outputs re-enter Spark one stage later."""
    lg = pp.logical
    node_stage: dict[str, int] = {}
    db_op_stage: dict[str, int] = {}

    def op_stage(db_op: DbOp) -> int:
        if db_op.id not in db_op_stage:
            db_op_stage[db_op.id] = max(
                (stage(o) for ci in db_op.inputs for o in ci.op_ids), default=0)
        return db_op_stage[db_op.id]

    def stage(oid: str) -> int:
        if oid not in node_stage:
            node = lg.nodes[oid]
            db_op = pp.db_op_of(oid)
            if isinstance(node, (Window, Table)):
                node_stage[oid] = 0
            elif db_op is not None:
                node_stage[oid] = op_stage(db_op) + 1  # its output re-enters Spark
            else:
                node_stage[oid] = max(stage(c) for c in lg.children[oid])
        return node_stage[oid]

    for oid in lg.post_order():
        if oid == "root":
            continue
        db_op = pp.db_op_of(oid)
        if db_op is None or oid in db_op.outputs:
            stage(oid)
        else:
            op_stage(db_op)
    return node_stage, db_op_stage


@dataclass
class Stage:
    """One Spark streaming query of the plan and what its foreachBatch feeds."""

    index: int
    outputs: list[tuple[str, object]] = field(default_factory=list)  # ("mig", (db-op, table))
    clock_sources: list[int] = field(default_factory=list)  # | ("result", None)
    df: object = None
    query: object = None
    clock: dict[int, dt.datetime] = field(default_factory=dict)
    last_done: int | None = None  # the last micro-batch id handled (replays are skipped)
    data_batches: int = 0
    #: per DB-op fed by relations from Spark: how far (event seconds) its input lags the
    #: stage's clock, the ranges of the joins of window rows on the way (`holdback`)
    holdback_s: dict[str, float] = field(default_factory=dict)


@dataclass
class StagedPlan:
    """A physical plan's stages, the stage of each DB-op, and where results go: each query's
    top operator (`tops`, one per query of a set; an operator shared by two queries' results
    is computed once and its rows go to both)."""

    plan: PhysicalPlan
    stages: list[Stage]
    node_stage: dict[str, int]
    db_op_stage: dict[str, int]
    tops: dict[str, str]  # query name -> its top operator
    columns: dict[str, list[str]]  # query name -> its result columns

    @staticmethod
    def of(pp: PhysicalPlan) -> StagedPlan:
        node_stage, db_op_stage = assign_stages(pp)
        lg = pp.logical
        n = 1 + max([*node_stage.values(), *db_op_stage.values()], default=0)
        for top in lg.tops.values():
            if pp.db_op_of(top) is None:
                n = max(n, node_stage[top] + 1)
        return StagedPlan(pp, [Stage(i) for i in range(n)], node_stage, db_op_stage,
                          dict(lg.tops), {q: list(lg.nodes[t].schema) for q, t in lg.tops.items()})

    @property
    def root_child(self) -> str:
        """The top operator of the (first) query."""
        return next(iter(self.tops.values()))

    @property
    def root_db_op(self) -> DbOp | None:
        """The DB-op that computes the (first) query's result, if any."""
        return self.plan.db_op_of(self.root_child)

    def queries_at(self, oid: str) -> list[str]:
        """The queries whose result is operator `oid`'s rows."""
        return [q for q, t in self.tops.items() if t == oid]

    def reenters(self, oid: str) -> bool:
        """True when DB-op output `oid` feeds SPE-ops (through a re-entry spool)."""
        db_op = self.plan.db_op_of(oid)
        return db_op is not None and any(
            p != "root" and p not in db_op.members for p in self.plan.logical.parents[oid])

    def spe_results(self, stage: int) -> list[str]:
        """The query tops that Spark computes at `stage`."""
        return [t for t in dict.fromkeys(self.tops.values())
                if self.plan.db_op_of(t) is None and self.node_stage[t] == stage]

    def db_ops_of(self, stage: int) -> list[str]:
        return [c for c, s in self.db_op_stage.items() if s == stage]


    def reentry_dirs(self, root: Path) -> dict[str, Path]:
        """A directory under `root` per DB-op output that SPE-ops read (made here)."""
        out = {}
        for c in self.plan.db_ops:
            for oid in c.outputs:
                if self.reenters(oid):
                    d = root / (c.id if len(c.outputs) == 1 else f"{c.id}-{oid}")
                    d.mkdir(parents=True, exist_ok=True)
                    out[oid] = d
        return out


class StageBuilder:
    """Builds each stage's streaming DataFrame: its sources, the SPE-ops translated into
    Spark operators, and the tagged union of its outputs (one per MIG input, the result)."""

    def __init__(self, spark, staged: StagedPlan, spools: dict[str, tuple[object, Path]],
                 reentry_dirs: dict[str, Path], seconds_per_batch: int, delay_ms: int,
                 extent_s: float, grid: Grid, table_files: dict | None = None) -> None:
        self.spark = spark
        if spark is not None:  # the Python functions the plan calls (federation.udf)
            from spe.functions import register_functions

            register_functions(spark, staged.plan.logical.root.functions())
        self.table_files = table_files or {}  # database tables: the run's copies
        self.staged = staged
        self.spools = spools  # per stream name: (its declaration, its spool directory)
        self.reentry_dirs = reentry_dirs
        self.seconds_per_batch = seconds_per_batch
        self.delay_ms = delay_ms
        self.extent_s = extent_s
        self.grid = grid  # the query's instants (federation.instants)

    def build(self, st: Stage) -> None:
        """Set the stage's outputs, clock sources and DataFrame (none when it has no work)."""
        from spe.pipeline import select_columns, tag_outputs
        from spe.translate import TS, WT, SpeTranslator

        self._built: dict = {}
        self._sources: list = []  # clock DataFrames
        self._base: dict[str, object] = {}  # per stream: its rows, then its ticks
        self._ticks: dict[str, object] = {}
        self._translator = SpeTranslator(self._instants)
        pp = self.staged.plan
        outs = []
        for op_id in self.staged.db_ops_of(st.index):
            c = next(x for x in pp.db_ops if x.id == op_id)
            for ci in c.inputs:
                if isinstance(ci.node, Table):  # loaded by the MIG from the run's copy
                    continue
                s = self._node(ci.op_ids[0])
                tag = TS if s.row_level else WT
                cols = [tag, *(stored_columns(ci.node) if s.row_level else ci.node.schema)]
                outs.append((("mig", (c.id, ci.table)), select_columns(s.df, cols)))
                if not s.row_level:
                    st.holdback_s[c.id] = max(st.holdback_s.get(c.id, 0.0),
                                              self._holdback(ci.op_ids[0]))
        for top in self.staged.spe_results(st.index):
            s = self._translator.as_relation(self._node(top))
            cols = [WT, *pp.logical.nodes[top].schema]
            outs.append((("result", top), select_columns(s.df, cols)))
        if not outs:
            return
        st.outputs = [what for what, _ in outs]
        st.clock_sources = list(range(len(self._sources)))
        st.df = tag_outputs([df for _, df in outs], self._sources)

    def _holdback(self, oid: str) -> float:
        """Event seconds by which Spark's output at `oid` lags the stage's clock: a join of
        window rows with a relation (spe.joins.rows_join) holds the watermark of every
        stateful operator above it back by the window's range, so a relation computed there
        at instant tau is complete only once the clock passed tau plus those ranges."""
        from spe.joins import interval_rows

        pp = self.staged.plan
        node = pp.logical.nodes[oid]
        if isinstance(node, (Window, Table)) or pp.db_op_of(oid) is not None:
            return 0.0  # a source: the stage's spool, or a re-entry with its own punctuation
        kids = pp.logical.children[oid]
        below = max((self._holdback(c) for c in kids), default=0.0)
        if node.kind == "join" and (w := interval_rows(
                node, *[self._node(c) for c in kids], self._translator.rows_join)):
            below += w.range_s
        return below

    def _base_rows(self, name: str):
        """A stream's validated rows (its spool read once per stage; its punctuation is a
        clock source of the stage: the stage's clock is the slowest stream's)."""
        from spe.pipeline import spool_source

        if name not in self._base:
            stream, spool = self.spools[name]
            self._base[name], clock, self._ticks[name] = spool_source(
                self.spark, stream.columns, stream.ts_column, str(spool),
                self.seconds_per_batch, self.delay_ms)
            self._sources.append(clock)
        return self._base[name]

    def _instants(self):
        """The query's instants, from the ticks of every stream (a stream ticks over its
        own readings; the query's life is their union)."""
        from spe.pipeline import instants_relation

        ticks = None
        for name in sorted(self.spools):
            self._base_rows(name)
            t = self._ticks[name]
            ticks = t if ticks is None else ticks.unionByName(t)
        return instants_relation(ticks, self.extent_s, self.grid.slide_s, self.grid.offset_s)

    def _reentry(self, oid: str):
        """The rows of DB-op output `oid`, read back from its re-entry spool."""
        from spe.pipeline import reentry_source

        lg = self.staged.plan.logical
        rows, clock = reentry_source(self.spark, dict(lg.nodes[oid].schema),
                                     str(self.reentry_dirs[oid]), self.seconds_per_batch)
        self._sources.append(clock)
        return rows

    def _node(self, oid: str):

        if oid in self._built:
            return self._built[oid]
        pp = self.staged.plan
        node = pp.logical.nodes[oid]
        db_op = pp.db_op_of(oid)
        if isinstance(node, Window):
            s = self._translator.visit(node, [self._base_rows(node.stream.name)])
        elif isinstance(node, Table):
            rows = self.spark.read.parquet(str(self.table_files[node.name]))
            s = self._translator.visit(node, [rows])
        elif db_op is not None:
            s = self._reentry(oid)
        else:
            s = self._translator.visit(node, [self._node(c) for c in pp.logical.children[oid]])
        self._built[oid] = s
        return s
