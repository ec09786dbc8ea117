"""Ranking at each instant: `ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) AS rn` (or
RANK(), DENSE_RANK(): ties in the ORDER BY share a number) in a SELECT list (Flink's window
Top-N: `WHERE rn <= n` over it), and `ORDER BY ... LIMIT n` of
a SELECT or a UNION (the first n rows of each instant's result). Both become the plan's
`RowNumber` (federation/logical/rank.py), whose order is total: after the ORDER BY, the
other columns ascending, NULLs last in every column (so every engine picks the same rows).
`window_start` and `window_end` in PARTITION BY or ORDER BY are the instant (dropped).
"""

from __future__ import annotations

from sqlglot import exp

from federation.logical import Node, Relation
from federation.logical.names import name_maker
from federation.sqlfront.dialect import PythonAgg, SqlText, check_scalar
from federation.sqlfront.scopes import Scope

#: the ranking functions of a SELECT item, as RowNumber's `function`
FUNCTIONS = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}


def numbered(item: exp.Expression) -> bool:
    """`item` (a SELECT item) is `ROW_NUMBER() OVER (...)` (RANK, DENSE_RANK), named or
    not."""
    inner = item.this if isinstance(item, exp.Alias) else item
    return isinstance(inner, exp.Window) and type(inner.this) in FUNCTIONS


def windowed_aggregate(w: exp.Expression) -> bool:
    """`w` is COUNT, SUM, AVG, MIN, MAX, MEDIAN, a percentile, STDDEV, VARIANCE, LISTAGG or a
    Python aggregate OVER (...) (over.py)."""
    f = w.this if isinstance(w, exp.Window) else None
    if isinstance(f, exp.Filter):
        f = f.this
    return isinstance(f, (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev,
                          exp.StddevSamp, exp.StddevPop, exp.Variance, exp.VariancePop,
                          exp.Median, exp.PercentileCont, exp.PercentileDisc, exp.GroupConcat,
                          PythonAgg))


def navigation(w: exp.Expression) -> bool:
    """`w` is LAG, LEAD, FIRST_VALUE, LAST_VALUE, NTH_VALUE, NTILE, PERCENT_RANK or
    CUME_DIST OVER (...) (navigation.py)."""
    f = w.this if isinstance(w, exp.Window) else None
    if isinstance(f, (exp.IgnoreNulls, exp.RespectNulls)):
        f = f.this
    return isinstance(f, (exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue,
                          exp.Ntile, exp.PercentRank, exp.CumeDist))


def refuse_window_functions(text: SqlText, q: exp.Expression) -> None:
    """Every OVER but a SELECT item's own `ROW_NUMBER() OVER (...) AS name` (RANK,
    DENSE_RANK) and an aggregate's OVER (over.py) is refused."""
    for e in q.expressions:
        for w in e.find_all(exp.Window):
            if numbered(e) and w is (e.this if isinstance(e, exp.Alias) else e) or \
                    windowed_aggregate(w) or navigation(w):
                continue
            raise text.fail("window functions (OVER ...) are not supported but ROW_NUMBER(), "
                            "RANK() or DENSE_RANK() OVER (PARTITION BY ... ORDER BY ...) AS "
                            "name as a SELECT item, LAG, LEAD, FIRST_VALUE, LAST_VALUE, "
                            "NTH_VALUE, NTILE, PERCENT_RANK, CUME_DIST and aggregates OVER "
                            "(...); use a window table function and GROUP BY",
                            "OVER", w, "OVER")


