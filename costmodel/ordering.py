"""Cost vectors (C_b, C_u) and the Definition-1 ordering (paper section 5, eqs 5 and 6).

Example:
    >>> a, b = CostVector(0.5, 0.9), CostVector(0.8, 0.8)
    >>> better(b, a)  # both feasible: lower C_u wins
    True
    >>> better(CostVector(0.9, 5.0), CostVector(1.2, 1.3))  # feasible beats infeasible
    True
    >>> better(CostVector(1.5, 9.0), CostVector(2.0, 2.0))  # both infeasible: lower C_b wins
    True
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=False)
class CostVector:
    """Bottleneck cost C_b = max_j u_j (eq. 5) and utilization cost C_u = sum_j u_j (eq. 6)."""

    bottleneck_cost: float
    utilization_cost: float

    @property
    def is_feasible(self) -> bool:
        """A plan keeps up with its input rate iff no operator needs more than one core."""
        return self.bottleneck_cost <= 1.0

    def combine(self, other: CostVector) -> CostVector:
        """Cost of two disjoint sets of operators together."""
        return CostVector(
            max(self.bottleneck_cost, other.bottleneck_cost),
            self.utilization_cost + other.utilization_cost,
        )

    def add(self, u: float) -> CostVector:
        """Cost with one more operator of cost u."""
        return CostVector(max(self.bottleneck_cost, u), self.utilization_cost + u)


ZERO = CostVector(0.0, 0.0)


def better(a: CostVector, b: CostVector, feasibility_check: bool = True) -> bool:
    """True iff plan cost a is strictly better than b under Definition 1.

    With the feasibility check off (paper section 8.4), plans compare by C_u alone.
    """
    return sort_key(a, feasibility_check) < sort_key(b, feasibility_check)


def sort_key(c: CostVector, feasibility_check: bool = True) -> tuple:
    """Definition 1 as a key that sorts cost vectors best first: feasible plans (C_b <= 1)
    before infeasible ones; feasible ones by C_u, then C_b; infeasible ones by C_b, then
    C_u (they reach the highest throughput first)."""
    if not feasibility_check:
        return (c.utilization_cost,)
    if c.is_feasible:
        return (0, c.utilization_cost, c.bottleneck_cost)
    return (1, c.bottleneck_cost, c.utilization_cost)
