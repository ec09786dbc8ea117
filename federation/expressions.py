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

from federation.conventions import NUMERIC_TYPES, TYPES

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

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
    if isinstance(e, exp.Div):
        return "DOUBLE"
    if isinstance(e, _STRING_FUNCS):
        return "VARCHAR"
    if isinstance(e, (exp.Neg, exp.Abs, exp.Round, exp.Nullif)):
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
    if isinstance(e, exp.Case):
        branches = [i.args["true"] for i in e.args["ifs"]]
        if e.args.get("default") is not None:
            branches.append(e.args["default"])
        return _widest(branches, schema)
    return "DOUBLE"


def canonical(e: exp.Expression, schema: dict[str, str]) -> exp.Expression:
    """The expression with one meaning in every engine (docs/sql.md, "Conversions"); what
    the engines would compute differently is written out, what they cannot agree on is
    refused with a ValueError.

    - CAST is TRY_CAST: a value that does not convert is NULL (a bad reading never stops a
      continuous query); a DOUBLE (or a string) to INT or BIGINT truncates toward zero, as
      Spark, Flink and Java do (DuckDB alone would round): TRY_CAST(TRUNC(x) AS INT).
    - a division, integer division or modulo by zero is NULL: the divisor is NULLIF(b, 0).
    - integer +, -, * and // compute in BIGINT (no INT overflow; DuckDB and Spark type
      them alike).
    - a decimal literal beside a non-DOUBLE operand is a DOUBLE (1.5e0), not a DECIMAL.
    - FLOOR and CEIL of a DOUBLE are DOUBLE (Spark would give BIGINT).
    - refused: // of a non-integer, a TIMESTAMP cast to a number or a number to a
      TIMESTAMP, a DOUBLE cast to VARCHAR (the engines print doubles differently), a cast
      to a type outside TYPES.

    Idempotent: a canonical expression is its own canonical form.

    Example:
        >>> e = canonical(to_expression("CAST(v AS INT) // k"), {"v": "DOUBLE", "k": "INT"})
        >>> e.sql("duckdb")
        'TRY_CAST(TRY_CAST(TRUNC(v) AS INT) AS BIGINT) // NULLIF(k, 0)'
    """

    def t(x: exp.Expression) -> str:
        return infer_type(x, schema)

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Cast):
            return _cast(node, t(node.this))
        if isinstance(node, _STRING_FUNCS):
            return _string_function(node, t)
        if isinstance(node, (exp.Floor, exp.Ceil)) and t(node.this) == "DOUBLE" and not (
                isinstance(node.parent, exp.Cast) and type_name(node.parent.to) == "DOUBLE"):
            return _try_cast(node.copy(), "DOUBLE")
        if isinstance(node, exp.Literal) and not node.is_string and "." in node.this \
                and "e" not in node.this.lower() and isinstance(node.parent, exp.Binary):
            p = node.parent
            other = p.right if node is p.left else p.left
            if t(other) != "DOUBLE":
                return exp.Literal.number(f"{node.this}e0")
            return node
        if isinstance(node, exp.IntDiv) and "DOUBLE" in (t(node.left), t(node.right)):
            raise ValueError(f"{node.sql('duckdb')!r}: // divides integers; for numbers with "
                             "a fraction write FLOOR(a / b)")
        if isinstance(node, (exp.Div, exp.IntDiv, exp.Mod)):
            node.set("expression", _nonzero(node.expression))
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.IntDiv)) \
                and t(node.left) == "INT" and t(node.right) in _INTEGRAL:
            node.set("this", _try_cast(node.left, "BIGINT"))
        return node

    out = e.copy()
    for node in reversed(list(out.dfs())):  # children before their parents
        new = fix(node)
        if new is not node:
            if node is out:
                out = new
            else:
                node.replace(new)
    return out


#: the string functions every engine computes alike (with the checks of _string_function)
_STRING_FUNCS = (exp.Lower, exp.Upper, exp.DPipe, exp.SplitPart, exp.RegexpExtract)
#: regular-expression syntax that RE2 (DuckDB) and java.util.regex (Spark) read differently
_REGEX_APART = re.compile(r"\(\?(?!:)|\\[1-9]|\\[pPQEZzAG]|\[\[:")


