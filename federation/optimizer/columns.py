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

from federation.expressions import referenced_columns
from federation.logical import Node
from federation.streams import StreamDecl


def narrow_streams(root: Node) -> Node:
    """`root` with each stream's windows narrowed to the columns the plan reads (module
    doc); the same plan when nothing is left out."""
    needed: dict[str, set[str]] = {}
    whole: set[str] = set()  # streams that keep every column

    def visit(node: Node, want: set[str]) -> None:
        kind = node.kind
        if kind == "window":
            s = node.stream  # type: ignore[attr-defined]
            if not node.is_time_based:  # type: ignore[attr-defined]
                whole.add(s.name)
            needed.setdefault(s.name, set()).update(want & set(s.columns), {s.ts_column})
            return
        if kind == "table":
            return
        if kind in ("rstream", "queries"):
            for c in node.children:
                visit(c, set(c.schema))
            return
        if kind == "select":
            c = node.children[0]
            visit(c, want | referenced_columns(node.predicate))  # type: ignore[attr-defined]
            return
        if kind == "project":
            refs: set[str] = set()
            for _, e in node.outputs:  # type: ignore[attr-defined]
                refs |= referenced_columns(e)
            visit(node.children[0], refs)
            return
        if kind == "aggregate":
            refs = set(node.keys)  # type: ignore[attr-defined]
            for _, call in node.aggs:  # type: ignore[attr-defined]
                if call.arg is not None:
                    refs |= referenced_columns(call.arg)
            visit(node.children[0], refs)
            return
        if kind == "join":
            left, right = node.children
            keys = node.keys  # type: ignore[attr-defined]
            visit(left, (want & set(left.schema)) | {lk for lk, _ in keys})
            visit(right, (want & set(right.schema)) | {rk for _, rk in keys})
            return
        for c in node.children:  # an operator this pass does not know: every column
            visit(c, set(c.schema))

    visit(root, set(root.schema))
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
