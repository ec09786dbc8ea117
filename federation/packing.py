"""Which DB-op counts read a window's rows packed: the rule, shared by db/ and costmodel/.

A query that compares each reading of a window with a value of its key at the same instant
and counts those that pass (CQ1: the readings above 90 % of their plug's maximum; CQ2: above
their plug's average) joins every row of the window at every instant: its work grows with
the window, not with what changed. Such a count reads the window's rows packed instead
(db/sqlgen/packed.py): per slice and join key, the rows' count, the least and greatest value
of the compared column and the list of its values; a pack whose least value passes counts
whole, one whose greatest fails counts nothing, and only a pack that straddles the bound
has its list filtered. The join then pairs packs, not rows, with the other side.

The shape (`packed_count`), read bottom up inside one DB-op:

- window rows of a time window (not a session or cumulate window) arriving as rows, through
  member selections and projections: the packed side;
- an inner equi-join of them with any relation (the other side), read by nothing else;
- member selections over the join, read by nothing else, whose conjuncts are all constant
  per pair of a pack and a row of the other side (the keys, the other side's columns) but
  exactly one, `c op E` (or `E op c`) with `c` a non-key column of the packed side, `op`
  one of < <= > >=, and `E` constant per pair;
- an aggregate of COUNT(*) or COUNT(c) only, grouped by columns constant per pair.

NULL values of `c` are left out of the packs (no comparison with NULL passes). This module
reads plan nodes by their attributes and imports no plan code (db/ may import it).

    >>> from federation.smartplug.queries import cq1_plan
    >>> from federation.logical import NumberedPlan
    >>> plan = NumberedPlan.of(cq1_plan(rate=100, scale=0.1))
    >>> members = {o for o in plan.nodes if plan.nodes[o].kind != "window"}
    >>> [(p.column, p.op.key, p.bound.sql()) for o in sorted(members)
    ...  if (p := packed_count(plan, members, o)) is not None]
    [('value', 'gt', '0.9 * maxv')]
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

#: `c op E` with `c` on the left, for each comparison written either way round
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


@dataclass(frozen=True)
class PackedCount:
    """A DB-op aggregate that counts packed window rows (module doc)."""

    agg: str
    over: tuple[str, ...]  # the member selections between the aggregate and the join
    join: str
    side: int  # the join side of the window rows: 0 left, 1 right
    chain: tuple[str, ...]  # the input position, then the member selections and projections
    keys: tuple[str, ...]  # the packed side's join keys: the packs' keys
    column: str  # the compared column of the window rows
    op: type  # exp.GT, exp.GTE, exp.LT or exp.LTE, the column on the left
    bound: exp.Expression  # E, over columns constant per pair
    rest: tuple[exp.Expression, ...]  # the other conjuncts, constant per pair

    @property
    def input(self) -> str:
        return self.chain[0]


def _only_parent(plan, oid: str) -> str | None:
    parents = plan.parents.get(oid, ())
    return parents[0] if len(parents) == 1 else None


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    e = e.unnest() if isinstance(e, exp.Paren) else e
    if isinstance(e, exp.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _columns(e: exp.Expression) -> set[str]:
    return {c.name for c in e.find_all(exp.Column)}


def window_chain(plan, members: set[str], oid: str, row_level) -> tuple[str, ...] | None:
    """The input position below `oid` through member selections and projections, then
    those (bottom first), when it is a time window's rows (not a session or cumulate
    window); else None. Slices fold the same chains (db.sqlgen.slices.sliced_chain)."""
    chain = []
    c = oid
    while c in members:
        if plan.nodes[c].kind not in ("select", "project"):
            return None
        chain.append(c)
        (c,) = plan.children[c]
    if row_level is not None and c not in row_level:
        return None
    w = plan.nodes[c].row_window()
    if w is None or not w.is_time_based or w.cumulate or w.is_session or not w.range_s:
        return None
    return (c, *reversed(chain))


def packed_count(plan, members: set[str], oid: str, row_level=None) -> PackedCount | None:
    """How aggregate member `oid` counts packed window rows, or None (module doc).
    `row_level`: the input positions that arrive as window rows (None: every one over a
    window)."""
    node = plan.nodes[oid]
    if node.kind != "aggregate" or not node.aggs:
        return None
    over, preds = [], []
    (c,) = plan.children[oid]
    up = oid
    while c in members and plan.nodes[c].kind == "select" and _only_parent(plan, c) == up:
        over.append(c)
        preds += _conjuncts(plan.nodes[c].predicate)
        up, (c,) = c, plan.children[c]
    j = plan.nodes.get(c)
    if (c not in members or j.kind != "join" or j.how != "inner" or not j.keys
            or _only_parent(plan, c) != up):
        return None
    for side in (0, 1):
        chain = window_chain(plan, members, plan.children[c][side], row_level)
        if chain is None or plan.nodes[chain[0]].row_window().every_s is not None:
            continue  # a window held on a finer grid: its rows, read at its own instants
        keys = tuple(k[side] for k in j.keys)
        packed_side = plan.nodes[plan.children[c][side]].schema
        loose = set(packed_side) - set(keys)  # not constant per pair
        found = _threshold(preds, loose)
        if found is None or set(node.keys) & loose:
            continue
        column, op, bound, rest = found
        if not all(call.func == "count" and (
                call.arg is None or (isinstance(call.arg, exp.Column)
                                     and call.arg.name == column)) for _, call in node.aggs):
            continue
        return PackedCount(oid, tuple(reversed(over)), c, side, chain, keys, column, op,
                           bound, tuple(rest))
    return None


def _threshold(preds: list[exp.Expression], loose: set[str]):
    """(column, op, bound, the other conjuncts) when exactly one conjunct reads a column of
    `loose`, as `column op bound`; else None."""
    reading = [p for p in preds if _columns(p) & loose]
    if len(reading) != 1:
        return None
    (p,) = reading
    if type(p) not in _FLIP:
        return None
    for this, other, op in ((p.this, p.expression, type(p)),
                            (p.expression, p.this, _FLIP[type(p)])):
        if (isinstance(this, exp.Column) and this.name in loose
                and not _columns(other) & loose):
            return this.name, op, other, [q for q in preds if q is not p]
    return None
