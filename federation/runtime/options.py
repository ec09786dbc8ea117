"""Run options as typed models, checked once at the boundary (the API or the CLI) before any
work; a bad one raises OptionError naming it as the API spells it (the CLI maps the name to
its flag, federation/cli/run.py). Also the one place that makes work directories."""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from federation.brokers import MqttSecurity
from federation.conventions import parse_mqtt_url
from federation.errors import OptionError, OutputError


class CheckedOptions(BaseModel):
    """Options built with `of(**kw)`: every field checked, an unknown name refused, the
    first problem raised as OptionError(option, message)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    #: what a bad option raises (an OptionError subclass)
    error: ClassVar[type[OptionError]] = OptionError

    @classmethod
    def of(cls, given: CheckedOptions | Mapping[str, Any] | None = None, **kw):
        """The options `given` (a model or a mapping) updated with `kw`, checked."""
        if isinstance(given, cls) and not kw:
            return given
        values = dict(given.model_dump() if isinstance(given, BaseModel) else given or {})
        values.update(kw)
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            raise _option_error(e, cls.error) from None


def _option_error(e: ValidationError, error: type[OptionError]) -> OptionError:
    x = e.errors()[0]
    option = str(x["loc"][0]) if x["loc"] else "options"
    if x["type"] == "extra_forbidden":
        return error(option, "is not an option here")
    err = (x.get("ctx") or {}).get("error")
    if isinstance(err, OptionError):
        return err
    return error(option, str(err) if err is not None else x["msg"])


def _whole(v: Any, at_least: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < at_least:
        raise ValueError(f"must be a whole number >= {at_least}, got {v!r}")
    return v


def _finite(v: Any, low: float = 0.0, inclusive: bool = False) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or v < low or (v == low and not inclusive):
        raise ValueError(f"must be a finite number {'>=' if inclusive else '>'} {low:g}, "
                         f"got {v!r}")
    return float(v)


class RunOptions(CheckedOptions):
    """How one run executes a physical plan (federation.runtime.execute).

    `seconds_per_batch`: event seconds per micro-batch. `allowed_lateness_s`: how far a
    reading may arrive behind the largest event time seen. `event_horizon_s`: a reading
    further ahead is dead-lettered. `output` (a .parquet file or a directory) and
    `overwrite`: where the result rows go. `work_dir`: keeps the run's state (the same run
    on it resumes; `fresh=True` discards it); default a new temporary directory.
    `realtime`: one micro-batch per batch interval of wall time. `max_files`: read only the
    first part files. `budget_s`: stop after that much wall time. `warmup_batch_s`: the
    first (largest window range) event seconds go in micro-batches of that many seconds
    (needs seconds_per_batch=1); results are the same. `drain=False` (throughput only):
    the windows that close after the last event second are not computed. `domains`: column
    -> allowed values (default: the stream's declared domains).

    `follow`: read the data directory's files as they land and never end by itself (a
    halt, SIGINT or SIGTERM stops it after the micro-batch in progress; the same work
    directory resumes and follows on); `until` (an event time) ends the input when the
    stream's clock reaches it; `idle_timeout_s`: after that much wall time without a file
    the clock moves on with wall time (federation/runtime/follow.py); `max_batch_rows`: a
    micro-batch of a following run reads at most a minute of event time (or
    seconds_per_batch, if more), and at most about that many readings of each stream (a
    burst is caught up in batches of that size while its backlog waits in the spool, on
    disk; None: no bound but the minute). Results go to the
    sinks as they are computed (federation/runtime/sinks.py): `output` a `.parquet` file
    or a directory (`results.parquet` inside; followed: one Parquet part per micro-batch
    and a manifest), a `.duckdb` file (table `output_table`) or a broker's topic
    (`mqtt://HOST:PORT/TOPIC`); of several queries, each query's is `<output>/<query>`
    or its own table. `console` prints each instant, `sinks` more objects with
    put(key, rows, query) and close(), each told the query whose rows it gets. `source`
    (`mqtt://HOST:PORT/TOPIC`): follow a broker's topic instead of a directory
    (federation/runtime/connectors/mqtt.py; implies `follow`); `mqtts://` over TLS, with `mqtt_ca`,
    `mqtt_cert` and `mqtt_key` files, the password in `mqtt_password_file` or
    $FEDQ_MQTT_PASSWORD, never in the URL (federation/brokers.py).
    `feed`: how a stage without SPE-ops gets its micro-batches: "direct" (default: read from
    its spool in this process, no Spark query; federation/runtime/direct.py) or "spe" (a
    Spark streaming query forwards every row, the setting of Ji et al.).
    `state_store`: where Spark keeps its operators' state, "memory" (Spark's default, the
    heap) or "rocksdb" (off heap, spilling to local disk: for state beyond the heap).
    `metrics_port`: serve Prometheus metrics on that port of 127.0.0.1 while the run runs
    (0: a free port, printed; federation/runtime/metrics.py).
    """

    seconds_per_batch: int = 1
    allowed_lateness_s: float = 0.0
    event_horizon_s: float = 3600.0
    output: Path | str | None = None
    overwrite: bool = False
    work_dir: Path | None = None
    fresh: bool = False
    realtime: bool = False
    max_files: int | None = None
    budget_s: float | None = None
    warmup_batch_s: int | None = None
    drain: bool = True
    domains: dict[str, set] | None = None
    follow: bool = False
    source: str | None = None
    idle_timeout_s: float = 5.0
    max_batch_rows: int | None = 500_000
    until: dt.datetime | None = None
    output_table: str = "results"
    console: bool = False
    sinks: tuple = ()
    state_store: Literal["memory", "rocksdb"] = "memory"
    feed: Literal["direct", "spe"] = "direct"
    mqtt_ca: Path | None = None
    mqtt_cert: Path | None = None
    mqtt_key: Path | None = None
    mqtt_password_file: Path | None = None
    metrics_port: int | None = None

    @field_validator("seconds_per_batch", "max_files", "warmup_batch_s", "max_batch_rows",
                     mode="before")
    @classmethod
    def _counts(cls, v, info):
        return None if v is None and info.field_name != "seconds_per_batch" else _whole(v)

    @field_validator("event_horizon_s", "budget_s", "idle_timeout_s", mode="before")
    @classmethod
    def _positive(cls, v, info):
        return None if v is None and info.field_name == "budget_s" else _finite(v)

    @field_validator("output", mode="before")
    @classmethod
    def _output(cls, v):
        """A path, or an MQTT URL (a string: a Path would fold its //)."""
        if is_topic(v):
            parse_mqtt_url(v)  # ValueError names what is wrong
            return v
        return None if v is None else Path(v)

    @field_validator("sinks", mode="before")
    @classmethod
    def _sinks(cls, v):
        for s in v or ():
            if not callable(getattr(s, "put", None)) or not callable(getattr(s, "close", None)):
                raise ValueError(f"{type(s).__name__} is not a sink: a sink has "  # noqa: TRY004
                                 "put(key, rows, query) and close() (runtime/sinks.py)")
        return tuple(v or ())

    @field_validator("metrics_port", mode="before")
    @classmethod
    def _port(cls, v):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or
                              not 0 <= v <= 65535):
            raise ValueError(f"must be a port number 0-65535, got {v!r}")
        return v

    @field_validator("output_table", mode="before")
    @classmethod
    def _table(cls, v):
        if not isinstance(v, str) or not v.replace("_", "a").isalnum() or v[0].isdigit():
            raise ValueError(f"must be a table name (letters, digits, _), got {v!r}")
        return v

    @field_validator("allowed_lateness_s", mode="before")
    @classmethod
    def _lateness(cls, v):
        return _finite(v, inclusive=True)

    @model_validator(mode="after")
    def _together(self):
        if self.source is not None:
            try:
                parse_mqtt_url(self.source)
            except ValueError as e:
                raise OptionError("source", str(e)) from None
            if not self.follow:
                raise OptionError("source", "needs follow=True, --follow (a broker's topic "
                                  "never ends by itself)")
            if (why := self.mqtt_security.problem(self.source)) is not None:
                raise OptionError(*why)
        if is_topic(self.output) and (why := self.mqtt_security.problem(self.output)):
            raise OptionError(*why)
        if self.follow and (self.warmup_batch_s or self.max_files or not self.drain):
            raise OptionError("follow", "takes no warmup_batch_s, max_files or drain=False")
        if self.warmup_batch_s is not None and self.seconds_per_batch != 1:
            raise OptionError("warmup_batch_s", "needs seconds_per_batch=1, got "
                              f"seconds_per_batch={self.seconds_per_batch}")
        why = check_output(self.output, self.overwrite, self.follow)
        if why:
            raise OutputError(why)
        return self

    @property
    def files_per_batch(self) -> int:
        """Spool files per micro-batch: a following run takes whatever has landed, up to a
        minute of event time per micro-batch (the same results: batches are free to be any
        size), so that a backlog is caught up in a few batches instead of one file each."""
        return max(self.seconds_per_batch, 60) if self.follow else self.seconds_per_batch

    @property
    def max_file_rows(self) -> int | None:
        """The most good rows of a spool file (ingest.Ingestor): `max_batch_rows` over the
        files of a micro-batch."""
        if not self.follow or self.max_batch_rows is None:
            return None
        return -(-self.max_batch_rows // self.files_per_batch)

    @property
    def mqtt_options(self) -> list[str]:
        """The MQTT security options given (they need an MQTT source)."""
        return [f for f in ("mqtt_ca", "mqtt_cert", "mqtt_key", "mqtt_password_file")
                if getattr(self, f)]

    @property
    def mqtt_security(self) -> MqttSecurity:
        """The TLS files and the password's place for `source` (federation/brokers.py)."""
        return MqttSecurity(self.mqtt_ca, self.mqtt_cert, self.mqtt_key,
                            self.mqtt_password_file)

    def domains_of(self, stream) -> dict[str, set]:
        """The allowed values per column: `domains`, else the stream's declared ones."""
        if self.domains is not None:
            return self.domains
        return {c: set(v) for c, v in stream.domains.items()}


class GenerateOptions(CheckedOptions):
    """The smart-plug data a run generates when it is given no data directory."""

    rate: float = 2000.0
    seconds: int = 60
    plugs: int = 200
    seed: int = 0

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v):
        return _finite(v)

    @field_validator("seconds", "plugs", mode="before")
    @classmethod
    def _counts(cls, v):
        return _whole(v)


