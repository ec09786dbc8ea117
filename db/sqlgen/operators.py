"""The SQL of the R2R operators at one slide instant `$tau`.

- A window's rows, from the table that holds them with their event time `_ts`
  (`window_rows`): a time window with plain bounds, `$tau - range <= _ts < $tau`; a tuple
  window as the last n rows (per partition) before `$tau`, ties in event time broken by
  the other columns.
- Window rows through selections and projections, keeping their event time (`row_chain`:
  what a slice table folds, or what a move copies).
- One operator (selection, projection, join, aggregation) over the CTEs of its children
  (`operator_sql`), with the aggregates' result types the engines agree on
  (`aggregate_expression`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from db.sqlgen.session_values import finished, values_list
from db.sqlgen.terms import (
    SqlGenerationError,
    alias,
    col,
    quote,
    seconds,
    session_begins,
    tau_param,
    window_tau,
)
from federation.conventions import (
    SESSION_COLUMNS,
    SORTED_NATIVE,
    TS,
    Lowering,
    disc_position,
    us,
)

if TYPE_CHECKING:  # plan nodes are dispatched on by class name: db/ imports no plan code
    from federation.logical import NumberedPlan, Window

#: the DuckDB SQL of each plan node class at one slide instant: a leaf's from the table
#: that holds its rows (`node, columns, table`), an operator's over its inputs' CTEs
#: (`node, srcs`)
DUCKDB = Lowering("DuckDB lowering", ("operator", "leaf"))


def window_rows(win: Window, columns: Sequence[str], table: str) -> exp.Select:
    """The rows of `win` at instant `$tau`, from the table of its rows."""
    return DUCKDB(win, columns, table)


@DUCKDB.register("TimeWindow")
def _time_window(win: Window, columns: Sequence[str], table: str) -> exp.Select:
    """[$tau - range, $tau); a cumulating window's [its period's start, $tau)."""
    tau = window_tau(win)  # $tau, or the window's own last instant on a finer grid
    lo = exp.Sub(this=tau.copy(), expression=seconds(win.range_s))
    if win.cumulate:  # the period that holds $tau - 1 us, from the offset on
        size, o = us(win.range_s), us(win.offset_s)
        lo = sqlglot.parse_one(f"make_timestamp(((epoch_us({tau.sql('duckdb')}) - "
                               f"{1 + o}) // {size}) * {size} + {o})", dialect="duckdb")
    cond = exp.and_(exp.GTE(this=col(TS), expression=lo),
                    exp.LT(this=col(TS), expression=tau))
    return exp.select(*[col(c) for c in columns]).from_(exp.to_table(table)).where(cond)


@DUCKDB.register("TupleWindow")
def _tuple_window(win: Window, columns: Sequence[str], table: str) -> exp.Select:
    """The last n rows (per partition) with ts < tau; ties in event time are broken by the
    other columns: the last n rows are one set."""
    cols = [col(c) for c in columns]
    order = exp.Order(expressions=[exp.Ordered(this=col(c), desc=True)
                                   for c in [TS, *columns]])
    rn = exp.Window(this=exp.RowNumber(), order=order,
                    partition_by=[col(k) for k in win.partition_by] or [exp.Literal.number(1)])
    inner = (exp.select(*cols, alias(rn, "_rn")).from_(exp.to_table(table))
             .where(exp.LT(this=col(TS), expression=window_tau(win))))
    if win.where is not None:  # the last n of the readings it counts
        inner = inner.where(quote(win.where))
    return (exp.select(*[col(c) for c in columns]).from_(inner.subquery("r"))
            .where(exp.LTE(this=col("_rn"), expression=exp.Literal.number(win.rows))))


@DUCKDB.register("SessionWindow")
def _session_window(win: Window, columns: Sequence[str], table: str) -> exp.Select:
    """The rows before `$tau` of the sessions that end in ($tau - slide, $tau]
    (federation/logical/window.py): a reading begins a session when the one before it (in
    its partition) is more than the gap earlier, or exactly the gap when that end is an
    instant. Ties in event time are one peer group (RANGE frames): one session. Only the
    keys with a reading in ($tau - slide - gap, $tau - gap], where the last reading of a
    session ending now lies, are numbered: a key's open session is not sorted again at
    every instant (Nexmark q11 in DuckDB: 63.5 s -> 10.1 s)."""
    gap, slide = us(win.gap_s), us(win.slide_s)
    keys = ", ".join(col(k).sql("duckdb") for k in win.partition_by)
    by = f"PARTITION BY {keys} " if keys else ""
    ts = col(TS).sql("duckdb")
    stream = [c for c in columns if c not in SESSION_COLUMNS]
    names = [col(c).sql("duckdb") for c in dict.fromkeys([TS, *win.partition_by, *stream])]
    cols = ", ".join(names)
    tau = tau_param().sql("duckdb")
    src = exp.to_table(table).sql("duckdb")

    def band(t: str) -> str:
        return (f"{t}.{ts} > {tau} - to_microseconds({slide + gap}) AND {t}.{ts} <= {tau} - "
                f"to_microseconds({gap})")
    same = " AND ".join(f"b.{k} IS NOT DISTINCT FROM a.{k}" for k in
                        [col(k).sql("duckdb") for k in win.partition_by]) or "TRUE"
    if win.where is not None:  # the readings sessions are made of
        src = f"(SELECT * FROM {src} WHERE {quote(win.where).sql('duckdb')})"
    rows = (f"SELECT {', '.join('a.' + c for c in names)} FROM {src} AS a WHERE "
            f"a.{ts} < {tau} AND EXISTS (SELECT 1 FROM {src} AS b WHERE {band('b')} AND {same})")
    prev, new = session_begins(ts, by, gap, slide, us(win.offset_s))
    marked = f"SELECT *, {new} FROM (SELECT {cols}, {prev} FROM ({rows}))"
    numbered = f"SELECT *, sum(_s_new) OVER ({by}ORDER BY {ts}) AS _s_id FROM ({marked})"
    sess = f"PARTITION BY {keys + ', ' if keys else ''}_s_id"
    tagged = (f"SELECT *, min({ts}) OVER ({sess}) AS window_start, max({ts}) OVER ({sess}) + "
              f"to_microseconds({gap}) AS window_end FROM ({numbered})")
    out = ", ".join(col(c).sql("duckdb") for c in columns)
    return sqlglot.parse_one(
        f"SELECT {out} FROM ({tagged}) AS s WHERE window_end <= {tau} AND window_end > "
        f"{tau} - to_microseconds({slide})", dialect="duckdb")


@DUCKDB.register("Table")
def table_rows(node, columns: Sequence[str], table: str) -> exp.Select:
    """A database table's rows (the same at every instant) through its selections and
    projections, from the DB-op's copy of it (`table`)."""
    q = exp.select(*[col(c) for c, _ in node.columns]).from_(exp.to_table(table))
    for what, v in node.steps:
        if what == "distinct":
            q = exp.select(exp.Star()).from_(q.subquery()).distinct()
        elif what == "where":
            q = exp.select(exp.Star()).from_(q.subquery()).where(quote(v))
        else:
            q = exp.select(*[alias(quote(e), n) for n, e in v]).from_(q.subquery())
    return q


