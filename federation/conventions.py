"""The conventions every part of fedq shares, in one place: reserved column names, the
spool's row markers, the six SQL types and their names in each engine, microseconds, and
the names of the files a run or an import writes.

This module imports nothing of fedq (and nothing beyond the standard library): the engines
(spe/, db/), the cost model and the runtime all import it, and tests/test_conventions.py
checks that none of these values is written anywhere else.

    >>> us(0.25), ts_us(at_us(1_500_000)), at_us(1_500_000)
    (250000, 1500000, datetime.datetime(1970, 1, 1, 0, 0, 1, 500000))
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, NamedTuple
from urllib.parse import unquote, urlsplit

# -- reserved columns (a user's column may not start with an underscore) ---------------
#: a row's event time inside the engines (a copy of the stream's time column)
TS = "_ts"
#: a relation row's instant in Spark: the window's end minus 1 us (Spark's window_time)
WT = "_wt"
#: a relation row's instant in DuckDB tables and DB-op results
TAU = "_tau"
#: the spool's marker column (values: DATA, PUNCTUATION, TICK below)
KIND = "_kind"
#: a DB-op result row that carries no data, only the DB-op's clock (re-entry spools)
PUNCT = "_punct"
#: which output of a Spark stage a tagged row belongs to (k >= 0: output k; -1 - j: clock j)
OUT = "_out"
#: the event time of a clock row in a stage's tagged output
CLOCK = "_clock"
#: the struct column of Spark's window() in a group by (a user's column may be `window`)
WINDOW = "_window"
#: the columns a session window adds to its stream's: its session's first reading and its
#: end (the last reading plus the gap)
SESSION_COLUMNS = ("window_start", "window_end")
#: the aggregates each engine computes in its own aggregate over a session's rows, which
#: one aggregate reads once (elsewhere they are planned in operators: federation/logical/
#: spread.py, median.py): from the session's values in order, alike in every engine
#: (db/sqlgen/session_values.py), PERCENTILE_DISC at `disc_position`
NATIVE_AGGREGATES = ("var_samp", "var_pop", "stddev_samp", "stddev_pop", "median",
                     "percentile_cont", "percentile_disc")


#: a session's aggregates computed from its values in order (all NATIVE_AGGREGATES but
#: PERCENTILE_DISC), the spread ones from their mean first (`list_value`)
SPREAD_NATIVE = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
SORTED_NATIVE = (*SPREAD_NATIVE, "median", "percentile_cont")


class ListSql(NamedTuple):
    """How one engine's SQL reads a list `{l}` of DOUBLEs: its length, the sum of its
    values from the first, the sum of their squared deviations from `{m}` from the first,
    its `{i}`th value (from 1; NULL past the end) and integer division."""

    size: str
    total: str
    squares: str
    at: str
    div: str


def mean_names(columns, natives: dict) -> dict[str, str]:
    """A column name apart from `columns` for the mean of each of `natives` ({name:
    AggCall}) that is a spread (SPREAD_NATIVE)."""
    taken, means = set(columns), {}
    for n, call in natives.items():
        if call.func in SPREAD_NATIVE:
            means[n] = next(m for i in range(len(taken) + 1) if (m := f"_mean{i}") not in taken)
            taken.add(means[n])
    return means


def list_mean(values: str, sql: ListSql) -> str:
    """The mean of the sorted list `values`, NULL for an empty one (`list_value`)."""
    n = sql.size.format(l=values)
    return f"CASE WHEN {n} > 0 THEN {sql.total.format(l=values)} / {n} END"


def list_value(call, values: str, m: str, sql: ListSql) -> str:
    """A session's SORTED_NATIVE aggregate `call` of its values in order (`values`, their
    mean `m`) in the SQL `sql` of one engine, the same operations in the same order in
    every engine (db/sqlgen/session_values.py): VAR_POP, VAR_SAMP the squared deviations
    added from the first, over n (n - 1; NULL for n = 0, n < 2), STDDEV their square root;
    PERCENTILE_CONT(a/b) (MEDIAN 1/2) the values v1, v2 at f + 1, f + 2 (f = a (n - 1) div
    b; v2 = v1 past the end), v1 + (v2 - v1) * ((a (n - 1) - f b) / b)."""
    n = sql.size.format(l=values)
    if call.func in SPREAD_NATIVE:
        d = f"{n} - 1" if call.func.endswith("samp") else n
        v = f"CASE WHEN {d} > 0 THEN {sql.squares.format(l=values, m=m)} / ({d}) END"
        return f"sqrt({v})" if call.func.startswith("stddev") else v
    a, b = call.fraction or (1, 2)
    f = f"(({a} * ({n} - 1)) {sql.div} {b})"
    v1, v2 = (sql.at.format(l=values, i=f"{f} + {k}") for k in (1, 2))
    return (f"{v1} + (coalesce({v2}, {v1}) - {v1}) * "
            f"(CAST({a} * ({n} - 1) - {f} * {b} AS DOUBLE) / {b})")


def disc_position(n: str, fraction: tuple[int, int], division: str) -> str:
    """PERCENTILE_DISC(a/b)'s position (from 1) among `n` values in their order, as SQL:
    ceil(a n / b), at least 1, in integers (`division`: the dialect's integer division,
    `//` or `div`), so no engine's floating point moves it (0.28 * 25 is
    7.000000000000001)."""
    a, b = fraction
    return f"greatest(1, ({a} * {n} + {b - 1}) {division} {b})"


def stored_columns(node) -> dict[str, str]:
    """The columns of `node`'s window rows as Spark hands them on and a DB-op stores them:
    its schema but a session window's SESSION_COLUMNS, which the DB-op's SQL computes."""
    w = node.row_window()
    made = SESSION_COLUMNS if w is not None and w.is_session else ()
    return {c: t for c, t in node.schema.items() if c not in made}


def output_column(k: int, column: str) -> str:
    """Root k's `column` in the rows of a DB-op with several roots (several queries share
    it): its SQL yields every root's rows tagged `OUT` = k (db.sqlgen.statement)."""
    return f"_r{k}_{column}"


