"""The query generator of the differential fuzzer: a Hypothesis strategy of random valid
queries over the smart-plug stream, with placements and a micro-batch size (fuzz.py runs
them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from federation.expressions import avg, count, max_, min_, sum_
from federation.logical import Node, NumberedPlan, Rstream, window
from federation.smartplug import smartplug_stream

RATE, PLUGS, HOUSES, SECONDS = 30, 6, 2, 20
#: generated joins stay below this many rows per instant (the fuzzer checks correctness;
#: a near cross product of window rows only costs memory and time)
MAX_ROWS_PER_INSTANT = 4_000
AGGS = {"count": count, "sum": sum_, "avg": avg, "min": min_, "max": max_}


@dataclass
class Generated:
    """A query and the DSL source that builds it (for the report and for reproducing)."""

    query: Rstream
    source: str
    placements: list[str] = field(default_factory=list)
    batch_s: int = 5

    def __repr__(self) -> str:  # Hypothesis prints this for a falsifying example
        return f"{self.source}  # placements {self.placements}, {self.batch_s} s per batch"


class _Builder:
    """Draws one query: nodes with their DSL source and a magnitude hint per column."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.stream = smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES)
        self.slide = draw(st.sampled_from([0.5, 1.0, 2.0]))
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    # -- leaves --------------------------------------------------------------------------
    def leaf(self) -> tuple[Node, str, dict]:
        d = self.draw
        if d(st.integers(0, 9)) == 0:
            rows = d(st.sampled_from([5, 20]))
            w = window(self.stream, rows=rows, slide=self.slide)
            src = f"window(s, rows={rows}, slide={self.slide:g})"
        else:
            k = d(st.integers(1, 6))
            extra = d(st.sampled_from([0.0, 0.0, 0.5, 0.25]))  # ranges the slide won't divide
            r = self.slide * (k + extra)
            w = window(self.stream, range=r, slide=self.slide)
            src = f"window(s, range={r:g}, slide={self.slide:g})"
        hints = {"value": "value", "property": "code", "house_id": "key",
                 "household_id": "key", "plug_id": "key", "id": "id", "ts": "ts"}
        node: Node = w
        if d(st.booleans()):
            node, src = self.select(node, src, hints)
        return node, src, hints

    # -- unary -----------------------------------------------------------------------------
    def predicate(self, node: Node, hints: dict) -> str | None:
        d = self.draw
        cols = [c for c, t in node.schema.items() if t in ("INT", "BIGINT", "DOUBLE")
                and hints.get(c) != "id"]
        if not cols:
            return None
        c = d(st.sampled_from(cols))
        h = hints.get(c)
        if h == "code":
            return f"{c} = {d(st.sampled_from([0, 1]))}"
        if h == "key":
            return d(st.sampled_from([f"{c} = 1", f"{c} % 2 = 0", f"{c} < 2"]))
        if h == "count":
            return f"{c} > {d(st.sampled_from([1, 2, 5]))}"
        op = d(st.sampled_from([">", "<", ">="]))
        return f"{c} {op} {d(st.sampled_from([0.01, 1, 20, 36]))}"

    def select(self, node: Node, src: str, hints: dict) -> tuple[Node, str]:
        p = self.predicate(node, hints)
        if p is None:
            return node, src
        return node.filter(p), f'{src}.filter("{p}")'

    def project(self, node: Node, src: str, hints: dict) -> tuple[Node, str, dict]:
        d = self.draw
        cols = list(node.schema)
        keep = d(st.lists(st.sampled_from(cols), min_size=1, max_size=len(cols), unique=True))
        keep = [c for c in cols if c in keep]  # schema order
        outputs = {}
        nums = [c for c, t in node.schema.items() if t == "DOUBLE"]
        if nums and d(st.booleans()):
            c = d(st.sampled_from(nums))
            new = self.name("x")
            outputs[new] = f"{c} * 2 + 1"
            hints = {**hints, new: "value"}
        node2 = node.project(*keep, **outputs)
        args = ", ".join([repr(c) for c in keep] + [f'{k}="{v}"' for k, v in outputs.items()])
        return node2, f"{src}.project({args})", hints

    def aggregate(self, node: Node, src: str, hints: dict) -> tuple[Node, str, dict]:
        d = self.draw
        keys_all = [c for c in node.schema if hints.get(c) in ("key", "code")]
        keys = d(st.lists(st.sampled_from(keys_all), max_size=min(2, len(keys_all)),
                          unique=True)) if keys_all else []
        keys = [c for c in node.schema if c in keys]
        nums = [c for c, t in node.schema.items() if t in ("DOUBLE", "INT", "BIGINT")
                and hints.get(c) not in ("id",)]
        aggs, parts, new_hints = {}, [], {k: hints[k] for k in keys}
        for _ in range(d(st.integers(1, 3))):
            f = d(st.sampled_from(sorted(AGGS))) if nums else "count"
            name = self.name(f[0])
            if f == "count":
                aggs[name] = count()
                parts.append(f"{name}=count()")
                new_hints[name] = "count"
                continue
            c = d(st.sampled_from(nums))
            aggs[name] = AGGS[f](c)
            parts.append(f'{name}={AGGS[f].__name__}("{c}")')
            new_hints[name] = "value" if hints.get(c) != "count" else "count"
        out = node.aggregate(by=keys, **aggs)
        return out, f"{src}.aggregate(by={keys!r}, {', '.join(parts)})", new_hints

    # -- whole subtrees --------------------------------------------------------------------
    def relation(self, depth: int) -> tuple[Node, str, dict]:
        """A subtree; joins need one side aggregated (bounded result sizes)."""
        d = self.draw
        node, src, hints = self.leaf()
        for _ in range(d(st.integers(1, depth + 1))):
            kind = d(st.sampled_from(["select", "project", "aggregate", "aggregate", "join",
                                      "join"]))
            if kind == "select":
                node, src = self.select(node, src, hints)
            elif kind == "project":
                node, src, hints = self.project(node, src, hints)
            elif kind == "aggregate":
                node, src, hints = self.aggregate(node, src, hints)
            else:
                node, src, hints = self.join(node, src, hints, depth - 1)
        return node, src, hints

    def join(self, left: Node, lsrc: str, lhints: dict, depth: int) -> tuple[Node, str, dict]:
        d = self.draw
        if d(st.integers(0, 2)) == 0:  # self-join: the same subtree on both sides
            right, rsrc, rhints = left, lsrc, lhints
        else:
            right, rsrc, rhints = self.relation(max(depth, 0))
        lkeys = [c for c in left.schema if lhints.get(c) in ("key", "code")]
        common = [c for c in lkeys if c in right.schema and rhints.get(c) in ("key", "code")
                  and left.schema[c] == right.schema[c]]
        if not common or (self._rows(left) and self._rows(right)):
            # no join key, or window rows on both sides (too large): aggregate the right
            right, rsrc, rhints = self.aggregate(right, rsrc, rhints)
            common = [c for c in lkeys if c in right.schema and rhints.get(c) in ("key", "code")]
            if not common:
                return left, lsrc, lhints
        keys = d(st.lists(st.sampled_from(common), min_size=1, max_size=len(common),
                          unique=True))
        keys = [c for c in common if c in keys]
        # rename the right side's other columns: no ambiguous names
        rest = {c: self.name(f"{c}_r") for c in right.schema if c not in keys}
        rproj = right.project(*keys, **{n: c for c, n in rest.items()})
        rsrc2 = f"{rsrc}.project({', '.join(repr(k) for k in keys)}" + "".join(
            f', {n}="{c}"' for c, n in rest.items()) + ")"
        out = left.join(rproj, on=keys)
        if estimated_rows(out) > MAX_ROWS_PER_INSTANT:  # a near cross product: skip it
            return left, lsrc, lhints
        hints = {**lhints, **{n: rhints.get(c, "value") for c, n in rest.items()}}
        return out, f"{lsrc}.join({rsrc2}, on={keys!r})", hints

    @staticmethod
    def _rows(node: Node) -> bool:
        """Window rows, or as many rows as a window (a join of window rows)."""
        return estimated_rows(node) > 50


