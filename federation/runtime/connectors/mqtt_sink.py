"""Results published to an MQTT topic (`--output mqtt://HOST:PORT/TOPIC` or `mqtts://`):
one message per query and instant, QoS 1, a JSON object

    {"id": "<run>/<query>/<stage>-<batch>/<instant>", "query": "q8",
     "instant": "2015-07-15T00:00:10", "rows": [{"id": 1000, "name": "..."}, ...]}

Exactly once, for a consumer that dedupes on `id`: a micro-batch commits only after the
broker acknowledged (PUBACK) every message of it, so nothing is lost across kill -9; a
batch replayed after a crash publishes the same messages again, with the same `id`
(deterministic: the run id, the query, the micro-batch key, the instant). The client has a
persistent session named after the run and query, so paho re-sends what was in flight when
the connection dropped, after it reconnects."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal

import pyarrow as pa

from federation.brokers import MqttSecurity, connect
from federation.smartplug.publish import endpoint


def open_sink(url: str, ctx) -> MqttSink:
    """The topic's sink for the query of `ctx` (its messages name the query)."""
    from federation.errors import OptionError

    try:
        return MqttSink(url, ctx.query, ctx.run_id, ctx.security)
    except (ConnectionError, ValueError) as e:
        raise OptionError("output", str(e)) from None


class MqttSink:
    """Publishes a query's rows (module doc); `put` returns once the broker has them."""

    def __init__(self, url: str, query: str, run_id: str,
                 security: MqttSecurity | None = None, timeout_s: float = 60.0) -> None:
        self.url, self.query, self.run, self.timeout_s = url, query, run_id, timeout_s
        self.where = f"MQTT topic {url}"
        self.topic = endpoint(url)[2]  # ValueError for a topic with wildcards
        self.client = connect(url, security, f"fedq-{run_id}-out-{query}", timeout_s,
                              clean_session=False)
        self.published = 0

    def put(self, key: tuple[int, int], rows: pa.Table, query: str = "") -> None:
        from federation.runtime.sinks import group_by_instant

        sent = []
        for tau, part in group_by_instant(rows):
            instant = tau.isoformat() if isinstance(tau, datetime) else str(tau)
            doc = {"id": f"{self.run}/{self.query}/{key[0]}-{key[1]}/{instant}",
                   "query": self.query, "instant": instant,
                   "rows": part.drop_columns(["tau"]).to_pylist()}
            info = self.client.publish(self.topic, json.dumps(doc, default=_json), qos=1)
            sent.append(info)
        for info in sent:  # the batch commits only once the broker has every message
            info.wait_for_publish(self.timeout_s)
            if not info.is_published():
                raise ConnectionError(f"the MQTT broker of {self.url} did not acknowledge "
                                      f"results within {self.timeout_s:g} s")
        self.published += len(sent)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _json(v):
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)
