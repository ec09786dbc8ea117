"""The Python functions (federation.udf) the fuzzer's queries call, and the expressions it
draws with them (`options`): each over Arrow arrays with NULLs in and out, one per result
type the plans use, so a call can sit in a selection, a projection, a group key or an
aggregate's argument, and cross the engine boundary with its argument types. And two
Python aggregates (federation.udaf) whose results depend on the order of the values they
get: an engine that handed them in another order would give another result."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from federation.python_aggregates import udaf
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


@udaf(returns="DOUBLE")
def fz_ranked(v):
    """Each value times its rank (from 1) in the order given, added left to right."""
    total = 0.0
    for i, x in enumerate(v.to_pylist(), 1):
        total += i * x
    return total


@udaf(returns="VARCHAR")
def fz_dotted(*cols):
    """Each row's values joined by ':', the rows by '.', in the order given."""
    return ".".join(":".join(str(x) for x in row) for row in zip(*(c.to_pylist()
                                                                    for c in cols)))


@udaf(returns="BIGINT")
def fz_ranked_int(v):
    """fz_ranked of integers, an integer."""
    return sum(i * x for i, x in enumerate(v.to_pylist(), 1))


def fz_ranked_distinct(arg, *, where=None):
    """fz_ranked of the distinct values."""
    return fz_ranked(arg, distinct=True, where=where)


def fz_ranked_int_distinct(arg, *, where=None):
    """fz_ranked_int of the distinct values."""
    return fz_ranked_int(arg, distinct=True, where=where)
