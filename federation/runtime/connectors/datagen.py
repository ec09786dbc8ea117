"""A generator as a live source: `datagen:smartplug?rate=..&plugs=..` and
`datagen:nexmark?rate=..` emit event second `s` of the generator once `s / speed` wall
seconds have passed since the run started (as Flink's `datagen` and RisingWave's `nexmark`
connectors), so a live demo or benchmark needs no producer process.

Parameters (all optional): `rate` (smartplug: readings per second, default 2000; nexmark:
events per second over its three streams, default 1000), `seed` (0), `speed` (1.0: real
time; 10: ten event seconds per wall second), `burst` (event seconds written at once at
the start, a backlog that fills the windows; 0), `seconds` (a bounded source: its input
ends after that many event seconds, and the run ends once every stream's has; default
unbounded); smartplug also `plugs`, `houses` and `profile` (a rate that changes:
`profile=2000:60,150000:60` is 60 event seconds at 2,000 readings/s, then 60 at 150,000, and
again from the start; `rate` is then the profile's mean, for planning); nexmark
`stream` (person, auction or bid; default the stream's name).

Event time starts at `start` (an ISO time, UTC unless it has a zone), by default at the
run's start (`SourceContext.start`, whole seconds, the same for every stream of the run,
kept across resumes). Each event second is a landing file
`part-<s:08d>.parquet`; a resumed run goes on at the first second not landed (the
generators are deterministic: a second written again is the same file)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from federation.errors import OptionError
from federation.parts import arrow_schema, list_parts, write_part
from federation.streams import StreamDecl

GENERATORS = ("smartplug", "nexmark")
_INTS = ("seed", "burst", "seconds", "plugs", "houses")  # the others are floats
_COMMON = {"rate", "seed", "speed", "burst", "seconds", "start"}
_TAKES = {"smartplug": {*_COMMON, "plugs", "houses", "profile"},
          "nexmark": {*_COMMON, "stream"}}


def params_of(spec) -> dict:
    """The generator's parameters, checked: OptionError("data") names the bad one."""
    p = dict(spec.params)
    gen = p.pop("generator", "")
    if gen not in GENERATORS:
        raise OptionError("data", f"{spec.url}: no generator {gen!r} (datagen:smartplug or "
                                  "datagen:nexmark)")
    known = _TAKES[gen]
    out: dict = {"generator": gen}
    for k, v in p.items():
        if k not in known:
            raise OptionError("data", f"{spec.url}: datagen:{gen} takes no {k!r} (it takes "
                                      f"{', '.join(sorted(known))})")
        try:
            out[k] = v if k == "stream" else datetime.fromisoformat(v) if k == "start" else (
                _profile(v) if k == "profile" else int(v) if k in _INTS else float(v))
        except ValueError:
            what = {"start": "a time", "profile": "phases RATE:SECONDS,... (each > 0)"}
            raise OptionError("data", f"{spec.url}: {k}={v!r} is not "
                                      f"{what.get(k, 'a number')}") from None
        if k not in ("stream", "start", "seed", "burst", "profile") and not out[k] > 0:
            raise OptionError("data", f"{spec.url}: {k} must be > 0, got {v}")
    return out


def _profile(text: str) -> list[tuple[int, int]]:
    """`profile=RATE:SECONDS,...` as [(readings per second, event seconds)]."""
    out = [tuple(int(float(x)) for x in phase.split(":")) for phase in text.split(",")]
    if not out or any(len(p) != 2 or p[0] < 1 or p[1] < 1 for p in out):
        raise ValueError(text)
    return out


def rows_at(profile: list[tuple[int, int]], s: int) -> int:
    """The readings of event second `s` under a rate profile (it repeats)."""
    s %= sum(n for _, n in profile)
    for rate, n in profile:
        if s < n:
            return rate
        s -= n
    raise AssertionError("unreachable")


def profile_rate_of(prof: list[tuple[int, int]]) -> float:
    return sum(r * n for r, n in prof) / sum(n for _, n in prof)


def profile_rate(spec) -> float | None:
    """The mean rate of a generator's `profile`, if it has a valid one."""
    try:
        prof = _profile(spec.params["profile"])
    except (KeyError, ValueError):
        return None
    return profile_rate_of(prof)


def rate_and_plugs(spec) -> tuple[float | None, int | None]:
    """The `rate` and `plugs` a generator's URL gives, for planning (None: not given, or
    not a number: the source's own check names it when it opens)."""
    out = []
    for key, kind in (("rate", float), ("plugs", int)):
        try:
            out.append(profile_rate(spec) if key == "rate" and "profile" in spec.params
                       else None if key not in spec.params else kind(spec.params[key]))
        except ValueError:
            out.append(None)
    return out[0], out[1]


