"""Argument types of `fedq`: one-line errors that name the option (argparse shows them)."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path


def _number(text: str, low: float, inclusive: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < low or (v == low and not inclusive):
        raise argparse.ArgumentTypeError(
            f"must be a finite number {'>=' if inclusive else '>'} {low:g}, got {text!r}")
    return v


def positive(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    return _number(text, 0.0, inclusive=False)


def non_negative(text: str) -> float:
    """A finite number >= 0 (argparse type)."""
    return _number(text, 0.0, inclusive=True)


def count(text: str) -> int:
    """A whole number >= 1 (argparse type)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def rates(text: str) -> list[float]:
    """'1000:40000:1000' (start:stop:step, inclusive) or '1000,2000'; each rate > 0.

    Example:
        >>> rates("1000:3000:1000")
        [1000.0, 2000.0, 3000.0]
    """
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(
                f"bad sweep {text!r}: want start:stop:step (e.g. 1000:40000:1000)")
        a, b, s = (positive(x) for x in parts)
        if b < a:
            raise argparse.ArgumentTypeError(f"bad sweep {text!r}: stop is below start")
        if (b - a) / s > 10_000:
            raise argparse.ArgumentTypeError(f"bad sweep {text!r}: more than 10,000 rates")
        out, x = [], a
        while x <= b + 1e-9:
            out.append(x)
            x += s
        return out
    return [positive(x) for x in text.split(",") if x.strip()]


def sweep_text(text: str) -> str:
    rates(text)  # validated when the arguments are read
    return text


def query_maker(name: str):
    from federation.smartplug.queries import QUERIES

    key = name.upper()
    if key not in QUERIES:
        raise SystemExit(f"fedq: unknown query {name!r}; choose one of {', '.join(QUERIES)}")
    return QUERIES[key]


def add_query_arguments(p) -> None:
    """The queries of `fedq explain` and `fedq run`: names, SQL files or DSL queries, each
    repeatable; several run together (shared operators computed once)."""
    p.add_argument("query", nargs="*", default=[],
                   help="CQ1..CQ6 (or give --sql FILE or --query FILE.py:NAME); several "
                        "queries run together")
    p.add_argument("--sql", type=Path, action="append", default=None, metavar="FILE",
                   help="a streaming SELECT in a file (docs/sql.md), e.g. "
                        "benchmarks/queries_sql/cq1.sql; repeat it, or name a directory of "
                        ".sql files, to run several queries together")
    p.add_argument("--tables", type=Path, default=None, metavar="FILE.duckdb",
                   help="a DuckDB database file whose tables a --sql query reads by name "
                        "(joined with windows; read as they are when the run starts)")
    p.add_argument("--stream", dest="stream_decls", type=Path, action="append", default=None,
                   metavar="FILE.json",
                   help="a stream's declaration (name, schema, event-time column: the "
                        "_stream.json that fedq import writes) for a --sql query over a source "
                        "that declares none, such as a broker's topic; repeatable")
    p.add_argument("--query", dest="query_file", action="append", default=None,
                   metavar="FILE.py:NAME",
                   help="a DSL query in a Python file: NAME is an Rstream, or a function "
                        "returning one (called with rate=, scale=, plugs= when it takes them); "
                        "repeatable")


def query_source(a):
    """make(rate=, scale=, plugs=) building the query (or the set of queries) `a` names;
    exits with a message naming the option on a bad one."""
    makers = [query_maker(n) for n in a.query]
    for path in a.sql or ():
        files = sorted(path.glob("*.sql")) if path.is_dir() else [path]
        if not files:
            raise SystemExit(f"fedq: --sql: no .sql file in {path}")
        makers += [sql_maker(f, getattr(a, "data", None), a.tables,
                             getattr(a, "stream_decls", None)) for f in files]
    makers += [dsl_maker(spec) for spec in a.query_file or ()]
    if not makers:
        raise SystemExit("fedq: give a query: a name (CQ1..CQ6), --sql FILE or "
                         "--query FILE.py:NAME (several run together)")
    if len(makers) == 1:
        return makers[0]

    def make(**kw):
        from federation.errors import FedqError
        from federation.logical import QuerySet

        try:
            return QuerySet(tuple(m(**kw) for m in makers))
        except FedqError as e:
            raise SystemExit(f"fedq: {e}") from None

    return make


