"""Move: at a migration the new placement takes the DuckDB window state over from the old.

A migration at a slide instant, the migration instant (federation/adaptive/), can start the
new placement in two ways. *Parallel track* replays the last extent of input before it so
that every operator of the new placement fills its windows. A *move* applies when all window
state the new placement needs is already in the old placement's DuckDB databases, as it is
at the migration instant: the new placement then reads only the input from that instant on,
and each of its DB-ops starts with

* the **rows** of an old DB-op input of the same window rows, or of rows below them (the
  window before selections or projections that now run in Spark: they are applied to the
  moved rows in DuckDB), when that input kept its rows long enough (its range is at least
  the longest range the new DB-op reads them with) with every column the selections and the
  new DB-op need: they are inserted as if they came from Spark, so they are folded into the
  new DB-op's own slices; or
* its **slices**: an old slice table of the same meaning (the same rows through the same
  selections and projections, in either engine, the same keys, partial aggregates and
  widths), kept at least as long: copied as it is, with how far it is sealed.

It does not apply when the new placement keeps window state in Spark (a Spark aggregation,
join or result over window rows: Spark's state starts empty and only a replay fills it), or
when some window state of a new DB-op is in no old DB-op (it was in Spark, or the old
DB-op kept other columns, a shorter range or other partial aggregates). `plan_move` says
which, and why not.

The old placement keeps its state as it is at the migration instant when it runs with
`Handoff(stop_at=...)` (its MIGs compute the instants before `stop_at` only and expire
nothing an instant from `stop_at` on needs); the new placement runs with
`Handoff(start_at=..., moved=...)` at the same instant.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sqlglot import exp

from db.sqlgen import row_chain
from db.store import InputSpec, binding_error, moved_table
from federation.conventions import TS
from federation.instants import holdback
from federation.logical import Node, Project, Rstream, Select
from federation.logical.plan import input_key, is_row_level, leaf_window
from federation.physical import PhysicalPlan
from federation.python_functions import sql_functions
from federation.runtime.mig import input_specs


@dataclasses.dataclass(frozen=True)
class MovedPart:
    """What one new DB-op takes from one old DB-op's database file."""

    path: Path
    rows: tuple[tuple[str, str], ...] = ()  # (new table, SELECT over _moved."<old table>")
    slices: tuple[tuple[str, str], ...] = ()  # (old slice table, new slice table)


#: per new DB-op, what it takes from each old DB-op
MovedState = tuple[MovedPart, ...]


def spark_window_state(plan: PhysicalPlan) -> list[str]:
    """The operators of `plan` that keep window rows in Spark's state: every Spark-placed
    operator (and the result) that reads window rows, other than a selection or projection
    over them (stateless: it only passes rows on)."""
    lg = plan.logical
    out = []
    for oid, node in lg.nodes.items():
        kids = lg.children.get(oid, ())
        if not any(is_row_level(lg.nodes[c]) and plan.placement.get(c, "spe") != "db"
                   for c in kids):
            continue
        if isinstance(node, Rstream) or (plan.placement.get(oid, "spe") != "db"
                                         and not isinstance(node, (Select, Project))):
            out.append(oid)
    return out


class NotMovable(Exception):
    """A move does not apply to this migration (the message says why)."""


