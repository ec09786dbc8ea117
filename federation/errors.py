"""Errors raised when a query is built, optimized or run."""

from __future__ import annotations


class FedqError(Exception):
    """Base class of every error this engine raises on purpose."""


class QueryValidationError(FedqError, ValueError):
    """A query is malformed; the message names the operator and the field.

    Example:
        >>> str(QueryValidationError("select", "predicate", "unknown column 'x'"))
        "select: predicate: unknown column 'x'"
    """

    def __init__(self, operator: str, field: str, message: str) -> None:
        self.operator = operator
        self.field = field
        self.message = message
        super().__init__(f"{operator}: {field}: {message}")


class UnsupportedOperationError(FedqError, NotImplementedError):
    """An engine cannot execute a plan node in the form it was given."""


class PlacementError(FedqError, ValueError):
    """An explicit placement names an unknown operator or engine."""


class OptionError(FedqError, ValueError):
    """A run option is out of range; `option` names it as the API spells it (the CLI maps it
    to its flag, federation/cli/run.py).

    Example:
        >>> e = OptionError("seconds_per_batch", "must be a whole number >= 1, got 0")
        >>> e.option, str(e)
        ('seconds_per_batch', 'seconds_per_batch: must be a whole number >= 1, got 0')
    """

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        self.message = message
        super().__init__(f"{option}: {message}")


class OutputError(OptionError):
    """The results cannot be written where asked (option `output`, checked before any work
    starts)."""

    def __init__(self, message: str) -> None:
        super().__init__("output", message)


class RunFailed(FedqError):
    """A run stopped on an error around it after it started (a full disk, a sink that
    fails, an input that cannot be read): the message names the cause, the micro-batch
    that was not committed, and how to go on. The work directory is left as a crash
    leaves it, so the same command resumes once the cause is mended
    (federation/runtime/recovery.py).

    Example:
        >>> e = RunFailed("the sink of CQ1 (Parquet directory out) failed: disk full",
        ...               work="w", at="stage 0, micro-batch 5")
        >>> print(e)
        stage 0, micro-batch 5: the sink of CQ1 (Parquet directory out) failed: disk full; \
nothing after the last committed micro-batch is kept: once that is mended, the same command \
resumes from w
    """

    def __init__(self, cause: str, work: object = None, at: str | None = None) -> None:
        self.cause, self.work, self.at = cause, work, at
        tail = "" if work is None else (
            "; nothing after the last committed micro-batch is kept: once that is mended, the "
            f"same command resumes from {work}")
        super().__init__(f"{at}: {cause}{tail}" if at else f"{cause}{tail}")


class SinkFailed(FedqError):
    """A sink could not take a query's rows: names the query, the sink and the cause."""
