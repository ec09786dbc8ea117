"""SQL of a DB-op, built as sqlglot trees and rendered for DuckDB.

A DB-op runs as one query per slide instant, with the instant as parameters: `$tau` (a
TIMESTAMP) and `$tau_us` (its microseconds since the epoch). Its inputs are tables
`in0, in1, ...`:

- window rows (row-level inputs) carry their event time `_ts`. A time window is read with
  plain bounds, `$tau - range <= _ts < $tau`; a tuple window as the last n rows (per
  partition) before `$tau`.
- relations (results of SPE-ops) carry the instant `_tau` they belong to, read with
  `_tau = $tau`.
- **Slices.** An aggregation over a time window (through selections and projections in the
  same DB-op) does not read window rows: the MIG folds every micro-batch's rows into a
  slice table of partial aggregates (COUNT, SUM, MIN, MAX; AVG as SUM and COUNT) per group
  and per slice of width gcd(ranges, slide), and the query combines the slices that cover
  [tau - range, tau). Aggregations with the same keys over the same rows share one slice
  table whatever their ranges (CQ3's 1- and 5-minute windows). Window rows are kept only
  where some operator reads them raw (CQ1's join of rows with their window's maximum).

Identical reads (the same table, bounds and operators) are one CTE: scanned once.
This package needs only sqlglot. Its modules, one concept each:

- `terms`: quoted names, the instant's parameters, the generator's error;
- `operators`: a window's rows and the R2R operators (select, project, join, aggregate);
- `slices`: slice tables, what they hold and how a micro-batch folds into them;
- `combine`: aggregates at an instant from the slices of their windows;
- `statement`: the DB-op's query, assembled from its members (`db_op_sql`);
- `tighten`: sqlglot's optimizer over it (pruned columns, merged CTEs, exact names).

Example:
    >>> from federation.smartplug.queries import cq5_plan
    >>> from federation.logical import NumberedPlan
    >>> plan = NumberedPlan.of(cq5_plan(scale=1/6))
    >>> prog = db_op_sql(plan, ["op1", "op2", "op3"], [("in0", "w1")])
    >>> [(s.name, s.source, s.width_us, s.keep_us) for s in prog.slices], sorted(prog.raw)
    ([('s0', 'in0', 1000000, 50000000)], [])
    >>> "$tau_us - 50000000" in prog.query.sql("duckdb")  # the 50-s window's slices
    True
"""

from db.sqlgen.operators import aggregate_expression, operator_sql, row_chain, window_rows
from db.sqlgen.slices import BATCH, SLICE, SliceTable, coarse_width
from db.sqlgen.statement import DbOpSql, db_op_sql
from db.sqlgen.terms import SqlGenerationError, tau_param, tau_us_param

__all__ = [
    "BATCH", "SLICE", "DbOpSql", "SliceTable", "SqlGenerationError", "aggregate_expression",
    "coarse_width", "db_op_sql", "operator_sql", "row_chain", "tau_param", "tau_us_param",
    "window_rows",
]
