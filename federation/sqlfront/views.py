"""Views: `CREATE VIEW` before a query, and window table functions over views and
subqueries, as Flink users write them:

    CREATE TEMPORARY VIEW hot AS SELECT plug_id, value * 2 AS v2, ts FROM smartplug
        WHERE value > 50;
    SELECT plug_id, SUM(v2) FROM TUMBLE(TABLE hot, DESCRIPTOR(ts), INTERVAL '10' SECOND)
    GROUP BY window_start, window_end, plug_id

A view is a CTE of the query (`WITH hot AS (...) SELECT ...`), in the order written, so a
view may read the ones before it. A window table function's first argument may be a view,
a CTE or a subquery (`TUMBLE(TABLE (SELECT ... FROM s WHERE ...), ...)`) that selects and
projects one stream's rows, passing its time column (the DESCRIPTOR's) on unchanged: the
window goes around the stream in the innermost FROM and the view's selections and
projections above it, its rows gaining `window_start` and `window_end`. For TUMBLE, HOP and
CUMULATE that is the same relation (a selection and a projection commute with a time
window). A ROWS_WINDOW's last n rows and a SESSION's sessions are of the view's rows: its
conditions are the window's (`TupleWindow.where`, `SessionWindow.where`), each column a view
below computes replaced by its expression (`_down`), its partition keys stream columns
passed on. A ROWS_WINDOW's view may project above its selection (a projection commutes with
the last n rows); a SESSION's may compute columns too: what reads a session is its
aggregate, and the projection between folds into its arguments (logical/session_fold.py).
"""

from __future__ import annotations

from sqlglot import exp

from federation.sqlfront.group_windows import _rows_of, _through, is_star

TVFS = ("HOP", "TUMBLE", "CUMULATE", "SESSION", "ROWS_WINDOW")
#: windows whose rows depend on which readings there are: the view's selection is theirs
_OF_ROWS = ("SESSION", "ROWS_WINDOW")


def fold(trees: list[exp.Expression], text) -> list[exp.Expression]:
    """`CREATE [TEMPORARY] VIEW v AS q` statements before the query made CTEs of it."""
    views, rest = [], []
    for t in trees:
        if isinstance(t, exp.Create) and t.args.get("kind") == "VIEW":
            if rest:
                raise text.fail("a view is created before the query that reads it",
                                "CREATE VIEW", t)
            views.append(_cte(t, text))
        else:
            rest.append(t)
    if not views or not rest:
        if views:
            raise text.fail("views without a query: end with the SELECT that reads them",
                            "CREATE VIEW", trees[-1])
        return rest
    q = rest[0].expression if isinstance(rest[0], exp.Insert) else rest[0]
    if not isinstance(q, (exp.Select, exp.SetOperation)):
        return rest  # refused as a statement where it stands
    w = q.args.get("with_") or q.args.get("with")
    ctes = [*views, *(w.expressions if w else [])]
    names = [c.alias for c in ctes]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise text.fail(f"view or CTE {twice!r} defined twice", "CREATE VIEW", rest[0])
    q.set("with_" if "with_" in q.arg_types else "with", exp.With(expressions=ctes))
    return rest


def _cte(t: exp.Create, text) -> exp.CTE:
    """A CREATE VIEW's CTE; a column list `v (a, b)` renames the query's items."""
    target, body = t.this, t.expression
    if not isinstance(body, (exp.Select, exp.SetOperation)):
        raise text.fail("CREATE VIEW name AS SELECT ...", "CREATE VIEW", t)
    if isinstance(target, exp.Schema):
        cols = [c.name for c in target.expressions]
        items = body.expressions if isinstance(body, exp.Select) else []
        if len(items) != len(cols) or any(is_star(e) for e in items):
            raise text.fail(f"the view's column list names {len(cols)} columns; its SELECT "
                            "lists as many items (no *)", "CREATE VIEW", target)
        body.set("expressions", [exp.alias_(e.unalias(), c) for e, c in zip(items, cols)])
        target = target.this
    return exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(target.name)))


