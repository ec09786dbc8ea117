"""Reference evaluator (docs/architecture.md, benchmark protocol): each slide instant's result computed directly.

For a finite input it materializes, at every slide instant tau, each window's contents and
evaluates the operators one by one in one DuckDB statement per instant. It shares no code with the
DB-op path (db.sqlgen, db.store) beyond reading the files.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from db.functions import register_functions
from db.sqlgen.session_values import finished, values_list
from federation.conventions import (
    DUCKDB_TYPES,
    SORTED_NATIVE,
    Lowering,
    disc_position,
    us,
)

if TYPE_CHECKING:  # plan nodes are dispatched on by class name: db/ imports no plan code
    from federation.logical import Node, Rstream, Window

#: the reference SQL of each plan node class at one instant (its own, from the rows)
REFERENCE = Lowering("reference evaluation", ("operator", "leaf"))


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class ReferenceEvaluator:
    """Evaluate a query over the rows of finite streams, slide instant by slide instant:
    `rows` maps each stream's name to its rows."""

    def __init__(self, rows: dict[str, pa.Table], tables: dict[str, pa.Table] | None = None
                 ) -> None:
        # one thread: DuckDB adds a DOUBLE sum over more than a row group (122,880 rows) in
        # the order its threads finish, so two equal sums could differ (float_sums.py)
        self.con = duckdb.connect(config={"threads": 1})
        self.tables = {}
        self.have: dict[str, set[str]] = {}  # each stream's columns in `rows`
        for i, (name, t) in enumerate(sorted(rows.items())):
            self.tables[name] = f"stream_rows_{i}"
            self.have[name] = set(t.column_names)
            self.con.register(self.tables[name], t)
        self.db_tables = {}  # a database table's rows (the same at every instant)
        for i, (name, t) in enumerate(sorted((tables or {}).items())):
            self.db_tables[name] = f"table_rows_{i}"
            self.con.register(self.db_tables[name], t)
        self._texts: dict[int, tuple[object, str]] = {}  # each expression's SQL, made once

    def _sql(self, e) -> str:
        """Expression `e` in DuckDB's SQL (written once: every instant asks again)."""
        hit = self._texts.get(id(e))
        if hit is None or hit[0] is not e:
            hit = self._texts[id(e)] = (e, e.sql(dialect="duckdb", identify=True))
        return hit[1]

    @REFERENCE.register("Table")
    def table(self, node, tau: dt.datetime) -> str:
        """A database table's rows through its selections and projections (`steps`)."""
        sql = (f"SELECT {', '.join(_q(c) for c, _ in node.columns)} "
               f"FROM {self.db_tables[node.name]}")
        for what, v in node.steps:
            if what == "distinct":
                sql = f"SELECT DISTINCT * FROM ({sql}) AS t"
            elif what == "where":
                sql = f"SELECT * FROM ({sql}) AS t WHERE {self._sql(v)}"
            else:
                sql = "SELECT " + ", ".join(f"{self._sql(e)} AS "
                                            f"{_q(n)}" for n, e in v) + f" FROM ({sql}) AS t"
        return sql

    def _rows(self, w: Window) -> tuple[str, str, str]:
        """A window's stream: its columns (a column the rows lack is NULL: a run reads only
        the columns its query reads, federation/optimizer/columns.py, and no operator
        reads the others), its time column and its rows' table."""
        have = self.have[w.stream.name]
        cols = ", ".join(_q(c) if c in have else f"CAST(NULL AS {DUCKDB_TYPES[t]}) AS {_q(c)}"
                         for c, t in w.stream.columns.items())
        src = self.tables[w.stream.name]
        where = w.where  # the readings a tuple or session window counts
        if where is not None:
            src = f"(SELECT * FROM {src} WHERE {self._sql(where)})"
        if w.computed_keys:  # partition keys computed of each reading
            src = "(SELECT *, " + ", ".join(f"{self._sql(e)} AS "
                                            f"{_q(k)}" for k, e in w.computed_keys) + \
                f" FROM {src})"
            cols += "".join(f", {_q(k)}" for k, _ in w.computed_keys)
        return cols, _q(w.stream.ts_column), src

    @REFERENCE.register("TimeWindow")
    def _time_window(self, w: Window, tau: dt.datetime) -> str:
        cols, ts, src = self._rows(w)
        tau = w.grid.floor(tau)  # on a query's finer grid: its rows of its own last instant
        lo = tau - dt.timedelta(seconds=w.range_s)  # type: ignore[arg-type]
        if w.cumulate:  # since the start of the period that holds tau - 1 us
            one = dt.timedelta(microseconds=1)
            origin, size = dt.datetime(1970, 1, 1) + us(w.offset_s) * one, us(w.range_s)
            lo = origin + (tau - origin - one) // (size * one) * (size * one)
        return (f"SELECT {cols} FROM {src} WHERE {ts} >= TIMESTAMP "
                f"'{lo.isoformat(sep=' ')}' AND {ts} < TIMESTAMP '{tau.isoformat(sep=' ')}'")

    @REFERENCE.register("TupleWindow")
    def _tuple_window(self, w: Window, tau: dt.datetime) -> str:
        cols, ts, src = self._rows(w)
        tau = w.grid.floor(tau)
        # ties in event time are broken by the other columns (as db.sqlgen does)
        desc = ", ".join(f"{_q(c)} DESC" for c in w.schema if c != w.stream.ts_column)
        part = ("PARTITION BY " + ", ".join(_q(k) for k in w.partition_by)) if w.partition_by \
            else ""
        return (f"SELECT {cols} FROM (SELECT *, row_number() OVER ({part} ORDER BY {ts} DESC, "
                f"{desc}) AS rn FROM {src} WHERE {ts} < TIMESTAMP '{tau.isoformat(sep=' ')}') "
                f"WHERE rn <= {w.rows}")

    @REFERENCE.register("SessionWindow")
    def _session_window(self, w: Window, tau: dt.datetime) -> str:
        """The readings before tau of the sessions that end in (tau - slide, tau]: one after
        the other at most the gap apart, but a reading at exactly a session's end when that
        end is an instant begins a new one (the session closed at that instant)."""
        cols, ts, src = self._rows(w)
        gap, slide = round(w.gap_s * 1_000_000), round(w.slide_s * 1_000_000)
        origin = round(w.offset_s * 1_000_000)
        part = ", ".join(_q(k) for k in w.partition_by)
        by = f"PARTITION BY {part} " if part else ""
        at = f"TIMESTAMP '{tau.isoformat(sep=' ')}'"
        marked = (f"SELECT *, CASE WHEN _ref_prev IS NULL OR epoch_us({ts}) - _ref_prev > {gap} "
                  f"OR (epoch_us({ts}) - _ref_prev = {gap} AND (_ref_prev + {gap - origin}) % "
                  f"{slide} = 0) THEN 1 ELSE 0 END AS _ref_new FROM (SELECT {cols}, lag(epoch_us({ts})) "
                  f"OVER ({by}ORDER BY {ts}) AS _ref_prev FROM {src} WHERE {ts} < {at})")
        numbered = f"SELECT *, sum(_ref_new) OVER ({by}ORDER BY {ts}) AS _ref_sid FROM ({marked})"
        sess = f"PARTITION BY {part + ', ' if part else ''}_ref_sid"
        tagged = (f"SELECT *, min({ts}) OVER ({sess}) AS window_start, max({ts}) OVER ({sess})"
                  f" + to_microseconds({gap}) AS window_end FROM ({numbered})")
        return (f"SELECT {', '.join(map(_q, w.schema))} FROM "
                f"({tagged}) WHERE window_end <= {at} AND window_end > {at} - "
                f"to_microseconds({slide})")

    def eval(self, node: Node, tau: dt.datetime) -> str:
        """The SQL of `node`'s rows at instant `tau` (one statement per instant: DuckDB binds
        it once, where a chain of relations bound every step)."""
        return REFERENCE.find(node)(self, node, tau)

    @REFERENCE.register("Rstream")
    def _rstream(self, node, tau: dt.datetime) -> str:
        return self.eval(node.child, tau)

    @REFERENCE.register("Select")
    def _select(self, node, tau: dt.datetime) -> str:
        pred = self._sql(node.predicate)
        return f"SELECT * FROM ({self.eval(node.child, tau)}) AS t WHERE {pred}"

    @REFERENCE.register("Project")
    def _project(self, node, tau: dt.datetime) -> str:
        outs = ", ".join(f"{self._sql(e)} AS {_q(n)}"
                         for n, e in node.outputs)
        return f"SELECT {outs} FROM ({self.eval(node.child, tau)}) AS t"

    @REFERENCE.register("Aggregate")
    def _aggregate(self, node, tau: dt.datetime) -> str:
        aggs = []
        for name, call in node.aggs:
            x = "*" if call.arg is None else self._sql(call.arg)
            if call.func.startswith("listagg"):  # in ascending order (of the bytes)
                d = "DISTINCT " * (call.func != "listagg")
                sep = call.separator.replace("'", "''")
                aggs.append(f"string_agg({d}{x}, '{sep}' ORDER BY {x}) AS {_q(name)}")
                continue
            if call.func in ("python", "python_distinct"):  # the sorted non-NULL values
                d = "DISTINCT " * (call.func == "python_distinct")
                aggs.append(f"{call.function}(list({d}{x} ORDER BY {x}) FILTER (WHERE {x} IS "
                            f"NOT NULL)) AS {_q(name)}")
                continue
            if call.func == "percentile_disc":  # of a session's rows: sorted, indexed
                d = ", 'DESC'" * call.descending
                at = disc_position(f"count({x})", call.fraction, "//")
                aggs.append(f"list_sort(list_filter(list({x}), lambda v: v IS NOT NULL){d})[{at}] "
                            f"AS {_q(name)}")
                continue
            if call.func in SORTED_NATIVE:  # of a session's rows: its sorted values (finished)
                aggs.append(f"{values_list(x, call.descending)} AS {_q(name)}")
                continue
            func = call.func.removesuffix("_distinct")
            # COUNT/SUM/AVG(DISTINCT x): of the distinct non-NULL values
            arg = x if func == call.func else f"DISTINCT {x}"
            e = f"{func}({arg})"
            if func != call.func and (func == "avg" or (
                    func == "sum" and node.schema[name] == "DOUBLE")):
                # the set added in ascending order, as both engines add it
                # (db/sqlgen/operators.py sorted_distinct_sum); AVG in double
                v = f"CAST({x} AS DOUBLE)" if func == "avg" else x
                e = f"list_sum(list_sort(list(DISTINCT {v}) FILTER (WHERE {v} IS NOT NULL)))"
                if func == "avg":
                    e += f" / NULLIF(count({arg}), 0)"
            elif func == "avg":  # AVG is SUM / COUNT in double (federation.expressions)
                e = f"CAST(sum({arg}) AS DOUBLE) / NULLIF(count({arg}), 0)"
            if func == "sum" and node.schema[name] == "BIGINT":
                e = f"CAST({e} AS BIGINT)"
            aggs.append(f"{e} AS {_q(name)}")
        keys = ", ".join(_q(k) for k in node.keys)
        group = f" GROUP BY {keys}" if keys else ""
        q = (f"SELECT {', '.join(filter(None, [keys, *aggs]))} "
             f"FROM ({self.eval(node.child, tau)}) AS t{group}")
        natives = {n: c for n, c in node.aggs if c.func in SORTED_NATIVE}
        return finished(q, list(node.schema), natives) if natives else q

    @REFERENCE.register("Union")
    def _union(self, node, tau: dt.datetime) -> str:
        cols = ", ".join(_q(c) for c in node.schema)
        return (f"SELECT {cols} FROM ({self.eval(node.left, tau)}) AS lhs UNION ALL "
                f"SELECT {cols} FROM ({self.eval(node.right, tau)}) AS rhs")

    @REFERENCE.register("RowNumber")
    def _row_number(self, node, tau: dt.datetime) -> str:
        keys = node.sort_keys if node.function == "row_number" else node.order_by
        order = ", ".join(f"{_q(c)} {'DESC' if d else 'ASC'} NULLS LAST" for c, d in keys)
        part = f"PARTITION BY {', '.join(map(_q, node.partition_by))} " \
            if node.partition_by else ""
        cols = ", ".join(_q(c) for c in node.child.schema)
        return (f"SELECT {cols}, {node.function.upper()}() OVER ({part}ORDER BY {order}) "
                f"AS {_q(node.name)} "
                f"FROM ({self.eval(node.child, tau)}) AS t")

    @REFERENCE.register("Join")
    def _join(self, node, tau: dt.datetime) -> str:
        cond = " AND ".join(f"lhs.{_q(a)} = rhs.{_q(b)}" for a, b in node.keys) or "true"
        rkeys = {b for _, b in node.keys}
        lkeys = dict(node.keys)
        cols = [f"lhs.{_q(c)}" if c not in lkeys or not node.keeps[1] else
                f"COALESCE(lhs.{_q(c)}, rhs.{_q(lkeys[c])}) AS {_q(c)}"
                for c in node.left.schema]
        cols += [f"rhs.{_q(c)}" for c in node.right.schema if c not in rkeys]
        how = "" if node.how == "inner" else f"{node.how.upper()} OUTER "
        return (f"SELECT {', '.join(cols)} FROM ({self.eval(node.left, tau)}) AS lhs "
                f"{how}JOIN ({self.eval(node.right, tau)}) AS rhs ON {cond}")

    def evaluate(self, query: Rstream, taus: list[dt.datetime]) -> pa.Table:
        """Result rows at every tau, with a `tau` column first."""
        register_functions(self.con, query.functions())
        parts = []
        for tau in taus:
            t = self.con.sql(self.eval(query, tau)).to_arrow_table()
            if t.num_rows:
                t = t.add_column(0, "tau", pa.array([tau] * t.num_rows, pa.timestamp("us")))
                parts.append(t)
        if not parts:
            return pa.table({"tau": pa.array([], pa.timestamp("us"))})
        return pa.concat_tables(parts)


