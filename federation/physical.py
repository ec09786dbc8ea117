"""Physical plans: SPE-ops and DB-ops over a logical plan (paper section 4).

A placement maps every R2R operator to "spe" or "db". DB-placed operators form the DB-ops
(the paper's migration candidates): each maximal connected group is one DB-op, run as one
SQL query in DuckDB behind a MIG operator on the Spark side. The physical plan is
structure only: the placement, the DB-ops, their input tables and their SQL (a sqlglot
tree). What it costs is the cost model's (`costmodel.plan_cost.plan_cost`).

Example:
    >>> from federation.smartplug.queries import cq5_plan
    >>> from federation.logical import NumberedPlan
    >>> plan = NumberedPlan.of(cq5_plan())
    >>> pp = build_physical_plan(plan, {"op1": "spe", "op2": "db", "op3": "db"})
    >>> [(d.id, d.members, [i.table for i in d.inputs]) for d in pp.db_ops]
    [('db1', ('op2', 'op3'), ['in0'])]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from db.sqlgen import SliceTable
from federation.conventions import stored_columns
from federation.errors import PlacementError
from federation.logical import (
    Node,
    NumberedPlan,
    input_key,
    is_row_level,
)
from federation.logical.float_sums import split_sums
from federation.logical.sessions import spark_limit
from federation.physical_sql import program, structure

ENGINES = ("spe", "db")


@dataclass(frozen=True)
class DbOpInput:
    """One input table of a DB-op: a window's rows (row-level) or an SPE-op's relation."""

    table: str
    op_ids: tuple[str, ...]  # every input position reading this table (identical subtrees)
    node: Node
    row_level: bool


@dataclass(frozen=True)
class DbOp:
    """A DB-op (the paper's migration candidate): a connected subtree of R2R operators run
    as one SQL query in DuckDB; `root` is its top operator."""

    id: str
    members: tuple[str, ...]
    root: str
    inputs: tuple[DbOpInput, ...]
    sql: exp.Select  # per slide instant, parameters $tau and $tau_us (db.sqlgen)
    slices: tuple[SliceTable, ...] = ()  # partial aggregates folded per micro-batch
    raw: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # tables read as rows
    raw_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # ... and kept
    #: every member whose rows leave the DB-op (several only in a plan of several
    #: queries: its SQL then yields each root's rows tagged `_out`, db.sqlgen.statement)
    roots: tuple[str, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.roots or (self.root,)

    sql_text = property(lambda self: self.sql.sql(dialect="duckdb", pretty=True))

    def input_columns(self, ci: DbOpInput) -> dict[str, str]:
        """Input `ci`'s columns (but `_ts`/`_tau`) as runtime/mig.py creates them and
        costmodel/memory.py sizes: a table's own, the SQL's of raw rows, else all."""
        cols = ci.node.columns if ci.node.kind == "table" else \
            stored_columns(ci.node).items() if ci.row_level else ci.node.schema.items()
        kept = self.raw_columns.get(ci.table) if ci.row_level else None
        return {c: t for c, t in cols if kept is None or c in kept}


@dataclass(frozen=True)
class PhysicalPlan:
    """P(T) = (O', E', M): the logical plan, where each operator runs, and the DB-ops."""

    logical: NumberedPlan
    placement: dict[str, str]
    db_ops: tuple[DbOp, ...]
    #: the Spark capacity it was chosen for, when not the local profile's (spe/session.py)
    chosen_for: str | None = field(default=None, compare=False)

    def engine_of(self, op_id: str) -> str:
        return self.placement.get(op_id, "spe")

    def db_op_of(self, op_id: str) -> DbOp | None:
        """The DB-op that executes `op_id`, or None when it runs in Spark."""
        return next((d for d in self.db_ops if op_id in d.members), None)

    @property
    def placement_string(self) -> str:
        """Explicit placement as `fedq run --placement` takes it."""
        return placement_string(self.placement)


def placement_string(placement: Mapping[str, str]) -> str:
    """'op1=spe,op2=db,...': the form `fedq run --placement` and explain use."""
    return ",".join(f"{o}={e}" for o, e in placement.items())


def db_op_groups(plan: NumberedPlan, placement: Mapping[str, str]) -> list[list[str]]:
    """Maximal connected groups of DB-placed operators, each in post order. Of several
    queries (a DAG), groups at the same stage that read the same input are one DB-op too
    (one input table and one slice table for all its readers: `shared_groups`)."""
    index = {o: i for i, o in enumerate(plan.post_order())}
    group = _connected(plan, placement)
    if plan.many:
        _refuse_cycles(plan, group)
        shared_groups(plan, placement, group)
    return sorted((sorted(g, key=index.__getitem__) for g in group.sets()),
                  key=lambda g: index[g[0]])


def _connected(plan: NumberedPlan, placement: Mapping[str, str]) -> _Groups:
    group = _Groups([o for o in plan.post_order() if placement.get(o) == "db"])
    for o in group.items:
        for c in plan.children[o]:
            if placement.get(c) == "db":
                group.union(o, c)
    return group


class _Groups:
    """Union-find over operator ids."""

    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.up = {o: o for o in items}

    def find(self, o: str) -> str:
        while self.up[o] != o:
            self.up[o] = self.up[self.up[o]]
            o = self.up[o]
        return o

    def union(self, a: str, b: str) -> None:
        self.up[self.find(a)] = self.find(b)

    def sets(self) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for o in self.items:
            out.setdefault(self.find(o), []).append(o)
        return list(out.values())


def _refuse_cycles(plan: NumberedPlan, group: _Groups) -> None:
    """A DB-op may not read its own output through SPE-ops: in a plan where an operator
    has several readers (several queries) a placement can put a shared operator and a
    reader of it in one DB-op and another reader between them in Spark."""
    if (found := _cycle(plan, group)) is not None:
        members, them = found[0], ", ".join(found[1]) or "SPE-ops"
        raise PlacementError(f"the DB-op of {', '.join(members)} would read its own output "
                             f"through Spark ({them} in spe between them): place {them} in "
                             "db too, or split the DB-op")


def db_cycle(plan: NumberedPlan, placement: Mapping[str, str]) -> list[str] | None:
    """The SPE-ops between a DB-op and its own output under `placement` (what
    `_refuse_cycles` refuses; the fuzzer places them in db instead), None without one."""
    return None if (found := _cycle(plan, _connected(plan, placement))) is None else found[1]


def _cycle(plan: NumberedPlan, group: _Groups) -> tuple[list[str], list[str]] | None:
    sets = group.sets()
    comp = {o: i for i, g in enumerate(sets) for o in g}
    memo: dict[str, frozenset[int]] = {}

    def feeds(o: str) -> frozenset[int]:  # the DB-ops whose output `o`'s rows depend on
        if o not in memo:
            memo[o] = frozenset((comp[o],)) if o in comp else frozenset().union(
                *(feeds(c) for c in plan.children[o]))
        return memo[o]

    deps = {i: frozenset().union(*(feeds(c) for m in g for c in plan.children[m]
                                   if c not in comp)) for i, g in enumerate(sets)}
    state: dict[int, int] = {}

    def visit(i: int) -> tuple[list[str], list[str]] | None:
        state[i] = 1
        for j in deps[i]:
            if state.get(j) == 1:
                return sets[i], sorted(
                    o for o in plan.r2r_ids if o not in comp and j in feeds(o)
                    and any(comp.get(q) == i for q in plan.parents.get(o, ())))
            if j not in state and (found := visit(j)) is not None:
                return found
        state[i] = 2
        return None

    return next((f for i in range(len(sets)) if i not in state and (f := visit(i))), None)


def shared_groups(plan: NumberedPlan, placement: Mapping[str, str], group: _Groups) -> None:
    """Merge DB groups that read an input with the same `input_key` and run at the same
    stage (neither depends on the other: a dependency puts the reader a stage later)."""
    sets = {group.find(o): g for g in group.sets() for o in g}
    memo: dict[str, int] = {}

    def node_stage(o: str) -> int:
        if o not in memo:
            if placement.get(o) == "db":  # a DB-op's output re-enters one stage later
                g = sets[group.find(o)]
                memo[o] = 1 + max((node_stage(c) for m in g for c in plan.children[m]
                                   if c not in g), default=0)
            else:
                memo[o] = max((node_stage(c) for c in plan.children[o]), default=0)
        return memo[o]

    first: dict[tuple, str] = {}
    for g in group.sets():
        gs = set(g)
        for m in g:
            for c in plan.children[m]:
                if c in gs:
                    continue
                key = (node_stage(m), input_key(plan.nodes[c],
                                                reads_window_rows(plan, c, placement)))
                if key in first:
                    group.union(first[key], m)
                else:
                    first[key] = m


def roots_of(plan: NumberedPlan, members: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The members whose rows leave the DB-op: read by a non-member or a query's result."""
    ms = set(members)
    return tuple(m for m in members if any(p not in ms for p in plan.parents.get(m, ("root",))))


def reads_window_rows(plan: NumberedPlan, oid: str, placement: Mapping[str, str]) -> bool:
    """True when the SPE delivers `oid` as window rows with their event time: a window and
    SPE-placed selections and projections over it. A DB-op below the chain turns the rows
    into a per-instant relation (its result re-enters Spark tagged with the instant)."""
    node = plan.nodes[oid]
    if not is_row_level(node):
        return False
    while oid in plan.children and plan.children[oid] and placement.get(oid) != "db":
        (oid,) = plan.children[oid]
    return placement.get(oid) != "db"


def spe_limits(plan: NumberedPlan, placement: Mapping[str, str]) -> list[tuple[str, str]]:
    """(operator, reason) for each operator a placement puts in Spark that Spark cannot run
    (`sessions.spark_limit`: a tuple window's readers, an aggregate of sessions' bounds),
    or in Spark apart from where it must be (`float_sums.split_sums`)."""
    out = split_sums(plan, placement)
    for oid in plan.r2r_ids:
        node = plan.nodes[oid]
        why = spark_limit(node, [plan.nodes[c] for c in plan.children[oid]])
        if why and placement.get(oid, "spe") != "db":
            out.append((oid, f"{oid} ({node.kind}) cannot run in Spark: {why}; place it in db"))
    return out


def db_op_inputs(plan: NumberedPlan, members: list[str],
                 placement: Mapping[str, str] | None = None) -> list[DbOpInput]:
    """Inputs of a DB-op; inputs with the same `input_key` share one table and are
    transferred once (identical subtrees, and window rows that differ only in their range)."""
    placement = placement or {}
    ms = set(members)
    out: list[DbOpInput] = []
    keys: list[object] = []
    for m in members:
        for c in plan.children[m]:
            if c in ms:
                continue
            node = plan.nodes[c]
            row_level = reads_window_rows(plan, c, placement)
            key = input_key(node, row_level)
            if key in keys:
                i = keys.index(key)
                ci = out[i]
                if c not in ci.op_ids:  # a shared input read by several members: once
                    out[i] = DbOpInput(ci.table, ci.op_ids + (c,), ci.node, ci.row_level)
            else:
                keys.append(key)
                out.append(DbOpInput(f"in{len(out)}", (c,), node, row_level))
    return out


def parse_placement(plan: NumberedPlan, placement: str | Mapping[str, str]) -> dict[str, str]:
    """'spe', 'db', a mapping, or 'op1=db,op3=db' (unlisted operators run in the SPE)."""
    ops = plan.r2r_ids
    if isinstance(placement, str):
        text = placement.strip().lower()
        if text in ENGINES:
            return {o: text for o in ops}
        if not text:
            raise PlacementError("placement is empty: give 'auto', 'spe', 'db' or op=engine "
                                 "items (e.g. op2=db,op3=db)")
        mapping: dict[str, str] = {}
        for part in (p.strip() for p in text.split(",")):
            if "=" not in part:
                raise PlacementError(
                    f"placement item {part!r}: expected op=engine (e.g. op2=db), 'spe' or 'db'"
                )
            k, v = (x.strip() for x in part.split("=", 1))
            if k in mapping:
                raise PlacementError(f"placement names {k!r} twice ({k}={mapping[k]} and "
                                     f"{k}={v})")
            mapping[k] = v
        placement = mapping
    out = {o: "spe" for o in ops}
    for k, v in placement.items():
        if k not in out:
            what = "a window (windows stay in the SPE)" if k.startswith("w") else "not an operator"
            raise PlacementError(
                f"placement names {k!r}: {what}; operators are {', '.join(ops)}"
            )
        if v not in ENGINES:
            raise PlacementError(f"placement of {k}: unknown engine {v!r} (spe or db)")
        out[k] = v
    return out


def build_physical_plan(plan: NumberedPlan, placement: str | Mapping[str, str],
                        sql: bool = True) -> PhysicalPlan:
    """The physical plan of a placement: its DB-ops, their inputs and SQL. A placement that
    puts in Spark what Spark cannot run (`spe_limits`) is refused, naming the operator.
    `sql=False`: the structure only, what the cost model reads (no SQL generated)."""
    pl = parse_placement(plan, placement)
    limits = spe_limits(plan, pl)
    if limits:
        raise PlacementError("; ".join(why for _, why in limits))
    db_ops, key = [], structure(plan) if sql else ""
    for i, members in enumerate(db_op_groups(plan, pl), start=1):
        inputs = db_op_inputs(plan, members, pl)
        roots = roots_of(plan, members)
        if not sql:
            db_ops.append(DbOp(f"db{i}", tuple(members), roots[0], tuple(inputs), None,
                               roots=roots))  # type: ignore[arg-type]
            continue
        prog = program(key, plan, members, [(ci.table, o) for ci in inputs for o in ci.op_ids],
                       {o for ci in inputs if ci.row_level for o in ci.op_ids})
        db_ops.append(DbOp(f"db{i}", tuple(members), roots[0], tuple(inputs), prog.query,
                           prog.slices, prog.raw, prog.raw_columns, roots))
    return PhysicalPlan(plan, pl, tuple(db_ops))
