"""The smart-plug continuous queries CQ1-CQ6 and the k-way join template, in the DSL.

Windows slide every second. `scale` shrinks the window ranges (1, 3, 5 minutes at 1.0)
for quick runs: the tests use 1/6 (10, 30, 50 s).

Example:
    >>> q = QUERIES["CQ4"](rate=2000)
    >>> sum(1 for n in q.walk() if n.kind in ("select", "project", "join", "aggregate"))
    6
"""

from __future__ import annotations

import re
from collections.abc import Callable

from federation.expressions import avg, count, max_, sum_
from federation.logical import Node, Rstream, window
from federation.smartplug import DEFAULT_PLUGS, HOUSEHOLD_KEYS, PLUG_KEYS, smartplug_stream

LOAD = "property = 1"


def _load(rate: float, plugs: int, minutes: float, scale: float) -> Node:
    s = smartplug_stream(rate=rate, plugs=plugs)
    return window(s, range=60.0 * minutes * scale, slide=1).filter(LOAD)


def cq1_plan(rate: float = 2000, scale: float = 1.0, plugs: int = DEFAULT_PLUGS) -> Rstream:
    """CQ1: per plug, count of the last 5 minutes' loads above 90% of their maximum."""
    load = _load(rate, plugs, 5, scale)
    peak = load.aggregate(by=PLUG_KEYS, maxv=max_("value"))
    high = load.join(peak, on=PLUG_KEYS).filter("value > 0.9 * maxv", selectivity=0.1)
    return high.aggregate(by=PLUG_KEYS, n_high=count()).rstream("CQ1")


def cq2_plan(rate: float = 2000, scale: float = 1.0, plugs: int = DEFAULT_PLUGS) -> Rstream:
    """CQ2: per plug, count of the last 5 minutes' loads above their average.

    "Above" means by more than 1e-9 W: Spark and DuckDB sum in different orders, and a
    reading equal to the average must not flip with the last bit of the sum.
    """
    load = _load(rate, plugs, 5, scale)
    mean = load.aggregate(by=PLUG_KEYS, avgv=avg("value"))
    high = load.join(mean, on=PLUG_KEYS).filter("value > avgv + 1e-9", selectivity=0.4)
    return high.aggregate(by=PLUG_KEYS, n_above=count()).rstream("CQ2")


def cq3_plan(rate: float = 2000, scale: float = 1.0, plugs: int = DEFAULT_PLUGS) -> Rstream:
    """CQ3: per plug, MAX and AVG load of 5 minutes against those of the last minute."""
    m5 = _load(rate, plugs, 5, scale).aggregate(
        by=PLUG_KEYS, max5=max_("value"), avg5=avg("value")
    )
    m1 = _load(rate, plugs, 1, scale).aggregate(
        by=PLUG_KEYS, max1=max_("value"), avg1=avg("value")
    )
    j = m5.join(m1, on=PLUG_KEYS)
    out = j.project(*PLUG_KEYS, max_diff="max1 - max5", avg_diff="avg1 - avg5")
    return out.rstream("CQ3")


def cq4_plan(rate: float = 2000, scale: float = 1.0, plugs: int = DEFAULT_PLUGS) -> Rstream:
    """CQ4: as CQ3 with AVG only (2 selections, 2 aggregations, a join, a projection)."""
    return kway_plan(2, rate=rate, scale=scale, plugs=plugs, name="CQ4", minutes=(5, 1))


def cq5_plan(rate: float = 2000, scale: float = 1.0, plugs: int = DEFAULT_PLUGS) -> Rstream:
    """CQ5: per household, the maximum over its plugs of each plug's 5-minute total load."""
    totals = _load(rate, plugs, 5, scale).aggregate(by=PLUG_KEYS, total=sum_("value"))
    return totals.aggregate(by=HOUSEHOLD_KEYS, max_total=max_("total")).rstream("CQ5")


def cq6_plan(rate: float = 2000, scale: float = 1.0, plugs: int = DEFAULT_PLUGS) -> Rstream:
    """CQ6: per plug, the average loads of the last 1, 3 and 5 minutes, joined (3-way)."""
    a1, a3, a5 = (
        _load(rate, plugs, m, scale).aggregate(by=PLUG_KEYS, **{f"avg{m}": avg("value")})
        for m in (1, 3, 5)
    )
    return a1.join(a3, on=PLUG_KEYS).join(a5, on=PLUG_KEYS).rstream("CQ6")


def _branch(i: int, minutes: float, rate: float, plugs: int, scale: float) -> Node:
    """B: selection of load, then AVG per plug, over a window of `minutes`."""
    return _load(rate, plugs, minutes, scale).aggregate(by=PLUG_KEYS, **{f"avg{i}": avg("value")})


def kway_plan(
    k: int,
    rate: float = 2000,
    scale: float = 1.0,
    plugs: int = DEFAULT_PLUGS,
    shape: str | None = None,
    name: str | None = None,
    minutes: tuple[float, ...] | None = None,
) -> Rstream:
    """The k-way join on CQ4's template: k branches B over windows of 1, 3, 5, 7, ... minutes.

    `shape` gives the join tree, e.g. '((B B) B) (B B)'; left-deep when omitted.
    3k R2R operators: k selections, k aggregations, k - 1 joins, one projection.
    """
    minutes = minutes or tuple(2 * i + 1 for i in range(k))
    branches = [_branch(i + 1, m, rate, plugs, scale) for i, m in enumerate(minutes[:k])]
    if shape is None:
        tree = branches[0]
        for b in branches[1:]:
            tree = tree.join(b, on=PLUG_KEYS)
    else:
        tree = _shape_tree(shape, list(branches))
    out = tree.project(*PLUG_KEYS, spread=f"avg1 - avg{k}")
    return out.rstream(name or f"join{k}")


def _shape_tree(shape: str, branches: list[Node]) -> Node:
    tokens = re.findall(r"[()B]", shape)
    pos = 0

    def parse() -> Node:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "B":
            return branches.pop(0)
        left = parse()
        right = parse()
        assert tokens[pos] == ")", f"bad shape {shape!r}"
        pos += 1
        return left.join(right, on=PLUG_KEYS)

    tree = parse()
    if branches or pos != len(tokens):
        raise ValueError(f"shape {shape!r} does not use exactly its branches")
    return tree


#: The join shapes that the paper's Phase-One produced (Table 3).
PAPER_SHAPES: dict[int, str] = {
    2: "(B B)",
    5: "(((B B) B) (B B))",
    8: "(B (B (B ((B B) (B (B B))))))",
}

QUERIES: dict[str, Callable[..., Rstream]] = {
    "CQ1": cq1_plan,
    "CQ2": cq2_plan,
    "CQ3": cq3_plan,
    "CQ4": cq4_plan,
    "CQ5": cq5_plan,
    "CQ6": cq6_plan,
}
