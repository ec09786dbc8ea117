"""`fedq explain`: the chosen physical plan as a tree, as text or JSON (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from costmodel.memory import mib
from costmodel.plan_cost import PlanCost
from federation.logical import Window
from federation.optimizer import OptimizationResult, optimize
from federation.physical import PhysicalPlan, spe_limits
from federation.runtime.direct import stage_feeds


def plan_tree(plan: PhysicalPlan, cost: PlanCost) -> list[str]:
    """One line per operator, indented by depth: id, engine, u, label."""
    lines: list[str] = []
    lg = plan.logical
    shared = lg.shared_ops() if lg.many else {}
    tops = {t: q for q, t in lg.tops.items()} if lg.many else {}
    shown: set[str] = set()

    def rec(oid: str, depth: int) -> None:
        node = lg.nodes[oid]
        pad = "  " * depth
        if oid in shown and oid in shared:  # a shared operator: its subtree is above
            lines.append(f"{pad}{oid:<5} (shared by {', '.join(shared[oid])}: see above)")
            return
        shown.add(oid)
        if oid in tops:
            lines.append(f"{pad}query {tops[oid]}:")
            pad += "  "
        if oid == "root":
            lines.append(f"{pad}{node.label()}")
        elif isinstance(node, Window):
            lines.append(f"{pad}{oid:<5} SPE  (leaf)        {node.label()}")
        else:
            eng = plan.engine_of(oid)
            d = plan.db_op_of(oid)
            where = f"DB {d.id}" if d else "SPE"
            u = (f"u={cost.u_of(oid, d and d.id):.4g}" if not d or d.root == oid
                 else f"  (in {d.id})")
            lines.append(f"{pad}{oid:<5} {where:<6} {u:<12} {node.label()}")
            assert eng in ("spe", "db")
        for c in lg.children[oid]:
            rec(c, depth + 1)

    rec("root", 0)
    return lines


def sharing_lines(p: PhysicalPlan) -> list[str]:
    """Of several queries: each shared operator, its queries and how often it is computed
    (once in a DB-op; in Spark once per path to a result or DB-op, costmodel.plan_cost)."""
    from costmodel.plan_cost import spe_copies

    lg = p.logical
    if not lg.many:
        return []
    copies = spe_copies(lg, p.placement, p.db_ops)
    out = []
    for oid, queries in lg.shared_ops().items():
        d = p.db_op_of(oid)
        if isinstance(lg.nodes[oid], Window):
            how = "one ingest and one spool, read by each Spark stage that needs it"
        elif d is not None:
            how = f"computed once in {d.id}"
        else:
            n = copies.get(oid, 1)
            how = "computed once in Spark" if n == 1 else \
                f"computed {n} times in Spark (a streaming query shares no subplans)"
        out.append(f"shared: {oid} by {', '.join(queries)}: {how}")
    for d in p.db_ops:
        if len(d.outputs) > 1:
            out.append(f"shared: {d.id} serves {', '.join(d.outputs)} in one statement per "
                       f"instant, over {len(d.inputs)} input table(s) and "
                       f"{len(d.slices)} slice table(s)")
    return out


def engine_limits(p: PhysicalPlan) -> list[tuple[str, str]]:
    """What an engine cannot run in this query, whatever the placement: the operators that
    cannot be in Spark when everything below them is (physical.spe_limits)."""
    return spe_limits(p.logical, {o: "spe" for o in p.logical.r2r_ids})


def memory_lines(r: OptimizationResult) -> list[str]:
    """Predicted state per engine against its capacity, and the qualification verdict."""
    m = r.memory
    if m is None:
        return []
    if m.unavailable:
        return [f"memory: predicted memory unavailable ({m.unavailable}): not checked"]
    verdict = "qualified" if r.qualified else (
        "NOT qualified: " + "; ".join(m.exceeded() or ["it does not keep up (C_b > 1)"]))
    if not r.memory_check:
        verdict += " (memory check off)"
    out = [(f"memory: Spark state {mib(m.spe_bytes)} of {mib(m.spe_capacity)}, DuckDB "
            f"{mib(m.db_bytes)} of {mib(m.db_capacity)}  {verdict}")]
    for pl, why in r.unqualified:
        out.append(f"passed over (memory): {pl}: {'; '.join(why)}")
    return out


def feed_line(p: PhysicalPlan) -> str:
    """How each stage gets its micro-batches under the default feed (runtime/direct.py)."""
    feeds = stage_feeds(p)
    says = ", ".join(f"stage {i} {f}" for i, f in enumerate(feeds))
    if all(f == "direct" for f in feeds):
        return f"feed: direct ({says}: its spool read by fedq, no Spark query, no JVM)"
    return f"feed: {says} (direct: the spool read by fedq; spark: a streaming query)"


def explain_text(r: OptimizationResult) -> str:
    """Human-readable explain output."""
    p = r.plan
    out = [f"query {p.logical.root.name}: placement {p.placement_string}"]
    pc = r.plan_cost
    out += plan_tree(p, pc)
    feas = "feasible" if r.feasible else "INFEASIBLE"
    check = "" if r.feasibility_check else " (feasibility check off: ranked by C_u)"
    out.append(
        f"C_b = {r.cost.C_b:.4g}  C_u = {r.cost.C_u:.4g}  {feas}{check}"
    )
    if pc.gateway:
        out.append(f"(includes the Spark per-slide gateway cost u={pc.gateway:.4g})"
                   if pc.feed == "spark" else
                   f"(includes the direct feed's cost u={pc.gateway:.4g}: no Spark query "
                   "reads the streams)")
    out += memory_lines(r)
    out.append(f"capacity: Spark {r.spe_cores:g} cores"
               f"{f' ({p.chosen_for})' if p.chosen_for else ''}")
    out.append(
        f"plans examined: {r.plans_examined} (of 2^{len(p.logical.r2r_ids)} = "
        f"{2 ** len(p.logical.r2r_ids)}), subplans: {r.subplans}, join shape: {r.join_shape}"
    )
    for _, why in engine_limits(p):
        out.append(f"engine limit: {why}")
    out += sharing_lines(p)
    out.append(feed_line(p))
    out.append(f"phase one: {r.phase_one_s * 1000:.2f} ms  phase two: {r.phase_two_s * 1000:.2f} ms")
    for d in p.db_ops:
        ins = ", ".join(
            f"{i.table} <- {'/'.join(i.op_ids)} ({'window rows' if i.row_level else 'relation'})"
            for i in d.inputs
        )
        c = pc.db[d.id]
        out.append(f"-- {d.id}: members {', '.join(d.members)}; inputs {ins}; u={c.total:.4g} "
                   f"(in {c.transfer_in:.3g} + maintain {c.maintain:.3g} + "
                   f"sql {c.sql:.3g} + out {c.transfer_out:.3g})")
        out.append(d.sql_text + ";")
    return "\n".join(out)


def explain_json(r: OptimizationResult) -> dict[str, Any]:
    """The same as a JSON-ready dict."""
    p = r.plan
    lg = p.logical
    queries = lg.queries_of()
    ops = []
    for oid in lg.post_order():
        node = lg.nodes[oid]
        if oid == "root":
            continue
        d = p.db_op_of(oid)
        ops.append({
            "id": oid,
            "kind": node.kind,
            "label": node.label(),
            "engine": "spe" if isinstance(node, Window) else p.engine_of(oid),
            "db_op": d.id if d else None,
            "queries": list(queries.get(oid, ())),
            "u": None if isinstance(node, Window) else r.plan_cost.u_of(oid, d and d.id),
            "children": list(lg.children[oid]),
        })
    return {
        "query": lg.root.name,
        "queries": dict(lg.tops),
        "shared": {o: list(q) for o, q in lg.shared_ops().items()} if lg.many else {},
        "placement": p.placement,
        "operators": ops,
        "C_b": r.cost.C_b,
        "C_u": r.cost.C_u,
        "feasible": r.feasible,
        "feasibility_check": r.feasibility_check,
        "qualified": r.qualified,
        "memory_check": r.memory_check,
        "spe_cores": r.spe_cores,
        "spe_capacity": p.chosen_for,
        "memory": None if r.memory is None else {
            "spe_bytes": r.memory.spe_bytes, "db_bytes": r.memory.db_bytes,
            "spe_capacity": r.memory.spe_capacity, "db_capacity": r.memory.db_capacity,
            "exceeded": r.memory.exceeded(), "unavailable": r.memory.unavailable,
            "spe_ops": {o: {"rows": st.rows, "bytes": st.bytes} for o, st in r.memory.spe.items()},
            "db_ops": {o: {"rows": st.rows, "bytes": st.bytes} for o, st in r.memory.db.items()}},
        "unqualified": [{"placement": pl, "exceeded": list(why)} for pl, why in r.unqualified],
        "plans_examined": r.plans_examined,
        "r2r_operators": len(lg.r2r_ids),
        "subplans": r.subplans,
        "join_shape": r.join_shape,
        "engine_limits": [{"operator": o, "reason": why} for o, why in engine_limits(p)],
        "stage_feeds": stage_feeds(p),
        "phase_one_s": r.phase_one_s,
        "phase_two_s": r.phase_two_s,
        "db_ops": [
            {"id": c.id, "members": list(c.members), "outputs": list(c.outputs),
             "u": r.plan_cost.db[c.id].total,
             "cost": {"transfer_in": r.plan_cost.db[c.id].transfer_in,
                      "maintain": r.plan_cost.db[c.id].maintain,
                      "sql": r.plan_cost.db[c.id].sql,
                      "transfer_out": r.plan_cost.db[c.id].transfer_out},
             "inputs": [{"table": i.table, "from": list(i.op_ids), "row_level": i.row_level}
                        for i in c.inputs],
             "sql": c.sql_text}
            for c in p.db_ops
        ],
    }


def sweep(make_query, rates: list[float], **kw) -> list[dict[str, Any]]:
    """The optimal placement at each rate, and where it changes."""
    rows = []
    prev = None
    for rate in rates:
        r = optimize(make_query(rate=rate), **kw)
        pl = r.plan.placement_string
        rows.append({
            "rate": rate, "placement": pl, "C_b": r.cost.C_b, "C_u": r.cost.C_u,
            "feasible": r.feasible, "changed": pl != prev,
        })
        prev = pl
    return rows