def number_rows(text: SqlText, q: exp.Select, scope: Scope, aggregated: bool) -> str | None:
    """The ROW_NUMBER item of `q`, if any, as a RowNumber over the scope's relation (the
    scope then reads it); its name, which the SELECT list reads as a column."""
    items = [e for e in q.expressions if numbered(e)]
    if not items:
        return None
    if len(items) > 1:
        raise text.fail("one ROW_NUMBER(), RANK() or DENSE_RANK() per SELECT", "OVER",
                        items[1], "OVER")
    item = items[0]
    w = item.this if isinstance(item, exp.Alias) else item
    fn = FUNCTIONS[type(w.this)]
    call = f"{fn.upper()}()"
    if not isinstance(item, exp.Alias):
        raise text.fail(f"name the row number: {call} OVER (...) AS name", "OVER", item)
    if aggregated:
        raise text.fail(f"{call} beside GROUP BY or aggregates: aggregate in a subquery "
                        "and number its rows above it", "OVER", item, "OVER")
    computed: dict[str, exp.Expression] = {}  # an expression: a hidden column
    part = [_column(text, scope, p, "PARTITION BY", computed)
            for p in w.args.get("partition_by") or []]
    order = []
    for o in (w.args.get("order") or exp.Order(expressions=[])).expressions:
        name = _column(text, scope, o.this, "ORDER BY", computed)
        if name is not None:
            order.append((name, descending(text, o)))
    if not order:
        raise text.fail(f"{call} OVER (... ORDER BY ...): order by at least one column "
                        "(the window's instant alone leaves the order open)", "OVER", w, "OVER")
    node = scope.node

    def ranked() -> Node:
        rel = Relation(node).project(*node.schema, **computed) if computed else Relation(node)
        return rel.row_number(order, [p for p in part if p is not None], item.alias, fn).node
    scope.node = text.build("OVER", w, ranked)  # the SELECT list drops the hidden columns
    return item.alias


def _count(text: SqlText, clause: exp.Expression, what: str, least: int) -> int:
    n = clause.expression
    if not (isinstance(n, exp.Literal) and not n.is_string and str(n.this).isdigit()
            and int(n.this) >= least):
        raise text.fail(f"{what} takes a whole number >= {least}", what, clause, what)
    return int(n.this)


def order_limit(text: SqlText, q: exp.Expression, node: Node, picked: bool = False) -> Node:
    """`ORDER BY ... LIMIT n [OFFSET m]` of `q` over its plan `node`: the first n rows at
    each instant (`Node.top`), after the first m (rows m+1 to m+n: a ROW_NUMBER, a
    selection, a projection). ORDER BY without LIMIT or OFFSET (unless it `picked` the
    rows of DISTINCT ON), LIMIT or OFFSET without ORDER BY are refused."""
    order, limit, offset = q.args.get("order"), q.args.get("limit"), q.args.get("offset")
    if order is None and limit is None and offset is None:
        return node
    if limit is None and offset is None:
        if picked:
            return node  # DISTINCT ON's ORDER BY: it picked each group's row
        raise text.fail("ORDER BY without LIMIT: each instant's result is a set of rows (sort "
                        "the output file instead); ORDER BY ... LIMIT n keeps the first n",
                        "ORDER BY", order, "ORDER BY")
    if order is None:
        what, clause = ("LIMIT", limit) if limit is not None else ("OFFSET", offset)
        raise text.fail(f"{what} without ORDER BY: which rows is not defined; write ORDER BY "
                        f"... {what} n", what, clause, what)
    n = _count(text, limit, "LIMIT", 1) if limit is not None else None
    skip = _count(text, offset, "OFFSET", 0) if offset is not None else 0
    computed: dict[str, exp.Expression] = {}
    keys = _order_keys(text, order, node, computed)
    if not computed:
        below = node
    else:  # an expression over the result's columns (a UNION's): hidden columns
        below = text.build("ORDER BY", order, lambda: Relation(node).project(
            *node.schema, **computed).node)
    if not skip:
        top = text.build("ORDER BY", order, lambda: Relation(below).top(n, keys).node)
    else:
        top = text.build("OFFSET", offset, lambda: _rows_after(below, keys, skip, n))
    return top if not computed else text.build(
        "ORDER BY", order, lambda: Relation(top).project(*node.schema).node)


def order_items(text: SqlText, q: exp.Select) -> list[str]:
    """ORDER BY items of a SELECT that are not columns of its result, made so: a position
    (`ORDER BY 2`) is the item's name; an expression (over the FROM's columns, an aggregate
    `ORDER BY COUNT(*) DESC`, a subquery: whatever a SELECT item may be) or a column the
    SELECT does not output becomes a hidden SELECT item `_order<i>`, which the query drops
    after its ORDER BY ... LIMIT; their names. Under SELECT DISTINCT an order is of the
    distinct rows, so by their columns (SQL's rule)."""
    order = q.args.get("order")
    if order is None:
        return []
    items = list(q.expressions)
    star = any(isinstance(e, exp.Star) or isinstance(e, exp.Column) and isinstance(
        e.this, exp.Star) for e in items)
    names = {e.alias_or_name for e in items}
    distinct = q.args.get("distinct")
    hidden: list[str] = []
    fresh = name_maker(names)
    for o in order.expressions:
        c = o.this
        if isinstance(c, exp.Literal) and not c.is_string and str(c.this).isdigit():
            k = int(c.this)
            if not 1 <= k <= len(items) or star:
                raise text.fail(f"ORDER BY {k}: the SELECT has {len(items)} items"
                                + (" (one is *: name the column)" if star else ""),
                                "ORDER BY", o, "ORDER BY")
            o.set("this", exp.column(items[k - 1].alias_or_name))
            continue
        if isinstance(c, exp.Column) and (star or c.name in names or c.name in (
                "window_start", "window_end")):
            continue
        if distinct is not None and distinct.args.get("on") is None:
            raise text.fail(f"ORDER BY {c.sql()} of SELECT DISTINCT: the order is of the "
                            "distinct rows, so by their columns (SELECT it too)",
                            "ORDER BY", o, "ORDER BY")
        name = fresh("_order")
        q.append("expressions", exp.alias_(c.copy(), name))
        o.set("this", exp.column(name))
        hidden.append(name)
    return hidden


