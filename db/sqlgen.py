"""SQL of a DB-op (migration candidate), built as a sqlglot tree and rendered for DuckDB.

Every relation carries the slide instant `_tau`. The DB-op's SQL reads a table `taus`
(the slide instants to compute, one or several) and its inputs `in0, in1, ...`:
row-level inputs hold window rows with their event time `_ts`, and their window becomes a
time-range predicate on the slide instant (`_tau - range <= _ts < _tau`); relation-level
inputs (results of SPE-ops) hold rows tagged with `_tau`. This module needs only sqlglot.

Example:
    >>> from federation.smartplug.queries import cq5_plan
    >>> from federation.logical import NumberedPlan
    >>> plan = NumberedPlan.of(cq5_plan(scale=1/6))
    >>> sql = db_op_sql(plan, ["op1", "op2", "op3"], [("in0", "w1")]).sql("duckdb")
    >>> "INTERVAL '50' SECOND" in sql and '"i"."_ts" < "t"."_tau"' in sql
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

if TYPE_CHECKING:  # plan nodes are read by their `kind`: db/ imports no plan code
    from federation.logical import NumberedPlan, Window

TAU = "_tau"
TS = "_ts"


class SqlGenerationError(NotImplementedError):
    """A plan the SQL generator cannot express (a malformed DB-op)."""


def _leaf_window(node):
    """The window under selections and projections, or None (a relation)."""
    while node.kind in ("select", "project"):
        node = node.child
    return node if node.kind == "window" else None


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def _alias(e: exp.Expression, name: str) -> exp.Alias:
    return exp.alias_(e, name, quoted=True)


def _quote(e: exp.Expression) -> exp.Expression:
    e = e.copy()
    for c in e.find_all(exp.Column):
        c.set("this", exp.to_identifier(c.name, quoted=True))
    return e


def _seconds(s: float) -> exp.Interval:
    text = f"{s:g}" if float(s).is_integer() else repr(float(s))
    return exp.Interval(this=exp.Literal.string(text), unit=exp.Var(this="SECOND"))


def window_relation(win: Window, columns: Sequence[str], table: str) -> exp.Select:
    """Window contents at each slide instant of `taus`: the window as a predicate on tau."""
    cols = [_alias(_col(TAU, "t"), TAU)] + [_alias(_col(c, "i"), c) for c in columns]
    src = exp.select(*cols).from_(exp.to_table("taus").as_("t"))
    if win.is_time_based:
        cond = exp.and_(
            exp.GTE(this=_col(TS, "i"), expression=exp.Sub(this=_col(TAU, "t"),
                                                           expression=_seconds(win.range_s))),
            exp.LT(this=_col(TS, "i"), expression=_col(TAU, "t")),
        )
        return src.join(exp.to_table(table).as_("i"), on=cond)
    # tuple window: the last n rows (per partition) with ts < tau
    # ties in event time are broken by the other columns: the last n rows are one set
    order = exp.Order(expressions=[exp.Ordered(this=_col(c, "i"), desc=True)
                                   for c in [TS, *columns]])
    rn = exp.Window(
        this=exp.RowNumber(),
        partition_by=[_col(TAU, "t")] + [_col(k, "i") for k in win.partition_by],
        order=order,
    )
    inner = src.select(_alias(rn, "_rn")).join(
        exp.to_table(table).as_("i"), on=exp.LT(this=_col(TS, "i"), expression=_col(TAU, "t"))
    )
    outer_cols = [_col(TAU)] + [_col(c) for c in columns]
    return (
        exp.select(*outer_cols)
        .from_(inner.subquery("r"))
        .where(exp.LTE(this=_col("_rn"), expression=exp.Literal.number(win.rows)))
    )


def db_op_sql(
    plan: NumberedPlan, members: Sequence[str], inputs: Sequence[tuple[str, str]],
    row_level: set[str] | None = None,
) -> exp.Select:
    """The SQL of the DB-op made of `members` (op ids), whose inputs are `(table, op id)`.

    Inputs that are identical subtrees share a table (they are transferred once): pass
    each input position with the table name it reads. `row_level` names the inputs that
    arrive as window rows with `_ts` (default: every input that is a window under
    selections and projections); the others arrive as relations tagged with `_tau`.
    """
    member_set = set(members)
    table_of = {oid: table for table, oid in inputs}
    ctes: list[tuple[str, exp.Expression]] = []
    names: dict[str, str] = {}

    def source(oid: str) -> str:
        if oid in names:
            return names[oid]
        node = plan.nodes[oid]
        if oid not in member_set:
            table = table_of.get(oid)
            if table is None:
                raise SqlGenerationError(f"input {oid} of the DB-op has no table")
            cols = list(node.schema)
            if (oid in row_level) if row_level is not None else _leaf_window(node):
                q = window_relation(_leaf_window(node), cols, table)
            else:
                q = (
                    exp.select(*[_col(TAU, "i")] + [_col(c, "i") for c in cols])
                    .from_(exp.to_table(table).as_("i"))
                    .join(exp.to_table("taus").as_("t"),
                          on=exp.EQ(this=_col(TAU, "i"), expression=_col(TAU, "t")))
                )
        else:
            q = operator_sql(plan, oid, [source(c) for c in plan.children[oid]])
        name = f"n_{oid}"
        ctes.append((name, q))
        names[oid] = name
        return name

    root = [m for m in members if plan.parent.get(m) not in member_set]
    if len(root) != 1:
        raise SqlGenerationError(f"a DB-op must be one connected subtree, got roots {root}")
    top = source(root[0])
    out_cols = [_col(TAU)] + [_col(c) for c in plan.nodes[root[0]].schema]
    query = exp.select(*out_cols).from_(top)
    for name, q in ctes:
        query = query.with_(name, as_=q)
    return query


def operator_sql(plan: NumberedPlan, oid: str, srcs: list[str]) -> exp.Select:
    """One R2R operator over the CTEs of its children, per slide instant."""
    node = plan.nodes[oid]
    if node.kind == "select":
        cols = [_col(TAU)] + [_col(c) for c in node.schema]
        return exp.select(*cols).from_(srcs[0]).where(_quote(node.predicate))
    if node.kind == "project":
        cols = [_col(TAU)] + [_alias(_quote(e), n) for n, e in node.outputs]
        return exp.select(*cols).from_(srcs[0])
    if node.kind == "join":
        rkeys = {r for _, r in node.keys}
        cols = [_col(TAU, "l")] + [_col(c, "l") for c in node.left.schema]
        cols += [_col(c, "r") for c in node.right.schema if c not in rkeys]
        cond: exp.Expression = exp.EQ(this=_col(TAU, "l"), expression=_col(TAU, "r"))
        for lk, rk in node.keys:
            cond = exp.and_(cond, exp.EQ(this=_col(lk, "l"), expression=_col(rk, "r")))
        return (
            exp.select(*cols)
            .from_(exp.to_table(srcs[0]).as_("l"))
            .join(exp.to_table(srcs[1]).as_("r"), on=cond)
        )
    if node.kind == "aggregate":
        cols: list[exp.Expression] = [_col(TAU)] + [_col(k) for k in node.keys]
        for name, call in node.aggs:
            cols.append(_alias(aggregate_expression(call.func, call.arg, node.schema[name]),
                               name))
        group = [_col(TAU)] + [_col(k) for k in node.keys]
        q = exp.select(*cols).from_(srcs[0]).group_by(*group)
        if node.keys:
            return q
        # a global aggregate has one row at every instant, also over an empty input (SQL):
        # COUNT 0, the others NULL
        out: list[exp.Expression] = [_alias(_col(TAU, "t"), TAU)]
        for name, call in node.aggs:
            v: exp.Expression = _col(name, "a")
            if call.func == "count":
                v = exp.Coalesce(this=v, expressions=[exp.Literal.number(0)])
            out.append(_alias(v, name))
        return (exp.select(*out).from_(exp.to_table("taus").as_("t"))
                .join(q.subquery("a"), on=exp.EQ(this=_col(TAU, "t"), expression=_col(TAU, "a")),
                      join_type="left"))
    raise SqlGenerationError(f"no SQL for {node.kind}")


def aggregate_expression(func: str, arg: exp.Expression | None, result_type: str
                         ) -> exp.Expression:
    """COUNT/SUM/AVG/MIN/MAX with the result types the engines agree on (SUM of integers is
    BIGINT as in Spark, not DuckDB's HUGEINT); `result_type` is the aggregate's column type."""
    if func == "count":
        return exp.Count(this=exp.Star() if arg is None else _quote(arg))
    a = _quote(arg)  # type: ignore[arg-type]
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
