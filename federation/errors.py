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