def slide_instants(first_ts: dt.datetime, last_ts: dt.datetime, query: Rstream) -> list:
    """The query's instants over readings in [first_ts, last_ts]: every tau = offset + k x
    slide (whole microseconds from 1970) with first_ts < tau <= last_ts + extent, the extent being
    the largest window range (a tuple window counts its slide). Written out here, apart
    from federation/instants.py which the engines' path uses: the reference is independent."""
    windows = [n for n in query.walk() if n.kind == "window"]
    # windows of different slides or offsets: the coarsest grid holding all their instants;
    # a window off it is read there with its rows of its own last instant, up to its own
    # slide less the query's after it
    own = [(round(w.slide_s * 1_000_000), round(w.offset_s * 1_000_000)) for w in windows]
    slide = 0
    for sl, o in own:
        slide = math.gcd(slide, sl, o - own[0][1])
    origin = own[0][1] % slide
    extent = round(max((w.gap_s + w.slide_s if w.is_session else w.range_s
                        if w.range_s is not None else w.slide_s) * 1_000_000 + sl - slide
                       for w, (sl, _) in zip(windows, own)))
    epoch = dt.datetime(1970, 1, 1)

    def us(t: dt.datetime) -> int:
        return (t - epoch) // dt.timedelta(microseconds=1)

    lo = (us(first_ts) - origin) // slide * slide + origin + slide
    hi = (us(last_ts) + extent - origin) // slide * slide + origin
    return [epoch + dt.timedelta(microseconds=u) for u in range(lo, hi + 1, slide)]


