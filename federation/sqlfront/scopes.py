"""Names in scope: the relation a FROM clause builds, and how a name reaches its columns.

A `Scope` is a plan node and, per table alias, the columns that alias sees. A qualified
name `a.k` resolves through its alias; a bare name through every alias (an error when two
aliases reach different columns), else the node's own columns. A join keeps both sides'
aliases, the right side's key columns mapped to the left's (the join keeps the left ones).

A window table function's implicit columns (`WINDOW_COLUMNS`: `window_start`, `window_end`,
`window_time`) name its instant, no column: they may appear in GROUP BY, in a join's ON
and as bare SELECT items, where they are dropped (`Scope.is_instant`), and nowhere else:

    >>> import sqlglot
    >>> from federation.sqlfront.dialect import SqlError
    >>> from federation.logical import window
    >>> from federation.smartplug import smartplug_stream
    >>> text = SqlText("SELECT s.value, window_end FROM s")
    >>> scope = Scope.of(text, window(smartplug_stream(), range=10, slide=1), "s")
    >>> scope.resolve(sqlglot.parse_one("s.value * 2"), "SELECT").sql()
    'value * 2'
    >>> scope.is_instant(sqlglot.parse_one("window_end"))
    True
    >>> try:
    ...     scope.column_of(None, "window_end", "SELECT", None)
    ... except SqlError as e:
    ...     print(e.message)
    window_end is the window's instant: only in GROUP BY, in a join's ON and as a bare SELECT item
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from federation.logical import Node
from federation.sqlfront.dialect import SqlText

#: the prefix of the alias a correlated subquery reads its outer rows by (correlated.py):
#: a bare name does not reach them (SQL resolves it in the subquery's own FROM)
OUTER_ROWS = "_fedq_outer"
#: implicit columns of a window table function (Flink's names)
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")


@dataclass
class Scope:
    """The relation a FROM clause builds: its node and how names reach its columns."""

    text: SqlText
    node: Node
    #: alias -> {column as the alias sees it -> column of node}
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    #: alias -> {name -> the window column it renames}: a subquery's `window_start AS
    #: starttime` names the instant too (Flink's Nexmark q5 and q8 join on such names)
    instants: dict[str, dict[str, str]] = field(default_factory=dict)
    #: a bare name of a `JOIN ... USING` column -> the join's key column (one, not the
    #: sides' columns that an outer join keeps apart)
    using: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, text: SqlText, node: Node, alias: str,
           instants: dict[str, str] | None = None) -> Scope:
        """A FROM item: `node`, its columns reached as `alias.column`."""
        return cls(text, node, {alias: {c: c for c in node.schema}}, {alias: instants or {}})

    def instant_of(self, e: exp.Expression) -> str | None:
        """The window column (window_start, window_end, window_time) that `e` names, if it
        names the instant and no column."""
        if not isinstance(e, exp.Column) or self.has_column(e):
            return None
        if e.name == "window_time" and {"window_start", "window_end"} <= set(
                self.node.schema) and any(n.kind == "window" and n.is_session
                                          for n in self.node.walk()):
            raise self.text.fail(
                "window_time of a SESSION is a time of the session (Flink's: its "
                "window_end - 1 ms), not the instant its row comes at: write window_end, or "
                "window_end - INTERVAL '0.001' SECOND", "window_time", e)
        if e.name in WINDOW_COLUMNS:
            return e.name
        for a, names in self.instants.items():
            if (not e.table or e.table == a) and e.name in names:
                return names[e.name]
        return None

    def has_column(self, col: exp.Column) -> bool:
        if col.table:
            return col.name in self.aliases.get(col.table, {})
        return any(col.name in cols for cols in self.aliases.values())

    def is_instant(self, e: exp.Expression) -> bool:
        """`e` is window_start, window_end or window_time naming no column: dropped."""
        return self.instant_of(e) is not None

    def column_of(self, table: str | None, name: str, clause: str,
                  node: exp.Expression | None) -> str:
        """The column of self.node that `table.name` (or the bare `name`) reaches."""
        fail = self.text.fail
        if table:
            if table not in self.aliases:
                raise fail(f"unknown table or alias {table!r} (in scope: "
                           f"{', '.join(sorted(self.aliases)) or 'none'})", clause, node)
            cols = self.aliases[table]
            if name not in cols:
                raise fail(f"unknown column {table}.{name} (available: "
                           f"{', '.join(cols)})", clause, node)
            return cols[name]
        if name in self.using:
            return self.using[name]
        hits = {cols[name] for a, cols in self.aliases.items()
                if name in cols and not a.startswith(OUTER_ROWS)}
        if not hits and name in self.node.schema:
            return name
        if not hits:
            if name in WINDOW_COLUMNS:
                raise fail(f"{name} is the window's instant: only in GROUP BY, in a "
                           "join's ON and as a bare SELECT item", clause, node)
            raise fail(f"unknown column {name!r} (available: "
                       f"{', '.join(self.node.schema)})", clause, node)
        if len(hits) > 1:
            raise fail(f"ambiguous column {name!r}: qualify it with its table", clause, node)
        return hits.pop()

    def star(self, table: str | None, at: exp.Expression) -> dict[str, str]:
        """What `*` (`table.*`) selects: {the name it shows -> the column of self.node}."""
        if table is None:
            return {c: c for c in self.node.schema}
        if table not in self.aliases:
            self.column_of(table, "*", "SELECT", at)  # the unknown alias's error
        return dict(self.aliases[table])

    def resolve(self, e: exp.Expression, clause: str) -> exp.Expression:
        """A copy of `e` over the columns of self.node (qualifiers resolved, comments gone)."""
        def fix(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column):
                return exp.column(self.column_of(n.table or None, n.name, clause, n))
            return n

        return rewrite(e, fix)


def shown_as(written: exp.Expression, out: exp.Expression, items) -> str | None:
    """The name SQL gives a SELECT item `b.value` that reaches another column of the plan
    (`value_b`, the sides of a join renamed apart): `value`, unless another item of the
    list `items` shows that name too (then the plan's)."""
    if not (isinstance(written, exp.Column) and isinstance(out, exp.Column)) \
            or written.name == out.name:
        return None
    shown = [e.alias_or_name for e in items]
    return written.name if shown.count(written.name) == 1 else None


def rewrite(e: exp.Expression, fix: Callable[[exp.Expression], exp.Expression]
            ) -> exp.Expression:
    """A copy of `e` with `fix` applied to each node, its comments gone (the selectivity
    hints have been read by then)."""
    out = e.copy().transform(fix)
    for n in out.walk():
        n.comments = None
    return out
