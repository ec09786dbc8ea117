"""The random fields of Nexmark events, vectorised over event numbers.

Every value of event `n` is a pure function of (seed, n, field): `uniform(seed, n, field)`
hashes the three with SplitMix64, so an event is the same whatever chunk, order or rate
of generation produced it (the role of Beam's `new Random(eventId)` per event). The
distributions are Beam's (`nextPrice`, `nextString`, `nextExtra`, the name, email, card,
city and state lists); strings are cut from a random base text of the right alphabet at a
hashed offset, which keeps them vectorised.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
US_CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
             "Redmond", "Seattle", "Kent", "Cheyenne"]
FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris"]
HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
CHANNELS = 10_000
_BASE_LEN = 1 << 20
_M = np.uint64((1 << 64) - 1)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over uint64 values."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def uniform(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """A uniform double in [0, 1) per event number `n` for `field` (< 256)."""
    key = _mix(np.array([seed & ((1 << 64) - 1)], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        x = (n.astype(np.uint64) << np.uint64(8)) + np.uint64(field)
    return (_mix(x ^ key) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)


def below(seed: int, n: np.ndarray, field: int, bound) -> np.ndarray:
    """A whole number in [0, bound) per event (bound a number or an array)."""
    return np.floor(uniform(seed, n, field) * bound).astype(np.int64)


def price(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """Beam's nextPrice: round(10 ** (6 u) * 100), cents from 100 to 10^8."""
    return np.floor(10.0 ** (uniform(seed, n, field) * 6.0) * 100.0 + 0.5).astype(np.int64)


class Texts:
    """Random base texts of one seed: letters with a space in 13 (Beam's nextString) and
    letters alone (its nextExactString, the `extra` padding)."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng([seed, 0x4E58])
        letters = rng.integers(ord("a"), ord("z") + 1, size=_BASE_LEN, dtype=np.uint8)
        self.exact = letters
        self.spaced = np.where(rng.integers(0, 13, size=_BASE_LEN) == 0, np.uint8(ord(" ")),
                               letters)
        self.under = np.where(self.spaced == ord(" "), np.uint8(ord("_")), self.spaced)
        self.seed = seed

    def cut(self, base: np.ndarray, n: np.ndarray, field: int, lengths: np.ndarray
            ) -> pa.Array:
        """One string per event: `lengths` characters of `base` from a hashed offset."""
        lengths = np.asarray(lengths, dtype=np.int64)
        start = below(self.seed, n, field, _BASE_LEN - int(lengths.max(initial=0)) - 1)
        ends = np.cumsum(lengths)
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        total = int(ends[-1]) if len(ends) else 0
        idx = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1] - start, lengths)
        data = base[idx]
        return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets),
                                           pa.py_buffer(data.tobytes()))

    def string(self, n: np.ndarray, field: int, max_length: int) -> pa.Array:
        """Beam's nextString: 3 to max_length - 1 characters, spaces trimmed."""
        lengths = 3 + below(self.seed, n, field, max_length - 3)
        return pc.utf8_trim(self.cut(self.spaced, n, field + 1, lengths), " ")

    def extra(self, n: np.ndarray, field: int, current: np.ndarray, average: int
              ) -> pa.Array:
        """Beam's nextExtra: padding to about `average` bytes (within 20 %), none when the
        event is already that large."""
        want = np.maximum(average - np.asarray(current, dtype=np.int64), 0)
        delta = np.floor(want * 0.2 + 0.5).astype(np.int64)
        size = want - delta + np.floor(uniform(self.seed, n, field) * 2 * delta).astype(np.int64)
        size = np.where(np.asarray(current) > average, 0, size)
        return self.cut(self.exact, n, field + 1, size)


def take(values: list[str], idx: np.ndarray) -> pa.Array:
    return pa.array(values, pa.string()).take(pa.array(idx))


def channels(seed: int) -> tuple[list[str], list[str]]:
    """Channel names and their URLs: 10,000 channels `channel-<c>`, then the 4 hot ones
    (Flink's Nexmark generator; a channel's URL carries `&channel_id=` 9 times in 10)."""
    rng = np.random.default_rng([seed, 0xC4A2])

    def part() -> str:
        k = int(rng.integers(3, 5))
        return "".join(chr(c) if rng.integers(13) else "_"
                       for c in rng.integers(ord("a"), ord("z") + 1, size=k))

    def url() -> str:
        return f"https://www.nexmark.com/{part()}/{part()}/{part()}/item.htm?query=1"

    names = [f"channel-{c}" for c in range(CHANNELS)] + HOT_CHANNELS
    urls = []
    for c in range(CHANNELS):
        u = url()
        if rng.integers(10):
            rev = int(f"{c:032b}"[::-1], 2)
            u += f"&channel_id={abs(rev - (1 << 32) if rev >= 1 << 31 else rev)}"
        urls.append(u)
    urls += [url() for _ in HOT_CHANNELS]
    return names, urls
