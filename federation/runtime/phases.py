"""Where a run's time goes (docs/architecture.md, "Where the time goes"): wall and CPU
seconds per named phase, summed over a run and written in its summary (`phases`).

A phase is a leaf of the data path: phases never nest, so their wall seconds add up to
at most the run's (the rest is named `other` in the summary), except that the ingest's
run in a thread of their own where the input is read ahead of the direct feed (ahead.py)
or followed (follow.py): there the ingest's phases and the others' each add up to at
most the run's. CPU is the calling thread's
(`time.thread_time`): DuckDB's worker threads and the JVM are not in it, so the summary
also gives the process's and the JVM's CPU in total (`cpu`). The counters are the
process's: two runs at once in one process (the API's `start` twice) see each other's
phases in their summaries.

| phase | what |
|---|---|
| ingest.read | reading an input file (Parquet or CSV) |
| ingest.validate | the checks of every row (types, nulls, domains, lateness, horizon) |
| ingest.dead_letter | writing the dead letters of a file |
| ingest.spool | the rest of ingest: punctuation, ticks, slicing, writing the spool file |
| start | after ingest, before the first batch: the DB-ops' databases, the stages, the
  Spark session where the run starts it, the streaming queries |
| feed | a micro-batch's rows to Arrow: the direct feed reading its spool files; for a
  Spark-fed stage, Spark running the batch's plan (its SPE-ops) and handing it over |
| feed.plan, spark | the wall time between two batches of a stage (no CPU counted): the
  direct feed's offset log and polling; Spark's planning, offsets and commit logs |
| mig.rows | a MIG taking a batch's rows (clock, bounds, filters) before DuckDB |
| db.insert, db.fold | DuckDB: appending the rows kept, folding them into slices |
| db.sql | DuckDB: each DB-op's SQL, once per slide instant |
| db.expire | DuckDB: deleting what no later instant needs, CHECKPOINTs |
| db.commit | DuckDB: committing a micro-batch with the MIG's state (durable) |
| results | result parts written to disk (Parquet) and handed to the sinks |
| reentry | a DB-op's rows written for the SPE-ops that read them |
| end | after the last batch: the result tables, the output file, the summary |
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ORDER = ("ingest.read", "ingest.validate", "ingest.dead_letter", "ingest.spool", "start",
         "feed", "feed.plan", "spark", "mig.rows", "db.insert", "db.fold", "db.sql", "db.expire", "db.commit",
         "results", "reentry", "end")


class Phases:
    """Wall seconds, CPU seconds and calls per phase (module doc); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sums: dict[str, list[float]] = {}

    def add(self, name: str, wall_s: float, cpu_s: float = 0.0) -> None:
        with self._lock:
            s = self._sums.setdefault(name, [0.0, 0.0, 0])
            s[0] += wall_s
            s[1] += cpu_s
            s[2] += 1

    @contextmanager
    def timed(self, name: str):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0, time.thread_time() - c0)

    def snapshot(self) -> dict[str, tuple[float, float, int]]:
        with self._lock:
            return {k: (v[0], v[1], v[2]) for k, v in self._sums.items()}

    def since(self, before: dict[str, tuple[float, float, int]]) -> dict[str, dict]:
        """Each phase's seconds and calls since `before` (a snapshot), in ORDER."""
        now = self.snapshot()
        out = {}
        for k in sorted(now, key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER), k)):
            w0, c0, n0 = before.get(k, (0.0, 0.0, 0))
            w, c, n = now[k]
            if n > n0:
                out[k] = {"wall_s": round(w - w0, 4), "cpu_s": round(c - c0, 4),
                          "calls": n - n0}
        return out


#: the process's phases (module doc)
PHASES = Phases()
timed = PHASES.timed


def process_cpu_s(pid: int | None = None) -> float | None:
    """CPU seconds (user + system) of process `pid` (default: this one) so far, from
    /proc (None where it cannot be read)."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jvm_pid(spark) -> int | None:
    """The pid of the JVM behind a Spark session (None: none started by this process)."""
    try:
        return spark.sparkContext._gateway.proc.pid
    except AttributeError:
        return None


class RunClock:
    """A run's start, to give its summary the phases, wall and CPU seconds since then."""

    def __init__(self, spark=None) -> None:
        self.t0 = time.perf_counter()
        self.phases = PHASES.snapshot()
        self.cpu0 = process_cpu_s()
        pid = jvm_pid(spark) if spark is not None else None
        self.jvm0 = (pid, process_cpu_s(pid) if pid else None)

    def start_done(self) -> None:
        """The first batch is due: the time since the run began, less ingest, is `start`."""
        now = PHASES.snapshot()
        ingest = sum(v[0] - self.phases.get(k, (0.0, 0.0, 0))[0]
                     for k, v in now.items() if k.startswith("ingest."))
        PHASES.add("start", time.perf_counter() - self.t0 - ingest)

    def ending(self) -> float:
        """The last batch is done: what follows is `end`; the time now."""
        self.t_end, self.c_end = time.perf_counter(), time.thread_time()
        return self.t_end

    def report(self, summary, spark) -> None:
        """Fill `summary.phases`, `run_wall_s` and `cpu_s` (the end of `end`)."""
        PHASES.add("end", time.perf_counter() - self.t_end, time.thread_time() - self.c_end)
        summary.phases = PHASES.since(self.phases)
        summary.run_wall_s = round(time.perf_counter() - self.t0, 4)
        pid = jvm_pid(spark) if spark is not None else None
        jvm = None
        if pid:
            now = process_cpu_s(pid)
            before = self.jvm0[1] if self.jvm0[0] == pid else 0.0
            jvm = None if now is None else round(now - (before or 0.0), 3)
        summary.cpu_s = {"python": round(process_cpu_s() - self.cpu0, 3), "jvm": jvm}
