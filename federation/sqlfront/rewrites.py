"""Tests over subqueries in the forms the plans take: `simpler` (a test over one row as a
comparison with its value, EXISTS without its LIMIT, a correlated test over a UNION as the
tests over its branches) and `quantified` (which comparisons ANY and ALL quantify)."""

from __future__ import annotations

from sqlglot import exp

from federation.comparisons import COMPARISONS  # those `x op ANY|ALL (SELECT ...)` quantify
from federation.sqlfront.correlated import limit_of, own_aliases, select_of


def simpler(n: exp.Expression) -> exp.Expression:
    """`x [NOT] IN (SELECT MAX(y) ...)`, `x op ANY|ALL (...)` over a subquery of one row
    (aggregates without GROUP BY or HAVING) as the comparison with its value, `x = (SELECT
    MAX(y) ...)` (a value: scalars.py, correct over no row: COUNT's 0); `EXISTS (SELECT
    ... LIMIT n)`, n >= 1, as EXISTS without ORDER BY and LIMIT (one row exists where any
    does); else `n`."""
    if (split := _per_branch(n)) is not None:
        return split
    if isinstance(n, exp.Exists):
        sub = select_of(n.this)
        if not limit_of(sub) or sub.args.get("offset"):
            return n
        sub = sub.copy()
        sub.set("limit", None)
        sub.set("order", None)
        return exp.Exists(this=sub)
    if isinstance(n, exp.In) and n.args.get("query") is not None and not isinstance(
            n.this, exp.Tuple):
        op, query = exp.EQ, n.args["query"]
    elif quantified(n):
        op, query = type(n), n.expression.this
    else:
        return n
    sub = select_of(query)
    if not isinstance(sub, exp.Select) or len(sub.expressions) != 1 or any(
            sub.args.get(k) for k in ("group", "having", "limit", "order", "distinct")) or \
            sub.expressions[0].find(exp.AggFunc) is None:
        return n
    return op(this=n.this.copy(), expression=exp.Subquery(this=sub.copy()))


def _per_branch(n: exp.Expression) -> exp.Expression | None:
    """A correlated test over a UNION [ALL] as the tests over its branches: `x IN (A UNION
    B)` is `(x IN (A) OR x IN (B))`, as are EXISTS and `op ANY`; `op ALL` is their AND
    (exactly so in SQL's three-valued logic: IN is TRUE where a branch's is, NULL where
    none is TRUE and one is NULL). None where `n` is no such test; an uncorrelated one
    keeps the union's relation (subqueries.py)."""
    if isinstance(n, exp.Exists):
        query, make = n.this, lambda b: exp.Exists(this=b)
    elif isinstance(n, exp.In) and n.args.get("query") is not None:
        query, make = n.args["query"], lambda b: exp.In(this=n.this.copy(), query=b)
    elif quantified(n):
        query = n.expression.this
        make = lambda b: type(n)(this=n.this.copy(), expression=type(n.expression)(
            this=b))
    else:
        return None
    union = select_of(query)
    if not isinstance(union, exp.Union) or union.args.get("order") or union.args.get(
            "limit") or not _correlated(union):
        return None
    branches, todo = [], [union]
    while todo:
        u = select_of(todo.pop(0))
        if isinstance(u, exp.Union) and not u.args.get("order") and not u.args.get("limit"):
            todo[:0] = [u.left, u.right]
        else:
            branches.append(u)
    tests = [make(exp.Subquery(this=b.copy())) for b in branches]
    every = isinstance(n, COMPARISONS) and isinstance(n.expression, exp.All)
    return exp.paren(exp.and_(*tests) if every else exp.or_(*tests))


def _correlated(q: exp.Expression) -> bool:
    """A column in `q` is named by an alias no FROM in `q` gives (an outer one)."""
    own = set().union(*(own_aliases(x) for x in q.find_all(exp.Select)))
    return any(c.table and c.table.lower() not in own for c in q.find_all(exp.Column))


def quantified(e: exp.Expression) -> bool:
    """`e` is `x op ANY (SELECT ...)` (SOME) or `x op ALL (SELECT ...)`."""
    return isinstance(e, COMPARISONS) and isinstance(e.expression, (exp.Any, exp.All))
