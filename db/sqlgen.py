"""SQL of a DB-op (migration candidate), built as sqlglot trees and rendered for DuckDB.

A DB-op runs as one query per slide instant, with the instant as parameters: `$tau` (a
TIMESTAMP) and `$tau_us` (its microseconds since the epoch). Its inputs are tables
`in0, in1, ...`:

- window rows (row-level inputs) carry their event time `_ts`. A time window is read with
  plain bounds, `$tau - range <= _ts < $tau`; a tuple window as the last n rows (per
  partition) before `$tau`.
- relations (results of SPE-ops) carry the instant `_tau` they belong to, read with
  `_tau = $tau`.
- **Slices.** An aggregation over a time window (through selections and projections in the
  same DB-op) does not read window rows: the MIG folds every micro-batch's rows into a
  slice table of partial aggregates (COUNT, SUM, MIN, MAX; AVG as SUM and COUNT) per group
  and per slice of width gcd(ranges, slide), and the query combines the slices that cover
  [tau - range, tau). Aggregations with the same keys over the same rows share one slice
  table whatever their ranges (CQ3's 1- and 5-minute windows). Window rows are kept only
  where some operator reads them raw (CQ1's join of rows with their window's maximum).

Identical reads (the same table, bounds and operators) are one CTE: scanned once.
This module needs only sqlglot.

Example:
    >>> from federation.smartplug.queries import cq5_plan
    >>> from federation.logical import NumberedPlan
    >>> plan = NumberedPlan.of(cq5_plan(scale=1/6))
    >>> prog = db_op_sql(plan, ["op1", "op2", "op3"], [("in0", "w1")])
    >>> [(s.name, s.source, s.width_us, s.keep_us) for s in prog.slices], sorted(prog.raw)
    ([('s0', 'in0', 1000000, 50000000)], [])
    >>> "$tau_us - 50000000" in prog.query.sql("duckdb")  # the 50-s window's slices
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from federation.conventions import TAU, TS, us

if TYPE_CHECKING:  # plan nodes are read by their `kind`: db/ imports no plan code
    from federation.logical import NumberedPlan, Window

SLICE = "_s"
BATCH = "_batch"


def _rows_key(node) -> tuple:
    """Window rows after selections and projections, whatever engine runs them: the
    stream, the slide and the operators' labels (not the range: rows of windows of
    different ranges are the same rows)."""
    labels = []
    while node.kind in ("select", "project"):
        labels.append(node.label())
        node = node.child
    return (node.stream.name, node.slide_s, tuple(labels))


class SqlGenerationError(NotImplementedError):
    """A plan the SQL generator cannot express (a malformed DB-op)."""


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def _alias(e: exp.Expression, name: str) -> exp.Alias:
    return exp.alias_(e, name, quoted=True)


def _quote(e: exp.Expression) -> exp.Expression:
    e = e.copy()
    for c in e.find_all(exp.Column):
        c.set("this", exp.to_identifier(c.name, quoted=True))
    return e


def _num(n: int) -> exp.Literal:
    return exp.Literal.number(n)


def tau_param() -> exp.Expression:
    """`$tau` as a TIMESTAMP."""
    return exp.cast(exp.Placeholder(this="tau"), "TIMESTAMP")


def tau_us_param() -> exp.Expression:
    return exp.Placeholder(this="tau_us")


def _seconds(s: float) -> exp.Interval:
    text = f"{s:g}" if float(s).is_integer() else repr(float(s))
    return exp.Interval(this=exp.Literal.string(text), unit=exp.Var(this="SECOND"))


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
    #: (stream, slide, selections and projections), the keys, the partial aggregates in column order and the widths; two
    #: slice tables of one meaning hold the same rows (moving state, runtime/carry.py)
    meaning: tuple = ()

    @property
    def coarse(self) -> str:
        """The table of sealed coarse slices."""
        return f"{self.name}c"


@dataclass(frozen=True)
class DbOpSql:
    """The SQL of a DB-op: the query per instant, the slice tables it reads, and the input
    tables whose window rows it reads raw (table -> the input positions that do)."""

    query: exp.Select
    slices: tuple[SliceTable, ...] = ()
    raw: dict[str, tuple[str, ...]] = field(default_factory=dict)
    raw_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)  # what it reads

    def sql(self, dialect: str = "duckdb", pretty: bool = False) -> str:
        return self.query.sql(dialect=dialect, pretty=pretty)


def window_rows(win: Window, columns: Sequence[str], table: str) -> exp.Select:
    """The rows of `win` at instant `$tau`, from the table of its rows."""
    cols = [_col(c) for c in columns]
    if win.is_time_based:
        lo = exp.Sub(this=tau_param(), expression=_seconds(win.range_s))
        cond = exp.and_(exp.GTE(this=_col(TS), expression=lo),
                        exp.LT(this=_col(TS), expression=tau_param()))
        return exp.select(*cols).from_(exp.to_table(table)).where(cond)
    # tuple window: the last n rows (per partition) with ts < tau
    # ties in event time are broken by the other columns: the last n rows are one set
    order = exp.Order(expressions=[exp.Ordered(this=_col(c), desc=True)
                                   for c in [TS, *columns]])
    rn = exp.Window(this=exp.RowNumber(), order=order,
                    partition_by=[_col(k) for k in win.partition_by] or [exp.Literal.number(1)])
    inner = (exp.select(*cols, _alias(rn, "_rn")).from_(exp.to_table(table))
             .where(exp.LT(this=_col(TS), expression=tau_param())))
    return (exp.select(*[_col(c) for c in columns]).from_(inner.subquery("r"))
            .where(exp.LTE(this=_col("_rn"), expression=exp.Literal.number(win.rows))))


def _sliced_chain(plan: NumberedPlan, members: set[str], oid: str,
                 row_level: set[str] | None = None) -> list[str] | None:
    """How aggregate member `oid` folds into slices: its input position, then the member
    selections and projections above it (bottom first); None when it does not (not an
    aggregate, another member kind below it, or not over a time window's rows).
    `row_level`: the input positions that arrive as window rows (None: every input over a
    window; costmodel.plan_cost.sliced_aggregates keeps the same rule that way)."""
    if plan.nodes[oid].kind != "aggregate":
        return None
    chain = []
    (c,) = plan.children[oid]
    while c in members:
        if plan.nodes[c].kind not in ("select", "project"):
            return None
        chain.append(c)
        (c,) = plan.children[c]
    if row_level is not None and c not in row_level:
        return None
    w = plan.nodes[c].row_window()
    if w is None or not w.is_time_based:
        return None
    return [c, *reversed(chain)]


_PARTIALS = {  # aggregate -> the partials it needs, as (function, argument is double)
    "count": (("count", False),),
    "sum": (("sum", False),),
    "avg": (("sum", True), ("count", False)),
    "min": (("min", False),),
    "max": (("max", False),),
}


def _partial_expr(func: str, arg: exp.Expression | None, double: bool) -> exp.Expression:
    if func == "count":
        return exp.Count(this=exp.Star() if arg is None else _quote(arg))
    a = _quote(arg)  # type: ignore[arg-type]
    if double:
        a = exp.cast(a, "DOUBLE")
    return {"sum": exp.Sum, "min": exp.Min, "max": exp.Max}[func](this=a)


class _SliceBuilder:
    """Slice tables of one DB-op, shared by aggregations with the same rows and keys."""

    def __init__(self, plan: NumberedPlan, slide_us: int) -> None:
        self.plan = plan
        self.slide_us = slide_us
        self.groups: dict[tuple, dict] = {}

    def add(self, agg: str, chain: list[str], table: str) -> tuple[tuple, dict[tuple, str]]:
        """Register aggregate `agg`; returns its slice table's signature and the names of
        its partial columns by (function, argument sql, double)."""
        node = self.plan.nodes[agg]
        sig = (table, tuple(self.plan.nodes[c].label() for c in chain[1:]), tuple(node.keys))
        g = self.groups.setdefault(sig, {"chain": chain, "ranges": [], "partials": {}})
        g["ranges"].append(us(self.plan.nodes[chain[0]].row_window().range_s))
        names = {}
        for _, call in node.aggs:
            for func, double in _PARTIALS[call.func]:
                k = (func, None if call.arg is None else call.arg.sql(), double)
                if k not in g["partials"]:
                    g["partials"][k] = (f"p{len(g['partials'])}", func, call.arg, double)
                names[k] = g["partials"][k][0]
        return sig, names

    def tables(self) -> dict[tuple, SliceTable]:
        out = {}
        for i, (sig, g) in enumerate(self.groups.items()):
            table, _, keys = sig
            width = self.slide_us
            for r in g["ranges"]:
                width = math.gcd(width, r)
            fold = self._fold(g, keys, width)
            types = {TS: "TIMESTAMP", **dict(self.plan.nodes[g["chain"][0]].schema)}
            fold = _pushdown(fold, {BATCH: types})
            read = _read_columns(fold, BATCH)
            partials = list(g["partials"].values())
            longest = max(g["ranges"])
            coarse = coarse_width(longest, width)
            seal = None
            if coarse is not None:
                seal = _seal(f"s{i}", keys, coarse, [(n, f) for n, f, *_ in partials])
            meaning = (_rows_key(self.plan.nodes[g["chain"][-1]]), keys,
                       tuple((f, None if a is None else a.sql(), d) for _, f, a, d in partials),
                       width, coarse)
            out[sig] = SliceTable(f"s{i}", table, keys, width, longest,
                                  tuple(p[0] for p in partials), fold,
                                  {c: t for c, t in types.items() if c.lower() in read},
                                  coarse, seal,
                                  meaning)
        return out

    def _fold(self, g: dict, keys: tuple[str, ...], width: int) -> exp.Select:
        """INSERT source: the batch's rows through the chain, per slice and group."""
        chain = g["chain"]
        cols = list(self.plan.nodes[chain[0]].schema)
        q = row_chain(exp.select(_col(TS), *[_col(c) for c in cols]).from_(BATCH),
                      [self.plan.nodes[oid] for oid in chain[1:]])
        start = exp.Mul(this=exp.IntDiv(this=exp.Anonymous(this="epoch_us", expressions=[
            _col(TS)]), expression=_num(width)), expression=_num(width))
        out = [_alias(start, SLICE)] + [_col(k) for k in keys]
        out += [_alias(_partial_expr(func, arg, double), name)
                for name, func, arg, double in g["partials"].values()]
        return (exp.select(*out).from_(q.subquery("b"))
                .group_by(*[exp.Literal.number(i + 1) for i in range(len(keys) + 1)]))


def row_chain(q: exp.Select, nodes: Sequence, every_column: bool = False) -> exp.Select:
    """Window rows `q` (with their event time) through selections and projections, bottom
    up: the rows those operators pass on (a selection passes on its schema's columns, or
    with `every_column` all that `q` has)."""
    for node in nodes:
        if node.kind == "select":
            cols = [exp.Star()] if every_column else [_col(TS), *[_col(c) for c in node.schema]]
            q = exp.select(*cols).from_(q.subquery()).where(_quote(node.predicate))
        else:
            q = exp.select(_col(TS), *[_alias(_quote(e), n) for n, e in node.outputs]
                           ).from_(q.subquery())
    return q


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
          partials: list[tuple[str, str]]) -> exp.Select:
    """Coarse slices of [$seal_lo, $seal_hi) merged from the fine slices of `name`."""
    start = exp.Mul(this=exp.IntDiv(this=_col(SLICE), expression=_num(coarse_us)),
                    expression=_num(coarse_us))
    cols = [_alias(start, SLICE)] + [_col(k) for k in keys]
    cols += [_alias(_MERGE[f](this=_col(n)), n) for n, f in partials]
    cond = exp.and_(exp.GTE(this=_col(SLICE), expression=exp.Placeholder(this="seal_lo")),
                    exp.LT(this=_col(SLICE), expression=exp.Placeholder(this="seal_hi")))
    return (exp.select(*cols).from_(exp.to_table(name)).where(cond)
            .group_by(*[exp.Literal.number(i + 1) for i in range(len(keys) + 1)]))


