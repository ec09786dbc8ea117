"""The Python functions (federation.udf) the fuzzer's queries call, and the expressions it
draws with them (`options`): each over Arrow arrays with NULLs in and out, one per result
type the plans use, so a call can sit in a selection, a projection, a group key or an
aggregate's argument, and cross the engine boundary with its argument types."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from federation.python_functions import udf


@udf(returns="DOUBLE")
def fz_affine(x):
    """3 x - 1 (NULL stays NULL)."""
    return pc.subtract(pc.multiply(pc.cast(x, pa.float64()), 3.0), 1.0)


@udf(returns="BIGINT")
def fz_bucket(k):
    """|k| mod 3, and -1 for NULL (the function sees the NULLs)."""
    return pc.fill_null(_mod3(pc.cast(k, pa.int64())), -1)


def _mod3(k: pa.Array) -> pa.Array:
    a = pc.abs(k)
    return pc.subtract(a, pc.multiply(pc.divide(a, 3), 3))  # integer division of int64


@udf(returns="VARCHAR")
def fz_text(k):
    """The integer as text ('-3'), NULL as NULL: a numeric text a cast reads back."""
    return pc.cast(pc.cast(k, pa.int64()), pa.string())


@udf(returns="BOOLEAN")
def fz_flag(v):
    """v > 30 (NULL stays NULL)."""
    return pc.greater(pc.cast(v, pa.float64()), 30.0)


def options(K: str | None, V: str | None, numeric: bool = False) -> list[tuple[str, str]]:
    """Calls over the column references K (an integer) and V (a DOUBLE): (expression, the
    generator's hint of its result); `numeric`: only numeric results."""
    out = []
    if V:
        out += [(f"fz_affine({V})", "value"), (f"fz_affine({V}) * 0.5", "value")]
        if not numeric:
            out.append((f"fz_flag({V})", "bool"))
    if K:
        out.append((f"fz_bucket({K})", "code"))
        if not numeric:
            out.append((f"fz_text({K})", "vnum"))
    if K and V:
        out.append((f"fz_affine({V} + {K})", "value"))
    return out
