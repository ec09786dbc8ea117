"""DuckDB side: SQL of migration candidates (sqlglot only) and, in `db.store` and
`db.executor`, everything that imports duckdb."""