def row_chain(q: exp.Select, nodes: Sequence, every_column: bool = False) -> exp.Select:
    """Window rows `q` (with their event time) through selections and projections, bottom
    up: the rows those operators pass on (a selection passes on its schema's columns, or
    with `every_column` all that `q` has)."""
    for node in nodes:
        if node.kind == "select":
            cols = [exp.Star()] if every_column else [col(TS), *[col(c) for c in node.schema]]
            q = exp.select(*cols).from_(q.subquery()).where(quote(node.predicate))
        else:
            q = exp.select(col(TS), *[alias(quote(e), n) for n, e in node.outputs]
                           ).from_(q.subquery())
    return q


def operator_sql(plan: NumberedPlan, oid: str, srcs: list[str]) -> exp.Select:
    """One R2R operator over the CTEs of its children, at one slide instant."""
    return DUCKDB(plan.nodes[oid], srcs)


@DUCKDB.register("Select")
def _select(node, srcs: list[str]) -> exp.Select:
    return exp.select(*[col(c) for c in node.schema]).from_(srcs[0]).where(quote(node.predicate))


@DUCKDB.register("Project")
def _project(node, srcs: list[str]) -> exp.Select:
    return exp.select(*[alias(quote(e), n) for n, e in node.outputs]).from_(srcs[0])


