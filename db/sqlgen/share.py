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

What depends on the right relation alone is computed once per right row, in a CTE of the
build side (`_Build`), not once per joined pair: each query's conditions on it, and the
right-hand side of each comparison of a left column with right columns. When every
query compares the same left column the same way, the OR is one comparison with the
least (or greatest) bound: CQ1 (`value > 0.9 * maxv`) and CQ2 (`value > avgv + 1e-9`)
join `ON keys AND value > LEAST(0.9 * maxv, avgv + 1e-9)` and count with a comparison
each (measured on a 60-s window at 300,000 rows/s: 440 ms per slide for CQ1-CQ6 against
620 with the expressions per pair; CQ2 alone 350).
"""

from __future__ import annotations

from sqlglot import exp

from db.sqlgen.terms import alias, col, num

JOINED = "n_joined"


def _conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    """`a AND (b AND c)` as [a, b, c], TRUE as none (federation.conjuncts.split_conjuncts
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


_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ,
         exp.NEQ: exp.NEQ}


def _side(e: exp.Expression, alias: str) -> bool:
    """Whether `e` reads columns, all of relation `alias`, and nothing but plain values."""
    cols = list(e.find_all(exp.Column))
    return bool(cols) and all(c.table == alias for c in cols) and not e.find(
        exp.AggFunc, exp.Subquery, exp.Window, exp.Placeholder)


class _Build:
    """The build side of the shared join computed once per row of the right relation:
    each query's conditions on the right relation alone, and the right-hand sides of its
    comparisons of a left column with right columns (`l.value > 0.9 * r.maxv` compares
    with `_j0_e0`, `CASE WHEN <its right-only conditions> THEN 0.9 * r.maxv END`), so that
    a joined pair evaluates one comparison per query instead of the expressions."""

    def __init__(self, left: str, right: str) -> None:
        self.left, self.right = left, right
        self.items: list[exp.Expression] = []
        #: per query: (left operand, comparison class, build value) when its condition is
        #: that one comparison
        self.single: list[tuple[str, type, exp.Expression] | None] = []

    def condition(self, j: int, cond: exp.Expression | None) -> exp.Expression | None:
        """Query j's condition over the joined pair, reading the build columns."""
        if cond is None:
            self.single.append(None)
            return None
        only, mixed = [], []
        for c in _conjuncts(cond):
            (only if _side(c, self.right) else mixed).append(c)
        ok = exp.and_(*[c.copy() for c in only]) if only else None
        out, comps = [], 0
        for c in mixed:
            cls = type(c)
            if cls in _FLIP and _side(c.this, self.left) and _side(c.expression, self.right):
                lhs, rhs = c.this, c.expression
            elif cls in _FLIP and _side(c.expression, self.left) and _side(c.this, self.right):
                lhs, rhs, cls = c.expression, c.this, _FLIP[cls]
            else:
                out.append(c.copy())
                continue
            name = f"_j{j}_e{comps}"
            comps += 1
            value = rhs.copy() if ok is None else exp.Case(ifs=[exp.If(
                this=ok.copy(), true=rhs.copy())])
            self.items.append(alias(value, name))
            out.append(cls(this=lhs.copy(), expression=col(name, self.right)))
        if ok is not None and not comps:  # nothing carries them: a column of their own
            self.items.append(alias(ok, f"_j{j}_ok"))
            out.insert(0, col(f"_j{j}_ok", self.right))
        first = out[0]
        self.single.append((first.this.sql("duckdb"), type(first), self.items[-1].this)
                           if len(out) == 1 and comps == 1 else None)
        return exp.and_(*out) if len(out) > 1 else out[0]

    def bound(self, conds: list[exp.Expression]) -> exp.Expression | None:
        """One comparison that keeps exactly the pairs some query counts, when every
        query's condition compares the same left operand the same way (>, >= or <, <=):
        `l.value > r._jb`, the build side's `_jb` the LEAST (GREATEST) of the queries'
        build values (they skip NULLs, as OR does a comparison with NULL)."""
        if not conds or any(s is None for s in self.single):
            return None
        lhs = {s[0] for s in self.single}
        ops = {s[1] for s in self.single}
        if len(lhs) != 1 or len(ops) != 1 or next(iter(ops)) not in (exp.GT, exp.GTE,
                                                                    exp.LT, exp.LTE):
            return None
        op = next(iter(ops))
        fn = exp.Least if op in (exp.GT, exp.GTE) else exp.Greatest
        values = [s[2].copy() for s in self.single]
        self.items.append(alias(fn(this=values[0], expressions=values[1:], ignore_nulls=True),
                                "_jb"))
        return op(this=conds[0].this.copy(), expression=col("_jb", self.right))


