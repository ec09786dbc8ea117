"""Physical plans: SPE-ops, DB-ops (migration candidates) and their MIG wrappers (DESIGN 4).

A placement maps every R2R operator to "spe" or "db". DB-placed operators form the DB-ops:
each maximal connected group is one migration candidate, run as one SQL query in DuckDB
behind a MIG operator on the Spark side.

Example:
    >>> from federation.smartplug.queries import cq5_plan
    >>> from federation.logical import NumberedPlan
    >>> plan = NumberedPlan.of(cq5_plan())
    >>> pp = build_physical_plan(plan, {"op1": "spe", "op2": "db", "op3": "db"})
    >>> [(c.id, c.members, [i.table for i in c.inputs]) for c in pp.candidates]
    [('db1', ('op2', 'op3'), ['in0'])]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from costmodel.ordering import CostVector
from costmodel.plan_cost import (
    DbOpCost,
    apply_capacity,
    db_op_cost,
    reentry_cost,
    spe_gateway_cost,
    spe_op_cost,
    vector,
)
from costmodel.profile import CostProfile, load_profile
from costmodel.sizes import SourceDrivenSizes
from db.sqlgen import candidate_sql
from federation.errors import PlacementError
from federation.logical import (
    Node,
    NumberedPlan,
    Window,
    is_row_level,
    leaf_window,
    shared_input_key,
)

ENGINES = ("spe", "db")


@dataclass(frozen=True)
class CandidateInput:
    """One input table of a DB-op: a window's rows (row-level) or an SPE-op's relation."""

    table: str
    op_ids: tuple[str, ...]  # every input position reading this table (identical subtrees)
    node: Node
    row_level: bool


@dataclass(frozen=True)
class MigrationCandidate:
    """A DB-op: a connected subtree of R2R operators run as one SQL query in DuckDB."""

    id: str
    members: tuple[str, ...]
    root: str
    inputs: tuple[CandidateInput, ...]
    sql: str
    cost: DbOpCost

    @property
    def u(self) -> float:
        return self.cost.total


@dataclass(frozen=True)
class MigOperator:
    """The SPE-side wrapper of one DB-op: ships its inputs to DuckDB as Arrow, runs its SQL
    at each slide and sends the result (tau, rows) to `consumer` (an op id or 'root')."""

    candidate: MigrationCandidate
    consumer: str


@dataclass(frozen=True)
class PhysicalPlan:
    """P(T) = (O', E', M): SPE-ops and DB-ops over the logical plan, with their costs."""

    logical: NumberedPlan
    placement: dict[str, str]
    candidates: tuple[MigrationCandidate, ...]
    spe_costs: dict[str, float]
    gateway_cost: float
    cost: CostVector
    sizes: SourceDrivenSizes = field(repr=False)

    @property
    def migs(self) -> tuple[MigOperator, ...]:
        return tuple(
            MigOperator(c, self.logical.parent[c.root] or "root") for c in self.candidates
        )

    def engine_of(self, op_id: str) -> str:
        return self.placement.get(op_id, "spe")

    def candidate_of(self, op_id: str) -> MigrationCandidate | None:
        for c in self.candidates:
            if op_id in c.members:
                return c
        return None

    def u_of(self, op_id: str) -> float:
        """u of the physical operator that executes `op_id`."""
        c = self.candidate_of(op_id)
        return c.u if c else self.spe_costs.get(op_id, 0.0)

    @property
    def placement_string(self) -> str:
        """Explicit placement as `fedq run --placement` takes it."""
        return ",".join(f"{o}={e}" for o, e in self.placement.items())

    @property
    def is_feasible(self) -> bool:
        return self.cost.is_feasible


def candidate_groups(plan: NumberedPlan, placement: Mapping[str, str]) -> list[list[str]]:
    """Maximal connected groups of DB-placed operators, each in post order."""
    groups: list[list[str]] = []
    seen: set[str] = set()
    for oid in plan.post_order():
        if placement.get(oid) != "db" or oid in seen:
            continue
        # climb to the top of this connected group, then collect its subtree members
        top = oid
        while plan.parent.get(top) and placement.get(plan.parent[top]) == "db":  # type: ignore[arg-type]
            top = plan.parent[top]  # type: ignore[assignment]
        members = [m for m in plan.subtree(top) if placement.get(m) == "db" and _connected(
            plan, placement, m, top)]
        seen.update(members)
        groups.append(members)
    return groups


def _connected(plan: NumberedPlan, placement: Mapping[str, str], m: str, top: str) -> bool:
    while m != top:
        if placement.get(m) != "db":
            return False
        m = plan.parent[m]  # type: ignore[assignment]
    return True


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


def tuple_window_rows(plan: NumberedPlan, oid: str) -> bool:
    """True when `oid` is a tuple window or selections and projections over one."""
    node = plan.nodes[oid]
    return is_row_level(node) and not leaf_window(node).is_time_based


def spe_limits(plan: NumberedPlan, placement: Mapping[str, str]) -> list[tuple[str, str]]:
    """(operator, reason) for each operator a placement puts in Spark that Spark cannot run.
    Spark has no tuple windows: the last n rows before an instant exist only in the DB, so
    every operator that reads a tuple window runs there (a selection in Spark would filter
    before the window counts its n rows, which is another query)."""
    out = []
    for oid in plan.r2r_ids:
        if placement.get(oid, "spe") == "db":
            continue
        node = plan.nodes[oid]
        for c in plan.children[oid]:
            w = plan.nodes[c]
            if isinstance(w, Window) and not w.is_time_based:
                why = (f"{oid} ({node.kind}) cannot run in Spark: it reads a tuple window "
                       f"({w.label()}), which only the DB has; place it in db")
                out.append((oid, why))
                break
    return out


def candidate_inputs(plan: NumberedPlan, members: list[str],
                     placement: Mapping[str, str] | None = None) -> list[CandidateInput]:
    """Inputs of a DB-op; identical inputs (same stream, window and pushed-down operators)
    share one table and are transferred once (DESIGN 4); row-level inputs that differ only
    in their window's range share one too (`shared_input_key`)."""
    placement = placement or {}
    ms = set(members)
    out: list[CandidateInput] = []
    for m in members:
        for c in plan.children[m]:
            if c in ms:
                continue
            node = plan.nodes[c]
            row_level = reads_window_rows(plan, c, placement)
            key = shared_input_key(node) if row_level else ("node", node)
            for i, ci in enumerate(out):
                same = (ci.node == node and not row_level) if not ci.row_level else (
                    row_level and shared_input_key(ci.node) == key)
                if same:
                    out[i] = CandidateInput(ci.table, ci.op_ids + (c,), ci.node, ci.row_level)
                    break
            else:
                out.append(CandidateInput(f"in{len(out)}", (c,), node, row_level))
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


