"""Faults around a long run (issue 46): the disk of the work directory fills, a sink's
directory turns read-only, a producer crashes half-way through a landing file. Each run
follows a landing directory from the command line, as a user's would; afterwards its sink
holds the reference result, each instant once. The disk and the read-only directory are
real file systems (a small tmpfs, a read-only bind mount): those tests need `mount`
(root with CAP_SYS_ADMIN, as in CI here) and say so when skipped. No JVM: the plans are
all in DuckDB (the direct feed); Ctrl-C and kill -9 of a Spark plan are test_follow's."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.reference import reference_result
from federation.parts import land_files
from federation.results import diff_results
from federation.runtime.sinks import read_manifest, read_parquet_sink
from tests import test_takeover as takeover
from tests.test_takeover import CLI, RATE, SCALE, want

source = takeover.source  # the fixture: the same 40 s of readings
T0 = dt.datetime(2013, 9, 1)

def follow_cmd(landing: Path, work: Path, out: Path) -> list[str]:
    return [sys.executable, "-c", CLI, "run", "CQ1", "--follow", "--data", str(landing),
            "--until", "2013-09-01T00:00:39", "--placement", "db", "--scale", repr(SCALE),
            "--work-dir", str(work), "--output", str(out), "--quiet", "--idle-timeout", "300"]


def _mount(*args: str) -> None:
    p = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if p.returncode:
        raise OSError(p.stderr.strip() or f"mount {' '.join(args)}: exit {p.returncode}")


@contextlib.contextmanager
def mounted(target: Path, *args: str):
    """`mount *args target` for the block (lazily unmounted after it, also on failure);
    the test is skipped where this machine does not let the tests mount."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        _mount(*args, str(target))
    except OSError as e:
        pytest.skip(f"mounting a file system needs root with CAP_SYS_ADMIN ({e})")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)


def started(cmd: list[str], out: Path) -> subprocess.Popen:
    """The run of `cmd`, once its sink holds the first instants."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not read_manifest(out) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert read_manifest(out), p.communicate(timeout=60)[1][-3000:]
    return p


def failed(p: subprocess.Popen) -> str:
    """The stderr of a run that stops on its own with an error (not a traceback)."""
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 1, (p.returncode, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    return err


def resumed(cmd: list[str], out: Path, files: list[Path]) -> None:
    """The same command resumes and ends; the sink holds the reference, each part once."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0 and "fedq: resuming" in r.stderr, r.stderr[-3000:]
    names = [e["file"] for e in read_manifest(out)]
    assert len(names) == len(set(names)), "a part listed twice"
    problem = diff_results(read_parquet_sink(out), want(files))
    assert problem is None, problem


def fill(directory: Path) -> Path:
    """Fill the file system of `directory` with one file (another program using the
    disk); the file."""
    filler = directory / "filler"
    block = b"\0" * (1 << 20)
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(block)
            f.flush()
    return filler


def test_a_full_disk_stops_the_run_with_a_clear_error_and_the_same_command_resumes(
        tmp_path, source):
    """The work directory is a 64 MB file system; once the first instants are out, another
    program fills it. The run stops with an error that names the cause and the way on; the
    batch it could not write is not committed. Space back, the same command resumes."""
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    land_files(source[:12], landing)
    with mounted(tmp_path / "disk", "-t", "tmpfs", "-o", "size=64m", "tmpfs") as disk:
        cmd = follow_cmd(landing, disk / "work", out)
        p = started(cmd, out)
        filler = fill(disk)
        land_files(source[12:], landing)
        err = failed(p)
        assert "No space left on device" in err and "resume" in err, err[-3000:]
        filler.unlink()
        resumed(cmd, out, source)


def test_a_sink_that_fails_stops_the_run_without_committing_and_the_run_resumes(
        tmp_path, source):
    """The output directory turns read-only while the run writes it: the run stops with an
    error that names the query's sink and the cause, without committing the batch; the
    directory writable again, the same command resumes with each instant once."""
    landing, work, out = tmp_path / "landing", tmp_path / "work", tmp_path / "out"
    landing.mkdir()
    land_files(source[:12], landing)
    cmd = follow_cmd(landing, work, out)
    p = started(cmd, out)
    with mounted(out, "--bind", str(out)):
        _mount("-o", "remount,bind,ro", str(out))
        land_files(source[12:], landing)
        err = failed(p)
        assert "Read-only file system" in err and "sink" in err, err[-3000:]
        assert str(out) in err, err[-3000:]
    resumed(cmd, out, source)


