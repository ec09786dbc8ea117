"""DuckDB tables with live sources other than a generator (test_live_streams has the
generators): a followed directory and an MQTT topic, each stream joined with a table of a
DuckDB database file, two queries of one run ended by --until. No JVM: all in DuckDB."""

from __future__ import annotations

import datetime as dt
import time

from federation.parts import land_files, list_parts
from federation.smartplug.datagen import generate
from tests.test_live_streams import check_tiers, tiers_of_two_streams

START = dt.datetime(2013, 9, 1)


def test_a_followed_directory_and_a_broker_topic_each_joined_with_a_table(tmp_path):
    from federation.api import start
    from federation.runtime.broker import start_broker
    from federation.smartplug.publish import publish

    qs = tiers_of_two_streams()
    src = {n: tmp_path / f"src_{n}" for n in ("a", "b")}
    for k, (n, d) in enumerate(src.items()):
        generate(d, rate=40, seconds=16, plugs=6, houses=2, seed=k)
    landing, out, work = tmp_path / "landing", tmp_path / "out", tmp_path / "work"
    landing.mkdir()
    broker = start_broker()
    try:
        url = broker.url_for("plugs/b")
        h = start(qs, "db", {"a": landing, "b": url}, iterate=False, follow=True,
                  output=out, work_dir=work, seconds_per_batch=4, idle_timeout_s=60,
                  until=START + dt.timedelta(seconds=15))
        deadline = time.monotonic() + 60
        while not (work / "input" / "b").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # subscribed once the spools exist
        files = list_parts(src["a"])
        land_files(files[:8], landing)
        publish(src["b"], url, realtime=False, per_message=40, fmt="csv")
        land_files(files[8:], landing)
        r = h.wait(timeout=300)
        assert r is not None and r.summary.dead_lettered == 0, h.status()
    finally:
        broker.stop()
    check_tiers(qs, src, out)
