"""What may read a session window (federation/logical/window.py, `SessionWindow`), and
what Spark cannot run of the windows at a plan's leaves. Duck-typed over plan nodes, so
that nodes.py (RSTREAM's validation), physical.py and the optimizer use it without an
import circle."""

from __future__ import annotations

from federation.conventions import SESSION_COLUMNS
from federation.errors import QueryValidationError
from federation.expressions import referenced_columns


def readings_kept(node, w) -> bool:
    """True when selection or projection `node` over session window `w`'s readings passes
    them on as readings: a selection of its partition keys alone (a key's readings are its
    sessions'). Any other selection or projection reads the relation of the sessions that
    close at each instant, each reading with its session's bounds."""
    return node.kind == "select" and referenced_columns(node.predicate) <= set(w.partition_by)


def session_aggregate_of(node):
    """The session window whose sessions aggregate `node` groups (Flink's window
    aggregation: grouped by window_start and window_end, through selections, over the
    window's readings), or None: an aggregate of a relation."""
    if node.kind != "aggregate" or not set(SESSION_COLUMNS) <= set(node.keys):
        return None
    n = node.child
    while n.kind == "select":
        n = n.child
    return n if n.kind == "window" and n.is_session else None


def per_session(node) -> bool:
    """True for the sessions' own aggregate: grouped by exactly window_start, window_end
    and the window's partition keys (each engine's aggregate per session: Spark's over its
    `session_window`). With more keys it groups each session's readings by them: the
    relation of the sessions closing at each instant, grouped (a session is its bounds and
    keys)."""
    w = session_aggregate_of(node)
    return w is not None and grouped_per_session(w, node.keys)


def grouped_per_session(w, keys) -> bool:
    """Keys `keys` over session window `w` are exactly its bounds and partition keys."""
    return set(keys) == set(w.partition_by) | set(SESSION_COLUMNS)


def check_session_aggregate(node) -> None:
    """An aggregate grouped by a session window's `window_start` and `window_end` over its
    rows is Flink's window aggregation of its sessions: grouped by the window's partition
    keys too, with selections of those keys alone between (a selection of other columns
    there would decide which readings make a session, as Flink's does: Flink forms sessions
    of the rows its window aggregation reads; filter those in a view over the stream
    instead). Any other reader reads the relation of the sessions that close at each
    instant (docs/sql.md, "Session windows")."""
    w = session_aggregate_of(node)
    if w is None:
        return
    keys = set(w.partition_by)
    n = node.child
    while n.kind == "select":
        if not referenced_columns(n.predicate) <= keys:
            raise QueryValidationError(
                "select", "predicate", f"{n.predicate.sql()!r} reads a session "
                f"window's rows ({w.label()}): only its partition keys "
                f"({', '.join(w.partition_by) or 'none'}) may be selected on below "
                "an aggregate grouped by its window_start and window_end, which decides what "
                "a session is (filter the readings in a view over the stream, or after "
                "the aggregate)")
        n = n.child
    if not keys <= set(node.keys):
        raise QueryValidationError(
            "aggregate", "by", f"{w.label()} is read by an aggregate grouped by "
            f"{', '.join(node.keys)}: a session's aggregate is grouped by window_start, "
            "window_end" + "".join(f", {k}" for k in w.partition_by) + " (its partition "
            "keys)")


def reads_session_bounds(node) -> bool:
    """An aggregate over a session window whose aggregates read `window_start` or
    `window_end` (its groups' own bounds; `MIN(window_start)`, `COUNT(DISTINCT
    window_end)`): Spark knows a session's bounds only once it has grouped the readings,
    so such an aggregate runs in DuckDB (physical.spe_limits)."""
    if not per_session(node):
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
