"""Ingest ahead of the feed (docs/architecture.md, "Feeds"): a run over finished data
directories whose every stage is fed directly validates its input in a thread of its own
while the direct feed works on the spool, so the two use both cores.

The spool is the one `sources.replay_input` writes, file for file (the same Ingestor, the
same options, each stream's files in name order; several streams' files alternate, which
changes nothing: each stream's validation is its own), and the micro-batches are the same:
until the input has ended the feed takes a batch only once every stream has its
`files_per_batch` next spool files (direct.DirectFeed, `ahead`). What a run needs of its
input before the first batch waits until it is final (`started`):

- the first reading (the DB-ops' first instant): no later reading can be below it once a
  stream's clock minus the allowed lateness has passed it (a later reading below that is
  late), or once the stream's input is read;
- the fast-forward files (`fast_forward_s` event seconds merged into warm-up batches).

The last instant is the run's once the input has ended: `when_ended(fn)` is called before
the flush punctuation is written, as a following run's (follow.Follower). A run stopped
while its input was being read (kill -9, a halt) goes on from its spool: each spool file
carries the ingest's state (Ingestor.resumed), so the resumed run reads only the input
files the spool does not hold, and the spool is the same.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

from federation.instants import Grid
from federation.parts import list_parts
from federation.runtime.ingest import Ingestor, IngestResult
from federation.runtime.recovery import fault_point
from federation.streams import StreamDecl


class IngestAhead:
    """Every stream's directory validated into its spool by a thread (module doc).

    `lanes`: {stream name: (data directory, its StreamDecl, its spool's directory)}; `res`:
    the run's view of its input as it grows (the InputSet), complete once `ended` is set
    without `error`; `input_dir`: where inputs.json then says so."""

    def __init__(self, lanes: dict[str, tuple[Path, StreamDecl, Path]], input_dir: Path, *,
                 resume: bool, flush_after_s: float | None, max_files: int | None,
                 **ingest_options) -> None:
        from federation.runtime.sources import InputSet

        self.flush_after_s = flush_after_s
        self.lateness = timedelta(seconds=ingest_options.get("allowed_lateness_s", 0.0))
        self.ff_s = ingest_options.get("fast_forward_s", 0)
        self.input_dir = input_dir
        self.ings: dict[str, Ingestor] = {}
        self.todo: dict[str, list[Path]] = {}  # each stream's input files not read yet
        self.total_files = 0
        for name, (data, stream, work) in lanes.items():
            if not data.is_dir():
                raise FileNotFoundError(f"data directory {data} does not exist")
            parts = list_parts(data)[:max_files] if max_files is not None else list_parts(data)
            if not parts:
                raise FileNotFoundError(f"no part-*.parquet files in {data}")
            ing = Ingestor.resumed(work, stream, **ingest_options) if resume else \
                Ingestor(work, stream, **ingest_options)
            if not ing.inputs_read:  # counted once, with the first file's state
                ing.count_csv_rejects(data)
            self.ings[name] = ing
            self.todo[name] = [p for p in parts if p.name not in ing.inputs_read]
            #: the input files of the longest stream: the run's event seconds (ingest.files)
            self.total_files = max(self.total_files, len(parts))
        self.res = InputSet(inputs={n: i.res for n, i in self.ings.items()})
        self.started = threading.Event()
        self.fed = threading.Event()  # a micro-batch is done (the direct feed sets it)
        self.ended = threading.Event()  # the input is read, or the thread failed (`error`):
        # not when stopped (a halted run's feed waits, and its resumed run reads on)
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._on_end, self._ending = None, False
        self._end_lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name="fedq-ingest", daemon=True)

    def start(self) -> IngestAhead:
        self._thread.start()
        return self

    def wait_started(self, halt: threading.Event) -> bool:
        """Wait until the first batch may start (module doc); False when halted first."""
        while not self.started.wait(0.05):
            if halt.is_set():
                return False
        if self.error is not None:
            raise self.error
        return True

    def when_ended(self, fn) -> None:
        """`fn()` once the input is read, before the flush is written (at once if it has
        been): the run bounds its DB-ops' last instant (execute._end_life)."""
        with self._end_lock:
            self._on_end = fn
            if self._ending:
                fn()

    def stop(self) -> None:
        """Read no more files (the one being validated is finished first)."""
        self._halt.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _main(self) -> None:
        try:
            if self._read():
                self.ended.set()
        except BaseException as e:  # noqa: BLE001 - raised by the feed and the run
            self.error = e
            self.started.set()
            self.ended.set()

    def _read(self) -> bool:
        """Every file read and the spools ended: True; stopped first: False."""
        self._check_started()
        while any(self.todo.values()):
            for name, parts in self.todo.items():  # the streams' files alternate
                if parts:
                    if self._halt.is_set():
                        return False
                    path = parts.pop(0)
                    self.ings[name].add(path, last=not parts)
                    fault_point("ingest_file", lambda: self.fed.wait(60))
            self._check_started()
        self._finish()
        self.started.set()
        return True

    def _check_started(self) -> None:
        if self.started.is_set():
            return
        for name, ing in self.ings.items():
            r = ing.res
            if not self.todo[name]:  # read: final
                continue
            if r.files < self.ff_s or r.first_ts is None or \
                    r.last_ts - self.lateness < r.first_ts:
                return
        self.started.set()

    def _finish(self) -> None:
        """The end of input: the run's last instant, then the flush (one for all streams,
        after the last reading of any) and inputs.json (the spools are complete: a resumed
        run reads them as they are)."""
        from federation.runtime.sources import INPUTS_FILE

        with self._end_lock:
            self._ending = True
            if self._on_end is not None:
                self._on_end()
        last = self.res.last_ts
        for ing in self.ings.values():
            if not ing.finished:
                ing.finish(self.flush_after_s, last=last)
        (self.input_dir / INPUTS_FILE).write_text(self.res.model_dump_json(indent=2))


def ahead_of(sources, streams, input_dir: Path, opt, flush_s, grid: Grid,
             fast_forward_s: int, spool_format: str, resume: bool) -> IngestAhead | None:
    """The run's IngestAhead (started) over its directories, with the options
    `sources.replay_input` gives the same spools; None where the input is read first:
    a stage is a Spark query (the spool is Parquet: Spark's file source reads what is there
    when a batch is planned), or a resumed run's input was read whole (its spool is kept)."""
    from federation.runtime.sources import INPUTS_FILE

    if spool_format != "arrow" or (resume and (input_dir / INPUTS_FILE).exists()):
        return None
    lanes = {n: (Path(sources[n].path), s, input_dir / n) for n, s in streams.items()}
    return IngestAhead(
        lanes, input_dir, resume=resume, flush_after_s=flush_s, max_files=opt.max_files,
        allowed_lateness_s=opt.allowed_lateness_s, fast_forward_s=fast_forward_s,
        fast_forward_batch=opt.warmup_batch_s or 1, tick_s=grid,
        horizon_s=opt.event_horizon_s, spool_format=spool_format).start()


__all__ = ["IngestAhead", "IngestResult", "ahead_of"]