def _order_keys(text: SqlText, order: exp.Expression, node: Node,
                computed: dict[str, exp.Expression] | None = None) -> list[tuple[str, bool]]:
    """ORDER BY's (column, descending), each a column of the result `node` (the instant's
    window_start or window_end, not in it, is left out: each instant is ordered alone) or,
    given `computed`, an expression over them, added there as a hidden column."""
    keys = []
    for o in order.expressions:
        c = o.this
        if isinstance(c, exp.Column) and c.name in ("window_start", "window_end") \
                and c.name not in node.schema:
            continue  # the instant: each instant's rows are ordered on their own
        cols = [x for x in c.walk() if isinstance(x, exp.Column)]
        if computed is not None and not isinstance(c, exp.Column) and cols and all(
                not x.table and x.name in node.schema for x in cols):
            check_scalar(text, c, "ORDER BY")
            name = name_maker([*node.schema, *computed])("_order")
            computed[name] = c.copy()
            keys.append((name, descending(text, o)))
            continue
        if not isinstance(c, exp.Column) or c.name not in node.schema:
            raise text.fail(f"ORDER BY {c.sql()}: order by a column of the result or an "
                            f"expression over them (available: {', '.join(node.schema)})",
                            "ORDER BY", o, "ORDER BY")
        keys.append((c.name, descending(text, o)))
    if not keys:
        raise text.fail("ORDER BY the instant alone leaves the order open: order by a column",
                        "ORDER BY", order, "ORDER BY")
    return keys


def distinct_on(text: SqlText, q: exp.Expression, node: Node) -> Node:
    """`SELECT DISTINCT ON (c, ...) ... ORDER BY ...` (PostgreSQL's, DuckDB's): at each
    instant, of the rows equal in the ON columns, the first under ORDER BY; a window Top-1
    partitioned by them (Flink's deduplication, ROW_NUMBER() ... = 1), ties as ROW_NUMBER
    breaks them. ON names columns of the result or expressions over them (each computed in
    a hidden column, dropped after), ORDER BY columns; without ORDER BY which row is not
    defined: refused."""
    distinct = q.args["distinct"]
    on = distinct.args["on"]
    cols: list[str] = []
    computed: dict[str, exp.Expression] = {}  # an ON expression: a hidden column
    scope = Scope.of(text, node, "")
    for c in on.expressions if isinstance(on, exp.Tuple) else [on]:
        if isinstance(c, exp.Column) and c.name in node.schema:
            cols.append(c.name)
            continue
        if isinstance(c, (exp.Column, exp.Literal)) or not any(
                isinstance(x, exp.Column) for x in c.walk()):
            raise text.fail(f"DISTINCT ON ({c.sql()}): name a column of the result, or an "
                            f"expression over them (available: {', '.join(node.schema)})",
                            "DISTINCT ON", c, "DISTINCT")
        check_scalar(text, c, "DISTINCT ON")
        name = f"_on{len(computed) + 1}"
        while name in node.schema:
            name = "_" + name
        computed[name] = scope.resolve(c, "DISTINCT ON")
        cols.append(name)
    order = q.args.get("order")
    if order is None:
        raise text.fail("DISTINCT ON without ORDER BY: which row of each group is kept is not "
                        "defined; write ORDER BY", "DISTINCT ON", distinct, "DISTINCT")
    keys = _order_keys(text, order, node)

    def first_rows() -> Node:
        rel = Relation(node).project(*node.schema, **computed) if computed else Relation(node)
        out = rel.top(1, keys, cols)
        return out.project(*node.schema).node if computed else out.node
    return text.build("DISTINCT ON", distinct, first_rows)


