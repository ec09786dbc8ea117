"""Navigation functions in a SELECT list: `LAG(x, n, default)`, `LEAD(x, n, default)` and
`FIRST_VALUE(x)` OVER (PARTITION BY ... ORDER BY ...), each row with a value of another row
of its partition at the instant.

At instant tau the partitions are the relation's rows at tau equal in the PARTITION BY
columns (NULL equal to NULL), ordered by the ORDER BY as ROW_NUMBER orders them (ties
broken by the other columns, so every engine picks the same row); LAG's value is that of
the row n places before (LEAD: after), `default` (NULL) where there is none; FIRST_VALUE's
that of the first row. The plan numbers the rows and left-joins them with themselves
(`Relation.lag`, `Relation.first_value`). Without ORDER BY which row is meant is not
defined: refused; so are a frame (ROWS/RANGE ...), IGNORE NULLS, LAST_VALUE (its default
frame ends at the row's last peer: write FIRST_VALUE with the order reversed) and NTH_VALUE.

    >>> from federation import sql
    >>> from federation.smartplug import smartplug_stream
    >>> w = "HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
    >>> q = sql(f"SELECT plug_id, value - LAG(value, 1, 0) OVER (PARTITION BY plug_id "
    ...         f"ORDER BY ts) AS d FROM {w}", {"s": smartplug_stream()})
    >>> sorted({n.kind for n in q.walk()})  # the rows numbered, joined with themselves
    ['join', 'project', 'row_number', 'rstream', 'window']
"""

from __future__ import annotations

from sqlglot import exp

from federation.logical import Relation
from federation.logical.builder import name_maker
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.ranking import descending, navigation
from federation.sqlfront.scopes import Scope

#: the functions, and the SQL name each is written with
FUNCTIONS = {exp.Lag: "LAG", exp.Lead: "LEAD", exp.FirstValue: "FIRST_VALUE"}
REFUSED = {exp.LastValue: "LAST_VALUE(x) OVER (... ORDER BY o): its default frame ends at "
                          "the row's last peer; write FIRST_VALUE(x) OVER (... ORDER BY o "
                          "DESC)",
           exp.NthValue: "NTH_VALUE is not supported; LAG, LEAD and FIRST_VALUE are"}



def navigations(text: SqlText, q: exp.Select, scope: Scope) -> None:
    """Replace each navigation function OVER (...) of `q`'s SELECT list by a hidden column
    of `scope.node` holding its value (module doc)."""
    fresh = name_maker(set(scope.node.schema))
    for w in [w for e in q.expressions for w in e.find_all(exp.Window) if navigation(w)]:
        name = fresh("_nav")
        scope.node = _navigate(text, w, scope, name)
        w.replace(exp.column(name))


def _navigate(text: SqlText, w: exp.Window, scope: Scope, name: str):
    """The plan of one navigation function OVER (...): the scope's relation with its value
    as the column `name`."""
    f = w.this
    if isinstance(f, (exp.IgnoreNulls, exp.RespectNulls)):
        raise text.fail(f"{f.sql()}: IGNORE/RESPECT NULLS is not supported", "OVER", w,
                        "OVER")
    if type(f) in REFUSED:
        raise text.fail(REFUSED[type(f)], "OVER", w, "OVER")
    call = FUNCTIONS[type(f)]
    if w.args.get("spec") is not None:
        raise text.fail(f"{call} OVER (... ROWS/RANGE ...): a frame is not supported; "
                        f"{call} OVER (PARTITION BY ... ORDER BY ...) is", "OVER", w,
                        "OVER")
    part = [scope.resolve(p, "OVER") for p in w.args.get("partition_by") or []
            if not scope.is_instant(p)]
    order = [(scope.resolve(o.this, "OVER"), o) for o in
             (w.args.get("order") or exp.Order(expressions=[])).expressions
             if not scope.is_instant(o.this)]
    for c in [*part, *(c for c, _ in order)]:
        if not isinstance(c, exp.Column):
            raise text.fail(f"{call} OVER (...) by {c.sql()}: partition and order by "
                            "columns (compute the expression in a subquery)", "OVER", w,
                            "OVER")
    if not order:
        raise text.fail(f"{call} OVER (... ORDER BY ...): which row is {call}'s is not "
                        "defined without an order; order by a column", "OVER", w, "OVER")
    value = scope.resolve(f.this, "OVER")
    if not isinstance(value, exp.Column):
        raise text.fail(f"{call}({f.this.sql()}): of a column (compute the expression "
                        "in a subquery)", "OVER", f)
    keys = [(c.name, descending(text, o)) for c, o in order]
    by = list(dict.fromkeys(c.name for c in part))
    rel = Relation(scope.node)
    if isinstance(f, exp.FirstValue):
        return text.build("OVER", w, lambda: rel.first_value(value.name, keys, by,
                                                              name).node)
    n, default = _offset(text, f, call), f.args.get("default")
    default = None if default is None else scope.resolve(default, "OVER")
    return text.build("OVER", w, lambda: rel.lag(
        value.name, keys, by, n if isinstance(f, exp.Lag) else -n, default, name).node)


def _offset(text: SqlText, f: exp.Expression, call: str) -> int:
    n = f.args.get("offset")
    if n is None:
        return 1
    if not (isinstance(n, exp.Literal) and not n.is_string and str(n.this).isdigit()):
        raise text.fail(f"{call}'s offset takes a whole number >= 0", "OVER", n)
    return int(n.this)
