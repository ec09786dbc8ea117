"""Phase-One rule: drop the column-order projections that join ordering added where
another projection names the columns anyway."""

from __future__ import annotations

from federation.logical import Node, Project


def is_reorder(node: Node) -> bool:
    return isinstance(node, Project) and all(
        e.key == "column" and e.name == n for n, e in node.outputs)


def drop_reorders(node: Node) -> Node:
    """A column-order projection that join ordering added under another projection is
    redundant: the outer projection names its columns anyway."""
    return node.transform(lambda n: n.with_children(n.child.child)
                          if isinstance(n, Project) and is_reorder(n.child) else n)
