"""DuckDB reads a user's CSV and Parquet files against a declared schema, keeping the bad
rows apart (used by `fedq import`, federation/importer.py). Column types are DuckDB's."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def read_csv_checked(path: Path, columns: dict[str, str], header: bool, delim: str
                     ) -> tuple[pa.Table, list[tuple[int, str, str]]]:
    """The rows of a CSV file that fit `columns`, and (line, raw line, reason) of every
    other row (DuckDB's rejects table: wrong column count, a value that does not cast).
    Raises duckdb.Error when the file cannot be read at all."""
    con = duckdb.connect()
    spec = "{" + ", ".join(f"{_lit(c)}: {_lit(t)}" for c, t in columns.items()) + "}"
    t = con.sql(
        f"SELECT * FROM read_csv({_lit(str(path))}, columns = {spec}, "
        f"header = {str(header).lower()}, delim = {_lit(delim)}, store_rejects = true, "
        "auto_detect = false)").to_arrow_table()
    bad, seen = [], set()
    for line, raw, col, kind, msg in con.execute(
            "SELECT line, csv_line, column_name, error_type, error_message FROM reject_errors "
            "ORDER BY line, column_idx").fetchall():
        if line in seen:  # one reason per line: its first bad field
            continue
        seen.add(line)
        what = kind.lower().replace("_", " ") + (f" in {col}" if col else "")
        bad.append((line, raw, f"{what}: {msg.splitlines()[0][:160]}"))
    con.close()
    return t, bad


def cast_checked(table: pa.Table, columns: dict[str, str]) -> tuple[pa.Table, int]:
    """`table`'s columns cast to `columns` (DuckDB's TRY_CAST); rows where a non-null value
    does not cast are dropped and counted."""
    con = duckdb.connect()
    con.register("incoming", table)
    casts = ", ".join(f'TRY_CAST("{c}" AS {t}) AS "{c}"' for c, t in columns.items())
    bad = " OR ".join(f'("{c}" IS NOT NULL AND TRY_CAST("{c}" AS {t}) IS NULL)'
                      for c, t in columns.items())
    n_bad = con.execute(f"SELECT count(*) FROM incoming WHERE {bad}").fetchall()[0][0]
    good = con.sql(f"SELECT {casts} FROM incoming WHERE NOT ({bad})").to_arrow_table()
    con.close()
    return good, n_bad


def predicate_fractions(paths: list[Path], predicates: list[str], where: str | None = None
                        ) -> tuple[int, list[float]]:
    """The rows of these Parquet files (those `where` holds for, if given) and the fraction
    of them each predicate (DuckDB SQL over the files' columns) holds for (0 of 0 rows:
    fractions are NaN)."""
    if not paths or not predicates:
        return 0, [float("nan")] * len(predicates)
    con = duckdb.connect()
    files = "[" + ", ".join(_lit(str(p)) for p in paths) + "]"
    cols = ", ".join(f"avg(CASE WHEN ({p}) THEN 1.0 ELSE 0.0 END)" for p in predicates)
    cond = f" WHERE {where}" if where else ""
    row = con.execute(f"SELECT count(*), {cols} FROM read_parquet({files}){cond}"
                      ).fetchall()[0]
    con.close()
    return int(row[0]), [float("nan") if v is None else float(v) for v in row[1:]]
