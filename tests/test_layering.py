"""The layers point one way (docs/architecture.md), checked on every import in the code
(function-level imports included; imports under `if TYPE_CHECKING:` are type hints only):

    model (DSL, logical plan)  <-  optimizer  <-  physical plan  <-  runtime  <-  adaptive  <-  CLI
         ^                            |                                 |
    costmodel/ (cost of plans, reads nodes by kind)     spe/, db/ (engines, read nodes by kind)

Only spe/ imports pyspark, only db/ imports duckdb; costmodel/, spe/ and db/ import no
federation code but the leaf of shared conventions (federation/conventions.py, which imports
nothing of fedq); nothing but benchmarks/ imports benchmarks; no import cycle between
top-level packages or between two modules. Every federation module belongs to a named
group: a module added without one fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("federation", "costmodel", "db", "spe", "benchmarks")

#: groups of federation modules (by dotted-name prefix) and the groups each may import
FEDERATION_GROUPS = {
    "conventions": ["federation.conventions", "federation.packing"],
    "model": ["federation.errors", "federation.streams", "federation.expressions",
              "federation.comparisons", "federation.canonical", "federation.initcap",
              "federation.conjuncts",
              "federation.logical", "federation.instants", "federation.results",
              "federation.parts", "federation.smartplug", "federation.nexmark",
              "federation.importer", "federation.brokers", "federation.python_functions",
              "federation.python_aggregates"],
    "sql front end": ["federation.sqlfront"],
    "physical": ["federation.physical", "federation.physical_sql"],
    "optimizer": ["federation.optimizer"],
    "runtime": ["federation.runtime"],
    "adaptive": ["federation.adaptive"],
    "interface": ["federation.explain", "federation.cli", "federation.api"],
}
#: the package itself (its __init__ re-exports the interface); exact name only
PACKAGE_ROOT = {"federation": "interface"}
MAY_IMPORT = {
    "conventions": set(),
    "model": {"conventions", "model"},
    "sql front end": {"conventions", "model", "sql front end"},
    "physical": {"conventions", "model", "physical"},
    "optimizer": {"conventions", "model", "physical", "optimizer"},
    # executes a given plan: never re-plans
    "runtime": {"conventions", "model", "physical", "runtime"},
    # re-plans while it runs: above the optimizer and the runtime, below the interface
    "adaptive": {"conventions", "model", "physical", "optimizer", "runtime", "adaptive"},
    "interface": set(FEDERATION_GROUPS),
}
#: the federation modules the engines and the cost model may import: the conventions, and
#: the rules of plan shapes both must read alike (federation/packing.py: which counts read
#: packed rows), which import nothing of fedq but the conventions
SHARED_LEAF = "federation.conventions"
SHARED_LEAVES = (SHARED_LEAF, "federation.packing")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def code_imports(path: Path) -> set[str]:
    """Dotted names imported by the code (not under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip |= {id(x) for b in n.body for x in ast.walk(b)}
    out = set()
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            out.add(n.module)
            out |= {f"{n.module}.{a.name}" for a in n.names}
    return out


def modules() -> dict[str, set[str]]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            mods[module_name(f)] = code_imports(f)
    return mods


def resolve(name: str, known: set[str]) -> str | None:
    """The project module an imported dotted name refers to (longest known prefix)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in known:
            return cand
    return None


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: {r for i in imps if (r := resolve(i, known)) and r != m} for m, imps in
            mods.items()}


def group(mod: str) -> str:
    if mod in PACKAGE_ROOT:
        return PACKAGE_ROOT[mod]
    best, out = -1, None
    for g, prefixes in FEDERATION_GROUPS.items():
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, out = len(p), g
    assert out is not None, f"{mod} has no group in FEDERATION_GROUPS"
    return out


def test_engine_imports_stay_in_their_packages():
    bad = []
    for mod, imps in modules().items():
        top = {i.split(".")[0] for i in imps}
        # the hand-written Spark peer of benchmarks.peers is Spark without fedq, by design
        if "pyspark" in top and not mod.startswith(("spe", "benchmarks.peers_spark")):
            bad.append(f"{mod} imports pyspark")
        if "duckdb" in top and not mod.startswith(("db", "benchmarks")):
            bad.append(f"{mod} imports duckdb")
    assert not bad, bad


def test_costmodel_and_engines_import_no_federation_code():
    bad = [f"{m} imports {d}" for m, deps in graph().items()
           if m.split(".")[0] in ("costmodel", "db", "spe")
           for d in deps if d.split(".")[0] in ("federation", "benchmarks")
           and d not in SHARED_LEAVES]
    bad += [f"{SHARED_LEAF} imports {d}" for d in graph()[SHARED_LEAF]]
    bad += [f"{leaf} imports {d}" for leaf in SHARED_LEAVES[1:] for d in graph()[leaf]
            if d.split(".")[0] in PACKAGES and d != SHARED_LEAF]
    bad += [f"{m} imports {d}" for m, deps in graph().items()
            if m.split(".")[0] == "costmodel" for d in deps if d.split(".")[0] in ("db", "spe")]
    assert not bad, bad


def test_nothing_but_benchmarks_imports_benchmarks():
    bad = [f"{m} imports {d}" for m, deps in graph().items()
           if not m.startswith("benchmarks") for d in deps if d.startswith("benchmarks")]
    assert not bad, bad


def test_federation_layers_point_one_way():
    bad = []
    for m, deps in graph().items():
        if not m.startswith("federation"):
            continue
        for d in deps:
            if d.startswith("federation") and group(d) not in MAY_IMPORT[group(m)]:
                bad.append(f"{m} ({group(m)}) imports {d} ({group(d)})")
    assert not bad, bad


def test_no_import_cycles():
    g = graph()
    # the shared leaves import no package of fedq: an edge into one closes no package cycle
    pkg = {p: {d.split(".")[0] for m, deps in g.items() if m.split(".")[0] == p for d in deps
               if d not in SHARED_LEAVES} - {p} for p in PACKAGES}
    cycles = [f"{a} <-> {b}" for a in PACKAGES for b in pkg[a] if a in pkg[b] and a < b]
    assert not cycles, f"package cycles: {cycles}"
    # modules: depth-first search for a back edge
    state: dict[str, int] = {}
    found: list[str] = []

    def dfs(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(g.get(m, ())):
            if d == m.rsplit(".", 1)[0] or m == d.rsplit(".", 1)[0]:
                continue  # a package and its own modules (re-exports)
            if state.get(d) == 1:
                found.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                dfs(d, stack + [d])
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            dfs(m, [m])
    assert not found, found


def test_sqlgen_needs_only_sqlglot():
    # every module of the package: sqlglot, the standard library, the shared leaf and the
    # package's own modules
    files = sorted((ROOT / "db" / "sqlgen").rglob("*.py"))
    assert files
    for f in files:
        imps = {i.split(".")[0] for i in code_imports(f)
                if not i.startswith(SHARED_LEAVES)
                and not (i == "db.sqlgen" or i.startswith("db.sqlgen."))}
        assert imps <= {"__future__", "collections", "dataclasses", "math", "typing",
                        "sqlglot"}, (f.name, imps)


def test_every_federation_module_has_a_group():
    for m in modules():
        if m.startswith("federation"):
            group(m)  # raises for a module in no group


def test_every_module_is_at_most_350_lines():
    long = {f"{f.relative_to(ROOT)}: {n}" for pkg in PACKAGES if pkg != "benchmarks"
            for f in (ROOT / pkg).rglob("*.py") if (n := len(f.read_text().splitlines())) > 350}
    assert not long, f"split by concept (issue 21): {sorted(long)}"
