"""The DB-op statement: one query per slide instant, assembled from the DB-op's members.

Its inputs are tables `in0, in1, ...`: window rows (row-level inputs, with their event time
`_ts`, read by db.sqlgen.operators) or relations (results of SPE-ops, tagged with the
instant `_tau` they belong to, read with `_tau = $tau`). Aggregations over a time window's
rows read slice tables instead (db.sqlgen.slices, db.sqlgen.combine); window rows are kept
only where some operator reads them raw. Each operator is a CTE; identical reads (the same
table, bounds and operators) are one CTE, scanned once. The whole is tightened
(db.sqlgen.tighten).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sqlglot import exp

from db.sqlgen.combine import combine, combine_shared
from db.sqlgen.operators import operator_sql, table_rows, window_rows
from db.sqlgen.packed import packed_sql, packed_table
from db.sqlgen.share import share_joins
from db.sqlgen.slices import SLICE, SliceBuilder, SliceTable, sliced_chain
from db.sqlgen.terms import SqlGenerationError, alias, at_window_instant, col, num, tau_param
from db.sqlgen.tighten import exact_names, pushdown, read_columns
from federation.conventions import OUT, TAU, TS, output_column, stored_columns, us
from federation.packing import packed_count

if TYPE_CHECKING:  # plan nodes are read by their `kind`: db/ imports no plan code
    from federation.logical import NumberedPlan


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
    # the members whose rows leave the DB-op: one, but a DB-op shared by several queries
    # may have several (their rows are tagged `_out`: `outputs_query`)
    root = [m for m in members
            if any(p not in member_set for p in plan.parents.get(m, (None,)))]
    if not root or (len(root) > 1 and not plan.many):
        raise SqlGenerationError(f"a DB-op must be one connected subtree, got roots {root}")

    # which aggregations fold into slices: every reader of their table must, or the rows
    # are kept anyway (then slices still save the aggregation's scan)
    slide = next((plan.nodes[o].row_window().instants.slide_s for _, o in inputs
                  if plan.nodes[o].row_window() is not None), 1.0)  # the query's
    builder = SliceBuilder(plan, us(slide))
    sliced: dict[str, tuple[tuple, dict]] = {}
    chains: dict[str, list[str]] = {}
    if slices:
        for m in members:
            chain = sliced_chain(plan, member_set, m, row_level)
            if chain is not None:
                if chain[0] not in table_of:
                    raise SqlGenerationError(f"input {chain[0]} of the DB-op has no table")
                sliced[m] = builder.add(m, chain, table_of[chain[0]])
                chains[m] = chain
    tables = builder.tables()
    # counts of window rows against a value of their key read packs (db.sqlgen.packed)
    packed, packs = {}, {}  # counts of one DB-op over the same packs share their table
    for m in members if slices else ():
        pc = None if m in sliced else packed_count(plan, member_set, m, row_level)
        if pc is not None and pc.input in table_of:
            tab = packed_table(plan, pc, f"k{len(packs)}", table_of[pc.input])
            have = packs.setdefault((tab.source, tab.meaning), tab)
            if have.keep_us < tab.keep_us:  # kept for the longest range reading them
                have = packs[tab.source, tab.meaning] = replace(have, keep_us=tab.keep_us)
            packed[m] = (pc, (tab.source, tab.meaning))
    packed = {m: (pc, packs[k]) for m, (pc, k) in packed.items()}
    folds = {**chains, **{m: [*pc.chain, pc.join, *pc.over] for m, (pc, _) in packed.items()}}
    raw: dict[str, tuple[str, ...]] = {}
    for table, oid in inputs:
        if oid in row_level and _read_raw(plan, member_set, folds, oid):
            raw[table] = raw.get(table, ()) + (oid,)

    ctes: list[tuple[str, exp.Expression]] = []
    names: dict[str, str] = {}
    by_text: dict[str, str] = {}

    def shared_scan(sig: tuple, oids: list[str]) -> str:
        tab = tables[sig]
        name = f"n_{tab.name}"
        if name not in {n for n, _ in ctes}:  # its readers' window: one grid (the sig's)
            ctes.append((name, at_window_instant(combine_shared(tab, [
                (o, plan.nodes[o], sliced[o][1], us(plan.nodes[o].child.row_window().range_s))
                for o in oids]), plan.nodes[oids[0]].child.row_window())))
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
                q = exp.select(*[col(k) for k in node.keys],
                               *[alias(col(f"{oid}__{n}"), n) for n, _ in node.aggs]
                               ).from_(shared).where(exp.GT(this=col(f"_n_{oid}"),
                                                            expression=num(0)))
            else:
                q = at_window_instant(combine(node, tables[sig], pnames,
                                              us(node.child.row_window().range_s)),
                                      node.child.row_window())
        elif oid in packed:
            pc, tab = packed[oid]
            q = packed_sql(plan, pc, tab, source(plan.children[pc.join][1 - pc.side]))
        elif oid not in member_set:
            table = table_of.get(oid)
            if table is None:
                raise SqlGenerationError(f"input {oid} of the DB-op has no table")
            cols = list(node.schema)
            if node.kind == "table":
                q = table_rows(node, cols, table)
            elif oid in row_level:
                q = window_rows(node.row_window(), cols, table)
            else:
                q = (exp.select(*[col(c) for c in cols]).from_(exp.to_table(table))
                     .where(exp.EQ(this=col(TAU), expression=tau_param())))
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

    if len(root) == 1:
        out_cols = [alias(tau_param(), TAU)] + [col(c) for c in plan.nodes[root[0]].schema]
        query = exp.select(*out_cols).from_(source(root[0]))
    else:
        query = outputs_query(plan, root, [source(r) for r in root])
    for name, q in ctes:
        query = query.with_(name, as_=q, copy=False)  # not quadratic
    schema = {t: {TS: "TIMESTAMP", **stored_columns(plan.nodes[oids[0]])}
              for t, oids in raw.items()}
    for tab in tables.values():  # column names are what pruning needs, not types
        schema[tab.name] = schema[tab.coarse] = {SLICE: "BIGINT", **{k: "INT" for k in tab.keys},
                                               **{p: "DOUBLE" for p in tab.partials}}
    for tab in packs.values():
        schema[tab.name] = dict(tab.columns)
    for table, oid in inputs:
        if plan.nodes[oid].kind == "table":  # the table's own columns, no instant
            schema[table] = dict(plan.nodes[oid].columns)
        elif oid not in row_level:
            schema[table] = {TAU: "TIMESTAMP", **dict(plan.nodes[oid].schema)}
    # sqlglot's merge_subqueries moves a projection of an outer join's NULL-padded side
    # above the join (`TRUE AS m` is then TRUE also where no row matched, and `m IS NULL`
    # becomes `TRUE IS NULL`): a DB-op with an outer join keeps its operators' CTEs apart
    outer = any(getattr(plan.nodes[m], "how", "inner") != "inner" for m in members)
    query = share_joins(pushdown(query, schema, merge=not outer))
    for q, names_of in zip(_selects(query), _output_names(plan, root)):
        exact_names(q, names_of)
    raw_columns = {t: tuple(c for c in schema[t]
                            if c != TS and c.lower() in read_columns(query, t))
                   for t in raw}
    return DbOpSql(query, (*tables.values(), *packs.values()), raw, raw_columns)


def _read_raw(plan: NumberedPlan, members: set[str], chains: dict[str, list[str]],
               oid: str) -> bool:
    """True when a member reads input `oid`'s window rows other than by folding them into
    slices (in a plan of several queries one input or selection may be both folded and
    read raw, or be a DB-op's output)."""
    folding = {(chain[i], chain[i + 1]) for chain in chains.values()
               for i in range(len(chain) - 1)}
    folding |= {(chain[-1], agg) for agg, chain in chains.items()}

    def raw(x: str, is_input: bool) -> bool:
        for p in plan.parents.get(x, ()):
            if p not in members:
                if is_input:
                    continue  # another DB-op's or Spark's reader
                return True  # an output of the DB-op
            if (x, p) not in folding:
                return True
            if p not in chains and raw(p, False):  # a selection folded and read raw
                return True
        return False

    return raw(oid, True)


def outputs_query(plan: NumberedPlan, roots: list[str], sources: list[str]) -> exp.Expression:
    """The rows of every root in one statement (its CTEs, the shared operators, run once
    per instant): UNION ALL of one SELECT per root, tagged `_out` = k, with root k's
    columns as `_r{k}_{column}` and NULL for the others' (split again by the MIG)."""
    selects = []
    for k, (r, src) in enumerate(zip(roots, sources)):
        items = [alias(tau_param(), TAU), alias(num(k), OUT)]
        for j, r2 in enumerate(roots):
            for c, t in plan.nodes[r2].schema.items():
                value = col(c) if j == k else exp.cast(exp.null(), t)
                items.append(alias(value, output_column(j, c)))
        selects.append(exp.select(*items).from_(src))
    query = selects[0]
    for q in selects[1:]:
        query = exp.union(query, q, distinct=False)
    return query


def _selects(query: exp.Expression) -> list[exp.Select]:
    if isinstance(query, exp.Union):
        return [*_selects(query.left), *_selects(query.right)]
    return [query]


def _output_names(plan: NumberedPlan, roots: list[str]) -> list[list[str]]:
    if len(roots) == 1:
        return [[TAU, *plan.nodes[roots[0]].schema]]
    names = [TAU, OUT] + [output_column(j, c) for j, r in enumerate(roots)
                          for c in plan.nodes[r].schema]
    return [names] * len(roots)