def _slice_scan(st: SliceTable, ranges: Sequence[int]
                ) -> tuple[exp.Select | exp.Union, dict[int, exp.Expression | None]]:
    """The slice rows that windows of the given ranges need at `$tau`, and for each range
    the condition picking its own (None: every row).

    Fine slices only: those of [tau - r, tau). With sealed coarse slices, a window of
    range r reads coarse slices in [A_r, B) and fine ones in [lo_r, A_r) and [B, tau),
    where lo_r = tau - r, A_r is the first coarse boundary at or after lo_r and B the last
    sealed one at or before tau; rows carry `_c` (1 coarse, 0 fine)."""
    cols = [_col(SLICE)] + [_col(k) for k in st.keys] + [_col(p) for p in st.partials]
    longest = max(ranges)
    s = _col(SLICE)

    def ge(e: exp.Expression) -> exp.Expression:
        return exp.GTE(this=s.copy(), expression=e.copy())

    def lt(e: exp.Expression) -> exp.Expression:
        return exp.LT(this=s.copy(), expression=e.copy())

    def lo(r: int) -> exp.Expression:
        return exp.Paren(this=exp.Sub(this=tau_us_param(), expression=_num(r)))

    if st.coarse_us is None:
        q = exp.select(*cols).from_(exp.to_table(st.name)).where(_slice_bounds(longest))
        return q, {r: None if r == longest else ge(lo(r)) for r in ranges}
    g = st.coarse_us

    def floor_g(e: exp.Expression) -> exp.Expression:
        return exp.Paren(this=exp.Mul(this=exp.IntDiv(this=e, expression=_num(g)),
                                      expression=_num(g)))

    def fn(name: str, *args: exp.Expression) -> exp.Expression:  # plain LEAST / GREATEST
        return exp.Anonymous(this=name, expressions=[a.copy() for a in args])

    def a(r: int) -> exp.Expression:
        return floor_g(exp.Paren(this=exp.Add(this=lo(r), expression=_num(g - 1))))

    b = fn("least", floor_g(tau_us_param()), exp.Placeholder(this=f"sealed_{st.name}"))

    def head(r: int) -> exp.Expression:
        return exp.and_(ge(lo(r)), lt(fn("least", a(r), tau_us_param())))

    def tail(r: int) -> exp.Expression:
        return exp.and_(ge(fn("greatest", a(r), b)), lt(tau_us_param()))

    one = len(set(ranges)) == 1
    marker = [] if one else [_alias(_num(1), "_c")]
    coarse = exp.select(*cols, *marker).from_(exp.to_table(st.coarse)).where(
        exp.and_(ge(a(longest)), lt(b)))
    fine = exp.select(*cols, *[_alias(_num(0), "_c") for _ in marker]).from_(
        exp.to_table(st.name)).where(exp.or_(*[head(r) for r in sorted(set(ranges))],
                                             tail(longest)))
    union = exp.union(coarse, fine, distinct=False)
    if one:
        return union, {r: None for r in ranges}

    def cond(r: int) -> exp.Expression:
        c = _col("_c")
        return exp.or_(
            exp.and_(exp.EQ(this=c.copy(), expression=_num(1)), ge(a(r))),
            exp.and_(exp.EQ(this=c.copy(), expression=_num(0)),
                     exp.Paren(this=exp.or_(head(r), tail(r)))))
    return union, {r: cond(r) for r in ranges}


