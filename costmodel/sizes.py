"""Source-driven sizes, bottom-up (paper section 5, eqs 1-3).

For every node: the rate of tuples it produces per unit time of source arrivals (`rate`),
the size of its instantaneous relation in tuples (`size`, W), the slides per second (`l`)
and, for row-level nodes (a window and stateless operators over it), the number of window
copies Spark's sliding-window expansion makes of each row (`copies` = range / slide).

Example:
    >>> from federation.smartplug.queries import cq2_plan
    >>> from federation.logical import NumberedPlan
    >>> sizes = SourceDrivenSizes.of(NumberedPlan.of(cq2_plan(rate=2000)))
    >>> sizes["w1"].rate, sizes["w1"].size
    (2000.0, 600000.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from federation.conventions import Lowering

if TYPE_CHECKING:  # plan nodes are dispatched on by class name: the cost model imports no plan code
    from federation.logical import Node, NumberedPlan, Select
    from federation.streams import StreamStats

#: the sizes of each plan node class from its inputs' (eqs 1-3)
SIZE = Lowering("size", ("operator", "leaf", "root"))

#: System R's default selectivity of a predicate nothing is known about.
DEFAULT_SELECTIVITY = 1.0 / 3.0


@dataclass(frozen=True)
class NodeSize:
    """Sizes of one node: out rate (tuples/s), relation size W, slides/s l, window copies."""

    rate: float
    size: float
    l: float
    copies: float
    row_level: bool
    selectivity: float = 1.0
    groups: float = 0.0


def _stats_below(node: Node) -> list[StreamStats]:
    """The statistics of the streams (and database tables) a node reads."""
    return [n.stream.stats if n.kind == "window" else n.stats for n in node.walk()
            if n.kind in ("window", "table")]


def key_groups(node: Node, keys: tuple[str, ...] | list[str], size: float) -> float:
    """Distinct combinations of `keys` in the node's relation (capped by its size).

    Example:
        >>> from federation.smartplug import smartplug_stream
        >>> from federation.logical import window
        >>> w = window(smartplug_stream(plugs=100), range=10).node
        >>> key_groups(w, ("house_id", "household_id", "plug_id"), 1e9)
        100.0
    """
    if not keys:
        return 1.0
    name = ",".join(sorted(keys))
    best: float | None = None
    for st in _stats_below(node):
        if name in st.groups:
            g = float(st.groups[name])
        elif all(k in st.distinct for k in keys):
            g = 1.0
            for k in keys:
                g *= st.distinct[k]
        else:
            continue
        best = g if best is None else min(best, g)
    if best is None:
        best = size  # nothing known: every tuple its own group
    return max(1.0, min(best, max(size, 1.0)))


def stream_keys(w) -> list[str]:
    """A tuple or session window's partition keys as stream columns: a computed key has at
    most as many values as the columns it is computed of."""
    made = dict(w.computed_keys)
    out: list[str] = []
    for k in w.partition_by:
        out += sorted(c.name for c in made[k].find_all(exp.Column)) if k in made else [k]
    return list(dict.fromkeys(out))


def estimate_selectivity(select: Select) -> float:
    """Selectivity f of a selection (eq. 1): given, from stream stats, or System R defaults.

    Example:
        >>> from federation.smartplug import smartplug_stream
        >>> from federation.logical import window
        >>> estimate_selectivity(window(smartplug_stream(), range=10).filter(
        ...     "property = 1").node)
        0.5
    """
    if select.selectivity is not None:
        return select.selectivity
    stats = _stats_below(select.child)
    text = select.predicate.sql(dialect="duckdb")
    for st in stats:
        if text in st.selectivities:
            return st.selectivities[text]
    f = 1.0
    for part in select.conjuncts:
        f *= _conjunct_selectivity(part, stats)
    return f


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    return _conjuncts(e.left) + _conjuncts(e.right) if isinstance(e, exp.And) else [e]


def _conjunct_selectivity(e: exp.Expression, stats: list[StreamStats]) -> float:
    text = e.sql(dialect="duckdb")
    for st in stats:
        if text in st.selectivities:
            return st.selectivities[text]
    if isinstance(e, exp.EQ):
        column, value = e.left, e.right
        if isinstance(value, exp.Column):
            column, value = value, column
        if isinstance(column, exp.Column) and isinstance(value, exp.Literal):
            for st in stats:
                fractions = st.value_fractions.get(column.name)
                if fractions is not None:
                    return float(fractions.get(str(value.this), 0.0))
                if column.name in st.distinct:
                    return 1.0 / st.distinct[column.name]
    return DEFAULT_SELECTIVITY


class SourceDrivenSizes(dict):
    """Mapping of op id -> NodeSize for one numbered plan."""

    @staticmethod
    def of(plan: NumberedPlan) -> SourceDrivenSizes:
        out = SourceDrivenSizes()
        for oid in plan.post_order():
            node = plan.nodes[oid]
            kids = [out[c] for c in plan.children[oid]]
            out[oid] = node_size(node, kids)
        return out


def node_size(node: Node, kids: list[NodeSize]) -> NodeSize:
    """Sizes of one node from its children's (eqs 1-3)."""
    return SIZE(node, kids)


