"""Python scalar functions (UDFs) in queries: `federation.udf(fn, returns="DOUBLE")`.

A UDF is a deterministic function over Arrow arrays: it takes one `pyarrow.Array` per
argument (a literal argument is an array of that value, nulls are passed as they are) and
returns an array (or anything `pyarrow.array` reads) of the same length. Both engines call
it vectorized on Arrow batches: Spark as an Arrow UDF in its Python workers, DuckDB as an
Arrow function in the process; the arguments reach it with the same Arrow types in both
(strings as `string`, times as `timestamp[us]` in UTC without a zone), so it computes the
same in every placement.

Registered by name (the function's own unless `name=` says otherwise), a UDF is called in
the DSL as `count_char("extra", lit("c"))` (strings are expressions, as everywhere in the DSL) and in SQL by its name; SQL text may register
one itself as Flink SQL does: `CREATE FUNCTION count_char AS 'module.attr' LANGUAGE PYTHON;`
before the query (`load`).

When it is first used with argument types, fedq calls it twice on a generated sample of
arguments of those types: a function whose two results differ is refused (not
deterministic), and the second call's time is its cost per row, which the optimizer adds to
the operator that calls it (`cost_us=` declares it instead; docs/sql.md, "Python
functions").

Example:
    >>> import pyarrow.compute as pc
    >>> @udf(returns="BIGINT")
    ... def twice(x):
    ...     return pc.multiply(x, 2)
    >>> twice("load").sql()
    'TWICE(load)'
    >>> lookup("twice").returns
    'BIGINT'
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from sqlglot import exp

from federation.conventions import ARROW_TYPES, TYPES
from federation.expressions import FUNCTION_TYPES, infer_type, to_expression

#: registered UDFs by lower-case name
_REGISTRY: dict[str, Udf] = {}
_SAMPLE_ROWS = 4096
#: a UDF's measured cost below this is read as this (a call's own overhead dominates)
_MIN_S_PER_ROW = 1e-8


@dataclass(eq=False)
class Registered:
    """A registered Python function of the queries: a scalar one (Udf) or an aggregate
    (python_aggregates.Udaf), one namespace: its name, function, result type (a plan type),
    declared cost per row (or measured) and the costs measured per argument types."""

    name: str
    fn: Callable
    returns: str
    cost_us: float | None = None
    _checked: dict = field(default_factory=dict, repr=False)

    def check(self, arg_types: tuple[str, ...]) -> float:
        """Seconds per row (per value of an aggregate) over arguments of `arg_types`,
        measured on a generated sample (`sample`; or `cost_us`); refuses a call with a
        number of arguments the function cannot take, and a function whose two calls on
        the sample differ. Once per argument types."""
        if arg_types in self._checked:
            return self._checked[arg_types]
        _refuse_other_arity(self, len(arg_types))
        args, rows = self.sample(arg_types)
        try:
            first = self.apply(*args)
            t0 = time.perf_counter()
            second = self.apply(*args)
            took = time.perf_counter() - t0
        except ValueError as e:
            if "returned" in str(e):
                raise
            took, first, second = None, None, None  # it refuses generated values: no sample
        if first is not None and not first.equals(second):
            raise ValueError(f"Python function {self.name}() is not deterministic: two calls "
                             "on the same arguments returned different values (a continuous "
                             "query recomputes and migrates; its functions must be "
                             "deterministic)")
        if self.cost_us is not None:
            s = self.cost_us * 1e-6
        elif took is None:
            s = 1e-6  # no sample it accepts: one microsecond a row
        else:
            s = max(took / max(rows, 1), _MIN_S_PER_ROW)
        self._checked[arg_types] = s
        return s


@dataclass(eq=False)
class Udf(Registered):
    """A registered Python scalar function; calling it builds the call expression."""

    def __call__(self, *args: object) -> exp.Anonymous:
        return exp.Anonymous(this=self.name, expressions=[to_expression(a) for a in args])

    def apply(self, *arrays: pa.Array | pa.ChunkedArray, zone: str | None = None) -> pa.Array:
        """The function over one batch: arguments as the plan's Arrow types, the result
        checked and converted to `returns` (with time zone `zone`: Spark's timestamps)."""
        args = [plain_array(a) for a in arrays]
        n = len(args[0]) if args else 0
        try:
            out = self.fn(*args)
        except Exception as e:
            raise ValueError(f"Python function {self.name}() raised {type(e).__name__}: "
                             f"{e} (on a batch of {n} rows)") from e
        return result_array(self, out, n, zone)

    def sample(self, arg_types: tuple[str, ...]) -> tuple[list[pa.Array], int]:
        """Generated arguments of `arg_types` for `check`, and their rows."""
        return [sample_of(t, i) for i, t in enumerate(arg_types)], _SAMPLE_ROWS

def result_array(u, out, n: int, zone: str | None) -> pa.Array:
    """`out` (a function's result over `n` rows or groups) as an array of `u.returns`
    (timestamps with time zone `zone`: Spark's), refused where it is not."""
    want = pa.type_for_alias(ARROW_TYPES[u.returns]) if u.returns != "TIMESTAMP" \
        else pa.timestamp("us")
    try:
        out = plain_array(out) if isinstance(out, (pa.Array, pa.ChunkedArray)) \
            else pa.array(out, type=want)
        if out.type != want:
            out = out.cast(want)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise ValueError(f"Python function {u.name}() returned values that are not "
                         f"{u.returns}: {e}") from e
    if len(out) != n:
        raise ValueError(f"Python function {u.name}() returned {len(out)} values "
                         f"for {n} rows (one value per row)")
    if zone is not None and u.returns == "TIMESTAMP":
        out = out.cast(pa.timestamp("us", tz=zone))
    return out


def _refuse_other_arity(u, n: int) -> None:
    """Refuse a call of `u` with `n` arguments that its signature cannot take."""
    try:
        sig = inspect.signature(u.fn)
    except (TypeError, ValueError):  # no signature to read (a builtin): the call tells
        return
    try:
        sig.bind(*range(n))
    except TypeError as e:
        raise ValueError(f"Python function {u.name}() called with {n} argument"
                         f"{'s' * (n != 1)}: {e}") from None


def udf(fn: Callable | None = None, *, returns: str, name: str | None = None,
        cost_us: float | None = None):
    """Register `fn` as a Python scalar function of the queries (see the module); as a
    decorator too: `@federation.udf(returns="BIGINT")`. `returns`: one of the plan's types;
    `cost_us`: its cost per row in microseconds (default: measured)."""
    def make(f: Callable) -> Udf:
        return register(f, returns, name, cost_us, Udf)

    return make if fn is None else make(fn)


def register(f: Callable, returns: str, name: str | None, cost_us: float | None, cls):
    """`f` registered as a `cls` (Udf, or python_aggregates.Udaf) by its name."""
    what = "udf" if cls is Udf else "udaf"
    kind = returns.upper() if isinstance(returns, str) else returns
    if kind not in TYPES:
        raise ValueError(f"{what} returns={returns!r}: one of {', '.join(TYPES)}")
    if cost_us is not None and not cost_us >= 0:
        raise ValueError(f"{what} cost_us={cost_us!r}: a cost per row in microseconds, >= 0")
    if not callable(f):
        raise TypeError(f"{what}: expected a function, got {f!r}")
    n = name or getattr(f, "__name__", "")
    if not n.isidentifier() or n.startswith("_"):
        raise ValueError(f"{what} name {n!r}: a name SQL can call (letters, digits, _), "
                         "given by name=... for a lambda")
    if _is_builtin(n):
        raise ValueError(f"{what} name {n!r} is a built-in SQL function's: choose another")
    u = cls(n.lower(), f, kind, cost_us)
    _REGISTRY[u.name] = u
    FUNCTION_TYPES[u.name] = u.returns
    return u


def lookup(name: str) -> Registered | None:
    """The registered Python function (Udf) or aggregate (Udaf) called `name` (any case),
    or None."""
    return _REGISTRY.get(name.lower())


def load(name: str, target: str) -> Udf:
    """`CREATE FUNCTION name AS 'module.attr'`: import `attr` from `module` and register it
    as `name` (a `udf` object keeps its return type and cost; a plain function cannot say
    its type and is refused)."""
    mod, _, attr = target.rpartition(".")
    if not mod:
        raise ValueError(f"function {name}: AS '{target}' names a module and its attribute, "
                         "e.g. 'mypackage.functions.count_char'")
    if "" not in sys.path and os.getcwd() not in sys.path:  # `fedq` beside the user's module
        sys.path.append(os.getcwd())
    try:
        obj = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"function {name}: cannot import '{target}': {e}") from None
    if not isinstance(obj, Registered):
        raise TypeError(f"function {name}: '{target}' is not declared with federation.udf("
                         "fn, returns=...) or federation.udaf (its return type is needed)")
    if obj.name != name.lower():
        obj = register(obj.fn, obj.returns, name, obj.cost_us, type(obj))
    return obj


