"""The registries are complete, and what reads them covers every entry: each registered class
has its golden case, its scikit-learn checks and a command-line method or a stated reason;
each solver state a checkpoint can hold is registered; the command line's methods are the
registry's. A new estimator or solver that forgets one of these fails here, by name."""

import ast
import dataclasses
import inspect
import pathlib

import golden
import pytest
from test_sklearn_conformance import ESTIMATORS

import daskauc  # noqa: F401 - every class and solver registered
from daskauc import solvers
from daskauc._registry import CLI_METHODS, MODEL_CLASSES, SOLVERS, model_class, solver

PACKAGE = pathlib.Path(daskauc.__file__).parent


def test_every_registered_class_has_a_golden_case():
    cases = {name.partition(":")[0] for name in golden.ESTIMATORS}
    assert sorted(set(MODEL_CLASSES) - cases) == [], "add them to tests/golden.py and record"
    assert sorted(cases - set(MODEL_CLASSES)) == []


def test_every_registered_class_is_checked_by_scikit_learn():
    assert sorted(type(e).__name__ for e in ESTIMATORS) == sorted(MODEL_CLASSES)


def test_every_registered_class_has_a_cli_method_or_says_why_not():
    assert sorted(set(MODEL_CLASSES) - set(CLI_METHODS)) == []
    for name, offered in CLI_METHODS.items():
        if isinstance(offered, str):
            assert len(offered) > 10, f"{name}: say why the command line does not offer it"
            continue
        valid = MODEL_CLASSES[name]().get_params()
        for method, fixed in offered.items():
            assert set(fixed) <= set(valid), (name, method)


def test_the_command_lines_methods_are_the_registrys():
    from daskauc.cli import _embedding_methods, _methods
    from daskauc.estimators.presets import EmbeddedAUCModel

    offered = {m: name for name, o in CLI_METHODS.items() if isinstance(o, dict) for m in o}
    assert set(_methods()) == set(offered)
    assert len(offered) == sum(len(o) for o in CLI_METHODS.values() if isinstance(o, dict))
    for method, name in offered.items():
        cls = MODEL_CLASSES[name]
        if issubclass(cls, EmbeddedAUCModel):  # a raw store: the preset; an embedding: its
            assert _embedding_methods()[method] is cls  # linear model
            assert _methods()[method][0] is type(cls().linear_model())
        else:
            assert _methods()[method][0] is cls


def _dataclasses_named_state() -> list[str]:
    """Every dataclass of daskauc/solvers whose name ends in State (the states solvers thread
    through epochs, partial_fit and checkpoints), read from the source."""
    found = []
    for path in (PACKAGE / "solvers").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("State") and any(
                    "dataclass" in ast.unparse(d) for d in node.decorator_list):
                found.append(node.name)
    return sorted(found)


def test_every_solver_state_is_registered_and_a_model_file_can_hold_it():
    from daskauc.io import _state_classes

    registered = {c.__name__ for e in SOLVERS.values() for c in e.states}
    assert set(_dataclasses_named_state()) <= registered
    assert set(_state_classes()) == registered
    for entry in SOLVERS.values():
        assert all(dataclasses.is_dataclass(c) for c in entry.states), entry.name
        if entry.resumable:
            assert entry.states, f"{entry.name} takes state= but registers no state class"


def test_every_solver_state_weighs_its_arrays_for_the_scheduler():
    """Dask's ``sizeof`` of a state is its fields' bytes (``measured_by_fields``): a state
    weighing ~50 bytes made the scheduler move the chain between workers at every chunk."""
    import numpy as np
    from dask.sizeof import sizeof

    from daskauc.solvers.univariate import UnivariateState

    for entry in SOLVERS.values():
        for cls in entry.states:
            assert sizeof.dispatch(cls) is not sizeof.dispatch(object), (entry.name, cls)
    w = np.zeros(2**20)
    state = UnivariateState(w=w, wbar=w.copy(), offset=np.zeros(2),
                            counts=np.zeros(2, np.int64), epoch=0, seed_entropy=0, seed_key=())
    assert 2 * w.nbytes <= sizeof(state) < 2 * w.nbytes + 4096


def test_every_solver_module_registers_its_solver():
    """A module of daskauc/solvers whose name is a family (not private, not a helper of
    several) registers at least one solver, and the package imports it."""
    helpers = {"__init__", "pairwise", "linesearch", "preconditioner", "blocked_preconditioner",
               "kernel_basis"}
    families = {p.stem for p in (PACKAGE / "solvers").glob("*.py")
                if not p.stem.startswith("_") and p.stem not in helpers}
    registered = {e.function.__module__.rpartition(".")[2] for e in SOLVERS.values()}
    assert sorted(families - registered) == []
    assert all(hasattr(solvers, m) for m in families)


def test_registering_twice_or_wrongly_is_refused():
    with pytest.raises(TypeError, match="two model classes named RankSVM"):
        model_class(type("RankSVM", (), {}))
    with pytest.raises(TypeError, match="cli= or no_cli="):
        model_class(cli="x", no_cli="y")
    with pytest.raises(ValueError, match="kind must be one of"):
        solver(kind="magic")
    original = inspect.unwrap(SOLVERS["spam"].function)  # the function under its table
    with pytest.raises(TypeError, match="two solvers named spam"):
        solver(kind="stochastic")(type(original)(original.__code__, {}, "spam"))
