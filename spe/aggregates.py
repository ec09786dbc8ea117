"""Plan expressions and aggregate functions as Spark columns: a whole aggregate
(`agg_column`) and, for the pane form of a sliding window (spe/translate.py), its partials
over a pane and their merge (`MERGE`)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from federation.conventions import SORTED_NATIVE, disc_position

#: the aggregates of distinct values (federation.expressions): the plain aggregate each
#: applies to the set of its argument's non-NULL values
DISTINCT_FUNCS = {"count_distinct": "count", "sum_distinct": "sum", "avg_distinct": "avg"}


def quoted_col(name: str) -> Column:
    """A column by its name, quoted (a column may be called `order` or `a.b`)."""
    return F.col(f"`{name}`")


def spark_expr(e) -> Column:
    """A plan expression (canonical: federation.canonical.canonical) as a Spark column.
    Names are quoted (a column may be called `order`); TRY_CAST(TRUNC(x) AS INT) is
    Spark's own TRY_CAST(x AS INT), which truncates (Spark has no TRUNC of a number)."""
    return F.expr(spark_sql(e))


def spark_sql(e) -> str:
    """A plan expression as Spark SQL (spark_expr)."""
    from sqlglot import exp

    def plain(node):
        if isinstance(node, exp.TryCast) and isinstance(node.this, exp.Trunc):
            node = node.copy()
            node.set("this", node.this.this)
        return node

    return e.transform(plain).sql(dialect="spark", identify=True)


def agg_column(func: str, arg, name: str, result_type: str, separator: str = ",",
               fraction: tuple[int, int] | None = None, descending: bool = False,
               function: str = "") -> Column:
    if func in ("python", "python_distinct"):  # a Python aggregate of the sorted values
        x = spark_sql(arg)  # (federation/python_aggregates.py; an Arrow UDF by that name)
        values = "collect_list" if func == "python" else "collect_set"
        return F.expr(f"`{function}`(array_sort({values}({x})))").alias(name)
    if func in ("listagg", "listagg_distinct"):  # the strings in ascending order, joined
        values = (F.collect_list if func == "listagg" else F.collect_set)(spark_expr(arg))
        return F.when(F.size(values) > 0, F.array_join(F.array_sort(values), separator)
                      ).alias(name)
    if func == "percentile_disc":  # of a session's rows: the value at its position
        x = spark_sql(arg)  # in integers (conventions.disc_position)
        at = disc_position(f"count({x})", fraction or (1, 2), "div")
        return F.expr(f"try_element_at(sort_array(collect_list({x}), "
                      f"{'false' if descending else 'true'}), CAST({at} AS INT))").alias(name)
    if func in SORTED_NATIVE:  # a session's: its values in order (sessions.session_values)
        return values_list(arg, descending).alias(name)
    if func == "count":
        c = F.count(F.lit(1)) if arg is None else F.count(spark_expr(arg))
    elif func in DISTINCT_FUNCS:  # Spark's streaming aggregates refuse DISTINCT: a set
        c = of_set(func, F.collect_set(spark_expr(arg)), result_type)
    elif func == "avg":
        # AVG(x) is SUM(x) / COUNT(x) in double in every engine (federation.expressions)
        e = spark_expr(arg)
        c = F.sum(e.cast("double")) / F.count(e)
    else:
        e = spark_expr(arg)
        c = {"sum": F.sum, "min": F.min, "max": F.max}[func](e)
    return c.alias(name)


def values_list(arg, descending: bool = False) -> Column:
    """A session's non-NULL values of `arg` as DOUBLE in order (db/sqlgen/session_values.py
    gives the arithmetic each engine does alike on it)."""
    return F.sort_array(F.collect_list(spark_expr(arg).cast("double")), asc=not descending)


def _merge_count(e, p, t):
    return {p: F.count(F.lit(1)) if e is None else F.count(e)}, F.sum(p)


def _merge_avg(e, p, t):  # SUM(x) / COUNT(x) in double, as agg_column
    return ({f"{p}s": F.sum(e.cast("double")), f"{p}n": F.count(e)},
            F.sum(f"{p}s") / F.sum(f"{p}n"))


