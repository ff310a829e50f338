"""Parameter constraints (daskauc._params): each kind against a brute-force expectation,
union messages, the ``@checks`` tables of the solvers, and the context in which they are
taken as checked (``params_checked``), so that a parameter is checked once."""

from __future__ import annotations

import inspect
import math
import pathlib
import threading
from unittest import mock

import numpy as np
import pytest

import daskauc.solvers
from daskauc import KernelAUC
from daskauc._params import (
    AUTO_OR_BOOL,
    POSITIVE,
    ArrayLike,
    Constraint,
    FloatDType,
    Grid,
    InstanceOf,
    Interval,
    Options,
    as_constraints,
    check_param,
    check_params,
    checks,
    params_checked,
)
from daskauc._registry import SOLVERS
from daskauc.estimators.least_squares import LSAUC
from daskauc.estimators.ranksvm import RankSVM
from daskauc.solvers.newton import prsvm_newton
from daskauc.solvers.solam import solam
from daskauc.solvers.spdam import spdam
from daskauc.solvers.stats import lsauc

#: values of every kind a parameter is given
VALUES = [0, 1, 2, 3, -1, 0.0, 0.5, 1.0, 2.0, -0.5, 1e300, True, False, np.int64(2),
          np.float32(0.5), np.float64(1.0), np.bool_(True), math.nan, math.inf, -math.inf,
          "1", "auto", None, [1.0], np.array([1.0, 2.0])]


def _outcome(name, value, constraint):
    try:
        check_param(name, value, constraint)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    return None, ""


def _is_int(v) -> bool:
    return type(v) in (int, np.int64)


def _is_float(v) -> bool:
    return (_is_int(v) or type(v) in (float, np.float32, np.float64)) and math.isfinite(v)


def _in(v, low, high, closed) -> bool:
    left, right = closed in ("both", "left"), closed in ("both", "right")
    above = low is None or v > low or (left and v == low)
    below = high is None or v < high or (right and v == high)
    return above and below


@pytest.mark.parametrize("kind, low, high, closed", [
    (kind, low, high, closed)
    for kind in (int, float)
    for low, high in ((None, None), (0, None), (None, 1), (0, 2), (1, 1))
    for closed in ("both", "left", "right", "neither")
    if not (low == high == 1 and closed != "both")
])
def test_interval_against_brute_force(kind, low, high, closed):
    c = Interval(kind, low, high, closed=closed)
    for v in VALUES:
        typed = _is_int(v) if kind is int else _is_float(v)
        expected = None if typed and _in(v, low, high, closed) else (
            ValueError if typed else TypeError)
        error, message = _outcome("p", v, c)
        assert error is expected, (v, message)
        assert c.accepts(v) is (expected is None)
        if error is not None:
            assert message.startswith("p must be ") and message.endswith(f"; got {v!r}")
        if error is TypeError:  # the message of the older check, word for word
            assert message == f"p must be {kind.__name__}; got {v!r}"


def test_interval_says_the_bound_broken():
    assert _outcome("C", -1.0, POSITIVE) == (ValueError, "C must be > 0.0; got -1.0")
    assert _outcome("m", 0, Interval(int, 1)) == (ValueError, "m must be >= 1; got 0")
    assert _outcome("t", 2.0, Interval(float, 0.0, 1.0, closed="right")) == (
        ValueError, "t must be <= 1.0; got 2.0")
    assert _outcome("t", 1.0, Interval(float, 0.0, 1.0, closed="left")) == (
        ValueError, "t must be < 1.0; got 1.0")
    assert Interval(float, 0.0, 1.0, closed="right").describe() == "a float > 0.0 and <= 1.0"
    assert Interval(int, 1).describe() == "an int >= 1"
    with pytest.raises(TypeError, match="int or float"):
        Interval(str)
    with pytest.raises(ValueError, match="closed must be"):
        Interval(int, closed="open")
    with pytest.raises(ValueError, match="low=2 > high=1"):
        Interval(int, 2, 1)


