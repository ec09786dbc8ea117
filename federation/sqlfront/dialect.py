"""The streaming SQL dialect: how a query's text is read, and how a refusal names its place.

The text is parsed by sqlglot in DuckDB's dialect with one extension (`FedqSql`): inside a
function call, `TABLE name` is a table argument (the first argument of a window table
function) rather than the query `TABLE name`. A query is one statement (`SqlText`).

Whatever the engine cannot run is a `SqlError` naming the clause, the line and the column
(`SqlText.fail` finds them from the offending construct, else from the clause's keyword):

    >>> text = SqlText("SELECT plug_id\\nFROM s\\nORDER BY plug_id")
    >>> print(text.fail("ORDER BY on a stream is not supported", "ORDER BY"))
    SQL line 3, col 1 (ORDER BY): ORDER BY on a stream is not supported

Expressions are the forms every engine evaluates alike (`check_scalar`); a comment in a
WHERE or HAVING condition may carry the optimizer's selectivity estimate (`selectivity`):

    >>> selectivity(sqlglot.parse_one("SELECT 1 WHERE v > 9 /* selectivity 0.1 */")
    ...             .args["where"])
    0.1
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar, TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError
from sqlglot.tokens import TokenType

from federation.errors import FedqError, QueryValidationError
from federation.expressions import unsupported
from federation.python_functions import load, lookup
from federation.sqlfront import group_windows, views

T = TypeVar("T")

#: expression forms every engine evaluates alike (Spark, DuckDB, the reference evaluator)
_SELECTIVITY = re.compile(r"selectivity\s*[=:(]?\s*([0-9]*\.?[0-9]+)", re.IGNORECASE)


class SqlError(FedqError, ValueError):
    """A SQL query the engine cannot run; names the clause and the position.

    Example:
        >>> str(SqlError("ORDER BY on a stream is not supported", "ORDER BY", 2, 5))
        'SQL line 2, col 5 (ORDER BY): ORDER BY on a stream is not supported'
    """

    def __init__(self, message: str, clause: str, line: int | None = None,
                 col: int | None = None) -> None:
        self.message, self.clause, self.line, self.col = message, clause, line, col
        where = f"line {line}, col {col}" if line is not None else "line ?"
        super().__init__(f"SQL {where} ({clause}): {message}")


#: DATE_FORMAT's pattern letters (Flink's and Spark's, Java's) as strftime writes them
_JAVA_TIME = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def _date_format(args: list) -> exp.Expression:
    """Flink's `DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss')` as sqlglot's TimeToStr (DuckDB's
    STRFTIME, Spark's DATE_FORMAT) of the strftime pattern; a letter outside yyyy, MM,
    dd, HH, mm, ss stays as written and is refused by federation.canonical."""
    if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
        return exp.Anonymous(this="DATE_FORMAT", expressions=args)
    parts = re.findall(r"yyyy|MM|dd|HH|mm|ss|[A-Za-z]+|[^A-Za-z]+", args[1].this)
    fmt = "".join(_JAVA_TIME.get(x, x) for x in parts)
    return exp.TimeToStr(this=args[0], format=exp.Literal.string(fmt))


class FedqSql(DuckDB):
    """DuckDB's dialect, reading `TABLE name` inside a function call as a table argument
    (the window table functions' first argument) instead of `TABLE name` as a query, and
    Flink's DATE_FORMAT and CONCAT."""

    class Tokenizer(DuckDB.Tokenizer):
        # SESSION(...) is the session window table function, not a keyword
        KEYWORDS: ClassVar[dict] = {k: v for k, v in DuckDB.Tokenizer.KEYWORDS.items()
                                    if k != "SESSION"}
        IDENTIFIERS: ClassVar[list] = ['"', "`"]  # Flink quotes names in backticks

    class Parser(DuckDB.Parser):
        FUNCTIONS: ClassVar[dict] = {
            **DuckDB.Parser.FUNCTIONS, "DATE_FORMAT": _date_format,
            # Flink's CONCAT: NULL where an argument is NULL (DuckDB's skips NULLs)
            "CONCAT": lambda args: exp.Concat(expressions=args, safe=False, coalesce=False),
            # Flink's PERCENTILE(x, p): interpolated, PERCENTILE_CONT's
            "PERCENTILE": lambda args: exp.PercentileCont(this=args[0], expression=args[1])
            if len(args) == 2 else exp.Anonymous(this="PERCENTILE", expressions=args)}

        def _parse_lambda(self, alias: bool = False) -> exp.Expression | None:
            if self._curr is None or self._curr.token_type != TokenType.TABLE \
                    or self._next is None:
                return super()._parse_lambda(alias)
            if self._next.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
                self._advance()
                table = self.expression(exp.Table(this=self._parse_id_var()))
            elif self._next.token_type == TokenType.L_PAREN:  # TABLE (SELECT ...): views.py
                table = super()._parse_lambda(alias)
            else:
                return super()._parse_lambda(alias)
            if self._match(TokenType.PARTITION_BY):  # SESSION(TABLE s PARTITION BY k)
                if self._match(TokenType.L_PAREN):  # PARTITION BY (k1, k2)
                    keys = self._parse_csv(self._parse_column)
                    self._match_r_paren()
                else:  # PARTITION BY k
                    keys = [self._parse_column()]
                table.set("partition", exp.Tuple(expressions=keys))
            return table


