"""Aggregates over the same join computed in one pass (a DB-op shared by several queries).

CQ1 and CQ2 run together join the same window rows with the same per-plug aggregates and
count the joined rows that pass each query's own condition: two joins of the same rows,
the costliest part of their DB-op. After tightening (db.sqlgen.tighten) each is a CTE

    SELECT keys, AGG(...) AS a FROM X AS l JOIN Y AS r ON l.k = r.k AND <cond> WHERE <w>
    GROUP BY keys

Such CTEs over the same `X`, `Y`, equi-join keys and grouping become one join whose
aggregates each carry their query's condition as a FILTER, with a count per query that
keeps the groups the query's own join would have produced:

    SELECT keys, AGG(...) FILTER (WHERE cond_1) AS _j0_a, COUNT(*) FILTER (WHERE cond_1)
      AS _j0_n, ... FROM X AS l JOIN Y AS r ON l.k = r.k AND (cond_1 OR cond_2 ...)
    GROUP BY keys

and each former CTE reads its columns from it (`WHERE _j0_n > 0`). Same rows: an inner
join's ON condition and WHERE filter the joined rows alike, a group is output exactly
when some row passes its condition, and each aggregate sees exactly those rows.
"""

from __future__ import annotations

from sqlglot import exp

from db.sqlgen.terms import alias, col, num

JOINED = "n_joined"


def _conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    """`a AND (b AND c)` as [a, b, c], TRUE as none (federation.expressions.split_conjuncts
    does the former for the plan's expressions; db/ does not import federation code)."""
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    if isinstance(e, exp.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    if isinstance(e, exp.Boolean) and e.this:
        return []  # WHERE TRUE
    return [e]


class _Shape:
    """A grouped aggregate over one inner equi-join of two named relations: its join
    (the relations, the key equalities), its condition (the other conjuncts of ON and
    WHERE) and its output items, each a grouping key or an aliased aggregate."""

    def __init__(self, q: exp.Select, left: exp.Table, right: exp.Table,
                 keys: list[exp.Expression], cond: list[exp.Expression]) -> None:
        self.q, self.left, self.right, self.keys = q, left, right, keys
        self.cond = exp.and_(*[c.copy() for c in cond]) if cond else None
        self.group = q.args["group"].expressions
        group_sql = {g.sql("duckdb") for g in self.group}
        self.is_key = is_key = [i.unalias().sql("duckdb") in group_sql for i in q.expressions]
        self.signature = (left.sql("duckdb"), right.sql("duckdb"),
                          tuple(sorted(k.sql("duckdb") for k in keys)),
                          tuple(g.sql("duckdb") for g in self.group))
        #: the grouping keys it outputs, by name (a query may output a subset of them)
        self.key_items = {i.alias_or_name: i for i, k in zip(q.expressions, is_key) if k}
        self.reads: exp.Select | None = None  # the query rewritten to read the shared join


def _shape(q: exp.Expression) -> _Shape | None:
    if not isinstance(q, exp.Select) or q.args.get("with_") or q.args.get("with"):
        return None
    joins = q.args.get("joins") or []
    frm = q.args.get("from_") or q.args.get("from")
    if (len(joins) != 1 or q.args.get("group") is None or frm is None
            or not isinstance(frm.this, exp.Table)
            or any(q.args.get(k) for k in ("having", "distinct", "order", "limit", "qualify"))):
        return None
    join = joins[0]
    if (not isinstance(join.this, exp.Table) or join.args.get("using") or join.side
            or (join.kind or "INNER").upper() != "INNER" or join.args.get("on") is None):
        return None
    sides = {frm.this.alias_or_name, join.this.alias_or_name}
    keys, cond = [], []
    for c in _conjuncts(join.args["on"]):
        if (isinstance(c, exp.EQ) and isinstance(c.this, exp.Column)
                and isinstance(c.expression, exp.Column) and len(sides) == 2
                and {c.this.table, c.expression.table} == sides):
            keys.append(c)
        else:
            cond.append(c)
    if not keys:
        return None
    where = q.args.get("where")
    cond += _conjuncts(where.this if where is not None else None)
    shape = _Shape(q, frm.this, join.this, keys, cond)
    for item, is_key in zip(q.expressions, shape.is_key):
        inner = item.unalias()
        if not (is_key or (isinstance(item, exp.Alias) and isinstance(inner, exp.AggFunc)
                           and not inner.find(exp.Distinct, exp.Filter, exp.Window))):
            return None
    return shape


def _merged(name: str, shapes: list[_Shape]) -> exp.Select:
    """The one join of `shapes` (same signature) with every aggregate FILTERed by its
    query's condition and a count per query; each shape's query is rewritten to read it."""
    first = shapes[0]
    keys = {n: i for s in shapes for n, i in s.key_items.items()}
    items = [i.copy() for i in keys.values()]

    def filtered(agg: exp.Expression, where: exp.Expression | None) -> exp.Expression:
        if where is None:
            return agg.copy()
        return exp.Filter(this=agg.copy(), expression=exp.Where(this=where.copy()))

    for j, s in enumerate(shapes):
        items.append(alias(filtered(exp.Count(this=exp.Star()), s.cond), f"_j{j}_n"))
        reads = []
        for item, is_key in zip(s.q.expressions, s.is_key):
            if not is_key:
                items.append(alias(filtered(item.unalias(), s.cond), f"_j{j}_{item.alias}"))
            reads.append(alias(col(item.alias_or_name if is_key else f"_j{j}_{item.alias}"),
                               item.alias_or_name))
        s.reads = exp.select(*reads).from_(exp.to_table(name)).where(
            exp.GT(this=col(f"_j{j}_n"), expression=num(0)))
    on = exp.and_(*[k.copy() for k in first.keys])
    if all(s.cond is not None for s in shapes):  # rows that no query counts: not joined
        on = exp.and_(on, exp.Paren(this=exp.or_(*[exp.Paren(this=s.cond.copy())
                                                   for s in shapes])))
    return (exp.select(*items).from_(first.left.copy()).join(first.right.copy(), on=on)
            .group_by(*[g.copy() for g in first.group]))


def share_joins(query: exp.Expression) -> exp.Expression:
    """`query` with its grouped aggregates over the same join computed in one (module
    doc): its CTEs rewritten in place; a query without two such CTEs is unchanged."""
    with_ = query.args.get("with_") or query.args.get("with")  # sqlglot 30 names it with_
    if with_ is None:
        return query
    groups: dict[tuple, list[tuple[exp.CTE, _Shape]]] = {}
    for cte in with_.expressions:
        shape = _shape(cte.this)
        if shape is None:
            continue
        group = groups.setdefault(shape.signature, [])
        named = {n: i.sql("duckdb") for _, s in group for n, i in s.key_items.items()}
        if all(named.get(n, i.sql("duckdb")) == i.sql("duckdb")
               for n, i in shape.key_items.items()):  # one name, one key
            group.append((cte, shape))
    merged: dict[int, exp.CTE] = {}  # id of a group's first CTE -> the CTE put before it
    for n, members in enumerate(m for m in groups.values() if len(m) > 1):
        name = f"{JOINED}{n}"
        q = _merged(name, [s for _, s in members])
        for cte, s in members:
            cte.set("this", s.reads)
        merged[id(members[0][0])] = exp.CTE(this=q, alias=exp.TableAlias(
            this=exp.to_identifier(name, quoted=True)))
    if merged:
        ctes = []
        for cte in with_.expressions:
            if id(cte) in merged:
                ctes.append(merged[id(cte)])
            ctes.append(cte)
        with_.set("expressions", ctes)
    return query
