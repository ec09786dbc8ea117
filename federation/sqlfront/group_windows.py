"""Flink's legacy group windows, rewritten to the window table functions they stand for.

    SELECT k, COUNT(*), TUMBLE_START(ts, INTERVAL '10' SECOND) AS s
    FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)

is, in Flink as here, each 10-s window's groups once when it closes:

    SELECT k, COUNT(*), window_start AS s
    FROM TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND) AS s
    GROUP BY window_start, window_end, k

`HOP(ts, slide, size)` becomes `HOP(TABLE s, DESCRIPTOR(ts), slide, size)` (an offset after
the sizes goes with them: Calcite's alignment of TUMBLE and HOP); `SESSION(ts,
gap)` becomes `SESSION(TABLE s PARTITION BY k1, k2, DESCRIPTOR(ts), gap)`, a session per
combination of the other GROUP BY columns (Flink's legacy sessions are per group);
`<F>_START(ts, ...)` and `<F>_END(ts, ...)` are `window_start` and `window_end`. The FROM
item is one stream (with its alias, else its name, so `B.price` still reads it), or
subqueries that select and project its rows, passing its time column (and a SESSION's
keys) on unchanged: the window goes around the stream in the innermost FROM (a selection
and a projection commute with TUMBLE and HOP). A SESSION over a subquery is the window
table function over it, the sessions of its readings (views.py). A join is refused (a join
of streams without windows holds every row so far), as are `<F>_ROWTIME`/`<F>_PROCTIME`
and two group windows in one GROUP BY, each with the window table function to write. A
SESSION grouped by an expression is a session per value of it: the expression becomes a
column of a subquery in FROM, computed of each reading, and its WHERE selects the readings
sessions are made of (`_session_rows`).
"""

from __future__ import annotations

from sqlglot import exp

FUNCS = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "SESSION": ("gap",)}  # after ts


def _session_rows(sel: exp.Select, keys: list) -> list[exp.Expression]:
    """The readings a legacy SESSION groups: those its WHERE keeps (Flink selects before
    it groups: the sessions of the readings selected), with its GROUP BY expressions as
    columns (`_g1`, ...) that the SELECT list, HAVING and ORDER BY read where they wrote
    the expression (a session per value of a key computed of each reading); a subquery in
    FROM, the window's own selection and keys (views.py)."""
    frm = sel.args.get("from_") or sel.args.get("from")
    src = frm.this if frm is not None else None
    where = sel.args.get("where")
    if src is None or sel.args.get("joins") or all(isinstance(k, exp.Column) for k in keys) \
            and where is None:
        return keys  # refused below, or the stream's own columns
    made: dict[str, str] = {}  # an expression's SQL -> its column
    items, out = [], []
    for k in keys:
        if isinstance(k, exp.Column):
            out.append(k)
            continue
        if k.sql() not in made:
            made[k.sql()] = f"_g{len(made) + 1}"
            items.append(exp.alias_(k.copy(), made[k.sql()]))
        out.append(exp.column(made[k.sql()]))
    inner = exp.select(exp.Star(), *items).from_(src.copy())
    if where is not None:
        inner.set("where", where.copy())
        sel.set("where", None)
    frm.set("this", exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(
        src.alias_or_name))))
    for node in (*sel.expressions, sel.args.get("having"), sel.args.get("order")):
        for e in [] if node is None else list(node.walk()):
            if e.sql() in made:  # where the GROUP BY expression is written again
                e.replace(exp.column(made[e.sql()]))
    return out


def _is(e: exp.Expression, names) -> bool:
    return isinstance(e, exp.Anonymous) and e.name.upper() in names


def rewrite(tree: exp.Expression, text, dialect) -> exp.Expression:
    """`tree` with each SELECT's legacy group window made a window table function;
    `text` (a SqlText) places a refusal, `dialect` parses the function written."""
    for sel in list(tree.find_all(exp.Select)):
        group = sel.args.get("group")
        wins = [g for g in (group.expressions if group else []) if _is(g, FUNCS)]
        if wins:
            _one(sel, group, wins, text, dialect)
    return tree


