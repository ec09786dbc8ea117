"""The fuzzer's builder: draws one query, node by node, with its DSL source and a hint
per column (what the generator may do with it). One mixin per family of constructs: the
leaves (benchmarks/fuzz_leaves.py), aggregations (fuzz_aggregates.py), joins
(fuzz_joins.py), operators over partitions (fuzz_partitions.py) and expressions
(fuzz_expressions.py); the sizes that keep joins small are in benchmarks/fuzz_sizes.py."""

from __future__ import annotations

from hypothesis import strategies as st

from benchmarks.fuzz_aggregates import Aggregates
from benchmarks.fuzz_domain import (
    HOUSES,
    KEYWORDS,
    MAX_OPS,
    OTHER,
    PLUGS,
    RATE,
    Rel,
    _render_kwargs,
    bare,
)
from benchmarks.fuzz_expressions import Expressions
from benchmarks.fuzz_joins import Joins
from benchmarks.fuzz_leaves import Leaves
from benchmarks.fuzz_partitions import Partitions
from benchmarks.fuzz_sizes import _below, _ops
from federation.logical import Node, Relation, is_row_level, plan_of
from federation.smartplug import smartplug_stream


class _Builder(Leaves, Partitions, Aggregates, Joins, Expressions):
    """Draws one query: nodes with their DSL source and a hint per column."""

    def __init__(self, draw, sessions: bool = False) -> None:
        self.draw = draw
        self.sessions = sessions  # every leaf a session window (tests/test_fuzz.py)
        self.stream = smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES)
        self.other = smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES, name=OTHER)
        self.slide = draw(st.sampled_from([0.5, 1.0, 2.0]))
        # the instants' offset now and then (Flink's window offset), the same for every
        # window of the query: whole seconds (negative too), or a part of the slide
        self.offset = draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, -1, 3, 0.25, 0.5, 1.5]))
        # windows of other slides in one query now and then (a whole number of the query's
        # slide, from one of its instants): the query's instants are the coarsest grid of
        # them all, a window off it held between its own (federation.instants)
        self.coarser = draw(st.sampled_from([1, 1, 1, 2, 3, 4]))
        self.n = 0
        self.used = {c.lower() for c in self.stream.columns}
        #: the expressions as written, by (id of the node, output name): the DSL keeps
        #: them in the form every engine computes alike (CAST as TRY_CAST(TRUNC(..)), ...)
        self.raw: dict[tuple[int, str], str] = {}
        self._alive: list[Node] = []  # keeps the ids in `raw` those of these nodes
        self.computed_cols: set[str] = set()

    def written(self, node: Node | Relation, exprs: dict[str, str]) -> None:
        node = plan_of(node)  # the plan node the shapes walk
        self._alive.append(node)
        self.raw.update({(id(node), n): e for n, e in exprs.items()})

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def pick(self, cols: list[str]) -> str:
        """One of `cols`, a keyword-named one (or a computed one) more often."""
        odd = [c for c in cols if c.strip('"').lower() in KEYWORDS or c in self.computed_cols]
        if odd and self.chance(40):
            return self.draw(st.sampled_from(odd))
        return self.draw(st.sampled_from(cols))

    def filter(self, r: Rel, predicate: str) -> Rel | None:
        try:
            return Rel(r.dsl.filter(predicate), f"{r.src}.filter({predicate!r})", r.hints)
        except ValueError:
            return None

    def project(self, r: Rel, keep: list[str], outputs: list[tuple[str, str, str]]
                ) -> Rel | None:
        """keep: columns by name; outputs: (name, expression, hint)."""
        try:
            node = r.dsl.project(*keep, **{n: e for n, e, _ in outputs})
        except ValueError:
            return None
        self.written(node, {n: e for n, e, _ in outputs})
        self.computed_cols |= {n for n, e, _ in outputs if e not in r.node.schema}
        args = [repr(c) for c in keep] + _render_kwargs([(n, repr(e)) for n, e, _ in outputs])
        hints = {c: r.hints.get(c, "value") for c in keep}
        hints.update({n: h for n, _, h in outputs})
        return Rel(node, f"{r.src}.project({', '.join(args)})", hints)

    def distinct(self, r: Rel) -> Rel:
        try:
            return Rel(r.dsl.distinct(), f"{r.src}.distinct()", r.hints)
        except ValueError:  # a relation of a table alone: no window to group over
            return r

    # -- unary -----------------------------------------------------------------------------
    def projection(self, r: Rel, computed: int | None = None) -> Rel:
        """Keep some columns, maybe rename one, maybe add computed ones."""
        d = self.draw
        cols = list(r.node.schema)
        keep = d(st.lists(st.sampled_from(cols), min_size=1, max_size=len(cols), unique=True))
        keep = [c for c in cols if c in keep]  # schema order
        outputs: list[tuple[str, str, str]] = []
        if len(keep) > 1 and self.chance(20):  # a renaming
            c = keep.pop(d(st.integers(0, len(keep) - 1)))
            outputs.append((self.fresh("r", c.split("_")[0]), c, r.hints.get(c, "value")))
        n = computed if computed is not None else d(st.sampled_from([0, 1, 1, 2]))
        for _ in range(n):
            got = self.computed(r)
            if got is not None:
                outputs.append((self.fresh("x"), *got))
        return self.project(r, keep, outputs) or r

    # -- whole subtrees --------------------------------------------------------------------
    def relation(self, depth: int, top: bool = True) -> Rel:
        """A subtree: a leaf or a join of window rows, then operators in a random order
        (no more joins once it has MAX_OPS operators)."""
        d = self.draw
        r = self.rows_join() if self.chance(40 if top else 8) else self.leaf()
        if top and is_row_level(r.node) and self.chance(10):  # CQ1's count over packs
            r = self.against_own_aggregate(r) or r
        for _ in range(d(st.integers(1, depth + 1))):
            kind = d(st.sampled_from(["select", "project", "aggregate", "aggregate", "join",
                                      "join", "derived", "union"]))
            if kind in ("join", "union") and _ops(r.node) >= MAX_OPS:
                kind = "aggregate"
            if kind == "select":
                r = self.select(r)
            elif kind == "project":
                r = self.projection(r)
            elif kind == "aggregate":
                r = self.aggregate(r, global_pct=40 if _below(r.node, "join") else 20) or r
            elif kind == "union":
                r = self.union(r, depth - 1)
            elif kind == "derived":  # grouped by a key a projection renames or computes
                got = self.derived_key(r)
                r = r if got is None else self.aggregate(got[0], keys=[got[1]]) or r
            else:
                r = self.join(r, depth - 1)
        return r

    def union(self, r: Rel, depth: int) -> Rel:
        """`r` UNION ALL (or INTERSECT, EXCEPT [ALL]) another relation whose columns, of
        `r`'s types, a projection renames to `r`'s (SQL's by position), else `r` through a
        selection (a union of a subtree with itself)."""
        d = self.draw
        other = self.relation(max(depth, 0), top=False)
        cols, free = [], list(other.node.schema)
        for c, t in r.node.schema.items():
            same = [o for o in free if other.node.schema[o] == t]
            if not same:
                cols = None
                break
            o = d(st.sampled_from(same))
            free.remove(o)
            cols.append((c, bare(o), r.hints.get(c, "value")))
        right = None if cols is None else self.project(other, [], cols)
        if right is None:
            right = self.select(r)
        how = d(st.sampled_from(["union_all", "union_all", "intersect", "except_"]))
        all_ = how != "union_all" and d(st.booleans())
        try:  # INTERSECT / EXCEPT [ALL]: a union, row numbers, a group by (union.py)
            node = (r.dsl.union_all(right.node) if how == "union_all" else
                    getattr(r.dsl, how)(right.node, all_))
        except ValueError:  # a side of tables alone, or another slide
            return r
        arg = "" if how == "union_all" else f", {all_}"
        return Rel(node, f"{r.src}.{how}({right.src}{arg})", r.hints)
