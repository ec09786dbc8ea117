"""Stream declarations and their statistics (pydantic models at the edge)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from federation.conventions import TYPES


class StreamStats(BaseModel):
    """Statistics of one stream that drive the source-driven sizes (eqs 1-3).

    Example:
        >>> StreamStats(rate_tps=2000, distinct={"plug_id": 10}).rate_tps
        2000.0
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate_tps: float = Field(gt=0, description="arrival rate in tuples per second")
    distinct: dict[str, int] = Field(
        default_factory=dict, description="number of distinct values per column"
    )
    groups: dict[str, int] = Field(
        default_factory=dict,
        description="number of distinct combinations of a key set, keyed 'a,b,c' (sorted names)",
    )
    value_fractions: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="fraction of tuples per value of a column (value distribution)",
    )
    selectivities: dict[str, float] = Field(
        default_factory=dict,
        description="selectivity of a predicate, keyed by its SQL text",
    )

    @field_validator("distinct", "groups")
    @classmethod
    def _positive_counts(cls, v: dict[str, int]) -> dict[str, int]:
        for k, n in v.items():
            if n <= 0:
                raise ValueError(f"count for {k!r} must be positive, got {n}")
        return v

    @field_validator("selectivities")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        for k, f in v.items():
            if not 0 <= f <= 1:
                raise ValueError(f"selectivity of {k!r} must be in [0, 1], got {f}")
        return v


class StreamDecl(BaseModel):
    """A named sensor stream: its schema, event-time column and statistics."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    schema_: dict[str, str] = Field(alias="schema", description="column name -> SQL type")
    ts_column: str = "ts"
    stats: StreamStats
    domains: dict[str, list] = Field(
        default_factory=dict,
        description="allowed values of coded columns; other values are dead-lettered at ingest",
    )
    declared: dict[str, str] | None = Field(
        default=None,
        description="the stream's whole schema, when a query reads only some of its columns "
                    "(schema): what a message or a file of the stream carries",
    )

    @field_validator("schema_")
    @classmethod
    def _types(cls, v: dict[str, str]) -> dict[str, str]:
        out = {}
        for col, typ in v.items():
            t = typ.upper()
            if t not in TYPES:
                raise ValueError(f"column {col!r}: unsupported type {typ!r} "
                                 f"(one of {', '.join(TYPES)})")
            out[col] = t
        return out

    @model_validator(mode="after")
    def _ts_present(self) -> StreamDecl:
        if self.schema_.get(self.ts_column) != "TIMESTAMP":
            raise ValueError(f"ts_column {self.ts_column!r} must be a TIMESTAMP column of schema")
        for col in list(self.stats.distinct):
            if col not in self.schema_:
                raise ValueError(f"stats.distinct names unknown column {col!r}")
        for col in self.domains:
            if col not in self.schema_:
                raise ValueError(f"domains names unknown column {col!r}")
        return self

    @property
    def columns(self) -> dict[str, str]:
        """The schema as an ordered mapping of column name to type."""
        return dict(self.schema_)

    @property
    def all_columns(self) -> dict[str, str]:
        """Every column of the stream as declared (a narrowed one's `declared`)."""
        return dict(self.declared or self.schema_)


#: the stream declaration a data directory carries (written by `fedq import`)
STREAM_FILE = "_stream.json"


def load_stream_decl(data_dir) -> StreamDecl | None:
    """The stream a data directory declares in `_stream.json`, or None.

    A malformed declaration raises ValueError naming the file and the field."""
    from pathlib import Path

    from pydantic import ValidationError

    path = Path(data_dir) / STREAM_FILE
    if not path.is_file():
        return None
    try:
        return StreamDecl.model_validate_json(path.read_text())
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top)"
        raise ValueError(f"{path}: {where}: {first['msg']}") from None
