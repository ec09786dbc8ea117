"""The DB-ops' SQL of a physical plan, generated once per plan structure.

A DB-op's SQL (db.sqlgen) reads the plan's operators, never its statistics: the same plan at
other rates or selectivities has the same SQL. An adaptive run plans its query again at
every decision point with the rates it measured (federation/adaptive/watch.py), and each
plan's SQL took about 0.15 s of the batch thread (CQ1+CQ3+CQ5, 12 operators), so the
programs are kept, keyed by the plan with its streams' statistics left out. A kept program
is shared by every plan that uses it: it is read, never changed (the runtime renders it)."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Sequence

from db.sqlgen import DbOpSql, db_op_sql
from federation.logical import Node, NumberedPlan, Window
from federation.streams import StreamStats

KEPT = 256  # programs kept, the least recently used dropped first
_NO_STATS = StreamStats(rate_tps=1.0)
_programs: OrderedDict[tuple, DbOpSql] = OrderedDict()
_lock = threading.Lock()  # a run's decision and its next segment's start plan at once


def _no_stats(n: Node) -> Node:
    if isinstance(n, Window):
        return dataclasses.replace(n, stream=n.stream.model_copy(update={"stats": _NO_STATS}))
    return n


def structure(plan: NumberedPlan) -> str:
    """What a DB-op's SQL depends on: the plan without its streams' statistics (a
    dataclass repr names every field, so two plans with the same text have the same SQL)."""
    return repr(plan.root.transform(_no_stats))


def program(key: str, plan: NumberedPlan, members: Sequence[str],
            inputs: Sequence[tuple[str, str]], row_level: set[str]) -> DbOpSql:
    """`db_op_sql(plan, members, inputs, row_level)`, kept under the plan's `structure`."""
    k = (key, tuple(members), tuple(inputs), frozenset(row_level))
    with _lock:
        hit = _programs.get(k)
        if hit is not None:
            _programs.move_to_end(k)
            return hit
    prog = db_op_sql(plan, members, inputs, row_level=row_level)
    with _lock:
        _programs[k] = prog
        while len(_programs) > KEPT:
            _programs.popitem(last=False)
    return prog
