"""The S2R window at a leaf of a query: time-based (range, slide) or tuple-based (rows,
slide) over a named stream."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from federation.errors import QueryValidationError
from federation.logical.nodes import Node
from federation.streams import StreamDecl


@dataclass(frozen=True, eq=True)
class Window(Node):
    """S2R window over a named stream: time-based (range, slide) or tuple-based (rows, slide)."""

    stream: StreamDecl
    slide_s: float
    range_s: float | None = None
    rows: int | None = None
    partition_by: tuple[str, ...] = ()
    kind = "window"

    def __post_init__(self) -> None:
        if not isinstance(self.stream, StreamDecl):
            what = getattr(self.stream, "kind", type(self.stream).__name__)
            raise QueryValidationError(
                "window", "input", f"a window must read a stream at a leaf, not a {what}"
            )
        if self.slide_s <= 0:
            raise QueryValidationError("window", "slide", f"must be positive, got {self.slide_s}")
        if (self.range_s is None) == (self.rows is None):
            raise QueryValidationError("window", "range", "give exactly one of range or rows")
        if self.range_s is not None:
            if self.range_s <= 0:
                raise QueryValidationError(
                    "window", "range", f"must be positive, got {self.range_s}"
                )
            if self.slide_s > self.range_s:
                raise QueryValidationError(
                    "window", "slide",
                    f"slide {self.slide_s:g} s is larger than range {self.range_s:g} s",
                )
        if self.rows is not None and self.rows <= 0:
            raise QueryValidationError("window", "rows", f"must be positive, got {self.rows}")
        for k in self.partition_by:
            if k not in self.stream.columns:
                raise QueryValidationError(
                    "window", "partition_by", f"unknown column {k!r} of stream {self.stream.name!r}"
                )

    @cached_property
    def schema(self) -> dict[str, str]:
        return self.stream.columns

    @property
    def is_time_based(self) -> bool:
        return self.range_s is not None

    def label(self) -> str:
        if self.is_time_based:
            return f"window {self.stream.name} [range {self.range_s:g} s, slide {self.slide_s:g} s]"
        part = f" partition by {', '.join(self.partition_by)}" if self.partition_by else ""
        return f"window {self.stream.name} [rows {self.rows}{part}, slide {self.slide_s:g} s]"
