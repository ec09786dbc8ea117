"""The Spark session: one per process, local[2] by default, any spark:// master works."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile

from pydantic import BaseModel, ConfigDict, Field

from federation.conventions import DRIVER_MEMORY

_SESSION = None


class SparkSettings(BaseModel):
    """Settings of the stream engine."""

    model_config = ConfigDict(extra="forbid")

    master: str = Field("local[2]", description="local[N] or a spark:// URL")
    shuffle_partitions: int = Field(2, ge=1)
    driver_memory: str = DRIVER_MEMORY
    log_level: str = "ERROR"
    checkpoint_root: str | None = None


def get_spark(settings: SparkSettings | None = None):
    """The process's Spark session (created on first use)."""
    global _SESSION
    if _SESSION is not None:
        return _SESSION
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
    spark = (
        SparkSession.builder.master(settings.master)
        .appName("fedq")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", settings.driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.checkpointLocation", os.path.join(root, "chk"))
        .config("spark.sql.warehouse.dir", os.path.join(root, "warehouse"))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(settings.log_level)
    _SESSION = spark
    return spark


def _remove(root: str) -> None:
    with contextlib.suppress(Exception):  # the JVM may be gone already at exit
        stop_spark()
    shutil.rmtree(root, ignore_errors=True)


def stop_spark() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None