def rewrite(tree: exp.Expression, text, dialect) -> exp.Expression:
    """`tree` with each window table function over a view, a CTE or a subquery made the
    window of the stream under it (module doc)."""
    ctes = {c.alias: c.this for c in tree.find_all(exp.CTE)}
    for call in list(tree.find_all(exp.Anonymous)):
        fn = call.name.upper()
        if fn not in TVFS or not call.expressions:
            continue
        src = call.expressions[0]
        body = _body(src, ctes)
        if body is None:
            continue
        item = call.parent if not _is_table_fn(call.parent) else call.parent.parent
        if not isinstance(item, exp.Table):
            continue  # refused where it stands (windows.py)
        name = src.name if isinstance(src, exp.Table) else ""
        alias = item.alias or name
        keys = [c.name for c in src.args["partition"].expressions] \
            if src.args.get("partition") else []
        # a CTE's body does not see the CTE: `WITH s AS (SELECT * FROM s ...)` reads stream s
        windowed = _lower(body, call, fn, keys, {k: v for k, v in ctes.items() if k != name},
                          text, dialect)
        item.replace(exp.Subquery(this=windowed, alias=exp.TableAlias(
            this=exp.to_identifier(alias)) if alias else None))
    return tree


def _is_table_fn(e) -> bool:
    return isinstance(e, exp.Anonymous) and e.name.upper() == "TABLE"


def _body(src: exp.Expression, ctes: dict) -> exp.Expression | None:
    """The query a window's first argument reads, if it is a subquery or a CTE's name."""
    if _is_table_fn(src) and len(src.expressions) == 1:
        q = src.expressions[0]
        return (q.this if isinstance(q, exp.Subquery) else q).copy()
    if isinstance(src, exp.Table) and isinstance(src.this, exp.Identifier) \
            and src.name in ctes:
        return ctes[src.name].copy()
    return None


