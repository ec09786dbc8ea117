"""A broker that needs TLS and a password (issue 42, part 4): the embedded amqtt broker,
and Mosquitto where it is installed, with a TLS listener (a CA and a server certificate
made here with openssl) and a password file. The subscriber and the publisher connect with the CA and the password from
$FEDQ_MQTT_PASSWORD or a file; a wrong password, an unknown CA and a password in the URL
are clear one-line errors; the password appears in no error, summary, log or process
list. The landing layer needs no JVM; one `fedq run --source mqtts://...` runs Spark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from federation.brokers import MqttSecurity
from federation.conventions import MQTT_PASSWORD_ENV
from federation.errors import OptionError
from federation.runtime import RunOptions
from federation.runtime.broker import start_broker, start_mosquitto
from federation.runtime.connectors.mqtt import MqttLanding
from federation.runtime.ingest import read_clean_rows
from federation.runtime.sources import prepare_input
from federation.smartplug import smartplug_stream
from federation.smartplug.datagen import generate
from federation.smartplug.publish import publish

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "pw-Zq81-never-shown"  # the test broker's


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """A CA, and a certificate it signed for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (needed to make the test's certificates)")
    d = tmp_path_factory.mktemp("tls")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "2", "-subj", "/CN=fedq test CA", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.cnf",
             cwd=d)
    (d / "password").write_text(PASSWORD + "\n")
    return d


@pytest.fixture(scope="module", params=["amqtt", "mosquitto"])
def broker(certs, request):
    """The embedded broker, and Mosquitto where it is installed, each with TLS and a
    password file."""
    if request.param == "mosquitto" and shutil.which("mosquitto") is None:
        pytest.skip("mosquitto is not installed (apt-get install mosquitto)")
    start = start_broker if request.param == "amqtt" else start_mosquitto
    b = start(users={"alice": PASSWORD}, tls=(certs / "server.crt", certs / "server.key"))
    request.addfinalizer(b.stop)
    return b


def test_urls_and_options():  # no broker
    from federation.conventions import mqtt_url

    assert mqtt_url("mqtts://alice@h/plugs") == ("h", 8883, "plugs", True, "alice")
    assert mqtt_url("mqtt://h:99/a/#") == ("h", 99, "a/#", False, None)
    with pytest.raises(ValueError, match=r"password in the URL") as e:
        mqtt_url(f"mqtts://alice:{PASSWORD}@h/plugs")
    assert PASSWORD not in str(e.value)
    with pytest.raises(OptionError, match="password in the URL") as e:
        RunOptions.of(follow=True, source=f"mqtts://alice:{PASSWORD}@h/plugs")
    assert e.value.option == "source" and PASSWORD not in str(e.value)
    with pytest.raises(OptionError, match="need an mqtts:// URL") as e:
        RunOptions.of(follow=True, source="mqtt://h/t", mqtt_ca=__file__)
    assert e.value.option == "mqtt_ca"
    with pytest.raises(OptionError, match="is not a file") as e:
        RunOptions.of(follow=True, source="mqtts://h/t", mqtt_password_file="/nope")
    assert e.value.option == "mqtt_password_file"
    from federation.runtime.sources import bind_sources

    plugs = {"smartplug": smartplug_stream()}
    for data in ("data/", "datagen:smartplug", {"smartplug": "follow:data/"}):
        with pytest.raises(OptionError, match="needs an MQTT source"):
            bind_sources(plugs, data, RunOptions.of(mqtt_ca=__file__))
    assert bind_sources(plugs, "mqtts://h/t", RunOptions.of(mqtt_ca=__file__))[
        "smartplug"].kind == "mqtts"


def test_tls_and_a_password_deliver_every_reading(broker, certs, tmp_path, monkeypatch):
    src, landing = tmp_path / "src", tmp_path / "landing"
    generate(src, rate=40, seconds=5, plugs=8, seed=2)
    url = broker.url_for("plugs/readings", user="alice")
    monkeypatch.setenv(MQTT_PASSWORD_ENV, PASSWORD)  # the subscriber's: from the environment
    sub = MqttLanding(url, landing, smartplug_stream(), "t-secure", flush_s=0.2,
                      security=MqttSecurity(ca_file=certs / "ca.crt")).start()
    try:
        assert sub.error is None, sub.error
        monkeypatch.delenv(MQTT_PASSWORD_ENV)  # the publisher's: from a file
        s = publish(src, url, realtime=False, per_message=10, security=MqttSecurity(
            ca_file=certs / "ca.crt", password_file=certs / "password"))
        end = time.monotonic() + 20
        while sub.acked < s.messages and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        sub.stop()
    assert sub.error is None and sub.readings == s.readings == 200
    res = prepare_input(landing, tmp_path / "work", smartplug_stream())
    got = read_clean_rows(res.spool_dir).sort_by("id")
    want = pa.concat_tables(pq.read_table(p) for p in sorted(src.glob("part-*.parquet")))
    assert got.select(want.column_names).equals(want.sort_by("id").cast(
        got.select(want.column_names).schema))