def packed(k: int) -> str:
    """The struct column that carries output k of a Spark stage (one Arrow transfer)."""
    return f"_p{k}"


def clock_tag(j: int) -> int:
    """The `OUT` value of clock source j's rows."""
    return -1 - j


# -- the spool's row markers (column KIND) ---------------------------------------------
#: a reading
DATA = 0
#: a punctuation row: no reading, moves the stream's clock (watermark) to its time
PUNCTUATION = -1
#: a tick row: one per slide instant of the stream's life (federation.instants)
TICK = -2
#: the Spark driver's heap unless the user sets it (spe/session.py); half of it is the
#: capacity of Spark's state in the memory model (costmodel/memory.py)
DRIVER_MEMORY = "4g"
#: a DB-op deletes expired rows and slices once per DB_EXPIRE_SLIDES slide instants: every
#: query reads its rows and slices with bounds, so rows a few slides past their window are
#: only skipped, and one DELETE pass per 5 slides costs about what one per slide did
#: (benchmarks.dbop); it CHECKPOINTs once per DB_CHECKPOINT_SLIDES (a multiple), where an
#: in-memory DuckDB frees deleted row groups and compresses: the rows appended in between
#: are held uncompressed, deleted ones included (db/store.py, costmodel/memory.py)
DB_EXPIRE_SLIDES = 5
DB_CHECKPOINT_SLIDES = 20
#: spool file i gets the mtime SPOOL_MTIME + i (Spark's file source reads in mtime order)
SPOOL_MTIME = 1_000_000_000.0

# -- types -------------------------------------------------------------------------------
#: the SQL types of stream columns and expressions
TYPES = ("BOOLEAN", "INT", "BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMP")
NUMERIC_TYPES = ("INT", "BIGINT", "DOUBLE")
#: a value of each type that stands for NULL in a key compared NULL-safely, beside `k IS
#: NULL` (logical/builder.py Relation.over: SQL's partitions hold NULLs together)
NULL_STAND_IN = {"BOOLEAN": "FALSE", "INT": "CAST(0 AS INT)", "BIGINT": "CAST(0 AS BIGINT)",
                 "DOUBLE": "CAST(0 AS DOUBLE)", "VARCHAR": "''",
                 "TIMESTAMP": "CAST('1970-01-01 00:00:00' AS TIMESTAMP)"}