def _merged(name: str, shapes: list[_Shape]) -> list[tuple[str, exp.Select]]:
    """The one join of `shapes` (same signature) with every aggregate FILTERed by its
    query's condition and a count per query, after the CTE of its build side (_Build)
    when it computes anything; each shape's query is rewritten to read the join."""
    first = shapes[0]
    right = first.right.alias_or_name
    build = _Build(first.left.alias_or_name, right)
    conds = [build.condition(j, s.cond) for j, s in enumerate(shapes)]
    keys = {n: i for s in shapes for n, i in s.key_items.items()}
    items = [i.copy() for i in keys.values()]

    def filtered(agg: exp.Expression, where: exp.Expression | None) -> exp.Expression:
        if where is None:
            return agg.copy()
        return exp.Filter(this=agg.copy(), expression=exp.Where(this=where.copy()))

    for j, s in enumerate(shapes):
        items.append(alias(filtered(exp.Count(this=exp.Star()), conds[j]), f"_j{j}_n"))
        reads = []
        for item, is_key in zip(s.q.expressions, s.is_key):
            if not is_key:
                items.append(alias(filtered(item.unalias(), conds[j]), f"_j{j}_{item.alias}"))
            reads.append(alias(col(item.alias_or_name if is_key else f"_j{j}_{item.alias}"),
                               item.alias_or_name))
        s.reads = exp.select(*reads).from_(exp.to_table(name)).where(
            exp.GT(this=col(f"_j{j}_n"), expression=num(0)))
    on = exp.and_(*[k.copy() for k in first.keys])
    if all(c is not None for c in conds):  # rows that no query counts: not joined
        bound = build.bound(conds)
        on = exp.and_(on, bound if bound is not None else exp.Paren(
            this=exp.or_(*[exp.Paren(this=c.copy()) for c in conds])))
    ctes = []
    joined_right = first.right.copy()
    if build.items:
        bname = f"{name}_r"
        every = exp.Column(this=exp.Star(), table=exp.to_identifier(right, quoted=True))
        ctes.append((bname, exp.select(every, *build.items).from_(first.right.copy())))
        joined_right = exp.Table(this=exp.to_identifier(bname, quoted=True),
                                 alias=exp.TableAlias(this=exp.to_identifier(right, quoted=True)))
    ctes.append((name, exp.select(*items).from_(first.left.copy()).join(joined_right, on=on)
                 .group_by(*[g.copy() for g in first.group])))
    return ctes


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
    merged: dict[int, list[exp.CTE]] = {}  # id of a group's first CTE -> CTEs put before it
    for n, members in enumerate(m for m in groups.values() if len(m) > 1):
        name = f"{JOINED}{n}"
        made = _merged(name, [s for _, s in members])
        for cte, s in members:
            cte.set("this", s.reads)
        merged[id(members[0][0])] = [exp.CTE(this=q, alias=exp.TableAlias(
            this=exp.to_identifier(n_, quoted=True))) for n_, q in made]
    if merged:
        ctes = []
        for cte in with_.expressions:
            ctes.extend(merged.get(id(cte), []))
            ctes.append(cte)
        with_.set("expressions", ctes)
    return query
