"""DuckDB side: SQL of DB-ops (sqlglot only) and, in `db.store` and
`db.executor`, everything that imports duckdb."""
