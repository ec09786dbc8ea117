"""Connections to an MQTT broker, shared by the subscriber (runtime/connectors/mqtt.py) and the
publisher (smartplug/publish.py): the URL, TLS and credentials.

`mqtt://[USER@]HOST[:PORT]/TOPIC` connects in the clear, `mqtts://...` over TLS (port 8883
by default), checking the broker's certificate against the system's CAs or `ca_file`
(`--mqtt-ca`), with a client certificate if given (`cert_file`, `key_file`). A password
is never in the URL or on the command line: it is read, when the connection is made, from
`password_file` (`--mqtt-password-file`, its first line) or the environment variable
FEDQ_MQTT_PASSWORD; the user name is the URL's (`fedq` when it names none: the embedded
broker keeps the sessions of named clients only). A broker that refuses the credentials
is a `ConnectionError` naming the URL without the password.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from federation.conventions import MQTT_PASSWORD_ENV, mqtt_url

#: the user name sent when the URL names none
DEFAULT_USER = "fedq"


@dataclass(frozen=True)
class MqttSecurity:
    """TLS files and where the password is (never the password itself)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    password_file: Path | None = None

    def problem(self, url: str) -> tuple[str, str] | None:
        """(option, why) when these settings do not fit `url` or their files are missing;
        None when they do. Checked before any work (runtime/options.py)."""
        tls = mqtt_url(url)[3]
        for option, f in (("mqtt_ca", self.ca_file), ("mqtt_cert", self.cert_file),
                          ("mqtt_key", self.key_file),
                          ("mqtt_password_file", self.password_file)):
            if f is not None and not Path(f).is_file():
                return option, f"{f} is not a file"
        if (self.cert_file is None) != (self.key_file is None):
            return ("mqtt_cert" if self.cert_file is None else "mqtt_key",
                    "a client certificate needs both --mqtt-cert and --mqtt-key")
        if not tls and (self.ca_file or self.cert_file):
            return ("mqtt_ca" if self.ca_file else "mqtt_cert",
                    f"TLS settings need an mqtts:// URL, got {url.split('://')[0]}://")
        return None

    def password(self) -> str | None:
        """The password: the first line of `password_file`, else $FEDQ_MQTT_PASSWORD."""
        if self.password_file is not None:
            lines = Path(self.password_file).read_text().splitlines()
            return lines[0] if lines else ""
        return os.environ.get(MQTT_PASSWORD_ENV)

    def apply(self, client, url: str) -> None:
        """Set TLS and the credentials on a paho client for `url`."""
        _, _, _, tls, user = mqtt_url(url)
        if tls:
            ctx = ssl.create_default_context(
                cafile=None if self.ca_file is None else str(self.ca_file))
            if self.cert_file is not None:
                ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
            client.tls_set_context(ctx)
        client.username_pw_set(user or DEFAULT_USER, self.password())


def refused(url: str, reason) -> str:
    """The message of a broker's refusal of a connection, naming the URL and what to check."""
    text = str(reason)
    hint = ""
    if "password" in text.lower() or "authori" in text.lower():
        hint = (f": check the user name in the URL and the password in ${MQTT_PASSWORD_ENV} "
                "or --mqtt-password-file")
    return f"the MQTT broker of {url} refused the connection ({text}){hint}"


def connect(url: str, security: MqttSecurity | None, client_id: str,
            timeout_s: float = 20.0, inflight: int = 1000, clean_session: bool = True):
    """A paho client connected to the broker of `url` (its network loop running), once the
    broker accepted the connection; ConnectionError names the URL when it cannot be
    reached or refuses (`refused`)."""
    import threading

    import paho.mqtt.client as mqtt

    host, port, _, _, _ = mqtt_url(url)
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                    protocol=mqtt.MQTTv311, clean_session=clean_session)
    try:
        (security or MqttSecurity()).apply(c, url)  # TLS and credentials
    except (OSError, ValueError) as e:
        raise ConnectionError(f"cannot set up TLS for {url}: {e}") from None
    c.max_inflight_messages_set(inflight)
    answered, refusal = threading.Event(), []

    def on_connect(client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            refusal.append(refused(url, reason_code))
        answered.set()

    c.on_connect = on_connect
    try:
        c.connect(host, port, keepalive=30)
    except OSError as e:
        raise ConnectionError(f"cannot connect to the MQTT broker of {url}: {e}") from None
    c.loop_start()
    if not answered.wait(timeout_s) or refusal:
        c.disconnect()
        c.loop_stop()
        raise ConnectionError(refusal[0] if refusal else
                              f"no answer from the MQTT broker of {url} in {timeout_s:g} s")
    return c