def _slice_bounds(range_us: int) -> exp.Expression:
    return exp.and_(
        exp.GTE(this=_col(SLICE), expression=exp.Sub(this=tau_us_param(),
                                                     expression=_num(range_us))),
        exp.LT(this=_col(SLICE), expression=tau_us_param()))


def _combined(node, names: dict[tuple, str], cond: exp.Expression | None = None,
              prefix: str = "") -> list[exp.Expression]:
    """The aggregates of `node` from the partials of slices (those where `cond` holds)."""
    cols: list[exp.Expression] = []
    for name, call in node.aggs:
        arg = None if call.arg is None else call.arg.sql()

        def agg(cls, func: str, double: bool = False, arg=arg) -> exp.Expression:
            a = cls(this=_col(names[(func, arg, double)]))
            return a if cond is None else exp.Filter(this=a, expression=exp.Where(
                this=cond.copy()))

        rtype = node.schema[name]
        if call.func == "count":
            v: exp.Expression = exp.Coalesce(this=exp.cast(agg(exp.Sum, "count"), "BIGINT"),
                                             expressions=[_num(0)])
        elif call.func == "sum":
            v = agg(exp.Sum, "sum")
            if rtype != "DOUBLE":
                v = exp.cast(v, "BIGINT")
        elif call.func == "avg":
            v = exp.Div(this=exp.cast(agg(exp.Sum, "sum", True), "DOUBLE"),
                        expression=exp.Nullif(this=agg(exp.Sum, "count"), expression=_num(0)))
        else:
            v = agg(exp.Min if call.func == "min" else exp.Max, call.func)
        cols.append(_alias(v, prefix + name))
    return cols


