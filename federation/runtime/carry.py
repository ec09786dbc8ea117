"""Moving state at a migration: carry DuckDB window state from one placement to the next.

A migration at slide instant T_m (federation/adaptive.py) can start the new placement in two
ways. *Parallel track* replays the last extent of input before T_m so that every operator of
the new placement fills its windows. *Moving state* applies when all window state the new
placement needs is already in the old placement's DuckDB databases, as it is at T_m: the new
placement then reads only the input from T_m on, and each of its DB-ops starts with

* the **rows** of an old DB-op input of the same window rows (same stream, slide and stateless
  operators: `input_key`), when that input kept its rows long enough (its range is at least
  the longest range the new DB-op reads them with) with every column the new DB-op keeps or
  folds: they are inserted as if they came from Spark, so they are folded into the new
  DB-op's own slices; or
* its **slices**: partial aggregates of an old slice table of the same input whose fold is the
  same SQL over the same slice width, kept at least as long: copied as they are.

It does not apply when the new placement keeps window state in Spark (a Spark aggregation,
join or result over window rows: Spark's state starts empty and only a replay fills it), or
when some window state of a new DB-op is in no old DB-op (it was in Spark, or the old
DB-op kept other columns, a shorter range or other partial aggregates). `plan_carry` says
which, and why not.

The old placement keeps its state as it is at T_m when it runs with `stop_at=T_m` (its MIGs
compute the instants before T_m only and expire nothing an instant from T_m on needs); the
new placement runs with `start_at=T_m` and `carry`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from federation.logical import Project, Rstream, Select
from federation.logical.plan import input_key, is_row_level, leaf_window
from federation.physical import PhysicalPlan
from federation.runtime.mig import input_specs


@dataclasses.dataclass(frozen=True)
class Carry:
    """The state one new DB-op takes from one old DB-op's database file."""

    path: Path
    rows: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (old table, new table, columns)
    slices: tuple[tuple[str, str], ...] = ()  # (old slice table, new slice table)

    def __add__(self, other: Carry) -> Carry:
        return Carry(self.path, self.rows + other.rows, self.slices + other.slices)


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
    """Moving state does not apply to this migration (the message says why)."""


def plan_carry(old: PhysicalPlan, old_state: Path, new: PhysicalPlan, slide_s: float
               ) -> dict[str, Carry]:
    """Per DB-op of `new`, the state it takes from the databases of `old`'s DB-ops in the
    directory `old_state` (`<id>.duckdb`); NotMovable when moving state does not apply."""
    spark = spark_window_state(new)
    if spark:
        kinds = ", ".join(f"{o} ({new.logical.nodes[o].kind})" for o in spark)
        raise NotMovable(f"the new placement keeps window rows in Spark: {kinds}")
    lg = new.logical
    olds = []  # (db_op, its input of these rows, its spec)
    for od in old.db_ops:
        specs, _ = input_specs(od, slide_s, old.logical.nodes)
        for ci, spec in zip(od.inputs, specs):
            if ci.row_level:
                olds.append((od, ci, spec))
    out: dict[str, Carry] = {}
    for nd in new.db_ops:
        specs, _ = input_specs(nd, slide_s, lg.nodes)
        for ci, spec in zip(nd.inputs, specs):
            if not ci.row_level:
                continue  # a relation: per instant, from the new plan's own operators
            key = input_key(ci.node, True)
            need = max(leaf_window(lg.nodes[o]).range_s or 0.0 for o in ci.op_ids)
            folds = [st for st in nd.slices if st.source == ci.table]
            cols = set(spec.columns) if spec.keep_rows else set()
            for st in folds:
                cols |= set(st.batch_columns) - {"_ts"}
            carry, why = None, f"no DB-op of the old placement holds {ci.node.label()}"
            for od, oci, ospec in olds:
                if input_key(oci.node, True) != key:
                    continue
                path = Path(old_state) / f"{od.id}.duckdb"
                if ospec.keep_rows and (ospec.range_s or 0.0) >= need \
                        and cols <= set(ospec.columns):
                    carry = Carry(path, rows=((oci.table, ci.table,
                                               tuple(c for c in ci.node.schema if c in cols)),))
                    break
                pairs = _equal_slices(folds, [s for s in od.slices if s.source == oci.table])
                if pairs is not None and not spec.keep_rows:
                    carry = Carry(path, slices=tuple(pairs))
                    break
                missing = sorted(cols - set(ospec.columns)) if ospec.keep_rows else []
                why = (f"{od.id} of the old placement keeps "
                       + (f"no rows of {ci.node.label()} and other partial aggregates"
                          if not ospec.keep_rows else
                          f"{ci.node.label()} without column(s) {', '.join(missing)}" if missing
                          else f"{ci.node.label()} for {ospec.range_s:g} s, not {need:g} s"))
            if carry is None:
                raise NotMovable(f"new {nd.id}: {why}")
            if nd.id in out and out[nd.id].path != carry.path:
                raise NotMovable(f"{nd.id} would take state from two old DB-ops")
            out[nd.id] = out[nd.id] + carry if nd.id in out else carry
    return out


def _equal_slices(new, old) -> list[tuple[str, str]] | None:
    """(old, new) names when every new slice table has an old one of the same fold, width
    and coarse level that keeps at least as long; else None."""
    if not new:
        return None
    pairs = []
    for st in new:
        hit = next((o for o in old if o.fold.sql() == st.fold.sql() and o.width_us == st.width_us
                    and o.coarse_us == st.coarse_us and o.keep_us >= st.keep_us), None)
        if hit is None:
            return None
        pairs.append((hit.name, st.name))
    return pairs

