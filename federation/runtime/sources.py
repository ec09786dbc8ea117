"""The streams of a query and where each one's readings come from (docs/architecture.md,
"Live input").

A query reads one or more declared streams; each has its own data directory, validated
into its own spool (`ingest.py`) against its own schema, in `<work>/input/<stream>/` (a
query over one stream is the case of one: the same layout, the same code), and
`<work>/input/inputs.json` says the spools are complete.

Time across streams: the query's instants run from the first reading of any stream to the
last of any (plus the extent); Spark's watermark is the smallest over its sources, and a
DB-op's clock the smallest over its stage's clock sources, so an instant closes once the
slowest stream has passed it. Every stream's spool ends with the same flush punctuation
(after the last reading of all streams), so that a stream that ends early does not hold
the last windows of the others open.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
from pydantic import BaseModel

from federation.conventions import SPOOL_MTIME
from federation.errors import OptionError
from federation.instants import Grid
from federation.parts import list_parts, spool_part, write_part
from federation.runtime.connectors import SourceSpec, parse_source
from federation.runtime.ingest import Ingestor, IngestResult, punctuation, read_clean_rows
from federation.runtime.options import is_topic
from federation.streams import StreamDecl

INPUTS_FILE = "inputs.json"


def query_streams(nodes) -> dict[str, StreamDecl]:
    """The declared streams a plan's windows read, by name (in name order)."""
    found = {n.stream.name: n.stream for n in nodes if getattr(n, "kind", None) == "window"}
    return dict(sorted(found.items()))


def bind_sources(streams: Mapping[str, StreamDecl], data, opt=None) -> dict[str, SourceSpec]:
    """Each stream's source (federation/runtime/connectors/) from `data`: one directory or
    source URL (a query over one stream), or a mapping {stream name: directory or URL};
    for one stream `opt.source` (a broker's topic) may stand for it. OptionError("data")
    names what is missing or malformed."""
    names = list(streams)
    if data is None:
        if opt is not None and opt.source:
            data = opt.source
        else:
            raise OptionError("data", "needs a data directory or a source URL")
    if not isinstance(data, Mapping):
        if len(names) > 1:
            raise OptionError("data", (
                f"the query reads {len(names)} streams ({', '.join(names)}): give each its "
                f"own source, --data NAME=DIR or NAME=URL per stream (in the API a mapping "
                f"{{'{names[0]}': DIR, ...}}); one directory holds one stream"))
        data = {names[0]: data}
    given = {str(k): v for k, v in data.items()}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise OptionError("data", f"no stream {unknown[0]!r} in the query (it reads "
                                  f"{', '.join(names)})")
    missing = [n for n in names if n not in given]
    if missing:
        raise OptionError("data", f"no source for stream {missing[0]!r}: give --data "
                                  f"{missing[0]}=DIR (or a URL)")
    out = {}
    for n in names:
        try:
            out[n] = parse_source(given[n])
        except ValueError as e:
            raise OptionError("data", f"{n}: {e}") from None
    given_tls = [] if opt is None or is_topic(opt.output) else opt.mqtt_options
    if given_tls and not any(s.kind in ("mqtt", "mqtts") for s in out.values()):
        raise OptionError(given_tls[0], "needs an MQTT source or output (--data "
                                        "NAME=mqtts://..., --source or --output mqtts://...)")
    return out