class PythonAgg(exp.Anonymous, exp.AggFunc):
    """A call of a registered Python aggregate (federation.udaf): an aggregate wherever the
    front end looks for one, written as the call it is."""

    arg_types: ClassVar[dict] = {"expressions": False}

    def sql_name(self) -> str:  # type: ignore[override]
        return self.name.upper()


def _python_aggregates(n: exp.Expression) -> exp.Expression:
    """The calls of registered Python aggregates as PythonAgg."""
    from federation.python_aggregates import Udaf

    if type(n) is exp.Anonymous and isinstance(lookup(n.name), Udaf):
        return PythonAgg(this=n.this, expressions=n.expressions)
    return n


#: SQL's aggregate functions as expressions.AggCall names them (select_list.py)
AGGREGATES: dict[type, str] = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg",
                               exp.Min: "min", exp.Max: "max",
                               # STDDEV and VARIANCE are the sample's (SQL's, Flink's, DuckDB's)
                               exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp",
                               exp.StddevPop: "stddev_pop", exp.Variance: "var_samp",
                               exp.VariancePop: "var_pop", exp.Median: "median",
                               exp.PercentileCont: "percentile_cont",
                               exp.PercentileDisc: "percentile_disc",
                               exp.GroupConcat: "listagg",  # LISTAGG, STRING_AGG
                               PythonAgg: "python"}

def listagg_separator(text: SqlText, call: exp.Expression) -> str:
    """LISTAGG's separator: a string literal, `,` by default (Flink's); ORDER BY in it is
    refused (the values are joined in ascending order)."""
    sep = call.args.get("separator")
    if sep is not None and not (isinstance(sep, exp.Literal) and sep.is_string):
        raise text.fail(f"LISTAGG's separator is a string literal, not {sep.sql()!r}",
                        "SELECT", sep)
    if isinstance(call.this, exp.Order):
        raise text.fail("LISTAGG joins the values in ascending order (of their bytes): "
                        "ORDER BY in it is not supported", "SELECT", call)
    return "," if sep is None else sep.name


def unnamed(text: SqlText, inner: exp.Expression, e: exp.Expression) -> SqlError:
    """The refusal of a SELECT item that computes without a name."""
    shown = inner.sql(dialect="spark")  # Flink's spelling (DATE_FORMAT, not STRFTIME)
    return text.fail(f"name the expression {shown!r}: {shown} AS name", "SELECT", e)


def by_position(text: SqlText, g: exp.Expression, items: list[exp.Expression]
                ) -> exp.Expression:
    """`GROUP BY 2`: the second SELECT item's expression (DuckDB's and Spark's reading; a
    position of an aggregate is refused)."""
    if not (isinstance(g, exp.Literal) and not g.is_string and str(g.this).isdigit()):
        return g
    k = int(g.this)
    if not 1 <= k <= len(items):
        raise text.fail(f"GROUP BY {k}: the SELECT has {len(items)} items", "GROUP BY", g)
    e = items[k - 1]
    e = e.this if isinstance(e, exp.Alias) else e
    if e.find(exp.AggFunc) is not None or isinstance(e, exp.Star):
        raise text.fail(f"GROUP BY {k}: item {k} ({e.sql()}) is an aggregate", "GROUP BY", g)
    return e.copy()


