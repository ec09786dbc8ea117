"""Navigation and distribution functions in a SELECT list: `LAG(x, n, default)`,
`LEAD(x, n, default)`, `FIRST_VALUE(x)`, `LAST_VALUE(x)`, `NTH_VALUE(x, n)`, `NTILE(n)`,
`PERCENT_RANK()` and `CUME_DIST()` OVER (PARTITION BY ... ORDER BY ... [frame]), each row
with a value of another row of its partition at the instant, or of its place in it.

At instant tau the partitions are the relation's rows at tau equal in the PARTITION BY
columns (NULL equal to NULL), ordered by the ORDER BY as ROW_NUMBER orders them (ties
broken by the other columns, so every engine picks the same row); LAG's value is that of
the row n places before (LEAD: after), `default` (NULL) where there is none; FIRST_VALUE,
LAST_VALUE and NTH_VALUE that of the first, last or n-th row of the row's frame (SQL's
default frame, RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW, ends at the row's last
peer; federation/logical/frames.py), NULL where it has no such row. The plan numbers the
rows and left-joins them with themselves (`Relation.lag`, `.first_value`, `.nth_value`,
`.ntile`, ...). IGNORE NULLS (after the function or its value) picks among the rows whose
value is not NULL (federation/logical/ignore_nulls.py). Without ORDER BY which row is meant
is not defined: refused; so is a frame on LAG, LEAD, NTILE, PERCENT_RANK or CUME_DIST (SQL
ignores it there).

    >>> from federation import sql
    >>> from federation.smartplug import smartplug_stream
    >>> w = "HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
    >>> q = sql(f"SELECT plug_id, value - LAG(value, 1, 0) OVER (PARTITION BY plug_id "
    ...         f"ORDER BY ts) AS d FROM {w}", {"s": smartplug_stream()})
    >>> sorted({n.kind for n in q.walk()})  # the rows numbered, joined with themselves
    ['join', 'project', 'row_number', 'rstream', 'window']
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from federation.logical.builder import name_maker
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.frames import frame_of, window_order
from federation.sqlfront.ranking import navigation
from federation.sqlfront.scopes import Scope

#: the functions, and the SQL name each is written with
FUNCTIONS = {exp.Lag: "LAG", exp.Lead: "LEAD", exp.FirstValue: "FIRST_VALUE",
             exp.LastValue: "LAST_VALUE", exp.NthValue: "NTH_VALUE", exp.Ntile: "NTILE",
             exp.PercentRank: "PERCENT_RANK", exp.CumeDist: "CUME_DIST"}
#: the functions of a frame's rows (the others ignore a frame in SQL: refused there)
FRAMED = (exp.FirstValue, exp.LastValue, exp.NthValue)
#: the distribution functions, as Relation's methods name them
DISTRIBUTION = {exp.Ntile: "ntile", exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist"}


def navigations(text: SqlText, q: exp.Select, scope: Scope) -> list[Callable]:
    """Replace each navigation function OVER (...) of `q`'s SELECT list by a hidden column
    holding its value: the functions adding each column to the scope's relation (a
    Relation: federation/logical/frames.add_columns applies them)."""
    fresh = name_maker(set(scope.node.schema))
    units = []
    for w in [w for e in q.expressions for w in e.find_all(exp.Window) if navigation(w)]:
        name = fresh("_nav")
        units.append(_navigate(text, w, scope, name))
        w.replace(exp.column(name))
    return units


def _navigate(text: SqlText, w: exp.Window, scope: Scope, name: str):
    """One navigation function OVER (...): a function of a relation (the scope's, maybe with
    more columns) to it with the function's value as the column `name`."""
    f, ignore = _nulls(w.this)
    call = FUNCTIONS[type(f)]
    if ignore and type(f) in DISTRIBUTION:
        raise text.fail(f"{call} IGNORE NULLS: IGNORE NULLS picks a row by its value "
                        "(LAG, LEAD, FIRST_VALUE, LAST_VALUE, NTH_VALUE); write it without",
                        "OVER", w, "OVER")
    frame = frame_of(text, w)
    if frame is not None and not isinstance(f, FRAMED):
        raise text.fail(f"{call} OVER (... {w.args['spec'].sql()}): {call} takes no frame "
                        "(SQL ignores it); write it without", "OVER", w, "OVER")
    keys, by = window_order(text, scope, w, call)
    if not keys:
        raise text.fail(f"{call} OVER (... ORDER BY ...): which row is {call}'s is not "
                        "defined without an order; order by a column", "OVER", w, "OVER")
    if type(f) in DISTRIBUTION:
        n = None if not isinstance(f, exp.Ntile) else _offset(text, f.this, call, 1)
        return lambda rel: text.build("OVER", w, lambda: rel.distribution(
            DISTRIBUTION[type(f)], keys, by, name, n))
    value = scope.resolve(f.this, "OVER")
    if not isinstance(value, exp.Column):
        raise text.fail(f"{call}({f.this.sql()}): of a column (compute the expression "
                        "in a subquery)", "OVER", f)
    if isinstance(f, exp.FirstValue) and frame is None and not ignore:
        return lambda rel: text.build("OVER", w, lambda: rel.first_value(value.name, keys,
                                                                          by, name))
    if isinstance(f, FRAMED):
        which = {exp.FirstValue: "first", exp.LastValue: "last"}.get(type(f)) or _offset(
            text, f.args.get("offset"), call, 1)
        return lambda rel: text.build("OVER", w, lambda: rel.nth_value(
            value.name, which, keys, by, name, frame, ignore))
    n, default = _offset(text, f.args.get("offset"), call, 0), f.args.get("default")
    default = None if default is None else scope.resolve(default, "OVER")
    return lambda rel: text.build("OVER", w, lambda: rel.lag(
        value.name, keys, by, n if isinstance(f, exp.Lag) else -n, default, name, ignore))


def _nulls(f: exp.Expression) -> tuple[exp.Expression, bool]:
    """The function, and whether IGNORE NULLS follows it or its value argument
    (`LAG(x IGNORE NULLS, 1)`, `LAG(x, 1) IGNORE NULLS`); RESPECT NULLS is SQL's default."""
    ignore = False
    if isinstance(f, (exp.IgnoreNulls, exp.RespectNulls)):
        ignore, f = isinstance(f, exp.IgnoreNulls), f.this
    arg = f.args.get("this")
    if isinstance(arg, (exp.IgnoreNulls, exp.RespectNulls)):
        ignore = ignore or isinstance(arg, exp.IgnoreNulls)
        f = f.copy()
        f.set("this", arg.this.copy())
    return f, ignore


def _offset(text: SqlText, n: exp.Expression | None, call: str, least: int) -> int:
    if n is None:
        return 1
    if not (isinstance(n, exp.Literal) and not n.is_string and str(n.this).isdigit()
            and int(n.this) >= least):
        raise text.fail(f"{call} takes a whole number >= {least}", "OVER", n)
    return int(n.this)