def estimated_rows(node: Node) -> float:
    """A pessimistic bound of the rows of the node's relation at one instant on the fuzz
    data: window rows (rate x range, or n), selections keep every row, an aggregation has
    at most 2 groups per key column (12 for the plug keys together), an equi-join matches
    each row with half the other side's."""
    k = node.kind
    if k == "window":
        return float(node.rows) if node.rows else RATE * node.range_s
    if k in ("select", "project", "rstream"):
        return estimated_rows(node.child)
    if k == "aggregate":
        return min(estimated_rows(node.child), 2.0 ** len(node.keys))
    left, right = estimated_rows(node.left), estimated_rows(node.right)
    return left * right / 2


@st.composite
def queries(draw, max_depth: int = 3) -> Generated:
    """A random valid query over the smart-plug stream, with placements and a batch size."""
    b = _Builder(draw)
    node, src, hints = b.relation(draw(st.integers(1, max_depth)))
    if node.kind == "window":
        node, src = b.select(node, src, hints)
    q = node.rstream("Q")
    ops = _logical(q).r2r_ids
    explicit = draw(st.lists(st.lists(st.sampled_from(["spe", "db"]), min_size=len(ops),
                                      max_size=len(ops)), min_size=1, max_size=2))
    from federation.physical import placement_string, spe_limits

    plan = _logical(q)
    fixed = []
    for es in explicit:  # explicit placements that the engines can run ('spe' tests refusal)
        pl = dict(zip(ops, es))
        for o, _ in spe_limits(plan, pl):
            pl[o] = "db"
        fixed.append(pl)
    placements = ["spe", "db", "auto"] + [
        placement_string(pl) for pl in fixed]
    placements = list(dict.fromkeys(placements))
    batch = draw(st.sampled_from([3, 5, 10]))
    return Generated(q, f"{src}.rstream('Q')", placements, batch)


def _logical(q: Rstream) -> NumberedPlan:
    """The plan whose operator ids explicit placements name (as `run` numbers it)."""
    from costmodel.profile import load_profile
    from federation.optimizer.phase_one import phase_one

    return NumberedPlan.of(phase_one(q, load_profile()))
