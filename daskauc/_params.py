"""Parameters: constraints that say what a parameter may be (an :class:`Interval`, a choice
among :class:`Options`, an :class:`InstanceOf` ... or a union of them, a list where any one
may accept), one check of a value against one (:func:`check_param`), a table of them for an
estimator (:func:`check_params`) or a function (:func:`checks`), the context in which
functions take their parameters as checked (:func:`params_checked`), and seeds
(:func:`seed_sequence`, :func:`child_seed`).

A parameter is checked once, where the user passed it: an estimator checks its table at the
top of ``fit`` and calls the solver functions inside :func:`params_checked`, so that their
own tables (``@solver(params=...)``, :mod:`daskauc._registry`) are not checked again; a
solver called directly checks its table on every call.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from numbers import Integral, Real
from types import MappingProxyType

import numpy as np


class Constraint:
    """What a parameter may be. ``accepts`` the values it allows; ``matches_type`` those of
    its type (a value of the right type but out of range or choices is a ValueError, one of
    no constraint's type a TypeError); ``describe`` for a union's message ("a float > 0"),
    ``violation`` the part a value of its type fails ("> 0"); ``error`` the exception of a
    parameter with this one constraint."""

    def accepts(self, value) -> bool:
        raise NotImplementedError

    def matches_type(self, value) -> bool:
        return self.accepts(value)

    def describe(self) -> str:
        raise NotImplementedError

    def violation(self, value) -> str:
        return self.describe()

    def error(self, name: str, value) -> Exception:
        kind = ValueError if self.matches_type(value) else TypeError
        return kind(f"{name} must be {self.describe()}; got {value!r}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.describe()}>"


def _article(text: str) -> str:
    return f"{'an' if text[:1] in 'aeiou' else 'a'} {text}"


class Interval(Constraint):
    """An int (``bool`` is not one) or a finite float in ``[low, high]``; ``None`` leaves a
    side open, ``closed`` ("both", "left", "right" or "neither") says which bounds are
    allowed: ``Interval(float, 0.0, closed="neither")`` is a float > 0."""

    def __init__(self, kind: type, low=None, high=None, *, closed: str = "both"):
        if kind not in (int, float):
            raise TypeError(f"Interval kind must be int or float; got {kind!r}")
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed must be 'both', 'left', 'right' or 'neither'; got {closed!r}")
        if low is not None and high is not None and low > high:
            raise ValueError(f"Interval low={low} > high={high}")
        self.kind, self.low, self.high = kind, low, high
        self.left, self.right = closed in ("both", "left"), closed in ("both", "right")

    def matches_type(self, value) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind is int:
            return isinstance(value, Integral)
        return isinstance(value, Real) and bool(np.isfinite(value))

    def violation(self, value) -> str | None:
        """The bound ``value`` breaks, as ``">= 1"``, or None."""
        low, high = self.low, self.high
        if low is not None and (value < low or (value == low and not self.left)):
            return f"{'>=' if self.left else '>'} {low}"
        if high is not None and (value > high or (value == high and not self.right)):
            return f"{'<=' if self.right else '<'} {high}"
        return None

    def accepts(self, value) -> bool:
        return self.matches_type(value) and self.violation(value) is None

    def bounds(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>=' if self.left else '>'} {self.low}")
        if self.high is not None:
            parts.append(f"{'<=' if self.right else '<'} {self.high}")
        return " and ".join(parts)

    def describe(self) -> str:
        return " ".join(filter(None, (_article(self.kind.__name__), self.bounds())))

    def error(self, name: str, value) -> Exception:
        if not self.matches_type(value):
            return TypeError(f"{name} must be {self.kind.__name__}; got {value!r}")
        return ValueError(f"{name} must be {self.violation(value)}; got {value!r}")


def _same_kind(value, option) -> bool:
    """``value`` is of ``option``'s kind: a bool only for a bool, None only for None."""
    if option is None or value is None:
        return value is option
    if isinstance(option, bool) or isinstance(value, (bool, np.bool_)):
        return isinstance(option, bool) and isinstance(value, (bool, np.bool_))
    if isinstance(option, str):
        return isinstance(value, str)
    if isinstance(option, Real):
        return isinstance(value, Real)
    return isinstance(value, type(option))


class Options(Constraint):
    """One of the literal ``values`` (``True`` is not 1, ``"1"`` is not 1). A value outside
    them is a ValueError, whatever its type, when the parameter has no other constraint."""

    def __init__(self, *values):
        if not values:
            raise ValueError("Options needs at least one value")
        self.values = values

    def matches_type(self, value) -> bool:
        return any(_same_kind(value, v) for v in self.values)

    def accepts(self, value) -> bool:
        for v in self.values:
            if _same_kind(value, v):
                try:
                    if bool(value == v):
                        return True
                except (TypeError, ValueError):  # an array compared elementwise
                    pass
        return False

    def listed(self) -> str:
        return f"one of {sorted(map(str, self.values))}"

    def describe(self) -> str:
        return repr(self.values[0]) if len(self.values) == 1 else self.listed()

    def error(self, name: str, value) -> Exception:
        return ValueError(f"{name} must be {self.listed()}; got {value!r}")


class InstanceOf(Constraint):
    """An instance of ``types`` (a type or a tuple of them), described as ``name``."""

    def __init__(self, types, name: str | None = None):
        self.types = types
        self.name = name or (" or ".join(t.__name__ for t in types) if isinstance(types, tuple)
                             else types.__name__)

    def accepts(self, value) -> bool:
        return isinstance(value, self.types)

    def describe(self) -> str:
        return _article(self.name)

    def error(self, name: str, value) -> Exception:
        return TypeError(f"{name} must be {self.name}; got {value!r}")


class ArrayLike(Constraint):
    """An array: anything but a string, whose shape and values are the caller's to check,
    against the data (``name`` says what it is)."""

    def __init__(self, name: str = "an array"):
        self.name = name

    def accepts(self, value) -> bool:
        return not isinstance(value, (str, bytes))

    def describe(self) -> str:
        return self.name


class FloatDType(Constraint):
    """A float32 or float64 dtype (anything ``numpy.dtype`` reads as one; None is float64)."""

    def accepts(self, value) -> bool:
        try:
            return np.dtype(value) in (np.float32, np.float64)
        except TypeError:
            return False

    def describe(self) -> str:
        return "float32 or float64"


class Grid(Constraint):
    """A non-empty sequence of positive finite numbers (a grid of a positive parameter)."""

    def matches_type(self, value) -> bool:
        return not isinstance(value, (str, bytes)) and (
            hasattr(value, "__array__") or isinstance(value, (list, tuple)))

    def accepts(self, value) -> bool:
        if not self.matches_type(value):
            return False
        try:
            g = np.asarray(value, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            return False
        return g.size > 0 and bool(np.all(np.isfinite(g))) and bool(np.all(g > 0))

    def describe(self) -> str:
        return "a non-empty sequence of positive finite numbers"


#: a float > 0 and a float >= 0
POSITIVE = Interval(float, 0.0, closed="neither")
NON_NEGATIVE = Interval(float, 0.0)
#: "auto", True or False (persist, store_kernel ...)
AUTO_OR_BOOL = Options("auto", True, False)


def as_constraints(constraint) -> tuple[Constraint, ...]:
    """The alternatives of a constraint: a :class:`Constraint`; a type (``int`` and
    ``float`` any :class:`Interval` of them, another an :class:`InstanceOf` it); None (the
    value None); or a list or tuple of these, a union."""
    if isinstance(constraint, (list, tuple)):
        return tuple(c for item in constraint for c in as_constraints(item))
    if isinstance(constraint, Constraint):
        return (constraint,)
    if constraint is None:
        return (Options(None),)
    if constraint in (int, float):
        return (Interval(constraint),)
    if isinstance(constraint, type):
        return (InstanceOf(constraint),)
    raise TypeError(f"not a parameter constraint: {constraint!r}")


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"


def check_param(name: str, value, constraint):
    """Check one parameter against a constraint (:func:`as_constraints`); return the value.

    With one constraint the message is its own (``"C must be > 0.0; got -1"``); with a
    union it names every alternative, the ones of the value's type first, by the bound the
    value breaks: ``"lam must be > 0.0 or 'auto'; got -1"``. ValueError when the value has
    the type of an alternative (or every alternative is a choice among literals), else
    TypeError."""
    alternatives = as_constraints(constraint)
    if any(c.accepts(value) for c in alternatives):
        return value
    if len(alternatives) == 1:
        raise alternatives[0].error(name, value)
    typed = [c for c in alternatives if c.matches_type(value)]
    parts = [c.violation(value) for c in typed] + [c.describe() for c in alternatives
                                                   if c not in typed]
    message = f"{name} must be {_joined(parts)}; got {value!r}"
    if typed or all(isinstance(c, Options) for c in alternatives):
        raise ValueError(message)
    raise TypeError(message)


def check_params(est, table: Mapping[str, object]) -> None:
    """Check every parameter of ``table`` (``name: constraint``): the attributes of an
    estimator, or the values of a mapping (a function's keyword arguments) that names them.
    The one form of a parameter table: an estimator's ``_params`` class attribute, a
    solver's ``@solver(params=...)``."""
    for name, constraint in table.items():
        if isinstance(est, Mapping):
            if name not in est:
                continue
            value = est[name]
        else:
            value = getattr(est, name)
        check_param(name, value, constraint)


_CHECKED: ContextVar[bool] = ContextVar("daskauc_params_checked", default=False)


@contextlib.contextmanager
def params_checked() -> Iterator[None]:
    """Within: functions with a table (:func:`checks`, the solvers) take their parameters as
    checked. An estimator enters it around its calls into solvers, after checking its own
    table. A context variable: other threads (and tasks) keep checking."""
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def checks(table: Mapping[str, object]) -> Callable[[Callable], Callable]:
    """Decorate a function that checks the arguments named in ``table`` (``name:
    constraint``) on each call, unless called within :func:`params_checked`; defaults are
    not checked. The table is the function's ``params``."""
    table = MappingProxyType(dict(table))
    for constraint in table.values():
        as_constraints(constraint)  # a bad table fails where it is written

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        unknown = sorted(set(table) - set(signature.parameters))
        if unknown:
            raise TypeError(f"{function.__name__} has no parameters {unknown}")

        @functools.wraps(function)
        def checked(*args, **kwargs):
            if table and not _CHECKED.get():
                try:
                    given = signature.bind_partial(*args, **kwargs).arguments
                except TypeError:  # a wrong call: the function says so itself
                    given = {}
                for name, constraint in table.items():
                    if name in given:
                        check_param(name, given[name], constraint)
            return function(*args, **kwargs)

        checked.params = table
        return checked

    return decorate


def params_of(function: Callable, *names: str) -> dict:
    """The constraints of ``names`` (all, without names) in a function's table
    (:func:`checks`): an estimator's table reads its solver's instead of repeating it."""
    table = function.params
    return {name: table[name] for name in (names or table)}


def seed_sequence(random_state) -> np.random.SeedSequence:
    """A SeedSequence from None, an int, a SeedSequence or a Generator."""
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(2**31)))
    if random_state is None or isinstance(random_state, Integral):
        return np.random.SeedSequence(random_state)
    raise TypeError(f"random_state must be None, an int or a numpy Generator; got {random_state!r}")


def child_seed(ss: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The child of ``ss`` at ``key``: the same one whenever it is asked for (``spawn`` counts
    its calls), so each stage of a fit draws from its own stream."""
    return np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, *key))
