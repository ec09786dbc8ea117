"""Logical plan nodes and the query DSL that builds them (docs/architecture.md).

Nodes are immutable values validated as they are built; the DSL's `Relation` (builder.py)
builds them, so a mistake fails where the query is written, with the operator and the
field named.

Example:
    >>> from federation.smartplug import smartplug_stream
    >>> from federation.expressions import max_
    >>> s = smartplug_stream(rate=2000)
    >>> w = window(s, range=300, slide=1)
    >>> load = w.filter("property = 1")
    >>> q = load.aggregate(by=["plug_id"], maxv=max_("value")).rstream("peak")
    >>> list(q.schema)
    ['plug_id', 'maxv']
"""

from federation.logical.aggregate import Aggregate
from federation.logical.builder import Relation, plan_of
from federation.logical.dsl import parse_duration, table, window
from federation.logical.join import Join
from federation.logical.membership import where_in
from federation.logical.nodes import Node, Project, Rstream, Select, Unary
from federation.logical.plan import (
    R2R_KINDS,
    NumberedPlan,
    input_key,
    is_row_level,
    leaf_window,
)
from federation.logical.queryset import QuerySet, query_set
from federation.logical.rank import RowNumber
from federation.logical.table import Table
from federation.logical.union import Union
from federation.logical.window import SessionWindow, TimeWindow, TupleWindow, Window

__all__ = [
    "R2R_KINDS",
    "Aggregate",
    "Join",
    "Node",
    "NumberedPlan",
    "Project",
    "QuerySet",
    "Relation",
    "RowNumber",
    "Rstream",
    "Select",
    "SessionWindow",
    "Table",
    "TimeWindow",
    "TupleWindow",
    "Unary",
    "Union",
    "Window",
    "input_key",
    "is_row_level",
    "leaf_window",
    "parse_duration",
    "plan_of",
    "query_set",
    "table",
    "where_in",
    "window",
]
