"""Read only the columns a query uses: each stream's windows narrowed to them.

A window holds every column of its stream, and whatever the windows hold is read,
validated and spooled by the ingest and carried by both engines. Most queries name a few:
Nexmark's q5 reads a bid's `auction` and `dateTime`, not its 70-byte `extra` or 60-byte
`url`. `narrow_streams` walks the plan top-down with the columns each operator needs
(a result needs all of its columns; a selection adds its predicate's, a projection and an
aggregate need what their expressions read, a join its keys) and gives every window of a
stream the stream's declaration narrowed to the union over all its windows, the event
time always kept, so every window of one stream (and the ingest, which reads a stream's
declaration from its windows) agrees. The query's rows do not change: the columns left
out are read by no operator. A stream read by a tuple window keeps every column (ties in
event time are broken by all of them). Consequence for input checks: a row whose bad value
sits in a column the query never reads is no longer dead-lettered.
"""

from __future__ import annotations

import dataclasses

from federation.conventions import Lowering
from federation.expressions import referenced_columns
from federation.logical import Node
from federation.streams import StreamDecl

#: the columns each plan node class needs of each input, given those wanted of it: a
#: function (node, wanted, narrowing) that visits its inputs (`narrowing.visit`); a window
#: records what its stream must keep
READS = Lowering("column narrowing", ("operator", "leaf", "root"))


class _Narrowing:
    def __init__(self) -> None:
        self.needed: dict[str, set[str]] = {}
        self.whole: set[str] = set()  # streams that keep every column

    def visit(self, node: Node, want: set[str]) -> None:
        READS(node, want, self)


@READS.register("TimeWindow", "TupleWindow", "SessionWindow")
def _window(node, want: set[str], n: _Narrowing) -> None:
    s = node.stream
    if not node.is_time_based:
        n.whole.add(s.name)
    where = node.where  # a tuple or session window's own selection
    made = dict(node.computed_keys)  # keys computed of the stream's columns
    n.needed.setdefault(s.name, set()).update(
        want & set(s.columns), {s.ts_column}, set(node.partition_by) - set(made),
        *(referenced_columns(e) for e in made.values()),
        referenced_columns(where) if where else ())


@READS.register("Table")
def _table(node, want: set[str], n: _Narrowing) -> None:
    return None


@READS.register("Rstream", "QuerySet")
def _root(node, want: set[str], n: _Narrowing) -> None:
    for c in node.children:
        n.visit(c, set(c.schema))


@READS.register("Select")
def _select(node, want: set[str], n: _Narrowing) -> None:
    n.visit(node.child, want | referenced_columns(node.predicate))


@READS.register("Project")
def _project(node, want: set[str], n: _Narrowing) -> None:
    refs: set[str] = set()
    for _, e in node.outputs:
        refs |= referenced_columns(e)
    n.visit(node.child, refs)


@READS.register("Aggregate")
def _aggregate(node, want: set[str], n: _Narrowing) -> None:
    refs = set(node.keys)
    for _, call in node.aggs:
        if call.arg is not None:
            refs |= referenced_columns(call.arg)
    n.visit(node.child, refs)


@READS.register("RowNumber")
def _row_number(node, want: set[str], n: _Narrowing) -> None:
    """Every column: the numbering breaks ties by all of them (RowNumber.sort_keys)."""
    n.visit(node.child, set(node.child.schema))


@READS.register("Union")
def _union(node, want: set[str], n: _Narrowing) -> None:
    """Every column of both sides: their schemas must stay equal (a side of window rows
    would lose the columns nobody reads, the other side's projection would not)."""
    for side in node.children:
        n.visit(side, set(side.schema))


@READS.register("Join")
def _join(node, want: set[str], n: _Narrowing) -> None:
    n.visit(node.left, (want & set(node.left.schema)) | {lk for lk, _ in node.keys})
    n.visit(node.right, (want & set(node.right.schema)) | {rk for _, rk in node.keys})


def narrow_streams(root: Node) -> Node:
    """`root` with each stream's windows narrowed to the columns the plan reads (module
    doc); the same plan when nothing is left out."""
    n = _Narrowing()
    n.visit(root, set(root.schema))
    needed, whole = n.needed, n.whole
    narrowed = {name: cols for name, cols in needed.items() if name not in whole}
    if not narrowed:
        return root
    decls: dict[str, StreamDecl] = {}

    def rule(node: Node) -> Node:
        if node.kind != "window" or node.stream.name not in narrowed:  # type: ignore[attr-defined]
            return node
        s = node.stream  # type: ignore[attr-defined]
        keep = narrowed[s.name]
        if set(s.columns) <= keep:
            return node
        if s.name not in decls:
            decls[s.name] = narrow_decl(s, keep)
        return dataclasses.replace(node, stream=decls[s.name])

    return root.transform(rule)


def narrow_decl(s: StreamDecl, keep: set[str]) -> StreamDecl:
    """The declaration of `s` with only the columns `keep` (in the stream's order), its
    statistics and domains of those columns."""
    st = s.stats
    stats = st.model_copy(update={
        "distinct": {c: n for c, n in st.distinct.items() if c in keep},
        "groups": {k: n for k, n in st.groups.items() if set(k.split(",")) <= keep},
        "value_fractions": {c: v for c, v in st.value_fractions.items() if c in keep},
    })
    return s.model_copy(update={
        "schema_": {c: t for c, t in s.columns.items() if c in keep},
        "stats": stats,
        "domains": {c: v for c, v in s.domains.items() if c in keep},
        "declared": s.all_columns,
    })
