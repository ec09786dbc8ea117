"""The DuckDB side of a MIG: window contents, slices, per-slide relations, SQL execution.

One connection per MIG with thread and memory settings. Row-level inputs keep a window's
contents where the DB-op reads them raw (rows inserted from Arrow, rows no later slide needs
deleted after each run) and are folded into the DB-op's slice tables (partial aggregates
per slice and group, db.sqlgen) as they arrive; relation-level inputs hold SPE-op results
per slide instant and lose them once used. The DB-op's query runs once per slide instant.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa
from sqlglot import exp

import federation.conventions as fc
from db.functions import register_functions
from db.sqlgen import BATCH, SLICE, SliceTable
from db.tables import (
    create_table,
    delete_before,
    delete_beyond_last,
    delete_closed_sessions,
    quoted_column,
    quoted_table,
    render,
)
from federation.conventions import DB_CHECKPOINT_SLIDES, DB_EXPIRE_SLIDES, TAU, TS, at_us, ts_us, us


@dataclass(frozen=True)
class InputSpec:
    """One input table of a DB-op as the store keeps it."""

    table: str
    columns: dict[str, str]  # without the _ts / _tau column
    row_level: bool
    range_s: float | None = None  # time window: rows older than tau - range expire
    rows: int | None = None  # tuple window
    partition_by: tuple[str, ...] = ()
    session: tuple[float, float, float] | None = None  # a session's gap, slide, offset (s)
    keep_rows: bool = True  # False: every reader folds it into slices, no row is kept
    where: str | None = None  # a tuple or session window's own selection (DuckDB SQL)
    #: keys computed of each reading (name, DuckDB SQL): a stream's rows gain them here
    computed: tuple[tuple[str, str], ...] = ()
    #: a database table (the same rows at every instant): loaded once from this Parquet
    #: copy (federation/runtime/tables.py), or (db, table) read in place; never expired
    table_source: str | tuple[str, str] | None = None
    held: tuple[int, int] | None = None  # read on a finer grid: its own (slide, origin), us


#: the schema a database file of moved state is attached as (`MigDatabase.adopt`)
MOVED = "_moved"


def moved_table(name: str) -> exp.Table:
    """Table `name` of the database attached as MOVED."""
    return exp.table_(exp.to_identifier(name, quoted=True), db=MOVED)


def binding_error(select: str, table: str, columns: dict[str, str],
                  schema: str = MOVED, functions: Sequence = ()) -> str | None:
    """Why `select` does not bind against `schema`.`table` with these columns (SQL types),
    or None; nothing is read (an empty table). `functions`: those it calls (db.functions)."""
    con = duckdb.connect()
    register_functions(con, functions)
    try:
        con.execute(f"ATTACH ':memory:' AS {schema}")
        con.execute(f"USE {schema}")
        con.execute(create_table(table, columns))
        con.execute(f"{select} LIMIT 0").fetchall()
    except duckdb.BinderException as e:
        return str(e).splitlines()[0].removeprefix("Binder Error: ")
    finally:
        con.close()
    return None


def naive_timestamps(t: pa.Table) -> pa.Table:
    """Drop time zones (Spark sends UTC instants) so columns match DuckDB TIMESTAMP."""
    cols = []
    for f, c in zip(t.schema, t.columns):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            c = c.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))
        elif pa.types.is_timestamp(f.type) and f.type.unit != "us":
            c = c.cast(pa.timestamp("us"))
        cols.append(c)
    return pa.table(cols, names=t.column_names)


class MigDatabase:
    """DuckDB state and execution of one DB-op: `sql` runs once per slide instant with the
    parameters `$tau` / `$tau_us` (db.sqlgen); `slices` are folded from row-level inputs."""

    def __init__(self, inputs: Sequence[InputSpec], sql: str, threads: int = 1,
                 memory_limit: str = "4GB", slices: Sequence[SliceTable] = (),
                 path: str | None = None, functions: Sequence = ()) -> None:
        """`functions`: the Python functions the SQL calls (db/functions.py). `path`: a
        database file that keeps the state across a crash (`begin` / `commit` around each
        micro-batch), reopened as it was at its last commit; else in memory."""
        self.con = duckdb.connect(str(path) if path else ":memory:",
                                  config={"threads": threads, "memory_limit": memory_limit})
        # DuckDB 2's dictionary-FSST string compression, run on every row group written to
        # a database file, made inserting Nexmark's bids 15x slower (1.9 against 0.4 us a
        # row); window rows live seconds to minutes, so they are stored without it
        self.con.execute("SET disabled_compression_methods = 'dict_fsst'")
        if re.search(r"\b(LEFT|RIGHT|FULL) OUTER JOIN\b", sql):
            # DuckDB 2.0.1's statistics propagation drops an outer join's unmatched rows
            # under a HAVING over a stored table (Arrow views are right; the fuzzer's seed
            # 92: a LEFT JOIN of window rows, SUM, HAVING SUM > 0.01 returned no row)
            self.con.execute("SET disabled_optimizers = 'statistics_propagation'")
        register_functions(self.con, functions)
        self.inputs = {i.table: i for i in inputs}
        self.sql = sql
        self.params = [k for k in ("tau", "tau_us", *(f"sealed_{tab.name}" for tab in slices))
                       if re.search(rf"\${k}\b", sql)]
        self.slices = list(slices)
        # the bookkeeping committed with the state: {"batch": ..., "mig": ..., ...}
        self.saved: dict | None = None
        reopened = bool(self._exec(
            "SELECT 1 FROM information_schema.tables WHERE table_name = '_fedq_state'"))
        if reopened:
            self.saved = json.loads(self._exec("SELECT state FROM _fedq_state")[0][0])
        else:
            self._exec("CREATE TABLE _fedq_state (state VARCHAR)")
            self._exec("INSERT INTO _fedq_state VALUES ('{}')")
        for spec in inputs:
            tcol = TS if spec.row_level else TAU
            if reopened:
                continue
            if spec.table_source is not None:
                self._load_table(spec)
            else:
                self._exec(create_table(spec.table, {tcol: "TIMESTAMP", **spec.columns}))
        self.folds: dict[str, str] = {}
        self.seals: dict[str, str] = {}
        for tab in self.slices:  # the slice table's types are those of its fold's result
            self.folds[tab.name] = render(exp.insert(tab.fold, quoted_table(tab.name)))
            if tab.seal is not None:
                self.seals[tab.name] = render(exp.insert(tab.seal, quoted_table(tab.coarse)))
            if reopened:
                continue
            self._exec(create_table(BATCH, tab.batch_columns))
            self._exec(render(exp.Create(this=quoted_table(tab.name), kind="TABLE",
                                         expression=tab.fold.copy().limit(0))))
            self._exec(f"DROP TABLE {BATCH}")
            if tab.seal is not None:
                self._exec(f"CREATE TABLE {render(quoted_table(tab.coarse))} AS "
                           f"SELECT * FROM {render(quoted_table(tab.name))} LIMIT 0")
        self.sealed = {tab.name: 0 for tab in self.slices}  # coarse slices sealed below this
        # per slice table (fine and coarse): the DELETE of slices older than keep_us
        self.slice_deletes = [
            (render(exp.delete(quoted_table(t), where=exp.LT(
                this=quoted_column(SLICE), expression=exp.Placeholder()))), tab.keep_us)
            for tab in self.slices for t in [tab.name] + ([tab.coarse] if tab.coarse_us else [])]
        self.timings = {"insert_s": 0.0, "fold_s": 0.0, "sql_s": 0.0, "expire_s": 0.0}
        self.expire_calls = 0
        self.in_batch = self.checkpoint_due = False
        if self.saved:
            self.sealed.update(self.saved.get("sealed", {}))
            self.expire_calls = self.saved.get("expire_calls", 0)

    def _load_table(self, spec: InputSpec) -> None:
        """A database table's rows, once: from its Parquet copy, or its file read-only,
        each column as the type the query declares (a DECIMAL is read as DOUBLE)."""
        cols = ", ".join(f"CAST({render(quoted_column(c))} AS {t}) AS {render(quoted_column(c))}"
                         for c, t in spec.columns.items())
        src = spec.table_source
        if isinstance(src, str):
            self._exec(f"CREATE TABLE {render(quoted_table(spec.table))} AS SELECT {cols} "
                       f"FROM read_parquet(?)", [src])
            return
        path, name = src
        self._exec("ATTACH ? AS _fedq_ref (READ_ONLY)", [path])
        try:
            self._exec(f"CREATE TABLE {render(quoted_table(spec.table))} AS SELECT {cols} "
                       f"FROM _fedq_ref.{render(quoted_table(name))}")
        finally:
            self._exec("DETACH _fedq_ref")

    def begin(self) -> None:
        """Start a micro-batch: what follows commits together in `commit`."""
        self._exec("BEGIN TRANSACTION")
        self.in_batch = True

    def commit(self, mig_state: dict) -> None:
        """Commit the micro-batch's changes with the MIG's bookkeeping (its batch id)."""
        state = {"mig": mig_state, "sealed": self.sealed, "expire_calls": self.expire_calls}
        self._exec("UPDATE _fedq_state SET state = ?", [json.dumps(state)])
        self._exec("COMMIT")
        self.in_batch = False
        self.saved = state
        if self.checkpoint_due:  # not allowed within a transaction
            self.checkpoint_due = False
            self._exec("CHECKPOINT")

    def _exec(self, sql: str, params: list | dict | None = None) -> list:
        # DuckDB 2.0 keeps a statement's result open until fetched: always finish it
        return self.con.execute(sql, params or []).fetchall()

    def insert(self, table: str, rows: pa.Table) -> None:
        """Append rows (Arrow) to an input table (columns matched by name), fold slices."""
        if rows.num_rows == 0:
            return
        t0 = time.perf_counter()
        spec = self.inputs[table]
        tcol = TS if spec.row_level else TAU
        rows = naive_timestamps(rows)
        made = [f"{e} AS {quoted_column(k).sql('duckdb')}" for k, e in spec.computed
                if k not in rows.column_names]  # the stream's rows: their computed keys
        if made:
            rows = self.con.from_arrow(rows).project(", ".join(["*", *made])).to_arrow_table()
        if spec.keep_rows:  # the relation API appends Arrow without a statement to plan
            self.con.from_arrow(rows.select([tcol, *spec.columns])).insert_into(table)
        t1 = time.perf_counter()
        self.timings["insert_s"] += t1 - t0
        folds = [self.folds[tab.name] for tab in self.slices if tab.source == table]
        if folds:
            self.con.register(BATCH, rows)
            try:
                for fold in folds:
                    self._exec(fold)
            finally:
                self.con.unregister(BATCH)
        self.timings["fold_s"] += time.perf_counter() - t1

    def seal(self, upto) -> None:
        """Merge the fine slices of every coarse slice that ends at or before `upto` (an
        instant the clock has passed: no row of those slices can still arrive)."""
        for tab in self.slices:
            if tab.coarse_us is None:
                continue
            hi = fc.grid_floor_us(ts_us(upto), tab.coarse_us, tab.origin_us)
            if hi > self.sealed[tab.name]:
                self._exec(self.seals[tab.name], {"seal_lo": self.sealed[tab.name],
                                                 "seal_hi": hi})
                self.sealed[tab.name] = hi

    def run(self, taus: Sequence) -> pa.Table:
        """Run the DB-op's SQL for each of the given slide instants; rows tagged `_tau`."""
        t0 = time.perf_counter()
        if taus:
            self.seal(taus[-1])
        outs = []
        sealed = {f"sealed_{k}": v for k, v in self.sealed.items()}
        with warnings.catch_warnings():  # the extra copy in _run_one is meant
            warnings.filterwarnings("ignore", message="Arrow output on a DB-API result")
            for tau in taus:
                outs.append(self._run_one(tau, sealed))
        out = pa.concat_tables(outs) if len(outs) != 1 else outs[0]
        self.timings["sql_s"] += time.perf_counter() - t0
        return out

    def _run_one(self, tau, sealed: dict) -> pa.Table:
        values = {"tau": tau, "tau_us": ts_us(tau), **sealed}
        # execute, not sql(): a relation plans the query twice (measured: 17 against
        # 14 ms per slide for CQ6); the extra copy of a few thousand result rows is cheap
        return self.con.execute(self.sql, {k: values[k] for k in self.params}).to_arrow_table()

    def expire(self, next_tau, slides: int = 1) -> None:
        """Delete what no slide instant >= next_tau needs, once DB_EXPIRE_SLIDES slides have
        passed since the last DELETE pass (`slides`: those this call computed), and
        CHECKPOINT once DB_CHECKPOINT_SLIDES have: counted in slides, not calls, so that
        the rows held between two CHECKPOINTs do not grow with the micro-batch's length."""
        before = self.expire_calls  # slides so far (the name is kept in saved states)
        self.expire_calls += slides
        if self.expire_calls // DB_EXPIRE_SLIDES == before // DB_EXPIRE_SLIDES:
            return
        t0 = time.perf_counter()
        for spec in self.inputs.values():
            if spec.table_source is not None:
                continue
            at = next_tau if spec.held is None else at_us(fc.grid_floor_us(ts_us(next_tau), *spec.held))
            if not spec.row_level:
                self._exec(delete_before(spec.table, TAU), [next_tau])
            elif not spec.keep_rows:
                continue
            elif spec.session is not None:
                gap, slide, offset = (us(x) for x in spec.session)
                self._exec(delete_closed_sessions(spec.table, spec.partition_by, gap, slide,
                                                  spec.where, offset), [next_tau])
            elif spec.range_s is not None:
                self._exec(delete_before(spec.table, TS, spec.range_s), [at])
            else:  # tuple window: keep the newest `rows` before `at` per partition
                self._exec(delete_beyond_last(spec.table, list(spec.columns), spec.partition_by,
                                              int(spec.rows), spec.where), [at])
        for sql, keep_us in self.slice_deletes:
            self._exec(sql, [ts_us(next_tau) - keep_us])
        if self.expire_calls // DB_CHECKPOINT_SLIDES != before // DB_CHECKPOINT_SLIDES:
            # an in-memory DuckDB frees deleted row groups (and compresses) only at a
            # checkpoint: without it memory swings with every INSERT and DELETE
            if self.in_batch:
                self.checkpoint_due = True
            else:
                self._exec("CHECKPOINT")
        self.timings["expire_s"] += time.perf_counter() - t0

    def adopt(self, path: str, rows: Sequence[tuple[str, str]] = (),
              slices: Sequence[tuple[str, str]] = ()) -> dict[str, int]:
        """Take window state from another DB-op's database file, attached as `_moved`
        (a move at a migration, federation/runtime/move.py). `rows`: (this input
        table, a SELECT of `_ts` and its columns over `_moved`): the rows arrive here as if
        from Spark, kept and folded into this DB-op's slices. `slices`: (its slice table,
        this slice table) of the same meaning: copied, with their sealed coarse slices.
        Returns the rows taken per table of this database."""
        taken: dict[str, int] = {}
        self._exec(f"ATTACH {render(exp.Literal.string(str(path)))} AS {MOVED} (READ_ONLY)")
        try:
            their = json.loads(self._exec(f"SELECT state FROM {MOVED}._fedq_state")[0][0])
            for new, select in rows:
                t = self.con.sql(select).to_arrow_table()
                self.insert(new, t)
                taken[new] = taken.get(new, 0) + t.num_rows
            for old, new in slices:
                tab = next(s for s in self.slices if s.name == new)
                pairs = [(old, new)] + ([(f"{old}c", tab.coarse)] if tab.coarse_us else [])
                for o, n in pairs:
                    src = exp.select(exp.Star()).from_(moved_table(o))
                    self._exec(render(exp.insert(src, quoted_table(n))))
                    taken[n] = self._exec(render(exp.select(exp.Count(this=exp.Star()))
                                                 .from_(quoted_table(n))))[0][0]
                if tab.coarse_us:
                    self.sealed[new] = their.get("sealed", {}).get(old, 0)
        finally:
            self._exec(f"DETACH {MOVED}")
        return taken

    def row_counts(self) -> dict[str, int]:
        """Rows held per input and slice table."""
        count = exp.select(exp.Count(this=exp.Star()))
        return {t: self._exec(render(count.from_(quoted_table(t))))[0][0]
                for t in [*self.inputs, *(tab.name for tab in self.slices),
                          *(tab.coarse for tab in self.slices if tab.coarse_us)]}

    def memory_bytes(self) -> int:
        """DuckDB's own accounting of the memory it holds."""
        r = self._exec("SELECT sum(memory_usage_bytes) FROM duckdb_memory()")[0]
        return int(r[0] or 0)

    def close(self) -> None:
        self.con.close()

