"""Aggregations: the keys (renamed, computed, a table's column), the functions (DISTINCT,
FILTER, LISTAGG, percentiles, a session's own, Python aggregates) and their DSL source.

A mixin of the fuzzer's builder (benchmarks/fuzz_builder.py): its methods draw with
`self.draw` and build with the builder's other methods."""

from __future__ import annotations

from hypothesis import strategies as st

from benchmarks.fuzz_domain import (
    AGGS,
    DECOMPOSED,
    DRAWN_AGGS,
    GROUPABLE,
    MEDIANS,
    NUMERIC,
    PYTHON_SUMS,
    WHERE,
    Rel,
    _render_kwargs,
    _type,
    agg_args,
    bare,
    ref,
)
from benchmarks.fuzz_shapes import _lineage
from federation.expressions import infer_type, to_expression
from federation.logical.sessions import grouped_per_session


class Aggregates:
    """Aggregations (a mixin of fuzz_builder._Builder)."""

    def aggregate_call(self, r: Rel, keys: list[str], aggs: list[tuple[str, str, str | None,
                                                                        str, str | None]]
                       ) -> Rel | None:
        """aggs: (name, function, argument or None, hint, FILTER's condition or None)."""
        try:
            node = r.dsl.aggregate(by=keys, **{
                n: AGGS[f](*agg_args(a), where=w) for n, f, a, _, w in aggs})
        except ValueError:
            return None
        self.written(node, {n: a for n, _, a, _, w in aggs if isinstance(a, str) and w is None})
        self.written(node, {f"{n}{WHERE}": w for n, _, _, _, w in aggs if w is not None})
        parts = [(n, f"{AGGS[f].__name__}({', '.join(map(repr, agg_args(a)))}"
                  + ("" if w is None else f"{', ' if a else ''}where={w!r}") + ")")
                 for n, f, a, _, w in aggs]
        hints = {k: r.hints.get(k, "code") for k in keys}
        hints.update({n: h for n, _, _, h, _ in aggs})
        src = f"{r.src}.aggregate(by={keys!r}, {', '.join(_render_kwargs(parts))})"
        return Rel(node, src, hints)

    def aggregate(self, r: Rel, keys: list[str] | None = None, global_pct: int = 25
                  ) -> Rel | None:
        d = self.draw
        if keys is None:
            groupable = [c for c in r.node.schema if r.hints.get(c) in GROUPABLE]
            made = [c for c in groupable if c in self.computed_cols]
            tabled = [c for c in groupable if _lineage(r.node, c)[2] == "table"]
            if self.chance(global_pct):
                keys = []
            elif tabled and self.chance(50):  # by a database table's column (issue 41)
                keys = [d(st.sampled_from(tabled))]
            elif self.chance(20) and (got := self.derived_key(r)) is not None:
                r, keys = got[0], [got[1]]  # by a key a projection renames or computes
            elif made and self.chance(50) or not made and self.chance(35):
                if not made:  # a computed INT, BOOLEAN or VARCHAR column to group by
                    got = self.computed(r, family=d(st.sampled_from(
                        ["case", "bool", "int_arith", "conversion", "cast"])))
                    if got is not None and got[1] in GROUPABLE:
                        r = self.project(r, list(r.node.schema),
                                         [(self.fresh("g"), *got)]) or r
                        groupable = [c for c in r.node.schema if r.hints.get(c) in GROUPABLE]
                        made = [c for c in groupable if c in self.computed_cols]
                keys = [d(st.sampled_from(made))] if made else []
                if groupable and self.chance(40):
                    keys.append(d(st.sampled_from(groupable)))
                keys = [c for c in r.node.schema if c in keys]
            elif groupable:
                keys = d(st.lists(st.sampled_from(groupable), min_size=1,
                                  max_size=min(2, len(groupable)), unique=True))
                keys = [c for c in r.node.schema if c in keys]
            else:
                keys = []
        nums = [c for c, t in r.node.schema.items() if r.hints.get(c) in NUMERIC
                and _type(t) in ("INT", "BIGINT", "DOUBLE")]
        aggs = []
        w = r.node.row_window()
        # the sessions' own aggregate: each engine's own STDDEV, ... (builder.aggregate)
        session = w is not None and w.is_session and grouped_per_session(w, keys)
        for _ in range(d(st.integers(1, 3))):
            f = d(st.sampled_from(DRAWN_AGGS)) if nums else "count"
            # FILTER (WHERE ...): the aggregate of the rows where a predicate holds
            where = self.predicate(r) if self.chance(5) else None
            if f == "count_distinct":  # of any column (a key, a code, a value), or two
                arg = bare(d(st.sampled_from(list(r.node.schema))))
                if len(r.node.schema) > 1 and self.chance(25):  # COUNT(DISTINCT a, b)
                    arg = tuple(bare(c) for c in d(st.lists(st.sampled_from(list(
                        r.node.schema)), min_size=2, max_size=2, unique=True)))
                aggs.append((self.fresh("d", "distinct"), f, arg, "count", where))
                continue
            if f == "count":
                arg = None
                if self.chance(15):
                    arg = bare(d(st.sampled_from(list(r.node.schema))))
                aggs.append((self.fresh("n", "count"), "count", arg, "count", where))
                continue
            texts = [c for c in r.node.schema if r.hints.get(c) in ("key", "code", "vnum")]
            if f in ("min", "max") and texts and self.chance(15):  # LISTAGG of their text
                c = d(st.sampled_from(texts))
                arg = bare(c) if _type(r.node.schema[c]) == "VARCHAR" else \
                    f"CAST({ref(c)} AS VARCHAR)"
                f = "listagg_distinct" if self.chance(30) else "listagg"
                name = self.fresh("l", "list")
                sep = d(st.sampled_from([",", "|", "; "]))
                if f == "listagg" and (len(aggs) + len(c)) % 2:  # a Python aggregate of
                    other = [t for t in texts if t != c]  # the values, or of two columns'
                    arg = (bare(c), bare(other[0])) if other and sep != "," else (bare(c),)
                    f, sep = "fz_dotted", None  # (no draw of its own: the seeds' queries stay)
                aggs.append((name, f, arg if sep is None else (arg, sep),
                             "vtime", where))
                continue
            ordered = [c for c, t in r.node.schema.items() if _type(t) in ("VARCHAR",
                                                                            "TIMESTAMP")]
            if f in ("min", "max") and ordered and self.chance(20):  # of strings or times
                c = d(st.sampled_from(ordered))
                aggs.append((self.fresh(f[0], f), f, bare(c), r.hints.get(c, "vtime"), where))
                continue
            c = d(st.sampled_from(nums))
            arg, h = bare(c), r.hints.get(c)
            if self.chance(15):  # a computed argument
                got = self.computed(r, numeric=True)
                if got is not None:
                    arg, h = got
            if session and f == "avg" and self.chance(70):  # a session's own STDDEV,
                f = d(st.sampled_from(sorted(DECOMPOSED)))  # ... (sessions are drawn rarely;
                # the argument's text picks the percentile: most are a session's first)
                f = MEDIANS[(len(aggs) + len(str(arg))) % 3] if f == "median" else f
            elif f in ("sum", "avg") and self.chance(12):  # of the distinct values
                f = f"{f}_distinct"
            elif f == "avg" and self.chance(12):  # STDDEV, VARIANCE, MEDIAN (of a session's
                f = d(st.sampled_from(sorted(DECOMPOSED)))  # rows: the engines' own)
                f = MEDIANS[len(aggs) % 3] if f == "median" else f
            if f in ("avg", "avg_distinct", *DECOMPOSED, *MEDIANS):
                hint = "value"
            elif h == "count":
                hint = "count"
            else:
                hint = "code" if f in ("min", "max") and h in ("key", "code") else "value"
            name = self.fresh(f[0], f)
            if f in ("sum", "sum_distinct") and (len(aggs) + len(str(arg))) % 5 == 2:
                # a Python aggregate of SUM's type (no draw of its own: the seeds' queries
                # stay those drawn before)
                f = PYTHON_SUMS.get((f, _type(infer_type(to_expression(arg), r.node.schema))), f)
            aggs.append((name, f, arg, hint, where))
        return self.aggregate_call(r, keys, aggs)

    def derived_key(self, r: Rel) -> tuple[Rel, str] | None:
        """`r` under a projection that keeps its columns and adds a groupable one, renamed
        (`k = plug_id`) or computed (a CASE, a cast, integer arithmetic...), and its name:
        the key whose slice table the memory model once could not type (issue 41)."""
        d = self.draw
        groupable = [c for c in r.node.schema if r.hints.get(c) in GROUPABLE]
        if groupable and self.chance(50):
            c = d(st.sampled_from(groupable))
            out = (self.fresh("k", c.split("_")[0]), bare(c), r.hints[c])
        else:
            got = self.computed(r, family=d(st.sampled_from(
                ["case", "bool", "int_arith", "conversion", "cast"])))
            if got is None or got[1] not in GROUPABLE:
                return None
            out = (self.fresh("g"), *got)
        keep = [c for c in r.node.schema if c != out[0]]
        projected = self.project(r, keep, [out])
        return None if projected is None else (projected, out[0])
