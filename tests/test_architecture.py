"""The floors of docs/architecture.md, kept true: a module imports only from floors below its
own and from its own unit (package), and no modules import each other in a circle.

Every import counts, also one inside a function: a late import is still a dependency.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "daskauc"

#: bottom up; a unit is a top-level module or subpackage of daskauc. Units of the ground
#: floor may import each other (no circles); above it, a unit imports only its own modules
#: and lower floors.
FLOORS = [
    ("ground", {"_config", "_version", "_compute", "_urls", "_store", "_rawchunks",
                "_validation", "_gaussian", "_arrays", "_registry", "_docs", "_store_write",
                "_dataset"}),
    ("engine", {"engine", "metrics"}),
    ("rooms", {"data", "embed", "solvers"}),
    ("model selection and model files", {"model_selection", "io"}),
    ("estimators", {"estimators", "plot"}),
    ("uses of models", {"scoring"}),
    ("faces", {"cli", "cluster", "__init__"}),
]

#: modules that belong to another unit than their name says (numba kernels of a unit)
UNIT_OF = {"_metrics_kernels": "metrics", "_gaussian_kernels": "_gaussian"}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return UNIT_OF.get(parts[1], parts[1])


def floor(module: str) -> int:
    u = unit(module)
    for i, (_, units) in enumerate(FLOORS):
        if u in units:
            return i
    raise KeyError(f"{module}: on no floor of tests/test_architecture.py (add its unit)")


def imports(modules: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    """module -> the daskauc modules it imports (anywhere in the file)."""
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            for t in candidates:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t.startswith("daskauc") and t != name:
                    targets.add(t)
        out[name] = targets
    return out


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports against the floors, as "a -> b (why)"."""
    out = []
    for a, targets in graph.items():
        for b in sorted(targets):
            fa, fb = floor(a), floor(b)
            if b == "daskauc" and a != "daskauc":
                out.append(f"{a} -> {b} (imports the whole package)")
            elif fb > fa:
                out.append(f"{a} -> {b} (up from {FLOORS[fa][0]} to {FLOORS[fb][0]})")
            elif fb == fa and fa > 0 and unit(a) != unit(b):
                out.append(f"{a} -> {b} (beside it on the {FLOORS[fa][0]} floor)")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            # a package's __init__ re-exporting its modules is not a circle of ideas
            if w in index and w not in on:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            else:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def package_graph() -> dict[str, set[str]]:
    return imports({module_name(p): p for p in PACKAGE.rglob("*.py")})


def test_every_module_is_on_a_floor():
    for module in package_graph():
        floor(module)


def test_imports_go_down_the_floors():
    problems = violations(package_graph())
    assert not problems, "imports against docs/architecture.md:\n" + "\n".join(problems)


def test_no_circular_imports():
    found = cycles(package_graph())
    assert not found, f"modules importing each other in a circle: {found}"


def test_the_checks_can_fail():
    """A made-up upward import, a sideways one and a circle are each reported."""
    graph = {"daskauc._store": {"daskauc.solvers.newton"},
             "daskauc.data.ingest": {"daskauc.embed.kmeans"},
             "daskauc.solvers.newton": {"daskauc.solvers.pairwise"},
             "daskauc.solvers.pairwise": {"daskauc.solvers.newton"},
             "daskauc.embed.kmeans": set()}
    assert violations(graph) == [
        "daskauc._store -> daskauc.solvers.newton (up from ground to rooms)",
        "daskauc.data.ingest -> daskauc.embed.kmeans (beside it on the rooms floor)"]
    assert cycles(graph) == [["daskauc.solvers.newton", "daskauc.solvers.pairwise"]]
