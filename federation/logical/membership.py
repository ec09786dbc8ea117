"""`x IN (subquery)` and `x NOT IN (subquery)` as plans: the rows of a relation whose
values are (not) among another relation's rows at each instant (SQL's three-valued rule).

`where_in(rel, columns, sub)` keeps the rows of `rel` whose `columns` equal a row of
`sub` (as many columns, numeric types widened to the wider): a join with `sub`'s distinct
rows (a semi join: each row at most once; NULL matches nothing). `negated`: the rows for
which NOT IN is TRUE: `sub` is empty at the instant, or no value is NULL, none equals a
row of `sub`, and no row of `sub` has a NULL; an outer join with `sub`'s distinct rows
(marked) and an instant join with `sub`'s count of rows and of rows with a NULL. `anti`:
the rows no row of `sub` equals (SQL's NOT EXISTS, correlated by these equalities: a NULL
value matches nothing, so its row is kept); the outer join alone, kept where unmarked. The
SQL front end (federation/sqlfront/subqueries.py) writes WHERE's IN with it, the fuzzer
draws it (benchmarks/fuzz_builder.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from federation.conventions import NUMERIC_TYPES
from federation.errors import QueryValidationError
from federation.expressions import AggCall
from federation.logical.builder import Relation, name_maker
from federation.logical.nodes import Node
from federation.logical.table import Table, fold_tables
from federation.logical.window import _reads_stream


def where_in(rel: Node | Relation, columns: Sequence[str], sub: Node | Relation,
             negated: bool = False, anti: bool = False) -> Relation:
    """The rows of `rel` whose `columns` are (`negated`: are not; `anti`: equal no) a row
    of `sub`."""
    rel, sub = Relation(rel), Relation(sub)
    subcols = list(sub.schema)
    if len(subcols) != len(columns):
        raise QueryValidationError("in", "subquery", f"IN compares {len(columns)} value(s) "
                                   f"with a subquery of {len(subcols)} column(s): they must "
                                   "be as many")
    fresh = name_maker(set(rel.schema) | set(sub.schema))

    keep, wide = list(rel.schema), []
    for o, c in zip(columns, subcols):
        t, u = rel.schema[o], sub.schema[c]
        if t != u and not (t in NUMERIC_TYPES and u in NUMERIC_TYPES):
            raise QueryValidationError("in", o, f"IN compares {t} with the subquery's {c!r} "
                                       f"({u}): cast one side")
        wide.append(max(t, u, key=NUMERIC_TYPES.index))
    casts = {fresh(f"_in_wide{i}"): exp.cast(exp.column(o), w)
             for i, (o, w) in enumerate(zip(columns, wide), 1) if rel.schema[o] != w}
    if casts:
        rel = rel.project(*rel.schema, **casts)
        it = iter(casts)
        columns = [o if rel.schema[o] == w else next(it) for o, w in zip(columns, wide)]
    inner = [fresh(f"_in_key{i}") for i in range(1, len(columns) + 1)]
    renamed = Relation(fold_tables(sub.project(**{
        n: exp.column(c) if sub.schema[c] == w else exp.cast(exp.column(c), w)
        for n, c, w in zip(inner, subcols, wide)}).node))
    values = (Relation(renamed.node.distinct_rows()) if isinstance(renamed.node, Table)
              else renamed.distinct())
    on = list(zip(columns, inner))
    if not negated and not anti:
        joined = rel.join(values, on)
        return joined.project(*keep) if casts else joined
    mark = fresh("_in_mark")
    marked = values.project(*inner, **{mark: exp.true()})
    if anti:
        return rel.join(marked, on, how="left").filter(exp.column(mark).is_(exp.null())
                                                       ).project(*keep)
    if not _reads_stream(sub.node):
        raise QueryValidationError("in", "subquery", "NOT IN over a database table alone: a "
                                   "table has no instants to count its rows at; write IN over "
                                   "the complement, or a LEFT JOIN ... WHERE key IS NULL")
    rows, nulls = fresh("_in_rows"), fresh("_in_nulls")
    any_null = exp.or_(*[exp.column(c).is_(exp.null()) for c in subcols])
    counts = sub.aggregate(by=[], **{rows: AggCall("count"), nulls: AggCall(
        "count", exp.Case(ifs=[exp.If(this=any_null, true=exp.Literal.number(1))]))})
    outer_null = exp.or_(*[exp.column(c).is_(exp.null()) for c in columns])
    kept = exp.or_(exp.column(rows).eq(0), exp.and_(
        exp.column(mark).is_(exp.null()), exp.not_(outer_null), exp.column(nulls).eq(0)))
    return (rel.join(marked, on, how="left").join(counts, on=[]).filter(kept)
            .project(*keep))
