"""A session's STDDEV, VARIANCE, MEDIAN and PERCENTILE_CONT in DuckDB, the same bits as
Spark's (spe/sessions.py `session_values`) and the reference's.

Each engine's own functions differ in the last bits: they add in the order they read the
rows (and Spark merges its partitions' partials), and a ranking by an exact tie (two
sessions' STDDEV_POP of 0.5) then orders them by that last bit (the fuzzer's seed 243). So
each engine collects a session's non-NULL values as DOUBLE in ascending order (descending
for a percentile ordered DESC), and computes from that list alone, one operation after the
other, as `conventions.list_value` writes them in each engine's SQL:

- the mean m: the values added from the first, divided by their number n;
- VAR_POP, VAR_SAMP: the squares (v - m) * (v - m) added from the first, divided by n (or
  n - 1; NULL for n = 0, or n < 2); STDDEV_POP, STDDEV_SAMP their square root (correctly
  rounded in both);
- PERCENTILE_CONT(a/b) (MEDIAN: 1/2): f = a (n - 1) div b, the values v1 and v2 at f + 1
  and f + 2 (from 1; v2 = v1 past the end), v1 + (v2 - v1) * ((a (n - 1) - f b) / b), the
  formula of federation/logical/median.py.

The mean is a column of its own, computed over the lists before the rest: inside the
squares' lambda each engine would compute it again for every value.
"""

from __future__ import annotations

from federation.conventions import ListSql, list_mean, list_value, mean_names

#: DuckDB's SQL of a list of DOUBLEs (conventions.list_value)
DUCKDB_LISTS = ListSql(size="len({l})", total="list_sum({l})",
                       squares="list_sum(list_transform({l}, lambda v: (v - {m}) * (v - {m})))",
                       at="{l}[{i}]", div="//")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def values_list(x: str, descending: bool = False) -> str:
    """The aggregate of a session's non-NULL values of `x` (SQL) as a sorted DOUBLE list."""
    d = f"CAST({x} AS DOUBLE)"
    return f"list({d} ORDER BY {d}{' DESC' * descending}) FILTER (WHERE {x} IS NOT NULL)"


def finished(inner: str, columns: list[str], natives: dict) -> str:
    """The SELECT of `columns` over `inner` (a query whose column of each of `natives`,
    {name: AggCall}, is its values_list), each native's value in place of its list."""
    means = mean_names(columns, natives)
    mid = ", ".join(f"{list_mean(_q(n), DUCKDB_LISTS)} AS {_q(m)}" for n, m in means.items())
    if mid:
        inner = f"SELECT *, {mid} FROM ({inner}) AS t"
    outs = [f"{list_value(natives[c], _q(c), _q(means.get(c, '')), DUCKDB_LISTS)} AS {_q(c)}"
            if c in natives else _q(c) for c in columns]
    return f"SELECT {', '.join(outs)} FROM ({inner}) AS t"
