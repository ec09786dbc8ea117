"""Only spe/ imports pyspark; only db/ imports duckdb; federation (but its runtime) and
costmodel import neither (DESIGN 3)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = {"runtime.py", "cli_runtime.py"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            out.add(n.module.split(".")[0])
    return out


def test_engine_imports_stay_in_their_packages():
    bad = []
    for pkg in ("federation", "costmodel", "db", "spe"):
        for f in (ROOT / pkg).rglob("*.py"):
            mods = imports(f)
            if "pyspark" in mods and pkg != "spe":
                bad.append(f"{f.relative_to(ROOT)} imports pyspark")
            if "duckdb" in mods and pkg != "db":
                bad.append(f"{f.relative_to(ROOT)} imports duckdb")
            if pkg in ("federation", "costmodel") and f.name not in RUNTIME:
                for eng in ("spe",):
                    if eng in mods:
                        bad.append(f"{f.relative_to(ROOT)} imports {eng}")
    assert not bad, bad


def test_sqlgen_needs_only_sqlglot():
    assert "duckdb" not in imports(ROOT / "db" / "sqlgen.py")
