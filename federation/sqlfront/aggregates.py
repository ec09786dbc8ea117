"""The aggregates of one aggregation as the SELECT list, HAVING and OVER write them: each
call (COUNT, SUM, ..., LISTAGG, a percentile, a Python aggregate; DISTINCT, FILTER) as an
expressions.AggCall under its output name, one call written twice computed once."""

from __future__ import annotations

from sqlglot import exp

from federation.expressions import (
    ORDERED_FUNCS,
    SPREAD_FUNCS,
    AggCall,
    agg_call,
    distinct_tuple,
    listagg,
    percentile,
)
from federation.python_functions import lookup
from federation.sqlfront.dialect import (
    AGGREGATES,
    PythonAgg,
    SqlText,
    check_scalar,
    listagg_separator,
    percentile_fraction,
)
from federation.sqlfront.scopes import Scope, rewrite


class Aggregates:
    """The aggregates of one aggregation, by output name, as the SELECT list and HAVING
    name them; `over` writes an expression over the aggregation's output."""

    def __init__(self, text: SqlText, scope: Scope, keys: list[str],
                 grouped: dict[str, str] | None = None) -> None:
        self.text, self.scope, self.keys = text, scope, keys
        self.grouped = grouped or {}  # a GROUP BY expression as written -> its key
        self.calls: dict[str, AggCall] = {}
        self.seen: dict[str, str] = {}  # the agg's SQL -> its output name

    def name(self, call: exp.Expression, wanted: str | None) -> str:
        """The output column of `call` (an aggregate, or one with `FILTER (WHERE ...)`:
        expressions.AggCall of `CASE WHEN ... THEN arg END`; `wanted`, else a derived
        name), added once."""
        fail = self.text.fail
        spelled = call.sql(dialect="duckdb") + " DESC" * any(
            n.args.get("desc") is True for n in call.walk())
        if spelled in self.seen and wanted in (None, self.seen[spelled]):
            return self.seen[spelled]
        where = None
        if isinstance(call, exp.Filter):
            where = call.expression.this
            check_scalar(self.text, where, "FILTER")
            where = self.scope.resolve(where, "FILTER")
            call = call.this
        func, fraction = AGGREGATES.get(type(call)), None
        if isinstance(call, (exp.PercentileCont, exp.PercentileDisc)):
            fraction, call = percentile_fraction(self.text, call)
        if func is None:
            raise fail(f"aggregate {call.sql_name()}() is not supported "
                       "(COUNT, SUM, AVG, MIN, MAX, MEDIAN, PERCENTILE_CONT, PERCENTILE_DISC, "
                       "STDDEV_SAMP, STDDEV_POP, VAR_SAMP, VAR_POP, LISTAGG)", "SELECT", call)
        sep = listagg_separator(self.text, call) if func == "listagg" else ","
        extra = [v for k, v in call.args.items() if k not in ("this", "separator")
                 and isinstance(v, exp.Expression)]
        if extra:  # DuckDB's MAX(x, n) is a list of the n largest: no aggregate here
            raise fail(f"{func.upper()} takes one argument, not {extra[0].sql()!r} too",
                       "SELECT", call)
        inner, parts = call.this, [call.this]
        if isinstance(call, PythonAgg):  # name(x), name(DISTINCT x), name(x, y)
            if not call.expressions:
                raise fail(f"{call.name}() is an aggregate of at least one argument",
                           "SELECT", call)
            inner, parts = call.expressions[0], list(call.expressions)
        if isinstance(inner, exp.Distinct) and func in ("min", "max") \
                and len(inner.expressions) == 1:
            inner = inner.expressions[0]  # the least (greatest) of the distinct values
            parts = [inner]
        if isinstance(inner, exp.Distinct):
            parts = inner.expressions
            if func in SPREAD_FUNCS or func in ORDERED_FUNCS:
                raise fail(f"{call.sql_name()}(DISTINCT ...) of the distinct values is not "
                           "built; take them in a subquery (SELECT DISTINCT)",
                           "SELECT", call, "DISTINCT")
            if func != "count" and len(parts) != 1:
                raise fail(f"{call.sql_name()}(DISTINCT ...) takes one argument (COUNT(DISTINCT "
                           "a, b) counts combinations)", "SELECT", call, "DISTINCT")
            func, inner = f"{func}_distinct", parts[0]
        if inner is not None and any(p.find(exp.AggFunc) is not None for p in parts):
            raise fail(f"nested aggregate {call.sql()}", "SELECT", call)
        if isinstance(inner, exp.Star) or inner is None:
            if func != "count":
                raise fail(f"{func.upper()}(*) is not an aggregate", "SELECT", call)
            arg = None
        else:
            for e in parts:
                check_scalar(self.text, e, "SELECT")
            resolved = [self.scope.resolve(e, "SELECT") for e in parts]
            # COUNT(DISTINCT a, b): of the combinations in which none is NULL
            arg = resolved[0] if len(resolved) == 1 else distinct_tuple(resolved)
        name = wanted
        if name is None:
            if where is not None:
                name = f"_agg{len(self.calls) + 1}"
            elif arg is None:
                name = "count"
            elif isinstance(arg, exp.Column):
                name = f"{call.name.lower() if isinstance(call, PythonAgg) else func}_{arg.name}"
            else:
                name = f"_agg{len(self.calls) + 1}"
        if name in self.calls or name in self.keys:
            raise fail(f"output column {name!r} named twice", "SELECT", call)
        self.calls[name] = lookup(call.name)(arg, distinct=func == "python_distinct",
                                             where=where) if isinstance(call, PythonAgg) \
            else listagg(arg, sep, distinct=func != "listagg", where=where) \
            if func.startswith("listagg") \
            else agg_call(func, arg, where) if fraction is None else percentile(
            arg, fraction[0], discrete=func == "percentile_disc", descending=fraction[1],
            where=where)
        self.seen[spelled] = name
        return name

    def over(self, e: exp.Expression, skip: str | None = None) -> exp.Expression:
        """`e` over the aggregation's output: aggregates become their output columns,
        group keys stay, any other column is an error (but those named `skip`...)."""
        def fix(n: exp.Expression) -> exp.Expression:
            if skip and isinstance(n, exp.Column) and n.name.startswith(skip):
                return n
            if isinstance(n, exp.AggFunc) or filtered(n):
                return exp.column(self.name(n, None))
            if not isinstance(n, exp.Column) and n.sql() in self.grouped:
                return exp.column(self.grouped[n.sql()])
            if isinstance(n, exp.Column):
                k = self.scope.column_of(n.table or None, n.name, "SELECT", n)
                if k not in self.keys:
                    raise self.text.fail(f"column {n.sql()} is neither grouped nor "
                                         "aggregated", "SELECT", n)
                return exp.column(k)
            return n

        return rewrite(e, fix)


def filtered(e: exp.Expression) -> bool:
    """`e` is an aggregate with `FILTER (WHERE ...)`."""
    return isinstance(e, exp.Filter) and isinstance(e.this, exp.AggFunc)
