"""The fuzzer's domain: the data it generates (fuzz.py writes it), the names, types and
hints of the columns its queries read and write, and what a generated query is (`Generated`,
`Rel`); shared by the generator's modules (benchmarks/fuzz_queries.py has the overview)."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

from sqlglot import exp

from benchmarks.fuzz_functions import (
    fz_dotted,
    fz_ranked,
    fz_ranked_distinct,
    fz_ranked_int,
    fz_ranked_int_distinct,
)
from federation.expressions import (
    avg,
    avg_distinct,
    count,
    count_distinct,
    listagg,
    max_,
    median,
    min_,
    percentile,
    stddev,
    sum_,
    sum_distinct,
    to_expression,
    variance,
)
from federation.logical import Node, NumberedPlan, Relation, Rstream, plan_of

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


def stddev_pop(arg, *, where=None):
    return stddev(arg, population=True, where=where)


def var_pop(arg, *, where=None):
    return variance(arg, population=True, where=where)


def percentile_28(arg, *, where=None):  # 0.28 n is not 7 in floating point at n = 25
    return percentile(arg, "0.28", where=where)


def percentile_disc_30_desc(arg, *, where=None):
    return percentile(arg, "0.3", discrete=True, descending=True, where=where)


#: the aggregates planned as other operators (STDDEV, VARIANCE: federation/logical/spread.py;
#: MEDIAN, percentiles: median.py), drawn in place of AVG now and then
DECOMPOSED = {"stddev_samp": stddev, "stddev_pop": stddev_pop, "var_samp": variance,
              "var_pop": var_pop, "median": median}
#: a drawn MEDIAN is, by the count of aggregates before it, one of these (no draw of its
#: own: the seeds' queries stay those drawn before)
MEDIANS = ("median", "percentile_cont", "percentile_disc")
def listagg_distinct(arg, separator=",", *, where=None):
    return listagg(arg, separator, distinct=True, where=where)


AGGS = {"count": count, "sum": sum_, "avg": avg, "min": min_, "max": max_,
        "listagg": listagg, "listagg_distinct": listagg_distinct,
        "count_distinct": count_distinct, "sum_distinct": sum_distinct,
        "avg_distinct": avg_distinct, **DECOMPOSED, "percentile_cont": percentile_28,
        "percentile_disc": percentile_disc_30_desc, "fz_dotted": fz_dotted,
        "fz_ranked": fz_ranked, "fz_ranked_distinct": fz_ranked_distinct,
        "fz_ranked_int": fz_ranked_int, "fz_ranked_int_distinct": fz_ranked_int_distinct}
#: the Python aggregates (benchmarks/fuzz_functions.py) drawn in place of SUM and SUM(DISTINCT)
#: now and then, of SUM's result type: by (SUM's function, the argument's type)
PYTHON_SUMS = {("sum", "DOUBLE"): "fz_ranked", ("sum_distinct", "DOUBLE"): "fz_ranked_distinct",
               **{(f"sum{d}", t): f"fz_ranked_int{d}" for d in ("", "_distinct")
                  for t in ("INT", "BIGINT")}}
PYTHON_AGGS = ("fz_dotted", *PYTHON_SUMS.values())
#: the functions the generator draws first (SUM and AVG are made DISTINCT now and then)
DRAWN_AGGS = sorted(f for f in AGGS if f not in ("sum_distinct", "avg_distinct", *DECOMPOSED,
                                                 *MEDIANS, "listagg", "listagg_distinct",
                                                 *PYTHON_AGGS))
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "node", plan_of(self.node))  # built by the DSL: its plan

    @property
    def dsl(self) -> Relation:
        """The subtree as the DSL's relation, to build on."""
        return Relation(self.node)


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


def _logical(q) -> NumberedPlan:
    """The plan whose operator ids explicit placements name (as `run` numbers it)."""
    from costmodel.profile import load_profile
    from federation.optimizer.phase_one import phase_one

    return NumberedPlan.of(phase_one(q, load_profile()))


def agg_args(a: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """An aggregate's arguments as drawn: none (COUNT(*)), one, or several (COUNT(DISTINCT
    a, b))."""
    return () if a is None else a if isinstance(a, tuple) else (a,)