@DUCKDB.register("Join")
def _join(node, srcs: list[str]) -> exp.Select:
    """An inner or outer join; an outer join's key column is the value of the side a row
    has (COALESCE, as USING's)."""
    rkeys = {r for _, r in node.keys}
    lkeys = dict(node.keys)
    cols = [col(c, "l") if c not in lkeys or not node.keeps[1] else
            alias(exp.Coalesce(this=col(c, "l"), expressions=[col(lkeys[c], "r")]), c)
            for c in node.left.schema]
    cols += [col(c, "r") for c in node.right.schema if c not in rkeys]
    cond: exp.Expression = exp.true()
    for i, (lk, rk) in enumerate(node.keys):
        eq = exp.EQ(this=col(lk, "l"), expression=col(rk, "r"))
        cond = eq if i == 0 else exp.and_(cond, eq)
    return (exp.select(*cols).from_(exp.to_table(srcs[0]).as_("l"))
            .join(exp.to_table(srcs[1]).as_("r"), on=cond,
                  join_type="" if node.how == "inner" else f"{node.how} outer"))


@DUCKDB.register("Union")
def _union(node, srcs: list[str]) -> exp.Query:
    cols = list(node.schema)
    return exp.union(exp.select(*[col(c) for c in cols]).from_(srcs[0]),
                     exp.select(*[col(c) for c in cols]).from_(srcs[1]), distinct=False)


@DUCKDB.register("RowNumber")
def _row_number(node, srcs: list[str]) -> exp.Select:
    """ROW_NUMBER() in the node's total order (NULLs last in every column); RANK() and
    DENSE_RANK() in its ORDER BY alone (ties share a number)."""
    keys = node.sort_keys if node.function == "row_number" else node.order_by
    order = exp.Order(expressions=[exp.Ordered(this=col(c), desc=d, nulls_first=False)
                                   for c, d in keys])
    fn = {"row_number": exp.RowNumber, "rank": exp.Rank, "dense_rank": exp.DenseRank}
    rn = exp.Window(this=fn[node.function](), order=order,
                    partition_by=[col(k) for k in node.partition_by] or [exp.Literal.number(1)])
    return exp.select(*[col(c) for c in node.child.schema], alias(rn, node.name)).from_(srcs[0])


@DUCKDB.register("Aggregate")
def _aggregate(node, srcs: list[str]) -> exp.Select:
    cols: list[exp.Expression] = [col(k) for k in node.keys]
    natives = {n: c for n, c in node.aggs if c.func in SORTED_NATIVE}  # of a session's rows
    for name, call in node.aggs:
        if name in natives:
            e = sqlglot.parse_one(values_list(quote(call.arg).sql("duckdb"), call.descending),
                                  read="duckdb")
        else:
            e = aggregate_expression(call.func, call.arg, node.schema[name], call.separator,
                                     call.fraction, call.descending, call.function)
        cols.append(alias(e, name))
    q = exp.select(*cols).from_(srcs[0])
    # a global aggregate (no keys, no GROUP BY) has one row, also over an empty input
    # (SQL): COUNT 0, the others NULL
    q = q.group_by(*[col(k) for k in node.keys]) if node.keys else q
    if not natives:
        return q
    return sqlglot.parse_one(finished(q.sql("duckdb"), list(node.schema), natives),
                             read="duckdb")


