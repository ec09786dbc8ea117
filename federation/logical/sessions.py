"""What may read a session window (federation/logical/window.py, `SessionWindow`), and
what Spark cannot run of the windows at a plan's leaves. Duck-typed over plan nodes, so
that nodes.py (RSTREAM's validation), physical.py and the optimizer use it without an
import circle."""

from __future__ import annotations

from federation.conventions import SESSION_COLUMNS
from federation.errors import QueryValidationError
from federation.expressions import referenced_columns


def check_sessions(root) -> None:
    """A session window's rows exist only at the instant its session closes: only an
    aggregate grouped by `window_start`, `window_end` and exactly the window's partition
    keys reads them, with selections of those keys between (a selection of other columns
    would decide which readings make a session: Flink forms sessions of the rows its
    window reads, so filter those in the stream instead)."""
    for node in root.walk():
        for c in node.children:
            w = c.row_window()
            if w is None or not w.is_session:
                continue
            keys = set(w.partition_by)
            if node.kind == "select":
                if not referenced_columns(node.predicate) <= keys:
                    raise QueryValidationError(
                        "select", "predicate", f"{node.predicate.sql()!r} reads a session "
                        f"window's rows ({w.label()}): only its partition keys "
                        f"({', '.join(w.partition_by) or 'none'}) may be selected on below "
                        "its aggregate, which decides what a session is")
                continue
            want = keys | set(SESSION_COLUMNS)
            if node.kind != "aggregate" or set(node.keys) != want:  # type: ignore[attr-defined]
                got = (f"an aggregate grouped by {', '.join(node.keys) or 'nothing'}"  # type: ignore[attr-defined]
                       if node.kind == "aggregate" else f"a {node.kind}")
                raise QueryValidationError(
                    node.kind, "input", f"{w.label()} is read by {got}: a session's rows are "
                    "read by an aggregate grouped by exactly window_start, window_end"
                    + "".join(f", {k}" for k in w.partition_by) + " (its partition keys)")


def reads_session_bounds(node) -> bool:
    """An aggregate over a session window whose aggregates read `window_start` or
    `window_end` (its groups' own bounds; `MIN(window_start)`, `COUNT(DISTINCT
    window_end)`): Spark knows a session's bounds only once it has grouped the readings,
    so such an aggregate runs in DuckDB (physical.spe_limits)."""
    if node.kind != "aggregate":
        return False
    w = node.child.row_window()  # type: ignore[attr-defined]
    if w is None or not w.is_session:
        return False
    return any(call.arg is not None and referenced_columns(call.arg) & set(SESSION_COLUMNS)
               for _, call in node.aggs)  # type: ignore[attr-defined]


def spark_limit(node, children) -> str | None:
    """Why Spark cannot run operator `node` over `children` (physical.spe_limits), or None.
    Spark has no tuple windows: the last n rows before an instant exist only in the DB, so
    every operator that reads one runs there (a selection in Spark would filter before the
    window counts its n rows, which is another query)."""
    if reads_session_bounds(node):
        return ("its aggregates read window_start or window_end of the sessions it groups, "
                "which Spark has only as the groups' keys")
    w = next((c for c in children if c.kind == "window" and c.rows is not None), None)
    if w is not None:
        return f"it reads a tuple window ({w.label()}), which only the DB has"
    return None