@pytest.mark.parametrize("choices", [("a", "b"), (True, False), ("auto", True, False), (1, 2),
                                     ("x", None), (0.5,)])
def test_options_against_brute_force(choices):
    c = Options(*choices)

    def expected(v):  # a bool only for a bool, None only for None, a string for a string
        for o in choices:
            if isinstance(o, bool) or isinstance(v, (bool, np.bool_)):
                if isinstance(o, bool) and isinstance(v, (bool, np.bool_)) and v == o:
                    return True
            elif o is None or v is None:
                if v is o:
                    return True
            elif isinstance(o, str) == isinstance(v, str) and not isinstance(v, (list,
                                                                                 np.ndarray)):
                if v == o:
                    return True
        return False

    for v in VALUES:
        error, message = _outcome("p", v, c)
        assert c.accepts(v) is expected(v), v
        # a value outside a choice of literals is a ValueError whatever its type, as before
        assert error is (None if expected(v) else ValueError), v
        if error:
            assert message == f"p must be one of {sorted(map(str, choices))}; got {v!r}"


def test_bool_is_never_an_int_and_int_never_a_bool():
    assert not Options(1, 2).accepts(True)
    assert not Options(True, False).accepts(1) and not Options(True, False).accepts(0)
    assert not AUTO_OR_BOOL.accepts(1) and AUTO_OR_BOOL.accepts(np.False_)
    assert not Interval(int).accepts(True) and not Interval(float).accepts(False)
    assert not InstanceOf(int).accepts(1.0) and InstanceOf(bool).accepts(True)


def test_instance_of_and_the_shorthands():
    assert _outcome("w", "yes", bool) == (TypeError, "w must be bool; got 'yes'")
    assert _outcome("s", 3, str) == (TypeError, "s must be str; got 3")
    assert _outcome("s", 3, InstanceOf((str, bytes))) == (TypeError,
                                                          "s must be str or bytes; got 3")
    assert [type(c) for c in as_constraints([int, float, bool, None])] == [
        Interval, Interval, InstanceOf, Options]
    with pytest.raises(TypeError, match="not a parameter constraint"):
        as_constraints({"low": 0})  # the older (kind, {...}) tables fail where written
    with pytest.raises(TypeError, match="not a parameter constraint"):
        check_params({"a": 1}, {"a": (int, {"low": 0})})


def test_grid_dtype_and_array():
    for grid, ok in (([1.0, 2.0], True), ((3,), True), (np.array([0.1]), True), ([], False),
                     ([1.0, -1.0], False), ([1.0, math.nan], False), ([0.0], False),
                     ([[1, 2], [3]], False)):
        assert Grid().accepts(grid) is ok, grid
    assert _outcome("g", [], [Grid(), None]) == (
        ValueError, "g must be a non-empty sequence of positive finite numbers or None; got []")
    assert _outcome("g", "1,2", Grid())[0] is TypeError
    for dtype, ok in (("float32", True), (np.float64, True), (None, True), ("int8", False),
                      ("nonsense", False), (3, False)):
        assert FloatDType().accepts(dtype) is ok, dtype
    assert _outcome("dtype", "int8", FloatDType()) == (
        TypeError, "dtype must be float32 or float64; got 'int8'")
    assert ArrayLike().accepts(np.zeros((2, 2))) and not ArrayLike().accepts("kmeans")