def _one(sel: exp.Select, group: exp.Group, wins, text, dialect) -> None:
    w = wins[0]
    fn = w.name.upper()
    form = (f"{fn}(TABLE s PARTITION BY k, DESCRIPTOR(ts), gap)" if fn == "SESSION"
            else f"{fn}(TABLE s, DESCRIPTOR(ts), ...)")

    def fail(why: str, at: exp.Expression):
        return text.fail(f"{why}; read the stream through {form} in FROM and group by "
                         "window_start, window_end", "GROUP BY", at, fn)

    if len(wins) > 1:
        raise fail("two group windows in one GROUP BY", wins[1])
    args = w.expressions
    arity = (1 + len(FUNCS[fn]),) + ((2 + len(FUNCS[fn]),) if fn != "SESSION" else ())
    if not args or not isinstance(args[0], exp.Column) or len(args) not in arity:
        offset = " [, offset]" if fn != "SESSION" else ""
        raise fail(f"{fn}(time column, {', '.join(FUNCS[fn])}{offset}) expected", w)
    keys = [g for g in group.expressions if g is not w]
    if fn == "SESSION":
        keys = _session_rows(sel, keys)
    # the stream: named in FROM, or under subqueries that select and project its rows
    names = [args[0].name, *(k.name for k in keys if fn == "SESSION")]  # in the stream
    frm, at = sel.args.get("from_") or sel.args.get("from"), sel
    while True:
        src = frm.this if frm is not None else None
        if at.args.get("joins"):
            raise fail("a group window over a join: the join of streams without windows "
                       "holds every row so far (unbounded); window each side", at)
        if not isinstance(src, exp.Subquery) or fn == "SESSION":  # views.py: the sessions
            break  # of the subquery's readings
        at = src.this
        names = [_through(at, n) for n in names]
        if not _rows_of(at) or None in names:
            raise fail(f"a group window {fn}(...) over a subquery that is not a selection "
                       "and projection of one stream's rows passing its time column on "
                       "unchanged", src)
        frm = at.args.get("from_") or at.args.get("from")
    if isinstance(src, exp.Subquery):  # a SESSION's: windowed by views.py
        table, alias = f"({src.this.sql(dialect=dialect)})", src.alias
    elif not isinstance(src, exp.Table) or src.args.get("db"):
        raise fail(f"a group window {fn}(...) reads one stream named in FROM", src or sel)
    else:
        table, alias = exp.to_identifier(src.name).sql(dialect=dialect), src.alias or src.name
    part = " PARTITION BY (" + ", ".join(exp.column(k).sql(dialect=dialect)
                                         for k in names[1:]) + ")" if names[1:] else ""
    params = ", ".join(a.sql(dialect=dialect) for a in args[1:])
    tvf = (f"SELECT * FROM {fn}(TABLE {table}{part}, DESCRIPTOR("
           f"{exp.column(names[0]).sql(dialect=dialect)}), {params})"
           + (f" AS {exp.to_identifier(alias).sql(dialect=dialect)}" if alias else ""))
    parsed = exp.maybe_parse(tvf, dialect=dialect)
    frm.set("this", (parsed.args.get("from_") or parsed.args.get("from")).this)
    group.set("expressions", [exp.column("window_start"), exp.column("window_end"), *keys])
    bounds = {f"{fn}_START": "window_start", f"{fn}_END": "window_end"}
    for node in (*sel.expressions, sel.args.get("having"), sel.args.get("order")):
        for f in [] if node is None else list(node.find_all(exp.Anonymous)):
            name = f.name.upper()
            if name in bounds:
                f.replace(exp.column(bounds[name]))
            elif name.startswith(f"{fn}_") or name in FUNCS:
                raise fail(f"{name}(...) is not supported (window_start and window_end "
                           "are)", f)


def _rows_of(q: exp.Expression) -> bool:
    """`q` selects and projects rows (no aggregate, DISTINCT, order, window function, set
    operation): a group window over it windows the rows it passes on."""
    return isinstance(q, exp.Select) and not any(q.args.get(k) for k in (
        "group", "having", "distinct", "order", "limit", "offset", "qualify", "with_",
        "with")) and not any(isinstance(n, (exp.AggFunc, exp.Window)) for e in q.expressions
                             for n in e.walk())


def _through(q: exp.Select, name: str) -> str | None:
    """The column of `q`'s FROM that its output `name` passes on unchanged, if one does."""
    for e in q.expressions:
        if e.alias_or_name == name and not isinstance(e, exp.Star):
            inner = e.unalias()
            return inner.name if isinstance(inner, exp.Column) else None
    return name if any(is_star(e) for e in q.expressions) else None


def is_star(e: exp.Expression) -> bool:
    """A SELECT item that passes every column of its FROM (`*`) or of one table (`t.*`)."""
    return isinstance(e, exp.Star) or isinstance(e, exp.Column) and isinstance(
        e.this, exp.Star)
