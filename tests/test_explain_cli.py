"""`fedq explain` for CQ1-CQ6 across rates, as text, JSON and a sweep."""

from __future__ import annotations

import json

import pytest

from federation.cli import main


@pytest.mark.parametrize("query", ["CQ1", "CQ2", "CQ3", "CQ4", "CQ5", "CQ6"])
@pytest.mark.parametrize("rate", [1000, 20000, 40000])
def test_explain_text(query, rate, capsys):
    assert main(["explain", query, "--rate", str(rate)]) == 0
    out = capsys.readouterr().out
    assert f"query {query}" in out and "C_b =" in out and "plans examined:" in out
    assert "phase one:" in out and "phase two:" in out


def test_explain_json_has_sql_of_every_db_op(capsys):
    main(["explain", "CQ3", "--rate", "20000", "--json", "--no-feasibility-check"])
    data = json.loads(capsys.readouterr().out)
    assert data["feasibility_check"] is False
    for d in data["db_ops"]:
        assert d["sql"].startswith("WITH") and "taus" in d["sql"]
    engines = {o["engine"] for o in data["operators"]}
    assert engines <= {"spe", "db"}


def test_sweep(capsys):
    main(["explain", "CQ1", "--sweep", "1000:40000:13000"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["rate", "C_b", "C_u"]
    assert len(out) == 1 + 4


def test_unknown_query():
    with pytest.raises(SystemExit, match="unknown query 'CQ9'"):
        main(["explain", "CQ9"])
