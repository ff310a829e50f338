"""Parameters: one check per parameter (:func:`check_param`), an estimator's table of them
(:func:`check_params`), and seeds (:func:`seed_sequence`, :func:`child_seed`)."""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np


def check_param(name: str, value, kind, *, low=None, high=None, include_low=True, choices=None):
    """Check one estimator parameter; the message names it, the valid range and the value."""
    if choices is not None:
        if value not in choices:
            raise ValueError(f"{name} must be one of {sorted(map(str, choices))}; got {value!r}")
        return value
    if kind is int:
        ok = isinstance(value, Integral) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, Real) and not isinstance(value, bool) and np.isfinite(value)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise TypeError(f"{name} must be {getattr(kind, '__name__', kind)}; got {value!r}")
    if low is not None and (value < low or (value == low and not include_low)):
        rng = f"{'>=' if include_low else '>'} {low}"
        raise ValueError(f"{name} must be {rng}; got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}; got {value!r}")
    return value


def check_params(est, table: Mapping[str, tuple]) -> None:
    """Check every parameter listed in ``table`` as ``name: (kind, kwargs)``: the attributes
    of an estimator, or the values of a mapping (a function's keyword arguments) that names
    them. The one form of a parameter table: an estimator's ``_params`` class attribute."""
    for pname, (kind, kwargs) in table.items():
        if isinstance(est, Mapping):
            if pname not in est:
                continue
            value = est[pname]
        else:
            value = getattr(est, pname)
        if value is None and kwargs.get("optional"):
            continue
        check_param(pname, value, kind, **{k: v for k, v in kwargs.items() if k != "optional"})


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
