"""The query generator of the differential fuzzer: a Hypothesis strategy of random valid
queries over the smart-plug stream, with placements and a micro-batch size (fuzz.py runs
them).

Besides windows, selections, projections, aggregations and joins in random orders, it
writes the families strangers write: joins of window rows over windows of different ranges,
each side with its own selection and renaming projection, often aggregated (by a key or
globally) and projected; computed columns of every type (CASE, comparisons, literals,
integer and double arithmetic, casts between INT, BIGINT, DOUBLE, BOOLEAN and VARCHAR,
integer division, modulo of negatives, ROUND), carried through joins and used as aggregate
keys and arguments; output names in camelCase, UPPER case, 40-60 characters long, or equal
to SQL keywords and function names; and, per query, explicit placements that cut every
parent-child edge of the plan both ways. `shapes_of` names the families a query contains
(`Generated.shapes`, counted by fuzz.py's report).

The generator is split along its seams: fuzz_domain.py (the data, names, types, hints;
`Generated`), fuzz_builder.py (the builder: relations, selections, projections, unions)
with one mixin per family of constructs: fuzz_leaves.py (windows, tables, sessions),
fuzz_aggregates.py, fuzz_joins.py (joins, membership), fuzz_partitions.py (OVER, frames,
ranks) and fuzz_expressions.py (names, predicates, computed columns and casts);
fuzz_functions.py (the Python functions and aggregates the queries call), fuzz_sizes.py
(rows per instant), fuzz_shapes.py
(the families of a query); this module has the strategy and the placements.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from benchmarks.fuzz_builder import _Builder
from benchmarks.fuzz_domain import (  # the generator's names, for fuzz.py and the tests
    HOUSES,
    OTHER,
    PLUGS,
    RATE,
    SECONDS,
    TABLE,
    Generated,
    _logical,
    table_db,
)
from benchmarks.fuzz_shapes import SHAPES, shapes_of
from benchmarks.fuzz_sizes import _below, _ops
from federation.logical import Relation, Rstream

__all__ = ["HOUSES", "OTHER", "PLUGS", "RATE", "SECONDS", "SHAPES", "TABLE", "Generated",
           "_logical", "alternating_placements", "as_query_set", "queries", "table_db"]

#: a windowed function (OVER, LAG, a frame) is drawn over at most this many operators
WINDOWED_OPS = 20

# -- the strategy --------------------------------------------------------------------------


@st.composite
def queries(draw, max_depth: int = 3, sessions: bool = False) -> Generated:
    """A random valid query over the smart-plug stream, with placements and a batch size;
    `sessions`: every leaf a session window (its families drawn often enough to test)."""
    b = _Builder(draw, sessions)
    r = b.relation(draw(st.integers(1, max_depth)))
    if _below(r.node, "join") and b.chance(25):  # an aggregate over the join on top
        r = b.aggregate(r, global_pct=50) or r
    if r.node.kind == "window":
        r = b.select(r)
        if r.node.kind == "window":
            r = b.projection(r)
    if b.chance(15):
        r = b.projection(r, computed=1)
    if b.chance(6):  # SELECT DISTINCT: a group by every column, its count dropped
        r = b.distinct(r)
    if b.chance(8):  # ROW_NUMBER: a window Top-N, ORDER BY ... LIMIT n, or the numbers
        r = b.rank(r)
    # each windowed function below joins its input with itself (the plan doubles): one
    # only over a plan of at most WINDOWED_OPS operators (seed 1 drew three chained, 173
    # operators, 305 s cut at every boundary in `make test`)
    if b.chance(6) and _ops(r.node) <= WINDOWED_OPS:  # an aggregate OVER a partition
        r = b.over(r)
    if b.chance(6) and _ops(r.node) <= WINDOWED_OPS:  # LAG, LEAD or FIRST_VALUE
        r = b.neighbour(r)
    if b.chance(6) and _ops(r.node) <= WINDOWED_OPS:  # over a frame, NTILE, CUME_DIST, ...
        r = b.frame(r)
    q = r.dsl.rstream("Q")
    placements = ["spe", "db", "auto"] + _explicit_placements(draw, q)
    batch = draw(st.sampled_from([3, 5, 10]))
    # the feed from the source, not drawn: the same queries as before the direct feed
    feed = random.Random(r.src).choice(["direct", "spe"])
    return Generated(q, f"{r.src}.rstream('Q')", placements, batch,
                     shapes_of(q, placements, b.raw), feed)


def _explicit_placements(draw, q: Rstream) -> list[str]:
    """Operators alternating engine by depth (every parent and child in different
    engines), its complement, and one random placement; each fixed for what Spark cannot
    run (`spe_limits`: readers of tuple windows go to db), deduplicated, leaving out those
    that put every operator in one engine (the `spe` and `db` placements already run)."""
    ops = _logical(q).r2r_ids
    random = dict(zip(ops, draw(st.lists(st.sampled_from(["spe", "db"]), min_size=len(ops),
                                         max_size=len(ops)))))
    return alternating_placements(q, extra=[random])


def alternating_placements(q: Rstream, extra: list[dict[str, str]] = ()) -> list[str]:
    """The placement that alternates engines by depth (operator ids as `run` numbers
    them), its complement, then `extra`; each fixed for what Spark cannot run, those with
    every operator in one engine left out, deduplicated."""
    from federation.physical import placement_string, spe_limits

    plan = _logical(q)
    ops = plan.r2r_ids

    def depth(o: str) -> int:
        n = 0
        while plan.parent.get(o) in ops:
            o, n = plan.parent[o], n + 1
        return n

    alternating = {o: ("spe", "db")[depth(o) % 2] for o in ops}
    complement = {o: ("db", "spe")[depth(o) % 2] for o in ops}
    out = []
    for pl in (alternating, complement, *(dict(x) for x in extra)):
        for _ in range(len(ops)):  # moving one operator may bind another (a sum's readers)
            limits = spe_limits(plan, pl)
            if not limits:
                break
            for o, _ in limits:
                pl[o] = "db"
        if len(set(pl.values())) > 1:  # all in one engine: the 'spe' or 'db' placement
            out.append(placement_string(pl))
    return list(dict.fromkeys(out))


def as_query_set(g: Generated) -> Generated:
    """`g` run together with a global COUNT over its own result (fuzz.py --sets): the two
    share `g`'s whole plan, whose top is then a result and an input of another operator.
    Placements: `g`'s, the explicit ones carried onto the merged plan,
    with the COUNT in the other engine than the operator below it (one boundary more), and
    runnable (`physical.db_cycle`: a self-join's equal sides are one operator there)."""
    import dataclasses

    from federation.logical import QuerySet
    from federation.optimizer.query_set import aligned
    from federation.physical import db_cycle, placement_string

    a = g.query
    b = Relation(a.child).aggregate(by=[], rows_of_q=_count()).rstream("Qn")
    qs = QuerySet((a, b))
    merged, local = _logical(qs), _logical(a)
    ids = aligned(merged, local, a.name)
    top = merged.tops["Qn"]
    placements = []
    for pl in g.placements:  # in their order (fuzz.some_placements put the cutting first)
        if "=" not in pl:
            placements.append(pl)
            continue
        eng = dict(x.split("=") for x in pl.split(","))
        mine = {ids[o]: e for o, e in eng.items() if o in ids}
        mine[top] = "spe" if mine.get(merged.tops[a.name]) == "db" else "db"
        full = {o: mine.get(o, "spe") for o in merged.r2r_ids}
        # equal subtrees of `g` (a self-join's sides) are one operator of the merged plan:
        # the SPE-ops between a DB-op and its own output go to db (else refused, rightly)
        while between := db_cycle(merged, full):
            full.update(dict.fromkeys(between, "db"))
        placements.append(placement_string(full))
    return dataclasses.replace(g, query=qs, placements=list(dict.fromkeys(placements)),
                               source=g.source + "  # with Qn: a global COUNT over it",
                               shapes=g.shapes | {"query_set"})


def _count():
    from federation.expressions import count

    return count()