def plan_move(old: PhysicalPlan, old_state: Path | str, new: PhysicalPlan, slide_s: float
               ) -> dict[str, MovedState]:
    """Per DB-op of `new`, the state it takes from the databases of `old`'s DB-ops in the
    directory `old_state` (`<id>.duckdb`); NotMovable when a move does not apply."""
    spark = spark_window_state(new)
    if spark:
        kinds = ", ".join(f"{o} ({new.logical.nodes[o].kind})" for o in spark)
        raise NotMovable(f"the new placement keeps window rows in Spark: {kinds}")
    lg = new.logical
    olds = []  # (db_op, its input of window rows, its spec)
    for od in old.db_ops:
        specs, _ = input_specs(od, slide_s, old.logical.nodes)
        olds += [(od, ci, spec) for ci, spec in zip(od.inputs, specs) if ci.row_level]
    old_slices = [(od, st) for od in old.db_ops for st in od.slices]
    out: dict[str, dict[Path, MovedPart]] = {}
    for nd in new.db_ops:
        parts = out.setdefault(nd.id, {})
        specs, _ = input_specs(nd, slide_s, lg.nodes)
        for ci, spec in zip(nd.inputs, specs):
            if not ci.row_level:
                continue  # a relation: per instant, from the new plan's own operators
            need = max(leaf_window(lg.nodes[o]).range_s or 0.0 for o in ci.op_ids)
            folds = [st for st in nd.slices if st.source == ci.table]
            cols = set(spec.columns) if spec.keep_rows else set()
            for st in folds:
                cols |= set(st.batch_columns) - {TS}
            cols = [c for c in ci.node.schema if c in cols]
            whys = []
            for od, oci, ospec in olds:
                sql, why = _rows_from(oci.node, ospec, ci.node, cols, need)
                if sql is not None:
                    _add(parts, Path(old_state) / f"{od.id}.duckdb", rows=((ci.table, sql),))
                    break
                if why:
                    whys.append(f"{od.id} of the old placement keeps {why}")
            else:
                pairs = [(st, next((o for o in old_slices if o[1].meaning == st.meaning
                                    and o[1].keep_us >= st.keep_us), None)) for st in folds]
                if spec.keep_rows or not folds or any(o is None for _, o in pairs):
                    why = "; ".join(whys) or f"no DB-op of the old placement holds {ci.node.label()}"
                    raise NotMovable(f"new {nd.id}: {why}")
                for st, (od, ost) in pairs:
                    _add(parts, Path(old_state) / f"{od.id}.duckdb", slices=((ost.name, st.name),))
    return {k: tuple(v.values()) for k, v in out.items()}


def _add(parts: dict[Path, MovedPart], path: Path, rows=(), slices=()) -> None:
    p = parts.get(path, MovedPart(path))
    parts[path] = MovedPart(path, p.rows + tuple(rows), p.slices + tuple(slices))


def _rows_from(have: Node, spec: InputSpec, want: Node, cols: list[str], need_s: float
               ) -> tuple[str | None, str]:
    """The SELECT that turns the rows an old input keeps (`have`, with `spec`) into the rows
    a new input needs (`want`, its `cols`), or (None, why not: '' when they are other rows)."""
    chain, n = [], want
    while input_key(n, True) != input_key(have, True):
        if not isinstance(n, (Select, Project)):
            return None, ""  # `have` is not below `want`: other rows
        chain.append(n)
        n = n.child
    if not spec.keep_rows:
        return None, f"no rows of {have.label()}, only partial aggregates"
    if (spec.range_s or 0.0) < need_s:
        return None, f"{have.label()} for {spec.range_s:g} s, not {need_s:g} s"
    src = exp.select(*[exp.column(c, quoted=True) for c in [TS, *spec.columns]]).from_(
        moved_table(spec.table))
    q = row_chain(src, chain[::-1], every_column=True)
    q = exp.select(*[exp.column(c, quoted=True) for c in [TS, *cols]]).from_(q.subquery())
    sql = q.sql(dialect="duckdb")
    why = binding_error(sql, spec.table, {TS: "TIMESTAMP", **spec.columns},
                        functions=sql_functions(q))
    if why:
        return None, f"{have.label()} without a column the new DB-op needs ({why})"
    return sql, ""


def spark_tail_s(plan: PhysicalPlan, seconds_per_batch: int) -> float:
    """How far past a migration's instant stage 0 must go for Spark to emit its own results
    of the instants before it: 0 when Spark keeps no window state at stage 0; else a few
    batches' event time (Spark moves its watermark a batch after the data), and the range
    of every join of window rows below (Spark holds the watermark back by it)."""
    if not spark_window_state(plan):
        return 0.0
    max_range, slide_s, joins = holdback(plan.logical.nodes.values())
    return max_range * joins + 3 * max(slide_s, seconds_per_batch)
