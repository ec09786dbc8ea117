"""Sums of doubles compared for equality must come from one engine (docs/sql.md, "Sums of
doubles").

SUM and AVG of DOUBLE add in the order an engine reads the rows and merges its slices or
panes: two copies of one aggregate (a CTE read twice, the two sides of an INTERSECT), one in
Spark and one in DuckDB, can differ in the last bits. Where an operator compares such values
(a group by, which DISTINCT and INTERSECT/EXCEPT are; a join's keys; a selection over
two of them; a row number's partitions and order), a row that the query keeps in exact arithmetic could be lost.
So a placement keeps the aggregates whose double sums meet in one comparison, and the
operators below them, in one engine (`split_sums`, read by `physical.spe_limits`): a copy
whose rows cross an engine boundary adds them in the order the other engine hands them
over. In one engine the copies add alike: Spark merges its partitions' partials in their
order, and a DB-op holding such an aggregate runs its DuckDB on one thread (`in_order`; with two, DuckDB adds the row groups of an input
larger than 122,880 rows in the order its threads finish, which varies from run to run).
"""

from __future__ import annotations

from collections.abc import Mapping

from federation.expressions import infer_type, referenced_columns

#: the aggregates whose DOUBLE result depends on the order of their terms (a session's
#: STDDEV, MEDIAN, ... do not: each engine computes them from its values sorted, alike,
#: db/sqlgen/session_values.py)
ORDERED_SUMS = ("sum", "avg")

Lineage = dict[str, frozenset[str]]  # column -> aggregate ids whose double sums it carries


def _of(cols: Lineage, names) -> frozenset[str]:
    return frozenset().union(*(cols.get(n, frozenset()) for n in names))


def lineage(plan) -> dict[str, Lineage]:
    """Per node id of `plan` (a NumberedPlan), per output column, the aggregates whose
    order-dependent DOUBLE sums reach it (through projections, joins, unions, ...)."""
    out: dict[str, Lineage] = {}
    for oid in plan.post_order():
        node, kids = plan.nodes[oid], [out.get(c, {}) for c in plan.children.get(oid, ())]
        kind = node.kind
        if kind == "aggregate":
            s = node.child.schema
            cols = {k: kids[0].get(k, frozenset()) for k in node.keys}
            for name, call in node.aggs:
                fed = frozenset() if call.arg is None else \
                    _of(kids[0], referenced_columns(call.arg))
                if call.arg is not None and call.func in ORDERED_SUMS and \
                        infer_type(call.arg, s) == "DOUBLE":
                    fed |= {oid}
                cols[name] = fed
        elif kind == "project":
            cols = {n: _of(kids[0], referenced_columns(e)) for n, e in node.outputs}
        elif kind in ("join", "union"):
            cols = {}
            for kid in kids:
                for c, ids in kid.items():
                    cols[c] = cols.get(c, frozenset()) | ids
            if kind == "join":  # a key column is either side's value
                for lk, rk in node.keys:
                    cols[lk] = cols.get(lk, frozenset()) | kids[1].get(rk, frozenset())
        else:  # selections, row numbers, the root: their input's columns
            cols = dict(kids[0]) if kids else {}
        out[oid] = {c: ids for c, ids in cols.items() if ids}
    return out


def compared_sums(plan) -> dict[str, frozenset[str]]:
    """Per operator that compares values for equality, the aggregates whose double sums
    meet there (two or more; one aggregate's values all come from one engine)."""
    lin = lineage(plan)
    out = {}
    for oid in plan.r2r_ids:
        node, kids = plan.nodes[oid], [lin.get(c, {}) for c in plan.children[oid]]
        if node.kind == "aggregate":
            met = _of(kids[0], node.keys)
        elif node.kind == "join":
            met = _of(kids[0], [k for k, _ in node.keys]) | \
                _of(kids[1], [k for _, k in node.keys])
        elif node.kind == "select":
            met = _of(kids[0], referenced_columns(node.predicate))
        elif node.kind == "row_number":  # its partitions and the order within them
            met = _of(kids[0], [*node.partition_by, *(c for c, _ in node.order_by)])
        else:
            continue
        if len(met) > 1:
            out[oid] = met
    return out


def split_sums(plan, placement: Mapping[str, str]) -> list[tuple[str, str]]:
    """(operator, reason) for each Spark-placed operator that splits aggregates whose double
    sums an operator compares: such aggregates, and every operator below them, run in one
    engine. An aggregate in Spark beside one in the DB adds in another order; so does one
    whose rows reach it across an engine boundary, in the order the other engine hands them
    over (the fuzzer's seed 222: two DB-ops' AVGs, each fed by Spark along its own path,
    differed in the last bits and an INTERSECT lost their rows). Each is told to go to db."""
    out: dict[str, str] = {}
    r2r = set(plan.r2r_ids)  # the operators below an aggregate, not the windows at leaves
    for where, ids in compared_sums(plan).items():
        below = {i: [o for o in plan.subtree(i) if o in r2r] for i in sorted(ids)}
        if len({placement.get(o, "spe") for ops in below.values() for o in ops}) < 2:
            continue
        db = sorted(i for i in ids if placement.get(i, "spe") == "db")
        for i, ops in below.items():
            others = ", ".join(sorted(ids - {i}))
            for o in ops:
                if placement.get(o, "spe") == "db":
                    continue
                if o == i and db:
                    why = (f"{i} (aggregate) adds DOUBLE values that {where} compares for "
                           f"equality with the sums of {', '.join(db)} in the DB")
                elif o == i:
                    why = (f"{i} (aggregate) adds DOUBLE values that {where} compares for "
                           f"equality with the sums of {others}, and reads rows the DB "
                           "hands over")
                else:
                    why = (f"{o} ({plan.nodes[o].kind}) feeds {i} (aggregate), whose DOUBLE "
                           f"sums {where} compares for equality with those of {others}, "
                           "across an engine boundary")
                out.setdefault(o, why + "; engines add in different orders (docs/sql.md, "
                               "'Sums of doubles'), so the aggregates and the operators "
                               "below them run in one engine; place it in db")
    return list(out.items())


def in_order(physical) -> set[str]:
    """The DB-ops of `physical` (a PhysicalPlan) that hold an aggregate whose double sums an
    operator compares: their DuckDB runs on one thread (module doc)."""
    ids = set().union(*compared_sums(physical.logical).values())
    return {d.id for d in physical.db_ops if ids & set(d.members)}
