"""Prometheus metrics of a running query (federation/runtime/metrics.py): scraped over HTTP
while a following run works, they count what the run read, dead-lettered and delivered,
and the endpoint goes away with the run. No JVM: the plan is all in DuckDB."""

from __future__ import annotations

import datetime as dt
import socket
import time
import urllib.error
import urllib.request

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from federation.parts import land_files
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES

RATE, PLUGS, SECONDS, SCALE = 60, 30, 12, 0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple, float]:
    """Every sample: (name, sorted labels) -> value."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text.decode()) for s in f.samples}


def test_a_following_run_serves_what_it_read_dead_lettered_and_delivered(tmp_path):
    from federation.api import start

    src, landing = tmp_path / "src", tmp_path / "landing"
    generate(src, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=11)
    files = sorted(src.glob("part-*.parquet"))
    bad = pq.read_table(files[3])  # a NaN reading: a dead letter with its reason
    bad = bad.set_column(bad.schema.get_field_index("value"), "value",
                         pa.array([float("nan")] + bad["value"].to_pylist()[1:]))
    pq.write_table(bad, files[3])
    landing.mkdir()
    port = free_port()
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    h = start(q, "db", landing, follow=True, work_dir=tmp_path / "work", metrics_port=port,
              seconds_per_batch=2, idle_timeout_s=300)
    land_files(files, landing)
    rows = sum(pq.read_metadata(p).num_rows for p in files)
    seen = 0
    for tau, _ in h.results(timeout=120):
        seen += 1
        if tau.second >= SECONDS - 1:
            break
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the last file may be in validation, the batch
        m = scrape(port)                 # reported after its rows reached the sinks
        if m.get(("fedq_stream_rows_in_total", (("stream", "smartplug"),))) == rows and \
                ("fedq_stage_batches_total", (("stage", "0"),)) in m:
            break
        time.sleep(0.2)
    assert m[("fedq_stream_rows_in_total", (("stream", "smartplug"),))] == rows
    dead = {k: v for k, v in m.items() if k[0] == "fedq_stream_dead_letters_total"}
    assert sum(dead.values()) == 1 and "NaN" in str(list(dead)), dead
    assert m[("fedq_stream_rows_accepted_total", (("stream", "smartplug"),))] == rows - 1
    assert m[("fedq_query_instants_total", (("query", "CQ1"),))] >= seen
    assert m[("fedq_query_result_rows_total", (("query", "CQ1"),))] > 0
    assert m[("fedq_stage_batches_total", (("stage", "0"),))] >= 1
    assert m[("fedq_stage_batch_duration_seconds_count", (("stage", "0"),))] == \
        m[("fedq_stage_batches_total", (("stage", "0"),))]
    assert m[("fedq_run_info", (("feed", "direct"), ("placement", h_placement(m)),
                                ("query", "CQ1")))] == 1
    assert ("fedq_state_bytes", (("engine", "duckdb"), ("kind", "predicted"))) in m
    assert m[("fedq_run_rho", ())] > 0
    clock = m[("fedq_stream_clock_timestamp_seconds", (("stream", "smartplug"),))]
    last = pc.max(pa.concat_tables(pq.read_table(p) for p in files)["ts"]).as_py()
    assert abs(clock - last.replace(tzinfo=dt.timezone.utc).timestamp()) < 1
    h.stop(timeout=60)
    with pytest.raises(urllib.error.URLError):
        scrape(port)


def h_placement(m) -> str:
    return next(dict(k[1])["placement"] for k in m if k[0] == "fedq_run_info")


def test_a_bad_metrics_port_is_refused_naming_the_option():
    from federation.errors import OptionError
    from federation.runtime.options import RunOptions

    with pytest.raises(OptionError, match="metrics_port: must be a port number 0-65535"):
        RunOptions.of(metrics_port=70000)


def test_the_status_page_shows_the_plan_and_the_run_in_a_browser(tmp_path):
    """The page a user opens beside the metrics, rendered by headless Chromium: the plan's
    operators with their engines and DB-op, the stream, the stage, the query's results."""
    import shutil

    from federation.api import start

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")
    src, landing = tmp_path / "src", tmp_path / "landing"
    generate(src, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=11)
    landing.mkdir()
    port = free_port()
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    placement = "op1=db,op2=db,op3=db,op4=db,op5=db,op6=db"
    h = start(q, placement, landing, follow=True, work_dir=tmp_path / "work",
              metrics_port=port, seconds_per_batch=2, idle_timeout_s=300)
    land_files(sorted(src.glob("part-*.parquet")), landing)
    for tau, _ in h.results(timeout=120):
        if tau.second >= SECONDS - 1:
            break
    time.sleep(0.5)  # the batch's metrics follow its rows
    shot = tmp_path / "status.png"
    url = f"http://127.0.0.1:{port}/"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1000"]
    import subprocess

    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    subprocess.run([browser, *flags, f"--screenshot={shot}", url], capture_output=True,
                   timeout=60, check=True)
    h.stop(timeout=60)
    assert shot.exists() and shot.stat().st_size > 10_000  # a page was drawn
    assert "fedq: CQ1" in dom and "running" in dom and f"placement <b>{placement}</b>" in dom
    for op in ("op1", "op2", "op3", "op4", "op5", "op6"):  # every operator, in DuckDB
        assert f"{op}</span></td><td><span class=\"db\">DB</span></td><td>db1</td>" in dom, op
    assert dom.count("<span class=\"leaf\">leaf</span>") == 2  # the two windows
    assert "<td>smartplug</td>" in dom and "ParquetDirectorySink" not in dom
    assert "results() iterator" in dom and "<h2>Stages</h2>" in dom and "rho" in dom


def test_an_adaptive_run_serves_its_migrations_and_its_segments(tmp_path):
    """An adaptive run (two given segments, both all in DuckDB: no JVM) serves each
    segment's metrics on the same port: in its second segment one migration, the running
    placement, and the status page's table of segments with the reason of each."""
    import datetime as dt

    from federation.adaptive.decide import Segment
    from federation.adaptive.migrate import run_adaptive

    src = tmp_path / "src"
    generate(src, rate=RATE, seconds=SECONDS, plugs=PLUGS, seed=11)
    q = QUERIES["CQ1"](rate=RATE, scale=SCALE, plugs=PLUGS)
    t = dt.datetime(2013, 9, 1, 0, 0, 6)
    second = "op1=db,op2=db,op3=db,op4=db,op5=db,op6=db"
    segs = [Segment(start_at=None, stop_at=t, placement="db", rate=RATE, reason="start"),
            Segment(start_at=t, stop_at=None, placement=second, rate=RATE,
                    reason="the rate rose (given)")]
    port, seen = free_port(), []

    def on_batch(m) -> None:  # the last micro-batch's view is the second segment's
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
        seen.append((scrape(port), page.decode()))

    r = run_adaptive(q, src, segs, work_dir=tmp_path / "work", metrics_port=port,
                     progress=on_batch, seconds_per_batch=2)
    assert len(r.segments) == 2 and seen, "no micro-batch of the second segment was seen"
    assert seen[0][0][("fedq_adaptive_migrations_total", ())] == 0
    metrics, page = seen[-1]
    assert metrics[("fedq_adaptive_migrations_total", ())] == 1
    assert metrics[("fedq_adaptive_segment_info", (("placement", second), ("since", str(t)),
                                                   ("strategy", "move")))] == 1
    assert "<h2>Adaptive segments</h2>" in page and "the rate rose (given)" in page