def build_physical_plan(
    plan: NumberedPlan,
    placement: str | Mapping[str, str],
    profile: CostProfile | None = None,
    sizes: SourceDrivenSizes | None = None,
    render_sql: bool = True,
) -> PhysicalPlan:
    """The physical plan of a placement, with its DB-ops' SQL and every operator's cost."""
    profile = profile or load_profile()
    sizes = sizes if sizes is not None else SourceDrivenSizes.of(plan)
    pl = parse_placement(plan, placement)
    limits = spe_limits(plan, pl)
    if limits:
        raise PlacementError("; ".join(why for _, why in limits))
    spe_costs = {
        o: spe_op_cost(plan.nodes[o], sizes[o], [sizes[c] for c in plan.children[o]], profile)
        for o in plan.r2r_ids
        if pl[o] == "spe"
    }
    cands = []
    for i, members in enumerate(candidate_groups(plan, pl), start=1):
        inputs = candidate_inputs(plan, members, pl)
        root = next(m for m in members if plan.parent[m] not in members)
        cost = db_op_cost(plan, sizes, members, [ci.op_ids[0] for ci in inputs], root, profile)
        sql = candidate_sql(
            plan, members, [(ci.table, o) for ci in inputs for o in ci.op_ids],
            row_level={o for ci in inputs if ci.row_level for o in ci.op_ids},
        ).sql(dialect="duckdb", pretty=True) if render_sql else ""

        cands.append(MigrationCandidate(f"db{i}", tuple(members), root, tuple(inputs), sql, cost))
    gateway = spe_gateway_cost(sizes, plan, profile)
    reentries = [reentry_cost(sizes[c.root], profile) for c in cands
                 if plan.parent[c.root] != "root"]
    us = list(spe_costs.values()) + [c.u for c in cands] + ([gateway] if gateway else [])
    us += [u for u in reentries if u]
    cost = apply_capacity(vector(us), profile)
    return PhysicalPlan(plan, pl, tuple(cands), spe_costs, gateway, cost, sizes)

