"""What makes a run resumable after a crash (docs/architecture.md, "Crash and resume").

A run's work directory holds everything a resumed run needs:

* `run.json`: the run's identity (query plan, placement, batch sizes); another query or
  placement on the same directory is refused;
* `input/`: the validated spool, Spark's replayable source (written once; `input/ingest.json`
  marks it complete);
* `checkpoints/`: Spark's own checkpoints (offsets, commits, operator state);
* `state/<db-op>.duckdb`: each MIG's DuckDB database; a micro-batch's inserts, folds, seals,
  expiry and the MIG's bookkeeping (with the batch id) commit in one transaction, so the
  state matches exactly the batches it applied and a replayed batch is skipped by its id;
* `state/stage<i>.json`: each stage's event-time clock after its last handled batch;
* `results/part-<stage>-<batch>.parquet`: result rows as they are produced, one part per
  micro-batch, written atomically and named by batch id (a replay overwrites the same part
  with the same rows); the final output is their union.

Order within a batch: result or re-entry parts are written first, then the MIG commits,
then the stage's clock file: a crash between two steps replays the batch, and every step
is idempotent by batch id.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.conventions import TAU
from federation.errors import FedqError, OptionError, SinkFailed
from federation.parts import atomic_write_bytes, atomic_write_parquet
from federation.runtime.result import results_table
from federation.runtime.sinks import is_durable, sink_label

RUN_FILE = "run.json"
#: fault injection for tests and benchmarks.faults: FEDQ_FAULT="<point>:<n>" kills this
#: process group with SIGKILL the n-th time the run passes <point> (see FAULT_POINTS)
FAULT_POINTS = ("batch_start", "mig_rows_in", "before_commit", "after_commit", "batch_end",
                "ingest_file")  # an input file read, once a micro-batch is done (ahead.py)
_fault = os.environ.get("FEDQ_FAULT", "")
_fault_point, _, _fault_n = _fault.partition(":")
_fault_seen = 0


def fault_point(name: str, before=None) -> None:
    """Where a kill -9 can be injected (no-op unless FEDQ_FAULT names this point);
    `before()` runs first (waits for the moment the kill should hit)."""
    global _fault_seen
    if name != _fault_point:
        return
    _fault_seen += 1
    if _fault_seen == int(_fault_n or 1):
        if before is not None:
            before()
        os.killpg(os.getpgid(0), signal.SIGKILL)


class ResumeError(FedqError, ValueError):
    """The work directory holds another run."""


LOCK_FILE = "lock"


class WorkLock:
    """This process runs in the work directory: an exclusive lock on `<work>/lock` (which
    names the process), so that a second run on the directory (the same command in another
    terminal) is refused instead of corrupting the first one's state. The lock goes with
    the process, also after kill -9 (flock)."""

    def __init__(self, work: Path) -> None:
        import fcntl

        self.f = open(work / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.f.seek(0)
            pid = self.f.read().strip() or "?"
            self.f.close()
            raise OptionError("work_dir", f"{work} is in use by another fedq run (process "
                                          f"{pid}); wait for it to end, stop it, or name "
                                          "another work directory") from None
        self.f.seek(0)
        self.f.truncate()
        self.f.write(f"{os.getpid()}\n")
        self.f.flush()

    @classmethod
    def hold(cls, work: Path) -> WorkLock:
        """The lock of `work` (this process's, if it holds it already: a fresh run that
        takes over a resumed one in the same directory)."""
        key = Path(work).resolve()
        lock = _HELD.get(key)
        if lock is None or lock.f.closed:
            lock = _HELD[key] = cls(work)
        return lock

    def close(self) -> None:
        if not self.f.closed:
            self.f.close()  # closing the file releases the lock


_HELD: dict[Path, WorkLock] = {}


def lock_holder(work: Path) -> int | None:
    """The process that runs in `work` now, or None when no run holds it."""
    import fcntl

    path = work / LOCK_FILE
    if not path.exists():
        return None
    with open(path, encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = f.read().strip()
            return int(text) if text.isdigit() else -1
    return None


def run_identity(plan, opt, sources, data, h) -> dict:
    """What must not change between a run and its resumption: the plan, the options
    (RunOptions) that shape its batches, its data (each stream's directory or URL in
    `sources`, else the directory `data`) and a handoff's (`h`) start and stop instants."""
    if sources:
        data = {n: str(s.path.resolve()) if s.path is not None else s.url
                for n, s in sources.items()}
    else:  # a handoff's input: the directories or sources it was read from
        from federation.runtime.connectors import source_identity

        data = {str(k): source_identity(v) for k, v in data.items()} \
            if isinstance(data, Mapping) else {"": source_identity(data)}
    start_at, stop_at = h.start_at, h.stop_at
    lg = plan.logical
    text = repr(sorted((k, repr(n)) for k, n in lg.nodes.items()))
    return {"query": lg.root.name, "placement": plan.placement_string,
            "plan_sha": hashlib.sha256(text.encode()).hexdigest()[:16],
            "seconds_per_batch": opt.seconds_per_batch,
            "allowed_lateness_s": opt.allowed_lateness_s,
            "warmup_batch_s": opt.warmup_batch_s, "drain": opt.drain, "data": data,
            "max_files": opt.max_files, "start_at": str(start_at), "stop_at": str(stop_at),
            "follow": opt.follow, "until": str(opt.until), "feed": opt.feed}


