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
    ("ground", {"_config", "_version", "_compute", "_sparse", "store", "_validation", "_gaussian",
                "_arrays", "_registry", "_docs", "_labels", "_params", "_readers"}),
    ("engine", {"engine", "metrics"}),
    ("rooms", {"data", "embed", "solvers"}),
    ("composite models", {"composite"}),
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
    graph = {"daskauc.store.protocol": {"daskauc.solvers.newton"},
             "daskauc.data.ingest": {"daskauc.embed.kmeans"},
             "daskauc.solvers.newton": {"daskauc.solvers.pairwise"},
             "daskauc.solvers.pairwise": {"daskauc.solvers.newton"},
             "daskauc.embed.kmeans": set()}
    assert violations(graph) == [
        "daskauc.store.protocol -> daskauc.solvers.newton (up from ground to rooms)",
        "daskauc.data.ingest -> daskauc.embed.kmeans (beside it on the rooms floor)"]
    assert cycles(graph) == [["daskauc.solvers.newton", "daskauc.solvers.pairwise"]]


# ------------------------------------------------------------------------------- sizes
#: a package file over this many lines holds more than one idea: split it by idea
MAX_FILE_LINES = 600
#: a function over this many lines (numba kernels aside) holds more than one step
MAX_FUNCTION_LINES = 100

#: files allowed over MAX_FILE_LINES, each with the reason and the step that splits it
LONG_FILES: dict[str, str] = {}
#: functions allowed over MAX_FUNCTION_LINES, each with the reason
LONG_FUNCTIONS = {
    "daskauc.cli.parser.build_parser": "every subcommand's options, one after the other",
    "daskauc.solvers.newton.prsvm_newton": "a 90-line docstring (the objective, its costs, "
                                           "the references) over input, moments, placement",
    "daskauc.solvers.newton.newton_loop": "the truncated Newton loop with its logging and "
                                          "stopping rules",
    "daskauc.solvers.kernel_newton.kernel_pairwise_newton": "the kernel route's documented "
                                                            "setup and loop",
    "daskauc.solvers.kernel_lsauc.kernel_lsauc": "the documented CG route: the operator, the "
                                                 "preconditioner and the solve",
    "daskauc.model_selection.gamma_lam.select_gamma_lam": "the search's folds, paths and "
                                                          "logging: its folds are the next split",
    "daskauc.engine.stream.epoch_graph": "the chain graph of an epoch, placement included",
    "daskauc.engine.stream.run_epochs": "the epoch loop, validation and checkpoints",
    "daskauc.estimators.kernel.KernelAUC.fit": "the stages of KernelAUC's fit, each a call "
                                               "into composite/ or model_selection/",
}
#: private names imported from another unit (kernels aside), each with the reason: none
PRIVATE_IMPORTS: dict[tuple[str, str, str], str] = {}


def long_files(modules: dict[str, pathlib.Path]) -> dict[str, int]:
    """module -> lines of every package file over MAX_FILE_LINES."""
    lines = {m: len(p.read_text().splitlines()) for m, p in modules.items()}
    return {m: n for m, n in lines.items() if n > MAX_FILE_LINES}


def long_functions(modules: dict[str, pathlib.Path]) -> dict[str, int]:
    """qualified name -> lines of every function over MAX_FUNCTION_LINES outside the numba
    kernel modules (``*_kernels.py``)."""
    out = {}
    for m, p in modules.items():
        if p.name.endswith("_kernels.py"):
            continue

        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = child.end_lineno - child.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        out[f"{prefix}.{child.name}"] = n
                    visit(child, f"{prefix}.{child.name}")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}.{child.name}")

        visit(ast.parse(p.read_text()), m)
    return out


def private_imports(modules: dict[str, pathlib.Path]) -> list[tuple[str, str, str]]:
    """(importer, module, name) of every private name imported from another unit, numba
    kernel modules aside (a unit's kernels are private to it and imported by name)."""
    out = []
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("daskauc"):
                continue
            for alias in node.names:
                if f"{target}.{alias.name}" in modules or not alias.name.startswith("_") \
                        or alias.name.startswith("__"):
                    continue
                home = target
                while home and home not in modules:
                    home = home.rpartition(".")[0]
                if unit(home) != unit(name) and not home.endswith("_kernels"):
                    out.append((name, home, alias.name))
    return sorted(set(out))


def _modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_no_file_is_over_600_lines_but_those_allowed_with_a_reason():
    found = long_files(_modules())
    assert sorted(set(found) - set(LONG_FILES)) == [], found
    assert sorted(set(LONG_FILES) - set(found)) == [], "shorter now: take it off LONG_FILES"


def test_no_function_is_over_100_lines_but_those_allowed_with_a_reason():
    found = long_functions(_modules())
    assert sorted(set(found) - set(LONG_FUNCTIONS)) == [], found
    assert sorted(set(LONG_FUNCTIONS) - set(found)) == [], "shorter now: take it off"


def test_no_private_name_is_imported_from_another_unit():
    found = private_imports(_modules())
    assert sorted(set(found) - set(PRIVATE_IMPORTS)) == [], (
        "a helper two units need is public in its home: " + str(found))
    assert sorted(set(PRIVATE_IMPORTS) - set(found)) == []


def test_the_size_checks_can_fail(tmp_path):
    """A long file, a long function and a private import across units are each found."""
    (tmp_path / "daskauc" / "solvers").mkdir(parents=True)
    (tmp_path / "daskauc" / "engine").mkdir()
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    made = {"daskauc.solvers.big": tmp_path / "daskauc" / "solvers" / "big.py",
            "daskauc.engine.stream": tmp_path / "daskauc" / "engine" / "stream.py"}
    made["daskauc.solvers.big"].write_text(
        "from ..engine.stream import _Hidden\n\n\ndef f():\n" + long_body + "\n"
        + "\n" * MAX_FILE_LINES)
    made["daskauc.engine.stream"].write_text("class _Hidden:\n    pass\n")
    assert long_files(made) == {"daskauc.solvers.big": MAX_FILE_LINES + MAX_FUNCTION_LINES + 4}
    assert long_functions(made) == {"daskauc.solvers.big.f": MAX_FUNCTION_LINES + 1}
    assert private_imports(made) == [("daskauc.solvers.big", "daskauc.engine.stream",
                                      "_Hidden")]
