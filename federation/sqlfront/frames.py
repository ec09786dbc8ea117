"""An OVER clause's parts as the plan takes them: its PARTITION BY and ORDER BY columns
(the instant's window_start and window_end left out: each instant is its own partition),
and its frame (`ROWS | RANGE | GROUPS BETWEEN ... AND ...`) as federation/logical/frames.py's
`Frame`."""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from federation.errors import QueryValidationError
from federation.logical.frames import Frame
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.ranking import descending
from federation.sqlfront.scopes import Scope


def window_order(text: SqlText, scope: Scope, w: exp.Window, call: str
                 ) -> tuple[list[tuple[str, bool]], list[str]]:
    """(ORDER BY keys as (column, descending), PARTITION BY columns) of `w`, each a column
    of the scope (an expression is refused: compute it in a subquery)."""
    part = [scope.resolve(p, "OVER") for p in w.args.get("partition_by") or []
            if not scope.is_instant(p)]
    order = [(scope.resolve(o.this, "OVER"), o) for o in
             (w.args.get("order") or exp.Order(expressions=[])).expressions
             if not scope.is_instant(o.this)]
    for c in [*part, *(c for c, _ in order)]:
        if not isinstance(c, exp.Column):
            raise text.fail(f"{call} OVER (...) by {c.sql()}: partition and order by "
                            "columns (compute the expression in a subquery)", "OVER", w,
                            "OVER")
    keys = [(c.name, descending(text, o)) for c, o in order]
    return keys, list(dict.fromkeys(c.name for c in part))


def frame_of(text: SqlText, w: exp.Window) -> Frame | None:
    """The frame `w` names (None without one: SQL's default)."""
    spec = w.args.get("spec")
    if spec is None:
        return None
    exclude = spec.args.get("exclude")
    exclude = "no others" if exclude is None else " ".join(exclude.name.lower().split())
    kind = str(spec.args.get("kind") or "").lower()
    lo = _bound(text, spec, spec.args.get("start"), spec.args.get("start_side"), "start")
    end = spec.args.get("end")
    hi = 0 if end is None else _bound(text, spec, end, spec.args.get("end_side"), "end")
    try:
        return Frame(kind, lo, hi, exclude)
    except QueryValidationError as e:
        raise text.fail(f"{spec.sql()}: {e.message}", "OVER", spec, kind.upper()) from None


def _bound(text: SqlText, spec: exp.Expression, b, side, which: str):
    """A frame bound as Frame takes it: None, 0, -n (n PRECEDING) or n; n a whole number,
    of a RANGE also a number or a time span (INTERVAL '10' SECOND: a timedelta)."""
    side = str(side or "").upper()
    if isinstance(b, str) and b.upper() == "UNBOUNDED":
        if side != ("PRECEDING" if which == "start" else "FOLLOWING"):
            raise text.fail(f"a frame's {which} UNBOUNDED {side}: it starts UNBOUNDED "
                            "PRECEDING and ends UNBOUNDED FOLLOWING", "OVER", spec, "UNBOUNDED")
        return None
    if isinstance(b, str) and b.upper() == "CURRENT ROW":
        return 0
    n = None
    if isinstance(b, exp.Literal) and not b.is_string:
        try:
            v = float(str(b.this))
            n = int(v) if str(b.this).isdigit() else v
        except ValueError:
            n = None
    elif isinstance(b, exp.Interval):
        n = _span(b)
    if n is not None and side in ("PRECEDING", "FOLLOWING"):
        return -n if side == "PRECEDING" else n
    shown = b.sql() if isinstance(b, exp.Expression) else str(b)
    raise text.fail(f"frame bound {shown} {side}: UNBOUNDED, CURRENT ROW, or n PRECEDING or "
                    "FOLLOWING (n a whole number; of a RANGE a number or an INTERVAL such as "
                    "INTERVAL '10' SECOND)", "OVER", spec, "OVER")


#: an INTERVAL's units in seconds (singular; a plural's trailing S is dropped)
_UNITS = {"MICROSECOND": 1e-6, "MILLISECOND": 1e-3, "SECOND": 1, "MINUTE": 60, "HOUR": 3600,
          "DAY": 86400}


def _span(iv: exp.Interval) -> dt.timedelta | None:
    """`INTERVAL '10' SECOND` (or `INTERVAL 10 SECONDS`, `INTERVAL '10 seconds'`) as a
    timedelta; None when it is none of those."""
    amount = iv.this.this if isinstance(iv.this, exp.Literal) else None
    unit = iv.args.get("unit")
    words = str(amount or "").split()
    if unit is None and len(words) == 2:
        amount, unit_name = words
    else:
        unit_name = unit.name if unit is not None else ""
    unit_name = unit_name.upper().removesuffix("S")
    try:
        value = float(amount)
    except (TypeError, ValueError):
        return None
    if unit_name not in _UNITS or value < 0:
        return None
    return dt.timedelta(seconds=value * _UNITS[unit_name])
