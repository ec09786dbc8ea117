"""The vocabulary of a DB-op's SQL: quoted names, numbers and intervals, the slide
instant's parameters, and the error for a plan the generator cannot express.

Every name is quoted (plan columns may be SQL keywords or mixed case). A DB-op's query
runs once per slide instant, given as parameters: `$tau` (a TIMESTAMP) and `$tau_us` (its
microseconds since the epoch).

    >>> tau_param().sql("duckdb"), seconds(1.5).sql("duckdb")
    ('CAST($tau AS TIMESTAMP)', "INTERVAL '1.5' SECOND")
"""

from __future__ import annotations

from sqlglot import exp


class SqlGenerationError(NotImplementedError):
    """A plan the SQL generator cannot express (a malformed DB-op)."""


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def alias(e: exp.Expression, name: str) -> exp.Alias:
    return exp.alias_(e, name, quoted=True)


def quote(e: exp.Expression) -> exp.Expression:
    """A copy of `e` with every column name quoted."""
    e = e.copy()
    for c in e.find_all(exp.Column):
        c.set("this", exp.to_identifier(c.name, quoted=True))
    return e


def num(n: int) -> exp.Literal:
    return exp.Literal.number(n)


def tau_param() -> exp.Expression:
    """`$tau` as a TIMESTAMP."""
    return exp.cast(exp.Placeholder(this="tau"), "TIMESTAMP")


def tau_us_param() -> exp.Expression:
    return exp.Placeholder(this="tau_us")


def window_tau_us(win) -> exp.Expression:
    """The instant `win` is read at, as `$tau_us`: `$tau` itself, or on a query's finer
    grid (`every_s`) its own last instant at or before `$tau` (federation.instants)."""
    if win.every_s is None:
        return tau_us_param()
    return exp.Paren(this=grid_floor_sql(tau_us_param(), win.grid.slide_us, win.grid.origin_us))


def grid_floor_sql(e: exp.Expression, width: int, origin: int) -> exp.Expression:
    """The start of the slice of `width` us that holds `e` (us), slices from `origin` on:
    (e - origin) // width * width + origin."""
    if origin:
        e = exp.Paren(this=exp.Sub(this=e, expression=num(origin)))
    start = exp.Mul(this=exp.IntDiv(this=e, expression=num(width)), expression=num(width))
    return exp.Paren(this=exp.Add(this=start, expression=num(origin))) if origin else start


def window_tau(win) -> exp.Expression:
    """`window_tau_us` as a TIMESTAMP (`$tau` on the window's own grid)."""
    if win.every_s is None:
        return tau_param()
    return exp.Anonymous(this="make_timestamp", expressions=[window_tau_us(win)])


def at_window_instant(q: exp.Expression, win) -> exp.Expression:
    """`q` (SQL at `$tau`, reading only `win`'s rows or slices) at `win`'s own instant."""
    if win.every_s is None:
        return q

    def fix(e: exp.Expression) -> exp.Expression:
        if isinstance(e, exp.Placeholder) and e.this == "tau_us":
            return window_tau_us(win)
        if isinstance(e, exp.Cast) and isinstance(e.this, exp.Placeholder) and \
                e.this.this == "tau":
            return window_tau(win)
        return e
    return q.copy().transform(fix)


def seconds(s: float) -> exp.Interval:
    text = f"{s:g}" if float(s).is_integer() else repr(float(s))
    return exp.Interval(this=exp.Literal.string(text), unit=exp.Var(this="SECOND"))


def session_begins(ts: str, by: str, gap_us: int, slide_us: int, origin_us: int = 0
                   ) -> tuple[str, str]:
    """The rule that splits sessions (federation/logical/window.py, `SessionWindow`), as
    the SQL of two select items over rows with event time `ts` (quoted), partitioned by
    `by` ("PARTITION BY ... " or ""): `_s_prev` (the reading before, as epoch_us) and
    `_s_new`, over those rows with `_s_prev`: 1 where a reading begins a session, being
    more than the gap after the one before, or exactly the gap when that end is an
    instant (`origin_us` + k * `slide_us`)."""
    prev = f"lag(epoch_us({ts})) OVER ({by}ORDER BY {ts}) AS _s_prev"
    new = (f"CASE WHEN _s_prev IS NULL OR epoch_us({ts}) - _s_prev > {gap_us} OR "
           f"(epoch_us({ts}) - _s_prev = {gap_us} AND (_s_prev + {gap_us - origin_us}) % "
           f"{slide_us} = 0) THEN 1 ELSE 0 END AS _s_new")
    return prev, new