def declares(spec, name: str) -> StreamDecl | None:
    """The stream a generator declares: the smart-plug stream at its rate, a Nexmark
    stream (named `name`, or the `stream` parameter)."""
    p = params_of(spec)
    if p["generator"] == "smartplug":
        from federation.smartplug import DEFAULT_PLUGS, smartplug_stream

        rate = profile_rate(spec) or p.get("rate", 2000.0)
        return smartplug_stream(rate=rate, plugs=p.get("plugs", DEFAULT_PLUGS),
                                houses=p.get("houses", 40), name=name)
    from federation.nexmark import nexmark_streams

    streams = nexmark_streams(p.get("rate", 1000.0))
    decl = streams.get(p.get("stream", name))
    return None if decl is None else decl.model_copy(update={"name": name})


def open_source(spec, landing: Path, stream: StreamDecl, ctx) -> DatagenFeeder:
    return DatagenFeeder(spec, landing, stream, ctx.start).start()


class DatagenFeeder:
    """Writes the generator's event seconds into `landing` at its pace (module doc) until
    `stop()`; `.error` is the failure of its thread, else None; `.seconds` written."""

    def __init__(self, spec, landing: Path, stream: StreamDecl, start: datetime) -> None:
        self.p = params_of(spec)
        self.url, self.dir, self.stream = spec.url, Path(landing), stream
        start = self.p.get("start", start)
        if start.tzinfo is not None:
            start = start.astimezone(timezone.utc).replace(tzinfo=None)
        self.start_ts = start.replace(microsecond=0)
        self.error: BaseException | None = None
        self.seconds = 0
        self.finished = threading.Event()  # a bounded one (`seconds`) wrote its last second
        self._halt = threading.Event()
        self._second = self._generator()
        want = [(f.name, str(f.type)) for f in arrow_schema(stream.all_columns)]
        got = [(f.name, str(f.type)) for f in self._second(0, dry=True).schema]
        if want != got:
            raise OptionError("data", f"{stream.name}={spec.url}: the generator's columns "
                                      f"{got} are not the stream's {want}")
        self._thread = threading.Thread(target=self._main, name="fedq-datagen", daemon=True)

    def _generator(self):
        p, gen = self.p, self.p["generator"]
        if gen == "nexmark":
            from federation.nexmark import TOTAL_PROPORTION
            from federation.nexmark.datagen import Events

            rate = round(p.get("rate", 1000.0))
            if rate < TOTAL_PROPORTION:
                raise OptionError("data", f"{self.url}: rate: at least {TOTAL_PROPORTION} "
                                          f"events per second (one person in every "
                                          f"{TOTAL_PROPORTION})")
            events = Events(rate, p.get("seed", 0), self.start_ts)
            which = p.get("stream", self.stream.name)
            if which not in ("person", "auction", "bid"):
                raise OptionError("data", f"{self.url}: no Nexmark stream {which!r} (person, "
                                          "auction or bid: the stream's name or stream=)")
            return lambda s, dry=False: events.second(s, only=which)[which]
        from federation.smartplug.plugs import _PlugModel

        prof = p.get("profile")

        def fresh():
            return _PlugModel(rate=profile_rate_of(prof) if prof else p.get("rate", 2000.0), houses=p.get("houses", 40),
                              plugs=p.get("plugs"), seed=p.get("seed", 0), start=self.start_ts)

        state = {"model": fresh(), "next": 0}

        def second(s: int, dry: bool = False):
            if dry:  # the schema only: a throwaway model
                return fresh().second(0)
            if s < state["next"]:
                state["model"], state["next"] = fresh(), 0
            while state["next"] < s:  # the model is sequential: catch up (a resumed run)
                state["model"].second(state["next"], None if prof is None
                                      else rows_at(prof, state["next"]))
                state["next"] += 1
            state["next"] += 1
            return state["model"].second(s, None if prof is None else rows_at(prof, s))

        return second

    def start(self) -> DatagenFeeder:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()

    def _main(self) -> None:
        try:
            self._emit()
        except BaseException as e:  # noqa: BLE001 - handed to the run via .error
            self.error = e

    def _emit(self) -> None:
        p = self.p
        s0 = s = len(list_parts(self.dir))  # a resumed run goes on after what landed
        t0, speed, burst = time.monotonic(), p.get("speed", 1.0), p.get("burst", 0)
        end = p.get("seconds")
        while not self._halt.is_set() and (end is None or s < end):
            due = t0 + max(0, s - max(s0, burst) + 1) / speed
            if self._halt.wait(max(0.0, due - time.monotonic())):
                return
            # a second without readings of this stream (a few persons a second) lands an
            # empty file all the same: the position is the number of files
            write_part(self.dir / f"part-{s:08d}.parquet", self._second(s), time.time())
            s += 1
            self.seconds += 1
        if end is not None and s >= end:
            self.finished.set()
