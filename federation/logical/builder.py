"""The query DSL: `Relation`, a relation of a query being written, whose methods build the
plan's nodes (federation/logical/nodes.py and its siblings) and validate them at once, so a
mistake fails where the query is written, with the operator and the field named.

`window(...)` and `table(...)` return a Relation; `.rstream(name)` ends the query and
returns the plan (an `Rstream` node), which `run`, `explain` and `query_set` take. The plan
nodes carry no DSL: the engines, the optimizer and the cost model read nodes only; the SQL
front end and the optimizer's rewrites build through a Relation too (`Relation(node)....
.node`). A Relation shows its columns (`.schema`); its plan node is `.node`.

Example:
    >>> from federation.smartplug import smartplug_stream
    >>> from federation.logical import window
    >>> from federation.expressions import max_
    >>> w = window(smartplug_stream(rate=2000), range=300, slide=1)
    >>> q = w.filter("property = 1").aggregate(by=["plug_id"], maxv=max_("value"))
    >>> type(q).__name__, q.kind, list(q.schema)
    ('Relation', 'aggregate', ['plug_id', 'maxv'])
    >>> type(q.rstream("peak")).__name__
    'Rstream'
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from federation.errors import QueryValidationError
from federation.expressions import ORDERED_FUNCS, SPREAD_FUNCS, AggCall, sum_
from federation.logical.aggregate import Aggregate
from federation.logical.join import Join
from federation.logical.names import name_maker, null_safe_pairs
from federation.logical.nodes import Node, Project, Rstream, Select, _expr
from federation.logical.rank import RowNumber
from federation.logical.session_fold import fold_session_projections
from federation.logical.sessions import grouped_per_session
from federation.logical.table import Table
from federation.logical.union import Union, check_same_columns


def plan_of(x: Node | Relation) -> Node:
    """The plan node of a Relation (a node as it is)."""
    return x.node if isinstance(x, Relation) else x


def _names(x) -> list:
    """A column (or an order item) or several, as a list."""
    return [x] if isinstance(x, str) else list(x)


class Relation:
    """A relation of a query being written (the DSL's value); `node` is its plan."""

    __slots__ = ("node",)
    node: Node

    def __init__(self, node: Node | Relation) -> None:
        object.__setattr__(self, "node", plan_of(node))

    @property
    def schema(self) -> dict[str, str]:
        """The relation's columns and their types."""
        return self.node.schema

    @property
    def kind(self) -> str:
        return self.node.kind

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Relation is immutable: {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Relation) and self.node == other.node

    def __hash__(self) -> int:
        return hash(self.node)

    def __repr__(self) -> str:
        return f"Relation({self.node.label()})"

    def filter(self, predicate: str | exp.Expression, selectivity: float | None = None
               ) -> Relation:
        """Selection (sigma): keep the rows of each instantaneous relation that match."""
        sel = Select(self.node, _expr("select", "predicate", predicate), selectivity)
        if isinstance(self.node, Table):  # folded into the leaf (table.py)
            return Relation(self.node.step("where", sel.predicate))
        return Relation(sel)

    where = filter

    def project(self, *columns: str, **outputs: str | exp.Expression) -> Relation:
        """Projection (pi): pass columns through by name and compute named expressions."""
        items: list[tuple[str, exp.Expression]] = [(c, exp.column(c)) for c in columns]
        items += [(name, _expr("project", name, e)) for name, e in outputs.items()]
        p = Project(self.node, tuple(items))
        if isinstance(self.node, Table):
            return Relation(self.node.step("select", p.outputs))
        return Relation(p)

    def join(self, other: Node | Relation, on: Sequence[str | tuple[str, str]],
             how: str = "inner") -> Relation:
        """Equi-join with another relation on key columns (names or (left, right) pairs);
        `how`: "inner", "left", "right" or "full" (outer)."""
        if isinstance(on, str):
            on = [on]
        keys = tuple((k, k) if isinstance(k, str) else (k[0], k[1]) for k in on)
        return Relation(Join(self.node, plan_of(other), keys, how))

    def aggregate(self, by: Sequence[str] = (), **aggs: AggCall) -> Relation:
        """Group-by aggregation with COUNT, SUM, AVG, MIN, MAX (and STDDEV, VARIANCE:
        spread.py; MEDIAN and percentiles: median.py), per slide instant."""
        folded = fold_session_projections(self, _names(by), aggs)
        if folded is not None:  # a view's projection of a session's rows
            return folded
        planned = [c.func for c in aggs.values() if c.func in SPREAD_FUNCS
                   or c.func in ORDERED_FUNCS]
        w = self.node.row_window() if planned else None
        if w is not None and w.is_session and grouped_per_session(w, _names(by)):
            # a session's aggregate reads its rows once: each engine's own aggregate
            return Relation(Aggregate(self.node, tuple(_names(by)), tuple(aggs.items())))
        if any(c.func in SPREAD_FUNCS for c in aggs.values()):
            from federation.logical.spread import spread_aggregate

            return spread_aggregate(self, _names(by), aggs)
        if any(c.func in ORDERED_FUNCS for c in aggs.values()):
            from federation.logical.median import median_aggregate

            return median_aggregate(self, _names(by), aggs)
        return Relation(Aggregate(self.node, tuple(_names(by)), tuple(aggs.items())))

    def over(self, by: Sequence[str] = (), order_by=None, frame=None, **aggs: AggCall
             ) -> Relation:
        """Each row with the aggregates of its partition at each instant (SQL's `AVG(x)
        OVER (PARTITION BY by...)`): the relation grouped by `by` and joined back on it,
        NULL equal to NULL as SQL's partitions are (each key compared as `k IS NULL` and
        `COALESCE(k, <a value of its type>)`); without `by`, the instant's aggregates
        joined on the instant. With `order_by` (columns, each with ASC or DESC) over the
        rows of each row's frame (`frame`: frames.Frame or ("rows" | "range", lo, hi);
        SQL's default, ("range", None, 0), a running aggregate: frames.py)."""
        by = _names(by)
        if order_by is not None or frame is not None:
            from federation.logical.frames import Frame, framed

            if order_by is None:  # a frame over the rows in no order: the whole partition
                raise QueryValidationError("over", "order_by", "a frame needs an order")
            return framed(self, order_by, by, Frame.of(frame or Frame()), aggs)
        node, names = self.node, list(aggs)
        groups = self.aggregate(by, **aggs)
        if not by:
            return self.join(groups, on=[])
        fresh = name_maker([*node.schema, *names])
        left, right, pairs = null_safe_pairs(node.schema, by, fresh, "_over_")
        return (self.project(*node.schema, **left).join(groups.project(*names, **right),
                                                        on=pairs).project(*node.schema, *names))

    def lag(self, column: str, order_by, partition_by: Sequence[str] = (), offset: int = 1,
            default: str | exp.Expression | None = None, name: str = "lag",
            ignore_nulls: bool = False) -> Relation:
        """Each row with `column` of the row `offset` places before it in its partition
        under `order_by` at each instant, `default` (NULL) where there is none (SQL's
        LAG(column, offset, default) OVER (PARTITION BY ... ORDER BY ...); a negative
        `offset` is LEAD): the rows numbered as `row_number` numbers them (ties broken
        so) and left-joined with themselves on the partition (NULL-safe) and number.
        `ignore_nulls`: of the rows whose `column` is not NULL (ignore_nulls.py)."""
        if ignore_nulls and offset:
            from federation.logical.ignore_nulls import ignoring_nulls

            which = ("lag", offset) if offset > 0 else ("lead", -offset)
            return ignoring_nulls(self, column, order_by, _names(partition_by), which, name,
                                  default=default)
        return self._neighbour(column, order_by, partition_by, offset, default, name)

    def first_value(self, column: str, order_by, partition_by: Sequence[str] = (),
                    name: str = "first_value", frame=None, ignore_nulls: bool = False
                    ) -> Relation:
        """Each row with `column` of the first row of its partition under `order_by` at
        each instant (SQL's FIRST_VALUE(column) OVER (PARTITION BY ... ORDER BY ...)); of
        its `frame`'s first row (frames.py), NULL where that is empty."""
        if frame is not None or ignore_nulls:
            return self.nth_value(column, "first", order_by, partition_by, name, frame,
                                  ignore_nulls)
        return self._neighbour(column, order_by, partition_by, None, None, name)

    def last_value(self, column: str, order_by, partition_by: Sequence[str] = (),
                   name: str = "last_value", frame=None, ignore_nulls: bool = False
                   ) -> Relation:
        """`column` of the last row of each row's frame (SQL's LAST_VALUE; the default
        frame ends at the row's last peer in `order_by`: frames.py)."""
        return self.nth_value(column, "last", order_by, partition_by, name, frame,
                              ignore_nulls)

    def nth_value(self, column: str, n, order_by, partition_by: Sequence[str] = (),
                  name: str = "nth_value", frame=None, ignore_nulls: bool = False
                  ) -> Relation:
        """`column` of the `n`-th row (1, 2, ...; or "first", "last") of each row's frame,
        NULL where it has fewer rows (SQL's NTH_VALUE(column, n) OVER (...): frames.py);
        `ignore_nulls`: of its rows whose `column` is not NULL (ignore_nulls.py)."""
        from federation.logical.frames import Frame, frame_value
        from federation.logical.ignore_nulls import ignoring_nulls

        if n not in ("first", "last") and (not isinstance(n, int) or isinstance(n, bool)
                                           or n < 1):
            raise QueryValidationError("nth_value", "n", f"{n!r}: a whole number >= 1")
        by, frame = _names(partition_by), Frame.of(frame or Frame())
        if ignore_nulls:
            return ignoring_nulls(self, column, order_by, by, n, name, frame)
        return frame_value(self, column, order_by, by, frame, n, name)

    def ntile(self, buckets: int, order_by, partition_by: Sequence[str] = (),
              name: str = "ntile") -> Relation:
        """Each row's group (1 to `buckets`) when its partition's rows, in `order_by`, are
        cut into `buckets` groups of sizes differing by at most one (SQL's NTILE)."""
        return self.distribution("ntile", order_by, partition_by, name, buckets)

    def percent_rank(self, order_by, partition_by: Sequence[str] = (),
                     name: str = "percent_rank") -> Relation:
        """(rank - 1) / (rows - 1) in each row's partition (SQL's PERCENT_RANK)."""
        return self.distribution("percent_rank", order_by, partition_by, name)

    def cume_dist(self, order_by, partition_by: Sequence[str] = (),
                  name: str = "cume_dist") -> Relation:
        """The share of each row's partition up to its last peer (SQL's CUME_DIST)."""
        return self.distribution("cume_dist", order_by, partition_by, name)

    def distribution(self, function: str, order_by, partition_by: Sequence[str] = (),
                     name: str | None = None, buckets: int | None = None) -> Relation:
        """NTILE(`buckets`), PERCENT_RANK() or CUME_DIST() (`function` in lower case) OVER
        (PARTITION BY ... ORDER BY ...) as the column `name` (frames.distribution)."""
        from federation.logical.distribution import distribution

        by = _names(partition_by)
        return distribution(self, function, order_by, by, name or function, buckets)

    def _neighbour(self, column, order_by, partition_by, offset, default, name) -> Relation:
        by = _names(partition_by)
        node, cols = self.node, list(self.node.schema)
        fresh = name_maker([*cols, name])
        rn, at, hit, value = (fresh(f"_nav_{n}") for n in ("rn", "at", "hit", "value"))
        rows = self.row_number(order_by, by, rn)
        left, right, pairs = null_safe_pairs(node.schema, by, fresh, "_nav_")
        rows_at = rows.filter(f"{rn} = 1")  # FIRST_VALUE: the first row, on the partition
        if offset is not None:  # LAG, LEAD: the row numbered `offset` before
            rows_at, right[at] = rows, exp.column(rn) + exp.Literal.number(int(offset))
            pairs.append((rn, at))
        right[hit], right[value] = exp.true(), exp.column(column)
        out = rows.project(*cols, rn, **left).join(rows_at.project(**right), on=pairs,
                                                   how="left")
        if default is None:
            return out.project(*cols, **{name: exp.column(value)})
        d = exp.cast(sqlglot.parse_one(default) if isinstance(default, str) else default,
                     node.schema[column])
        return out.project(*cols, **{name: exp.case().when(
            exp.column(hit).is_(exp.null()), d).else_(exp.column(value))})

    def union_all(self, other: Node | Relation) -> Relation:
        """Every row of both relations at each instant (SQL's UNION ALL)."""
        return Relation(Union(self.node, plan_of(other)))

    def intersect(self, other: Node | Relation, all: bool = False) -> Relation:
        """The rows of both relations at each instant (INTERSECT [ALL])."""
        return _set_operation(self, Relation(other), "intersect", all)

    def except_(self, other: Node | Relation, all: bool = False) -> Relation:
        """The rows of this relation not in `other` at each instant (EXCEPT [ALL])."""
        return _set_operation(self, Relation(other), "except", all)

    def row_number(self, order_by, partition_by: Sequence[str] = (),
                   name: str = "row_number", function: str = "row_number") -> Relation:
        """Each row's position in its partition at each instant (ROW_NUMBER() OVER
        (PARTITION BY ... ORDER BY ...)); `order_by`: columns, each with ASC or DESC.
        `function` "rank" or "dense_rank": rows equal in `order_by` share a number (RANK(),
        DENSE_RANK())."""
        return Relation(RowNumber(self.node, tuple(_names(partition_by)),
                                  tuple(_names(order_by)), name, function))

    def row_ids(self, name: str) -> Relation:
        """Each row numbered at each instant (`name`: ROW_NUMBER() OVER (ORDER BY the first
        column)): an id to join a row's derived columns back on; rows equal in every column
        are interchangeable, so which of them gets which number does not matter."""
        return self.row_number([(next(iter(self.node.schema)), False)], (), name)

    def rank(self, order_by, partition_by: Sequence[str] = (), name: str = "rank",
             dense: bool = False) -> Relation:
        """RANK() (`dense`: DENSE_RANK()) OVER (PARTITION BY ... ORDER BY ...) at each
        instant: ties in `order_by` share a number."""
        return self.row_number(order_by, partition_by, name,
                               "dense_rank" if dense else "rank")

    def top(self, n: int, order_by, partition_by: Sequence[str] = ()) -> Relation:
        """The first `n` rows of each partition at each instant under `order_by` (Flink's
        window Top-N; ORDER BY ... LIMIT n); ties as `row_number` breaks them."""
        cols, hidden = list(self.node.schema), _fresh("_rank", self.node.schema)
        return self.row_number(order_by, partition_by, hidden).filter(
            f"{hidden} <= {int(n)}").project(*cols)

    def distinct(self) -> Relation:
        """The distinct rows at each instant (SQL's SELECT DISTINCT): a group by every
        column, whose row count the projection above drops."""
        cols = list(self.node.schema)
        hidden = _fresh("_distinct_rows", self.node.schema)
        return self.aggregate(by=cols, **{hidden: AggCall("count")}).project(*cols)

    def window(self, *args: object, **kwargs: object) -> Relation:
        """Windows only stand at the leaves: over a stream, never over a relation."""
        raise QueryValidationError(
            "window", "input", f"a window must read a stream at a leaf, not a {self.node.kind}")

    def rstream(self, name: str = "result") -> Rstream:
        """End the query: emit the whole result relation at every slide instant (RSTREAM);
        the query's plan. A window's own rows (`SELECT * FROM TUMBLE(...)`) pass through a
        projection of its columns: RSTREAM reads a relation an operator computes."""
        if self.node.kind == "window":
            return Rstream(Project(self.node, tuple((c, exp.column(c)) for c in self.node.schema)),
                           name)
        return Rstream(self.node, name)


def _fresh(base: str, schema) -> str:
    while base in schema:
        base = "_" + base
    return base


def _set_operation(left: Relation, right: Relation, op: str, all_: bool) -> Relation:
    """INTERSECT (`op` "intersect") or EXCEPT ("except") of two relations at each instant,
    distinct rows or with `all_` SQL's multiplicities (INTERSECT ALL: min(a, b) copies of a
    row the sides hold a and b times; EXCEPT ALL: a - b). Built of plan nodes every engine
    runs: each side's rows tagged (with ALL numbered 1, 2, ... among identical rows), a
    UNION ALL, a group by every column (NULLs equal, as SQL's set operations compare), kept
    where both sides hold the row (INTERSECT) or the left only (EXCEPT)."""
    check_same_columns(op, left.node, right.node)
    cols = list(left.node.schema)
    keys = [*cols, "_set_n"] if all_ else cols

    def tagged(side: Relation, mine: int) -> Relation:
        if all_:
            side = side.row_number(cols, cols, "_set_n")
        return side.project(*keys, _set_l=str(mine), _set_r=str(1 - mine))

    both = tagged(left, 1).union_all(tagged(right, 0)).aggregate(
        by=keys, _set_l=sum_("_set_l"), _set_r=sum_("_set_r"))
    keep = "_set_l > 0 AND " + ("_set_r > 0" if op == "intersect" else "_set_r = 0")
    return both.filter(keep).project(*cols)

