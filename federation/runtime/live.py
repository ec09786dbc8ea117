"""What a following run adds to `execute` (docs/architecture.md, "Live streams"): the
follower that grows the spool as files land, the wait for the first reading, and how
far a run is (event seconds done and landed)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from federation.errors import FedqError
from federation.instants import Grid
from federation.runtime.connectors import SourceContext, SourceSpec
from federation.runtime.follow import Follower, Lane
from federation.runtime.ingest import Ingestor
from federation.runtime.microbatch import watermark
from federation.runtime.options import RunOptions
from federation.runtime.progress import RunProgress
from federation.streams import StreamDecl

RUN_ID_FILE = "run-id"
RUN_START_FILE = "run-start"


class RunHalted(FedqError):
    """A run was halted before it had anything to compute."""


def run_id(work: Path, resuming: bool) -> str:
    """This run's id: new for a new run, the interrupted run's when it resumes (the sinks
    know their rows by it)."""
    path = work / RUN_ID_FILE
    if resuming and path.exists():
        return path.read_text().strip()
    rid = uuid.uuid4().hex[:16]
    path.write_text(rid + "\n")
    return rid


def start_following(sources: Mapping[str, SourceSpec], streams: Mapping[str, StreamDecl],
                    work: Path, rid: str, opt: RunOptions, grid: Grid, resuming: bool,
                    flush_after_s: float, spool_format: str = "parquet") -> Follower:
    """The follower of every stream's source (federation/runtime/connectors/), going on
    from the spools of an interrupted run in `work`; `rid`: the run's id (the brokers'
    sessions are named after it); `grid`: the query's instants (the spools' tick grid);
    `flush_after_s`: how far the flush at the end of input goes; `spool_format`: the
    spools' (ingest.Ingestor). Each source is opened (a
    broker subscribed, a generator started) before its spool is made: nothing published
    since is lost."""
    ctx = SourceContext(client_id=f"fedq-{rid}", security=opt.mqtt_security,
                        start=run_start(work, resuming))
    lanes: dict[str, Lane] = {}
    try:
        for name, spec in sources.items():
            stream = streams[name]
            landing = spec.landing(work, name)
            feeder = spec.open(landing, stream, replace(ctx, client_id=f"{ctx.client_id}-{name}"))
            lanes[name] = Lane(landing, None, feeder)
            kw = {"allowed_lateness_s": opt.allowed_lateness_s, "tick_s": grid,
                  "domains": opt.domains_of(stream), "horizon_s": opt.event_horizon_s,
                  "file_list": False, "max_file_rows": opt.max_file_rows,
                  "spool_format": spool_format}
            input_dir = work / "input" / name
            ing = Ingestor.resumed(input_dir, stream, **kw) if resuming else \
                Ingestor(input_dir, stream, **kw)
            if not resuming:
                ing.count_csv_rejects(landing)
            lanes[name].ing = ing
    except BaseException:
        for lane in lanes.values():
            if lane.feeder is not None:
                lane.feeder.stop()
        raise
    return Follower(lanes, idle_timeout_s=opt.idle_timeout_s, until=opt.until,
                    flush_after_s=flush_after_s).start()


def run_start(work: Path, resuming: bool) -> datetime:
    """The run's start in wall time (whole seconds, UTC): a generator's first event time,
    the same for every stream and kept across resumes."""
    path = work / RUN_START_FILE
    if resuming and path.exists():
        return datetime.fromisoformat(path.read_text().strip())
    now = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    path.write_text(now.isoformat() + "\n")
    return now


def wait_for_first(follower: Follower, halt: threading.Event, prog: RunProgress) -> bool:
    """Wait until the run's first instant is known (follow.py: a reading in every stream,
    or the idle timeout after the first); False when halted first."""
    if not follower.started.is_set():
        prog.phase(f"waiting for the first file in {follower.description}")
    while not follower.started.wait(0.2):
        if halt.is_set():
            return False
    if follower.error is not None:
        raise follower.error
    return True


def seconds_by_batches(ingest, fast_forward_s: int, opt, ahead=None
                       ) -> Callable[[int], tuple[int, int]]:
    """Event seconds done by a run over directories after so many batches, and in all
    (the input's files; ahead: as listed, while the IngestAhead reads them): the
    fast-forward's batches of `opt.warmup_batch_s` seconds, then `opt.seconds_per_batch`."""
    ff_batches, ff_seconds = ingest.warmup_files, min(fast_forward_s, ingest.files)
    warm, spb = opt.warmup_batch_s or 1, opt.seconds_per_batch

    def done(batches: int) -> tuple[int, int]:
        total = ahead.total_files if ahead is not None else ingest.files
        if batches <= ff_batches:
            return min(ff_seconds, batches * warm), total
        return min(ff_seconds + (batches - ff_batches) * spb, total), total

    return done


def seconds_by_clock(staged, ingest) -> Callable[[int], tuple[int, int]]:
    """Event seconds done by a following run (batches of any size): its clock's distance
    from the first reading; and landed: the input's clock's distance from it (their
    difference is the backlog, however the input's files cut event time)."""
    st = staged.stages[0]

    def done(_batches: int) -> tuple[int, int]:
        c = watermark(st.clock, st.clock_sources, 0.0)
        first, last = ingest.first_ts, ingest.last_ts
        if first is None or last is None:
            return 0, 0
        landed = int((last - first).total_seconds()) + 1
        return (0 if c is None else min(landed, max(0, int((c - first).total_seconds()) + 1)),
                landed)

    return done
