"""Every shared convention has one home, federation/conventions.py: no reserved column name,
type map or microsecond conversion is written anywhere else in the product's code (the
engines, the cost model, the runtime and the interfaces). Docstrings and comments may
name them. db/reference.py, the independent evaluator, writes its own on purpose.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from federation import conventions as cv

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("federation", "spe", "db", "costmodel")
HOME = ROOT / "federation" / "conventions.py"
INDEPENDENT = {ROOT / "db" / "reference.py"}
_NAMES = "|".join(re.escape(c) for c in (cv.TS, cv.WT, cv.TAU, cv.KIND, cv.PUNCT, cv.OUT,
                                         cv.CLOCK))
RESERVED = re.compile(rf"(?<![\w.])({_NAMES})(?!\w)")
MICRO = {1_000_000}  # 1e6 == 1_000_000 too


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = n.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    rel = path.relative_to(ROOT)
    bad = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and id(n) not in docs:
            if isinstance(n.value, str) and RESERVED.search(n.value):
                bad.append(f"{rel}:{n.lineno} reserved column in {n.value!r}")
            elif (isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
                  and n.value in MICRO):
                bad.append(f"{rel}:{n.lineno} microsecond conversion ({n.value!r})")
        elif isinstance(n, ast.JoinedStr):  # f"_p{k}"
            text = "".join(v.value for v in n.values if isinstance(v, ast.Constant))
            if re.search(r"(?<!\w)_(p|out|clock)(?!\w)", text):
                bad.append(f"{rel}:{n.lineno} tagged column in an f-string")
        elif isinstance(n, ast.Dict):
            keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
            if len(keys & set(cv.TYPES)) >= 3:
                bad.append(f"{rel}:{n.lineno} a map over the SQL types")
    return bad


def test_conventions_are_written_only_in_their_module():
    files = [f for p in PACKAGES for f in (ROOT / p).rglob("*.py")
             if f != HOME and f not in INDEPENDENT]
    bad = [v for f in files for v in violations(f)]
    assert not bad, "\n".join(bad)


def test_the_check_finds_a_copy():
    # the check itself: each kind of copy is found
    f = ROOT / "federation" / "_probe_conventions.py"
    try:
        f.write_text('"""doc names _wt freely"""\n'
                     'a = df["_wt"]\nb = round(s * 1_000_000)\nc = f"_p{1}"\n'
                     'd = {"INT": 1, "BIGINT": 2, "DOUBLE": 3}\ne = "x = _kind"\n')
        found = violations(f)
    finally:
        f.unlink()
    assert sorted(v.split(" ", 1)[1] for v in found) == [
        "a map over the SQL types", "microsecond conversion (1000000)",
        "reserved column in '_wt'", "reserved column in 'x = _kind'",
        "tagged column in an f-string"]


def test_the_engines_agree_on_the_type_table():
    import pyarrow as pa

    from federation.parts import arrow_type
    assert set(cv.DUCKDB_TYPES) == set(cv.SPARK_TYPES) == set(cv.ARROW_TYPES) == set(
        cv.NEUTRAL) == set(cv.TYPES)
    assert arrow_type("INT") == pa.int32() and arrow_type("TIMESTAMP") == pa.timestamp("us")
