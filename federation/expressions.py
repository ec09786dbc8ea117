"""Expressions of the DSL: strings or `col(...)` helpers, kept as sqlglot trees.

Example:
    >>> e = to_expression("value > 0.9 * maxv")
    >>> sorted(referenced_columns(e))
    ['maxv', 'value']
    >>> (col("value") * 2).sql()
    'value * 2'
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from federation.streams import NUMERIC_TYPES

AGG_FUNCS = ("count", "sum", "avg", "min", "max")


def col(name: str) -> exp.Column:
    """Reference a column by name, for building expressions with Python operators."""
    return exp.column(name)


def lit(value: object) -> exp.Expression:
    """A literal value."""
    return exp.convert(value)


def to_expression(value: str | exp.Expression | float) -> exp.Expression:
    """Parse a SQL string (DuckDB dialect) or accept a sqlglot tree; returns a private copy."""
    if isinstance(value, exp.Expression):
        return value.copy()
    if isinstance(value, (int, float)):
        return exp.convert(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected an expression string or sqlglot tree, got {value!r}")
    return sqlglot.parse_one(value, dialect="duckdb")


def referenced_columns(e: exp.Expression) -> set[str]:
    """Names of the columns an expression reads."""
    return {c.name for c in e.find_all(exp.Column)}


def infer_type(e: exp.Expression, schema: dict[str, str]) -> str:
    """A small type inference over the expression forms the DSL supports.

    Example:
        >>> infer_type(to_expression("a / 2"), {"a": "BIGINT"})
        'DOUBLE'
        >>> infer_type(to_expression("a > 1"), {"a": "BIGINT"})
        'BOOLEAN'
    """
    if isinstance(e, exp.Paren):
        return infer_type(e.this, schema)
    if isinstance(e, exp.Column):
        return schema[e.name]
    if isinstance(e, exp.Literal):
        if e.is_string:
            return "VARCHAR"
        return "DOUBLE" if any(ch in e.this for ch in ".eE") else "BIGINT"
    if isinstance(e, exp.Boolean):
        return "BOOLEAN"
    if isinstance(e, (exp.Predicate, exp.Connector, exp.Not)):
        return "BOOLEAN"
    if isinstance(e, exp.Div):
        return "DOUBLE"
    if isinstance(e, exp.Neg):
        return infer_type(e.this, schema)
    if isinstance(e, exp.Binary):
        lt, rt = infer_type(e.left, schema), infer_type(e.right, schema)
        if "DOUBLE" in (lt, rt):
            return "DOUBLE"
        if lt in NUMERIC_TYPES and rt in NUMERIC_TYPES:
            return "BIGINT"
        return lt
    if isinstance(e, exp.Cast):
        return e.to.sql(dialect="duckdb").upper()
    if isinstance(e, (exp.Abs, exp.Round, exp.Greatest, exp.Least)):
        return infer_type(e.this, schema)
    if isinstance(e, exp.Case):
        return infer_type(e.args["ifs"][0].args["true"], schema)
    return "DOUBLE"


@dataclass(frozen=True)
class AggCall:
    """One aggregate of a group-by: `func(arg)`; `arg` is None for COUNT(*)."""

    func: str
    arg: exp.Expression | None = None

    def sql(self, dialect: str = "duckdb") -> str:
        inner = "*" if self.arg is None else self.arg.sql(dialect=dialect)
        return f"{self.func.upper()}({inner})"


def _agg(func: str, arg: str | exp.Expression | None) -> AggCall:
    return AggCall(func, None if arg is None else to_expression(arg))


def count(arg: str | exp.Expression | None = None) -> AggCall:
    """COUNT(arg) or COUNT(*)."""
    return _agg("count", arg)


def sum_(arg: str | exp.Expression) -> AggCall:
    """SUM(arg)."""
    return _agg("sum", arg)


def avg(arg: str | exp.Expression) -> AggCall:
    """AVG(arg)."""
    return _agg("avg", arg)


def min_(arg: str | exp.Expression) -> AggCall:
    """MIN(arg)."""
    return _agg("min", arg)


def max_(arg: str | exp.Expression) -> AggCall:
    """MAX(arg)."""
    return _agg("max", arg)


def agg_result_type(call: AggCall, arg_type: str | None) -> str:
    """Type of an aggregate's result (COUNT BIGINT, AVG DOUBLE, others keep the argument's)."""
    if call.func == "count":
        return "BIGINT"
    if call.func == "avg":
        return "DOUBLE"
    if call.func == "sum":
        return "DOUBLE" if arg_type == "DOUBLE" else "BIGINT"
    return arg_type or "DOUBLE"


def split_conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """Split `a AND b AND c` into its conjuncts."""
    if isinstance(e, exp.Paren):
        return split_conjuncts(e.this)
    if isinstance(e, exp.And):
        return split_conjuncts(e.left) + split_conjuncts(e.right)
    return [e]


def conjoin(parts: list[exp.Expression]) -> exp.Expression:
    """Join predicates with AND."""
    out = parts[0].copy()
    for p in parts[1:]:
        out = exp.and_(out, p.copy())
    return out
