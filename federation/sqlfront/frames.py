"""An OVER clause's parts as the plan takes them: its PARTITION BY and ORDER BY columns
(the instant's window_start and window_end left out: each instant is its own partition),
and its frame (`ROWS | RANGE | GROUPS BETWEEN ... AND ...`) as federation/logical/frames.py's
`Frame`."""

from __future__ import annotations

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
    if spec.args.get("exclude") is not None:
        raise text.fail(f"EXCLUDE {spec.args['exclude'].sql()}: frames exclude no row here",
                        "OVER", spec, "EXCLUDE")
    kind = str(spec.args.get("kind") or "").lower()
    lo = _bound(text, spec, spec.args.get("start"), spec.args.get("start_side"), "start")
    end = spec.args.get("end")
    hi = 0 if end is None else _bound(text, spec, end, spec.args.get("end_side"), "end")
    try:
        return Frame(kind, lo, hi)
    except QueryValidationError as e:
        raise text.fail(f"{spec.sql()}: {e.message}", "OVER", spec, kind.upper()) from None


def _bound(text: SqlText, spec: exp.Expression, b, side, which: str) -> int | None:
    side = str(side or "").upper()
    if isinstance(b, str) and b.upper() == "UNBOUNDED":
        if side != ("PRECEDING" if which == "start" else "FOLLOWING"):
            raise text.fail(f"a frame's {which} UNBOUNDED {side}: it starts UNBOUNDED "
                            "PRECEDING and ends UNBOUNDED FOLLOWING", "OVER", spec, "UNBOUNDED")
        return None
    if isinstance(b, str) and b.upper() == "CURRENT ROW":
        return 0
    if isinstance(b, exp.Literal) and not b.is_string and str(b.this).isdigit() \
            and side in ("PRECEDING", "FOLLOWING"):
        return -int(b.this) if side == "PRECEDING" else int(b.this)
    shown = b.sql() if isinstance(b, exp.Expression) else str(b)
    raise text.fail(f"frame bound {shown} {side}: UNBOUNDED, CURRENT ROW, or a whole number "
                    "PRECEDING or FOLLOWING", "OVER", spec, "OVER")
