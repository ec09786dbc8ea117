"""Slice tables: sliced aggregation, the write side.

An aggregation over a time window (through selections and projections in the same DB-op)
does not read window rows: the MIG folds every micro-batch's rows (table `_batch`, with
`_ts`) into a slice table of partial aggregates (COUNT, SUM, MIN, MAX; AVG as SUM and
COUNT) per group and per slice of width gcd(ranges, slide): its `fold`. Aggregations with
the same keys over the same rows share one slice table whatever their ranges (CQ3's 1- and
5-minute windows). A long window (at least 16 fine slices) also has sealed coarse slices
(`coarse_width`), merged from the fine ones by `seal` once the clock has passed them, so
that a query combines few slices. Slices older than the longest range reading them expire.

Which aggregations fold (`sliced_chain`) and what the tables hold are decided here; reading
them at an instant is db.sqlgen.combine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from db.sqlgen.operators import row_chain
from db.sqlgen.terms import alias, col, grid_floor_sql, quote
from db.sqlgen.tighten import pushdown, read_columns
from federation.conventions import TS, us
from federation.packing import window_chain

if TYPE_CHECKING:  # plan nodes are read by their `kind`: db/ imports no plan code
    from federation.logical import NumberedPlan

#: the slice start column (microseconds since the epoch) and the micro-batch's rows table
SLICE = "_s"
BATCH = "_batch"


@dataclass(frozen=True)
class SliceTable:
    """Partial aggregates per group and slice of one DB-op input (module doc).

    `fold` reads the micro-batch's rows (`_batch`, with `_ts`) and yields one row per slice
    start `_s` (microseconds since the epoch) and group, with the `partials`; slices older
    than the longest range reading them (`keep_us`) expire."""

    name: str
    source: str
    keys: tuple[str, ...]
    width_us: int
    keep_us: int
    partials: tuple[str, ...]
    fold: exp.Select
    batch_columns: dict[str, str] = field(default_factory=dict)  # what `fold` reads: types
    coarse_us: int | None = None  # width of the sealed coarse slices (None: one level)
    seal: exp.Select | None = None  # coarse slices of [$seal_lo, $seal_hi) from fine ones
    #: what its rows are, whatever engine filtered the window rows: the rows' whole chain
    #: (stream, slide, selections and projections), the keys, the partial aggregates in
    #: column order and the widths; two slice tables of one meaning hold the same rows
    #: (a move, runtime/move.py)
    meaning: tuple = ()
    #: its columns as DuckDB creates them from `fold` (the slice start, the keys with the
    #: types of the rows the aggregation reads, the partials: COUNT BIGINT, an integer SUM
    #: HUGEINT, ...): what the memory model sizes (costmodel/memory.py), never re-derived
    #: from the plan's input nodes, which need not hold a computed or renamed key
    columns: dict[str, str] = field(default_factory=dict)
    #: the grid's origin (the window's offset): slices start at origin + k * width, the
    #: coarse ones at origin + k * coarse_us, `_s` in microseconds since the epoch
    origin_us: int = 0

    @property
    def coarse(self) -> str:
        """The table of sealed coarse slices."""
        return f"{self.name}c"


def sliced_chain(plan: NumberedPlan, members: set[str], oid: str,
                 row_level: set[str] | None = None) -> list[str] | None:
    """How aggregate member `oid` folds into slices: its input position, then the member
    selections and projections above it (bottom first); None when it does not (not an
    aggregate, another member kind below it, or not over a time window's rows).
    `row_level`: the input positions that arrive as window rows (None: every input over a
    window; costmodel.plan_cost.sliced_aggregates keeps the same rule that way)."""
    if plan.nodes[oid].kind != "aggregate" or not plan.nodes[oid].mergeable:
        return None
    (c,) = plan.children[oid]
    chain = window_chain(plan, members, c, row_level)
    return None if chain is None else list(chain)


def rows_key(node) -> tuple:
    """Window rows after selections and projections, whatever engine runs them: the
    stream, the slide, the offset and the operators' labels (not the range: rows of windows of
    different ranges are the same rows)."""
    labels = []
    while node.kind in ("select", "project"):
        labels.append(node.label())
        node = node.child
    return (node.stream.name, node.slide_s, node.offset_s, tuple(labels))


_PARTIALS = {  # aggregate -> the partials it needs, as (function, argument is double)
    "count": (("count", False),),
    "sum": (("sum", False),),
    "avg": (("sum", True), ("count", False)),
    "min": (("min", False),),
    "max": (("max", False),),
}


def _partial_type(func: str, double: bool, out_type: str) -> str:
    """The type DuckDB gives a partial aggregate, from its aggregate's output type: COUNT
    is BIGINT, an integer SUM HUGEINT (DuckDB's sum of INTEGER or BIGINT), a SUM over the
    argument cast to DOUBLE (AVG's) DOUBLE, MIN and MAX their argument's type."""
    if func == "count":
        return "BIGINT"
    if double:
        return "DOUBLE"
    if func == "sum" and out_type in ("INT", "BIGINT"):
        return "HUGEINT"
    return out_type


def _partial_expr(func: str, arg: exp.Expression | None, double: bool) -> exp.Expression:
    if func == "count":
        return exp.Count(this=exp.Star() if arg is None else quote(arg))
    a = quote(arg)  # type: ignore[arg-type]
    if double:
        a = exp.cast(a, "DOUBLE")
    return {"sum": exp.Sum, "min": exp.Min, "max": exp.Max}[func](this=a)


class SliceBuilder:
    """Slice tables of one DB-op, shared by aggregations with the same rows and keys."""

    def __init__(self, plan: NumberedPlan, slide_us: int) -> None:
        self.plan = plan
        self.slide_us = slide_us
        self.groups: dict[tuple, dict] = {}

    def add(self, agg: str, chain: list[str], table: str) -> tuple[tuple, dict[tuple, str]]:
        """Register aggregate `agg`; returns its slice table's signature and the names of
        its partial columns by (function, argument sql, double)."""
        node = self.plan.nodes[agg]
        w = self.plan.nodes[chain[0]].row_window()
        # readers of one grid: a window held on a query's finer grid reads at its own
        # instants (db.sqlgen.terms.at_window_instant)
        sig = (table, tuple(self.plan.nodes[c].label() for c in chain[1:]), tuple(node.keys),
               w.grid)
        g = self.groups.setdefault(sig, {"chain": chain, "ranges": [], "partials": {},
                                         "held_us": us(w.held_s)})
        g["ranges"].append(us(w.range_s))
        names = {}
        for out, call in node.aggs:
            for func, double in _PARTIALS[call.func]:
                k = (func, None if call.arg is None else call.arg.sql(), double)
                if k not in g["partials"]:
                    g["partials"][k] = (f"p{len(g['partials'])}", func, call.arg, double)
                    g.setdefault("types", {})[g["partials"][k][0]] = _partial_type(
                        func, double, node.schema[out])
                names[k] = g["partials"][k][0]
        return sig, names

    def tables(self) -> dict[tuple, SliceTable]:
        out = {}
        for i, (sig, g) in enumerate(self.groups.items()):
            table, _, keys, _ = sig
            width = self.slide_us
            for r in g["ranges"]:
                width = math.gcd(width, r)
            fold = self._fold(g, keys, width)
            types = {TS: "TIMESTAMP", **dict(self.plan.nodes[g["chain"][0]].schema)}
            fold = pushdown(fold, {BATCH: types})
            read = read_columns(fold, BATCH)
            partials = list(g["partials"].values())
            longest = max(g["ranges"])
            coarse = coarse_width(longest, width)
            seal = None
            origin = _origin(self.plan, g["chain"])
            if coarse is not None:
                seal = _seal(f"s{i}", keys, coarse, [(n, f) for n, f, *_ in partials],
                             origin)
            rows = self.plan.nodes[g["chain"][-1]].schema  # what the aggregation reads
            columns = {SLICE: "BIGINT", **{k: rows[k] for k in keys},
                       **{p[0]: g["types"][p[0]] for p in partials}}
            meaning = (rows_key(self.plan.nodes[g["chain"][-1]]), keys,
                       tuple((f, None if a is None else a.sql(), d) for _, f, a, d in partials),
                       width, coarse)
            out[sig] = SliceTable(f"s{i}", table, keys, width, longest + g["held_us"],
                                  tuple(p[0] for p in partials), fold,
                                  {c: t for c, t in types.items() if c.lower() in read},
                                  coarse, seal,
                                  meaning, columns, origin)
        return out

    def _fold(self, g: dict, keys: tuple[str, ...], width: int) -> exp.Select:
        """INSERT source: the batch's rows through the chain, per slice and group."""
        return fold_by_slice(self.plan, g["chain"], width, keys, [
            alias(_partial_expr(func, arg, double), name)
            for name, func, arg, double in g["partials"].values()])


def fold_by_slice(plan: NumberedPlan, chain, width: int, keys, items: list,
                  where: exp.Expression | None = None) -> exp.Select:
    """The micro-batch's rows (`_batch`) through `chain` (an input position, then member
    selections and projections), grouped per slice start `_s` of `width` us and `keys`,
    with the aggregate `items` (and `where` over the rows, if given): the fold of a slice
    table, partial aggregates (above) or packs (db.sqlgen.packed)."""
    cols = list(plan.nodes[chain[0]].schema)
    q = row_chain(exp.select(col(TS), *[col(c) for c in cols]).from_(BATCH),
                  [plan.nodes[oid] for oid in chain[1:]])
    start = grid_floor_sql(exp.Anonymous(this="epoch_us", expressions=[col(TS)]), width,
                           _origin(plan, chain))
    out = exp.select(alias(start, SLICE), *[col(k) for k in keys], *items).from_(
        q.subquery("b"))
    if where is not None:
        out = out.where(where)
    return out.group_by(*[exp.Literal.number(i + 1) for i in range(len(keys) + 1)])


def _origin(plan: NumberedPlan, chain) -> int:
    """The slices' origin: the offset of the window whose rows `chain` reads."""
    return us(plan.nodes[chain[0]].row_window().offset_s)


def coarse_width(range_us: int, width_us: int) -> int | None:
    """Width of the coarse slices of a slice table: a window of range r combines r/G coarse
    slices and at most 2 G/g fine ones at its ends, least near G = sqrt(r g / 2); None
    (fine slices only) when a window holds fewer than 16 fine slices."""
    n = range_us // width_us
    if n < 16:
        return None
    return width_us * max(2, round(math.sqrt(n / 2)))


_MERGE = {"count": exp.Sum, "sum": exp.Sum, "min": exp.Min, "max": exp.Max}


def _seal(name: str, keys: tuple[str, ...], coarse_us: int,
          partials: list[tuple[str, str]], origin: int) -> exp.Select:
    """Coarse slices of [$seal_lo, $seal_hi) merged from the fine slices of `name`."""
    start = grid_floor_sql(col(SLICE), coarse_us, origin)
    cols = [alias(start, SLICE)] + [col(k) for k in keys]
    cols += [alias(_MERGE[f](this=col(n)), n) for n, f in partials]
    cond = exp.and_(exp.GTE(this=col(SLICE), expression=exp.Placeholder(this="seal_lo")),
                    exp.LT(this=col(SLICE), expression=exp.Placeholder(this="seal_hi")))
    return (exp.select(*cols).from_(exp.to_table(name)).where(cond)
            .group_by(*[exp.Literal.number(i + 1) for i in range(len(keys) + 1)]))
