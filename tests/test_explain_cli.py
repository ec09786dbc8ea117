"""`fedq explain` for CQ1-CQ6 across rates, as text, JSON and a sweep: what it prints is
what the optimizer chose (no JVM)."""

from __future__ import annotations

import json

import pytest

from federation.cli import main
from federation.optimizer import optimize
from federation.smartplug.queries import QUERIES


@pytest.mark.parametrize("query", ["CQ1", "CQ2", "CQ3", "CQ4", "CQ5", "CQ6"])
@pytest.mark.parametrize("rate", [1000, 20000, 40000])
def test_explain_text_is_the_optimizers_plan(query, rate, capsys):
    assert main(["explain", query, "--rate", str(rate)]) == 0
    out = capsys.readouterr().out.splitlines()
    r = optimize(QUERIES[query](rate=rate))
    assert out[0] == f"query {query}: placement {r.plan.placement_string}"
    # one tree line per node: root, windows and operators, each operator with its engine
    lg = r.plan.logical
    tree = out[1:1 + len(lg.nodes)]
    for oid in lg.r2r_ids:
        line = next(t for t in tree if t.split()[0] == oid)
        d = r.plan.db_op_of(oid)
        assert line.split()[1:3] == (["DB", d.id] if d else ["SPE", line.split()[2]])
    c_line = next(t for t in out if t.startswith("C_b = "))
    assert c_line.split()[2] == f"{r.cost.C_b:.4g}"
    assert c_line.split()[5] == f"{r.cost.C_u:.4g}"
    assert sum(1 for t in out if t.startswith("-- db")) == len(r.plan.db_ops)


def test_explain_json_matches_the_optimizer(capsys):
    main(["explain", "CQ3", "--rate", "20000", "--json", "--no-feasibility-check"])
    data = json.loads(capsys.readouterr().out)
    r = optimize(QUERIES["CQ3"](rate=20000), feasibility_check=False)
    assert data["feasibility_check"] is False
    assert data["placement"] == r.plan.placement
    assert data["C_u"] == pytest.approx(r.cost.C_u)
    assert [d["id"] for d in data["db_ops"]] == [d.id for d in r.plan.db_ops]
    for d, want in zip(data["db_ops"], r.plan.db_ops):
        assert d["sql"] == want.sql_text and d["members"] == list(want.members)
        assert d["u"] == pytest.approx(r.plan_cost.db[want.id].total)
    assert {o["id"]: o["engine"] for o in data["operators"] if o["id"].startswith("op")} == \
        r.plan.placement


def test_sweep_marks_where_the_placement_changes(capsys):
    main(["explain", "CQ1", "--sweep", "1000:40000:13000"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["rate", "C_b", "C_u"]
    rates = [1000, 14000, 27000, 40000]
    assert [float(line.split()[0]) for line in out[1:]] == rates
    placements = [optimize(QUERIES["CQ1"](rate=x)).plan.placement_string for x in rates]
    for line, pl, prev in zip(out[1:], placements, [None, *placements]):
        assert line.split()[4] == pl
        assert line.endswith("<- changes") == (prev is not None and pl != prev)


def test_unknown_query():
    with pytest.raises(SystemExit, match="unknown query 'CQ9'"):
        main(["explain", "CQ9"])


def test_explain_plans_at_a_generators_rate(capsys):
    """`--data datagen:smartplug?rate=N` plans at the generator's rate, as `--rate N`."""
    def costs(*argv):
        assert main(["explain", "CQ1", "--json", *argv]) == 0
        d = json.loads(capsys.readouterr().out)
        return d["placement"], d["C_b"]

    assert costs("--data", "datagen:smartplug?rate=50000") == costs("--rate", "50000")
    assert costs("--data", "datagen:smartplug?rate=500") == costs("--rate", "500")
    assert costs("--rate", "500") != costs("--rate", "50000")