def test_a_landing_file_truncated_by_a_crashed_producer_is_quarantined(tmp_path, source):
    """A producer crashes half-way through writing a file in place (not renamed into
    place, as the convention asks): the run quarantines it with its reason, goes on with
    the files after it, and its result is the reference over the other files."""
    landing, work, out = tmp_path / "landing", tmp_path / "work", tmp_path / "out"
    landing.mkdir()
    land_files(source[:10], landing)
    cmd = follow_cmd(landing, work, out) + ["--json"]
    cmd.remove("--quiet")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    torn = source[10].read_bytes()
    (landing / source[10].name).write_bytes(torn[: len(torn) // 2])
    land_files(source[11:], landing)
    stdout, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    summary = json.loads(stdout)
    assert [q["file"] for q in summary["files_quarantined"]] == [source[10].name], summary
    dead = list(Path(summary["deadletter_dir"]).rglob(source[10].name))
    assert dead, "the torn file is not in the dead-letter directory"
    problem = diff_results(read_parquet_sink(out), want(source[:10] + source[11:]))
    assert problem is None, problem


class Lines:
    """The stderr lines of a running process, read as they come."""

    def __init__(self, p: subprocess.Popen) -> None:
        self.p, self.lines = p, []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.p.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in ln for ln in self.lines):
            assert self.p.poll() is None and time.monotonic() < deadline, \
                f"no {text!r}: " + "".join(self.lines)[-3000:]
            time.sleep(0.1)

    def text(self) -> str:
        self._t.join(timeout=60)
        return "".join(self.lines)


def test_a_broker_that_restarts_mid_run_is_reconnected_and_nothing_is_lost(
        tmp_path, source):
    """A run follows an MQTT topic of the embedded broker; after the first instants are in
    the sink the broker goes away and comes back on its port. The run says so, reconnects,
    subscribes again, and ends at --until with the reference over every reading."""
    from federation.runtime.broker import start_broker
    from federation.smartplug.publish import publish

    first, rest, work, out = (tmp_path / n for n in ("first", "rest", "work", "out"))
    land_files(source[:20], first)
    land_files(source[20:], rest)
    broker = start_broker()
    port, url = broker.port, broker.url_for("plugs/readings")
    cmd = [sys.executable, "-c", CLI, "run", "CQ1", "--data", url,
           "--until", "2013-09-01T00:00:39", "--placement", "db", "--scale", repr(SCALE),
           "--work-dir", str(work), "--output", str(out), "--quiet", "--idle-timeout", "300"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = Lines(p)
    try:
        deadline = time.monotonic() + 60
        while not (work / "input").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # subscribed: the spool is made once the topic is subscribed
        publish(first, url, realtime=False, per_message=25, fmt="csv")
        while not read_manifest(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert read_manifest(out), err.text()[-3000:]
        broker.stop()
        err.wait_for("lost the MQTT broker")
        broker = start_broker(port=port)
        err.wait_for("reconnected to the MQTT broker")
        time.sleep(0.5)  # the session's subscription, made again on connect
        publish(rest, url, realtime=False, per_message=25, fmt="csv")
        assert p.wait(timeout=120) == 0, err.text()[-3000:]
    finally:
        p.kill()
        broker.stop()
    problem = diff_results(read_parquet_sink(out), want(source))
    assert problem is None, problem


def test_a_burst_of_ten_times_the_rate_is_caught_up_in_bounded_batches(tmp_path,
                                                                       monkeypatch):
    """A minute of ten times the planned rate lands at once in the middle of a followed
    run: the backlog is reported (its event seconds) while every micro-batch reads at most
    `max_batch_rows` readings (the burst's files are split in the spool, which holds the
    backlog on disk); the run catches up and its result is the reference.

    The micro-batches wait while the burst is being validated into the spool: a feed
    faster than the ingest would otherwise take each burst file as it lands, and the
    backlog the test is about would depend on the two threads' speeds."""
    from federation.api import start
    from federation.runtime import ingest, microbatch
    from federation.smartplug.datagen import generate
    from federation.smartplug.queries import QUERIES

    added, add = [0], ingest.Ingestor.add

    def counted(self, path, last=True):
        add(self, path, last)
        added[0] += 1

    def gate(name: str) -> None:
        deadline = time.monotonic() + 60
        while name == "batch_start" and 30 < added[0] < 90 and time.monotonic() < deadline:
            time.sleep(0.01)

    monkeypatch.setattr(ingest.Ingestor, "add", counted)
    monkeypatch.setattr(microbatch, "fault_point", gate)
    src, landing = tmp_path / "src", tmp_path / "landing"
    generate(src, rate_profile=[(RATE, 30), (10 * RATE, 60), (RATE, 30)], plugs=30, seed=5)
    files = sorted(src.glob("part-*.parquet"))
    land_files(files[:30], landing)
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=30)
    cap = 3000  # a third of the rows of a minute at the planned rate
    h = start(q, "db", landing, follow=True, until=T0 + dt.timedelta(seconds=119),
              max_batch_rows=cap, idle_timeout_s=300, work_dir=tmp_path / "work")
    got = [next(iter(h.results(timeout=60)))[1]]
    land_files(files[30:90], landing)  # the burst: 36,000 readings at once
    land_files(files[90:], landing)
    got += [rows for _, rows in h.results(timeout=120)]
    r = h.wait(timeout=120)
    first = [m for m in r.metrics if m.stage == 0]
    assert max(m.rows_in for m in first) <= cap, [m.rows_in for m in first]
    assert max(m.backlog_s for m in first) >= 30, [m.backlog_s for m in first]
    assert first[-1].backlog_s == 0
    problem = diff_results(pa.concat_tables(got), reference_result(
        q, pa.concat_tables(pq.read_table(p) for p in files)))
    assert problem is None, problem
