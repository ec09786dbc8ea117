"""Expressions of the DSL: strings or `col(...)` helpers, kept as sqlglot trees.

Example:
    >>> e = to_expression("value > 0.9 * maxv")
    >>> sorted(referenced_columns(e))
    ['maxv', 'value']
    >>> (col("value") * 2).sql()
    'value * 2'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from federation.conventions import NATIVE_AGGREGATES, NUMERIC_TYPES

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: the aggregates whose partials over parts of a window merge into the whole's (slices, panes)
MERGEABLE_FUNCS = ("count", "sum", "avg", "min", "max")
#: the aggregates of distinct values, each over the set of its argument's non-NULL values:
#: the plain aggregate each applies to that set
DISTINCT_FUNCS = {"count_distinct": "count", "sum_distinct": "sum", "avg_distinct": "avg"}
#: LISTAGG: the non-NULL strings in ascending order (their UTF-8 bytes'), joined by a separator
LIST_FUNCS = ("listagg", "listagg_distinct")
#: a Python aggregate (federation.udaf) of the rows' values, of the distinct values
PYTHON_AGG_FUNCS = ("python", "python_distinct")
AGG_FUNCS = (*MERGEABLE_FUNCS, *DISTINCT_FUNCS, *LIST_FUNCS, *PYTHON_AGG_FUNCS)
#: the variances and standard deviations, planned in two passes of the aggregates above
#: (federation/logical/spread.py): (sample: over n - 1, root: the standard deviation)
SPREAD_FUNCS = {"var_samp": (True, False), "var_pop": (False, False),
                "stddev_samp": (True, True), "stddev_pop": (False, True)}
#: aggregates of a group's values in their order (federation/logical/median.py)
ORDERED_FUNCS = ("median", "percentile_cont", "percentile_disc")
#: the return type of each registered Python function by lower-case name (federation.udf)
FUNCTION_TYPES: dict[str, str] = {}


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
    if isinstance(value, AggCall):
        raise ValueError(  # noqa: TRY004 - the DSL's refusals are ValueErrors
            f"{value.sql()} is an aggregate: it belongs in aggregate(...) or over(...), "
            "not in a row's expression")
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected an expression string or sqlglot tree, got {value!r}")
    text = value.strip()
    if _NAME.match(text) and text.lower() not in ("true", "false", "null"):  # a bare name is a column, even one that SQL reserves (load, order)
        return exp.column(text)
    try:  # parsed where SQL expects an expression: `load * 2` is not the LOAD command
        sel = sqlglot.parse_one(f"SELECT {text}", dialect="duckdb")
    except sqlglot.ParseError as e:
        why = str(e).splitlines()[0]
        raise ValueError(f"{why}; a column named like an SQL keyword needs double quotes, "
                         'e.g. "order" * 2') from None
    extra = [k for k, v in sel.args.items() if v and k != "expressions"]
    if not isinstance(sel, exp.Select) or len(sel.expressions) != 1 or extra \
            or isinstance(sel.expressions[0], exp.Alias):
        raise ValueError("expected one expression (no AS, FROM, WHERE or commas; name an "
                         "output by the keyword argument)")
    return sel.expressions[0]


def referenced_columns(e: exp.Expression) -> set[str]:
    """Names of the columns an expression reads."""
    return {c.name for c in e.find_all(exp.Column)}


_INTEGRAL = ("INT", "BIGINT")
_STRING_FUNCS = (exp.Lower, exp.Upper, exp.DPipe, exp.SplitPart, exp.RegexpExtract)
#: the parts of a time (INT), the DOUBLE functions of numbers, the other functions of
#: strings (and SIGN): their one meaning in every engine is federation.canonical's
TIME_PARTS = (exp.Hour, exp.Minute, exp.Second, exp.Year, exp.Month, exp.DayOfMonth, exp.Day)
MATH = (exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Pow)
TEXT = (exp.Length, exp.StrPosition, exp.Substring, exp.Trim, exp.Replace, exp.Concat,
        exp.Sign, exp.Initcap)
#: every construct a user's expression may hold (Python functions are `exp.Anonymous`,
#: checked by name): the SQL front end and the DSL (`canonical`, which adds the constructs
#: of its own forms) refuse any other function where it is written
SCALARS = (exp.Column, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Neg, exp.Not,
           exp.Binary, exp.Predicate, exp.Connector, exp.Between, exp.In, exp.Is,
           exp.Abs, exp.Round, exp.Greatest, exp.Least, exp.Cast, exp.Case, exp.If,
           exp.Coalesce, exp.Identifier, exp.DataType, exp.Star, exp.Var, *_STRING_FUNCS,
           exp.TimeToStr, exp.Floor, exp.Ceil, *TIME_PARTS, *MATH, *TEXT)


def unsupported(node: exp.Expression, also: tuple = ()) -> str | None:
    """What `node` is (`function F()`, or its kind), if it is none of SCALARS and `also`."""
    if isinstance(node, (*SCALARS, *also)):
        return None
    return f"function {node.sql_name()}()" if isinstance(node, exp.Func) else node.key.upper()


def type_name(dt: exp.DataType) -> str:
    """A sqlglot type as the plans name it (VARCHAR, not TEXT)."""
    name = dt.sql(dialect="duckdb").upper()
    return {"TEXT": "VARCHAR", "STRING": "VARCHAR", "INTEGER": "INT", "BOOL": "BOOLEAN",
            "FLOAT8": "DOUBLE", "INT8": "BIGINT", "INT4": "INT"}.get(name, name)


def _wider(a: str, b: str) -> str:
    if a in NUMERIC_TYPES and b in NUMERIC_TYPES:
        return max(a, b, key=("INT", "BIGINT", "DOUBLE").index)
    return a


def _widest(es: list, schema: dict[str, str]) -> str:
    """The type of a choice among expressions (CASE, IF, COALESCE, GREATEST): the first's,
    widened by the others' where all are numbers."""
    out = infer_type(es[0], schema)
    for x in es[1:]:
        out = _wider(out, infer_type(x, schema))
    return out