def _string_function(node: exp.Expression, t) -> exp.Expression:
    """LOWER, UPPER, ||, SPLIT_PART and REGEXP_EXTRACT with one meaning in every engine:
    their strings are VARCHARs; SPLIT_PART's delimiter a non-empty string and its part a
    whole number from 1; REGEXP_EXTRACT's pattern a string that RE2 and Java read alike and
    its group given (the engines' defaults differ), NULL where the pattern does not match
    (as Flink SQL; Spark and DuckDB alone give '')."""
    what = node.sql("duckdb")
    args = [node.left, node.right] if isinstance(node, exp.DPipe) else [node.this]
    for a in args:
        if t(a) != "VARCHAR":
            raise ValueError(f"{what!r}: {a.sql('duckdb')} is a {t(a)}, not a VARCHAR "
                             "(CAST an integer AS VARCHAR first)")
    if isinstance(node, exp.SplitPart):
        d, n = node.args.get("delimiter"), node.args.get("part_index")
        if not (isinstance(d, exp.Literal) and d.is_string and d.this):
            raise ValueError(f"{what!r}: the delimiter is a non-empty string literal")
        if not (isinstance(n, exp.Literal) and not n.is_string and str(n.this).isdigit()
                and int(n.this) >= 1):
            raise ValueError(f"{what!r}: the part is a whole number from 1 (1 is the first)")
    if isinstance(node, exp.RegexpExtract):
        p, g = node.expression, node.args.get("group")
        if not (isinstance(p, exp.Literal) and p.is_string):
            raise ValueError(f"{what!r}: the pattern is a string literal")
        if _REGEX_APART.search(p.this):
            raise ValueError(f"{what!r}: lookaround, back-references, \\p classes and "
                             "[[: classes read differently in RE2 (DuckDB) and Java (Spark)")
        try:
            groups = re.compile(p.this).groups
        except re.error as err:
            raise ValueError(f"{what!r}: the pattern does not compile: {err}") from None
        if not (isinstance(g, exp.Literal) and not g.is_string and str(g.this).isdigit()
                and int(g.this) <= groups):
            raise ValueError(f"{what!r}: the group is a whole number from 0 (the whole "
                             f"match) to {groups}, the pattern's groups")
        parent = node.parent
        if not (isinstance(parent, exp.If) and isinstance(parent.this, exp.RegexpLike)):
            return exp.Case(ifs=[exp.If(this=exp.RegexpLike(this=node.this.copy(),
                                                            expression=p.copy()),
                                        true=node.copy())])  # Spark's IF takes 3 arguments
    return node


def _try_cast(x: exp.Expression, to: str) -> exp.TryCast:
    return exp.TryCast(this=x, to=exp.DataType.build(to), safe=True)


def _nonzero(b: exp.Expression) -> exp.Expression:
    """A divisor that is NULL where it is 0."""
    if isinstance(b, exp.Nullif) or (isinstance(b, exp.Literal) and not b.is_string
                                     and float(b.this) != 0):
        return b
    return exp.Nullif(this=b, expression=exp.Literal.number(0))


def _cast(node: exp.Cast, source: str) -> exp.Expression:
    to = type_name(node.to)
    if to not in TYPES:
        raise ValueError(f"{node.sql()!r}: cast to {to}; the types are {', '.join(TYPES)}")
    if (source == "TIMESTAMP") != (to == "TIMESTAMP") and to != "VARCHAR" \
            and source != "VARCHAR":
        raise ValueError(f"{node.sql()!r}: a {source} does not convert to {to}")
    if source == "TIMESTAMP" and to == "VARCHAR" or source == "DOUBLE" and to == "VARCHAR":
        raise ValueError(f"{node.sql()!r}: a {source} prints differently in Spark and "
                         "DuckDB; compare or round it as a number instead")
    x = node.this
    if to in _INTEGRAL and source in ("DOUBLE", "VARCHAR") and not isinstance(x, exp.Trunc):
        if source == "VARCHAR":  # '12.7' is 12 in both engines (Spark alone gives NULL)
            x = _try_cast(x, "DOUBLE")
        x = exp.Trunc(this=x)
    return _try_cast(x, to)


@dataclass(frozen=True)
class AggCall:
    """One aggregate of a group-by: `func(arg)`; `arg` is None for COUNT(*)."""

    func: str
    arg: exp.Expression | None = None

    def sql(self, dialect: str = "duckdb") -> str:
        inner = "*" if self.arg is None else self.arg.sql(dialect=dialect)
        return f"{self.func.upper()}({inner})"


def agg_call(func: str, arg: str | exp.Expression | None, where=None) -> AggCall:
    """`func(arg)`; `where`: `func(arg) FILTER (WHERE where)`, the aggregate of `CASE WHEN
    where THEN arg END` (COUNT 0, the others NULL where no row passes: FILTER's)."""
    a = None if arg is None else to_expression(arg)
    return AggCall(func, a if where is None else exp.Case(ifs=[exp.If(
        this=to_expression(where), true=exp.Literal.number(1) if a is None else a)]))


def count(arg: str | exp.Expression | None = None, *, where=None) -> AggCall:
    return agg_call("count", arg, where)  # COUNT(arg) or COUNT(*) (`where`: FILTER)


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
