"""Argument types of `fedq`: one-line errors that name the option (argparse shows them)."""

from __future__ import annotations

import argparse
import math


def _number(text: str, low: float, inclusive: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < low or (v == low and not inclusive):
        raise argparse.ArgumentTypeError(
            f"must be a finite number {'>=' if inclusive else '>'} {low:g}, got {text!r}")
    return v


def positive(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    return _number(text, 0.0, inclusive=False)


def non_negative(text: str) -> float:
    """A finite number >= 0 (argparse type)."""
    return _number(text, 0.0, inclusive=True)


def count(text: str) -> int:
    """A whole number >= 1 (argparse type)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def rates(text: str) -> list[float]:
    """'1000:40000:1000' (start:stop:step, inclusive) or '1000,2000'; each rate > 0.

    Example:
        >>> rates("1000:3000:1000")
        [1000.0, 2000.0, 3000.0]
    """
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(
                f"bad sweep {text!r}: want start:stop:step (e.g. 1000:40000:1000)")
        a, b, s = (positive(x) for x in parts)
        if b < a:
            raise argparse.ArgumentTypeError(f"bad sweep {text!r}: stop is below start")
        if (b - a) / s > 10_000:
            raise argparse.ArgumentTypeError(f"bad sweep {text!r}: more than 10,000 rates")
        out, x = [], a
        while x <= b + 1e-9:
            out.append(x)
            x += s
        return out
    return [positive(x) for x in text.split(",") if x.strip()]


def sweep_text(text: str) -> str:
    rates(text)  # validated when the arguments are read
    return text


def query_maker(name: str):
    from federation.smartplug.queries import QUERIES

    key = name.upper()
    if key not in QUERIES:
        raise SystemExit(f"fedq: unknown query {name!r}; choose one of {', '.join(QUERIES)}")
    return QUERIES[key]
