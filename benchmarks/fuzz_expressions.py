"""The expressions the fuzzer writes (a part of its builder, benchmarks/fuzz_builder.py):
output names in random styles, selections' predicates, computed columns of every family
(CASE, comparisons, literals, integer and double arithmetic, conversions, casts between
INT, BIGINT, DOUBLE, BOOLEAN and VARCHAR, Python functions: benchmarks/fuzz_functions.py)."""

from __future__ import annotations

from hypothesis import strategies as st

from benchmarks import fuzz_functions
from benchmarks.fuzz_domain import (
    _LONG,
    _WORDS,
    CAST_TYPES,
    KEYWORDS,
    Rel,
    _cast_hint,
    _cast_targets,
    _type,
    ref,
)


class Expressions:
    """The expression-drawing half of `_Builder` (its `draw`, `chance`, `pick`, `used`)."""

    # -- names -----------------------------------------------------------------------------
    def fresh(self, prefix: str = "x", word: str | None = None) -> str:
        """A new output name in a random style: plain (`x3`), camelCase, UPPER, long or a
        keyword; unique in the query without regard to case."""
        d = self.draw
        style = d(st.sampled_from(["plain", "plain", "plain", "camel", "upper", "long",
                                   "keyword", "keyword"]))
        word = word or d(st.sampled_from(_WORDS))
        name = None
        if style == "keyword":
            free = [k for k in KEYWORDS if k not in self.used]
            if word in free and self.chance(50):
                name = word
            elif free:
                name = d(st.sampled_from(free))
        elif style == "camel":
            other = d(st.sampled_from([w for w in _WORDS if w != word]))
            name = word + other.capitalize()
        elif style == "upper":
            name = d(st.sampled_from([word.upper(), f"{word}_{d(st.sampled_from(_WORDS))}"
                                      .upper(), "TOTAL", "N"]))
        elif style == "long":
            size = d(st.integers(40, 60))
            parts, i = [word], d(st.integers(0, len(_LONG) - 1))
            while len("_".join(parts)) < size:
                parts.append(_LONG[i % len(_LONG)])
                i += 1
            self.n += 1
            tail = f"_{self.n}"
            base = "_".join(parts)[: size - len(tail)]
            name = (base[:-1] + "s" if base.endswith("_") else base) + tail  # size chars
        if name is not None and name.lower() in self.used:
            self.n += 1
            name = f"{name}{self.n}" if not name[-1].isdigit() else f"{name}_{self.n}"
        if name is None or name.lower() in self.used:
            self.n += 1
            name = f"{prefix}{self.n}"
        self.used.add(name.lower())
        return name

    # -- DSL calls with their source ---------------------------------------------------
    def cols(self, r: Rel, *hints: str, types: tuple[str, ...] | None = None) -> list[str]:
        return [c for c, t in r.node.schema.items() if r.hints.get(c) in hints
                and (types is None or _type(t) in types)]

    def predicate(self, r: Rel) -> str | None:
        d = self.draw
        cols = self.cols(r, "key", "code", "bool", "vnum", "vbool", "value", "ival", "count")
        if not cols:
            return None
        c = d(st.sampled_from(cols))
        h, t, q = r.hints.get(c), _type(r.node.schema[c]), ref(c)
        if t == "BOOLEAN":
            return d(st.sampled_from([q, f"NOT {q}"]))
        if t == "VARCHAR":
            return f"{q} = 'true'" if h == "vbool" else d(st.sampled_from(
                [f"{q} = '1'", f"{q} <> '0'"]))
        if c == "property":
            return f"property = {d(st.sampled_from([0, 1]))}"
        if h in ("key", "code"):
            return d(st.sampled_from([f"{q} = 1", f"{q} % 2 = 0", f"{q} < 2", f"{q} >= 0"]))
        if h == "count":
            return f"{q} > {d(st.sampled_from([1, 2, 5]))}"
        op = d(st.sampled_from([">", "<", ">="]))
        return f"{q} {op} {d(st.sampled_from([0.01, 1, 20, 36]))}"

    def select(self, r: Rel) -> Rel:
        p = self.predicate(r)
        if p is None:
            return r
        if self.chance(15):  # a conjunction now and then
            p2 = self.predicate(r)
            if p2 is not None and p2 != p:
                p = f"{p} AND {p2}"
        return self.filter(r, p) or r

    def computed(self, r: Rel, family: str | None = None,
                 numeric: bool = False) -> tuple[str, str] | None:
        """A computed column over `r`'s columns: (expression, hint), or None when `r` has
        no column the drawn family reads. `numeric`: an aggregate's argument."""
        d = self.draw
        keys = self.cols(r, "key", "code", types=("INT", "BIGINT"))
        vals = self.cols(r, "value", "ival", types=("DOUBLE",))
        bools = self.cols(r, "bool", types=("BOOLEAN",))
        fams = ["case", "bool", "literal", "literal", "int_arith", "double_arith",
                "double_arith", "conversion", "conversion", "cast", "cast", "cast", "cast",
                "python", "time", "time", "scalar", "scalar"]
        if numeric:
            fams = ["case", "int_arith", "double_arith", "double_arith", "conversion", "cast",
                    "cast", "python", "scalar"]
        family = family or d(st.sampled_from(fams))
        k = self.pick(keys) if keys else None
        v = self.pick(vals) if vals else None
        b = self.pick(bools) if bools else None
        K, V, B = (None if x is None else ref(x) for x in (k, v, b))
        if family == "case":
            opts = []
            if V:
                opts.append(f"CASE WHEN {V} > 20 THEN 1 ELSE 0 END")
            if K:
                opts.append(f"CASE WHEN {K} = 1 THEN 10 WHEN {K} = 2 THEN 20 ELSE 0 END")
            if B:
                opts.append(f"CASE WHEN {B} THEN 1 ELSE 2 END")
            if V and K:
                opts.append(f"CASE WHEN {V} > 1 AND {K} < 2 THEN {K} ELSE -1 END")
            return (d(st.sampled_from(opts)), "code") if opts else None
        if family == "bool":
            opts = [f"{V} > 20"] if V else []
            if K:
                opts += [f"{K} = 1", f"{K} < 2"]
            if K and V:
                opts.append(f"{K} < 2 AND {V} > 1")
            if B:
                opts.append(f"NOT {B}")
            return (d(st.sampled_from(opts)), "bool") if opts else None
        if family == "literal":
            return d(st.sampled_from(["1", "2", "0"])), "code"
        if family == "time":  # of the event time: DATE_FORMAT (as STRFTIME), HOUR
            stamps = self.cols(r, "ts", types=("TIMESTAMP",))
            if not stamps:
                return None
            T = ref(self.pick(stamps))
            return d(st.sampled_from([(f"STRFTIME({T}, '%H:%M:%S')", "vtime"),
                                      (f"STRFTIME({T}, '%Y-%m-%d %H:%M')", "vtime"),
                                      (f"HOUR({T})", "code"), (f"MINUTE({T})", "code"),
                                      (f"SECOND({T})", "code"),
                                      (f"DAYOFMONTH({T})", "code")]))
        if family == "scalar":  # Flink's functions of numbers and strings (canonical.py)
            opts = []
            if V:  # NULL outside the domain: values may be negative
                opts += [(f"SQRT({V})", "value"), (f"LN({V})", "value"),
                         (f"LOG10({V} - 20)", "value"), (f"EXP({V} / 100)", "value"),
                         (f"POWER({V}, 2)", "value"), (f"SIGN({V} - 20)", "value")]
            if K:
                text = f"CAST({K} AS VARCHAR)"
                opts += [(f"SIGN({K} - 1)", "code"), (f"POWER(2, {K})", "value"),
                         (f"CHAR_LENGTH({text})", "code"), (f"POSITION('1' IN {text})", "code")]
                if not numeric:
                    opts += [(f"SUBSTRING({text}, 1, 1)", "vnum"), (f"TRIM({text})", "vnum"),
                             (f"CONCAT({text}, '-', {text})", "vtime"),
                             (f"REPLACE({text}, '1', 'one')", "vtime"),
                             (f"INITCAP(REPLACE({text}, '1', 'wORD-x'))", "vtime")]
            return d(st.sampled_from(opts)) if opts else None
        if family == "python":  # a Python function (benchmarks/fuzz_functions.py)
            opts = fuzz_functions.options(K, V, numeric)
            return d(st.sampled_from(opts)) if opts else None
        if family == "int_arith":
            if not K:
                return None
            k2 = ref(d(st.sampled_from(keys)))
            return d(st.sampled_from([f"{K} * 2 + {k2}", f"{K} % 3", f"{K} + 1",
                                      f"{K} - {k2} * 3"])), "code"
        if family == "double_arith":
            if not V:
                return None
            other = ref(d(st.sampled_from(vals + keys)))
            return d(st.sampled_from([f"{V} * 2 + 1", f"{V} - {other}", f"{V} + {other}",
                                      f"ABS({V} - 20)", f"{V} * 0.5"])), "value"
        if family == "conversion":
            opts = []
            if K:
                opts += [(f"{K} // 2", "code"), (f"(0 - {K}) % 4", "code"),
                         (f"(0 - {K}) // 2", "code"), (f"{K} / 2", "value")]
            if V:
                opts += [(f"ROUND({V})", "value"), (f"ROUND({V}, 1)", "value")]
            if V and K:
                opts.append((f"{V} / ({K} + 1)", "value"))
            return d(st.sampled_from(opts)) if opts else None
        return self.cast(r, numeric)

    def cast(self, r: Rel, numeric: bool = False) -> tuple[str, str] | None:
        """A conversion between two of INT, BIGINT, DOUBLE, BOOLEAN, VARCHAR: the source
        type drawn first (a column, or an expression of that type over one)."""
        d = self.draw
        by_type: dict[str, list[tuple[str, str]]] = {}  # type -> (expression, hint)
        for c, t in r.node.schema.items():
            h, t = r.hints.get(c), _type(t)
            if h in ("key", "code", "value", "ival", "count", "bool", "vnum", "vbool", "id"):
                by_type.setdefault(t, []).append((ref(c), h))
        keys = [e for e, h in by_type.get("INT", []) if h in ("key", "code")]
        vals = [e for e, h in by_type.get("DOUBLE", []) if h in ("value", "ival")]
        if keys:  # numbers and conditions printed as text, a key widened
            k = self.pick(keys)
            by_type.setdefault("VARCHAR", []).append((f"CAST({k} AS VARCHAR)", "vnum"))
            by_type["VARCHAR"].append((f"CAST({k} = 1 AS VARCHAR)", "vbool"))
            by_type.setdefault("BIGINT", []).append((f"CAST({k} AS BIGINT)", "code"))
            by_type.setdefault("BOOLEAN", []).append((f"{k} = 1", "bool"))
        if vals:  # a comparison, and a shifted value for negatives
            v = self.pick(vals)
            by_type.setdefault("BOOLEAN", []).append((f"{v} > 20", "bool"))
            by_type["DOUBLE"].append((f"{v} - 20", "value"))
        if not by_type:
            return None
        pairs = []  # (source type, its expressions' position, target type)
        for t, srcs in sorted(by_type.items()):
            for i, (_, h) in enumerate(srcs):
                if t in CAST_TYPES:
                    pairs += [(t, i, x) for x in _cast_targets(t, h, numeric)]
        # one draw of the pair: every conversion about as often
        by_pair: dict[tuple[str, str], list[int]] = {}
        for t, i, x in pairs:
            by_pair.setdefault((t, x), []).append(i)
        if not by_pair:
            return None
        t, to = d(st.sampled_from(sorted(by_pair)))
        src, h = by_type[t][d(st.sampled_from(by_pair[(t, to)]))]
        out, hint = f"CAST({src} AS {to})", _cast_hint(t, h, to)
        if self.chance(25):  # and on to another type: CAST(CAST(plug_id AS VARCHAR) AS INT)
            then = [x for x in _cast_targets(to, hint, numeric) if x != t]
            if then:
                to2 = d(st.sampled_from(then))
                out, hint = f"CAST({out} AS {to2})", _cast_hint(to, hint, to2)
        return out, hint

