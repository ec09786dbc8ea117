"""Aggregates over a partition: `AVG(x) OVER (PARTITION BY k) AS m` in a SELECT list, each
row with the aggregate of the rows of its partition at the instant.

At instant tau the item's value for a row is the aggregate of the relation's rows at tau
that equal it in the PARTITION BY columns (all of them without PARTITION BY): the relation
grouped by those columns and joined back on them, NULL equal to NULL as SQL's partitions
have it (each key compared as `k IS NULL` and `COALESCE(k, <a value of its type>)`); without
PARTITION BY the global aggregate joined on the instant. Items with the same PARTITION BY
share one aggregation. An OVER with ORDER BY or a frame (a running aggregate over the rows
before each) is refused (LAG, LEAD, FIRST_VALUE: navigation.py), as is
OVER in an aggregated SELECT (aggregate in a subquery, then OVER above it).

    >>> from federation import sql
    >>> from federation.smartplug import smartplug_stream
    >>> w = "HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
    >>> q = sql(f"SELECT plug_id, value - AVG(value) OVER (PARTITION BY plug_id) AS d "
    ...         f"FROM {w}", {"s": smartplug_stream()})
    >>> [n.label() for n in q.walk() if n.kind == "aggregate"]
    ['aggregate by plug_id: AVG(value) AS _over']
"""

from __future__ import annotations

from functools import partial

from sqlglot import exp

from federation.logical import Relation
from federation.logical.builder import name_maker
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.ranking import windowed_aggregate
from federation.sqlfront.scopes import Scope
from federation.sqlfront.select_list import Aggregates


def over_partitions(text: SqlText, q: exp.Select, scope: Scope) -> None:
    """Replace each aggregate OVER (PARTITION BY ...) of `q`'s SELECT list by a hidden
    column of `scope.node`, into which its partition's aggregate is joined."""
    found = [w for e in q.expressions for w in e.find_all(exp.Window) if windowed_aggregate(w)]
    specs: dict[tuple[str, ...], list[exp.Window]] = {}
    for w in found:
        if w.args.get("order") is not None or w.args.get("spec") is not None:
            raise text.fail(f"{w.this.sql()} OVER (... ORDER BY ... / ROWS ...): a running "
                            "aggregate is not supported; an aggregate over its partition "
                            "(OVER (PARTITION BY k)) is", "OVER", w, "OVER")
        keys = []
        for p in w.args.get("partition_by") or []:
            if scope.is_instant(p):
                continue  # every instant is its own partition already
            col = scope.resolve(p, "OVER")
            if not isinstance(col, exp.Column):
                raise text.fail(f"PARTITION BY {p.sql()}: partition by columns (compute "
                                "the expression in a subquery)", "OVER", p)
            keys.append(col.name)
        specs.setdefault(tuple(dict.fromkeys(keys)), []).append(w)
    fresh = name_maker(set(scope.node.schema))

    for keys, ws in specs.items():
        node = scope.node
        aggs = Aggregates(text, scope, list(keys))
        names = [aggs.name(w.this, fresh("_over")) for w in ws]
        calls = aggs.calls
        scope.node = text.build("OVER", ws[0], partial(
            lambda n, k, c: Relation(n).over(list(k), **c).node, node, keys, calls))
        for w, n in zip(ws, names):
            w.replace(exp.column(n))
