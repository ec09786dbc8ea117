"""Expressions in the one form every engine computes alike (docs/sql.md, "Conversions"):
what Spark and DuckDB would compute differently is written out, what they cannot agree on
is refused (`canonical`, applied by every plan node to its expressions)."""

from __future__ import annotations

import re

from sqlglot import exp

from federation.comparisons import comparable
from federation.conventions import NUMERIC_TYPES, TYPES
from federation.expressions import (
    _INTEGRAL,
    _STRING_FUNCS,
    MATH,
    TEXT,
    TIME_PARTS,
    infer_type,
    type_name,
    unsupported,
)
from federation.initcap import DELIMITERS, initcap_argument, initcap_form


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
    - FLOOR and CEIL of a DOUBLE are DOUBLE (Spark would give BIGINT, and fail past 2^63).
    - SQRT, LN and LOG(b, x) are NULL outside their domain (a negative, or 0 for a
      logarithm), POWER(x, y) where x < 0 and y has a fraction (DuckDB gives NaN or
      -inf there, Spark NaN or NULL); SIGN has its argument's type, CHAR_LENGTH, POSITION
      and the parts of a time (HOUR, MINUTE, ..., YEAR) are INT; CONCAT is `||` (NULL
      where an argument is NULL, as Flink's); SUBSTRING counts from a literal 1 or more.
    - refused: // of a non-integer, a TIMESTAMP cast to a number or a number to a
      TIMESTAMP, a DOUBLE cast to VARCHAR (the engines print doubles differently), a cast
      to a type outside TYPES.

    Idempotent: a canonical expression is its own canonical form.

    Example:
        >>> from federation.expressions import to_expression
        >>> e = canonical(to_expression("CAST(v AS INT) // k"), {"v": "DOUBLE", "k": "INT"})
        >>> e.sql("duckdb")
        'TRY_CAST(TRY_CAST(TRUNC(v) AS INT) AS BIGINT) // NULLIF(k, 0)'
    """

    def t(x: exp.Expression) -> str:
        return infer_type(x, schema)

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous):
            _python_function(node, t)
        elif what := unsupported(node, _OWN):
            raise ValueError(f"{what} is not supported in continuous queries "
                             "(the functions every engine computes alike: docs/sql.md; a "
                             "Python function serves a scalar one)")
        if isinstance(node, exp.Initcap):
            _varchars(node, [node.this], t)
            if node.expression is not None and node.expression.name not in DELIMITERS:
                raise ValueError(f"INITCAP({node.this.sql('duckdb')}, "
                                 f"{node.expression.sql('duckdb')}): INITCAP takes one "
                                 "argument (Flink's: words of ASCII letters and digits)")
            return initcap_form(node.this.copy())
        if isinstance(node, TIME_PARTS):  # DuckDB's are BIGINTs, Spark's INTs
            if t(node.this) != "TIMESTAMP":
                raise ValueError(f"{node.sql('spark')!r}: {node.sql_name().upper()} of a TIMESTAMP")
            return _as(node, "INT")
        if isinstance(node, MATH):
            return _math(node, t)
        if isinstance(node, TEXT):
            return _text(node, t)
        comparable(node, t)
        if isinstance(node, exp.TimeToStr):
            _time_format(node, t)
        if isinstance(node, exp.Cast):
            return _cast(node, t(node.this))
        if isinstance(node, _STRING_FUNCS):
            return _string_function(node, t)
        if isinstance(node, (exp.Floor, exp.Ceil)) and t(node.this) == "DOUBLE" \
                and not _cast_to(node, "DOUBLE"):
            # Spark's FLOOR of a DOUBLE is a BIGINT, which overflows (an error) past 2^63:
            # from 2^52 on a DOUBLE is whole, its own FLOOR (NaN and Infinity too)
            big = exp.LT(this=exp.Abs(this=node.this.copy()),
                         expression=exp.Literal.number("4503599627370496e0"))
            return exp.Case(ifs=[exp.If(this=big, true=_try_cast(node.copy(), "DOUBLE"))],
                            default=node.this.copy())
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
    done = {id(n) for d in out.find_all(exp.ArrayToString) if initcap_argument(d) is not None
            for n in d.walk()}  # INITCAP's canonical form (idempotent)
    for node in reversed(list(out.dfs())):  # children before their parents
        if id(node) in done:
            continue
        new = fix(node)
        if new is not node:
            if node is out:
                out = new
            else:
                node.replace(new)
    return out


#: the string functions every engine computes alike (with the checks of _string_function)
#: regular-expression syntax that RE2 (DuckDB) and java.util.regex (Spark) read differently
_REGEX_APART = re.compile(r"\(\?(?!:)|\\[1-9]|\\[pPQEZzAG]|\[\[:")


_TIME_FORMAT = re.compile(r"(%[YmdHMS]|[-:/. _])*")


def _time_format(node: exp.TimeToStr, t) -> None:
    """DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss') (DuckDB's STRFTIME): of a TIMESTAMP (UTC in
    every engine), a pattern of the numeric fields year, month, day, hour, minute, second
    and separators, which Spark's DATE_FORMAT and DuckDB's STRFTIME write alike (names of
    days and months, fractions and zones they do not)."""
    what = node.sql("spark")  # DATE_FORMAT(ts, 'yyyy-MM-dd'), as written
    if t(node.this) != "TIMESTAMP":
        raise ValueError(f"{what!r}: DATE_FORMAT of a TIMESTAMP, not a {t(node.this)}")
    fmt = node.args.get("format")
    if not (isinstance(fmt, exp.Literal) and fmt.is_string
            and _TIME_FORMAT.fullmatch(fmt.this)):
        raise ValueError(f"{what!r}: a DATE_FORMAT pattern of yyyy, MM, dd, HH, mm, ss and "
                         "the separators - : / . _ and space (STRFTIME: %Y %m %d %H %M "
                         "%S), as a string")


def _string_function(node: exp.Expression, t) -> exp.Expression:
    """LOWER, UPPER, ||, SPLIT_PART and REGEXP_EXTRACT with one meaning in every engine:
    their strings are VARCHARs; SPLIT_PART's delimiter a non-empty string and its part a
    whole number from 1; REGEXP_EXTRACT's pattern a string that RE2 and Java read alike and
    its group given (the engines' defaults differ), NULL where the pattern does not match
    (as Flink SQL; Spark and DuckDB alone give '')."""
    what = node.sql("duckdb")
    _varchars(node, [node.left, node.right] if isinstance(node, exp.DPipe) else [node.this],
              t, "duckdb")
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


def _cast_to(node: exp.Expression, to: str) -> bool:
    """Whether `node` is already cast to `to` (a canonical form, made once)."""
    return isinstance(node.parent, exp.Cast) and type_name(node.parent.to) == to


def _as(node: exp.Expression, to: str) -> exp.Expression:
    """`node` as a `to` (the engines type it differently), once."""
    return node if _cast_to(node, to) else _try_cast(node.copy(), to)


def _numbers(node: exp.Expression, args: list, t) -> None:
    for a in args:
        if t(a) not in NUMERIC_TYPES:
            raise ValueError(f"{node.sql('spark')!r}: {a.sql('spark')} is a {t(a)}, not a "
                             "number")


def _varchars(node: exp.Expression, args: list, t, dialect: str = "spark") -> None:
    for a in args:
        if t(a) != "VARCHAR":
            raise ValueError(f"{node.sql(dialect)!r}: {a.sql(dialect)} is a {t(a)}, not a "
                             "VARCHAR (CAST an integer AS VARCHAR first)")


def _guarded(node: exp.Expression, cond: exp.Expression) -> exp.Expression:
    """CASE WHEN cond THEN node END, once (the engines differ outside `cond`)."""
    p = node.parent
    if isinstance(p, exp.If) and p.args.get("true") is node and p.this == cond:
        return node
    return exp.Case(ifs=[exp.If(this=cond, true=node.copy())])


def _math(node: exp.Expression, t) -> exp.Expression:
    """SQRT, LN, LOG(b, x), EXP, POWER of numbers, DOUBLE; NULL outside the domain."""
    if isinstance(node, exp.Log):
        base, x = node.this, node.args.get("expression")
        if x is None:  # LOG(x) is ln in Spark and Flink, log10 in DuckDB
            raise ValueError(f"{node.sql('spark')!r}: write LN(x) or LOG10(x) (LOG(x) "
                             "means ln in Flink and Spark, log10 in DuckDB)")
        if not (isinstance(base, exp.Literal) and not base.is_string
                and float(base.this) > 0 and float(base.this) != 1):
            raise ValueError(f"{node.sql('spark')!r}: the base is a number literal > 0, "
                             "not 1")
        _numbers(node, [x], t)
        return _guarded(node, exp.GT(this=x.copy(), expression=exp.Literal.number(0)))
    y = node.args.get("expression")
    _numbers(node, [node.this, *([y] if y is not None else [])], t)
    x = node.this.copy()
    if isinstance(node, exp.Sqrt):
        return _guarded(node, exp.GTE(this=x, expression=exp.Literal.number(0)))
    if isinstance(node, exp.Ln):
        return _guarded(node, exp.GT(this=x, expression=exp.Literal.number(0)))
    if isinstance(node, exp.Pow) and t(y) == "DOUBLE" and not (
            isinstance(node.this, exp.Literal) and float(node.this.this) >= 0):
        whole = exp.EQ(this=exp.Round(this=y.copy()), expression=y.copy())
        return _guarded(node, exp.or_(
            exp.GTE(this=x, expression=exp.Literal.number(0)), whole))
    return node


def _text(node: exp.Expression, t) -> exp.Expression:
    """CHAR_LENGTH, POSITION, SUBSTRING, TRIM, REPLACE, CONCAT of VARCHARs and SIGN of a
    number, with one meaning in every engine (`canonical`)."""
    what = node.sql("spark")
    if isinstance(node, exp.Sign):
        _numbers(node, [node.this], t)
        return _as(node, t(node.this))
    args = {exp.Concat: list(node.expressions),
            exp.StrPosition: [node.this, node.args.get("substr")],
            exp.Replace: [node.this, node.expression, node.args.get("replacement")]
            }.get(type(node), [node.this])
    _varchars(node, [a for a in args if a is not None], t)
    if isinstance(node, exp.Concat):  # ||: NULL where an argument is NULL (Flink's and
        # Spark's CONCAT), but where the text's dialect skips NULLs (DuckDB's CONCAT)
        parts = [exp.Coalesce(this=a.copy(), expressions=[exp.Literal.string("")])
                 if node.args.get("coalesce") and not isinstance(a, exp.Literal)
                 else a.copy() for a in node.expressions]
        out = parts[0]
        for a in parts[1:]:
            out = exp.DPipe(this=out, expression=a)
        return out
    if isinstance(node, (exp.Length, exp.StrPosition)):
        if node.args.get("position") is not None:
            raise ValueError(f"{what!r}: POSITION from a start is not supported")
        return _as(node, "INT")
    if isinstance(node, exp.Substring):
        for k, least in (("start", 1), ("length", 0)):
            v = node.args.get(k)
            if v is not None and not (isinstance(v, exp.Literal) and not v.is_string
                                      and str(v.this).isdigit() and int(v.this) >= least):
                raise ValueError(f"{what!r}: the {k} is a whole number literal from "
                                 f"{least} (the engines count positions below 1 apart)")
    if isinstance(node, exp.Trim) and (node.expression is not None
                                       or node.args.get("collation") is not None):
        raise ValueError(f"{what!r}: TRIM of spaces only (TRIM(s), LTRIM(s), RTRIM(s))")
    return node


#: the constructs of canonical forms (TRY_CAST, TRUNC, NULLIF, REGEXP_LIKE) and of plans
#: (COUNT(DISTINCT a, b)'s STRUCT, a frame's INTERVAL bound), and a tuple of an IN list
_OWN = (exp.TryCast, exp.Trunc, exp.Nullif, exp.RegexpLike, exp.Struct, exp.Interval,
        exp.Tuple)


def _python_function(node: exp.Anonymous, t) -> None:
    """A call of a registered Python function (federation.udf): known, deterministic on a
    sample of its argument types (`Udf.check`), at least one argument."""
    from federation.python_functions import Udf, lookup

    u = lookup(node.name)
    if u is None:
        raise ValueError(f"unknown function {node.name}() (a Python function is registered "
                         "with federation.udf, or in SQL with CREATE FUNCTION ... LANGUAGE "
                         "PYTHON)")
    if not isinstance(u, Udf):
        raise ValueError(  # noqa: TRY004 - a ValueError as every refusal here
            f"{node.name}() is a Python aggregate (federation.udaf): it aggregates a "
            "group's rows (in an aggregate, GROUP BY or OVER)")
    if not node.expressions:
        raise ValueError(f"{node.name}(): a Python function takes at least one argument "
                         "(a constant is a literal)")
    u.check(tuple(t(a) for a in node.expressions))


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
