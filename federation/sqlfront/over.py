"""Aggregates over a partition: `AVG(x) OVER (PARTITION BY k) AS m` in a SELECT list, each
row with the aggregate of the rows of its partition at the instant.

At instant tau the item's value for a row is the aggregate of the relation's rows at tau
that equal it in the PARTITION BY columns (all of them without PARTITION BY): the relation
grouped by those columns and joined back on them, NULL equal to NULL as SQL's partitions
have it (each key compared as `k IS NULL` and `COALESCE(k, <a value of its type>)`); without
PARTITION BY the global aggregate joined on the instant. Items with the same PARTITION BY
share one aggregation. With ORDER BY, each row's aggregate is over the rows of its frame
(`ROWS BETWEEN 2 PRECEDING AND CURRENT ROW`; by default up to the row's last peer, a running
aggregate: federation/logical/frames.py). OVER in an aggregated SELECT is refused
(aggregate in a subquery, then OVER above it).

    >>> from federation import sql
    >>> from federation.smartplug import smartplug_stream
    >>> w = "HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
    >>> q = sql(f"SELECT plug_id, value - AVG(value) OVER (PARTITION BY plug_id) AS d "
    ...         f"FROM {w}", {"s": smartplug_stream()})
    >>> [n.label() for n in q.walk() if n.kind == "aggregate"]
    ['aggregate by plug_id: AVG(value) AS _over']
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from sqlglot import exp

from federation.logical import Relation
from federation.logical.builder import name_maker
from federation.logical.frames import Frame
from federation.sqlfront.aggregates import Aggregates
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.frames import frame_of, window_order
from federation.sqlfront.ranking import windowed_aggregate
from federation.sqlfront.scopes import Scope


def over_partitions(text: SqlText, q: exp.Select, scope: Scope) -> list[Callable]:
    """Replace each aggregate OVER (...) of `q`'s SELECT list by a hidden column holding
    its value: the functions adding the columns to the scope's relation (a Relation,
    federation/logical/frames.add_columns applies them), one per PARTITION BY, ORDER BY and
    frame."""
    found = [w for e in q.expressions for w in e.find_all(exp.Window) if windowed_aggregate(w)]
    specs: dict[tuple, list[exp.Window]] = {}
    for w in found:
        call = (w.this.this if isinstance(w.this, exp.Filter) else w.this).key.upper()
        keys, by = window_order(text, scope, w, call)
        frame = frame_of(text, w)
        if frame is not None and (frame.lo, frame.hi) == (None, None):
            frame, keys = None, []  # the whole partition, in any order
        if frame is not None and not keys:
            raise text.fail(f"{call} OVER (... {w.args['spec'].sql()}): a frame needs an "
                            "ORDER BY (by a column)", "OVER", w, "OVER")
        if keys and frame is None:
            frame = Frame()  # SQL's default under an ORDER BY: up to the row's last peer
        specs.setdefault((tuple(by), tuple(keys), frame), []).append(w)
    fresh = name_maker(set(scope.node.schema))
    units = []
    for (by, keys, frame), ws in specs.items():
        aggs = Aggregates(text, scope, list(by))
        names = [aggs.name(w.this, fresh("_over")) for w in ws]
        units.append(partial(_unit, text, ws[0], by, keys, frame, aggs.calls))
        for w, n in zip(ws, names):
            w.replace(exp.column(n))
    return units


def _unit(text: SqlText, w: exp.Window, by, keys, frame, calls, rel: Relation) -> Relation:
    return text.build("OVER", w, lambda: rel.over(list(by), order_by=list(keys) or None,
                                                  frame=frame, **calls))
