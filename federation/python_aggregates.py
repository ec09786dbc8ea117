"""Python aggregate functions (UDAFs) in queries: `federation.udaf(fn, returns="DOUBLE")`.

A Python aggregate is a deterministic function of a group's values: it takes one
`pyarrow.Array` per argument, the values of the group's rows in which no argument is NULL,
and returns one value (a Python value, a `pyarrow.Scalar` or None for NULL). The rows reach
it sorted ascending by its arguments, in the order written (strings by their UTF-8 bytes),
so a function that depends on the order of its values gets the same order in every engine,
whatever order the rows arrived in. A group without such a row gets NULL; the function is
not called for it (SQL's rule for every aggregate but COUNT). `name(DISTINCT x)` gets each
distinct value once; `name(x) FILTER (WHERE c)` the rows where `c` holds.

It is a holistic aggregate, like LISTAGG: both engines collect each group's values and call
the function on them once per group and instant, vectorized over a batch of groups: Spark
as an Arrow UDF over `array_sort(collect_list(...))` after its aggregation, DuckDB as an
Arrow function over `list_sort(list(...))`. Its state is every value of the window (a
sliding window's values are not merged from slices or panes), and its cost per value is
measured as a scalar function's is (`federation.python_functions`): two calls on a
generated sample, refused where they differ.

Registered by name like a scalar function (the two share one namespace), it is called in
the DSL as `spread("value")` inside `aggregate(...)` (`where=` for FILTER) and in SQL by its
name wherever an aggregate may stand; `CREATE FUNCTION name AS 'module.attr' LANGUAGE
PYTHON` loads one.

Example:
    >>> @udaf(returns="DOUBLE")
    ... def spread(v):
    ...     return v[-1].as_py() - v[0].as_py()  # sorted: the greatest less the least
    >>> spread("value").sql()
    'SPREAD(value)'
    >>> import pyarrow as pa
    >>> spread.apply(pa.array([[1.0, 3.0, 5.0], [], None], pa.list_(pa.float64()))).to_pylist()
    [4.0, None, None]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from federation.errors import QueryValidationError
from federation.expressions import (
    AggCall,
    agg_call,
    distinct_tuple,
    infer_type,
    to_expression,
)
from federation.python_functions import (
    Registered,
    aggregate_arguments,
    lookup,
    plain_array,
    register,
    result_array,
    sample_of,
)

_GROUP = 16  # values per group of the generated sample


@dataclass(eq=False)
class Udaf(Registered):
    """A registered Python aggregate; calling it builds the aggregate call (AggCall)."""

    @property
    def __name__(self) -> str:  # as a function's: the DSL source of a call names it
        return self.name

    def __call__(self, arg: str | exp.Expression, *more: str | exp.Expression,
                 distinct: bool = False, where=None) -> AggCall:
        """`name(arg, ...)`: of several arguments, the rows where none is NULL (a struct of
        them, as COUNT(DISTINCT a, b)); `distinct`: each distinct value once; `where`:
        FILTER (WHERE ...)."""
        a = distinct_tuple([to_expression(x) for x in (arg, *more)]) if more else arg
        call = agg_call("python_distinct" if distinct else "python", a, where)
        return AggCall(call.func, call.arg, function=self.name)

    def apply(self, lists: pa.Array | pa.ChunkedArray, zone: str | None = None) -> pa.Array:
        """The function over a batch of groups: `lists` holds each group's values (a list
        of values, or of structs of the arguments: fields in argument order), already
        sorted and without NULLs; one result per group, of `returns` (timestamps with time
        zone `zone`: Spark's)."""
        if isinstance(lists, pa.ChunkedArray):
            lists = lists.combine_chunks() if lists.num_chunks != 1 else lists.chunk(0)
        out: list = []
        for i in range(len(lists)):
            one = lists[i]
            if not one.is_valid or len(one.values) == 0:
                out.append(None)
                continue
            values = one.values
            args = [values.field(j) for j in range(values.type.num_fields)] \
                if pa.types.is_struct(values.type) else [values]
            try:
                v = self.fn(*[plain_array(a) for a in args])
            except Exception as e:
                raise ValueError(f"Python aggregate {self.name}() raised {type(e).__name__}: "
                                 f"{e} (on a group of {len(values)} rows)") from e
            out.append(v.as_py() if isinstance(v, pa.Scalar) else v.item()
                       if hasattr(v, "item") and not isinstance(v, (list, tuple)) else v)
        return result_array(self, out, len(lists), zone)

    def sample(self, arg_types: tuple[str, ...]) -> tuple[list[pa.Array], int]:
        """Generated groups of `_GROUP` rows of `arg_types` (the rows without a NULL) for
        `check`, and their values."""
        cols = [sample_of(t, i) for i, t in enumerate(arg_types)]
        keep = functools.reduce(pc.and_, [c.is_valid() for c in cols])
        cols = [c.filter(keep) for c in cols]
        values = cols[0] if len(cols) == 1 else pa.StructArray.from_arrays(
            cols, [f"f{i}" for i in range(1, len(cols) + 1)])
        offsets = pa.array(list(range(0, len(values), _GROUP)) + [len(values)], pa.int32())
        return [pa.ListArray.from_arrays(offsets, values)], len(values)

def udaf(fn: Callable | None = None, *, returns: str, name: str | None = None,
         cost_us: float | None = None):
    """Register `fn` as a Python aggregate of the queries (see the module); as a decorator
    too: `@federation.udaf(returns="DOUBLE")`. `returns`: one of the plan's types;
    `cost_us`: its cost per value in microseconds (default: measured)."""
    def make(f: Callable) -> Udaf:
        return register(f, returns, name, cost_us, Udaf)

    return make if fn is None else make(fn)


def check_python_aggregate(name: str, call: AggCall, schema: dict[str, str]) -> None:
    """A plan's Python aggregate `call` (output `name`): registered as one, deterministic on
    a sample of its argument types (`Udaf.check`)."""
    u = lookup(call.function)
    if not isinstance(u, Udaf):
        what = "a scalar Python function (federation.udf)" if u is not None else "unknown"
        raise QueryValidationError("aggregate", name, f"{call.function}() is {what}, not a "
                                   "Python aggregate (federation.udaf)")
    try:
        u.check(tuple(infer_type(a, schema) for a in aggregate_arguments(call)))
    except ValueError as e:
        raise QueryValidationError("aggregate", name, str(e)) from None