def calls(e: exp.Expression) -> list[exp.Anonymous]:
    """The UDF calls in an expression."""
    return [n for n in e.find_all(exp.Anonymous) if lookup(n.name) is not None]


def _is_builtin(name: str) -> bool:
    from sqlglot import parse_one

    try:
        e = parse_one(f"SELECT {name}(1)", dialect="duckdb").expressions[0]
    except Exception:  # noqa: BLE001 - a name sqlglot reads otherwise is not ours either
        return True
    return not isinstance(e, exp.Anonymous)


def plain_array(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array with the plan's types: strings as `string`, timestamps as
    `timestamp[us]` in UTC without a zone (Spark hands them zoned, DuckDB not)."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    if pa.types.is_large_string(a.type) or pa.types.is_string_view(a.type):
        a = a.cast(pa.string())
    elif pa.types.is_timestamp(a.type) and (a.type.tz is not None or a.type.unit != "us"):
        if a.type.tz is not None:
            a = a.cast(pa.timestamp(a.type.unit, tz="UTC"))
        a = a.cast(pa.timestamp("us"))
    elif pa.types.is_integer(a.type) and a.type not in (pa.int32(), pa.int64()):
        a = a.cast(pa.int64())
    return a


def sample_of(kind: str, seed: int) -> pa.Array:
    """Generated arguments of one plan type (some nulls), the same at every call."""
    rng = np.random.default_rng(1234 + seed)
    n = _SAMPLE_ROWS
    nulls = rng.random(n) < 0.05
    if kind in ("INT", "BIGINT"):
        vals = rng.integers(-1000, 1000, n)
        return pa.array(vals, type=pa.type_for_alias(ARROW_TYPES[kind]), mask=nulls)
    if kind == "DOUBLE":
        return pa.array(rng.normal(0, 100, n), mask=nulls)
    if kind == "BOOLEAN":
        return pa.array(rng.random(n) < 0.5, mask=nulls)
    if kind == "TIMESTAMP":
        us = 1_780_000_000_000_000 + rng.integers(0, 86_400_000_000, n)
        return pa.array(us, type=pa.int64(), mask=nulls).cast(pa.timestamp("us"))
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 "))
    words = ["".join(letters[rng.integers(0, len(letters), rng.integers(0, 24))])
             for _ in range(n)]
    return pa.array(words, mask=nulls)


@dataclass(frozen=True)
class Function:
    """A UDF as the engines register it (they import no plan code): its name, its return
    type (a plan type), and `apply(*arrays, zone=None)`."""

    name: str
    returns: str
    apply: Callable


def plan_functions(root: object) -> list[Function]:
    """The UDFs a plan (any node: a query, a query set) calls, once each by name."""
    return _by_name(c for node in root.walk()  # type: ignore[attr-defined]
                    for value in vars(node).values() for e in _expressions(value)
                    for c in calls(e))


def sql_functions(*sql: exp.Expression | str | None) -> list[Function]:
    """The UDFs generated SQL statements (a DB-op's, its slice folds, a move's SELECTs:
    DuckDB's text) call, once each."""
    from sqlglot import parse_one

    trees = [parse_one(e, dialect="duckdb") if isinstance(e, str) else e
             for e in sql if e is not None]
    return _by_name(c for e in trees for c in calls(e))


def _by_name(found) -> list[Function]:
    """The functions of these calls, once each, in the order of their names."""
    us = {u.name: u for u in (lookup(c.name) for c in found)}
    return [Function(u.name, u.returns, u.apply) for _, u in sorted(us.items())]


def own_calls(values: list, schema: dict[str, str]) -> tuple[int, float]:
    """The UDF calls in `values` (a node's fields) and their seconds per row over a
    relation of `schema` (`Udf.check`)."""
    n, s = 0, 0.0
    for e in _expressions(values):
        for c in calls(e):
            n += 1
            s += lookup(c.name).check(tuple(infer_type(a, schema) for a in c.expressions))
    return n, s


def _expressions(value: object):
    if isinstance(value, exp.Expression):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _expressions(v)
    elif hasattr(value, "arg") and isinstance(value.arg, exp.Expression):
        yield value.arg  # an aggregate's argument (AggCall)
        if getattr(value, "function", ""):  # a Python aggregate's own call
            yield aggregate_call(value)


def aggregate_arguments(call) -> list[exp.Expression]:
    """A Python aggregate's (AggCall's) arguments: the fields of its struct of several."""
    s = call.arg.find(exp.Struct) if call.arg is not None else None
    if s is None:
        return [call.arg] if call.arg is not None else []
    return [f.expression for f in s.expressions]


def aggregate_call(call) -> exp.Anonymous:
    """The call `name(args...)` a plan's Python aggregate (AggCall) stands for: how the
    registry finds the functions a plan needs (plan_functions) and their cost."""
    return exp.Anonymous(this=call.function, expressions=[a.copy() for a in
                                                          aggregate_arguments(call)])
