"""The Nexmark project's user function, as a Python function of the queries: q14 declares
it with `CREATE FUNCTION count_char AS 'federation.nexmark.udfs.count_char' LANGUAGE PYTHON`
(Flink's names the Java class com.github.nexmark.flink.udf.CountChar)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from federation.python_functions import udf


@udf(returns="BIGINT")
def count_char(s: pa.Array, character: pa.Array) -> pa.Array:
    """How often `character`'s first character occurs in `s`, 0 for a NULL string (as
    CountChar.eval counts the chars of s equal to character.charAt(0))."""
    out = []
    for ch in pc.unique(character).to_pylist():
        mask = pc.equal(character, ch) if ch is not None else pc.is_null(character)
        part = (pc.fill_null(pc.count_substring(s, ch[:1]), 0) if ch
                else pa.nulls(len(s), pa.int64()))  # Java: charAt(0) of "" or NULL throws
        out.append((mask, part.cast(pa.int64())))
    if len(out) == 1:
        return out[0][1]
    result = pa.nulls(len(s), pa.int64())
    for mask, part in out:
        result = pc.if_else(mask, part, result)
    return result