def test_union_messages_name_every_alternative():
    lam = [Options("auto"), POSITIVE]
    gamma = [Options("auto", "rule"), POSITIVE, None]
    # the type of no alternative: TypeError, every alternative in the order written
    assert _outcome("lam", [1], lam) == (TypeError, "lam must be 'auto' or a float > 0.0; "
                                                    "got [1]")
    assert _outcome("lam", True, lam)[0] is TypeError
    assert _outcome("lam", math.nan, lam)[0] is TypeError
    assert _outcome("gamma", b"x", gamma) == (
        TypeError, "gamma must be one of ['auto', 'rule'], a float > 0.0 or None; got b'x'")
    # the type of one: ValueError, that alternative first, by what the value breaks
    assert _outcome("lam", "big", lam) == (ValueError, "lam must be 'auto' or a float > 0.0; "
                                                       "got 'big'")
    assert _outcome("lam", -1.0, lam) == (ValueError, "lam must be > 0.0 or 'auto'; got -1.0")
    assert _outcome("gamma", "median", gamma) == (
        ValueError, "gamma must be one of ['auto', 'rule'], a float > 0.0 or None; "
                    "got 'median'")
    for v in ("auto", "rule", 0.5, 3, None):
        assert check_param("gamma", v, gamma) is v
    # a union of literal choices keeps their ValueError
    assert _outcome("s", 3, [Options("a"), None])[0] is ValueError


# ------------------------------------------------------------------ tables and the context


@checks({"a": Interval(int, 0), "b": [Options("auto"), POSITIVE]})
def _f(a, b="auto", *, c=None):
    return a, b


def test_checks_checks_what_is_passed_positionally_or_by_name():
    assert _f(1) == (1, "auto") and _f(1, 2.0) == (1, 2.0) and _f(a=0, b=0.5, c=-1)
    with pytest.raises(ValueError, match="a must be >= 0; got -1"):
        _f(-1)
    with pytest.raises(ValueError, match="b must be > 0.0 or 'auto'; got 0.0"):
        _f(1, 0.0)
    with pytest.raises(TypeError, match="b must be 'auto' or a float > 0.0; got None"):
        _f(1, b=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'd'"):
        _f(1, d=2)  # a wrong call is the function's to report
    assert dict(_f.params) == {"a": _f.params["a"], "b": _f.params["b"]}
    assert inspect.signature(_f) == inspect.signature(_f.__wrapped__)
    with pytest.raises(TypeError, match=r"has no parameters \['z'\]"):
        checks({"z": int})(lambda a: a)


def test_the_context_skips_the_checks_and_restores_them():
    with params_checked():
        assert _f(-1, "nonsense") == (-1, "nonsense")
        with params_checked():  # nested
            assert _f(-1) == (-1, "auto")
        assert _f(-2) == (-2, "auto")  # still inside the outer one
    with pytest.raises(ValueError, match="a must be >= 0"):
        _f(-1)
    with pytest.raises(RuntimeError, match="inside"):  # left by an exception
        with params_checked():
            raise RuntimeError("inside")
    with pytest.raises(ValueError, match="a must be >= 0"):
        _f(-1)


def test_the_context_is_per_thread():
    """A thread started inside the context does not inherit it (a context variable): it
    checks; one running beside the context is not affected by it either."""
    seen = []

    def call():
        try:
            _f(-1)
            seen.append("unchecked")
        except ValueError:
            seen.append("checked")

    with params_checked():
        t = threading.Thread(target=call)
        t.start()
        t.join()
    inside, outside = threading.Event(), threading.Event()

    def hold():
        with params_checked():
            inside.set()
            outside.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    call()
    outside.set()
    t.join()
    assert seen == ["checked", "checked"]


def _problem(n=60, r=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, r))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(n) > 0, 1, -1).astype(np.int8)
    return X, y