class InputSet(BaseModel):
    """The validated inputs of a query, one IngestResult per stream it reads, read through
    the attributes a run needs of the whole (first and last reading over all streams, the
    most event seconds, counts summed)."""

    inputs: dict[str, IngestResult]

    @property
    def first_ts(self) -> datetime | None:
        return min((r.first_ts for r in self.inputs.values() if r.first_ts), default=None)

    @property
    def last_ts(self) -> datetime | None:
        return max((r.last_ts for r in self.inputs.values() if r.last_ts), default=None)

    @property
    def files(self) -> int:
        return max((r.files for r in self.inputs.values()), default=0)

    @property
    def spool_files(self) -> int:
        return max((r.spool_files for r in self.inputs.values()), default=0)

    @property
    def warmup_files(self) -> int:
        return max((r.warmup_files for r in self.inputs.values()), default=0)

    def _sum(self, attr: str):
        return sum(getattr(r, attr) for r in self.inputs.values())

    @property
    def rows_in(self) -> int:
        return self._sum("rows_in")

    @property
    def rows_ok(self) -> int:
        return self._sum("rows_ok")

    @property
    def rows_dead(self) -> int:
        return self._sum("rows_dead")

    @property
    def cpu_s(self) -> float:
        return self._sum("cpu_s")

    @property
    def dead(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, r in self.inputs.items():
            for why, n in r.dead.items():
                out[f"{name}: {why}"] = n
        return out

    @property
    def quarantined(self) -> list[dict[str, str]]:
        return [{**q, "stream": name} for name, r in self.inputs.items() for q in r.quarantined]

    @property
    def deadletter_dir(self) -> Path:
        # <work>/input/<stream>/deadletter/<run>: the letters of every stream under <work>
        first = next(iter(self.inputs.values())).deadletter_dir
        return first.parent.parent.parent

    @property
    def spool_dirs(self) -> dict[str, Path]:
        return {n: r.spool_dir for n, r in self.inputs.items()}

    @property
    def spool_formats(self) -> dict[str, str]:
        """Each stream's spool format (federation.parts.SPOOL_FORMATS)."""
        return {n: r.spool_format for n, r in self.inputs.items()}

    @property
    def spool_dir(self) -> Path:
        """The spool of the stream (a query over one stream; tests and tools read it)."""
        if len(self.inputs) != 1:
            raise AttributeError(f"the input has a spool per stream ({', '.join(self.inputs)})"
                                 ": spool_dirs")
        return next(iter(self.inputs.values())).spool_dir


def write_flush(res: IngestResult, stream: StreamDecl, at: datetime) -> None:
    """The end of a stream's input at `at`: a flush punctuation file after its spool."""
    write_part(spool_part(res.spool_dir, res.spool_files, res.spool_format),
               punctuation(stream, at), SPOOL_MTIME + res.spool_files)


def prepare_inputs(sources: Mapping[str, SourceSpec], streams: Mapping[str, StreamDecl],
                   input_dir: Path, prepare, flush_after_s: float | None,
                   allowed_lateness_s: float) -> InputSet:
    """Validate every stream's directory into `input_dir/<stream>` (`prepare(data, work,
    stream)`: `prepare_input` with the run's options, no flush), then one flush for
    all after the last reading of any, and inputs.json (the spools are complete)."""
    results = {n: prepare(sources[n].path, input_dir / n, streams[n]) for n in streams}
    inputs = InputSet(inputs=results)
    if flush_after_s is not None and inputs.last_ts is not None:
        at = inputs.last_ts + timedelta(seconds=flush_after_s + allowed_lateness_s)
        for n, r in results.items():
            write_flush(r, streams[n], at)
    (input_dir / INPUTS_FILE).write_text(inputs.model_dump_json(indent=2))
    return inputs


def load_inputs(input_dir: Path) -> InputSet:
    return InputSet.model_validate_json((input_dir / INPUTS_FILE).read_text())


def read_clean_inputs(ingest: InputSet) -> dict[str, pa.Table]:
    """What the engines saw (markers removed), per stream."""
    return {n: read_clean_rows(d) for n, d in ingest.spool_dirs.items()}


def prepare_input(
    data_dir: Path | str,
    work_dir: Path | str,
    stream: StreamDecl,
    *,
    flush_after_s: float | None = 600.0,
    max_files: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    **ingest_options,
) -> IngestResult:
    """Validate every event-second file of `data_dir` into `work_dir/spool` (see module doc
    and `Ingestor` for the options).

    `flush_after_s=None` writes no flush file (the windows open at the end stay open).
    `max_files`: only the first that many files."""
    data = Path(data_dir)
    if not data.is_dir():
        raise FileNotFoundError(f"data directory {data} does not exist")
    parts = list_parts(data)
    if not parts:
        raise FileNotFoundError(f"no part-*.parquet files in {data_dir}")
    if max_files is not None:
        parts = parts[:max_files]
    ing = Ingestor(work_dir, stream, **ingest_options)
    ing.count_csv_rejects(data)
    for k, path in enumerate(parts):
        ing.add(path, last=k == len(parts) - 1)
        if progress:
            progress(k + 1, len(parts))
    return ing.finish(flush_after_s)


def replay_input(sources: Mapping[str, SourceSpec], streams: Mapping[str, StreamDecl],
                 input_dir: Path, opt, progress, flush_s: float | None, grid: Grid,
                 fast_forward_s: int, spool_format: str) -> InputSet:
    """A run's input directories validated into its spools with the run's options (`opt`,
    RunOptions): the InputSet (a spool per stream, one flush after them all)."""

    def prepare(data, input_dir, stream, flush_after_s=None):
        return prepare_input(data, input_dir, stream, progress=progress,
                             allowed_lateness_s=opt.allowed_lateness_s,
                             flush_after_s=flush_after_s, max_files=opt.max_files,
                             domains=opt.domains_of(stream), fast_forward_s=fast_forward_s,
                             fast_forward_batch=opt.warmup_batch_s or 1, tick_s=grid,
                             horizon_s=opt.event_horizon_s, spool_format=spool_format)

    return prepare_inputs(sources, streams, input_dir, prepare, flush_s, opt.allowed_lateness_s)