#: each type's name in DuckDB, in Spark's DDL, and as a pyarrow alias (pa.type_for_alias)
DUCKDB_TYPES = {"BOOLEAN": "BOOLEAN", "INT": "INTEGER", "BIGINT": "BIGINT",
                "DOUBLE": "DOUBLE", "VARCHAR": "VARCHAR", "TIMESTAMP": "TIMESTAMP"}
#: bytes of an uncompressed value in a DuckDB column segment (a VARCHAR: its 16-byte
#: string header), what costmodel/memory.py counts for rows appended since a CHECKPOINT
DUCKDB_VALUE_BYTES = {"BOOLEAN": 1, "INT": 4, "BIGINT": 8, "DOUBLE": 8, "VARCHAR": 16,
                      "TIMESTAMP": 8, "HUGEINT": 16}  # HUGEINT: a slice's integer SUM
SPARK_TYPES = {"BOOLEAN": "boolean", "INT": "int", "BIGINT": "bigint", "DOUBLE": "double",
               "VARCHAR": "string", "TIMESTAMP": "timestamp"}
ARROW_TYPES = {"BOOLEAN": "bool", "INT": "int32", "BIGINT": "int64", "DOUBLE": "double",
               "VARCHAR": "string", "TIMESTAMP": "timestamp[us]"}
#: DuckDB column types a database table may have, read as one of the six (db/catalog.py)
FROM_DUCKDB = {"BOOLEAN": "BOOLEAN", "TINYINT": "INT", "SMALLINT": "INT", "INTEGER": "INT",
               "UTINYINT": "INT", "USMALLINT": "INT", "BIGINT": "BIGINT", "UINTEGER": "BIGINT",
               "FLOAT": "DOUBLE", "DOUBLE": "DOUBLE", "DECIMAL": "DOUBLE", "VARCHAR": "VARCHAR",
               "TIMESTAMP": "TIMESTAMP", "TIMESTAMP_NS": "TIMESTAMP",
               "TIMESTAMP_MS": "TIMESTAMP", "TIMESTAMP_S": "TIMESTAMP"}

# -- time: whole microseconds since 1970-01-01 (naive UTC) -------------------------------
EPOCH = dt.datetime(1970, 1, 1)
US_PER_S = 1_000_000

#: values of a punctuation row's columns (not NULL: Spark filters NULL join keys)
NEUTRAL = {"BOOLEAN": False, "INT": -1, "BIGINT": -1, "DOUBLE": 0.0, "VARCHAR": "",
           "TIMESTAMP": EPOCH}


def us(seconds: float) -> int:
    """A duration in seconds as whole microseconds."""
    return round(seconds * US_PER_S)


def ts_us(ts: dt.datetime) -> int:
    """Whole microseconds of a naive timestamp since 1970-01-01."""
    d = ts - EPOCH
    return (d.days * 86400 + d.seconds) * US_PER_S + d.microseconds


def at_us(micros: int) -> dt.datetime:
    """The naive timestamp `micros` microseconds after 1970-01-01."""
    return EPOCH + dt.timedelta(microseconds=micros)


def grid_floor_us(micros: int, slide_us: int, origin_us: int) -> int:
    """The last instant at or before `micros` of the grid origin + k * slide (all in
    microseconds; federation.instants.Grid, and the engines that read a window on its
    own grid)."""
    return (micros - origin_us) // slide_us * slide_us + origin_us


# -- file names --------------------------------------------------------------------------
#: rows a loader or `fedq import` could not read (line, raw, reason), beside the parts
REJECTED_CSV = "_rejected.csv"


#: the MQTT broker port when a URL names none: plain (mqtt://) and over TLS (mqtts://)
MQTT_PORT = 1883
MQTTS_PORT = 8883
#: the environment variable an MQTT password is read from (or a file: --mqtt-password-file)
MQTT_PASSWORD_ENV = "FEDQ_MQTT_PASSWORD"