def is_topic(output) -> bool:
    """True when `output` is a broker's topic (results published as they are computed)."""
    return isinstance(output, str) and output.startswith(("mqtt://", "mqtts://"))


def output_path(output: Path) -> Path:
    """Where `output` is written at the end of a run: the file itself (.parquet or a
    .duckdb sink) or results.parquet inside."""
    return output if output.suffix in (".parquet", ".duckdb") else output / "results.parquet"


def check_output(output: Path | str | None, overwrite: bool = False,
                 follow: bool = False) -> str | None:
    """Why the results cannot be written to `output`, or None; checked before any work.
    A .duckdb file may exist (its table gets the rows); a followed run's directory too
    (it holds the parts of this run, or another's: checked when the run starts)."""
    if output is None or is_topic(output):
        return None  # a broker: published as computed, checked when the run connects
    output = Path(output)
    path = output_path(output)
    one_file = output.suffix == ".parquet" or (not follow and output.suffix != ".duckdb")
    if path.exists() and not overwrite and one_file:
        return f"{path} exists; pass --overwrite to replace it"
    parent = path.parent  # made at the end of the run where missing, as Spark's writers do
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        return f"cannot write to {parent} ({probe} is not a writable directory)"
    return None


def work_directory(given: str | Path | None, prefix: str = "fedq-run-") -> Path:
    """The work directory of a run: the given one (made if missing) or a new temporary one
    (the one place that makes them)."""
    work = Path(given) if given else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return work