def _combine(node, st: SliceTable, names: dict[tuple, str], range_us: int) -> exp.Select:
    """Aggregate `node` at `$tau` from the slices of [tau - range, tau)."""
    cols = [_col(k) for k in node.keys] + _combined(node, names)
    if st.coarse_us is None:
        q = exp.select(*cols).from_(exp.to_table(st.name)).where(_slice_bounds(range_us))
    else:
        q = exp.select(*cols).from_(_slice_scan(st, [range_us])[0].subquery("sl"))
    return q.group_by(*[_col(k) for k in node.keys]) if node.keys else q


def _combine_shared(st: SliceTable, aggs: list[tuple[str, object, dict, int]]
                    ) -> exp.Select:
    """Every aggregate (oid, node, partial names, range) reading slice table `st`, with
    the same keys, in one scan: each over its own range (FILTER), with the count of its
    slices (`_n_<oid>`: a group is in an aggregate's result when its window holds a row)."""
    scan, conds = _slice_scan(st, [r for *_, r in aggs])
    # each window's condition once per row, as a flag column
    flags = {r: f"_w{i}" for i, r in enumerate(sorted(conds)) if conds[r] is not None}
    scan = exp.select(exp.Star(), *[_alias(conds[r], f) for r, f in flags.items()]).from_(
        scan.subquery("u"))
    cols: list[exp.Expression] = [_col(k) for k in st.keys]
    for oid, node, names, r in aggs:
        cond = _col(flags[r]) if r in flags else None
        n = exp.Count(this=exp.Star())
        if cond is not None:
            n = exp.Filter(this=n, expression=exp.Where(this=cond.copy()))
        cols.append(_alias(n, f"_n_{oid}"))
        cols += _combined(node, names, cond, prefix=f"{oid}__")
    return (exp.select(*cols).from_(scan.subquery("sl"))
            .group_by(*[_col(k) for k in st.keys]))


