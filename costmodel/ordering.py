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
    """The cost vector (C_b, C_u) of a plan.

    C_b: the bottleneck cost, max_j u_j over the plan's operators (eq. 5).
    C_u: the total utilization cost, sum_j u_j over the plan's operators (eq. 6).
    """

    C_b: float
    C_u: float

    @property
    def is_feasible(self) -> bool:
        """A plan keeps up with its input rate iff no operator needs more than one core."""
        return self.C_b <= 1.0

    def combine(self, other: CostVector) -> CostVector:
        """Cost of two disjoint sets of operators together."""
        return CostVector(
            max(self.C_b, other.C_b),
            self.C_u + other.C_u,
        )

    def add(self, u: float) -> CostVector:
        """Cost with one more operator of cost u."""
        return CostVector(max(self.C_b, u), self.C_u + u)


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
        return (c.C_u,)
    if c.is_feasible:
        return (0, c.C_u, c.C_b)
    return (1, c.C_b, c.C_u)