def _rows_after(node: Node, keys: list, skip: int, n: int | None) -> Node:
    """Rows skip+1 to skip+n (to the last without n) of each instant in the order `keys`
    (ties as ROW_NUMBER breaks them)."""
    cols, hidden = list(node.schema), "_rank"
    while hidden in cols:
        hidden = "_" + hidden
    keep = f"{hidden} > {skip}" + (f" AND {hidden} <= {skip + n}" if n is not None else "")
    return Relation(node).row_number(keys, (), hidden).filter(keep).project(*cols).node


def qualify_items(q: exp.Select) -> list[str]:
    """QUALIFY's window functions written inline (`QUALIFY ROW_NUMBER() OVER (...) <= 3`,
    DuckDB's habit), and the columns it reads that the SELECT does not output (a qualified
    `a.x`, or a name no item gives, unless SELECT *), as hidden SELECT items, each replaced
    in QUALIFY by its name: their names (`qualify` drops them after its selection)."""
    clause = q.args.get("qualify")
    if clause is None:
        return []
    taken = {e.alias_or_name for e in q.expressions}
    star = any(isinstance(e, exp.Star) or isinstance(e, exp.Column) and isinstance(
        e.this, exp.Star) for e in q.expressions)
    hidden: list[str] = []
    inline = list(clause.this.find_all(exp.Window))
    read = [c for c in clause.this.find_all(exp.Column) if c.find_ancestor(exp.Window) is None
            and (c.table or not star and c.name not in taken)]  # not in the SELECT's result
    for e in inline + read:
        name = f"_qualify{len(hidden) + 1}"
        while name in taken:
            name = "_" + name
        q.append("expressions", exp.alias_(e.copy(), name))
        e.replace(exp.column(name))
        hidden.append(name)
    return hidden


def qualify(text: SqlText, q: exp.Expression, node: Node, hidden: list[str] = ()) -> Node:
    """QUALIFY cond: a selection of the SELECT's result (after its ROW_NUMBER, before
    DISTINCT and ORDER BY), over the names the SELECT gives (`QUALIFY rn <= 3` of
    `ROW_NUMBER() OVER (...) AS rn`) and the `hidden` items of its inline window functions
    (`qualify_items`), dropped after it."""
    clause = q.args.get("qualify")
    if clause is None:
        return node
    cond = clause.this
    for c in cond.find_all(exp.Column):
        if c.table or c.name not in node.schema:
            raise text.fail(f"QUALIFY reads the SELECT's result by its names (available: "
                            f"{', '.join(node.schema)}), not {c.sql()}: name the "
                            "ROW_NUMBER() item and compare it (QUALIFY rn <= 3)",
                            "QUALIFY", c)
    if cond.find(exp.AggFunc) is not None:
        raise text.fail("QUALIFY over an aggregate without OVER: QUALIFY selects rows by "
                        "their window functions; aggregate in HAVING", "QUALIFY", cond)
    kept = [c for c in node.schema if c not in hidden]

    def selected() -> Node:
        out = Relation(node).filter(cond.copy())
        return out.project(*kept).node if hidden else out.node
    return text.build("QUALIFY", clause, selected)


def _column(text: SqlText, scope: Scope, e: exp.Expression, clause: str,
            computed: dict[str, exp.Expression]) -> str | None:
    """A PARTITION BY or ORDER BY item: a column, or an expression over the scope's columns
    computed in a hidden column (added to `computed`); None for the instant."""
    if scope.is_instant(e):
        return None
    if not any(isinstance(x, exp.Column) for x in e.walk()):
        raise text.fail(f"{clause} {e.sql()}: a constant orders and partitions nothing; name "
                        "a column or an expression over them", clause, e)
    check_scalar(text, e, clause)
    out = scope.resolve(e, clause)
    if isinstance(out, exp.Column):
        return out.name
    name = name_maker([*scope.node.schema, *computed])("_over")
    computed[name] = out
    return name


def descending(text: SqlText, o: exp.Ordered) -> bool:
    if o.args.get("nulls_first"):
        raise text.fail("NULLS FIRST: NULLs come last in every order here", "ORDER BY", o,
                        "NULLS")
    return bool(o.args.get("desc"))
