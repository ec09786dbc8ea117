"""An MQTT broker in a process of its own, for tests and the demo: the embedded amqtt broker
(`python -m federation.runtime.broker --port N`, a Python dependency, so always at hand)
or mosquitto when it is installed (it redelivers the messages a killed subscriber had not
acknowledged; amqtt 0.12.1 drops them, amqtt#401).

A separate process, because a subscriber killed with -9 must not take its broker along,
and a broker must be stoppable on its own. Readiness is a line on the broker's output, not
a probe of the port (a probe would be a client the broker has to handle).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

READY = "fedq broker ready"  # the line the amqtt process prints once it listens
START_TIMEOUT_S = 20.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A running broker process: `port`, `url_for(topic)`, `stop()`; its output so far in
    `output()`."""

    def __init__(self, kind: str, proc: subprocess.Popen, port: int, ready: str,
                 tmpdir: tempfile.TemporaryDirectory | None = None) -> None:
        self.kind, self.proc, self.port, self.host = kind, proc, port, "127.0.0.1"
        self.tls = False  # set by start_broker: its listener speaks TLS (mqtts://)
        self._tmpdir = tmpdir
        self._lines: list[str] = []
        self._ready = threading.Event()
        self._mark = ready
        self._reader = threading.Thread(target=self._read, name=f"fedq-{kind}-out",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:  # keeps the pipe drained for the broker's whole life
        for line in self.proc.stdout:
            self._lines.append(line.rstrip("\n"))
            if self._mark in line:
                self._ready.set()

    def output(self) -> str:
        return "\n".join(self._lines)

    def url_for(self, topic: str, user: str | None = None) -> str:
        scheme = "mqtts" if self.tls else "mqtt"
        return f"{scheme}://{user + '@' if user else ''}{self.host}:{self.port}/{topic}"

    def _wait_ready(self, timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > end:
                why = (f"exited with code {self.proc.returncode}"
                       if self.proc.poll() is not None else f"not ready within {timeout_s:g} s")
                self.stop()
                self._reader.join(1.0)
                raise RuntimeError(f"{self.kind} broker on port {self.port} {why}; its "
                                   f"output:\n{self.output() or '(none)'}")

    def stop(self, timeout_s: float = 10.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited after `timeout_s`; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None
        return self.proc.returncode


def _launch(kind: str, cmd: list[str], port: int, ready: str,
            tmpdir: tempfile.TemporaryDirectory | None = None) -> Broker:
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    b = Broker(kind, proc, port, ready, tmpdir)
    b._wait_ready(START_TIMEOUT_S)
    return b


def start_broker(port: int | None = None, users: dict[str, str] | None = None,
                 tls: tuple[Path, Path] | None = None) -> Broker:
    """The embedded amqtt broker on 127.0.0.1:`port` (a free one by default), ready.
    `users` {name: password}: only they may connect (argon2 hashes in a password file);
    `tls` (certificate file, key file): its listener speaks TLS only (mqtts://)."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "federation.runtime.broker", "--port", str(port)]
    tmp = None
    if users is not None:
        from pwdlib import PasswordHash
        from pwdlib.hashers.argon2 import Argon2Hasher

        tmp = tempfile.TemporaryDirectory(prefix="fedq-amqtt-")
        hasher = PasswordHash((Argon2Hasher(),))
        pw = Path(tmp.name) / "passwords"
        pw.write_text("".join(f"{u}:{hasher.hash(p)}\n" for u, p in users.items()))
        cmd += ["--password-file", str(pw)]
    if tls is not None:
        cmd += ["--certfile", str(tls[0]), "--keyfile", str(tls[1])]
    b = _launch("amqtt", cmd, port, READY, tmp)
    b.tls = tls is not None
    return b


def start_mosquitto(port: int | None = None, users: dict[str, str] | None = None,
                    tls: tuple[Path, Path] | None = None) -> Broker:
    """mosquitto on 127.0.0.1:`port` (a free one by default), ready; RuntimeError when it
    is not installed. `users` {name: password}: only they may connect (a password file
    made with mosquitto_passwd); `tls` (certificate file, key file): TLS only."""
    exe = shutil.which("mosquitto")
    if exe is None:
        raise RuntimeError("mosquitto is not installed (apt-get install mosquitto)")
    port = port or free_port()
    tmp = tempfile.TemporaryDirectory(prefix="fedq-mosquitto-")
    Path(tmp.name).chmod(0o755)  # mosquitto started as root reads its files as itself
    secure = ""
    if users is not None:
        pw = Path(tmp.name) / "passwords"
        pw.write_text("".join(f"{u}:{p}\n" for u, p in users.items()))
        subprocess.run([shutil.which("mosquitto_passwd") or "mosquitto_passwd", "-U",
                        str(pw)], check=True, capture_output=True)  # hashes them in place
        pw.chmod(0o644)
        secure += f"password_file {pw}\n"
    if tls is not None:  # copied where mosquitto, run as root, reads as its own user
        for key, name, src in (("certfile", "server.crt", tls[0]),
                               ("keyfile", "server.key", tls[1])):
            dst = Path(tmp.name) / name
            dst.write_bytes(Path(src).read_bytes())
            dst.chmod(0o644)
            secure += f"{key} {dst}\n"
    conf = Path(tmp.name) / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\n"
        f"allow_anonymous {'false' if users is not None else 'true'}\n"
        f"{secure}"
        "persistence false\n"
        # the subscriber acknowledges a file's messages at once: let them all be in flight
        "max_inflight_messages 0\n"
        "max_queued_messages 0\n"
        "log_dest stderr\n"  # unbuffered: the ready line comes at once

        "log_type error\nlog_type warning\nlog_type notice\nlog_type information\n")
    b = _launch("mosquitto", [exe, "-c", str(conf)], port, "running", tmp)
    b.tls = tls is not None
    return b


async def _serve(port: int, password_file: str | None = None, certfile: str | None = None,
                 keyfile: str | None = None) -> None:
    import asyncio

    from amqtt.broker import Broker as AmqttBroker

    listener = {"type": "tcp", "bind": f"127.0.0.1:{port}"}
    if certfile:
        listener.update(ssl=True, certfile=certfile, keyfile=keyfile)
    config = {
        "listeners": {"default": listener},
        # clients must send a user name: amqtt keeps the sessions of named clients only;
        # with a password file, the names and passwords in it
        "plugins": {"amqtt.plugins.authentication.FileAuthPlugin":
                    {"password_file": password_file}} if password_file else
                   {"amqtt.plugins.authentication.AnonymousAuthPlugin":
                    {"allow_anonymous": False}},
    }
    broker = AmqttBroker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    print(f"{READY} 127.0.0.1:{port}", flush=True)
    await stop.wait()
    await broker.shutdown()
    print("fedq broker stopped", flush=True)


def main(argv: list[str] | None = None) -> None:
    import asyncio
    import logging

    ap = argparse.ArgumentParser(prog="python -m federation.runtime.broker",
                                 description="An embedded amqtt MQTT broker on 127.0.0.1.")
    ap.add_argument("--port", type=int, default=1883)
    ap.add_argument("--password-file", default=None,
                    help="USER:ARGON2-HASH lines: only these users may connect")
    ap.add_argument("--certfile", default=None, help="TLS: the broker's certificate")
    ap.add_argument("--keyfile", default=None, help="TLS: its private key")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[amqtt] %(levelname)s %(message)s")
    logging.getLogger("transitions").setLevel(logging.WARNING)
    asyncio.run(_serve(args.port, args.password_file, args.certfile, args.keyfile))


if __name__ == "__main__":
    main()