def infer_type(e: exp.Expression, schema: dict[str, str]) -> str:
    """The type both engines give an expression (in its canonical form, `canonical`).

    Example:
        >>> infer_type(to_expression("a / 2"), {"a": "BIGINT"})
        'DOUBLE'
        >>> infer_type(to_expression("a > 1"), {"a": "BIGINT"})
        'BOOLEAN'
        >>> infer_type(to_expression("CASE WHEN a > 1 THEN 1 ELSE 0 END"), {"a": "INT"})
        'INT'
    """
    if isinstance(e, exp.Paren):
        return infer_type(e.this, schema)
    if isinstance(e, exp.Column):
        return schema[e.name]
    if isinstance(e, exp.Literal):
        if e.is_string:
            return "VARCHAR"
        if any(ch in e.this for ch in ".eE"):
            return "DOUBLE"
        return "INT" if -(2**31) <= int(e.this) < 2**31 else "BIGINT"
    if isinstance(e, exp.Boolean):
        return "BOOLEAN"
    if isinstance(e, (exp.Predicate, exp.Connector, exp.Not)):
        return "BOOLEAN"
    if isinstance(e, (exp.Div, *MATH)):  # POWER is a Binary
        return "DOUBLE"
    if isinstance(e, (*_STRING_FUNCS, exp.Substring, exp.Trim, exp.Replace, exp.Concat)):
        return "VARCHAR"
    if isinstance(e, (*TIME_PARTS, exp.Length, exp.StrPosition)):
        return "INT"
    if isinstance(e, (exp.Neg, exp.Abs, exp.Round, exp.Nullif, exp.Sign)):
        return infer_type(e.this, schema)
    if isinstance(e, exp.Binary):
        return _wider(infer_type(e.left, schema), infer_type(e.right, schema))
    if isinstance(e, exp.Cast):  # TryCast too
        return type_name(e.to)
    if isinstance(e, (exp.Greatest, exp.Least, exp.Coalesce)):
        return _widest([e.this, *e.expressions], schema)
    if isinstance(e, exp.If):
        return _widest([x for x in (e.args["true"], e.args.get("false")) if x is not None],
                       schema)
    if isinstance(e, (exp.TimeToStr, exp.ArrayToString)):  # DATE_FORMAT, INITCAP's form
        return "VARCHAR"
    if isinstance(e, exp.Anonymous):
        if e.name.lower() not in FUNCTION_TYPES:
            raise ValueError(f"unknown function {e.name}() (a Python function is registered "
                             "with federation.udf)")
        return FUNCTION_TYPES[e.name.lower()]
    if isinstance(e, exp.Case):
        branches = [i.args["true"] for i in e.args["ifs"]]
        if e.args.get("default") is not None:
            branches.append(e.args["default"])
        return _widest(branches, schema)
    return "DOUBLE"