def _lower(q: exp.Expression, call: exp.Anonymous, fn: str, keys: list[str], ctes: dict,
           text, dialect) -> exp.Select:
    """`q` (a view's query) with `call`'s window around the stream in its innermost FROM;
    `keys`: a SESSION's partition keys as `q` names them."""
    args = call.expressions
    desc = args[1] if len(args) > 1 else None
    if not (isinstance(desc, exp.Anonymous) and desc.name.upper() == "DESCRIPTOR"
            and len(desc.expressions) == 1 and isinstance(desc.expressions[0], exp.Column)):
        raise text.fail(f"the second argument of {fn} is DESCRIPTOR(<event-time column>)",
                        fn, call)
    if fn == "ROWS_WINDOW" and len(args) == 5 and isinstance(args[4], exp.Anonymous):
        keys = [c.name for c in args[4].expressions]

    def fail(why: str, at):
        return text.fail(f"{fn} over a view or subquery: {why}", fn, at)

    names = [desc.expressions[0].name, *keys]
    where: list[tuple[exp.Expression, int]] = []  # a condition, the first level below it
    made: dict[str, tuple[exp.Expression, int]] = {}  # a key a view computes: likewise
    levels: list[tuple[dict, bool]] = []  # per level, outermost first: (its computed
    # items by name, whether it passes its FROM's other columns on)
    while True:
        if not _rows_of(q) or q.args.get("joins"):
            raise fail("it is not a selection and projection of one stream's rows", call)
        passes = any(is_star(e) for e in q.expressions)
        proc = next((e for e in q.expressions if e.alias_or_name == names[0]
                     and e.unalias().find(exp.Anonymous) is not None
                     and e.unalias().find(exp.Anonymous).name.upper() == "PROCTIME"), None)
        if proc is not None:
            raise text.fail(f"{names[0]} is PROCTIME(), the time a row is processed: a "
                            "window of it has no result a rerun or another placement "
                            "could give again (fedq's windows are over the stream's event "
                            "time: DESCRIPTOR(<its time column>))", fn, proc)
        through = [n if n in made else _through(q, n) for n in names]
        if through[0] is None:
            raise fail(f"it does not pass the time column {names[0]} on unchanged", call)
        levels.append(({e.alias_or_name: e.unalias() for e in q.expressions
                        if not is_star(e)}, passes))
        for i, n in enumerate(names[1:], 1):
            if n in made:  # a key computed above: the window's column, passed on
                if n in levels[-1][0]:
                    raise fail(f"its column {n} is the partition key a view above "
                               "computes: name one apart", call)
                if not passes:
                    q.set("expressions", [*q.expressions, exp.column(n)])
            elif through[i] is None:  # a key this view computes: the window's own
                item = next((e for e in q.expressions if not is_star(e)
                             and e.alias_or_name == n), None)
                if item is None:
                    raise fail(f"it does not pass the partition key {n} on", call)
                made[n] = (item.unalias().copy(), len(levels))  # over the levels below
                # the item reads the window's column (a star level passes it already)
                q.set("expressions", [exp.column(n) if e is item else e for e in q.expressions
                                      if not (e is item and passes)])
                through[i] = n
        names = through
        if not passes:
            outs = {e.alias_or_name for e in q.expressions}
            clash = next((c for c in ("window_start", "window_end") if c in outs), None)
            if clash:
                raise fail(f"its column {clash} is the window's", call)
            q.set("expressions", [*q.expressions, exp.column("window_start"),
                                  exp.column("window_end")])
        if fn in _OF_ROWS and q.args.get("where") is not None:
            cond = q.args["where"].this
            if cond.find(exp.Subquery, exp.Exists) is not None:
                raise fail(f"a subquery in the view's WHERE (the readings {fn} counts are "
                           "selected by a condition of the row)", cond)
            where.append((cond, len(levels)))  # over the columns of the levels below it
            q.set("where", None)
        frm = q.args.get("from_") or q.args.get("from")
        src = frm.this if frm is not None else None
        if isinstance(src, exp.Subquery):
            q = src.this
        elif isinstance(src, exp.Table) and isinstance(src.this, exp.Identifier) \
                and src.name in ctes and not src.args.get("db"):
            q = ctes.pop(src.name).copy()  # (its body does not see it)
            src.replace(exp.Subquery(this=q, alias=exp.TableAlias(
                this=exp.to_identifier(src.alias or src.name))))
        else:
            break
    if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier) \
            or src.args.get("db"):
        raise fail("it reads no stream by name", call)
    table = f"TABLE {exp.to_identifier(src.name).sql(dialect=dialect)}"
    if fn == "SESSION" and names[1:]:
        table += " PARTITION BY (" + ", ".join(
            exp.column(k).sql(dialect=dialect) for k in names[1:]) + ")"
    rest = [a.copy() for a in args[2:]]
    if fn == "ROWS_WINDOW" and len(rest) == 3:
        rest[2] = exp.Anonymous(this="DESCRIPTOR", expressions=[
            exp.column(k) for k in names[1:]])
    params = "".join(", " + a.sql(dialect=dialect) for a in rest)
    alias = exp.to_identifier(src.alias or src.name).sql(dialect=dialect)
    tvf = (f"SELECT * FROM {fn}({table}, DESCRIPTOR("
           f"{exp.column(names[0]).sql(dialect=dialect)}){params}) AS {alias}")
    parsed = exp.maybe_parse(tvf, dialect=dialect)
    item = (parsed.args.get("from_") or parsed.args.get("from")).this
    if where:  # the window's own selection (windows.window_tvf), over the stream's columns
        item.this.expressions[0].set("where", exp.and_(*(
            _down(c, levels[i:], fail) for c, i in where)))
    if made:  # its keys computed of each reading, likewise
        item.this.expressions[0].set("computed", {
            n: _down(e, levels[i:], fail) for n, (e, i) in made.items()})
    src.replace(item)
    return _root(q)


def _down(cond: exp.Expression, levels: list[tuple[dict, bool]], fail) -> exp.Expression:
    """`cond`, over the columns of the first of `levels`, over the stream's under the last:
    each column a level computes replaced by its expression (a view's WHERE over columns
    it computes selects the readings those expressions hold for)."""
    out = cond.copy()
    for items, passes in levels:
        def one(c, items=items, passes=passes):
            if not isinstance(c, exp.Column):
                return c
            if c.name in items:
                return items[c.name].copy()
            if not passes:
                raise fail(f"its WHERE names {c.sql()}, which the view below does not "
                           "pass on", cond)
            return exp.column(c.name)
        out = out.transform(one)
    return out.transform(lambda c: exp.column(c.name) if isinstance(c, exp.Column) else c)


def _root(q: exp.Expression) -> exp.Expression:
    """The outermost query above `q` (the view's, after its FROMs were replaced)."""
    while q.parent is not None:
        q = q.parent
    return q
