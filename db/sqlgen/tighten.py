"""Tightening a DB-op's SQL: sqlglot's optimizer over the generated trees.

The generator writes each operator as its own CTE over whole rows; tightening reduces every
CTE and subquery to the columns read above it (the MIG keeps and scans only those: the
columns a table's rows are read for, `read_columns`), merges the operators' CTEs and pushes
predicates down where SQL allows (DuckDB then filters a scan by a selection above a join),
and restores the plan's exact output names, which qualifying lower-cased.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from db.sqlgen.terms import SqlGenerationError, alias


def pushdown(query: exp.Select, schema: dict, merge: bool = False) -> exp.Select:
    """The query with every CTE and subquery reduced to the columns read above it
    (sqlglot's qualify + pushdown_projections): the MIG keeps and scans only those.
    `merge`: also merge the operators' CTEs into one another where SQL allows and push
    predicates down (sqlglot's merge_subqueries + pushdown_predicates): DuckDB then sees a
    selection over a join as a join condition and filters the scan by it (CQ1's query
    took 14 instead of 22 ms per slide at 10,000 tuples/s)."""
    from sqlglot.optimizer.eliminate_ctes import eliminate_ctes
    from sqlglot.optimizer.merge_subqueries import merge_subqueries
    from sqlglot.optimizer.pushdown_predicates import pushdown_predicates
    from sqlglot.optimizer.pushdown_projections import pushdown_projections
    from sqlglot.optimizer.qualify import qualify

    q = pushdown_projections(qualify(query, schema=schema, dialect="duckdb",
                                     quote_identifiers=True))
    if merge:
        q = eliminate_ctes(pushdown_predicates(merge_subqueries(q)))
    return q


def exact_names(query: exp.Select, names: Sequence[str]) -> exp.Select:
    """The query's output columns named exactly `names`: sqlglot's qualify lower-cases
    every identifier for DuckDB (which compares names without case), but the result's
    names are the plan's (`maxLoad`)."""
    if len(query.expressions) != len(names):
        raise SqlGenerationError(f"the DB-op's SQL has {len(query.expressions)} columns, "
                                 f"the plan {len(names)}")
    for e, n in zip(query.expressions, names):
        e.replace(alias(e.unalias(), n))
    return query


def read_columns(query: exp.Expression, table: str) -> set[str]:
    """The columns of `table` that a qualified query reads, in lower case (qualify
    lower-cases names: DuckDB compares them without case)."""
    out: set[str] = set()
    for tbl in query.find_all(exp.Table):
        if tbl.name == table:
            out |= {c.name.lower() for c in tbl.parent_select.find_all(exp.Column)
                    if c.table == tbl.alias_or_name}
    return out