def db_op_sql(
    plan: NumberedPlan, members: Sequence[str], inputs: Sequence[tuple[str, str]],
    row_level: set[str] | None = None, slices: bool = True,
) -> DbOpSql:
    """The SQL of the DB-op made of `members` (op ids), whose inputs are `(table, op id)`.

    Inputs that are identical subtrees share a table (they are transferred once): pass
    each input position with the table name it reads. `row_level` names the inputs that
    arrive as window rows with `_ts` (default: every input that is a window under
    selections and projections); the others arrive as relations tagged with `_tau`.
    `slices=False` reads every window's rows raw (no slice tables).
    """
    member_set = set(members)
    table_of = {oid: table for table, oid in inputs}
    if row_level is None:
        row_level = {oid for _, oid in inputs if plan.nodes[oid].row_window()}
    root = [m for m in members if plan.parent.get(m) not in member_set]
    if len(root) != 1:
        raise SqlGenerationError(f"a DB-op must be one connected subtree, got roots {root}")

    # which aggregations fold into slices: every reader of their table must, or the rows
    # are kept anyway (then slices still save the aggregation's scan)
    slide = next((plan.nodes[o].row_window().slide_s for _, o in inputs
                  if plan.nodes[o].row_window() is not None), 1.0)
    builder = _SliceBuilder(plan, us(slide))
    sliced: dict[str, tuple[tuple, dict]] = {}
    sliced_inputs: set[str] = set()
    if slices:
        for m in members:
            chain = _sliced_chain(plan, member_set, m, row_level)
            if chain is not None:
                if chain[0] not in table_of:
                    raise SqlGenerationError(f"input {chain[0]} of the DB-op has no table")
                sliced[m] = builder.add(m, chain, table_of[chain[0]])
                sliced_inputs.add(chain[0])
    tables = builder.tables()
    raw: dict[str, tuple[str, ...]] = {}
    for table, oid in inputs:
        if oid in row_level and oid not in sliced_inputs:
            raw[table] = raw.get(table, ()) + (oid,)

    ctes: list[tuple[str, exp.Expression]] = []
    names: dict[str, str] = {}
    by_text: dict[str, str] = {}

    def shared_scan(sig: tuple, oids: list[str]) -> str:
        st = tables[sig]
        name = f"n_{st.name}"
        if name not in {n for n, _ in ctes}:
            ctes.append((name, _combine_shared(st, [
                (o, plan.nodes[o], sliced[o][1], us(plan.nodes[o].child.row_window().range_s))
                for o in oids])))
        return name

    def source(oid: str) -> str:
        if oid in names:
            return names[oid]
        node = plan.nodes[oid]
        if oid in sliced:
            sig, pnames = sliced[oid]
            sharing = [o for o in sliced if sliced[o][0] == sig]
            if len(sharing) > 1 and node.keys:  # one scan of the slices for all of them
                shared = shared_scan(sig, sharing)
                q = exp.select(*[_col(k) for k in node.keys],
                               *[_alias(_col(f"{oid}__{n}"), n) for n, _ in node.aggs]
                               ).from_(shared).where(exp.GT(this=_col(f"_n_{oid}"),
                                                            expression=_num(0)))
            else:
                q = _combine(node, tables[sig], pnames, us(node.child.row_window().range_s))
        elif oid not in member_set:
            table = table_of.get(oid)
            if table is None:
                raise SqlGenerationError(f"input {oid} of the DB-op has no table")
            cols = list(node.schema)
            if oid in row_level:
                q = window_rows(node.row_window(), cols, table)
            else:
                q = (exp.select(*[_col(c) for c in cols]).from_(exp.to_table(table))
                     .where(exp.EQ(this=_col(TAU), expression=tau_param())))
        else:
            q = operator_sql(plan, oid, [source(c) for c in plan.children[oid]])
        text = q.sql(dialect="duckdb")
        if text in by_text:  # the same rows: one scan
            names[oid] = by_text[text]
            return names[oid]
        name = f"n_{oid}"
        ctes.append((name, q))
        names[oid] = by_text[text] = name
        return name

    top = source(root[0])
    out_cols = [_alias(tau_param(), TAU)] + [_col(c) for c in plan.nodes[root[0]].schema]
    query = exp.select(*out_cols).from_(top)
    for name, q in ctes:
        query = query.with_(name, as_=q)
    schema = {t: {TS: "TIMESTAMP", **dict(plan.nodes[oids[0]].schema)} for t, oids in raw.items()}
    for st in tables.values():  # column names are what pruning needs, not types
        schema[st.name] = schema[st.coarse] = {SLICE: "BIGINT", **{k: "INT" for k in st.keys},
                                               **{p: "DOUBLE" for p in st.partials}}
    for table, oid in inputs:
        if oid not in row_level:
            schema[table] = {TAU: "TIMESTAMP", **dict(plan.nodes[oid].schema)}
    query = _exact_names(_pushdown(query, schema, merge=True),
                         [TAU, *plan.nodes[root[0]].schema])
    raw_columns = {t: tuple(c for c in schema[t]
                            if c != TS and c.lower() in _read_columns(query, t))
                   for t in raw}
    return DbOpSql(query, tuple(tables.values()), raw, raw_columns)