def parse_mqtt_url(url: str) -> tuple[str, int, str]:
    """(host, port, topic) of `mqtt://[USER@]host[:port]/topic` or `mqtts://...` (TLS; port
    1883, over TLS 8883, by default; the topic may hold `/` and the wildcards `+` and `#`).
    A password in the URL is refused: it would show in the process list and the logs.

    >>> parse_mqtt_url("mqtt://broker:1884/plugs/+/readings")
    ('broker', 1884, 'plugs/+/readings')
    >>> parse_mqtt_url("mqtts://alice@broker/plugs")
    ('broker', 8883, 'plugs')
    """
    return mqtt_url(url)[:3]


def mqtt_url(url: str) -> tuple[str, int, str, bool, str | None]:
    """(host, port, topic, over TLS, user name or None) of an MQTT URL (`parse_mqtt_url`)."""
    try:
        u = urlsplit(url, allow_fragments=False)  # "#" is the MQTT wildcard
        tls = u.scheme == "mqtts"
        port = u.port or (MQTTS_PORT if tls else MQTT_PORT)
    except ValueError as e:
        raise ValueError(f"bad MQTT URL {url!r}: {e}") from None
    if u.password is not None:
        raise ValueError(f"bad MQTT URL {u.scheme}://{u.username}:***@...: a password in the "
                         "URL would show in the process list and the logs; give it in "
                         f"${MQTT_PASSWORD_ENV} or a file (--mqtt-password-file)")
    topic = unquote(u.path[1:]) if u.path.startswith("/") else ""
    if u.scheme not in ("mqtt", "mqtts") or not u.hostname or not topic or u.query:
        raise ValueError(f"bad MQTT URL {url!r}: want mqtt://[USER@]HOST[:PORT]/TOPIC "
                         "(or mqtts:// over TLS)")
    return u.hostname, port, topic, tls, None if u.username is None else unquote(u.username)


# -- lowerings: what each plan node class has in every engine and model ------------------
class EngineLimit(Exception):
    """A node class an engine declares it cannot run (the placement puts it elsewhere)."""


class Lowering:
    """One thing every plan node class of some roles must have (its Spark operator, its
    DuckDB SQL, its size, cost, memory, reference evaluation, column narrowing): a function
    per node class, registered by the class's name (the engines and the cost model import
    no plan code), never inherited (a new subclass of a window needs its own). tests/test_lowerings.py names
    every node class one of them misses, so a new operator without, say, a size fails there
    and not in a user's run. Roles: "operator" (a relation-to-relation operator the
    optimizer places), "leaf" (a window or a table), "root" (RSTREAM, a query set).

        >>> size = Lowering("size (test)", ("operator",))
        >>> @size.register("Select")
        ... def _(node): return 1
        >>> class Select: pass
        >>> size(Select())
        1
        >>> del Lowering.ALL["size (test)"]
    """

    ALL: ClassVar[dict[str, Lowering]] = {}

    def __init__(self, name: str, roles: tuple[str, ...]) -> None:
        self.name, self.roles = name, roles
        self.funcs: dict[str, object] = {}
        self.limits: dict[str, str] = {}
        Lowering.ALL[name] = self

    def register(self, *classes: str):
        """Decorator: the function of these node classes (by class name)."""
        def add(f):
            for c in classes:
                self.funcs[c] = f
            return f
        return add

    def limit(self, cls: str, why: str) -> None:
        """Declare that this engine cannot run node class `cls`, and why."""
        self.limits[cls] = why

    def covers(self, cls: type) -> bool:
        return cls.__name__ in self.funcs or cls.__name__ in self.limits

    def find(self, node: object):
        """The function of `node`'s class."""
        name = type(node).__name__
        if name in self.funcs:
            return self.funcs[name]
        if name in self.limits:
            raise EngineLimit(f"{self.name}: {self.limits[name]}")
        raise TypeError(f"no {self.name} for {name}")

    def __call__(self, node: object, *args: object, **kw: object):
        return self.find(node)(node, *args, **kw)  # type: ignore[operator]
