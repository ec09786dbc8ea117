"""Every validation error of the DSL names the operator and the field (issue: item 2)."""

from __future__ import annotations

import pytest

from federation import QueryValidationError, avg, count, max_, stream, sum_, window
from federation.logical import TimeWindow
from federation.smartplug import PLUG_KEYS, smartplug_stream

S = smartplug_stream(plugs=100)


def w(**kw):
    kw.setdefault("range", 10)
    return window(S, **kw)


def check(fn, operator: str, field: str, text: str) -> None:
    with pytest.raises(QueryValidationError) as e:
        fn()
    assert e.value.operator == operator
    assert e.value.field == field
    assert text in str(e.value)
    assert str(e.value).startswith(f"{operator}: {field}: ")


def test_unknown_column_in_selection():
    check(lambda: w().filter("voltage > 3"), "select", "predicate", "unknown column 'voltage'")


def test_unknown_column_in_projection_names_output():
    check(lambda: w().project(x="nope + 1"), "project", "x", "unknown column 'nope'")


def test_unknown_group_key():
    check(lambda: w().aggregate(by=["plug"], n=count()), "aggregate", "by", "unknown column 'plug'")


def test_unknown_join_key():
    a = w().aggregate(by=PLUG_KEYS, m=max_("value"))
    check(lambda: w().join(a, on=["plug"]), "join", "on", "unknown column 'plug' in left input")


def test_ambiguous_column_in_join():
    a = w().aggregate(by=PLUG_KEYS, value=max_("value"))
    check(lambda: w().join(a, on=PLUG_KEYS), "join", "columns", "ambiguous column 'value'")


def test_join_keys_of_different_types():
    a = w().aggregate(by=["plug_id"], m=max_("value"))
    check(lambda: w().join(a, on=[("value", "plug_id")]), "join", "on",
          "key 'value' is DOUBLE on the left but 'plug_id' is INT on the right")


def test_aggregate_over_non_numeric_column():
    s = stream("t", {"ts": "TIMESTAMP", "k": "INT", "name": "VARCHAR"}, rate=10)
    check(lambda: window(s, range=5).aggregate(by=["k"], x=sum_("name")), "aggregate", "x",
          "SUM over non-numeric 'name' (VARCHAR)")
    check(lambda: window(s, range=5).aggregate(by=["k"], x=avg("ts")), "aggregate", "x",
          "AVG over non-numeric 'ts' (TIMESTAMP)")


def test_count_of_non_numeric_is_fine():
    s = stream("t", {"ts": "TIMESTAMP", "k": "INT", "name": "VARCHAR"}, rate=10)
    assert window(s, range=5).aggregate(by=["k"], n=count("name")).schema["n"] == "BIGINT"


def test_window_not_at_a_leaf():
    agg = w().aggregate(by=PLUG_KEYS, m=max_("value"))
    check(lambda: agg.window(range=10), "window", "input", "must read a stream at a leaf")
    check(lambda: TimeWindow(stream=agg, slide_s=1, range_s=10), "window", "input", "aggregate")


def test_non_positive_range_and_slide():
    check(lambda: w(range=0), "window", "range", "must be positive")
    check(lambda: w(range=-5), "window", "range", "must be positive")
    check(lambda: w(slide=0), "window", "slide", "must be positive")
    check(lambda: window(S, rows=0), "window", "rows", "must be positive")


def test_slide_larger_than_range():
    check(lambda: w(range=5, slide=10), "window", "slide", "slide 10 s is larger than range 5 s")


def test_unknown_stream():
    check(lambda: window("plugz", range=5, catalog={"smartplug": S}), "window", "stream",
          "unknown stream 'plugz' (known: smartplug)")


def test_predicate_must_be_a_condition():
    check(lambda: w().filter("value + 1"), "select", "predicate", "is not a condition")


def test_unparsable_expression():
    check(lambda: w().filter("value >"), "select", "predicate", "cannot parse")


def test_stream_declaration_errors_name_the_field():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="rate_tps"):
        stream("s", {"ts": "TIMESTAMP"}, rate=-1)
    with pytest.raises(ValidationError, match="unsupported type 'FLOAT8'"):
        stream("s", {"ts": "TIMESTAMP", "x": "FLOAT8"}, rate=1)
    with pytest.raises(ValidationError, match="extra_forbidden"):
        stream("s", {"ts": "TIMESTAMP"}, rate=1, sampels=3)


def test_durations_as_strings():
    assert w(range="5 min", slide="1 s").node.range_s == 300
    check(lambda: w(range="five minutes"), "window", "range", "cannot read duration")


def test_rstream_twice_and_window_only():
    q = w().aggregate(by=PLUG_KEYS, m=max_("value")).rstream("q")
    check(lambda: q.rstream("again"), "rstream", "input", "already ends in RSTREAM")
    # a window's own rows (SQL's `SELECT * FROM TUMBLE(...)`): through a projection
    raw = w().rstream("raw")
    assert raw.child.kind == "project" and raw.schema == w().node.schema
