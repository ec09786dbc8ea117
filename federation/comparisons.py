"""Comparisons of values of one type: Spark refuses `DOUBLE > BOOLEAN` where DuckDB casts, so
every engine sees a comparison only of one type, of numbers, or of a TIMESTAMP with a string
literal (federation.canonical checks each)."""

from __future__ import annotations

from sqlglot import exp

from federation.conventions import NUMERIC_TYPES

COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def comparable(node: exp.Expression, t) -> None:
    """A comparison (COMPARISONS), BETWEEN or IN list of one type, numbers, or a TIMESTAMP
    and a string literal; else a ValueError (Spark refuses DOUBLE > BOOLEAN, DuckDB casts)."""
    a, others = node.this, []
    if isinstance(node, COMPARISONS):
        others = [node.right]
    elif isinstance(node, exp.Between):
        others = [node.args["low"], node.args["high"]]
    elif isinstance(node, exp.In) and node.args.get("query") is None:
        others = node.expressions
    for b in (x for x in others if not isinstance(a, exp.Null) and not isinstance(x, exp.Null)):
        ta, tb = t(a), t(b)
        if not (ta == tb or ta in NUMERIC_TYPES and tb in NUMERIC_TYPES or {ta, tb} == {
                "TIMESTAMP", "VARCHAR"} and (a if ta == "VARCHAR" else b).is_string):
            raise ValueError(f"{node.sql('duckdb')!r} compares {ta} {a.sql('duckdb')} "
                             f"with {tb} {b.sql('duckdb')}: CAST one side")