def test_refusals_are_one_clear_line(broker, certs, tmp_path, monkeypatch):
    url = broker.url_for("plugs/readings", user="alice")
    monkeypatch.setenv(MQTT_PASSWORD_ENV, "wrong")
    sub = MqttLanding(url, tmp_path / "a", smartplug_stream(), "t-wrong",
                      security=MqttSecurity(ca_file=certs / "ca.crt")).start(timeout_s=10)
    sub.stop()
    assert isinstance(sub.error, ConnectionError), sub.error
    text = str(sub.error)
    assert text.startswith(f"the MQTT broker of {url} refused the connection (")
    assert "FEDQ_MQTT_PASSWORD" in text and "\n" not in text and "wrong" not in text
    monkeypatch.setenv(MQTT_PASSWORD_ENV, PASSWORD)
    sub = MqttLanding(url, tmp_path / "b", smartplug_stream(), "t-noca").start(timeout_s=10)
    sub.stop()  # the system's CAs do not know the test CA
    assert isinstance(sub.error, ConnectionError)
    assert "cannot connect" in str(sub.error) and "CERTIFICATE_VERIFY_FAILED" in str(sub.error)
    with pytest.raises(ConnectionError, match="refused the connection") as e:
        publish(tmp_path, url, security=MqttSecurity(ca_file=certs / "ca.crt",
                                                     password_file=certs / "ca.crt"))
    assert "BEGIN CERTIFICATE" not in str(e.value)


@pytest.mark.spark
def test_fedq_run_over_tls_with_a_password_equals_the_reference(broker, certs, tmp_path):
    """`fedq run CQ5 --source mqtts://alice@... --mqtt-ca ... --mqtt-password-file ...`
    in its own process: equal to the reference; the password is in no argument of the
    process, no line it printed, and no file of its work directory; with a wrong password
    the same command fails with one line and exit code 2."""
    from db.reference import reference_result
    from federation.results import diff_results
    from federation.smartplug.queries import QUERIES

    if broker.kind != "amqtt":
        pytest.skip("one whole run, against the default broker (Mosquitto: landing tests)")

    src, out, work = tmp_path / "src", tmp_path / "out", tmp_path / "work"
    generate(src, rate=40, seconds=30, plugs=8, seed=3)
    url = broker.url_for("plugs/readings", user="alice")
    env = {k: v for k, v in os.environ.items() if k != MQTT_PASSWORD_ENV}
    env["PYSPARK_PYTHON"] = sys.executable
    main = "import sys; from federation.cli import main; sys.exit(main())"
    cli = [sys.executable, "-c", main, "run", "CQ5", "--rate", "40", "--plugs",
           "8", "--scale", "0.05", "--source", url, "--mqtt-ca", str(certs / "ca.crt"),
           "--mqtt-password-file", str(certs / "password"), "--until",
           "2013-09-01T00:00:29", "--seconds-per-batch", "5", "--output", str(out),
           "--work-dir", str(work), "--quiet"]
    proc = subprocess.Popen(cli, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (work / "input").exists() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.2)  # subscribed once the spool is made
        ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True,
                            check=True).stdout
        assert str(certs / "password") in ps and PASSWORD not in ps
        publish(src, url, realtime=False, per_message=25, security=MqttSecurity(
            ca_file=certs / "ca.crt", password_file=certs / "password"))
        printed, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, printed
    assert PASSWORD not in printed
    for f in work.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".txt", ".jsonl", ""):
            assert PASSWORD not in f.read_text(errors="replace"), f
    q = QUERIES["CQ5"](rate=40, scale=0.05, plugs=8)
    res = prepare_input(work / "landing" / "smartplug", tmp_path / "check", smartplug_stream())
    want = reference_result(q, read_clean_rows(res.spool_dir))
    got = pa.concat_tables(pq.read_table(p) for p in sorted(out.rglob("*.parquet")))
    assert want.num_rows and diff_results(got, want) is None

    (tmp_path / "wrong").write_text("wrong\n")
    bad = [*cli[:cli.index("--mqtt-password-file") + 1], str(tmp_path / "wrong"),
           "--until", "2013-09-01T00:00:29", "--work-dir", str(tmp_path / "w2"), "--quiet"]
    r = subprocess.run(bad, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if "refused" in ln]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert url in lines[0] and "wrong" not in lines[0]
