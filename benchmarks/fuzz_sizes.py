"""Sizes of generated plans (rows per instant, distinct values), so that the generator keeps
its joins below MAX_ROWS_PER_INSTANT (benchmarks/fuzz_builder.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from benchmarks.fuzz_domain import DOMAINS, RATE
from federation.conjuncts import split_conjuncts
from federation.logical import Node


def _ops(node: Node) -> int:
    return sum(1 for n in node.walk() if n.kind not in ("window", "table", "rstream"))


def _below(node: Node, kind: str) -> bool:
    """True when `node`, or a selection or projection chain under it, is a `kind` node."""
    while node.kind in ("select", "project"):
        node = node.child  # type: ignore[attr-defined]
    return node.kind == kind


# -- sizes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Size:
    rows: float  # rows per instant
    distinct: dict  # column -> distinct values, for the columns whose domain is known
    unique: tuple  # column sets the relation has one row per value of


def _expr_distinct(e: exp.Expression, distinct: dict) -> float | None:
    if isinstance(e, exp.Paren):
        return _expr_distinct(e.this, distinct)
    if isinstance(e, exp.Column):
        return distinct.get(e.name)
    if isinstance(e, (exp.Literal, exp.Boolean)):
        return 1.0
    if isinstance(e, (exp.Predicate, exp.Connector, exp.Not)):
        return 2.0
    if isinstance(e, exp.Cast):
        return _expr_distinct(e.this, distinct)
    if isinstance(e, exp.Case):
        branches = [i.args["true"] for i in e.args["ifs"]] + [e.args.get("default")]
        if all(isinstance(b, exp.Literal) for b in branches):
            return float(len({b.sql() for b in branches}))
    vals = [distinct.get(c.name) for c in e.find_all(exp.Column)]
    if any(v is None for v in vals):
        return None
    return float(math.prod(vals))


def _size(node: Node) -> _Size:
    """Rows per instant on the fuzz data (window rows: rate x range, or n), the distinct
    values of key-like columns and the column sets the relation is unique on."""
    k = node.kind
    if k == "window":
        # a session window: every reading in one instant, each about a slide late
        rows = float(node.rows) if node.rows else RATE * (
            node.slide_s if node.is_session else node.range_s)
        return _Size(rows, {c: float(v) for c, v in DOMAINS.items() if c in node.schema}, ())
    if k == "rstream":
        return _size(node.child)
    if k == "table":
        return _Size(float(node.rows), {c: float(v) for c, v in node.distinct
                                        if c in node.schema}, ())
    if k == "select":  # an equality on a column of a known domain keeps 1/n of the rows
        s = _size(node.child)
        rows, dist = s.rows, dict(s.distinct)
        for p in split_conjuncts(node.predicate):
            if (isinstance(p, exp.EQ) and isinstance(p.left, exp.Column)
                    and isinstance(p.right, exp.Literal) and p.left.name in dist):
                rows /= dist[p.left.name]
                dist[p.left.name] = 1.0
        return _Size(rows, dist, s.unique)
    if k == "project":
        s = _size(node.child)
        dist, names = {}, {}
        for n, e in node.outputs:
            v = _expr_distinct(e, s.distinct)
            if v is not None:
                dist[n] = min(v, s.rows)
            if isinstance(e, exp.Column):
                names.setdefault(e.name, n)
        unique = tuple(frozenset(names[c] for c in u) for u in s.unique
                       if all(c in names for c in u))
        return _Size(s.rows, dist, unique)
    if k == "aggregate":
        s = _size(node.child)
        groups = math.prod(s.distinct.get(c, math.inf) for c in node.keys)
        return _Size(min(s.rows, groups), {c: s.distinct[c] for c in node.keys
                                           if c in s.distinct}, (frozenset(node.keys),))
    if k == "row_number":  # every row, numbered
        s = _size(node.child)
        return _Size(s.rows, {**s.distinct, node.name: s.rows}, s.unique)
    left, right = _size(node.left), _size(node.right)
    if k == "union":  # both sides' rows; a value may be on both sides
        dist = {c: left.distinct[c] + right.distinct[c] for c in left.distinct
                if c in right.distinct}
        return _Size(left.rows + right.rows, dist, ())
    lk = [a for a, _ in node.keys]
    rk = [b for _, b in node.keys]
    rows = left.rows * right.rows / max(_keys_card(left, lk), _keys_card(right, rk), 1.0)
    keep_l, keep_r = node.keeps  # an outer join: at most every kept row besides
    rows += left.rows * keep_l + right.rows * keep_r
    dist = {c: v for c, v in right.distinct.items() if c not in rk}
    dist.update(left.distinct)
    for a, b in node.keys:
        known = [x for x in (left.distinct.get(a), right.distinct.get(b)) if x is not None]
        if known:
            dist[a] = min(known)
    dist = {c: min(v, rows) for c, v in dist.items()}
    right_unique = any(u <= set(rk) for u in right.unique)
    return _Size(rows, dist, left.unique if right_unique and not keep_r else ())


def _keys_card(s: _Size, keys: list[str]) -> float:
    """Distinct values of a key combination: the rows when unique on it, else the product
    of the known domains (1 for an unknown one: every row may match)."""
    if any(u <= set(keys) for u in s.unique):
        return s.rows
    return min(s.rows, math.prod(s.distinct.get(c, 1.0) for c in keys))


def _join_rows(left: Node, right: Node, keys: list[str]) -> float:
    """Rows per instant of joining left and right on keys (as `estimated_rows`)."""
    ls, rs = _size(left), _size(right)
    return ls.rows * rs.rows / max(_keys_card(ls, keys), _keys_card(rs, keys), 1.0)


def estimated_rows(node: Node) -> float:
    """Rows of the node's relation at one instant on the fuzz data: window rows (rate x
    range, or n); an equality on a column of a known domain (DOMAINS) keeps 1/n of the
    rows, other selections keep every row; an aggregation has at most the product of its
    keys' domains; an equi-join matches each row with rows / distinct keys of the other
    side (window rows joined on the three plug keys: rows / 6; a side unique on the keys:
    at most one; keys of unknown domain: every row)."""
    return _size(node).rows


