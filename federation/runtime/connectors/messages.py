"""What any message source needs, whatever its broker: a message's payload parsed into
readings, and readings into a landing column of the stream's type (the formats:
federation/runtime/connectors/mqtt.py's module doc)."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime, timezone

import pyarrow as pa

from federation.parts import arrow_type


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