@SIZE.register("TimeWindow")
def _time_window(node, kids: list[NodeSize]) -> NodeSize:
    """A cumulating window holds (size + step) / 2 seconds of rows on average over its
    period's instants, and a row is in as many windows on average (its steps after it)."""
    lam = node.stream.stats.rate_tps
    held = (node.range_s + node.slide_s) / 2 if node.cumulate else node.range_s
    every = node.instants.slide_s  # read at the query's instants (its own, or finer ones)
    return NodeSize(rate=lam, size=lam * held, l=1.0 / every, copies=held / every,
                    row_level=True)


@SIZE.register("TupleWindow")
def _tuple_window(node, kids: list[NodeSize]) -> NodeSize:
    lam = node.stream.stats.rate_tps
    parts = key_groups(node, stream_keys(node), float("inf")) if node.partition_by else 1.0
    size = float(node.rows) * parts
    # a row stays in a tuple window for size/lam seconds, i.e. that many slides
    every = node.instants.slide_s
    return NodeSize(rate=lam, size=size, l=1.0 / every,
                    copies=max(1.0, size / lam / every), row_level=True)


@SIZE.register("SessionWindow")
def _session_window(node, kids: list[NodeSize]) -> NodeSize:
    """Each reading is in one instant's relation (copies 1); the DB holds the readings of
    the open sessions, about a gap and a slide of them where sessions close (a key read
    more often than once a gap keeps one session open, and its rows, as long as it is)."""
    lam = node.stream.stats.rate_tps
    return NodeSize(rate=lam, size=lam * (node.gap_s + node.slide_s), l=1.0 / node.slide_s,
                    copies=1.0, row_level=True)


@SIZE.register("Table")
def _table(node, kids: list[NodeSize]) -> NodeSize:
    """The same rows at every instant: no arrivals (eq. 2's rate 0)."""
    f = 1.0
    for what, pred in node.steps:
        if what == "where":
            for part in _conjuncts(pred):
                f *= _conjunct_selectivity(part, [node.stats])
    return NodeSize(rate=0.0, size=max(1.0, node.rows * f), l=0.0, copies=1.0,
                    row_level=False, selectivity=f)


@SIZE.register("Select")
def _select(node, kids: list[NodeSize]) -> NodeSize:
    (k,) = kids
    f = estimate_selectivity(node)
    return _closed(node, k, NodeSize(k.rate * f, k.size * f, k.l, k.copies, k.row_level,
                                     selectivity=f))


@SIZE.register("Project", "Rstream")
def _same(node, kids: list[NodeSize]) -> NodeSize:
    (k,) = kids
    return _closed(node, k, NodeSize(k.rate, k.size, k.l, k.copies, k.row_level))


def _closed(node, k: NodeSize, out: NodeSize) -> NodeSize:
    """`out`, or, where `node` reads a session window's readings as the relation of the
    sessions closing at each instant (`Node.row_window`), that relation: each reading in
    one instant, a slide of them (rate / l) in each."""
    if not k.row_level or node.kind == "rstream" or node.row_window() is not None:
        return out
    return NodeSize(out.rate, out.rate / k.l, k.l, 1.0, False, selectivity=out.selectivity)


@SIZE.register("Aggregate")
def _aggregate(node, kids: list[NodeSize]) -> NodeSize:
    (k,) = kids
    g = key_groups(node.child, node.keys, k.size)
    return NodeSize(k.l * g, g, k.l, 1.0, False, groups=g)  # eq. 3


@SIZE.register("Join")
def _join(node, kids: list[NodeSize]) -> NodeSize:
    lk, rk = kids
    gl = key_groups(node.left, tuple(a for a, _ in node.keys), lk.size)
    gr = key_groups(node.right, tuple(b for _, b in node.keys), rk.size)
    f = 1.0 / max(gl, gr, 1.0)  # equi-join selectivity
    rate = lk.rate * f * rk.size + rk.rate * f * lk.size  # eq. 2
    size = f * lk.size * rk.size
    for keep, k in zip(node.keeps, kids):  # an outer join: at least each row it keeps
        if keep:
            rate, size = max(rate, k.rate), max(size, k.size)
    return NodeSize(rate, size, max(lk.l, rk.l), 1.0, False, selectivity=f,
                    groups=max(gl, gr, 1.0))


@SIZE.register("Union")
def _union(node, kids: list[NodeSize]) -> NodeSize:
    """Both inputs' rows, as a relation: window rows count once per window holding them."""
    lk, rk = kids
    return NodeSize(lk.rate + rk.rate, lk.size + rk.size, max(lk.l, rk.l), 1.0, False)


@SIZE.register("RowNumber")
def _row_number(node, kids: list[NodeSize]) -> NodeSize:
    """Every row of its input, numbered, as a relation (window rows once per window)."""
    (k,) = kids
    return NodeSize(k.rate, k.size, k.l, 1.0, False, groups=k.groups)


@SIZE.register("QuerySet")
def _queries(node, kids: list[NodeSize]) -> NodeSize:
    """The root of several queries: their results side by side."""
    return NodeSize(sum(k.rate for k in kids), sum(k.size for k in kids),
                    max(k.l for k in kids), 1.0, False)