@dataclass(frozen=True)
class AggCall:
    """One aggregate of a group-by: `func(arg)`; `arg` is None for COUNT(*). A percentile
    (ORDERED_FUNCS) has its `fraction` (numerator, denominator) and order."""

    func: str
    arg: exp.Expression | None = None
    fraction: tuple[int, int] | None = None
    descending: bool = False
    separator: str = ","  # LISTAGG's
    function: str = ""  # a Python aggregate's name (PYTHON_AGG_FUNCS)

    def __post_init__(self) -> None:
        if self.func == "median" and self.fraction is None:  # PERCENTILE_CONT(0.5)
            object.__setattr__(self, "fraction", (1, 2))

    def sql(self, dialect: str = "duckdb") -> str:
        inner = "*" if self.arg is None else self.arg.sql(dialect=dialect)
        if self.fraction is not None and self.func != "median":
            a, b = self.fraction
            return (f"{self.func.upper()}({a / b!r}) WITHIN GROUP (ORDER BY {inner}"
                    f"{' DESC' if self.descending else ''})")
        if self.func in LIST_FUNCS:
            sep = exp.Literal.string(self.separator).sql(dialect=dialect)
            return f"LISTAGG({'DISTINCT ' * (self.func != 'listagg')}{inner}, {sep})"
        if self.func in DISTINCT_FUNCS:
            return f"{DISTINCT_FUNCS[self.func].upper()}(DISTINCT {inner})"
        if self.func in PYTHON_AGG_FUNCS:
            d = "DISTINCT " * (self.func == "python_distinct")
            return f"{self.function.upper()}({d}{inner})"
        return f"{self.func.upper()}({inner})"


def agg_call(func: str, arg: str | exp.Expression | None, where=None) -> AggCall:
    """`func(arg)`; `where`: `func(arg) FILTER (WHERE where)`, the aggregate of `CASE WHEN
    where THEN arg END` (COUNT 0, the others NULL where no row passes: FILTER's)."""
    a = None if arg is None else to_expression(arg)
    return AggCall(func, a if where is None else exp.Case(ifs=[exp.If(
        this=to_expression(where), true=exp.Literal.number(1) if a is None else a)]))


def count(arg: str | exp.Expression | None = None, *, where=None) -> AggCall:
    return agg_call("count", arg, where)  # COUNT(arg) or COUNT(*) (`where`: FILTER)


def count_distinct(arg: str | exp.Expression, *more: str | exp.Expression,
                   where=None) -> AggCall:
    """COUNT(DISTINCT arg): the distinct non-NULL values (`where`: FILTER); of several
    arguments, COUNT(DISTINCT a, b): the distinct combinations in which none is NULL."""
    if more:
        arg = distinct_tuple([to_expression(a) for a in (arg, *more)])
    return agg_call("count_distinct", arg, where)


def distinct_tuple(args: list[exp.Expression]) -> exp.Expression:
    """The value COUNT(DISTINCT a, b, ...) counts: a struct of the arguments, NULL where any
    of them is (SQL's and Flink's rule: such a row is not counted)."""
    fields = [exp.PropertyEQ(this=exp.to_identifier(f"f{i}"), expression=a.copy())
              for i, a in enumerate(args, 1)]
    nulls = [exp.Is(this=a.copy(), expression=exp.Null()) for a in args]
    return exp.Case(ifs=[exp.If(this=exp.or_(*nulls), true=exp.Null())],
                    default=exp.Struct(expressions=fields))


def sum_distinct(arg: str | exp.Expression, *, where=None) -> AggCall:
    """SUM(DISTINCT arg): the sum of the distinct non-NULL values (`where`: FILTER)."""
    return agg_call("sum_distinct", arg, where)


