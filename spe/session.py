"""The Spark session: one per process, local[2] by default, any spark:// master works."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from federation.conventions import DRIVER_MEMORY

_SESSION = None


class SparkSettings(BaseModel):
    """Settings of the stream engine."""

    model_config = ConfigDict(extra="forbid")

    master: str = Field("local[2]", description="local[N] or a spark:// URL")
    shuffle_partitions: int = Field(2, ge=1, description="local masters; a cluster's follow "
                                    "its executors' cores (spe_capacity)")
    driver_memory: str = DRIVER_MEMORY
    log_level: str = "ERROR"
    checkpoint_root: str | None = None


def get_spark(settings: SparkSettings | None = None):
    """The process's Spark session (created on first use). Where the caller installed a
    SIGINT handler of its own (a following run's halt, federation/cli/run.py), the session
    is created in a helper thread: Spark's context, created in the main thread, replaces
    the handler with one that cancels its jobs (and, hit while the context starts, fails
    with a traceback)."""
    if _SESSION is not None:
        return _SESSION
    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGINT) if main else None
    if callable(handler) and handler is not signal.default_int_handler:
        made: dict = {}

        def create() -> None:
            try:
                made["session"] = _create(settings)
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
                made["error"] = e

        t = threading.Thread(target=create, daemon=True, name="fedq-spark-start")
        t.start()
        t.join()  # a signal runs the caller's handler meanwhile, then the join goes on
        if "error" in made:
            raise made["error"]
        return made["session"]
    return _create(settings)


def _create(settings: SparkSettings | None):
    global _SESSION
    settings = settings or SparkSettings()
    # Spark's Python workers are separate processes: make them run this interpreter
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    root = settings.checkpoint_root
    if root is None:  # the session's own scratch space: removed when the process ends
        root = tempfile.mkdtemp(prefix="fedq-spark-")
        atexit.register(_remove, root)
    b = SparkSession.builder.master(settings.master)
    if settings.master.startswith("local"):  # a cluster's: its executors' cores
        b = b.config("spark.default.parallelism", "2")
    spark = (
        b.appName("fedq")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.driver.memory", settings.driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.checkpointLocation", os.path.join(root, "chk"))
        .config("spark.sql.warehouse.dir", os.path.join(root, "warehouse"))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        # Spark 4.3's subexpression elimination in a Filter's whole-stage code writes Java
        # that does not compile when a shared term reads window()'s Expand (a parameter
        # named `expand_mutableStateArray_0[0]`): a cumulating window's filter did, session
        # 64; off, the Filter evaluates its predicates lazily (its other code path)
        .config("spark.sql.subexpressionElimination.filterExec.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(settings.log_level)
    _SESSION = spark
    if local_capacity(settings.master) is None:  # a cluster: read its cores once, here
        _read_cluster(spark)
    return spark


@dataclass(frozen=True)
class SpeCapacity:
    """What the stream engine runs on: its cores, its executors' heap (None in local mode:
    the driver's) and where the numbers come from."""

    cores: int
    executors: int
    executor_memory: str | None
    source: str

    def describe(self) -> str:
        heap = f", {self.executor_memory} heap each" if self.executor_memory else ""
        where = (f"{self.executors} executor{'s' * (self.executors != 1)}{heap}"
                 if self.executors else "in the driver")
        return f"{self.cores} cores ({where}; {self.source})"


def local_capacity(master: str) -> SpeCapacity | None:
    """N of local[N] (no JVM needed); None for a cluster's master."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master)
    if not m:
        return None
    n = m.group(1)
    return SpeCapacity((os.cpu_count() or 1) if n == "*" else int(n or 1), 0, None, master)


_CLUSTER: tuple[object, SpeCapacity] | None = None  # (session, its capacity)


def spe_capacity(spark=None) -> SpeCapacity:
    """The cores Spark runs tasks on: N of local[N]; on a cluster the executors' cores, read
    when the session was created (get_spark). Without a session: the process's session if
    one exists, else the default local one's (no JVM is started)."""
    spark = spark if spark is not None else _SESSION
    if spark is None:
        return local_capacity(SparkSettings().master)
    local = local_capacity(spark.sparkContext.master)
    if local is not None:
        return local
    if _CLUSTER is None or _CLUSTER[0] is not spark:  # a session get_spark did not make
        _read_cluster(spark)
    return _CLUSTER[1]


def _read_cluster(spark, wait_s: float = 60.0) -> None:
    """Reads a cluster's executors and cores (waits until no executor has registered for
    5 s, at most `wait_s`) and sets the shuffle partitions to the cores, so keyed state
    spreads over every executor."""
    global _CLUSTER
    sc = spark.sparkContext
    jsc = sc._jsc.sc()
    t0 = time.monotonic()
    seen, since = (0, 0), t0
    while time.monotonic() - t0 < wait_s:  # until the executors stop arriving for 5 s
        executors = jsc.getExecutorMemoryStatus().size() - 1  # the driver's block manager
        now = (executors, _total_cores(jsc) if executors > 0 else 0)
        if now != seen:
            seen, since = now, time.monotonic()
        elif now[1] > 0 and time.monotonic() - since >= 5.0:
            break
        time.sleep(0.5)
    executors, cores = seen
    if cores <= 0:
        raise RuntimeError(f"no executor registered with {sc.master} within {wait_s:.0f} s: "
                           "is a worker running, with free cores?")
    spark.conf.set("spark.sql.shuffle.partitions", str(cores))
    _CLUSTER = (spark, SpeCapacity(cores, executors,
                                   sc.getConf().get("spark.executor.memory", "1g"),
                                   f"read from {sc.master}"))


def _total_cores(jsc) -> int:
    """The registered executors' cores (CoarseGrainedSchedulerBackend.totalCoreCount),
    else Spark's default parallelism, which follows them when not set."""
    from py4j.protocol import Py4JError

    try:
        n = jsc.schedulerBackend().totalCoreCount()  # an AtomicInteger, or its value
        return int(n if isinstance(n, int) else n.get())
    except Py4JError:  # another scheduler backend: its default parallelism
        return int(jsc.defaultParallelism())


def _remove(root: str) -> None:
    with contextlib.suppress(Exception):  # the JVM may be gone already at exit
        stop_spark()
    shutil.rmtree(root, ignore_errors=True)


def close_idle_callbacks(spark) -> None:
    """Close Py4J's idle connections from the JVM to Python (best effort), and drop the
    errors PySpark's foreachBatch wrappers keep. Each streaming query's thread calls its
    foreachBatch over a connection of its own, with a socket and a Python thread at each
    end, and Py4J keeps it after the query has stopped: one of each per query ever run,
    until a long session runs out of file descriptors. Idle ones are closed here when a
    run ends; a query still running opens a new one at its next call. A wrapper
    (`ForeachBatchFunction`, in Py4J's pool until the JVM collects its query) keeps the
    last error its batch raised, nowhere read, whose traceback holds the batch's DataFrame
    and the frames above it."""
    try:
        gateway = spark.sparkContext._gateway
        for wrapper in list(gateway.gateway_property.pool.dict.values()):
            if type(wrapper).__name__ == "ForeachBatchFunction":
                wrapper.__dict__.pop("error", None)
        gateway.java_gateway_server.getCallbackClient().periodicCleanup()
    except Exception as e:  # noqa: BLE001 - housekeeping: never fails a run
        print(f"fedq: closing idle Py4J connections: {e}", file=sys.stderr)


def stop_spark() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None


class HeapSampler:
    """The driver JVM's live heap, sampled in a thread while a run goes on: every `every_s`
    a full collection (System.gc()), then the heap in use; `peak` is the largest sample.
    What a run's state and its batches hold, with nothing collectable left in it (a
    measurement for benchmarks.memory --heap; it slows the run)."""

    def __init__(self, spark, every_s: float = 1.0):
        import threading

        self._jvm, self.every_s = spark._jvm, every_s
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def live(self) -> int:
        self._jvm.java.lang.System.gc()
        mx = self._jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
        return int(mx.getHeapMemoryUsage().getUsed())

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.samples.append(self.live())

    def __enter__(self):  # the sampler itself
        self.before = self.live()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak(self) -> int:
        return max(self.samples, default=self.before)
