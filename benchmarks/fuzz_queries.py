"""The query generator of the differential fuzzer: a Hypothesis strategy of random valid
queries over the smart-plug stream, with placements and a micro-batch size (fuzz.py runs
them).

Besides windows, selections, projections, aggregations and joins in random orders, it
writes the families strangers write: joins of window rows over windows of different ranges,
each side with its own selection and renaming projection, often aggregated (by a key or
globally) and projected; computed columns of every type (CASE, comparisons, literals,
integer and double arithmetic, casts between INT, BIGINT, DOUBLE, BOOLEAN and VARCHAR,
integer division, modulo of negatives, ROUND), carried through joins and used as aggregate
keys and arguments; output names in camelCase, UPPER case, 40-60 characters long, or equal
to SQL keywords and function names; and, per query, explicit placements that cut every
parent-child edge of the plan both ways. `shapes_of` names the families a query contains
(`Generated.shapes`, counted by fuzz.py's report).
"""

from __future__ import annotations

import keyword
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st
from sqlglot import exp

from benchmarks import fuzz_functions
from federation.expressions import (
    avg,
    count,
    count_distinct,
    infer_type,
    max_,
    min_,
    split_conjuncts,
    sum_,
    to_expression,
)
from federation.logical import Node, NumberedPlan, Rstream, is_row_level, table, window
from federation.python_functions import lookup
from federation.smartplug import PLUG_KEYS, smartplug_stream

