"""The SELECT list, with GROUP BY and HAVING: a projection, or an aggregation.

Without GROUP BY, HAVING or an aggregate, the list is a projection: bare columns,
`expr AS name` and `*` (`a.*`) in any order (`*`, or a list equal to the input's
columns, adds no operator). Otherwise it is an aggregation: GROUP BY columns (the window's instant is
dropped there), aggregates COUNT(*), COUNT, SUM, AVG, MIN, MAX, and expressions over
keys and aggregates (`MAX(v) - MIN(v) AS spread`), which add a projection above it; an
aggregate without a name is called `count`, `<func>_<column>` or `_agg<i>`; HAVING is a
selection above the aggregation. One aggregate written twice is computed once. An aggregate
with `FILTER (WHERE cond)` (Flink's, Nexmark q15/q16) is the aggregate of `CASE WHEN cond
THEN arg END` (expressions.agg_call).
"""

from __future__ import annotations

from sqlglot import exp

from federation.logical import Node, Relation
from federation.logical.nodes import Project
from federation.sqlfront.aggregates import Aggregates, filtered
from federation.sqlfront.dialect import (
    SqlText,
    by_position,
    check_scalar,
    has_subquery,
    selectivity,
    unnamed,
)
from federation.sqlfront.group_windows import is_star
from federation.sqlfront.having import (
    having_subqueries,
    outside_subqueries,
    selected_subqueries,
)
from federation.sqlfront.ranking import number_rows, numbered
from federation.sqlfront.scopes import Scope, shown_as


def select_list(text: SqlText, q: exp.Select, scope: Scope,
                instants: dict[int, dict[str, str]] | None = None, translate=None) -> Node:
    """The plan of `q`'s SELECT list (with GROUP BY and HAVING) over `scope`; the names
    its items give the instant (`window_end AS endtime`) go to `instants` by the plan's id.
    `translate`: the plan of a subquery (a HAVING's, having.py)."""
    named = {e.alias_or_name: w for e in q.expressions
             if (w := scope.instant_of(e.unalias())) is not None}
    node = _select_list(text, q, scope, translate)
    if named and instants is not None:
        instants[id(node)] = {**instants.get(id(node), {}), **named}
    return node


def aggregates(q: exp.Select) -> bool:
    """The SELECT is an aggregation: GROUP BY, HAVING or an aggregate in its list (not in
    a subquery there, nor OVER a partition)."""
    return (q.args.get("group") is not None or q.args.get("having") is not None
            or any(isinstance(n, exp.AggFunc) for e in q.expressions if not numbered(e)
                   for n in e.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Window)))))


def _select_list(text: SqlText, q: exp.Select, scope: Scope, translate) -> Node:
    items = list(q.expressions)
    group = q.args.get("group")
    having = q.args.get("having")
    rn = number_rows(text, q, scope, aggregates(q))  # ROW_NUMBER() OVER (...) AS rn
    if aggregates(q):
        return aggregate(text, q, scope, items, group, having, translate)
    if len(items) == 1 and isinstance(items[0], exp.Star):
        return scope.node
    columns: list[str] = []  # plain columns, kept by name
    outputs: dict[str, exp.Expression] = {}
    order: list[str] = []  # the SELECT's order
    for e in items:
        inner = e.this if isinstance(e, exp.Alias) else e
        if is_star(inner):
            for shown, c in scope.star(inner.table if isinstance(inner, exp.Column) else None,
                                       e).items():  # `*, x * 2 AS y`, `a.*, b.x AS bx`
                if c == rn:
                    continue  # `*, ROW_NUMBER() OVER (...) AS rn`: rn where it is written
                if shown == c:
                    columns.append(c)
                else:
                    outputs[shown] = exp.column(c)
                order.append(shown)
            continue
        if scope.is_instant(inner):
            continue  # the instant: every result row carries it as tau
        if numbered(e):  # a column of the RowNumber below
            columns.append(rn)
            order.append(rn)
            continue
        check_scalar(text, inner, "SELECT")
        out = scope.resolve(inner, "SELECT")
        alias = e.alias if isinstance(e, exp.Alias) else shown_as(inner, out, items)
        if isinstance(out, exp.Column) and alias in (None, out.name):
            columns.append(out.name)
            order.append(out.name)
            continue
        if alias is None:
            raise unnamed(text, inner, e)
        outputs[alias] = out
        order.append(alias)
    if not outputs and columns == list(scope.node.schema):
        return scope.node  # the identity
    projected, node = tuple((n, outputs.get(n, exp.column(n))) for n in order), scope.node
    return text.build("SELECT", q, lambda: Project(node, projected))


