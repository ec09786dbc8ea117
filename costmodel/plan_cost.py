"""Operator and plan costs: u per operator (eq. 4), C_b and C_u (eqs 5, 6), DB-op cost.

The functions take sizes (costmodel.sizes) and a profile; they never see engines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from costmodel.feed import feed_cost, feed_of
from costmodel.operators import DB_COST, spe_op_cost, state_keys
from costmodel.ordering import ZERO, CostVector
from costmodel.profile import CostProfile
from costmodel.sizes import NodeSize, SourceDrivenSizes
from federation.conventions import US_PER_S, us
from federation.packing import packed_count

if TYPE_CHECKING:  # plan nodes are dispatched on by class name
    from federation.logical import NumberedPlan

@dataclass(frozen=True)
class DbOpCost:
    """Cost per second of a DB-op, split as docs/cost-model.md does: transfer in, SQL per slide, transfer out."""

    transfer_in: float
    maintain: float
    sql: float
    transfer_out: float

    @property
    def total(self) -> float:
        return self.transfer_in + self.maintain + self.sql + self.transfer_out


def db_op_cost(
    plan: NumberedPlan,
    sizes: SourceDrivenSizes,
    members: Iterable[str],
    inputs: Iterable[Iterable[str]],
    root: str | tuple[str, ...],
    p: CostProfile,
) -> DbOpCost:
    """Cost of a DB-op with the given member ops and (deduplicated) inputs, each the op ids
    of every input position reading the same table.

    transfer in = rows/s of each input x Arrow cost; window rows kept for a raw read pay
    their upkeep in DuckDB, rows folded into slices their fold instead; SQL = l x (fixed +
    per member: scan cost x input size, or for a sliced aggregation its slice rows x
    combine cost, nothing for the selections and projections folded below it);
    transfer out = l x result relation size x Arrow cost (docs/cost-model.md). A DB-op of
    several queries may have several roots (a tuple): each one's rows go out.
    """
    members = list(members)
    sliced = sliced_aggregates(plan, set(members))
    packed = packed_counts(plan, members, sliced)
    folded = {pos for pos, _ in sliced.values()} | {pc.input for pc in packed.values()}
    in_chains = {c for _, chain in sliced.values() for c in chain}
    in_chains |= {c for pc in packed.values() for c in (*pc.chain[1:], pc.join, *pc.over)}
    t_in = maintain = 0.0
    for group in inputs:
        group = list(group)
        a, b = db_input_cost(sizes[group[0]], p)
        t_in += a
        if any(pos not in folded for pos in group):
            maintain += b
    # one fold per slice table: aggregates with the same keys over the same input position
    # and folded selections share one (several queries reading one shared selection)
    for pos, chain, keys in {(pos, chain, tuple(getattr(plan.nodes[m], "keys", ())))
                             for m, (pos, chain) in sliced.items()}:
        maintain += sizes[pos].rate * p.db_fold_s_per_row
    for pc in packed.values():
        maintain += sizes[pc.input].rate * p.db_fold_s_per_row
    scan = 0.0
    once = shared_joins(plan, [m for m in members if m not in in_chains], sliced)
    for m in members:
        if m in sliced:
            scan += db_combine_cost(plan, sizes, m, sliced[m][0], p)
        elif m in packed:
            scan += db_packed_cost(plan, sizes, packed[m], p)
        elif m not in in_chains and m not in once:
            scan += db_scan_cost(plan, sizes, m, p)
    roots = (root,) if isinstance(root, str) else tuple(root)
    c = db_op_cost_of(t_in, maintain, scan, sizes[roots[0]], p)
    for r in roots[1:]:
        c = DbOpCost(c.transfer_in, c.maintain, c.sql, c.transfer_out + db_op_cost_of(
            0.0, 0.0, 0.0, sizes[r], p).transfer_out)
    return c


def sliced_aggregates(plan: NumberedPlan, members: set[str]) -> dict[str, tuple[str, tuple]]:
    """The aggregations of a DB-op that fold their window rows into slices (db.sqlgen):
    aggregate members over a time window's rows through member selections and projections
    (db.sqlgen.slices.sliced_chain's rule: the layers keep costmodel/ from importing db/, so the
    rule, and the coarse width in db_combine_cost, are written in both;
    tests/test_costmodel.py checks that they fold the same inputs and price CQ5's coarse
    slices).
    Maps each to (its input position, the members folded below it). An input position over
    a window counts as rows: the cost model does not see a DB-op further below it."""
    out = {}
    for m in members:
        if plan.nodes[m].kind != "aggregate" or not plan.nodes[m].mergeable:
            continue
        chain = []
        (c,) = plan.children[m]
        while c in members and plan.nodes[c].kind in ("select", "project"):
            chain.append(c)
            (c,) = plan.children[c]
        if c in members:
            continue
        w = plan.nodes[c].row_window()
        if w is None or not w.is_time_based or w.cumulate:  # as db/sqlgen/slices.py
            continue
        out[m] = (c, tuple(chain))
    return out


def packed_counts(plan: NumberedPlan, members: Iterable[str], sliced: dict) -> dict:
    """The counts of a DB-op that read their window rows packed (federation.packing, the
    rule db.sqlgen reads too), by aggregate member."""
    members = set(members)
    return {m: pc for m in sorted(members) if m not in sliced
            and (pc := packed_count(plan, members, m)) is not None}


def shared_joins(plan: NumberedPlan, members: list[str], sliced: dict) -> set[str]:
    """The joins of a DB-op computed by an earlier member's join (db.sqlgen.share: grouped
    aggregates of several queries over the same join are one join): a join whose inputs
    (the same operator, or aggregates folded into the same slice table), keys and the
    grouping of the aggregate above it (through selections) are an earlier join's. The
    rule is written here and in db/ (the layers keep costmodel/ from importing db/)."""
    seen, out = set(), set()
    for m in members:
        if plan.nodes[m].kind != "join" or plan.nodes[m].how != "inner":
            continue  # db.sqlgen.share shares inner joins only
        up = _parents(plan, m)
        while len(up) == 1 and up[0] in members and plan.nodes[up[0]].kind == "select":
            up = _parents(plan, up[0])
        if len(up) != 1 or up[0] not in members or plan.nodes[up[0]].kind != "aggregate":
            continue
        sides = tuple(("slices", sliced[c][0], sliced[c][1], plan.nodes[c].keys)
                      if c in sliced else c for c in plan.children[m])
        sig = (sides, plan.nodes[m].keys, plan.nodes[up[0]].keys)
        if sig in seen:
            out.add(m)
        seen.add(sig)
    return out


def db_combine_cost(plan: NumberedPlan, sizes: SourceDrivenSizes, agg: str, pos: str,
                    p: CostProfile) -> float:
    """Per-slide cost of a sliced aggregation: the slice rows its window combines
    (fine slices of gcd(range, slide), sealed coarse ones for long windows, as db.sqlgen
    keeps them) x the combine cost per row."""
    w = plan.nodes[pos].row_window()
    g = math.gcd(us(w.range_s), w.instants.slide_us) / US_PER_S
    n = w.range_s / g  # fine slices per window
    groups = max(sizes[agg].size, 1.0)
    per_fine = min(groups, max(sizes[pos].rate * g, 1.0))  # groups with a row in a slice
    if n < 16:
        rows = n * per_fine
    else:
        k = max(2, round(math.sqrt(n / 2)))  # fine slices per coarse one
        per_coarse = min(groups, max(sizes[pos].rate * g * k, 1.0))
        rows = n / k * per_coarse + k * per_fine
    c = p.db_slice_s_per_row
    return rows * (p.db_scan_s_per_row.aggregate if c is None else c)


def db_packed_cost(plan: NumberedPlan, sizes: SourceDrivenSizes, pc, p: CostProfile
                   ) -> float:
    """Per-slide cost of a count over packed window rows (federation.packing): its join
    and aggregate priced over the packs of a window (groups with a row in a slice x the
    slices of its range, as db_combine_cost counts fine slices) instead of its rows."""
    w = plan.nodes[pc.input].row_window()
    g = math.gcd(us(w.range_s), w.instants.slide_us) / US_PER_S
    groups = max(sizes[pc.agg].size, 1.0)
    packs = w.range_s / g * min(groups, max(sizes[pc.input].rate * g, 1.0))
    other = plan.children[pc.join][1 - pc.side]
    return (DB_COST(plan.nodes[pc.join], packs + sizes[other].size, p)
            + DB_COST(plan.nodes[pc.agg], packs, p))


def db_input_cost(s: NodeSize, p: CostProfile) -> tuple[float, float]:
    """(transfer in, window maintenance) per second of one DB-op input: rows/s x Arrow
    cost; window rows also pay their upkeep in DuckDB."""
    rows = s.rate if s.row_level else s.l * s.size
    return rows * p.db_transfer_in_s_per_row, (
        rows * p.db_window_maintain_s_per_row if s.row_level else 0.0)


def db_scan_cost(plan: NumberedPlan, sizes: SourceDrivenSizes, m: str, p: CostProfile) -> float:
    """Per-slide scan cost of one DB-op member: cost per row of its kind x its input size."""
    return DB_COST(plan.nodes[m], sum(sizes[c].size for c in plan.children[m]), p)


def db_op_cost_of(transfer_in: float, maintain: float, scan: float, root: NodeSize,
                  p: CostProfile) -> DbOpCost:
    """The DB-op cost from its parts: SQL = l x (fixed + scan); out = l x W x Arrow cost."""
    sql = root.l * (p.db_sql_fixed_s + scan)
    return DbOpCost(transfer_in, maintain, sql, root.l * root.size * p.db_transfer_out_s_per_row)


@dataclass(frozen=True)
class PlanCost:
    """The cost of a physical plan: u of every SPE-op and DB-op, the feed's (`gateway`:
    Spark's per-slide cost, or the direct feed's: costmodel/feed.py) and re-entry costs,
    and the cost vector (C_b, C_u) with the capacity constraint applied."""

    vector: CostVector
    spe: dict[str, float]
    db: dict[str, DbOpCost]
    gateway: float
    reentry: float
    feed: str = "spark"  # who reads the streams: "spark" or "direct" (costmodel/feed.py)

    def u_of(self, op_id: str, db_op_id: str | None) -> float:
        """u of the physical operator that executes `op_id` (its DB-op's, if any)."""
        return self.db[db_op_id].total if db_op_id else self.spe.get(op_id, 0.0)


def plan_cost(pp, p: CostProfile, sizes: SourceDrivenSizes | None = None) -> PlanCost:
    """Cost of a physical plan (eqs 4-6 with the extensions of docs/cost-model.md). `pp`
    is read by attributes: `logical`, `placement` and `db_ops` (id, members, root, inputs)."""
    plan = pp.logical
    sizes = sizes if sizes is not None else SourceDrivenSizes.of(plan)
    copies = spe_copies(plan, pp.placement, pp.db_ops)
    spe = {o: copies[o] * spe_op_cost(plan.nodes[o], sizes[o],
                                      [sizes[c] for c in plan.children[o]], p)
           for o in plan.r2r_ids if pp.placement.get(o, "spe") == "spe"}
    db = {d.id: db_op_cost(plan, sizes, d.members, [ci.op_ids for ci in d.inputs],
                           tuple(getattr(d, "outputs", (d.root,))), p)
          for d in pp.db_ops}
    gateway = feed_cost(sizes, plan, p, pp.placement)
    reentries = [reentry_cost(sizes[o], p) for d in pp.db_ops
                 for o in getattr(d, "outputs", (d.root,))
                 if any(q != "root" and q not in d.members for q in _parents(plan, o))]
    us = list(spe.values()) + [c.total for c in db.values()] + ([gateway] if gateway else [])
    us += [u for u in reentries if u]
    return PlanCost(apply_capacity(vector(us), p), spe, db, gateway, sum(reentries),
                    feed_of(plan, p, pp.placement))


def _parents(plan: NumberedPlan, oid: str) -> tuple[str, ...]:
    parents = getattr(plan, "parents", None)
    return parents.get(oid, ()) if parents else (plan.parent[oid],)


def spe_copies(plan: NumberedPlan, placement, db_ops=()) -> dict[str, int]:
    """How many times Spark computes each SPE-placed operator: once per path to where its
    rows leave Spark (a query's result, a DB-op's input: one per DB-op, whatever members
    read it). Spark plans every branch of a stage's output on its own (no shared subplans
    in a streaming query), so an operator that two queries share is computed by each of
    their paths (1 in a plan of one query, a tree)."""
    op_of = {m: d.id for d in db_ops for m in d.members}
    memo: dict[str, int] = {}

    def n(o: str) -> int:
        if o not in memo:
            total = 0
            seen: set[str] = set()
            for q in _parents(plan, o):
                if q == "root" or placement.get(q) == "db":
                    key = op_of.get(q, q)
                    total += key not in seen
                    seen.add(key)
                else:
                    total += n(q)
            memo[o] = max(total, 1)
        return memo[o]

    return {o: n(o) for o in plan.r2r_ids if placement.get(o, "spe") == "spe"}


def apply_capacity(c: CostVector, p: CostProfile) -> CostVector:
    """Capacity constraint (extension): operators share `capacity_cores` cores, so the plan
    keeps up only if C_u / cores <= 1 as well; C_b becomes max(C_b, C_u / cores)."""
    if p.capacity_cores is None:
        return c
    return CostVector(max(c.C_b, c.C_u / p.capacity_cores), c.C_u)


def spe_gateway_cost(sizes: SourceDrivenSizes, plan: NumberedPlan, p: CostProfile) -> float:
    """Per-slide fixed cost of a Spark query that reads the streams (the SPE as the gateway
    of all streams; 0 in the paper's form): what the placement search adds to every
    partial plan (the direct feed's is priced on complete plans: costmodel/feed.py)."""
    return feed_cost(sizes, plan, p)


def reentry_cost(size: NodeSize, p: CostProfile) -> float:
    """A DB-op result that feeds SPE-ops re-enters Spark as a source of one more streaming
    query, which pays the per-micro-batch fixed cost again (measured: a plan with a
    re-entry stage ran at 0.6x the rho of the same work in one stage)."""
    return size.l * p.spe_s_per_slide


def vector(us: Iterable[float]) -> CostVector:
    out = ZERO
    for u in us:
        out = out.add(u)
    return out


__all__ = [
    "DbOpCost",
    "PlanCost",
    "apply_capacity",
    "db_combine_cost",
    "db_input_cost",
    "db_op_cost",
    "db_op_cost_of",
    "db_scan_cost",
    "packed_counts",
    "plan_cost",
    "reentry_cost",
    "sliced_aggregates",
    "spe_copies",
    "spe_gateway_cost",
    "spe_op_cost",
    "state_keys",
    "vector",
]
