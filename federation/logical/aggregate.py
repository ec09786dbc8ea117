"""Group-by aggregation per slide instant (a logical plan node)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from federation.conventions import NATIVE_AGGREGATES, NUMERIC_TYPES
from federation.errors import QueryValidationError
from federation.expressions import (
    AGG_FUNCS,
    LIST_FUNCS,
    MERGEABLE_FUNCS,
    PYTHON_AGG_FUNCS,
    AggCall,
    agg_result_type,
    infer_type,
)
from federation.logical.nodes import (
    Node,
    Unary,
    _canonical,
    _check_child,
    _check_names,
)
from federation.logical.sessions import check_session_aggregate, per_session
from federation.python_aggregates import check_python_aggregate


@dataclass(frozen=True, eq=True)
class Aggregate(Unary):
    """Group-by aggregation at each slide instant (eq. 3: out = l * g)."""

    child: Node
    keys: tuple[str, ...]
    aggs: tuple[tuple[str, AggCall], ...]
    kind = "aggregate"
    role = "operator"

    def __post_init__(self) -> None:
        _check_child("aggregate", self.child)
        if not any(n.kind == "window" for n in self.child.walk()):
            raise QueryValidationError(
                "aggregate", "input", "reads only database tables: a query aggregates "
                "window rows; aggregate the table in the database (a view) and read that")
        s = self.child.schema
        for k in self.keys:
            if k not in s:
                raise QueryValidationError(
                    "aggregate", "by", f"unknown column {k!r} (available: {', '.join(s)})"
                )
        check_session_aggregate(self)
        if not self.aggs:
            raise QueryValidationError("aggregate", "aggs", "needs at least one aggregate")
        names = set(self.keys)
        aggs = []
        for name, call in self.aggs:
            if not isinstance(call, AggCall):
                raise QueryValidationError(
                    "aggregate", name, f"expected count/sum/avg/min/max(...), got {call!r}"
                )
            if call.func not in AGG_FUNCS and not (  # a session's own STDDEV, MEDIAN, ...
                    call.func in NATIVE_AGGREGATES and per_session(self)):
                raise QueryValidationError("aggregate", name, f"unknown function {call.func!r}")
            if name in names:
                raise QueryValidationError("aggregate", name, "output column named twice")
            names.add(name)
            if call.arg is not None:
                call = dataclasses.replace(call, arg=_canonical("aggregate", name, call.arg, s))
                t = infer_type(call.arg, s)
                if call.func in LIST_FUNCS and t != "VARCHAR":
                    raise QueryValidationError(
                        "aggregate", name, f"LISTAGG joins strings, not {t} "
                        f"{call.arg.sql(dialect='duckdb')!r}: CAST(... AS VARCHAR)")
                ordered = call.func in ("min", "max", *LIST_FUNCS) and t in (
                    "VARCHAR", "TIMESTAMP")
                if call.func in PYTHON_AGG_FUNCS:  # of values of any type
                    check_python_aggregate(name, call, s)
                elif call.func not in ("count", "count_distinct") and t not in NUMERIC_TYPES \
                        and not ordered:  # MIN/MAX of strings (bytes' order) and of times
                    raise QueryValidationError(
                        "aggregate", name,
                        f"{call.func.upper()} over non-numeric "
                        f"{call.arg.sql(dialect='spark')!r} ({t})",
                    )
            elif call.func != "count":
                raise QueryValidationError("aggregate", name, f"{call.func.upper()} needs an "
                                           "argument (only COUNT counts rows: COUNT(*))")
            aggs.append((name, call))
        _check_names("aggregate", [*self.keys, *(n for n, _ in self.aggs)])
        object.__setattr__(self, "aggs", tuple(aggs))

    @property
    def mergeable(self) -> bool:
        """Every aggregate's partials over parts of a window merge into the window's (not
        COUNT(DISTINCT)): DuckDB's slices and Spark's panes need it."""
        return all(c.func in MERGEABLE_FUNCS for _, c in self.aggs)

    @cached_property
    def schema(self) -> dict[str, str]:
        s = self.child.schema
        out = {k: s[k] for k in self.keys}
        for name, call in self.aggs:
            out[name] = agg_result_type(call, None if call.arg is None else infer_type(call.arg, s))
        return out

    def label(self) -> str:
        aggs = ", ".join(f"{c.sql()} AS {n}" for n, c in self.aggs)
        by = f" by {', '.join(self.keys)}" if self.keys else ""
        return f"aggregate{by}: {aggs}"
