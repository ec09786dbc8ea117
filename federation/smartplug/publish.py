"""Replaying a generated data directory to an MQTT broker, as smart plugs would send their
readings: the demo's source and the tests' (federation/runtime/connectors/mqtt.py subscribes).

Readings go out in the directory's order, `per_message` readings per QoS-1 message (a
message never spans two event seconds), as a JSON array of objects or as CSV lines in the
file's column order (a generated directory's is the stream's), timestamps as ISO strings.
`realtime` paces the event seconds on the wall clock (`speed` of them per second);
otherwise they go as fast as the broker takes them. `publish` returns once the broker has
acknowledged every message.
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from federation.brokers import MqttSecurity, connect
from federation.conventions import parse_mqtt_url
from federation.parts import list_parts

MAX_UNACKED = 5000  # messages published but not yet acknowledged by the broker, at most


class PublishSummary(BaseModel):
    """What `publish` sent."""

    model_config = ConfigDict(extra="forbid")

    url: str
    files: int
    readings: int
    messages: int
    elapsed_s: float


def endpoint(url: str) -> tuple[str, int, str]:
    """(host, port, topic) of `mqtt://host[:port]/topic` (`parse_mqtt_url`), a topic
    without wildcards."""
    host, port, topic = parse_mqtt_url(url)
    if "+" in topic or "#" in topic:
        raise ValueError(f"cannot publish to a topic with wildcards: {url!r}")
    return host, port, topic


def _iso(v: Any) -> Any:
    return v.isoformat() if isinstance(v, datetime) else v


def encode(rows: list[dict], fmt: str) -> bytes:
    """One message of readings: a JSON array of objects, or CSV lines (no header)."""
    if fmt == "json":
        return json.dumps([{k: _iso(v) for k, v in r.items()} for r in rows]).encode()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerows([[("" if v is None else _iso(v)) for v in r.values()] for r in rows])
    return buf.getvalue().encode()


class _Acks:
    """Counts the broker's acknowledgements; lets the publisher wait for them."""

    def __init__(self) -> None:
        self.done = 0
        self.cond = threading.Condition()

    def on_publish(self, client, userdata, mid, reason_code, properties) -> None:
        with self.cond:
            self.done += 1
            self.cond.notify_all()

    def wait(self, sent: int, slack: int, timeout_s: float) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: sent - self.done <= slack, timeout_s):
                raise TimeoutError(f"the broker acknowledged {self.done} of {sent} messages "
                                   f"in {timeout_s:g} s")


def publish(data_dir: str | os.PathLike[str], url: str, *, realtime: bool = True,
            speed: float = 1.0, per_message: int = 100, fmt: Literal["json", "csv"] = "json",
            progress: Callable[[int, int], Any] | None = None,
            timeout_s: float = 60.0, security: MqttSecurity | None = None) -> PublishSummary:
    """Publish the readings of `data_dir`'s part files to the topic of `url` (module doc);
    `progress(files_done, files)` after each file. `timeout_s`: the longest wait for the
    broker's acknowledgements."""
    import paho.mqtt.client as mqtt

    topic = endpoint(url)[2]
    if fmt not in ("json", "csv"):
        raise ValueError(f"fmt must be 'json' or 'csv', got {fmt!r}")
    if per_message < 1 or not speed > 0:
        raise ValueError(f"per_message must be >= 1 and speed > 0, got {per_message}, {speed}")
    parts = list_parts(Path(data_dir))
    acks = _Acks()
    c = connect(url, security, f"fedq-pub-{uuid.uuid4().hex[:12]}", timeout_s)
    c.on_publish = acks.on_publish
    t0 = time.monotonic()
    sent = readings = 0
    try:
        for k, path in enumerate(parts):
            if realtime:
                delay = t0 + k / speed - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            rows = pq.read_table(path).to_pylist()
            for i in range(0, len(rows), per_message):
                info = c.publish(topic, encode(rows[i:i + per_message], fmt), qos=1)
                if info.rc != mqtt.MQTT_ERR_SUCCESS:
                    raise ConnectionError(f"publishing to {url} failed: "
                                          f"{mqtt.error_string(info.rc)}")
                sent += 1
            readings += len(rows)
            acks.wait(sent, MAX_UNACKED, timeout_s)
            if progress:
                progress(k + 1, len(parts))
        acks.wait(sent, 0, timeout_s)
    finally:
        c.disconnect()
        c.loop_stop()
    return PublishSummary(url=url, files=len(parts), readings=readings, messages=sent,
                          elapsed_s=round(time.monotonic() - t0, 3))
