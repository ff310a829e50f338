"""The registries: every public estimator and transformer registers itself where it is
defined (``@model_class``), and every solver function in its module (``@solver``).

:mod:`daskauc.io` builds models, and the solver states inside them, from these tables alone,
so loading a file never imports anything by a name the file gives. ``daskauc fit --method``,
``daskauc warmup`` and the tests that must cover every class or solver (golden fits,
scikit-learn's checks, checkpoints, chains) read the same tables, filtered by kind and tags.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ._params import checks

#: class name -> class, for every estimator and transformer that ``save_model`` writes
MODEL_CLASSES: dict[str, type] = {}

#: class name -> how ``daskauc fit --method`` offers the class: ``{method: fixed parameters}``,
#: or the reason it offers none (every registered class says one or the other)
CLI_METHODS: dict[str, dict[str, dict] | str] = {}


def model_class(cls: type | None = None, *, cli: str | dict[str, dict] | None = None,
                no_cli: str | None = None):
    """Register a class under its name (a class decorator; two classes may not share one).

    ``cli``: the ``daskauc fit --method`` name(s) that fit it, a name or ``{name: fixed
    parameters}``; ``no_cli``: why the command line has no method for it. A preset (an
    embedding and a linear model) offered by name fits a raw dataset store; on an embedding
    store the same method fits the preset's linear model with the preset's defaults."""
    if cli is not None and no_cli is not None:
        raise TypeError("give cli= or no_cli=, not both")

    def register(cls: type) -> type:
        if MODEL_CLASSES.setdefault(cls.__name__, cls) is not cls:
            raise TypeError(f"two model classes named {cls.__name__}")
        if cli is not None:
            CLI_METHODS[cls.__name__] = {cli: {}} if isinstance(cli, str) else dict(cli)
        elif no_cli is not None:
            CLI_METHODS[cls.__name__] = str(no_cli)
        return cls

    return register(cls) if cls is not None else register


def method_class(method: str) -> tuple[type, dict]:
    """The registered class that ``daskauc fit --method METHOD`` fits (a preset for a preset's
    method), and the parameters the method fixes: ``method_class("uni-exp")`` is
    ``(UnivariateAUC, {"loss": "exp"})``."""
    for name, offered in CLI_METHODS.items():
        if isinstance(offered, dict) and method in offered:
            return MODEL_CLASSES[name], dict(offered[method])
    known = sorted(m for o in CLI_METHODS.values() if isinstance(o, dict) for m in o)
    raise KeyError(f"no method {method!r}; the methods: {', '.join(known)}")


@dataclass(frozen=True)
class SolverEntry:
    """A registered solver function (``@solver``)."""

    name: str
    function: Callable
    #: "stochastic" (epochs over row chunks), "newton" (distributed truncated Newton) or
    #: "least-squares" (closed form, or conjugate gradients on the normal equations)
    kind: str
    #: the dataclasses of the state it threads through epochs and checkpoints (model files
    #: rebuild these and nothing else)
    states: tuple[type, ...] = ()
    #: "linear" or "kernel", "pairwise" (a loss over pairs) ...
    tags: frozenset[str] = field(default_factory=frozenset)
    #: its parameter table, ``name: constraint`` (:mod:`daskauc._params`): checked on each
    #: call, unless the caller checked them (``params_checked``)
    params: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def parameters(self) -> list[str]:
        """Its keyword parameters (the options an estimator passes it)."""
        return [name for name, p in inspect.signature(self.function).parameters.items()
                if p.kind is p.KEYWORD_ONLY]

    @property
    def chains(self) -> bool:
        """It runs an epoch as parallel chains (``n_chains``)."""
        return "n_chains" in self.parameters

    @property
    def resumable(self) -> bool:
        """It continues from a state (``state=``): ``partial_fit`` and checkpoints."""
        return "state" in self.parameters


#: solver function name -> its entry, for every solver of ``daskauc.solvers``
SOLVERS: dict[str, SolverEntry] = {}

SOLVER_KINDS = ("stochastic", "newton", "least-squares")


def measured_by_fields(cls: type) -> type:
    """Teach Dask's ``sizeof`` the size of a dataclass state: the sum of its fields' sizes.

    Without it a state (a few d-vectors) weighs ``sys.getsizeof``'s ~50 bytes to the
    scheduler, which then places the next chain task by its small dependencies (a y block)
    and moves the state between workers at every chunk: on a 2**22-wide click log each step
    sent 64 MiB, and the chain's read-ahead was lost (1.5 s a pass against 0.66 s in one
    process). Registered for the state classes of every solver (``@solver(states=...)``),
    in each process that imports the solver (a worker unpickling a chain task does)."""
    import dataclasses
    import sys

    from dask.sizeof import sizeof

    @sizeof.register(cls)
    def size_of_fields(state) -> int:
        return sys.getsizeof(state) + sum(int(sizeof(getattr(state, f.name)))
                                          for f in dataclasses.fields(state))

    return cls


def _dense_only(function: Callable) -> Callable:
    """``function`` refusing sparse ``X`` (its first argument) by name."""
    import functools

    @functools.wraps(function)
    def call(*args, **kwargs):
        from ._readers import is_sparse_input

        X = args[0] if args else kwargs.get("X")
        if is_sparse_input(X):
            raise TypeError(f"{function.__name__} reads dense rows only; X holds sparse rows "
                            "(see the solvers tagged 'sparse')")
        return function(*args, **kwargs)

    return call


def solver(*, kind: str, states: tuple[type, ...] = (), tags=(),
           params: Mapping[str, object] | None = None, sparse: bool = False):
    """Register a solver function under its name (a decorator): its kind, the state classes
    it threads (:class:`SolverEntry`), tags, and its parameter table ``params``
    (``name: constraint``), which every call outside ``params_checked()`` is checked against
    (:func:`daskauc._params.checks`): the one place a solver says what its parameters may be.
    ``sparse``: it reads sparse rows (CSR blocks); otherwise sparse ``X`` is a ``TypeError``
    before any work (tag ``"sparse"``).
    """
    if kind not in SOLVER_KINDS:
        raise ValueError(f"kind must be one of {SOLVER_KINDS}; got {kind!r}")
    tags = (*tags, "sparse") if sparse else tuple(tags)

    def register(function: Callable) -> Callable:
        for state_class in states:
            measured_by_fields(state_class)
        checked = checks(params or {})(function if sparse else _dense_only(function))
        entry = SolverEntry(function.__name__, checked, kind, tuple(states), frozenset(tags),
                            checked.params)
        if SOLVERS.setdefault(entry.name, entry).function is not checked:
            raise TypeError(f"two solvers named {entry.name}")
        return checked

    return register