def _within_group(n: exp.Expression) -> exp.Expression:
    """`PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x [DESC])` (PERCENTILE_DISC) as DuckDB's
    `QUANTILE_CONT(x, p)`, one aggregate node with its argument inside (`desc` set for a
    descending order)."""
    if not (isinstance(n, exp.WithinGroup) and isinstance(n.this, (exp.PercentileCont,
                                                                   exp.PercentileDisc))):
        return n
    order = n.expression.expressions if isinstance(n.expression, exp.Order) else []
    if len(order) != 1:
        return n  # refused where it stands (WITHIN GROUP orders by one value)
    out = type(n.this)(this=order[0].this.copy(), expression=n.this.this.copy())
    if order[0].args.get("desc"):
        out.set("desc", True)
    return out


def percentile_fraction(text: SqlText, call: exp.Expression
                        ) -> tuple[tuple[str, bool], exp.Expression]:
    """A percentile's fraction (as written) and order (DESC), and the call without them."""
    p = call.expression
    try:
        ok = isinstance(p, exp.Literal) and not p.is_string and 0 <= float(p.name) <= 1
    except ValueError:
        ok = False
    if not ok:
        raise text.fail(f"{call.sql_name()}: the fraction is a number from 0 to 1 as written "
                        f"(0.9), not {p.sql() if p is not None else 'none'}", "SELECT", call)
    return (p.name, bool(call.args.get("desc"))), type(call)(this=call.this)

def _kind(tree: exp.Expression) -> str:
    """A statement's kind as its first words say it: SELECT, INSERT, CREATE VIEW, ..."""
    if isinstance(tree, exp.Create):
        return f"CREATE {tree.args.get('kind') or ''}".strip()
    return tree.key.upper()


class SqlText:
    """A query's text: its one statement, and each refusal placed at a line and column."""

    def __init__(self, text: str) -> None:
        self.text = text

    def statement(self) -> exp.Expression:
        """The text's one statement, parsed in the `FedqSql` dialect."""
        try:
            trees = [t for t in sqlglot.parse(self.text, dialect=FedqSql) if t is not None]
        except ParseError as e:
            err = (e.errors or [{}])[0]
            raise SqlError(f"cannot parse: {err.get('description') or e}", "syntax",
                           err.get("line"), err.get("col")) from None
        trees = [views.rewrite(group_windows.rewrite(t.transform(_within_group).transform(
            _python_aggregates), self,
                                                     FedqSql), self, FedqSql)
                 for t in views.fold([t for t in trees if not self._function(t)], self)]
        if not trees:
            raise SqlError("no statement", "statement")
        if len(trees) > 1:
            kinds = ", ".join(_kind(t) for t in trees)
            raise self.fail(f"one statement per query (found {len(trees)}: {kinds}); "
                            "views, tables and functions are not created by a query",
                            "statement", trees[1])
        return trees[0]

    def _function(self, tree: exp.Expression) -> bool:
        """`CREATE [TEMPORARY] FUNCTION name AS 'module.attr' [LANGUAGE PYTHON]` (Flink
        SQL's form): the Python function registered (federation.python_functions.load); True if so."""
        if not (isinstance(tree, exp.Create) and tree.args.get("kind") == "FUNCTION"):
            return False
        target = tree.expression
        langs = [p for p in tree.find_all(exp.LanguageProperty)]
        if langs and langs[0].name.upper() != "PYTHON":
            raise self.fail(f"LANGUAGE {langs[0].name}: functions are Python (LANGUAGE "
                            "PYTHON)", "CREATE FUNCTION", langs[0])
        if not (isinstance(target, exp.Literal) and target.is_string):
            raise self.fail("CREATE FUNCTION name AS 'module.attr' [LANGUAGE PYTHON]: the "
                            "function is a Python name in quotes", "CREATE FUNCTION", tree)
        try:
            load(tree.this.name, target.this)
        except (ValueError, TypeError) as e:
            raise self.fail(str(e), "CREATE FUNCTION", tree) from None
        return True

    def pos(self, node: exp.Expression | None, keyword: str | None = None
            ) -> tuple[int | None, int | None]:
        """Line and column (1-based) of `node`'s first token, or of the nearest `keyword`
        before it (the clause that holds it)."""
        at = None
        if node is not None:
            starts = [n.meta["start"] for n in node.walk()
                      if getattr(n, "_meta", None) and "start" in n.meta]
            at = min(starts) if starts else None
        if keyword:
            pat = re.compile(r"\b" + r"\s+".join(map(re.escape, keyword.split())) + r"\b",
                             re.IGNORECASE)
            hits = [m.start() for m in pat.finditer(self.text)]
            before_node = [h for h in hits if at is None or h <= at]
            if before_node:  # the clause that holds the node
                at = before_node[-1] if at is not None else before_node[0]
            elif hits:  # a clause after it (UNION after the first SELECT)
                at = hits[0]
        if at is None:
            return None, None
        before = self.text[:at]
        return before.count("\n") + 1, at - (before.rfind("\n") + 1) + 1

    def fail(self, message: str, clause: str, node: exp.Expression | None = None,
             keyword: str | None = None) -> SqlError:
        """The error to raise for `node` of `clause` (placed at the clause when the node
        has no position)."""
        line, col = self.pos(node, keyword)
        if line is None:
            line, col = self.pos(None, clause)
        return SqlError(message, clause, line, col)

    def build(self, clause: str, node: exp.Expression | None, make: Callable[[], T]) -> T:
        """Build a DSL node; its validation errors become SqlErrors at `node`."""
        try:
            return make()
        except QueryValidationError as e:
            raise self.fail(f"{e.field}: {e.message}", clause, node) from None


