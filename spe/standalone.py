"""A Spark standalone cluster on this machine, from the installed PySpark's own launch
classes (`bin/spark-class`): one master and its workers, for `make cluster-test` and for
trying `fedq run --master spark://...` without a real cluster.

Example (what the cluster test does):
    with local_cluster(cores=1, memory="1g") as c:   # c.url: "spark://127.0.0.1:<port>"
        run fedq with --master c.url; c.logs holds the master's and the worker's logs
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout_s: float) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{log.stem} exited ({proc.returncode}): "
                               f"{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{log.stem} did not start within {timeout_s:.0f} s: "
                       f"{log.read_text(errors='replace')[-2000:]}")


@dataclass(frozen=True)
class Cluster:
    url: str
    logs: Path

    def executors_launched(self) -> int:
        """Executors the workers launched (for applications that ran on the cluster)."""
        return sum(p.read_text(errors="replace").count("Asked to launch executor")
                   for p in self.logs.glob("worker*.log"))


@contextlib.contextmanager
def local_cluster(cores: int = 1, memory: str = "1g", timeout_s: float = 90.0,
                  workers: int = 1) -> Iterator[Cluster]:
    """Start a standalone master and `workers` workers of `cores` cores each; yield the
    cluster; stop them all."""
    logs = Path(tempfile.mkdtemp(prefix="fedq-cluster-"))
    port, ui = _free_port(), _free_port()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(logs / "work"))
    cls = str(spark_class())
    procs: list[subprocess.Popen] = []
    try:
        master_log = logs / "master.log"
        with open(master_log, "w") as f:
            procs.append(subprocess.Popen(
                [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
                stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(master_log, "I have been elected leader", procs[0], timeout_s)
        url = f"spark://127.0.0.1:{port}"
        for i in range(workers):
            log = logs / f"worker{i}.log"
            with open(log, "w") as f:
                procs.append(subprocess.Popen(
                    [cls, "org.apache.spark.deploy.worker.Worker", url, "--cores", str(cores),
                     "--memory", memory, "--webui-port", str(_free_port()), "--host",
                     "127.0.0.1", "--work-dir", str(logs / f"work{i}")],
                    stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True))
            _wait_for(log, "Successfully registered with master", procs[-1], timeout_s)
        yield Cluster(url, logs)
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 15)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 9)
                p.wait()
