"""What any message source needs, whatever its broker (federation/runtime/connectors/mqtt.py
is one): `MessageLanding` buffers the readings of received messages and writes them as
landing files, durably, before the messages are acknowledged, dropping a redelivered
message by its hash; `parse_payload` reads a message (JSON or CSV), `column` makes a landing
column of the stream's type. The rules are in mqtt.py's module doc. A broker kind
subclasses `MessageLanding` with its connection: it calls `receive(topic, payload, token)`
for each message and implements `acknowledge(tokens)` and `disconnect()`."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from federation.parts import arrow_type
from federation.streams import StreamDecl

HASHES_KEY = b"fedq.mqtt.hashes"
REJECTED = "_rejected.jsonl"
MAX_READINGS = 50_000  # a landing file holds at most about that many readings
DEDUP_FILES = 100  # the hashes of that many last landing files are remembered
_LANDING = re.compile(r"^part-(\d{12})\.parquet$")


class MessageLanding:
    """The landing of a message source (module doc): `receive` each message with the token
    that acknowledges it; every `flush_s` (or `MAX_READINGS` readings) the buffer becomes
    one landing file, written durably, and only then are its messages acknowledged.
    `.error` is a failure of its thread, else None. Counters: `messages` received,
    `readings` and `files` written, `acked` messages, `duplicates` dropped, `rejected`."""

    def __init__(self, landing_dir: Path, stream: StreamDecl, flush_s: float = 1.0,
                 name: str = "fedq-landing") -> None:
        if not flush_s > 0:
            raise ValueError(f"flush_s must be > 0, got {flush_s!r}")
        self.dir, self.stream, self.flush_s = Path(landing_dir), stream, flush_s
        self.error: BaseException | None = None
        self.messages = self.readings = self.files = self.acked = self.duplicates = 0
        self.rejected = 0
        self._lock = threading.Lock()  # the buffer
        self._flushing = threading.Lock()  # one flush at a time, in sequence order
        self._rows: list[dict | list] = []  # parsed readings (dicts, or CSV value lists)
        self._hashes: set[str] = set()  # of the payloads in _rows
        self._acks: list = []  # the tokens to acknowledge after the write
        self._rejects: list[str] = []  # lines for _rejected.jsonl
        self._first_at: float | None = None  # wall time of the oldest message not acked
        self._seen: set[str] = set()
        self._recent: list[list[str]] = []  # hashes per landing file, oldest first
        self._halt = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def acknowledge(self, tokens: list) -> None:
        """Tell the broker these messages are durable (the broker kind's)."""
        raise NotImplementedError

    def disconnect(self) -> None:
        """Drop the connection after a failure (the broker kind's)."""

    def _fail(self, e: BaseException) -> None:
        self.error = e
        self._closing = True  # buffer no more: nothing will be acknowledged
        self.disconnect()

    def _main(self) -> None:
        while not self._halt.wait(0.05):
            first = self._first_at
            if first is not None and time.monotonic() - first >= self.flush_s:
                try:
                    self._flush()
                except Exception as e:  # noqa: BLE001 - handed to the caller via .error
                    self._fail(e)
                    return

    def receive(self, topic: str, payload: bytes, ack: tuple[int, int]) -> None:
        digest = hashlib.sha256(payload).hexdigest()
        rows, why = parse_payload(payload, len(self.stream.all_columns))
        with self._lock:
            self.messages += 1
            if self._first_at is None:
                self._first_at = time.monotonic()
            self._acks.append(ack)
            if digest in self._seen or digest in self._hashes:
                self.duplicates += 1
            elif why is not None:
                self.rejected += 1
                text = payload.decode("utf-8", "replace")[:2000]
                self._rejects.append(json.dumps({"topic": topic, "payload": text,
                                                 "reason": why}) + "\n")
            else:
                self._rows.extend(rows)
                self._hashes.add(digest)

    def _flush(self) -> None:
        """Write the buffer as one landing file (if it holds readings) and the rejected
        messages, durably, then acknowledge every message of it."""
        with self._flushing:
            with self._lock:
                rows, hashes, acks, rejects = self._rows, self._hashes, self._acks, self._rejects
                self._rows, self._hashes, self._acks, self._rejects = [], set(), [], []
                self._first_at = None
            if rejects:
                with open(self.dir / REJECTED, "a", encoding="utf-8") as f:
                    f.writelines(rejects)
                    f.flush()
                    os.fsync(f.fileno())
            if rows:
                self._write(self.table(rows), sorted(hashes))
                self.readings += len(rows)
            self._acknowledge(acks)

    def _acknowledge(self, acks: list) -> None:
        self.acknowledge(acks)
        self.acked += len(acks)

    def table(self, rows: list) -> pa.Table:
        """The landing table of parsed readings: the stream's columns (module doc)."""
        cols = {}
        for k, (name, typ) in enumerate(self.stream.all_columns.items()):
            values = [r.get(name) if isinstance(r, dict) else r[k] for r in rows]
            cols[name] = column(values, typ)
        return pa.table(cols)

    def _write(self, table: pa.Table, hashes: list[str]) -> None:
        table = table.replace_schema_metadata({HASHES_KEY: json.dumps(hashes)})
        path = self.dir / f"part-{self._seq:012d}.parquet"
        tmp = path.with_name("." + path.name + ".tmp")
        with open(tmp, "wb") as f:
            pq.write_table(table, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(self.dir, os.O_RDONLY)  # the rename is durable too
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._seq += 1
        self.files += 1
        self._remember(hashes)

    def _remember(self, hashes: list[str]) -> None:
        self._recent.append(hashes)
        self._seen.update(hashes)
        while len(self._recent) > DEDUP_FILES:
            self._seen.difference_update(self._recent.pop(0))

    def _recover(self) -> int:
        """The next sequence number; loads the hashes of the last landing files and removes
        temporary files of a crashed writer (their messages were not acknowledged)."""
        for p in self.dir.glob(".part-*.parquet.tmp"):
            p.unlink()
        seqs = sorted(int(m.group(1)) for p in self.dir.iterdir()
                      if (m := _LANDING.match(p.name)))
        for s in seqs[-DEDUP_FILES:]:
            meta = pq.read_schema(self.dir / f"part-{s:012d}.parquet").metadata or {}
            self._remember(json.loads(meta[HASHES_KEY]) if HASHES_KEY in meta else [])
        return seqs[-1] + 1 if seqs else 0




def parse_payload(payload: bytes, ncols: int) -> tuple[list, str | None]:
    """The readings of a message (dicts from JSON, value lists from CSV), or the reason it
    cannot be read."""
    try:
        text = payload.decode("utf-8").strip()
    except UnicodeDecodeError:
        return [], "not UTF-8 text"
    if not text:
        return [], "empty message"
    if text[0] in "[{":
        try:
            doc = json.loads(text)
        except ValueError as e:
            return [], f"not JSON: {e}"
        rows = doc if isinstance(doc, list) else [doc]
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                return [], f"JSON array element {i} is not an object"
        return rows, None
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if r]
    except csv.Error as e:
        return [], f"not CSV: {e}"
    for i, r in enumerate(rows):
        if len(r) != ncols:
            return [], f"CSV line {i + 1} has {len(r)} values, the stream has {ncols} columns"
    return [[v if v != "" else None for v in r] for r in rows], None


def column(values: list, sql_type: str) -> pa.Array:
    """A landing column: Arrow's type of the values, or strings when they mix types."""
    if sql_type == "TIMESTAMP":
        values = [_timestamp(v) for v in values]
    values = [json.dumps(v) if isinstance(v, (dict, list)) else v for v in values]
    if all(v is None for v in values):
        return pa.nulls(len(values), arrow_type(sql_type))
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return pa.array([None if v is None else _text(v) for v in values], pa.string())


def _text(v) -> str:
    return v if isinstance(v, str) else (
        v.isoformat(sep=" ") if isinstance(v, datetime) else json.dumps(v))


def _timestamp(v):
    """An ISO string or epoch seconds as a naive UTC datetime; anything else as it is."""
    if isinstance(v, str):
        try:
            v = datetime.fromisoformat(v.strip())
        except ValueError:
            try:
                v = float(v)
            except ValueError:
                return v
    if isinstance(v, datetime):
        return v if v.tzinfo is None else v.astimezone(timezone.utc).replace(tzinfo=None)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        try:
            return datetime.fromtimestamp(v, timezone.utc).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            return v
    return v