def group_keys(text: SqlText, scope: Scope, group: exp.Group | None,
               items: list[exp.Expression] = ()
               ) -> tuple[list[str], dict[str, exp.Expression], dict[str, str]]:
    """The keys of GROUP BY (without the window's instant), each once; those that are
    expressions (`GROUP BY plug_id % 2`; a projection below the aggregation computes each,
    named as the SELECT item that writes it, `plug_id % 2 AS parity`, else `_g<i>`); and
    each such expression as written -> its key (SELECT and HAVING name it so)."""
    keys: list[str] = []
    computed: dict[str, exp.Expression] = {}
    written: dict[str, str] = {}
    aliases = {e.this.sql(): e.alias for e in items if isinstance(e, exp.Alias)}
    for g in (group.expressions if group is not None else []):
        g = by_position(text, g, items)
        if scope.is_instant(g):
            continue
        if isinstance(g, exp.Column):
            k = scope.column_of(g.table or None, g.name, "GROUP BY", g)
        else:
            if isinstance(g, exp.Literal):
                raise text.fail(f"GROUP BY {g.sql()}: a constant groups nothing; name a "
                                "column, an expression or a SELECT item's position",
                                "GROUP BY", g)
            check_scalar(text, g, "GROUP BY")
            k = written.get(g.sql()) or aliases.get(g.sql()) or f"_g{len(computed) + 1}"
            while k in scope.node.schema and k not in computed:
                k = "_" + k
            computed.setdefault(k, scope.resolve(g, "GROUP BY"))
            written[g.sql()] = k
        if k not in keys:
            keys.append(k)
    for arg in ("rollup", "cube", "grouping_sets"):
        if group is not None and group.args.get(arg):
            raise text.fail(f"GROUP BY {arg.upper().replace('_', ' ')} is not supported",
                            "GROUP BY", group, "GROUP BY")
    return keys, computed, written


def aggregate(text: SqlText, q: exp.Select, scope: Scope, items: list[exp.Expression],
              group: exp.Group | None, having: exp.Having | None, translate=None) -> Node:
    """The aggregation of a SELECT list with aggregates, GROUP BY or HAVING."""
    keys, by_expr, grouped = group_keys(text, scope, group, items)
    aggs = Aggregates(text, scope, keys, grouped)
    # each SELECT item: a key, an aggregate, or an expression over them
    plain: list[tuple[str, str]] = []  # (output name, agg or key column)
    computed: dict[str, exp.Expression] = {}
    subs: dict[str, exp.Expression] = {}  # items with subqueries
    order: list[str] = []
    for e in items:
        inner = e.this if isinstance(e, exp.Alias) else e
        alias = e.alias if isinstance(e, exp.Alias) else None
        if isinstance(inner, exp.Star):
            raise text.fail("SELECT * with GROUP BY: list the keys and aggregates",
                            "SELECT", e, "*")
        if scope.is_instant(inner):
            continue
        if isinstance(inner, exp.AggFunc) or filtered(inner):
            n = aggs.name(inner, alias)
            plain.append((n, n))
            order.append(n)
            continue
        if inner.sql() in aggs.grouped:  # a GROUP BY expression
            k = aggs.grouped[inner.sql()]
            plain.append((alias or k, k))
            order.append(alias or k)
            continue
        if isinstance(inner, exp.Column):
            k = scope.column_of(inner.table or None, inner.name, "SELECT", inner)
            if k not in keys:
                raise text.fail(f"column {inner.sql()} is neither grouped nor aggregated",
                                "SELECT", inner)
            alias = alias or shown_as(inner, exp.column(k), items) or k
            plain.append((alias, k))
            order.append(alias)
            continue
        if alias is None:
            raise unnamed(text, inner, e)
        order.append(alias)
        if has_subquery(inner):  # joined to the groups after the aggregation (having.py)
            subs[alias] = outside_subqueries(inner, aggs.over)
            continue
        check_scalar(text, inner, "SELECT", aggs_ok=True)
        computed[alias] = aggs.over(inner)
    pred = held = None
    if having is not None and has_subquery(having.this):  # joined after the aggregation
        held = outside_subqueries(having.this, aggs.over)
    elif having is not None:
        check_scalar(text, having.this, "HAVING", aggs_ok=True)
        pred = aggs.over(having.this)
        sel = selectivity(having)
    if not aggs.calls:
        # GROUP BY keys alone: each group once (Nexmark q8's persons and sellers), as an
        # aggregation with a count that the projection above drops
        if not order:
            raise text.fail("GROUP BY only the window's instant selects nothing: name a "
                            "column or an aggregate", "GROUP BY", group, "GROUP BY")
        hidden = "_group_rows"
        while hidden in keys:
            hidden = "_" + hidden
        aggs.name(exp.Count(this=exp.Star()), hidden)
    below = scope.node
    if by_expr:  # the GROUP BY expressions, beside every column the aggregates read
        below = text.build("GROUP BY", group, lambda: Project(below, tuple(
            (c, exp.column(c)) for c in scope.node.schema) + tuple(by_expr.items())))
    node = text.build("GROUP BY", group or q,
                      lambda: Relation(below).aggregate(by=keys, **aggs.calls).node)
    if pred is not None:
        node = text.build("HAVING", having, lambda: Relation(node).filter(pred, selectivity=sel).node)
    if held is not None:
        node = having_subqueries(text, having, held, node, scope, keys, translate)
    if subs:
        node, values = selected_subqueries(text, subs, node, scope, keys, translate, q)
        computed.update(values)
    schema = list(node.schema)
    if not computed and [n for n, _ in plain] == schema \
            and all(n == src for n, src in plain):
        return node
    source = dict(plain)
    projected = tuple((n, computed[n] if n in computed else exp.column(source[n]))
                      for n in order)
    return text.build("SELECT", q, lambda: Project(node, projected))