def reference_result(query: Rstream, rows: pa.Table | dict[str, pa.Table],
                     tables: dict[str, pa.Table] | None = None) -> pa.Table:
    """The reference result of a query over finite rows (punctuation already removed): one
    table for a query over one stream, else each stream's rows by its name. The instants
    run from the first reading of any stream to the last of any (plus the extent).
    `tables`: the rows of each database table the query reads, by its name (default: the
    table as its file holds it now)."""
    import pyarrow.compute as pc

    tables = dict(tables or {})
    for n in query.walk():
        if n.kind == "table" and n.name not in tables:
            con = duckdb.connect(n.db, read_only=True)
            try:
                cols = ", ".join(f"CAST({_q(c)} AS {DUCKDB_TYPES[t]}) AS {_q(c)}"
                                 for c, t in n.columns)
                tables[n.name] = con.sql(f"SELECT {cols} FROM {_q(n.name)}").to_arrow_table()
            finally:
                con.close()

    streams = {n.stream.name: n.stream for n in query.walk() if n.kind == "window"}
    if isinstance(rows, pa.Table):
        if len(streams) != 1:
            raise ValueError(f"the query reads streams {', '.join(sorted(streams))}: give "
                             "the rows of each by its name")
        rows = {next(iter(streams)): rows}
    if set(rows) != set(streams):
        raise ValueError(f"rows of streams {sorted(rows)}, the query reads {sorted(streams)}")
    lo = hi = None
    for name, t in rows.items():
        if t.num_rows:
            col = t.column(streams[name].ts_column)
            a, b = pc.min(col).as_py(), pc.max(col).as_py()
            lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
    if lo is None:
        return pa.table({"tau": pa.array([], pa.timestamp("us"))})
    return ReferenceEvaluator(rows, tables).evaluate(query, slide_instants(lo, hi, query))