def claim(work: Path, identity: dict) -> bool:
    """True when `work` holds a resumable run with this identity; False for a new run
    (the directory is then claimed for it). Another run's directory is refused."""
    path = work / RUN_FILE
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = None
        if old == identity:
            # a following run goes on from whatever its spools hold (each stream's state
            # is in its last spool file: ingest.Ingestor.resumed); a replayed one from a
            # complete spool (inputs.json), or from the spool its stages had started on
            # while the input was read (ahead.py: their results may be in the sinks already)
            return (bool(identity.get("follow"))
                    or (work / "input" / "inputs.json").exists()
                    or (work / "checkpoints").is_dir())
        if old is not None:
            diff = [f"{k}: {old.get(k)!r} there, {v!r} now" for k, v in identity.items()
                    if old.get(k) != v]
            raise ResumeError(
                f"work dir {work} holds another run ({old.get('query')} under "
                f"{old.get('placement')}; {'; '.join(diff)}): use another --work-dir, or "
                f"--fresh to discard it")
    atomic_write_bytes(path, json.dumps(identity, indent=2).encode())
    return False


class StageLog:
    """A stage's clock after its last handled micro-batch (`state/stage<i>.json`)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict | None:
        if not self.path.exists():
            return None
        d = json.loads(self.path.read_text())
        d["clock"] = {int(k): dt.datetime.fromisoformat(v) for k, v in d["clock"].items()}
        return d

    def save(self, batch: int, clock: dict, data_batches: int) -> None:
        d = {"batch": batch, "clock": {str(k): v.isoformat() for k, v in clock.items()},
             "data_batches": data_batches}
        atomic_write_bytes(self.path, json.dumps(d).encode())


def first_error(e: BaseException) -> str:
    """The line of an error that names it (Spark's exception leads, its plan follows)."""
    lines = str(e).strip().splitlines()
    first = next((ln for ln in lines if "Exception" in ln or "Error" in ln),
                 lines[0] if lines else repr(e))
    return first[:300]


def load_stage_logs(stages, state: Path, resuming: bool) -> tuple[dict[int, StageLog], tuple]:
    """Each stage's log in `state`; a resumed run's stages get their saved clocks, last
    batch and data batches. Also (next batch, event time) of stage 0 when it resumes."""
    logs, resumed_at = {}, None
    for st in stages:
        log = logs[st.index] = StageLog(state / f"stage{st.index}.json")
        saved = log.load() if resuming else None
        if saved:
            st.clock, st.last_done = saved["clock"], saved["batch"]
            st.data_batches = saved["data_batches"]
            if st.index == 0:
                resumed_at = (saved["batch"] + 1, min(saved["clock"].values(), default=None))
    return logs, resumed_at


def results_dir(work: Path, query: str) -> Path:
    """Where a query's result parts are (`<work>/results/<query>`)."""
    return work / "results" / query


class ResultParts:
    """The query's result rows as parts on disk, keyed by (stage, batch id), then handed
    to the run's sinks (federation/runtime/sinks.py) as the user sees them.

    A durable sink (a Parquet directory, a table, a topic) gets each micro-batch's rows
    at once, keyed. A sink that shows instants as they come (the console, the API's
    iterator: `durable = False`) gets each instant once and in order: rows that Spark
    computes as their input arrives (window rows, a join or selection of them, not an
    aggregate) are held until the stage's clock completes their instant (`release`)."""

    def __init__(self, directory: Path, columns: list[str], sinks=(), query: str = "") -> None:
        self.dir, self.query = directory, query
        self.dir.mkdir(parents=True, exist_ok=True)
        self.columns = columns
        self.sinks = list(sinks)
        self.durable = [s for s in self.sinks if is_durable(s)]
        self.ordered = [s for s in self.sinks if not is_durable(s)]
        self.held: list[pa.Table] = []  # rows of instants not complete yet, for `ordered`
        self.rows = 0  # handed on by this process (a replayed batch counts again)
        self.instants = 0
        self.last_tau = None  # the last instant handed to the sinks
        self._table: pa.Table | None = None

    def put(self, key: tuple, t: pa.Table, complete: bool = True) -> None:
        """A micro-batch's rows; `complete`: their instants have all their rows (a DB-op's
        and a Spark aggregate's), else they wait for `release` before the ordered sinks."""
        atomic_write_parquet(self.dir / f"part-{key[0]}-{key[1]:09d}.parquet", t)
        self.rows += t.num_rows
        if t.num_rows:
            self.instants += len(pc.unique(t.column(TAU)))
            self.last_tau = pc.max(t.column(TAU)).as_py()
        if self.sinks and t.num_rows:
            rows = results_table([t], self.columns)
            self._hand(self.durable, key, rows)
            if self.ordered and complete and not self.held:
                self._hand(self.ordered, key, rows)
            elif self.ordered:
                self.held.append(rows)

    def release(self, key: tuple, done) -> None:
        """Hand the held rows of the instants up to `done` (all: None) to the ordered
        sinks, in instant order."""
        if not self.held:
            return
        rows = pa.concat_tables(self.held).sort_by("tau")
        if done is not None:
            ready = pc.less_equal(rows.column("tau"), pa.scalar(done, rows.column("tau").type))
            rows, rest = rows.filter(ready), rows.filter(pc.invert(ready))
            self.held = [rest] if rest.num_rows else []
        else:
            self.held = []
        if rows.num_rows:
            self._hand(self.ordered, key, rows)

    def _hand(self, sinks: list, key: tuple, rows: pa.Table) -> None:
        for s in sinks:
            try:
                s.put(key, rows, query=self.query)
            except Exception as e:
                taus = rows.column("tau")  # as the user sees them
                hint = " (a sink's put takes (key, rows, query))" if isinstance(
                    e, TypeError) and "query" in str(e) else ""
                raise SinkFailed(
                    f"the sink of {self.query or 'the query'} ({sink_label(s)}) failed on "
                    f"the rows of instants {taus[0]} to {taus[-1]}: {type(e).__name__}: "
                    f"{e}{hint}") from e

    def table(self) -> pa.Table:
        """The whole result, once the run has ended (read once: the run's result and a
        Parquet file sink share it)."""
        if self._table is None:
            self._table = results_table(
                [pq.read_table(p) for p in sorted(self.dir.glob("part-*.parquet"))],
                self.columns)
        return self._table


def claim_work(work: Path, identity: dict, fresh: bool) -> bool:
    """Claim the work directory for this run; True when it resumes an interrupted run of
    the same identity (recovery.py), else everything of an earlier run is removed."""
    if fresh:
        (work / RUN_FILE).unlink(missing_ok=True)
    resuming = claim(work, identity)
    if not resuming:  # a new run: nothing of an earlier one may leak into it
        for sub in ("input", "checkpoints", "state", "results", "reentry"):
            shutil.rmtree(work / sub, ignore_errors=True)
        (work / "summary.json").unlink(missing_ok=True)
    (work / "state").mkdir(exist_ok=True)
    return resuming