def has_subquery(e: exp.Expression) -> bool:
    """`e` holds a subquery (a scalar one, EXISTS, IN's)."""
    return any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select)) for n in e.walk())


def check_scalar(text: SqlText, e: exp.Expression, clause: str, aggs_ok: bool = False) -> None:
    """Refuse in `e` what not every engine evaluates alike: subqueries, unknown or other
    functions, aggregates (unless `aggs_ok`), any other construct."""
    for n in e.walk():
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)):
            raise text.fail(f"subqueries in {clause} are not supported (but IN, EXISTS, "
                            "ANY, ALL and a value `(SELECT MAX(x) FROM ...)` in WHERE, "
                            "HAVING, a join's ON and SELECT; else join instead)", clause, n,
                            "SELECT")
        if isinstance(n, exp.Filter) and not isinstance(n.this, exp.AggFunc):
            raise text.fail(f"FILTER (WHERE ...) of {n.this.sql()}: of an aggregate only",
                            clause, n)
        if isinstance(n, (exp.AggFunc, exp.Filter, exp.Where)):  # FILTER (WHERE ...)
            if not aggs_ok:
                raise text.fail(f"aggregate {n.sql()} in {clause} (aggregates belong in "
                                "SELECT or HAVING with GROUP BY)", clause, n)
            continue
        if isinstance(n, exp.Anonymous) and lookup(n.name) is not None:
            continue  # a Python function (federation.udf)
        if isinstance(n, exp.Anonymous):
            hint = (" (Flink's, from 0; SPLIT_PART(s, delimiter, n) counts from 1)"
                    if n.name.upper() == "SPLIT_INDEX" else "")
            raise text.fail(f"unknown function {n.name}(){hint}; a Python function is "
                            "declared with CREATE FUNCTION name AS 'module.attr' LANGUAGE "
                            "PYTHON", clause, n)
        if what := unsupported(n, (exp.Tuple, exp.Interval)):  # aggregates: above
            where = "continuous queries" if isinstance(n, exp.Func) else clause
            raise text.fail(f"{what} is not supported in {where}", clause, n)


def selectivity(clause: exp.Expression) -> float | None:
    """The selectivity hint in a comment of `clause` (`/* selectivity 0.1 */`), if any."""
    for n in clause.walk():
        for c in n.comments or []:
            m = _SELECTIVITY.search(c)
            if m:
                return float(m.group(1))
    return None
