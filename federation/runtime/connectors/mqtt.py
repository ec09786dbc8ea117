"""MQTT as a source (`mqtt://`, `mqtts://`): a subscriber that turns the messages of a topic into landing files,
which a following run reads as any landing directory (federation/runtime/follow.py).

Why files: the follower, the ingest's validation, its dead letters and the resumption from
the spool stay the same whatever the source; the subscriber only has to make each message
durable once before it acknowledges it.

A message is a JSON object (one reading), a JSON array of objects, or CSV lines (values
in the stream's column order, no header). Readings are buffered and written every
`flush_s` of wall time (or every `MAX_READINGS` readings) as ONE landing file
`part-<seq:012d>.parquet` with the stream's columns: written under a hidden name, fsync'd,
renamed into place, the directory fsync'd, and only then are its messages acknowledged
(PUBACK). Types are the ingest's business: a column whose values mix Python types is
written as strings and the ingest casts them, dead-lettering what does not cast; a reading
without a column has a null there (dead-lettered too). TIMESTAMP values may be ISO strings
(with or without a zone: zoned ones are converted to UTC) or epoch seconds.

Exactly once across a crash, with a broker that redelivers unacknowledged QoS-1 messages
to a persistent session (client id stable across restarts): a message written to a
landing file but not acknowledged before the crash comes again, and is dropped. The rule:
the SHA-256 of every payload written is kept in its landing file's Parquet metadata
(`HASHES_KEY`), the hashes of the last `DEDUP_FILES` files are loaded on start, and a
payload whose hash is there is skipped, so two byte-identical messages within that
horizon are one. A message that cannot be parsed goes to `_rejected.jsonl` (topic, text,
reason) and is acknowledged: it never blocks the stream. Every message is acknowledged
within about `flush_s` of its receipt (amqtt forgets a message not acknowledged in 5 s).

The broker must let a file's messages be in flight to one client at once (mosquitto's
`max_inflight_messages`, default 20, would cap a file at 20 messages).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from federation.brokers import MqttSecurity, refused
from federation.conventions import parse_mqtt_url
from federation.runtime.connectors.messages import MAX_READINGS, MessageLanding
from federation.streams import StreamDecl


class MqttLanding(MessageLanding):
    """Subscribes to the topic of `url` (QoS 1, persistent session `client_id`) and writes
    its messages into `landing_dir` as landing files (module doc). `start()`, `stop()`;
    `.error` is an exception of its threads or of the connection, else None. Counters:
    `messages` received, `readings` and `files` written, `acked` messages, `duplicates`
    dropped, `rejected` messages."""

    def __init__(self, url: str, landing_dir: Path, stream: StreamDecl, client_id: str,
                 flush_s: float = 1.0, security: MqttSecurity | None = None) -> None:
        super().__init__(landing_dir, stream, flush_s, name="fedq-mqtt")
        self.url, (self.host, self.port, self.topic) = url, parse_mqtt_url(url)
        self.client_id = client_id
        self.security = security or MqttSecurity()  # TLS and credentials (federation/brokers.py)
        self.connected = False
        self._lost: float | None = None  # wall time the connection was lost, till back
        self._ready = threading.Event()
        self._client = None

    def start(self, timeout_s: float = 20.0) -> MqttLanding:
        """Connect and subscribe (or find the session's subscription); a failure is left in
        `.error`. Returns once subscribed, so nothing published afterwards is missed."""
        import paho.mqtt.client as mqtt

        self.dir.mkdir(parents=True, exist_ok=True)
        self._seq = self._recover()
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                        clean_session=False, protocol=mqtt.MQTTv311, manual_ack=True)
        try:
            self.security.apply(c, self.url)  # TLS, the user (amqtt keeps named sessions)
        except (OSError, ValueError) as e:
            self.error = ConnectionError(f"cannot set up TLS for {self.url}: {e}")
            return self
        c.on_connect, c.on_subscribe = self._on_connect, self._on_subscribe
        c.on_message, c.on_disconnect = self._on_message, self._on_disconnect
        self._client = c
        try:
            c.connect(self.host, self.port, keepalive=30)
        except OSError as e:
            self.error = ConnectionError(f"cannot connect to the MQTT broker of {self.url}: {e}")
            return self
        c.loop_start()
        self._thread.start()
        if not self._ready.wait(timeout_s) and self.error is None:
            self.error = TimeoutError(
                f"no subscription to {self.url} within {timeout_s:g} s" if self.connected else
                f"{self.host}:{self.port} took the connection but gave no MQTT answer within "
                f"{timeout_s:g} s: is an MQTT broker listening there?")
        return self

    def stop(self) -> None:
        """Write and acknowledge what is buffered, then disconnect (a message arriving
        meanwhile is not acknowledged: the broker keeps it for the session)."""
        self._closing = True
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._client is None:
            return
        try:
            if self.error is None:
                self._flush()
        except Exception as e:  # noqa: BLE001 - reported like a thread's failure
            self.error = e
        finally:
            self._client.disconnect()
            self._client.loop_stop()

    def acknowledge(self, tokens: list[tuple[int, int]]) -> None:
        for mid, qos in tokens:
            self._client.ack(mid, qos)

    def disconnect(self) -> None:
        if self._client is not None:
            self._client.disconnect()

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self.error = ConnectionError(refused(self.url, reason_code))
            self._ready.set()
            return
        if self._lost is not None:
            print(f"fedq: reconnected to the MQTT broker of {self.url} after "
                  f"{time.monotonic() - self._lost:.1f} s", file=sys.stderr, flush=True)
            self._lost = None
        self.connected = True
        if flags.session_present:
            self._ready.set()
        else:
            client.subscribe(self.topic, qos=1)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if any(rc.is_failure for rc in reason_codes):
            self.error = ConnectionError(f"MQTT broker refused the subscription {self.url}")
        self._ready.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self.connected = False  # paho reconnects by itself unless we disconnected
        if not self._closing and self._lost is None:
            self._lost = time.monotonic()
            print(f"fedq: lost the MQTT broker of {self.url} ({reason_code}); reconnecting "
                  "(what it received meanwhile comes with the session)", file=sys.stderr,
                  flush=True)

    def _on_message(self, client, userdata, msg) -> None:
        if self._closing:
            return
        try:
            self.receive(msg.topic, msg.payload, (msg.mid, msg.qos))
            if len(self._rows) >= MAX_READINGS:
                self._flush()  # blocks the network thread: memory stays bounded
        except Exception as e:  # noqa: BLE001 - paho would swallow or die
            self._fail(e)



def open_source(spec, landing: Path, stream: StreamDecl, ctx) -> MqttLanding:
    """The subscriber of `spec.url` into `landing` (the connector's entry: __init__.py),
    started: subscribed, so that nothing published from now on is lost."""
    from federation.errors import OptionError

    if ctx.security is not None and (why := ctx.security.problem(spec.url)) is not None:
        raise OptionError(*why)
    feeder = MqttLanding(spec.url, landing, stream, client_id=ctx.client_id,
                         security=ctx.security)
    if feeder.start().error is not None:
        feeder.stop()
        raise OptionError("source", str(feeder.error))
    return feeder
