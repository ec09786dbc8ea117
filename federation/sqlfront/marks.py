"""`IN (SELECT ...)` and `EXISTS (...)` as values: under OR or NOT in WHERE and HAVING
(`WHERE value > 100 OR plug_id IN (SELECT ...)`), in a SELECT item (`plug_id IN (SELECT
...) AS watched`), and a condition of one side in an outer join's ON (outer_on.py).

Each such test becomes a hidden BOOLEAN column of the outer rows, a mark: the rows numbered
(a row id), a copy of them kept where the test holds (as WHERE keeps rows: subqueries.py,
correlated.py), its ids LEFT-joined back, TRUE where one came back. A test under AND and
OR alone from the top of a WHERE's condition (a positive place) needs that one mark: a
row is kept where the condition is TRUE, and a test that is NULL there can be FALSE
without changing which rows are (Kleene's logic is monotone). Elsewhere (under NOT, in
CASE, in a SELECT item) a NULL must stay NULL: EXISTS is never NULL (one mark), `x IN
(...)` is TRUE where `x IN` keeps the row, FALSE where `x NOT IN` does, NULL else (two
marks, SQL's three-valued rule). The marks of one condition share one numbering.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from federation.logical import Relation
from federation.logical.names import name_maker
from federation.sqlfront.correlated import refuse_tables
from federation.sqlfront.dialect import SqlText
from federation.sqlfront.rewrites import quantified, simpler
from federation.sqlfront.scopes import Scope

#: keeps a scope's rows that meet a condition (scalars.filter_by, which calls this module)
Keep = Callable[..., None]


def is_test(n: exp.Expression) -> bool:
    """`n` is an EXISTS, an IN over a subquery, or a comparison with ANY or ALL of one."""
    return isinstance(n, exp.Exists) or quantified(n) or isinstance(n, exp.In) and n.args.get(
        "query") is not None


def marked_tests(text: SqlText, e: exp.Expression, scope: Scope, translate, clause: str,
                    keeps: bool, keep: Keep) -> exp.Expression:
    """`e` with each IN and EXISTS over a subquery in it replaced by its mark, a hidden
    column of `scope.node` (module doc); `keeps`: `e` is a condition whose TRUE rows are
    kept (WHERE, HAVING), not a value; `keep`: scalars.filter_by."""
    for n in list(e.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Select)))):
        value = simpler(n)  # in place: a SELECT item is changed where it stands
        if value is not n and n is e:
            e = value
        elif value is not n:
            n.replace(value)
    atoms = [n for n in e.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Select)))
             if is_test(n)]
    if not atoms:
        return e
    tests, plans = [], []
    for atom in atoms:
        head = _head(atom, e)
        if keeps and _positive(head, e):
            plans.append((head, len(tests), None))
            tests.append(head)
        elif isinstance(atom, exp.Exists):
            plans.append((atom, len(tests), None))
            tests.append(atom)
        else:
            plans.append((atom, len(tests), len(tests) + 1))
            tests += [atom, exp.Not(this=atom.copy())]
    flags = met(text, [t.copy() for t in tests], scope, translate, clause, e, keep)
    for node, t, f in plans:
        value = exp.column(flags[t]) if f is None else exp.case().when(
            exp.column(flags[t]), exp.true()).when(exp.column(flags[f]), exp.false())
        if node is e:
            return value
        node.replace(value)
    return e


def _head(atom: exp.Expression, top: exp.Expression) -> exp.Expression:
    """The NOT over `atom` (through parentheses) inside `top`, else `atom`."""
    n = atom
    while n is not top and isinstance(n.parent, exp.Paren):
        n = n.parent
    return n.parent if n is not top and isinstance(n.parent, exp.Not) else atom


def _positive(head: exp.Expression, top: exp.Expression) -> bool:
    """Only AND, OR and parentheses stand between `head` and `top` (module doc)."""
    n = head
    while n is not top:
        n = n.parent
        if not isinstance(n, (exp.And, exp.Or, exp.Paren)):
            return False
    return True


def met(text: SqlText, tests: list[exp.Expression], side: Scope, translate, clause: str,
        at: exp.Expression, keep: Keep, names: list[str] | None = None) -> list[str]:
    """Add to `side.node` a BOOLEAN column per test in `tests` (conditions with
    subqueries), TRUE where its row meets it as `keep` (WHERE's scalars.filter_by) keeps
    rows, else FALSE (module doc); their names (`names`, else fresh ones)."""
    refuse_tables(text, side.node, clause, at)
    cols, node = list(side.node.schema), side.node
    fresh = name_maker([*cols, *(names or [])])
    names = names or [fresh("_met") for _ in tests]
    rid = fresh("_met_row")
    numbered = text.build(clause, at, lambda: Relation(node).row_ids(rid).node)
    out = Relation(numbered)
    for i, (t, flag) in enumerate(zip(tests, names)):
        kept = Scope(text, numbered, side.aliases, side.instants, side.using)
        keep(text, t, kept, translate, clause, t)
        got, hit = fresh("_met_id"), fresh("_met_hit")
        ids = Relation(kept.node).project(**{got: exp.column(rid), hit: exp.true()})
        before = out
        out = text.build(clause, at, lambda b=before, i=i, ids=ids, got=got, hit=hit, flag=flag:
                         b.join(ids, on=[(rid, got)], how="left").project(
                             *cols, *names[:i], rid,
                             **{flag: exp.Not(this=exp.column(hit).is_(exp.null()))}))
    done = out
    side.node = text.build(clause, at, lambda: done.project(*cols, *names).node)
    return names