def data_dirs(values: list[str] | None) -> Path | str | dict[str, Path | str] | None:
    """`--data` given once as a directory or source URL, or once per stream as NAME=DIR or
    NAME=URL (federation/runtime/connectors/); a URL stays a string, a directory a Path."""
    from federation.errors import OptionError
    from federation.runtime.connectors import is_url

    if not values:
        return None
    named = {}
    for v in values:
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.+)", v)
        try:
            value = v if m is None else m.group(2)
            value = value if is_url(value) else Path(value)
        except ValueError as e:
            raise OptionError("data", str(e)) from None
        if m is None:
            if len(values) > 1:
                raise OptionError("data", f"{v!r}: give NAME=DIR for each stream when "
                                          "--data is given more than once")
            return value
        if m.group(1) in named:
            raise OptionError("data", f"stream {m.group(1)!r} given twice")
        named[m.group(1)] = value
    return named


def declared_streams(data) -> list:
    """The streams the sources of `data` declare: a directory's `_stream.json` (`fedq
    import`, a generated Nexmark directory), a generator's own schema."""
    from federation.runtime.connectors import parse_source
    from federation.streams import load_stream_decl

    named = {} if data is None else data if isinstance(data, dict) else {None: data}
    out = []
    for name, value in named.items():
        spec = parse_source(value)
        decl = load_stream_decl(spec.path) if spec.path is not None else \
            spec.declares(name or "smartplug")
        if decl is not None:
            out.append(decl)
    return out


def sql_maker(path: Path, data: Path | str | dict[str, Path | str] | None = None,
              tables: Path | None = None, decl_files: list[Path] | None = None):
    """make(rate, scale, plugs) for a SQL file; the streams are the smart-plug stream and
    the streams the data directories declare (`_stream.json`, `fedq import`); other names
    are tables of the DuckDB file `tables` (--tables)."""
    from pydantic import ValidationError

    from federation.errors import FedqError
    from federation.logical import Rstream
    from federation.smartplug import smartplug_stream
    from federation.sqlfront import sql
    from federation.streams import StreamDecl

    if not path.is_file():
        raise SystemExit(f"fedq: --sql: {path} is not a file")
    if tables is not None and not tables.is_file():
        raise SystemExit(f"fedq: --tables: {tables} is not a file")
    text = path.read_text()
    try:
        declared = declared_streams(data)
    except ValueError as e:
        raise SystemExit(f"fedq: --data: {e}") from None
    for f in decl_files or ():
        try:
            declared.append(StreamDecl.model_validate_json(Path(f).read_text()))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "(top)"
            raise SystemExit(f"fedq: --stream {f}: {where}: {first['msg']}") from None
        except OSError as e:
            raise SystemExit(f"fedq: --stream {f}: {e.strerror or e}") from None

    def make(rate: float = 2000.0, scale: float = 1.0, plugs: int = 2125):
        if scale != 1.0:
            raise SystemExit("fedq: --scale applies to CQ1..CQ6 only; a SQL query gives its "
                             "own window sizes")
        streams = {"smartplug": smartplug_stream(rate=rate, plugs=plugs)}
        for d in declared:
            streams[d.name] = d
        try:
            q = sql(text, streams, tables=tables)  # named by INSERT INTO, else by the file
            return q if re.search(r"(?i)\binsert\s+into\b", text) else Rstream(q.child, path.stem)
        except FedqError as e:
            hint = ("; a source that declares none (a broker's topic) needs --stream "
                    "FILE.json" if "unknown stream" in str(e) else "")
            raise SystemExit(f"fedq: --sql {path}: {e}{hint}") from None

    return make