def avg_distinct(arg: str | exp.Expression, *, where=None) -> AggCall:
    """AVG(DISTINCT arg): the mean of the distinct non-NULL values (`where`: FILTER)."""
    return agg_call("avg_distinct", arg, where)


def sum_(arg: str | exp.Expression, *, where=None) -> AggCall:
    """SUM(arg) (`where`: FILTER)."""
    return agg_call("sum", arg, where)


def avg(arg: str | exp.Expression, *, where=None) -> AggCall:
    """AVG(arg) (`where`: FILTER)."""
    return agg_call("avg", arg, where)


def min_(arg: str | exp.Expression, *, where=None) -> AggCall:
    """MIN(arg) (`where`: FILTER)."""
    return agg_call("min", arg, where)


def max_(arg: str | exp.Expression, *, where=None) -> AggCall:
    """MAX(arg) (`where`: FILTER)."""
    return agg_call("max", arg, where)


def listagg(arg: str | exp.Expression, separator: str = ",", *, distinct: bool = False,
            where=None) -> AggCall:
    """LISTAGG(arg, separator): the group's non-NULL strings in ascending order (of their
    UTF-8 bytes) joined by `separator`, NULL where there is none; `distinct`: each once."""
    call = agg_call("listagg_distinct" if distinct else "listagg", arg, where)
    return AggCall(call.func, call.arg, separator=separator)


def median(arg: str | exp.Expression, *, where=None) -> AggCall:
    """MEDIAN(arg): the middle value, or the mean of the two middle ones (`where`: FILTER;
    federation/logical/median.py): PERCENTILE_CONT(0.5)."""
    return agg_call("median", arg, where)


def percentile(arg: str | exp.Expression, fraction, *, discrete: bool = False,
               descending: bool = False, where=None) -> AggCall:
    """PERCENTILE_CONT(fraction) WITHIN GROUP (ORDER BY arg [DESC]) (Flink's PERCENTILE(arg,
    fraction), DuckDB's QUANTILE_CONT): the value at position fraction * (n - 1) of the n
    non-NULL values in that order, interpolated between its neighbours (DOUBLE);
    `discrete`: PERCENTILE_DISC, the first value whose share of the values up to it is at
    least `fraction`. `fraction` a number in [0, 1], read exactly as written (0.28 is
    7/25; federation/logical/median.py)."""
    from fractions import Fraction

    try:
        f = Fraction(str(fraction))
    except (ValueError, ZeroDivisionError):
        f = None
    if f is None or not 0 <= f <= 1:
        raise ValueError(f"a percentile's fraction is a number between 0 and 1, not "
                         f"{fraction!r}")
    call = agg_call("percentile_disc" if discrete else "percentile_cont", arg, where)
    return AggCall(call.func, call.arg, (f.numerator, f.denominator), descending)


def stddev(arg: str | exp.Expression, *, population: bool = False, where=None) -> AggCall:
    """STDDEV_SAMP(arg) (SQL's STDDEV), STDDEV_POP with `population` (`where`: FILTER)."""
    return agg_call("stddev_pop" if population else "stddev_samp", arg, where)


def variance(arg: str | exp.Expression, *, population: bool = False, where=None) -> AggCall:
    """VAR_SAMP(arg) (SQL's VARIANCE), VAR_POP with `population` (`where`: FILTER)."""
    return agg_call("var_pop" if population else "var_samp", arg, where)


def agg_result_type(call: AggCall, arg_type: str | None) -> str:
    """Type of an aggregate's result (COUNT BIGINT, AVG DOUBLE, others keep the argument's)."""
    if call.func in ("count", "count_distinct"):
        return "BIGINT"
    if call.func == "percentile_disc":  # one of the values
        return arg_type or "DOUBLE"
    if call.func in ("avg", "avg_distinct", *NATIVE_AGGREGATES):  # (STDDEV, ... of sessions)
        return "DOUBLE"
    if call.func in LIST_FUNCS:
        return "VARCHAR"
    if call.func in PYTHON_AGG_FUNCS:
        return FUNCTION_TYPES[call.function]
    if call.func in ("sum", "sum_distinct"):
        return "DOUBLE" if arg_type == "DOUBLE" else "BIGINT"
    return arg_type or "DOUBLE"

