"""`run`: the one-call facade. Plan the query (the optimizer's choice, or a placement the
user names), then execute the physical plan (federation.runtime)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from costmodel.profile import CostProfile
from federation.conventions import DRIVER_MEMORY
from federation.logical import QuerySet, Rstream, Window, query_set
from federation.optimizer import plan_for
from federation.runtime import (
    GenerateOptions,
    RunOptions,
    RunResult,
    execute,
    work_directory,
)
from federation.runtime.progress import as_progress


def run(
    query: Rstream | Sequence[Rstream],
    placement: str | Mapping[str, str] = "auto",
    data: str | Path | Mapping[str, str | Path] | None = None,
    options: RunOptions | None = None,
    *,
    generate: GenerateOptions | None = None,
    profile: CostProfile | None = None,
    feasibility_check: bool = True,
    memory_check: bool = True,
    spark=None,
    progress=None,
    halt=None,
    **option_values,
) -> RunResult:
    """Run `query` under a placement ("auto", "spe", "db" or explicit) over a directory of
    event-second Parquet files, or a source URL (`follow:DIR`, `mqtt://HOST/TOPIC`,
    `datagen:nexmark?rate=N`: federation/runtime/connectors/; a live one makes the run
    follow); a query over several streams takes {stream name: directory or URL}. With
    `data=None`, over smart-plug data generated as
    `generate` says (GenerateOptions: rate, seconds, plugs, seed; the smart-plug stream
    only). `options` (RunOptions) or their fields as keywords, and the generation options
    as keywords too (`rate=...`), are checked before any work; a bad one raises OptionError
    naming it. `halt` (a threading.Event): set, the run stops after the micro-batch in
    progress (a following run, `follow=True`, ends only so or at `until`).

    Several queries (a list) run together: one ingest per stream, operators they share
    computed once (federation/logical/queryset.py); `RunResult.of(name)` holds each
    query's rows, and an `output` directory gets `<name>.parquet` each."""
    query = query_set(query)
    gen_values = {k: option_values.pop(k) for k in list(option_values)
                  if k in GenerateOptions.model_fields}
    gen = GenerateOptions.of(generate, **gen_values)
    opt = RunOptions.of(options, **option_values)
    prog = as_progress(progress)
    profile, capacity = spe_profile(profile, spark, opt.state_store, opt.feed)
    prog.phase(f"planning for Spark's {capacity.describe()}")
    plan, cost = plan_for(query, placement, profile, feasibility_check, memory_check)
    plan = dataclasses.replace(plan, chosen_for=capacity.describe())
    if data is None and opt.source is None:
        prog.phase("generating data", total=gen.seconds, unit="event seconds")
        data = _generated(query, opt.work_dir, gen, prog.advance)
    return execute(plan, data, opt, spark=spark, progress=prog, predicted=cost.vector,
                   halt=halt)


def spe_profile(profile: CostProfile | None, spark, state_store: str = "memory",
                feed: str | None = None) -> tuple[CostProfile, object]:
    """The cost profile for the Spark session the run uses: the cores it has (a cluster's
    executors' cores, costmodel.profile.spe_row_scale) and the state its heap holds as the
    state capacity (costmodel.memory.heap_state_capacity: each executor's heap, in local
    mode the driver's; RocksDB's: the local disk's free space), unless the profile sets them;
    (profile, that capacity). Without a session: the one the run will use (the default
    local[2], which the profile was measured on, when none exists)."""
    import shutil
    import tempfile

    from costmodel.memory import heap_state_capacity, size_bytes
    from costmodel.profile import load_profile

    profile = profile or load_profile()
    if state_store == "rocksdb" and profile.spe_memory_bytes is None:
        free = shutil.disk_usage(tempfile.gettempdir()).free
        profile = profile.model_copy(update={"spe_memory_bytes": float(free)})
    from spe.session import spe_capacity

    cap = spe_capacity(spark)  # without a session: the one the run will start (no JVM yet)
    update: dict = {} if profile.spe_cores else {"spe_cores": float(cap.cores)}
    if feed is not None:  # the run's feed (costmodel/feed.py; None: the profile's)
        update["feed"] = feed
    if profile.spe_memory_bytes is None:  # the state the heap holds (costmodel.memory)
        if cap.executor_memory:  # each executor reserves its own
            update["spe_memory_bytes"] = cap.executors * heap_state_capacity(
                size_bytes(cap.executor_memory), profile)
        else:  # local mode: the driver's heap
            conf = spark.sparkContext.getConf() if spark is not None else None
            heap = size_bytes(conf.get("spark.driver.memory", DRIVER_MEMORY) if conf
                              else DRIVER_MEMORY)
            update["spe_memory_bytes"] = heap_state_capacity(heap, profile)
    return profile.model_copy(update=update), cap