def _pushdown(query: exp.Select, schema: dict, merge: bool = False) -> exp.Select:
    """The query with every CTE and subquery reduced to the columns read above it
    (sqlglot's qualify + pushdown_projections): the MIG keeps and scans only those.
    `merge`: also merge the operators' CTEs into one another where SQL allows and push
    predicates down (sqlglot's merge_subqueries + pushdown_predicates): DuckDB then sees a
    selection over a join as a join condition and filters the scan by it (CQ1's query
    took 14 instead of 22 ms per slide at 10,000 tuples/s)."""
    from sqlglot.optimizer.eliminate_ctes import eliminate_ctes
    from sqlglot.optimizer.merge_subqueries import merge_subqueries
    from sqlglot.optimizer.pushdown_predicates import pushdown_predicates
    from sqlglot.optimizer.pushdown_projections import pushdown_projections
    from sqlglot.optimizer.qualify import qualify

    q = pushdown_projections(qualify(query, schema=schema, dialect="duckdb",
                                     quote_identifiers=True))
    if merge:
        q = eliminate_ctes(pushdown_predicates(merge_subqueries(q)))
    return q


def _exact_names(query: exp.Select, names: Sequence[str]) -> exp.Select:
    """The query's output columns named exactly `names`: sqlglot's qualify lower-cases
    every identifier for DuckDB (which compares names without case), but the result's
    names are the plan's (`maxLoad`)."""
    if len(query.expressions) != len(names):
        raise SqlGenerationError(f"the DB-op's SQL has {len(query.expressions)} columns, "
                                 f"the plan {len(names)}")
    for e, n in zip(query.expressions, names):
        e.replace(_alias(e.unalias(), n))
    return query