RATE, PLUGS, HOUSES, SECONDS = 30, 6, 2, 20
#: generated joins stay below this many rows per instant (the fuzzer checks correctness;
#: a near cross product of window rows only costs memory and time)
MAX_ROWS_PER_INSTANT = 4_000
#: a subtree takes no more joins once it has this many operators (runs stay short)
MAX_OPS = 10
#: distinct values of the stream's small-domain columns in the fuzz data (`generate(...,
#: plugs=6, houses=2)`: 2 houses of one household with 3 plugs each, every plug sending
#: RATE / PLUGS rows a second, half of them work and half load)
DOMAINS = {"house_id": HOUSES, "household_id": 1, "plug_id": PLUGS // HOUSES, "property": 2}
AGGS = {"count": count, "sum": sum_, "avg": avg, "min": min_, "max": max_,
        "count_distinct": count_distinct}
#: output names equal to SQL keywords or function names (never `by` or `self`: arguments
#: of the DSL methods; never true/false/null: literals)
KEYWORDS = ("load", "work", "order", "select", "group", "count", "sum", "avg", "min", "max",
            "date", "user", "end", "from", "key", "value2", "table", "where", "limit",
            "window", "range", "rows", "case", "when", "cast", "round", "year", "time",
            "timestamp", "interval", "left", "right", "join", "on", "as", "having", "first",
            "last", "filter", "over", "partition", "desc", "values", "index", "level",
            "position", "type", "result", "total", "text", "month", "day", "hour", "second")
_WORDS = ("max", "min", "sum", "avg", "total", "peak", "load", "work", "plug", "house",
          "count", "mean", "high", "low", "power", "energy", "rows", "share", "level")
_LONG = ("average", "load", "of", "every", "plug", "in", "the", "household", "over", "last",
         "window", "per", "house", "and", "slide", "instant", "measured", "power", "work")
#: the types casts convert between (DOUBLE -> VARCHAR is left out: the engines print
#: doubles differently, and the DSL refuses it)
CAST_TYPES = ("INT", "BIGINT", "DOUBLE", "BOOLEAN", "VARCHAR")
#: the shapes each query is tagged with (fuzz.py counts queries per shape); `cast:A>B`
#: tags (one per pair of types converted) come on top
SHAPES = (
    "tuple_window", "rows_join", "rows_join_diff_ranges", "rows_x_aggregate_join",
    "aggregate_join", "self_join", "join_renamed_keys", "chained_aggregate",
    "global_aggregate", "agg_over_rows_join", "global_agg_over_join", "group_by_computed",
    "agg_arg_computed", "computed_across_join", "computed_case", "computed_bool",
    "computed_literal", "computed_int_arith", "computed_double_arith", "cast", "conversion",
    "name_camel", "name_upper", "name_long", "name_keyword", "keyword_in_expression",
    "cut_every_boundary", "two_streams", "table_join", "query_set", "instant_join",
    "group_by_renamed", "group_by_table_column", "sliced_computed_key", "aggregate_filter",
    "count_distinct", "select_distinct", "union_all", "python_function",
)
#: the key under which `written` keeps an aggregate's FILTER condition (name + WHERE)
WHERE = "/where"
#: the second stream a window may read (`s2` in the sources): the smart-plug schema under
#: another name, its data from another seed, starting later and ending earlier (fuzz.py)
OTHER = "other"
#: the database table a join may read (`T` in the sources: its DuckDB file, `table_db()`):
#: a device per (house, household) of the fuzz data and one house beyond it; some pairs
#: missing (their rows join nothing) and one twice (its rows join twice)
TABLE = "devices"


def table_db() -> Path:
    """The DuckDB file holding TABLE, made once per machine (the same rows every time)."""
    import os
    import tempfile

    import duckdb

    path = Path(tempfile.gettempdir()) / "fedq-fuzz" / "devices-v1.duckdb"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{os.getpid()}.duckdb")
        con = duckdb.connect(str(tmp))
        con.execute(
            f"CREATE TABLE {TABLE} AS SELECT h::INT AS house_id, hh::INT AS household_id, "
            "((h * 7 + hh) % 5)::INT AS rank, 0.1 + ((h * 3 + hh) % 7) * 0.05 AS tariff, "
            "'d' || h || '-' || hh AS label, (h + hh) % 2 = 0 AS active "
            f"FROM range({HOUSES + 1}) a(h), range(2) b(hh) WHERE (h + 2 * hh) % 3 != 2 "
            "UNION ALL SELECT 0, 0, 4, 0.5, 'dup', true")
        con.close()
        os.replace(tmp, path)
    return path


@dataclass
class Generated:
    """A query and the DSL source that builds it (for the report and for reproducing)."""

    query: Rstream
    source: str
    placements: list[str] = field(default_factory=list)
    batch_s: int = 5
    shapes: frozenset[str] = frozenset()
    #: how a stage without SPE-ops is fed (federation/runtime/direct.py): its spool read
    #: in the process, or Spark forwarding every row
    feed: str = "direct"

    def __repr__(self) -> str:  # Hypothesis prints this for a falsifying example
        return (f"{self.source}  # placements {self.placements}, {self.batch_s} s per batch, "
                f"feed {self.feed}")


@dataclass(frozen=True)
class Rel:
    """A subtree while it is drawn: the node, its DSL source and a hint per column (what
    its values are like: key, code, bool, vnum, vbool, value, ival, count, id, ts)."""

    node: Node
    src: str
    hints: dict


#: hints of columns an aggregation may group by (small domains)
GROUPABLE = ("key", "code", "bool", "vnum", "vbool")
#: hints of numeric columns aggregates and arithmetic read
NUMERIC = ("key", "code", "value", "ival", "count")


def _plain_kwarg(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _render_kwargs(items: list[tuple[str, str]]) -> list[str]:
    """Keyword arguments in order; names Python cannot take as keywords (`from`, `as`) go
    through `**{...}`."""
    out: list[str] = []
    odd: list[str] = []
    for n, v in items:
        if _plain_kwarg(n):
            if odd:
                out.append("**{" + ", ".join(odd) + "}")
                odd = []
            out.append(f"{n}={v}")
        else:
            odd.append(f"{n!r}: {v}")
    if odd:
        out.append("**{" + ", ".join(odd) + "}")
    return out


def ref(name: str) -> str:
    """A column inside a compound expression string: double-quoted when it is a keyword or
    does not parse as a plain column."""
    if name.lower() in KEYWORDS or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return '"' + name.replace('"', '""') + '"'
    try:
        e = to_expression(f"{name} + 1")
    except Exception:  # noqa: BLE001 - any parse failure: quote it
        return f'"{name}"'
    ok = isinstance(e, exp.Add) and isinstance(e.left, exp.Column) and e.left.name == name
    return name if ok else f'"{name}"'


def bare(name: str) -> str:
    """A column alone as an aggregate's argument: as is when it parses as that column."""
    try:
        e = to_expression(name)
    except Exception:  # noqa: BLE001
        return ref(name)
    return name if isinstance(e, exp.Column) and e.name == name else ref(name)


def _type(t: str) -> str:
    return "VARCHAR" if t in ("TEXT", "STRING") else t


def _cast_targets(t: str, hint: str, numeric: bool = False) -> list[str]:
    """The types a `t` value with this hint is cast to: not DOUBLE to VARCHAR (refused),
    text only to what it holds (numbers, or true/false)."""
    targets = [x for x in CAST_TYPES if x != t]
    if t == "DOUBLE":
        targets.remove("VARCHAR")
    if t == "VARCHAR":
        targets = ["BOOLEAN"] if hint == "vbool" else ["INT", "BIGINT", "DOUBLE"]
    if numeric:
        targets = [x for x in targets if x in ("INT", "BIGINT", "DOUBLE")]
    return targets


def _cast_hint(t: str, hint: str, to: str) -> str:
    """The hint of a `t` value with this hint cast to `to`."""
    small = hint in ("key", "code", "bool", "vnum", "vbool")
    if to == "BOOLEAN":
        return "bool"
    if to == "DOUBLE":
        return "value"
    if to == "VARCHAR":
        return "vbool" if t == "BOOLEAN" or hint == "vbool" else "vnum"
    return "code" if small else ("count" if hint == "count" else "ival")


class _Builder:
    """Draws one query: nodes with their DSL source and a hint per column."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.stream = smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES)
        self.other = smartplug_stream(rate=RATE, plugs=PLUGS, houses=HOUSES, name=OTHER)
        self.slide = draw(st.sampled_from([0.5, 1.0, 2.0]))
        self.n = 0
        self.used = {c.lower() for c in self.stream.columns}
        #: the expressions as written, by (id of the node, output name): the DSL keeps
        #: them in the form every engine computes alike (CAST as TRY_CAST(TRUNC(..)), ...)
        self.raw: dict[tuple[int, str], str] = {}
        self._alive: list[Node] = []  # keeps the ids in `raw` those of these nodes
        self.computed_cols: set[str] = set()

    def written(self, node: Node, exprs: dict[str, str]) -> None:
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
    def filter(self, r: Rel, predicate: str) -> Rel | None:
        try:
            return Rel(r.node.filter(predicate), f"{r.src}.filter({predicate!r})", r.hints)
        except ValueError:
            return None

    def project(self, r: Rel, keep: list[str], outputs: list[tuple[str, str, str]]
                ) -> Rel | None:
        """keep: columns by name; outputs: (name, expression, hint)."""
        try:
            node = r.node.project(*keep, **{n: e for n, e, _ in outputs})
        except ValueError:
            return None
        self.written(node, {n: e for n, e, _ in outputs})
        self.computed_cols |= {n for n, e, _ in outputs if e not in r.node.schema}
        args = [repr(c) for c in keep] + _render_kwargs([(n, repr(e)) for n, e, _ in outputs])
        hints = {c: r.hints.get(c, "value") for c in keep}
        hints.update({n: h for n, _, h in outputs})
        return Rel(node, f"{r.src}.project({', '.join(args)})", hints)

    def aggregate_call(self, r: Rel, keys: list[str], aggs: list[tuple[str, str, str | None,
                                                                        str, str | None]]
                       ) -> Rel | None:
        """aggs: (name, function, argument or None, hint, FILTER's condition or None)."""
        try:
            node = r.node.aggregate(by=keys, **{
                n: AGGS[f](*([] if a is None else [a]), where=w) for n, f, a, _, w in aggs})
        except ValueError:
            return None
        self.written(node, {n: a for n, _, a, _, w in aggs if a is not None and w is None})
        self.written(node, {f"{n}{WHERE}": w for n, _, _, _, w in aggs if w is not None})
        parts = [(n, f"{AGGS[f].__name__}({'' if a is None else repr(a)}"
                  + ("" if w is None else f"{', ' if a else ''}where={w!r}") + ")")
                 for n, f, a, _, w in aggs]
        hints = {k: r.hints.get(k, "code") for k in keys}
        hints.update({n: h for n, _, _, h, _ in aggs})
        src = f"{r.src}.aggregate(by={keys!r}, {', '.join(_render_kwargs(parts))})"
        return Rel(node, src, hints)

    def distinct(self, r: Rel) -> Rel:
        try:
            return Rel(r.node.distinct(), f"{r.src}.distinct()", r.hints)
        except ValueError:  # a relation of a table alone: no window to group over
            return r

    def join_call(self, left: Rel, right: Rel, on: list) -> Rel | None:
        try:
            node = left.node.join(right.node, on=on)
        except ValueError:
            return None
        rkeys = {k if isinstance(k, str) else k[1] for k in on}
        hints = {**left.hints, **{c: h for c, h in right.hints.items() if c not in rkeys}}
        return Rel(node, f"{left.src}.join({right.src}, on={on!r})", hints)

    # -- leaves ----------------------------------------------------------------------------
    def window(self, range_s: float | None = None) -> Rel:
        d = self.draw
        # a window over the second stream now and then (a query over two streams)
        stream, name = (self.other, "s2") if self.chance(25) else (self.stream, "s")
        if range_s is None and self.chance(16):
            rows = d(st.sampled_from([5, 20]))
            w = window(stream, rows=rows, slide=self.slide)
            src = f"window({name}, rows={rows}, slide={self.slide:g})"
        else:
            if range_s is None:
                k = d(st.integers(1, 6))
                extra = d(st.sampled_from([0.0, 0.0, 0.5, 0.25]))  # ranges the slide won't divide
                range_s = self.slide * (k + extra)
            w = window(stream, range=range_s, slide=self.slide)
            src = f"window({name}, range={range_s:g}, slide={self.slide:g})"
        hints = {"value": "value", "property": "code", "house_id": "key",
                 "household_id": "key", "plug_id": "key", "id": "id", "ts": "ts"}
        return Rel(w, src, hints)

    def table(self) -> Rel:
        """The database table, often filtered, as the right side of a join."""
        t = Rel(table(TABLE, db=table_db()), f"table({TABLE!r}, db=T)",
                {"house_id": "key", "household_id": "key", "rank": "code", "tariff": "value",
                 "label": "vnum", "active": "bool"})
        if self.chance(50):
            t = self.filter(t, self.draw(st.sampled_from(["active", "rank < 3",
                                                          "tariff > 0.2"]))) or t
        return t

    def leaf(self) -> Rel:
        r = self.window()
        if self.chance(50):
            r = self.select(r)
        if self.chance(15):  # the window's rows with the database table (then often grouped
            r = self.join(r, 0, table=True)  # by one of its columns)
        return r

    # -- unary -----------------------------------------------------------------------------
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
                "double_arith", "conversion", "conversion", "cast", "cast", "cast", "python"]
        if numeric:
            fams = ["case", "int_arith", "double_arith", "double_arith", "conversion", "cast",
                    "cast", "python"]
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
        for _ in range(d(st.integers(1, 3))):
            f = d(st.sampled_from(sorted(AGGS))) if nums else "count"
            # FILTER (WHERE ...): the aggregate of the rows where a predicate holds
            where = self.predicate(r) if self.chance(5) else None
            if f == "count_distinct":  # of any column (a key, a code, a value)
                arg = bare(d(st.sampled_from(list(r.node.schema))))
                aggs.append((self.fresh("d", "distinct"), f, arg, "count", where))
                continue
            if f == "count":
                arg = None
                if self.chance(15):
                    arg = bare(d(st.sampled_from(list(r.node.schema))))
                aggs.append((self.fresh("n", "count"), "count", arg, "count", where))
                continue
            c = d(st.sampled_from(nums))
            arg, h = bare(c), r.hints.get(c)
            if self.chance(15):  # a computed argument
                got = self.computed(r, numeric=True)
                if got is not None:
                    arg, h = got
            if f == "avg":
                hint = "value"
            elif h == "count":
                hint = "count"
            else:
                hint = "code" if f in ("min", "max") and h in ("key", "code") else "value"
            aggs.append((self.fresh(f[0], f), f, arg, hint, where))
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

    # -- whole subtrees --------------------------------------------------------------------
    def relation(self, depth: int, top: bool = True) -> Rel:
        """A subtree: a leaf or a join of window rows, then operators in a random order
        (no more joins once it has MAX_OPS operators)."""
        d = self.draw
        r = self.rows_join() if self.chance(40 if top else 8) else self.leaf()
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
        """`r` UNION ALL another relation whose columns, of `r`'s types, a projection
        renames to `r`'s (SQL's by position), else `r` through a selection (a union of
        a subtree with itself)."""
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
        try:
            node = r.node.union_all(right.node)
        except ValueError:  # a side of tables alone, or another slide
            return r
        return Rel(node, f"{r.src}.union_all({right.src})", r.hints)

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
            right = agg
        # rename the right side's other columns: no ambiguous names
        outputs = [(self.fresh("r", c.split("_")[0]), c, right.hints.get(c, "value"))
                   for c in right.node.schema if c not in keys]
        rproj = self.project(right, keys, outputs)
        if rproj is None:
            return left
        out = self.join_call(left, rproj, keys)
        if out is None or estimated_rows(out.node) > MAX_ROWS_PER_INSTANT:
            return left  # a near cross product: skip it
        tabled = [c for c in rproj.node.schema if c not in keys
                  and rproj.hints.get(c) in GROUPABLE] if right.node.kind == "table" else []
        if tabled and self.chance(50):  # aggregated by a table's column (issue 41)
            out = self.aggregate(out, keys=[self.draw(st.sampled_from(tabled))]) or out
        return out


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
        rows = float(node.rows) if node.rows else RATE * node.range_s
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
    left, right = _size(node.left), _size(node.right)
    if k == "union":  # both sides' rows; a value may be on both sides
        dist = {c: left.distinct[c] + right.distinct[c] for c in left.distinct
                if c in right.distinct}
        return _Size(left.rows + right.rows, dist, ())
    lk = [a for a, _ in node.keys]
    rk = [b for _, b in node.keys]
    rows = left.rows * right.rows / max(_keys_card(left, lk), _keys_card(right, rk), 1.0)
    dist = {c: v for c, v in right.distinct.items() if c not in rk}
    dist.update(left.distinct)
    for a, b in node.keys:
        known = [x for x in (left.distinct.get(a), right.distinct.get(b)) if x is not None]
        if known:
            dist[a] = min(known)
    dist = {c: min(v, rows) for c, v in dist.items()}
    right_unique = any(u <= set(rk) for u in right.unique)
    return _Size(rows, dist, left.unique if right_unique else ())


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


# -- shapes --------------------------------------------------------------------------------


def _origin(node: Node, col: str) -> exp.Expression | None:
    """The computed expression a column comes from (None: a stream column or an aggregate)."""
    while True:
        k = node.kind
        if k == "project":
            e = dict(node.outputs)[col]
            if not isinstance(e, exp.Column):
                return e
            node, col = node.child, e.name
        elif k in ("select", "rstream"):
            node = node.child
        elif k == "aggregate":
            if col not in node.keys:
                return None
            node = node.child
        elif k == "join":
            if col in node.left.schema:
                node = node.left
            else:
                node = node.right
        else:
            return None


def _lineage(node: Node, col: str) -> tuple[bool, bool, str | None]:
    """Where a column comes from: (computed by a projection, renamed by one, the kind of
    its leaf: "window", "table", or None for an aggregate's output)."""
    computed = renamed = False
    while True:
        k = node.kind
        if k == "project":
            e = dict(node.outputs)[col]
            if not isinstance(e, exp.Column):
                computed = True
                col = next((c.name for c in e.find_all(exp.Column)), None)
                if col is None:  # a literal
                    return computed, renamed, None
            elif e.name != col:
                renamed = True
                col = e.name
            node = node.child
        elif k in ("select", "rstream"):
            node = node.child
        elif k == "aggregate":
            if col not in node.keys:
                return computed, renamed, None
            node = node.child
        elif k == "join":
            node = node.left if col in node.left.schema else node.right
        elif k == "table":
            return computed, renamed or col not in dict(node.columns), "table"
        else:
            return computed, renamed, k


def _over_window_rows(node: Node) -> bool:
    """Window rows through selections and projections alone (what a DB-op folds into a
    slice table when the aggregation above and these are all in it)."""
    while node.kind in ("select", "project"):
        node = node.child
    return node.kind == "window"


def _name_shapes(name: str) -> set[str]:
    out = set()
    if re.fullmatch(r"[a-z]+(?:[A-Z][a-z0-9]*)+", name):
        out.add("name_camel")
    if any(ch.isalpha() for ch in name) and name.upper() == name:
        out.add("name_upper")
    if len(name) >= 40:
        out.add("name_long")
    if name.lower() in KEYWORDS:
        out.add("name_keyword")
    return out


def _safe_type(e: exp.Expression, schema: dict) -> str | None:
    try:
        return _type(infer_type(e, schema))
    except Exception:  # noqa: BLE001 - a form the inference does not know
        return None


def _expr_shapes(e: exp.Expression, schema: dict) -> set[str]:
    out = set()
    if e.find(exp.Case):
        out.add("computed_case")
    casts = list(e.find_all(exp.Cast))
    if casts:
        out.add("cast")
    for c in casts:
        t = _safe_type(c.this, schema)
        if t is not None:
            out.add(f"cast:{t}>{_type(c.to.sql(dialect='duckdb').upper())}")
    if any(lookup(a.name) is not None for a in e.find_all(exp.Anonymous)):
        out.add("python_function")
    if e.find(exp.IntDiv, exp.Mod, exp.Div, exp.Round):
        out.add("conversion")
    if isinstance(e, exp.Literal):
        out.add("computed_literal")
    t = _safe_type(e, schema)
    arith = e.find(exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.IntDiv, exp.Div)
    if t == "BOOLEAN" and not isinstance(e, exp.Column):
        out.add("computed_bool")
    if arith and t in ("INT", "BIGINT"):
        out.add("computed_int_arith")
    if arith and t == "DOUBLE":
        out.add("computed_double_arith")
    for c in e.find_all(exp.Column):
        if c.name.lower() in KEYWORDS and not isinstance(e, exp.Column):
            out.add("keyword_in_expression")
    return out


def shapes_of(q: Rstream, placements: list[str] = (), raw: dict | None = None
              ) -> frozenset[str]:
    """The families (SHAPES, and `cast:A>B` per conversion) the query and its placements
    contain, read from the query itself; `raw`: the expressions as written by (id of the
    node, output name) (the DSL keeps them rewritten for the engines, CAST as TRY_CAST...)."""
    raw = raw or {}

    def written(n: Node, name: str, e: exp.Expression) -> exp.Expression:
        text = raw.get((id(n), name))
        return e if text is None else to_expression(text)

    out: set[str] = set()
    for n in q.walk():
        k = n.kind
        if k == "window" and not n.is_time_based:
            out.add("tuple_window")
        elif k == "project":
            for name, e in n.outputs:
                if not (isinstance(e, exp.Column) and e.name == name):
                    out |= _name_shapes(name)
                if not isinstance(e, exp.Column):
                    out |= _expr_shapes(written(n, name, e), n.child.schema)
        elif k == "aggregate":
            c = n.child
            if not n.keys:
                out.add("global_aggregate")
                if _below(c, "join"):
                    out.add("global_agg_over_join")
            if any(x.kind == "aggregate" for x in c.walk()):
                out.add("chained_aggregate")
            if _below(c, "join"):
                j = c
                while j.kind != "join":
                    j = j.child
                if is_row_level(j.left) and is_row_level(j.right):
                    out.add("agg_over_rows_join")
            if any(_origin(c, key) is not None for key in n.keys):
                out.add("group_by_computed")
            lineage = [_lineage(c, key) for key in n.keys]
            if any(renamed for _, renamed, _ in lineage):
                out.add("group_by_renamed")
            if any(leaf == "table" for *_, leaf in lineage):
                out.add("group_by_table_column")
            if any(comp or ren for comp, ren, _ in lineage) and _over_window_rows(c):
                out.add("sliced_computed_key")  # a DB-op folds it into a slice table
            if [name for name, _ in n.aggs] == ["_distinct_rows"]:
                out.add("select_distinct")
            for name, call in n.aggs:
                out |= _name_shapes(name)
                if call.func == "count_distinct":
                    out.add("count_distinct")
                if (id(n), f"{name}{WHERE}") in raw:
                    out.add("aggregate_filter")
                    continue
                if call.arg is None:
                    continue
                if not isinstance(call.arg, exp.Column) or _origin(c, call.arg.name) is not None:
                    out.add("agg_arg_computed")
                if not isinstance(call.arg, exp.Column):
                    out |= _expr_shapes(written(n, name, call.arg), c.schema)
        elif k == "union":
            out.add("union_all")
        elif k == "join":
            lr, rr = is_row_level(n.left), is_row_level(n.right)
            if lr and rr:
                out.add("rows_join")
                ranges = {w.range_s for side in (n.left, n.right) for w in side.walk()
                          if w.kind == "window"}
                if len(ranges) > 1:
                    out.add("rows_join_diff_ranges")
            elif lr or rr:
                out.add("rows_x_aggregate_join")
            else:
                out.add("aggregate_join")
            if n.left.kind != "window" and any(x == n.left for x in n.right.walk()):
                out.add("self_join")  # the left subtree again on the right (renamed, ...)
            if any(a != b for a, b in n.keys):
                out.add("join_renamed_keys")
            if not n.keys:
                out.add("instant_join")  # on the window's instant alone (Nexmark q5)
            if any(_origin(n, c) is not None for c in n.schema):
                out.add("computed_across_join")
    if placements and _cuts_every_boundary(q, placements):
        out.add("cut_every_boundary")
    if len({n.stream.name for n in q.walk() if n.kind == "window"}) > 1:
        out.add("two_streams")
    if any(n.kind == "table" for n in q.walk()):
        out.add("table_join")
    return frozenset(out)


def _cuts_every_boundary(q: Rstream, placements: list[str]) -> bool:
    """True when the plan has parent-child pairs of operators and, for each, a placement
    puts the parent in Spark and the child in the DB, and another the other way round."""
    from federation.physical import parse_placement

    plan = _logical(q)
    ops = set(plan.r2r_ids)
    pairs = [(plan.parent[c], c) for c in ops if plan.parent.get(c) in ops]
    pls = [parse_placement(plan, p) for p in placements if p != "auto"]
    return bool(pairs) and all(
        any(pl[p] == a and pl[c] == b for pl in pls)
        for p, c in pairs for a, b in (("spe", "db"), ("db", "spe")))


# -- the strategy --------------------------------------------------------------------------


@st.composite
def queries(draw, max_depth: int = 3) -> Generated:
    """A random valid query over the smart-plug stream, with placements and a batch size."""
    b = _Builder(draw)
    r = b.relation(draw(st.integers(1, max_depth)))
    if _below(r.node, "join") and b.chance(25):  # an aggregate over the join on top
        r = b.aggregate(r, global_pct=50) or r
    if r.node.kind == "window":
        r = b.select(r)
        if r.node.kind == "window":
            r = b.projection(r)
    if b.chance(15):
        r = b.projection(r, computed=1)
    if b.chance(6):  # SELECT DISTINCT: a group by every column, its count dropped
        r = b.distinct(r)
    q = r.node.rstream("Q")
    placements = ["spe", "db", "auto"] + _explicit_placements(draw, q)
    batch = draw(st.sampled_from([3, 5, 10]))
    # the feed from the source, not drawn: the same queries as before the direct feed
    feed = random.Random(r.src).choice(["direct", "spe"])
    return Generated(q, f"{r.src}.rstream('Q')", placements, batch,
                     shapes_of(q, placements, b.raw), feed)


def _explicit_placements(draw, q: Rstream) -> list[str]:
    """Operators alternating engine by depth (every parent and child in different
    engines), its complement, and one random placement; each fixed for what Spark cannot
    run (`spe_limits`: readers of tuple windows go to db), deduplicated, leaving out those
    that put every operator in one engine (the `spe` and `db` placements already run)."""
    ops = _logical(q).r2r_ids
    random = dict(zip(ops, draw(st.lists(st.sampled_from(["spe", "db"]), min_size=len(ops),
                                         max_size=len(ops)))))
    return alternating_placements(q, extra=[random])


def alternating_placements(q: Rstream, extra: list[dict[str, str]] = ()) -> list[str]:
    """The placement that alternates engines by depth (operator ids as `run` numbers
    them), its complement, then `extra`; each fixed for what Spark cannot run, those with
    every operator in one engine left out, deduplicated."""
    from federation.physical import placement_string, spe_limits

    plan = _logical(q)
    ops = plan.r2r_ids

    def depth(o: str) -> int:
        n = 0
        while plan.parent.get(o) in ops:
            o, n = plan.parent[o], n + 1
        return n

    alternating = {o: ("spe", "db")[depth(o) % 2] for o in ops}
    complement = {o: ("db", "spe")[depth(o) % 2] for o in ops}
    out = []
    for pl in (alternating, complement, *(dict(x) for x in extra)):
        for o, _ in spe_limits(plan, pl):
            pl[o] = "db"
        if len(set(pl.values())) > 1:  # all in one engine: the 'spe' or 'db' placement
            out.append(placement_string(pl))
    return list(dict.fromkeys(out))


def _logical(q) -> NumberedPlan:
    """The plan whose operator ids explicit placements name (as `run` numbers it)."""
    from costmodel.profile import load_profile
    from federation.optimizer.phase_one import phase_one

    return NumberedPlan.of(phase_one(q, load_profile()))


def as_query_set(g: Generated) -> Generated:
    """`g` run together with a global COUNT over its own result (fuzz.py --sets): the two
    share `g`'s whole plan, whose top is then a result and an input of another operator.
    Placements: `g`'s, the explicit ones carried onto the merged plan,
    with the COUNT in the other engine than the operator below it (one boundary more), and
    runnable (`physical.db_cycle`: a self-join's equal sides are one operator there)."""
    import dataclasses

    from federation.logical import QuerySet
    from federation.optimizer.query_set import aligned
    from federation.physical import db_cycle, placement_string

    a = g.query
    b = a.child.aggregate(by=[], rows_of_q=_count()).rstream("Qn")
    qs = QuerySet((a, b))
    merged, local = _logical(qs), _logical(a)
    ids = aligned(merged, local, a.name)
    top = merged.tops["Qn"]
    placements = []
    for pl in g.placements:  # in their order (fuzz.some_placements put the cutting first)
        if "=" not in pl:
            placements.append(pl)
            continue
        eng = dict(x.split("=") for x in pl.split(","))
        mine = {ids[o]: e for o, e in eng.items() if o in ids}
        mine[top] = "spe" if mine.get(merged.tops[a.name]) == "db" else "db"
        full = {o: mine.get(o, "spe") for o in merged.r2r_ids}
        # equal subtrees of `g` (a self-join's sides) are one operator of the merged plan:
        # the SPE-ops between a DB-op and its own output go to db (else refused, rightly)
        while between := db_cycle(merged, full):
            full.update(dict.fromkeys(between, "db"))
        placements.append(placement_string(full))
    return dataclasses.replace(g, query=qs, placements=list(dict.fromkeys(placements)),
                               source=g.source + "  # with Qn: a global COUNT over it",
                               shapes=g.shapes | {"query_set"})


def _count():
    from federation.expressions import count

    return count()