def dsl_maker(spec: str):
    """make(rate, scale, plugs) for `FILE.py:NAME` (module doc of `add_query_arguments`)."""
    import importlib.util
    import inspect

    from federation.errors import FedqError
    from federation.logical import Rstream

    file, _, name = spec.rpartition(":")
    if not file or not name:
        raise SystemExit(f"fedq: --query: want FILE.py:NAME, got {spec!r}")
    path = Path(file)
    if not path.is_file():
        raise SystemExit(f"fedq: --query: {path} is not a file")
    mod_spec = importlib.util.spec_from_file_location(f"fedq_user_{path.stem}", path)
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file: show its error, not ours
        raise SystemExit(f"fedq: --query: {path} failed to load: {type(e).__name__}: {e}"
                         ) from None
    if not hasattr(module, name):
        found = sorted(k for k, v in vars(module).items() if not k.startswith("_") and (
            isinstance(v, Rstream)
            or (inspect.isfunction(v) and v.__module__ == module.__name__)))
        raise SystemExit(f"fedq: --query: {path} has no {name!r} (it has: "
                         f"{', '.join(found) or 'nothing usable'})")
    obj = getattr(module, name)

    def make(rate: float = 2000.0, scale: float = 1.0, plugs: int = 2125):
        if isinstance(obj, Rstream):
            q = obj
        elif callable(obj):
            params = inspect.signature(obj).parameters
            kw = {k: v for k, v in (("rate", rate), ("scale", scale), ("plugs", plugs))
                  if k in params}
            try:
                q = obj(**kw)
            except FedqError as e:  # a mistake in the query: where it is written, no trace
                raise SystemExit(f"fedq: --query {spec}: {e}") from None
        else:
            q = None
        if not isinstance(q, Rstream):
            raise SystemExit(f"fedq: --query: {spec} is not a query (an Rstream, or a "
                             f"function returning one; got {type(q).__name__})")
        return q

    return make


class Help(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Help with each option's default (unless it has none, or its text names it already)
    and examples kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


def rate_profile(text: str) -> list[tuple[float, int]]:
    """`RATE:SECONDS,...` -> [(rate, seconds), ...] (each rate > 0, each duration >= 1)."""
    out = []
    for item in text.split(","):
        try:
            r, n = item.split(":")
            rate, secs = float(r), int(n)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r}: phases are RATE:SECONDS, e.g. 2000:120,40000:120") from None
        if not (math.isfinite(rate) and rate >= 0.5) or secs < 1:
            raise argparse.ArgumentTypeError(f"{item.strip()!r}: a rate >= 0.5 tuples/s and "
                                             "at least 1 second")
        out.append((rate, secs))
    return out


def add_engine_arguments(r) -> None:
    """`fedq run`'s options about the engines: the cost profile, Spark's master and state
    store, and the memory check."""
    r.add_argument("--profile", type=Path, default=None,
                   help="cost profile JSON (default: the calibrated one, else the shipped one)")
    r.add_argument("--master", default=None,
                   help="Spark master, e.g. spark://host:7077 (default: local[2]); the plan "
                        "is chosen for its executors' cores and heap")
    r.add_argument("--state-store", choices=["memory", "rocksdb"], default="memory",
                   help="where Spark keeps window state: its heap (Spark's default) or "
                        "RocksDB (off heap, on local disk: for state beyond the heap)")
    r.add_argument("--feed", choices=["direct", "spe"], default="direct",
                   help="how a stage without Spark operators gets its micro-batches: read "
                        "from the spool by fedq itself (direct: no JVM for a plan all in "
                        "DuckDB) or forwarded by a Spark streaming query (spe, the paper's "
                        "setting)")
    r.add_argument("--no-memory-check", action="store_true", help="choose a plan whatever its "
                   "predicted state memory (docs/cost-model.md, Memory)")


def add_mqtt_security_arguments(g) -> None:
    """--mqtt-ca, --mqtt-cert, --mqtt-key, --mqtt-password-file (federation/brokers.py)."""
    g.add_argument("--mqtt-ca", type=Path, default=None, metavar="FILE",
                   help="mqtts://: the CA certificate(s) to check the broker's against "
                        "(default: the system's)")
    g.add_argument("--mqtt-cert", type=Path, default=None, metavar="FILE",
                   help="mqtts://: a client certificate (with --mqtt-key)")
    g.add_argument("--mqtt-key", type=Path, default=None, metavar="FILE",
                   help="mqtts://: the client certificate's private key")
    g.add_argument("--mqtt-password-file", type=Path, default=None, metavar="FILE",
                   help="a file whose first line is the MQTT password (else the environment "
                        "variable FEDQ_MQTT_PASSWORD; the user is the URL's: "
                        "mqtts://USER@HOST/TOPIC; never put the password in the URL)")


def mqtt_security(a):
    """The MqttSecurity of the command line's --mqtt-* arguments."""
    from federation.brokers import MqttSecurity

    return MqttSecurity(a.mqtt_ca, a.mqtt_cert, a.mqtt_key, a.mqtt_password_file)