def test_a_solver_called_directly_raises_as_before():
    """The messages the solvers' hand checks gave, word for word, now from their tables."""
    X, y = _problem()
    cases = [
        (solam, {"zeta": -1.0}, ValueError, "zeta must be > 0.0; got -1.0"),
        (solam, {"penalty": "l1"}, ValueError,
         "penalty must be one of ['l2', 'projection']; got 'l1'"),
        (spdam, {"batch_size": 1.5}, TypeError, "batch_size must be int; got 1.5"),
        (prsvm_newton, {"C": 0.0}, ValueError, "C must be > 0.0; got 0.0"),
        (prsvm_newton, {"cg_tol": 2.0}, ValueError, "cg_tol must be <= 1.0; got 2.0"),
        (prsvm_newton, {"precondition": 1}, TypeError, "precondition must be bool; got 1"),
        (prsvm_newton, {"line_search": "x"}, ValueError,
         "line_search must be one of ['armijo', 'exact']; got 'x'"),
        (lsauc, {"lam": -1.0}, ValueError, "lam must be >= 0.0; got -1.0"),
    ]
    for fn, kwargs, error, message in cases:
        with pytest.raises(error) as info:
            fn(X, y, **kwargs)
        assert str(info.value) == message


def test_a_solver_table_keeps_when_a_check_applies():
    """An optional parameter is checked only when given (its message now names None too),
    pair_moments only when a string; a choice of True and False no longer takes 1."""
    X, y = _problem()
    assert solam(X, y, kappa=None, n_epochs=1).coef.shape == (4,)
    assert prsvm_newton(X, y, decrement_tol=None, pair_moments=np.eye(4), max_iter=2).n_iter <= 2
    with pytest.raises(ValueError, match=r"kappa must be > 0.0 or None; got 0.0"):
        solam(X, y, kappa=0.0)
    with pytest.raises(ValueError, match="decrement_tol must be >= 0.0 or None; got -1.0"):
        prsvm_newton(X, y, decrement_tol=-1.0)
    with pytest.raises(ValueError, match=r"pair_moments must be 'auto' or None or an array"):
        prsvm_newton(X, y, pair_moments="yes")
    with pytest.raises(ValueError, match=r"pair_moments must be a finite \(4, 4\) matrix"):
        prsvm_newton(X, y, pair_moments=np.eye(3))  # the shape is the solver's to check
    with pytest.raises(ValueError, match="persist must be one of"):
        prsvm_newton(X, y, persist=1)


def test_a_solver_in_the_context_takes_its_parameters_as_checked():
    X, y = _problem()
    with pytest.raises(ValueError, match="lam must be >= 0.0"):
        lsauc(X, y, lam=-1e-6)
    with params_checked():  # a composite model that checked lam itself
        assert np.isfinite(lsauc(X, y, lam=-1e-6).coef).all()


#: the keyword parameters each solver checked by hand before its table (issue 41)
HAND_CHECKED = {
    "prsvm_newton": {"C", "tol", "max_iter", "cg_tol", "max_cg", "precondition",
                     "line_search", "persist", "pair_moments", "decrement_tol"},
    "kernel_pairwise_newton": {"tol", "max_iter", "cg_tol", "max_cg", "precondition",
                               "weighting", "line_search", "persist", "store_kernel", "lam",
                               "gamma"},
    "kernel_lsauc": {"tol", "max_iter", "precondition", "persist", "lam", "gamma"},
    "lsauc": {"lam"},
    "opauc": {"lam", "eta", "n_epochs"},
    "solam": {"zeta", "R", "penalty", "lam", "variant", "kappa", "n_epochs"},
    "spam": {"lam", "l1", "eta", "schedule", "average", "n_epochs"},
    "spdam": {"lam", "batch_size", "n_epochs", "R"},
    "twopass_auc": {"lam", "eta", "schedule", "n_epochs"},
    "pairwise_hinge_sgd": {"lam"},
    "oam": {"update"},
    "univariate_sgd": {"loss", "schedule"},
}


def test_every_solver_has_a_table():
    assert daskauc.solvers  # every family registered
    assert set(HAND_CHECKED) <= set(SOLVERS)
    for name, entry in SOLVERS.items():
        table = dict(entry.params)
        assert table, f"{name} registers no params"
        assert HAND_CHECKED.get(name, set()) <= set(table), name
        assert set(table) <= set(entry.parameters), name  # keyword parameters only
        assert all(isinstance(c, Constraint) for v in table.values() for c in as_constraints(v))
        assert entry.function.params is entry.params


