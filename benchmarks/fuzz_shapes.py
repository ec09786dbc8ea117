"""The families a generated query contains (`shapes_of`, `Generated.shapes`), which fuzz.py
counts per query in its report and tests/test_fuzz.py requires in every run of the
generator."""

from __future__ import annotations

import re

from sqlglot import exp

from benchmarks.fuzz_domain import KEYWORDS, WHERE, _logical, _type
from benchmarks.fuzz_sizes import _below
from federation.conventions import NATIVE_AGGREGATES
from federation.expressions import MATH, TEXT, TIME_PARTS, infer_type, to_expression
from federation.logical import Node, Rstream, is_row_level
from federation.logical.session_fold import FOLDED
from federation.python_functions import lookup

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
    "row_number", "rank", "outer_join", "time_function", "min_max_ordered", "scalar_function",
    "intersect_except", "session_window", "distinct_sum_avg", "count_distinct_tuple",
    "outer_join_never_null", "in_subquery", "not_in_subquery", "cumulate_window",
    "not_exists_subquery", "over_partition", "navigation", "frame", "distribution",
    "packed_count", "listagg", "window_where", "session_native", "session_view",
    "computed_partition", "session_rows", "python_aggregate", "window_offset",
    "windows_of_two_slides", "cumulate_held",
)

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
    if e.find(exp.TimeToStr, *TIME_PARTS):
        out.add("time_function")  # DATE_FORMAT (STRFTIME), HOUR, ... of the event time
    if e.find(*MATH, *TEXT):
        out.add("scalar_function")  # SQRT, LN, ..., CHAR_LENGTH, SUBSTRING, CONCAT, ...
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
        if k == "window" and n.where is not None:
            out.add("window_where")  # the last rows, or the sessions, of selected readings
        if k == "window" and n.computed_keys:
            out.add("computed_partition")  # a session per value of a computed key
        if k == "window" and n.offset_s:
            out.add("window_offset")  # instants at offset + k * slide
        if k == "window" and n.every_s is not None:
            out.add("windows_of_two_slides")  # a window held on the query's finer grid
        if any((w := c.row_window()) is not None and w.is_session for c in n.children) \
                and n.reads_closed_sessions():
            out.add("session_rows")  # the rows of the sessions closing at each instant
        if k == "window" and n.is_session:
            out.add("session_window")
        elif k == "window" and n.is_time_based and n.cumulate:
            out.add("cumulate_window")
            if n.every_s is not None:
                out.add("cumulate_held")  # read between its steps: its own instant's period
        elif k == "window" and not n.is_time_based:
            out.add("tuple_window")
        elif k == "select" and isinstance(n.predicate, exp.Is) and \
                n.predicate.this.name.startswith("_in_mark"):
            out.add("not_exists_subquery")  # where_in(..., anti=True): unmatched kept
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
            w = c.row_window()
            if w is not None and w.is_session and any(
                    re.fullmatch(rf"{FOLDED}\d+", name) for name, _ in n.aggs):
                out.add("session_view")  # read through a view's columns (session_fold.py)
            if [name for name, _ in n.aggs] == ["_distinct_rows"]:
                out.add("select_distinct")
            for name, call in n.aggs:
                out |= _name_shapes(name)
                if call.func == "count_distinct":
                    out.add("count_distinct")
                    if _distinct_tuple(call.arg):
                        out.add("count_distinct_tuple")  # COUNT(DISTINCT a, b)
                if call.func in ("sum_distinct", "avg_distinct"):
                    out.add("distinct_sum_avg")
                if call.func in ("listagg", "listagg_distinct"):
                    out.add("listagg")
                if call.func in ("python", "python_distinct"):
                    out.add("python_aggregate")
                if call.func in NATIVE_AGGREGATES:  # STDDEV, MEDIAN, ... of a session's rows
                    out.add("session_native")
                if call.func in ("min", "max") and n.schema[name] in ("VARCHAR", "TIMESTAMP"):
                    out.add("min_max_ordered")  # of strings or times
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
            if any(p.kind == "aggregate" and "_set_l" in dict(p.aggs) for p in q.walk()):
                out.add("intersect_except")  # federation/logical/union.py set_operation
        elif k == "row_number":
            out.add("row_number" if n.function == "row_number" else "rank")
            if n.name.startswith("_dist_"):
                out.add("distribution")  # NTILE, PERCENT_RANK (frames.distribution)
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
            if any(a.startswith("_over_null") for a, _ in n.keys):
                out.add("over_partition")  # Relation.over: NULL-safe keys
            if any(a.startswith("_nav_") for a in n.right.schema):
                out.add("navigation")  # Relation.lag, .first_value: rows numbered, joined
            if any(a.startswith("_frame_rpos") for a in n.right.schema):
                out.add("frame")  # frames.framed: each row joined with its partition's
            if any(r.startswith("_in_key") for _, r in n.keys):
                out.add("not_in_subquery" if n.how == "left" else "in_subquery")  # where_in
            if n.how != "inner":
                out.add("outer_join")  # LEFT, RIGHT or FULL: rows with NULLs
                missable = [n.right] * (n.how in ("left", "full")) + [n.left] * (
                    n.how in ("right", "full"))
                if any(side.kind == "project" and any(
                        isinstance(e, (exp.Literal, exp.Boolean, exp.Coalesce)) or (
                            isinstance(e, exp.Add) and e.find(exp.Coalesce))
                        for _, e in side.outputs) for side in missable):
                    out.add("outer_join_never_null")  # a constant the join pads with NULL
            if any(_origin(n, c) is not None for c in n.schema):
                out.add("computed_across_join")
    if _packed(q):
        out.add("packed_count")
    if placements and _cuts_every_boundary(q, placements):
        out.add("cut_every_boundary")
    if len({n.stream.name for n in q.walk() if n.kind == "window"}) > 1:
        out.add("two_streams")
    if any(n.kind == "table" for n in q.walk()):
        out.add("table_join")
    return frozenset(out)


def _packed(q: Rstream) -> bool:
    """True when the pure-DuckDB plan counts rows over packs (federation/packing.py)."""
    from federation.packing import packed_count

    plan = _logical(q)
    ops = set(plan.r2r_ids)
    return any(packed_count(plan, ops, o) is not None for o in ops)


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


def _distinct_tuple(arg: exp.Expression | None) -> bool:
    """COUNT(DISTINCT a, b)'s argument (expressions.distinct_tuple), FILTER's CASE or not."""
    return arg is not None and arg.find(exp.Struct) is not None
