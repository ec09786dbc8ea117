"""Python scalar functions (federation.udf) on a DuckDB connection: Arrow functions that
get NULLs as they are (the function decides, as in Spark), no side effects."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from federation.conventions import DUCKDB_TYPES


def register_functions(con: duckdb.DuckDBPyConnection, functions: Sequence) -> None:
    """Register each function (`name`, `returns` as a plan type, `apply(*arrays)`); its
    arguments take the types of the call (DuckDB's ANY), its result is `returns`."""
    for f in functions:
        try:  # registered before on this connection (DuckDB lists it as internal)
            con.remove_function(f.name)
        except duckdb.InvalidInputException:
            pass
        con.create_function(f.name, _varargs(f.apply), None, DUCKDB_TYPES[f.returns], type="arrow",
                            null_handling="special", side_effects=False)


def _varargs(apply):
    """`apply` as DuckDB binds it: any arguments of any type (its signature says nothing)."""
    def call(*arrays):
        return apply(*arrays)

    return call
