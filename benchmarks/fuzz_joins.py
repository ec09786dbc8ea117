"""Joins: of window rows and of aggregates, outer ones, against the rows' own aggregate (CQ1's
shape), counted joins, IN/EXISTS membership.

A mixin of the fuzzer's builder (benchmarks/fuzz_builder.py): its methods draw with
`self.draw` and build with the builder's other methods."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from benchmarks.fuzz_domain import (
    DOMAINS,
    GROUPABLE,
    MAX_ROWS_PER_INSTANT,
    NUMERIC,
    RATE,
    Rel,
    _type,
    bare,
    ref,
)
from benchmarks.fuzz_sizes import _join_rows, estimated_rows
from federation.logical import is_row_level, where_in
from federation.smartplug import PLUG_KEYS


class Joins:
    """Joins (a mixin of fuzz_builder._Builder)."""

    def join_call(self, left: Rel, right: Rel, on: list) -> Rel | None:
        """An inner join, or now and then an outer one (LEFT, RIGHT, FULL; inner where it
        would keep a table's rows, which is refused)."""
        how = self.draw(st.sampled_from(["left", "right", "full"])) if self.chance(25) \
            else "inner"
        if how != "inner" and self.chance(40):  # a value that is not NULL on NULL input
            if how in ("left", "full"):  # on a side the join may miss (NULL where it did)
                right = self.never_null(right) or right
            if how in ("right", "full"):
                left = self.never_null(left) or left
        try:
            node = left.dsl.join(right.node, on=on, how=how)
        except ValueError:
            try:
                node, how = left.dsl.join(right.node, on=on), "inner"
            except ValueError:
                return None
        rkeys = {k if isinstance(k, str) else k[1] for k in on}
        hints = {**left.hints, **{c: h for c, h in right.hints.items() if c not in rkeys}}
        tail = "" if how == "inner" else f", how={how!r}"
        return Rel(node, f"{left.src}.join({right.src}, on={on!r}{tail})", hints)

    def never_null(self, r: Rel) -> Rel | None:
        """`r` with a column that is never NULL on its rows (a constant, a COALESCE):
        NULL on the rows an outer join pads (sqlglot's subquery merge once made it the
        constant there)."""
        nums = [c for c, t in r.node.schema.items() if _type(t) in ("INT", "BIGINT")]
        e = self.draw(st.sampled_from(["TRUE", "1"] + [f"COALESCE({ref(c)}, 0) + 1"
                                                       for c in nums]))
        return self.project(r, list(r.node.schema), [(self.fresh("seen"), e, "code")])

    def rows_join(self) -> Rel:
        """Two window-rows relations over windows of different ranges (one slide), each with
        its own selection and renaming projection, joined on plug keys; then often an
        aggregate (keyed or global) and sometimes a projection."""
        d = self.draw
        keys = list(PLUG_KEYS) if self.chance(50) else [k for k in PLUG_KEYS if k in d(
            st.lists(st.sampled_from(PLUG_KEYS), min_size=1, max_size=3, unique=True))]
        ranges = sorted({self.slide * (k + e) for k in range(1, 7) for e in (0.0, 0.25, 0.5)})

        def pairs(ks):
            v = math.prod(DOMAINS[k] for k in ks)
            return [(a, b) for a in ranges for b in ranges
                    if a != b and RATE * a * RATE * b / v <= MAX_ROWS_PER_INSTANT]

        if not pairs(keys):
            keys = list(PLUG_KEYS)
        r1, r2 = d(st.sampled_from(pairs(keys)))
        renamed = d(st.sampled_from(["house_id", "household_id", "plug_id", None, None, None]))
        renamed = renamed if renamed in keys and self.chance(50) else None
        sides: list[Rel] = []
        rname = ""
        for rng, word in ((r1, "load"), (r2, "work")):
            r = self.window(rng)
            if self.chance(85):
                if self.chance(60):
                    p = f"property = {d(st.sampled_from([0, 1]))}"
                    r = self.filter(r, p) or r
                    if self.chance(25):
                        r = self.select(r)
                else:
                    r = self.select(r)
            keep = list(keys)
            if not sides:  # the left may keep more plug keys than it joins on
                keep += [k for k in PLUG_KEYS if k not in keys and self.chance(30)]
            outputs = [(self.fresh("v", word), "value", "value")]
            if sides and renamed:
                keep.remove(renamed)
                rname = self.fresh("k", renamed.split("_")[0])
                outputs.insert(0, (rname, renamed, "key"))
            if self.chance(35):
                got = self.computed(r)
                if got is not None:
                    outputs.append((self.fresh("x"), *got))
            keep = [c for c in r.node.schema if c in keep]
            sides.append(self.project(r, keep, outputs) or r)
        left, right = sides
        on: list = list(keys)
        if renamed and rname in right.node.schema:
            on = [(k, rname) if k == renamed else k for k in keys]
        j = self.join_call(left, right, on)
        if j is None or estimated_rows(j.node) > MAX_ROWS_PER_INSTANT:
            return left
        if self.chance(30):
            vs = self.cols(j, "value", types=("DOUBLE",))
            if len(vs) >= 2:
                j = self.filter(j, f"{ref(vs[0])} > {ref(vs[1])}") or j
        if self.chance(75):
            a = self.aggregate(j, global_pct=40)
            if a is not None:
                j = a
                if self.chance(40):
                    j = self.projection(j, computed=d(st.integers(0, 1)))
        return j

    def join(self, left: Rel, depth: int, table: bool = False) -> Rel:
        d = self.draw
        if not table and is_row_level(left.node) and self.chance(12):
            got = self.against_own_aggregate(left)  # CQ1's shape
            if got is not None:
                return got
        if table or self.chance(25):  # a database table
            right = self.table()
        elif self.chance(45):  # self-join: the same subtree on both sides
            right = left
        else:
            right = self.relation(max(depth, 0), top=False)
        lkeys = [c for c in left.node.schema if left.hints.get(c) in ("key", "code")]

        def common(rr: Rel) -> list[str]:
            return [c for c in lkeys if c in rr.node.schema and rr.hints.get(c) in ("key", "code")
                    and _type(left.node.schema[c]) == _type(rr.node.schema[c])]

        keys = common(right)
        if keys:
            keys = [c for c in keys if c in d(st.lists(st.sampled_from(keys), min_size=1,
                                                       max_size=len(keys), unique=True))]
        if keys and self.chance(35):  # x [NOT] IN (SELECT k FROM right)
            got = self.membership(left, right, keys)
            if got is not None:
                return got
        aggregated = False
        if self.chance(15):  # a join on the instant alone (Nexmark q5's window join):
            agg = self.aggregate(right, keys=[])  # with a global aggregate, one row a side
            if agg is None:
                return left
            right, keys = agg, []
        elif not keys or _join_rows(left.node, right.node, keys) > MAX_ROWS_PER_INSTANT or (
                is_row_level(right.node) and self.chance(50)):
            # no join key, too many rows, or a join of rows or a relation with an aggregate
            # (CQ1's shape): aggregate the right side by the join keys
            keys = common(right)
            if not keys:
                return left
            keys = [c for c in keys if c in d(st.lists(st.sampled_from(keys), min_size=1,
                                                       max_size=len(keys), unique=True))]
            agg = self.aggregate(right, keys=keys)
            if agg is None:
                return left
            right, aggregated = agg, True
        # rename the right side's other columns: no ambiguous names
        outputs = [(self.fresh("r", c.split("_")[0]), c, right.hints.get(c, "value"))
                   for c in right.node.schema if c not in keys]
        rproj = self.project(right, keys, outputs)
        if rproj is None:
            return left
        out = self.join_call(left, rproj, keys)
        if out is None or estimated_rows(out.node) > MAX_ROWS_PER_INSTANT:
            return left  # a near cross product: skip it
        if aggregated and is_row_level(left.node) and self.chance(40):
            counted = self.counted(out, left, keys)
            if counted is not None:
                return counted
        tabled = [c for c in rproj.node.schema if c not in keys
                  and rproj.hints.get(c) in GROUPABLE] if right.node.kind == "table" else []
        if tabled and self.chance(50):  # aggregated by a table's column (issue 41)
            out = self.aggregate(out, keys=[self.draw(st.sampled_from(tabled))]) or out
        return out

    def against_own_aggregate(self, rows: Rel) -> Rel | None:
        """`rows` joined with their own aggregate by some of their keys (renamed), then
        counted against it (`counted`), as CQ1 and CQ2."""
        keys = [c for c in rows.node.schema if rows.hints.get(c) in ("key", "code")]
        if not keys:
            return None
        keys = [c for c in keys if c in self.draw(st.lists(
            st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True))]
        agg = self.aggregate(rows, keys=keys)
        if agg is None:
            return None
        right = self.project(agg, keys, [(self.fresh("r"), c, agg.hints.get(c, "value"))
                                          for c in agg.node.schema if c not in keys])
        if right is None:
            return None
        try:  # inner, as CQ1's (an outer join's NULL-padded rows are not counted over packs)
            node = rows.dsl.join(right.node, on=keys)
        except ValueError:
            return None
        hints = {**rows.hints, **{c: h for c, h in right.hints.items() if c not in keys}}
        return self.counted(Rel(node, f"{rows.src}.join({right.src}, on={keys!r})", hints),
                            rows, keys)

    def counted(self, j: Rel, left: Rel, keys: list[str]) -> Rel | None:
        """The pairs of `left`'s rows and its keys' aggregate whose row value passes a bound
        of the aggregate, counted per some of the keys (CQ1, CQ2: a DB-op counts packs of
        rows, federation/packing.py); sometimes with a condition on the aggregate alone."""
        d = self.draw
        vs = [c for c in self.cols(left, "value", "ival") if c in j.node.schema]
        bounds = [c for c in self.cols(j, *NUMERIC) if c not in left.node.schema]
        if not vs or not bounds:
            return None
        v, a = ref(d(st.sampled_from(vs))), ref(d(st.sampled_from(bounds)))
        op = d(st.sampled_from([">", ">=", "<", "<="]))
        e = d(st.sampled_from([f"0.9 * {a}", a, f"{a} - 2", f"0.5 * {a} + 1"]))
        flip = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
        cond = f"{v} {op} {e}" if self.chance(60) else f"{e} {flip[op]} {v}"
        if self.chance(25):
            cond += f" AND {a} IS NOT NULL"
        r = self.filter(j, cond)
        by = [k for k in keys if self.chance(70)]
        aggs = [(self.fresh("n"), "count", None, "count", None)]
        if self.chance(30):
            aggs.append((self.fresh("n"), "count", bare(v), "count", None))
        return None if r is None else self.aggregate_call(r, by, aggs)

    def membership(self, left: Rel, right: Rel, keys: list[str]) -> Rel | None:
        """`left`'s rows whose `keys` are (or are not) among `right`'s values of them,
        renamed (SQL's `(a, b) [NOT] IN (SELECT x, y FROM ...)`, or NOT EXISTS correlated by
        them: logical/membership.py)."""
        sub = self.project(right, [], [(self.fresh("v", k.split("_")[0]), bare(k),
                                        right.hints.get(k, "code")) for k in keys])
        if sub is None:
            return None
        # IN, NOT IN (not over a table alone: refused) or NOT EXISTS correlated by the keys
        mode = self.draw(st.sampled_from(["in", "not in", "not exists"]))
        anti, negated = mode == "not exists", mode == "not in" and right.node.kind != "table"
        try:
            node = where_in(left.node, keys, sub.node, negated, anti=anti)
        except ValueError:
            return None
        return Rel(node, f"where_in({left.src}, {keys!r}, {sub.src}, {negated}, anti={anti})",
                   left.hints)