def _read_columns(query: exp.Expression, table: str) -> set[str]:
    """The columns of `table` that a qualified query reads, in lower case (qualify
    lower-cases names: DuckDB compares them without case)."""
    out: set[str] = set()
    for tbl in query.find_all(exp.Table):
        if tbl.name == table:
            out |= {c.name.lower() for c in tbl.parent_select.find_all(exp.Column)
                    if c.table == tbl.alias_or_name}
    return out


def operator_sql(plan: NumberedPlan, oid: str, srcs: list[str]) -> exp.Select:
    """One R2R operator over the CTEs of its children, at one slide instant."""
    node = plan.nodes[oid]
    if node.kind == "select":
        return exp.select(*[_col(c) for c in node.schema]).from_(srcs[0]).where(
            _quote(node.predicate))
    if node.kind == "project":
        return exp.select(*[_alias(_quote(e), n) for n, e in node.outputs]).from_(srcs[0])
    if node.kind == "join":
        rkeys = {r for _, r in node.keys}
        cols = [_col(c, "l") for c in node.left.schema]
        cols += [_col(c, "r") for c in node.right.schema if c not in rkeys]
        cond: exp.Expression = exp.true()
        for i, (lk, rk) in enumerate(node.keys):
            eq = exp.EQ(this=_col(lk, "l"), expression=_col(rk, "r"))
            cond = eq if i == 0 else exp.and_(cond, eq)
        return (exp.select(*cols).from_(exp.to_table(srcs[0]).as_("l"))
                .join(exp.to_table(srcs[1]).as_("r"), on=cond))
    if node.kind == "aggregate":
        cols: list[exp.Expression] = [_col(k) for k in node.keys]
        for name, call in node.aggs:
            cols.append(_alias(aggregate_expression(call.func, call.arg, node.schema[name]),
                               name))
        q = exp.select(*cols).from_(srcs[0])
        # a global aggregate (no keys, no GROUP BY) has one row, also over an empty input
        # (SQL): COUNT 0, the others NULL
        return q.group_by(*[_col(k) for k in node.keys]) if node.keys else q
    raise SqlGenerationError(f"no SQL for {node.kind}")


def aggregate_expression(func: str, arg: exp.Expression | None, result_type: str
                         ) -> exp.Expression:
    """COUNT/SUM/AVG/MIN/MAX with the result types the engines agree on (SUM of integers is
    BIGINT as in Spark, not DuckDB's HUGEINT); `result_type` is the aggregate's column type."""
    if func == "count":
        return exp.Count(this=exp.Star() if arg is None else _quote(arg))
    a = _quote(arg)  # type: ignore[arg-type]
    if func == "sum":
        s = exp.Sum(this=a)
        if result_type != "DOUBLE":
            return exp.Cast(this=s, to=exp.DataType.build("BIGINT"))
        return s
    if func == "avg":  # SUM / COUNT in double, the same expression in every engine
        total = exp.Cast(this=exp.Sum(this=a), to=exp.DataType.build("DOUBLE"))
        n = exp.Nullif(this=exp.Count(this=a.copy()), expression=exp.Literal.number(0))
        return exp.Div(this=total, expression=n)
    if func == "min":
        return exp.Min(this=a)
    if func == "max":
        return exp.Max(this=a)
    raise SqlGenerationError(f"unknown aggregate {func}")
