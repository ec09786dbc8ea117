"""The MIG operator at run time: the SPE-side wrapper of one DB-op (docs/architecture.md).

It receives its inputs' rows per micro-batch as Arrow, keeps them in DuckDB, runs the
DB-op's SQL for every slide instant that the event-time clock has completed, deletes what
no later slide needs, and hands (tau, rows) on.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from db.sqlgen.terms import quote
from db.store import InputSpec, MigDatabase, naive_timestamps
from federation.conventions import OUT, TAU, TS, WT, output_column
from federation.instants import Grid, as_grid
from federation.logical import leaf_window
from federation.physical import DbOp
from federation.python_functions import sql_functions
from federation.runtime.phases import PHASES

ONE_US = dt.timedelta(microseconds=1)


def wt_to_tau(t: pa.Table) -> pa.Table:
    """`_wt` (= tau - 1 us, Spark's window_time) to `_tau`."""
    t = naive_timestamps(t)
    i = t.column_names.index(WT)
    tau = pc.add(t.column(WT), pa.scalar(ONE_US, pa.duration("us")))
    return t.set_column(i, TAU, tau)


def tau_to_wt(t: pa.Table) -> pa.Array:
    """`_tau` back to `_wt` (= tau - 1 us), the event time Spark groups and joins on."""
    return pc.subtract(naive_timestamps(t).column(TAU), pa.scalar(ONE_US, pa.duration("us")))


def split_outputs(db_op: DbOp, plan_nodes: dict, out: pa.Table | None
                  ) -> dict[str, pa.Table | None]:
    """Each output of the DB-op and its rows (`_tau` and the operator's columns): a DB-op
    with several roots (several queries) yields them tagged `_out` (db.sqlgen.statement)."""
    if len(db_op.outputs) == 1:
        return {db_op.outputs[0]: out}
    if out is None:
        return {r: None for r in db_op.outputs}
    tag = out.column(OUT)
    res: dict[str, pa.Table | None] = {}
    for k, r in enumerate(db_op.outputs):
        part = out.filter(pc.equal(tag, k))
        res[r] = pa.table({TAU: part.column(TAU), **{
            c: part.column(output_column(k, c)) for c in plan_nodes[r].schema}})
    return res


def mig_resources(plan) -> tuple[dict[str, int], str]:
    """DuckDB threads of each MIG of `plan` (a PhysicalPlan), by DB-op id, and the memory
    limit of each. Within a micro-batch Spark waits while the MIGs run one after the other,
    so each MIG may use every core (one thread instead of two made CQ1's slide 1.5x and a
    CQ3 scan 2.6x as slow, issue 10), but one whose DOUBLE sums an operator compares runs on
    one thread (`float_sums.in_order`); half the memory is shared among the MIGs, the rest
    is Spark's."""
    from costmodel.memory import machine_ram
    from federation.logical.float_sums import in_order

    serial, cores = in_order(plan), os.cpu_count() or 1
    per = max(256 * 2**20, machine_ram() // 2 // max(1, len(plan.db_ops)))
    return {d.id: 1 if d.id in serial else cores for d in plan.db_ops}, f"{per // 2**20}MB"


def db_op_functions(db_op: DbOp, moved=None, specs: Sequence[InputSpec] = ()) -> list:
    """The Python functions (federation.udf) a DB-op's SQL, its slice folds, a move's
    SELECTs and its inputs' computed keys call: what its DuckDB must have registered."""
    return sql_functions(db_op.sql, *(e for t in db_op.slices for e in (t.fold, t.seal)),
                         *(sql for part in moved or () for _, sql in part.rows),
                         *(e for s in specs for _, e in s.computed))


def input_specs(db_op: DbOp, slide_s: float, plan_nodes: dict | None = None,
                table_files: dict | None = None) -> tuple[list[InputSpec], float]:
    """How the DB-op's DuckDB keeps each input, and the horizon: how long after its last
    row a row-level input can still fall in a window (the longest range plus a slide).
    A database table is loaded once from its run's copy (`table_files`, by name), or
    without one from its file as it is now."""
    specs = []
    horizon_s = 0.0
    for ci in db_op.inputs:
        if ci.node.kind == "table":
            n = ci.node
            src = str(table_files[n.name]) if table_files and n.name in table_files else (
                n.db, n.name)
            specs.append(InputSpec(ci.table, db_op.input_columns(ci), False,
                                   table_source=src))
            continue
        if not ci.row_level:
            specs.append(InputSpec(ci.table, db_op.input_columns(ci), False))
            continue
        wins = [leaf_window(plan_nodes[o]) if plan_nodes else leaf_window(ci.node)
                for o in ci.op_ids]
        horizon_s = max(horizon_s, max((w.gap_s if w.is_session else w.range_s or 0.0)
                                       + w.held_s for w in wins) + slide_s)
        raw = [w for o, w in zip(ci.op_ids, wins) if o in db_op.raw.get(ci.table, ())]
        if not raw:  # every reader folds these rows into slices
            specs.append(InputSpec(ci.table, dict(ci.node.schema), True, keep_rows=False))
            continue
        # readers of one table may read it with different ranges: keep the longest
        w = max(raw, key=lambda x: x.range_s or 0.0)
        where = w.where
        specs.append(InputSpec(ci.table, db_op.input_columns(ci), True, w.range_s, w.rows,
                               w.partition_by,
                               (w.gap_s, w.slide_s, w.offset_s) if w.is_session else None,
                               where=None if where is None else quote(where).sql("duckdb"),
                               computed=tuple((k, quote(e).sql("duckdb"))
                                              for k, e in w.computed_keys),
                               held=None if w.every_s is None else (
                                   w.grid.slide_us, w.grid.origin_us)))
    return specs, horizon_s


class MigRuntime:
    """DuckDB state and per-slide execution of one DB-op."""

    def __init__(self, db_op: DbOp, grid: Grid | float, lateness_s: float = 0.0,
                 threads: int = 1, memory_limit: str = "4GB",
                 plan_nodes: dict | None = None,
                 life: tuple[dt.datetime, dt.datetime | None] | None = None,
                 state_path: str | None = None, moved=None,
                 stop_at: dt.datetime | None = None, table_files: dict | None = None,
                 moved_after: Callable[[], None] | None = None) -> None:
        """`life`: the first and last slide instant of the query over its input
        (federation.instants, on `grid`: the query's); the MIG computes exactly those
        instants, empty ones included; a followed input has no last one (None: every instant up to the clock,
        until `end_life`). Without it, from the first row it receives to the last row's
        window.
        `state_path`: a DuckDB file holding the MIG's state across a crash; reopened, the
        MIG continues after the last micro-batch it committed (`applied`).
        `moved`: window state taken from an old placement's DB-op at a migration (move,
        federation/runtime/move.py), committed before the first micro-batch; with
        `moved_after` (it returns once the old placement has finished, or raises) at the
        first micro-batch, after it returned (an overlapped start: the old DB-op's file is
        complete only then).
        `stop_at`: the migration instant (`stop_before`). `table_files`: the run's copy of
        each database table the DB-op reads (federation/runtime/tables.py)."""
        self.db_op = db_op
        self.life = life
        self.grid = as_grid(grid)
        self.slide = self.grid.slide
        self.lateness = dt.timedelta(seconds=lateness_s)
        specs, self.horizon_s = input_specs(db_op, self.grid.slide_s, plan_nodes, table_files)
        self.rel_inputs = any(not ci.row_level and ci.node.kind != "table"
                              for ci in db_op.inputs)
        self.db = MigDatabase(specs, db_op.sql.sql(dialect="duckdb"), threads=threads,
                              memory_limit=memory_limit, slices=db_op.slices, path=state_path,
                              functions=db_op_functions(db_op, moved, specs))
        self.next_tau: dt.datetime | None = life[0] if life else None
        self.max_data_ts: dt.datetime | None = None
        self.max_rel_tau: dt.datetime | None = None
        self.rows_in = 0
        self.rows_out = 0
        self.slides_done = 0
        self.applied: int | None = None  # the last micro-batch id committed
        self.moved: dict[str, int] = {}
        self._moved, self._moved_after = None, None  # moved state not adopted yet
        self.stop_at: dt.datetime | None = None
        if stop_at is not None:
            self.stop_before(stop_at)
        if self.db.saved and self.db.saved.get("mig"):
            self._restore(self.db.saved["mig"])
        elif moved is not None:  # once: a resumed run has it in its committed state
            self._moved, self._moved_after = moved, moved_after
            if moved_after is None:
                self._adopt()

    def _adopt(self) -> None:
        """Take the moved state in (committed as batch -1)."""
        if self._moved_after is not None:
            self._moved_after()
        self.db.begin()
        for part in self._moved:
            for t, n in self.db.adopt(str(part.path), part.rows, part.slices).items():
                self.moved[t] = self.moved.get(t, 0) + n
        self.commit(-1)
        self._moved = None

    _TIMES = ("next_tau", "max_data_ts", "max_rel_tau")
    _COUNTS = ("rows_in", "rows_out", "slides_done", "applied")

    def end_life(self, last: dt.datetime) -> None:
        """A followed input ended: its last slide instant is now known."""
        if self.life is not None:
            self.life = (self.life[0], last)

    def stop_before(self, stop_at: dt.datetime) -> None:
        """A migration at instant `stop_at`: the MIG computes the instants before it only,
        and keeps no window row from it on (they belong to the next placement; move.py)."""
        self.stop_at = stop_at if self.stop_at is None else min(self.stop_at, stop_at)

    def _restore(self, d: dict) -> None:
        for k in self._TIMES:
            setattr(self, k, None if d[k] is None else dt.datetime.fromisoformat(d[k]))
        for k in self._COUNTS:
            setattr(self, k, d[k])

    def begin(self, batch: int, idle_until: dt.datetime | None = None) -> bool:
        """Start micro-batch `batch`; False when it was committed before (a replay after
        a crash), or when it holds no row for this MIG and its clock `idle_until` is
        before the first instant while the moved state waits for the old placement (an
        overlapped start: the batch of a moved segment's first tick goes through at once,
        the state is adopted at the first batch that needs it): then neither `add` nor
        `advance` may run for it."""
        if self._moved is not None:
            if idle_until is not None and self.life is not None and idle_until < self.life[0]:
                return False
            self._adopt()
        if self.applied is not None and batch <= self.applied:
            return False
        self.db.begin()
        return True

    def commit(self, batch: int) -> None:
        self.applied = batch
        d = {k: (None if getattr(self, k) is None else getattr(self, k).isoformat())
             for k in self._TIMES}
        d.update({k: getattr(self, k) for k in self._COUNTS})
        self._db(self.db.commit, d)

    def _first_tau(self, ts: dt.datetime) -> dt.datetime:
        return self.grid.first_after(ts)

    def add(self, table: str, rows: pa.Table) -> None:
        """Rows of one input from the micro-batch (row-level with `_ts`, relations `_wt`)."""
        if rows.num_rows == 0:
            return
        t0, c0 = time.perf_counter(), time.thread_time()
        rows = self._take(table, rows)
        PHASES.add("mig.rows", time.perf_counter() - t0, time.thread_time() - c0)
        if rows is not None:
            self._db(self.db.insert, table, rows)

    def _db(self, call, *args):
        """`call` (a MigDatabase method) with its seconds to the run's phases (phases.py):
        DuckDB's own timings split them (insert/fold, sql/expire)."""
        before = dict(self.db.timings)
        t0, c0 = time.perf_counter(), time.thread_time()
        out = call(*args)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        took = {k: v - before[k] for k, v in self.db.timings.items() if v > before[k]}
        total = sum(took.values())
        if not took:
            PHASES.add(f"db.{call.__name__}", wall, cpu)
        for k, v in took.items():
            PHASES.add(f"db.{k.removesuffix('_s')}", v, cpu * v / total)
        return out

    def _take(self, table: str, rows: pa.Table) -> pa.Table | None:
        spec = self.db.inputs[table]
        if spec.row_level:
            rows = naive_timestamps(rows)
            if self.stop_at is not None:
                rows = rows.filter(pc.less(rows.column(TS),
                                           pa.scalar(self.stop_at, pa.timestamp("us"))))
                if rows.num_rows == 0:
                    return None
            lo, hi = pc.min(rows.column(TS)).as_py(), pc.max(rows.column(TS)).as_py()
            self.max_data_ts = hi if self.max_data_ts is None else max(self.max_data_ts, hi)
            first = self._first_tau(lo)
        else:
            rows = wt_to_tau(rows)
            lo, hi = pc.min(rows.column(TAU)).as_py(), pc.max(rows.column(TAU)).as_py()
            self.max_rel_tau = hi if self.max_rel_tau is None else max(self.max_rel_tau, hi)
            first = lo
        if self.life is None and (self.next_tau is None
                                  or first < self.next_tau and self.slides_done == 0):
            self.next_tau = first
        self.rows_in += rows.num_rows
        return rows

    def advance(self, watermark: dt.datetime | None) -> tuple[list[dt.datetime], pa.Table | None,
                                                                 float]:
        """Run the SQL for every slide instant tau <= watermark not done yet."""
        if watermark is None or self.next_tau is None:
            return [], None, 0.0
        # beyond the last instant whose windows or relations can hold a row, every input is
        # empty and so is the result: never enumerate slides up to a far-future flush
        bounds = []
        if self.life is not None:  # a followed input: every instant up to the clock
            bounds.append(watermark if self.life[1] is None else self.life[1])
        elif self.max_data_ts is not None:
            bounds.append(self.max_data_ts + dt.timedelta(seconds=self.horizon_s))
        if self.max_rel_tau is not None and self.life is None:
            bounds.append(self.max_rel_tau)
        limits = [watermark, max(bounds) if bounds else self.next_tau]
        if self.stop_at is not None:
            limits.append(self.stop_at - self.slide)
        upto = min(limits)
        taus = []
        t = self.next_tau
        while t <= upto:
            taus.append(t)
            t += self.slide
        if not taus:
            if watermark >= self.next_tau:  # nothing can fall in these slides any more
                self.next_tau = max(self.next_tau, self._first_tau(watermark - self.slide))
            return [], None, 0.0
        t0 = time.perf_counter()
        out = self._db(self.db.run, taus)
        self._db(self.db.expire, taus[-1] + self.slide, len(taus))
        took = time.perf_counter() - t0
        self.next_tau = taus[-1] + self.slide
        self.slides_done += len(taus)
        self.rows_out += out.num_rows
        return taus, out, took

    def memory_bytes(self) -> int:
        return self.db.memory_bytes()

    def close(self) -> None:
        self.db.close()