#: per aggregate function: its partials over a pane ({name: column}) and their merge
MERGE = {
    "count": _merge_count,
    "avg": _merge_avg,
    "sum": lambda e, p, t: ({p: F.sum(e)}, F.sum(p)),
    "min": lambda e, p, t: ({p: F.min(e)}, F.min(p)),
    "max": lambda e, p, t: ({p: F.max(e)}, F.max(p)),
}
for _f in DISTINCT_FUNCS:  # a pane's set of values; the window's: the union of its panes'
    MERGE[_f] = lambda e, p, t, f=_f: ({p: F.collect_set(e)}, of_set(
        f, F.array_distinct(F.flatten(F.collect_list(p))), t))


def of_set(func: str, values: Column, result_type: str) -> Column:
    """COUNT, SUM or AVG (`func`'s plain aggregate) of the array `values` (no NULLs):
    SUM and AVG are NULL over an empty set, SUM adds in its result type (`result_type`: the
    aggregate's, BIGINT or DOUBLE) from the smallest value up, AVG is SUM / COUNT in double
    as everywhere."""
    plain = DISTINCT_FUNCS[func]
    if plain == "count":
        return F.size(values)
    t = "double" if plain == "avg" or result_type == "DOUBLE" else "bigint"
    # added in ascending order: a sum of doubles depends on its order, and a set has none
    # (DuckDB adds the same sorted list, db/sqlgen/operators.sorted_distinct_sum)
    total = F.aggregate(F.array_sort(values.cast(f"array<{t}>")), F.lit(0).cast(t),
                        lambda acc, x: acc + x)
    return F.when(F.size(values) > 0,
                  total.cast("double") / F.size(values) if plain == "avg" else total)


def sorted_rows(array: str, keys: list[tuple[str, bool]]) -> Column:
    """The structs of `array` sorted by `keys` ((field, descending) pairs), NULLs last in
    every field: `array_sort` with a comparator, the first field that differs deciding."""
    return F.expr(f"array_sort({array}, (l, r) -> {_compare('l', 'r', keys)})")


def _compare(lhs: str, rhs: str, keys: list[tuple[str, bool]]) -> str:
    """-1, 0 or 1: struct `lhs` before, tied with or after `rhs` under `keys` (NULLs last,
    equal to each other)."""
    steps = []
    for c, desc in keys:
        lc, rc = f"{lhs}.`{c}`", f"{rhs}.`{c}`"
        lt, gt = ("1", "-1") if desc else ("-1", "1")
        steps.append(f"NULLIF(CASE WHEN {lc} IS NULL AND {rc} IS NULL THEN 0 WHEN {lc} IS NULL "
                     f"THEN 1 WHEN {rc} IS NULL THEN -1 WHEN {lc} < {rc} THEN {lt} "
                     f"WHEN {lc} > {rc} THEN {gt} ELSE 0 END, 0)")
    return f"COALESCE({', '.join(steps)}, 0)"


def run_starts(array: str, order_by: list[tuple[str, bool]]) -> Column:
    """The positions (0, 1, ...) in sorted `array` at which a run of structs tied in
    `order_by` begins (NULLs equal to each other), in one pass."""
    tie = _compare(f"{array}[i - 1]", f"{array}[i]", order_by)
    return F.expr(f"filter(sequence(0, size({array}) - 1), i -> i = 0 OR {tie} <> 0)")


def ranked(array: str, starts: str) -> Column:
    """Sorted `array` as structs (`_row`, `_pos`, `_rank`, `_dense`): each row, its position
    (0, 1, ...), RANK() (its run's first position + 1) and DENSE_RANK() (its run's number),
    given the runs' `starts` (`run_starts`); linear in the rows."""
    runs = (f"transform({starts}, (p, d) -> named_struct('p', p, 'd', d, 'e', "
            f"IF(d + 1 < size({starts}), {starts}[d + 1], size({array})) - 1))")
    return F.expr(f"flatten(transform({runs}, g -> transform(sequence(g.p, g.e), j -> "
                  f"named_struct('_row', {array}[j], '_pos', j, '_rank', g.p + 1, "
                  f"'_dense', g.d + 1))))")