def sorted_distinct_sum(a: exp.Expression, avg: bool) -> exp.Expression:
    """SUM(DISTINCT a) in double, or AVG(DISTINCT a), added in ascending order from the
    smallest value (as Spark's fold over the sorted set, spe/aggregates.of_set): a sum of
    doubles depends on the order of its terms, and a set has no order of its own, so two
    engines (or DuckDB's hash order and Spark's) would differ in the last bits, and an
    INTERSECT or DISTINCT over the result would then see two values."""
    x = exp.cast(a, "DOUBLE") if avg else a
    values = exp.Filter(this=exp.Anonymous(this="LIST", expressions=[
        exp.Distinct(expressions=[x])]), expression=exp.Where(this=exp.not_(x.copy().is_(
            exp.null()))))
    total = exp.Anonymous(this="LIST_SUM", expressions=[exp.Anonymous(
        this="LIST_SORT", expressions=[values])])
    if not avg:
        return total
    n = exp.Nullif(this=exp.Count(this=exp.Distinct(expressions=[a.copy()])),
                   expression=exp.Literal.number(0))
    return exp.Div(this=total, expression=n)


def aggregate_expression(func: str, arg: exp.Expression | None, result_type: str,
                         separator: str = ",", fraction: tuple[int, int] | None = None,
                         descending: bool = False, function: str = "") -> exp.Expression:
    """COUNT/SUM/AVG/MIN/MAX with the result types the engines agree on (SUM of integers is
    BIGINT as in Spark, not DuckDB's HUGEINT); `result_type` is the aggregate's column type.
    LISTAGG: STRING_AGG of the values in ascending order (by their bytes, Spark's order);
    a Python aggregate: its function over the sorted list of the non-NULL values."""
    if func in ("python", "python_distinct"):  # (federation/python_aggregates.py)
        x = quote(arg).sql("duckdb")  # type: ignore[union-attr]
        d = "DISTINCT " * (func == "python_distinct")
        return sqlglot.parse_one(f"{function}(list_sort(list({d}{x}) FILTER (WHERE {x} IS "
                                 "NOT NULL)))", read="duckdb")
    if func in ("listagg", "listagg_distinct"):
        a = quote(arg)  # type: ignore[arg-type]
        value = exp.Distinct(expressions=[a]) if func != "listagg" else a
        return exp.GroupConcat(this=exp.Order(this=value, expressions=[exp.Ordered(
            this=a.copy(), nulls_first=False)]), separator=exp.Literal.string(separator))
    if func == "percentile_disc":  # of a session's rows: the value at its position
        x = quote(arg).sql("duckdb")  # type: ignore[union-attr]  # in integers
        order = " DESC" if descending else ""
        return sqlglot.parse_one(  # (conventions.disc_position)
            f"(list({x} ORDER BY {x}{order}) FILTER (WHERE {x} IS NOT NULL))"
            f"[{disc_position(f'count({x})', fraction or (1, 2), '//')}]", read="duckdb")
    if func == "count":
        return exp.Count(this=exp.Star() if arg is None else quote(arg))
    if func == "count_distinct":
        return exp.Count(this=exp.Distinct(expressions=[quote(arg)]))
    a = quote(arg)  # type: ignore[arg-type]
    if func.endswith("_distinct"):  # SUM/AVG(DISTINCT a): of the distinct non-NULL values
        if func == "avg_distinct" or result_type == "DOUBLE":
            return sorted_distinct_sum(a, func == "avg_distinct")
        a = exp.Distinct(expressions=[a])
        func = func.removesuffix("_distinct")
    if func == "sum":
        s = exp.Sum(this=a)
        if result_type != "DOUBLE":
            return exp.Cast(this=s, to=exp.DataType.build("BIGINT"))
        return s
    if func == "avg":  # SUM / COUNT in double, the same expression in every engine
        total = exp.Cast(this=exp.Sum(this=a), to=exp.DataType.build("DOUBLE"))
        n = exp.Nullif(this=exp.Count(this=a.copy()), expression=exp.Literal.number(0))
        return exp.Div(this=total, expression=n)
    if func == "min":
        return exp.Min(this=a)
    if func == "max":
        return exp.Max(this=a)
    raise SqlGenerationError(f"unknown aggregate {func}")