def _generated(query: Rstream, work: Path | None, gen: GenerateOptions, progress=None) -> Path:

    from federation.smartplug.datagen import generate

    streams = {n.stream.name for n in query.walk() if isinstance(n, Window)}
    if len(streams) > 1:
        from federation.errors import OptionError

        raise OptionError("data", f"the query reads {len(streams)} streams "
                          f"({', '.join(sorted(streams))}): give each its directory, "
                          "data={name: directory} (only one smart-plug stream is generated)")
    stream = next(n for n in query.walk() if isinstance(n, Window)).stream
    if stream.name != "smartplug":
        raise ValueError(f"data: give the directory of stream {stream.name!r} (only smart-plug "
                         "data can be generated)")
    data = work_directory(work) / "data"
    generate(data, rate=gen.rate, seconds=gen.seconds, plugs=gen.plugs, seed=gen.seed,
             progress=progress)
    return data


class RunHandle:
    """A run started in the background (`start`): its results as they are computed, its
    status, and a way to stop it (a following run never ends by itself)."""

    def __init__(self, queue_sink, halt) -> None:
        import threading

        self._sink = queue_sink
        self._halt = halt
        self._done = threading.Event()
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._last = None
        self._batches = 0

    def results(self, timeout: float | None = None):
        """(instant, its rows) in instant order as each is computed, until the run ends
        (of several queries: (query, instant, rows), each query's instants in order);
        `timeout` seconds without a new instant raise queue.Empty. The run waits when 1,000
        instants are unread (nothing is dropped)."""
        if self._sink is None:
            raise ValueError("results(): the run was started with iterate=False")
        while True:
            item = self._sink.q.get(timeout=timeout)
            if item is None:
                self._sink.q.put(None)  # a second iterator ends too
                return
            yield item

    def status(self) -> dict:
        """Whether it runs, the micro-batches so far, and the last one's clock and backlog."""
        m = self._last
        return {"running": not self._done.is_set(), "batches": self._batches,
                "clock": None if m is None else m.clock,
                "event_seconds_done": None if m is None else m.event_seconds_done,
                "backlog_s": None if m is None else m.backlog_s,
                "error": None if self._error is None else repr(self._error)}

    def stop(self, timeout: float | None = None) -> RunResult | None:
        """Stop after the micro-batch in progress (committed; the same work directory
        resumes from there) and return the run's result."""
        self._halt.set()
        return self.wait(timeout)

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """The run's result once it ended (None when `timeout` passed first); its error
        is raised here."""
        if not self._done.wait(timeout):
            return None
        if self._error is not None:
            raise self._error
        return self._result

    def _batch(self, m) -> None:
        if m.stage == 0:
            self._last = m
        self._batches += 1


def start(query: Rstream, placement: str | Mapping[str, str] = "auto",
          data: str | Path | None = None, options: RunOptions | None = None, *,
          iterate: bool = True, profile: CostProfile | None = None, spark=None,
          progress=None, **option_values) -> RunHandle:
    """`run` in a background thread (same arguments; `follow=True` to follow a landing
    directory); the handle yields the results as they are computed (`iterate=False`:
    only the other sinks get them); `progress` is told what `run` tells it."""
    import threading

    from federation.runtime.progress import RunProgress
    from federation.runtime.sinks import QueueSink

    opt = RunOptions.of(options, **option_values)
    halt = threading.Event()
    sink = QueueSink(named=isinstance(query_set(query), QuerySet)) if iterate else None
    handle = RunHandle(sink, halt)

    told = as_progress(progress)

    class _Status(RunProgress):
        def phase(self, name, total=None, unit="") -> None:
            told.phase(name, total, unit)

        def advance(self, done, total=None) -> None:
            told.advance(done, total)

        def batch(self, m) -> None:
            handle._batch(m)
            told.batch(m)

    def main() -> None:
        try:
            handle._result = run(query, placement, data, opt.model_copy(update={
                "sinks": (*opt.sinks, *([sink] if sink else []))}), profile=profile,
                spark=spark, progress=_Status(), halt=halt)
        except BaseException as e:  # noqa: BLE001 - raised again by wait()
            handle._error = e
            if sink is not None:
                sink.close()
        finally:
            handle._done.set()

    threading.Thread(target=main, name="fedq-run", daemon=True).start()
    return handle