def test_no_solver_checks_by_hand():
    """The solver functions' parameters are checked by their tables, once: none calls
    check_param in its body (the count was 54 before the tables)."""
    solvers = pathlib.Path(daskauc.solvers.__file__).parent
    assert {p.name: p.read_text().count("check_param(") for p in solvers.glob("*.py")
            if "check_param(" in p.read_text()} == {}


def _interval_checks_of(value):
    """A list of the times an Interval is asked whether it accepts ``value``, and the patch
    that fills it."""
    calls = []
    accepts = Interval.accepts

    def counted(self, v):
        if type(v) is type(value) and v == value:
            calls.append(self.describe())
        return accepts(self, v)

    return calls, mock.patch.object(Interval, "accepts", counted)


@pytest.mark.parametrize("make", [
    lambda: LSAUC(lam=0.00123),
    lambda: RankSVM(C=0.00123),
    lambda: RankSVM(C="auto", tol=0.00123),
])
def test_an_estimator_checks_its_parameters_once(make):
    """The estimator's table checks the parameter, the solvers it calls do not again."""
    X, y = _problem(n=120)
    calls, patch = _interval_checks_of(0.00123)
    with patch:
        make().fit(X, y)
    assert len(calls) == 1, calls


def test_kernel_auc_checks_its_unions_from_its_table():
    """The five checks KernelAUC wrote by hand are constraints of its table: named, the
    alternatives listed, before any work."""
    assert {"lam", "gamma", "centres", "dtype", "gamma_grid", "lam_grid"} <= set(
        KernelAUC._params)
    assert not hasattr(KernelAUC, "_check_params")
    X, y = _problem(n=40, r=3)
    cases = [({"lam": "x"}, ValueError, "lam must be 'auto' or a float > 0.0; got 'x'"),
             ({"lam": 0.0}, ValueError, "lam must be > 0.0 or 'auto'; got 0.0"),
             ({"gamma": [1.0]}, TypeError,
              "gamma must be one of ['auto', 'rule'] or a float > 0.0; got [1.0]"),
             ({"centres": "random"}, ValueError,
              "centres must be one of ['kmeans', 'uniform'] or an array (m, n_features); "
              "got 'random'"),
             ({"dtype": "int8"}, TypeError, "dtype must be float32 or float64; got 'int8'"),
             ({"lam_grid": [1.0, 0.0]}, ValueError,
              "lam_grid must be a non-empty sequence of positive finite numbers or None; "
              "got [1.0, 0.0]")]
    for params, error, message in cases:
        with mock.patch("daskauc.estimators.kernel.check_X_y",
                        side_effect=AssertionError("checked after the data")):
            with pytest.raises(error) as info:
                KernelAUC(**params).fit(X, y)
        assert str(info.value) == message
    calls, patch = _interval_checks_of(0.00123)
    for solver in ("kernel", "embedding"):
        calls.clear()
        with patch:
            KernelAUC(n_centres=10, gamma=0.5, lam=0.00123, solver=solver).fit(X, y)
        assert calls == ["a float > 0.0"], (solver, calls)


def test_estimator_tables_read_their_solvers_constraints():
    """One place for each parameter: where an estimator takes what its solver takes, its
    table holds the solver's constraint itself."""
    assert RankSVM._params["tol"] is prsvm_newton.params["tol"]
    assert LSAUC._params["lam"] is lsauc.params["lam"]
    shared = [(cls, SOLVERS[name]) for cls, name in (
        (RankSVM, "prsvm_newton"), (LSAUC, "lsauc"))]
    for cls, entry in shared:
        common = set(cls._params) & set(entry.params)
        assert common and all(cls._params[p] is entry.params[p] for p in common
                              if p != "C"), cls

