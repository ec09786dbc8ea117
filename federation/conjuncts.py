"""A predicate as its conjuncts, and conjuncts as one predicate."""

from __future__ import annotations

from sqlglot import exp


def split_conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """Split `a AND b AND c` into its conjuncts."""
    if isinstance(e, exp.Paren):
        return split_conjuncts(e.this)
    if isinstance(e, exp.And):
        return split_conjuncts(e.left) + split_conjuncts(e.right)
    return [e]


def conjoin(parts: list[exp.Expression]) -> exp.Expression:
    """Join predicates with AND."""
    out = parts[0].copy()
    for p in parts[1:]:
        out = exp.and_(out, p.copy())
    return out
