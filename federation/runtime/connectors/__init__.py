"""Sources as connectors: where each stream's readings come from, chosen by the URL given
for the stream (docs/architecture.md, "Sources": how to add a kind).

| URL | kind | module |
|---|---|---|
| `DIR` (a path) | a directory: replayed to its end, or followed with `--follow` | directory.py |
| `follow:DIR` | a directory followed as files land | directory.py |
| `mqtt://HOST[:PORT]/TOPIC`, `mqtts://...` | a broker's topic (QoS 1) | mqtt.py |
| `datagen:smartplug?rate=..&plugs=..`, `datagen:nexmark?rate=..` | a generator at a rate in wall time | datagen.py |

Every live source lands its readings as files in a landing directory, which the follower
(federation/runtime/follow.py) validates into the stream's spool: validation, dead
letters, idling and the resumption from the spool are the same whatever the source. A
source's position is what its landing directory holds (and, for a broker, the messages
its persistent session has not acknowledged): a resumed run opens it again and it goes on.

A source kind is one module with `open_source(spec, landing, stream, ctx)` returning a
feeder (`error`, `stop()`), or None when the data is a directory someone else fills; and
one line in `KINDS` below.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from federation.streams import StreamDecl

#: scheme -> the module that opens its sources (module doc)
KINDS = {
    "dir": "federation.runtime.connectors.directory",
    "follow": "federation.runtime.connectors.directory",
    "mqtt": "federation.runtime.connectors.mqtt",
    "mqtts": "federation.runtime.connectors.mqtt",
    "datagen": "federation.runtime.connectors.datagen",
}


@dataclass(frozen=True)
class SourceSpec:
    """One stream's source as given: `url` (a path, `follow:PATH`, `mqtt://...`,
    `datagen:...`), its `kind` (a key of KINDS), and whether it never ends by itself."""

    url: str
    kind: str
    live: bool
    path: Path | None = None  # a directory's
    params: dict = field(default_factory=dict)  # a generator's (datagen:NAME?k=v&...)

    def open(self, landing: Path, stream: StreamDecl, ctx: SourceContext):
        """The feeder of this source into `landing` (started), or None (module doc)."""
        return importlib.import_module(KINDS[self.kind]).open_source(self, landing, stream,
                                                                     ctx)

    def declares(self, name: str) -> StreamDecl | None:
        """The stream `name` as this source declares it (a generator knows its schema),
        or None: the declaration comes from elsewhere (a directory's `_stream.json`)."""
        mod = importlib.import_module(KINDS[self.kind])
        return getattr(mod, "declares", lambda *_: None)(self, name)

    def landing(self, work: Path, stream: str) -> Path:
        """The directory the follower reads: a directory source's own, else the stream's
        in the work directory (`<work>/landing/<stream>`), which the source fills."""
        if self.path is not None:
            return self.path
        return work / "landing" / stream


@dataclass
class SourceContext:
    """What a run gives the sources it opens: a client id stable across resumes, the
    broker's TLS and credentials, and the run's start in wall time (a generator's first
    event second), the same for every stream."""

    client_id: str
    security: object = None
    start: datetime | None = None


def parse_source(value: str | Path) -> SourceSpec:
    """The SourceSpec of a stream's `--data` value (module doc); ValueError says why not.

    >>> parse_source("mqtt://broker/plugs").kind, parse_source("data/").kind
    ('mqtt', 'dir')
    >>> s = parse_source("datagen:nexmark?rate=1000")
    >>> s.kind, s.live, s.params
    ('datagen', True, {'generator': 'nexmark', 'rate': '1000'})
    """
    if isinstance(value, Path):
        return SourceSpec(str(value), "dir", False, path=value)
    text = str(value)
    scheme = text.split(":", 1)[0] if ":" in text else ""
    if scheme in ("mqtt", "mqtts"):
        from federation.conventions import parse_mqtt_url

        parse_mqtt_url(text)  # ValueError names what is wrong
        return SourceSpec(text, scheme, True)
    if scheme == "follow":
        path = text[len("follow:"):]
        if not path:
            raise ValueError("follow: wants a directory, follow:DIR")
        return SourceSpec(text, "follow", True, path=Path(path))
    if scheme == "datagen":
        u = urlsplit(text)
        params = dict(parse_qsl(u.query, keep_blank_values=True))
        return SourceSpec(text, "datagen", True,
                          params={"generator": u.path, **params})
    if len(scheme) > 1 and scheme.isalpha() and "/" not in scheme:  # C:\ stays a path
        raise ValueError(f"{text!r}: no source kind {scheme!r} (kinds: a directory, "
                         "follow:DIR, mqtt://, mqtts://, datagen:smartplug, datagen:nexmark)")
    return SourceSpec(text, "dir", False, path=Path(text))


def source_identity(value) -> str:
    """How a run's identity names a stream's source: its URL, or its directory resolved."""
    s = parse_source(value)
    return s.url if s.path is None else str(s.path.resolve())


def is_url(value) -> bool:
    """True when `value` names a source kind other than a plain directory."""
    return isinstance(value, str) and parse_source(value).kind != "dir"
