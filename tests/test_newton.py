"""PRSVM+ truncated Newton: pair coefficients, objective, Hessian products, solver, estimator.

Every quantity is compared with the brute-force pairwise oracles of tests/reference/pairwise.py
(all pairs formed explicitly) or with scipy / scikit-learn.
"""

from __future__ import annotations

import logging
import pickle

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback
from reference import pairwise as ref
from scipy.optimize import minimize, minimize_scalar
from sklearn.base import clone
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

import daskauc.engine.placement as placement
from daskauc import _config
from daskauc.engine.chain_plan import is_materialized
from daskauc.engine.placement import persist_chunks
from daskauc.estimators.ranksvm import RankSVM
from daskauc.model_selection import cv_select_C
from daskauc.solvers._pairwise_kernels import _matvec_f64, _rmatvec_f64, _rmatvec_sq_f64
from daskauc.solvers.linesearch import line_search_armijo, line_search_exact
from daskauc.solvers.newton import prsvm_newton, sampled_pair_moments
from daskauc.solvers.pairwise import (
    PairwiseOperator,
    class_indices,
    hessian_product,
    objective_gradient,
    pairwise_coefficients,
)
from daskauc.solvers.stats import class_statistics, pair_second_moment

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _integer_problem(seed, n=60, d=3):
    """Integer X and w: integer scores with many ties and many pairs exactly 1 apart."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-2, 3, size=(n, d)).astype(np.float64)
    w = rng.integers(-1, 2, size=d).astype(np.float64)
    if not w.any():
        w[0] = 1.0
    y = np.where(rng.random(n) < 0.35, 1, -1).astype(np.int8)
    y[:2] = [1, -1]
    return X, y, w


def _float_problem(seed, n=120, d=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + rng.standard_normal(n) > 0.6, 1, -1).astype(np.int8)
    return X, y


def _row_order(idx):
    """Map coefficients stored in sorted-class order back to that class's row order."""
    return np.argsort(idx, kind="stable")


# ------------------------------------------------------------------------- pair coefficients


@pytest.mark.parametrize("seed", range(4))
def test_coefficients_match_brute_force_with_ties_and_unit_gaps(seed):
    X, y, w = _integer_problem(seed)
    o = X @ w
    M = ref.pair_margins(o, y)
    assert (M == 0).any(), "the data must contain pairs exactly on the hinge"
    assert len(np.unique(o)) < o.size, "the data must contain tied scores"
    pos, neg = class_indices(y)
    c = pairwise_coefficients(o, pos, neg)
    alpha, beta, gamma, delta = ref.coefficients(o, y)
    np.testing.assert_array_equal(c.alpha[_row_order(c.pos_idx)], alpha)
    np.testing.assert_array_equal(c.beta[_row_order(c.pos_idx)], beta)
    np.testing.assert_array_equal(c.gamma[_row_order(c.neg_idx)], gamma)
    np.testing.assert_array_equal(c.delta[_row_order(c.neg_idx)], delta)
    assert c.loss == ref.loss(o, y)
    np.testing.assert_array_equal(c.g, ref.score_gradient(o, y))
    assert c.n_active_pairs == int((M > 0).sum())
    # the formulas for g in terms of the coefficients (docs/algorithms.md, PRSVM+)
    P, N = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
    np.testing.assert_array_equal(c.g[P], -((1 - o[P]) * alpha + beta))
    np.testing.assert_array_equal(c.g[N], (1 + o[N]) * gamma - delta)


def test_pair_exactly_on_the_hinge_is_inactive():
    # one positive at 0; negatives at -1 (margin exactly 0), 0 (tie, margin 1), -2 (margin -1)
    o = np.array([0.0, -1.0, 0.0, -2.0])
    y = np.array([1, -1, -1, -1])
    c = pairwise_coefficients(o, *class_indices(y))
    assert c.n_active_pairs == 1
    assert c.loss == 1.0  # only the tie contributes (1 - 0 + 0)^2
    np.testing.assert_array_equal(c.g, [-1.0, 0.0, 1.0, 0.0])
    q = np.array([1.0, 10.0, 2.0, 100.0])
    np.testing.assert_array_equal(c.laplacian_matvec(q), ref.laplacian(o, y) @ q)
    np.testing.assert_array_equal(c.laplacian_matvec(q), [-1.0, 0.0, 1.0, 0.0])


@pytest.mark.parametrize("kind", ["integer", "float"])
def test_laplacian_matches_brute_force(kind):
    if kind == "integer":
        X, y, w = _integer_problem(11, n=50)
        o = X @ w
    else:
        rng = np.random.default_rng(3)
        y = np.where(rng.random(70) < 0.3, 1, -1)
        o = rng.standard_normal(70) * 1.5
    c = pairwise_coefficients(o, *class_indices(y))
    L = ref.laplacian(o, y)
    q = np.random.default_rng(5).standard_normal(o.size)
    np.testing.assert_allclose(c.laplacian_matvec(q), L @ q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(c.loss, ref.loss(o, y), rtol=1e-12)
    np.testing.assert_allclose(c.g, ref.score_gradient(o, y), rtol=0, atol=1e-12)


def test_sort_hint_gives_identical_coefficients():
    rng = np.random.default_rng(0)
    o = rng.standard_normal(500)
    y = np.where(rng.random(500) < 0.2, 1, -1)
    pos, neg = class_indices(y)
    a = pairwise_coefficients(o, pos, neg)
    b = pairwise_coefficients(o, rng.permutation(pos), rng.permutation(neg))
    np.testing.assert_array_equal(a.g, b.g)
    assert a.loss == b.loss


def test_coefficients_reject_bad_scores():
    with pytest.raises(ValueError, match="NaN or infinity"):
        pairwise_coefficients(np.array([0.0, np.nan]), np.array([0]), np.array([1]))
    with pytest.raises(ValueError, match="both positive"):
        class_indices(np.array([1, 1, 1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mixed_precision_kernels_on_read_only_blocks(dtype):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1003, 37)).astype(dtype)  # rows not a multiple of 4
    X.setflags(write=False)
    v, u = rng.standard_normal(37), rng.standard_normal(1003)
    u[:8] = 0.0  # the zero-skip branch
    out = np.empty(1003)
    _matvec_f64(X, v, out)
    acc = np.zeros(37)
    _rmatvec_f64(X, u, acc)
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(out, X64 @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(acc, X64.T @ u, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_gradient_and_preconditioner_kernel(dtype):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1003, 37)).astype(dtype)
    X.setflags(write=False)
    u, d = rng.standard_normal(1003), rng.integers(0, 9, 1003).astype(float)
    out_u, out_d = np.full(37, 0.5), np.full(37, 0.25)  # accumulates into what is there
    _rmatvec_sq_f64(X, u, d, out_u, out_d)
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(out_u, 0.5 + X64.T @ u, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out_d, 0.25 + (X64**2).T @ d, rtol=1e-12, atol=1e-12)


def test_degree_is_the_laplacian_diagonal():
    X, y, w = _integer_problem(3)  # ties and pairs exactly 1 apart
    o = X @ w
    coef = pairwise_coefficients(o, *class_indices(y))
    np.testing.assert_array_equal(coef.degree, np.diag(ref.laplacian(o, y)))


# ------------------------------------------------------------- objective, gradient, Hessian


@pytest.mark.parametrize("seed", range(3))
def test_objective_and_gradient_match_brute_force_integer_scores(seed):
    X, y, w = _integer_problem(seed)
    Xd = da.from_array(X, chunks=(17, 3))
    F, grad = objective_gradient(Xd, y, w, C=0.3)
    np.testing.assert_allclose(F, ref.objective(w, X, y, 0.3), rtol=1e-12)
    np.testing.assert_allclose(grad, ref.gradient(w, X, y, 0.3), rtol=1e-10, atol=1e-10)


def test_objective_and_gradient_match_brute_force_float():
    X, y = _float_problem(0)
    w = np.random.default_rng(1).standard_normal(X.shape[1])
    F, grad = objective_gradient(X, y, w, C=0.7)
    np.testing.assert_allclose(F, ref.objective(w, X, y, 0.7), rtol=1e-10)
    np.testing.assert_allclose(grad, ref.gradient(w, X, y, 0.7), rtol=1e-10, atol=1e-10)


def test_hessian_product_matches_brute_force_and_finite_differences():
    X, y = _float_problem(2)
    rng = np.random.default_rng(4)
    w, v = rng.standard_normal(X.shape[1]), rng.standard_normal(X.shape[1])
    C = 0.4
    Xd = da.from_array(X, chunks=(25, X.shape[1]))
    Hv = hessian_product(Xd, y, w, v, C=C)
    np.testing.assert_allclose(Hv, ref.hessian(w, X, y, C) @ v, rtol=1e-10, atol=1e-10)
    # central differences of the gradient, with a step that crosses no hinge
    A = ref.pair_difference_matrix(X, y)
    margins = np.abs(1.0 - A @ w)
    eps = 1e-6
    assert margins.min() > 10 * eps * np.abs(A @ v).max(), "a pair sits on a kink; reseed"
    fd = (ref.gradient(w + eps * v, X, y, C) - ref.gradient(w - eps * v, X, y, C)) / (2 * eps)
    np.testing.assert_allclose(Hv, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


# ---------------------------------------------------------------------------- line searches


@pytest.mark.parametrize("seed", range(3))
def test_exact_line_search_minimizes_brute_force_phi(seed):
    X, y = _float_problem(seed + 10, n=80)
    rng = np.random.default_rng(seed)
    w, s = rng.standard_normal(4) * 0.3, rng.standard_normal(4)
    C = 0.2
    grad = ref.gradient(w, X, y, C)
    if grad @ s > 0:
        s = -s  # a descent direction
    o, d = X @ w, X @ s
    pos, neg = class_indices(y)
    t, coef, phi_t, _ = line_search_exact(o, d, pos, neg, C=C, ww=w @ w, ws=w @ s, ss=s @ s,
                                          dphi0=grad @ s, t0=1.0)
    def phi(t):
        return ref.objective(w + t * s, X, y, C)

    best = minimize_scalar(phi, bounds=(0.0, 10.0), method="bounded",
                           options={"xatol": 1e-12})
    np.testing.assert_allclose(phi_t, phi(t), rtol=1e-12)
    assert phi_t <= best.fun * (1 + 1e-12)
    dphi = ref.gradient(w + t * s, X, y, C) @ s
    assert abs(dphi) <= 1e-8 * abs(grad @ s)
    ta, _, phia, _ = line_search_armijo(o, d, pos, neg, C=C, ww=w @ w, ws=w @ s, ss=s @ s,
                                        dphi0=grad @ s, phi0=phi(0.0))
    assert phia <= phi(0.0) + 1e-4 * ta * (grad @ s)


# ---------------------------------------------------------------------------------- solver


def _lbfgs_reference(X, y, C):
    res = minimize(lambda w: (ref.objective(w, X, y, C), ref.gradient(w, X, y, C)),
                   np.zeros(X.shape[1]), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-11, "ftol": 1e-16, "maxiter": 5000})
    return res.x, res.fun


@pytest.mark.parametrize("line_search", ["exact", "armijo"])
@pytest.mark.parametrize("C", [0.01, 1.0])
def test_solution_matches_lbfgs_on_brute_force(line_search, C):
    X, y = _float_problem(7)
    w_ref, f_ref = _lbfgs_reference(X, y, C)
    res = prsvm_newton(X, y, C=C, tol=1e-8, line_search=line_search)
    assert res.converged
    assert res.history[-1]["rel_grad_norm"] <= 1e-8
    f = ref.objective(res.coef, X, y, C)
    assert abs(f - f_ref) <= 1e-6 * f_ref
    assert f <= f_ref * (1 + 1e-12)  # never worse than L-BFGS
    np.testing.assert_allclose(res.coef, w_ref, rtol=1e-4, atol=1e-5)
    # the relative gradient norm is measured against its two terms, ||w|| and ||2C X^T g||
    g = ref.gradient(res.coef, X, y, C)
    terms = max(np.linalg.norm(res.coef), np.linalg.norm(g - res.coef))
    # (the gradient is a difference of terms ~1e9 times larger: float64 rounding ~1e-12)
    np.testing.assert_allclose(res.history[-1]["rel_grad_norm"], np.linalg.norm(g) / terms,
                               rtol=1e-4, atol=1e-11)


def test_a_warm_started_path_reaches_each_C_optimum_at_large_C():
    """The oracle is L-BFGS on the brute-force objective at each C. Along a path over
    increasing C, each warm-started solve reaches that C's optimum. Measured against
    ||grad F(0)||, which grows with C, the solves at C = 1 and 16 stopped at once (0 Newton
    steps) with the previous C's w, 4.6e-3 and 4.8e-3 away from the optimum (relative);
    against the gradient's two terms they take 4 steps and land within 1e-8."""
    rng = np.random.default_rng(3)
    n, d = 300, 30
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 3 * rng.normal(size=n) > 0, 1, -1)
    est = RankSVM(C=2.0**-12, warm_start=True)
    for C in 2.0 ** np.arange(-12, 5, 4):
        est.set_params(C=float(C)).fit(X, y)
        w_ref, f_ref = _lbfgs_reference(X, y, C)
        assert est.n_iter_ >= 1
        assert ref.objective(est.coef_, X, y, C) <= f_ref * (1 + 1e-6)
        assert np.linalg.norm(est.coef_ - w_ref) <= 1e-3 * np.linalg.norm(w_ref), C


def test_preconditioning_same_optimum_fewer_cg_steps():
    # columns on scales 1e-3..1 (as a Nystroem embedding's): Jacobi must cut the CG steps and
    # both variants must reach the brute-force optimum
    rng = np.random.default_rng(11)
    n, r = 300, 40
    X = rng.standard_normal((n, r)) * np.logspace(-3, 0, r)
    y = np.where(X @ rng.standard_normal(r) + 0.3 * rng.standard_normal(n) > 0, 1, -1)
    C = 10.0
    w_ref, f_ref = _lbfgs_reference(X, y, C)
    settings = {"moments": {"precondition": True},  # "auto": the pairs' second moment
                "jacobi": {"precondition": True, "pair_moments": None},
                "none": {"precondition": False}}
    runs = {k: prsvm_newton(X, y, C=C, tol=1e-8, cg_tol=1e-6, max_cg=500, **kw)
            for k, kw in settings.items()}
    for res in runs.values():
        assert res.converged
        assert abs(ref.objective(res.coef, X, y, C) - f_ref) <= 1e-6 * f_ref
    cg = {k: sum(h.get("cg_iter", 0) for h in res.history) for k, res in runs.items()}
    assert cg["jacobi"] < 0.5 * cg["none"], cg
    assert cg["moments"] < cg["jacobi"], cg
    # correlated columns (a Nystroem embedding's are): the diagonal cannot see them, the
    # pairs' second moment does
    X = X @ rng.standard_normal((r, r))
    runs = {k: prsvm_newton(X, y, C=0.1, tol=1e-6, cg_tol=1e-6, max_cg=1000, **kw)
            for k, kw in settings.items()}
    cg = {k: sum(h.get("cg_iter", 0) for h in res.history) for k, res in runs.items()}
    assert cg["moments"] < 0.5 * min(cg["jacobi"], cg["none"]), cg


def test_pair_second_moment_is_the_mean_over_pairs():
    X, y = _float_problem(5, n=50, d=3)
    P, N = X[y > 0], X[y < 0]
    d = (P[:, None, :] - N[None, :, :]).reshape(-1, X.shape[1])
    E = pair_second_moment(class_statistics(X, y))
    np.testing.assert_allclose(E, d.T @ d / d.shape[0], rtol=1e-12)
    # a sample of every row is every row
    np.testing.assert_allclose(sampled_pair_moments(da.from_array(X, chunks=(20, 3)), y), E,
                               rtol=1e-12)


def test_second_moment_preconditioner_is_the_hessian_at_zero():
    # at w = 0 every pair is active, so I + 2C n+ n- E is the Hessian itself and
    # preconditioned CG ends after one product
    X, y = _float_problem(8, n=200, d=6)
    X[:, 1] *= 1e-3
    res = prsvm_newton(X, y, C=0.5, tol=1e-6, cg_tol=1e-10, max_cg=50)
    assert res.history[1]["cg_iter"] == 1
    assert res.history[1]["cg_rel_residual"] < 1e-10
    jacobi = prsvm_newton(X, y, C=0.5, tol=1e-6, cg_tol=1e-10, max_cg=50, pair_moments=None)
    assert jacobi.history[1]["cg_iter"] > 1
    np.testing.assert_allclose(res.coef, jacobi.coef, rtol=1e-4, atol=1e-8)


def test_pair_moments_must_match_X():
    X, y = _float_problem(0, n=30)
    with pytest.raises(ValueError, match=r"pair_moments must be a finite \(4, 4\) matrix"):
        prsvm_newton(X, y, pair_moments=np.eye(3))
    with pytest.raises(ValueError, match="pair_moments must be 'auto' or None or an array"):
        prsvm_newton(X, y, pair_moments="yes")


def test_default_tolerance_and_history():
    X, y = _float_problem(8, n=200)
    res = prsvm_newton(X, y, C=0.1)
    h = res.history
    assert res.converged and h[-1]["rel_grad_norm"] <= 1e-3
    assert len(h) == res.n_iter + 1
    obj = [r["objective"] for r in h]
    assert all(b < a for a, b in zip(obj, obj[1:], strict=False))
    for r in h[1:]:
        assert r["cg_iter"] >= 1 and r["step"] > 0 and r["seconds"] >= 0
    np.testing.assert_allclose(h[-1]["objective"], ref.objective(res.coef, X, y, 0.1),
                               rtol=1e-12)


@pytest.fixture(scope="module")
def medium():
    rng = np.random.default_rng(21)
    n, d = 2400, 8
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.standard_normal(n) > 1.2, 1, -1)
    res = prsvm_newton(X, y, C=0.02, tol=1e-10)
    assert res.converged
    return X, y, res.coef


@pytest.mark.parametrize("kind", ["dask-1-chunk", "dask-uneven-chunks", "persisted",
                                  "zarr-streamed", "zarr-persisted", "zarr-half-cached",
                                  "float32"])
def test_same_model_from_every_input_kind(medium, kind, tmp_path, monkeypatch):
    X, y, w_np = medium
    persist = "auto"
    rtol = 1e-8
    if kind == "dask-1-chunk":
        Xin = da.from_array(X, chunks=X.shape)
    elif kind == "dask-uneven-chunks":
        Xin = da.from_array(X, chunks=((700, 900, 13, 787), (X.shape[1],)))
    elif kind == "persisted":
        Xin = da.from_array(X, chunks=(500, X.shape[1])).persist()
    elif kind.startswith("zarr"):
        path = str(tmp_path / "X.zarr")
        da.to_zarr(da.from_array(X, chunks=(600, X.shape[1])), path)
        Xin = da.from_zarr(path)
        persist = "auto" if kind == "zarr-half-cached" else kind == "zarr-persisted"
        if kind == "zarr-half-cached":  # room for half of X: 2 of its 4 chunks stay in memory
            monkeypatch.setattr(placement, "memory_budget",
                                lambda client=None, working_bytes=0: X.nbytes // 2)
    else:  # float32 data: the solution moves by the rounding of X, not by the solver
        X32 = X.astype(np.float32)
        w_np = prsvm_newton(X32.astype(np.float64), y, C=0.02, tol=1e-10).coef
        Xin = da.from_array(X32, chunks=(500, X.shape[1]))
        rtol = 1e-7
    res = prsvm_newton(Xin, y, C=0.02, tol=1e-10, persist=persist)
    assert res.converged
    if kind.startswith("zarr"):
        assert res.state["persisted"] is (kind == "zarr-persisted")
        assert res.state["cached_fraction"] == {"zarr-persisted": 1.0, "zarr-streamed": 0.0,
                                                "zarr-half-cached": 0.5}[kind]
    np.testing.assert_allclose(res.coef, w_np, rtol=rtol, atol=rtol * np.abs(w_np).max())


def test_streamed_chunks_are_read_inside_each_pass_not_held(tmp_path, monkeypatch):
    """With half of X cached, a Hessian product's graph depends on the cached chunks only:
    each streamed chunk is read inside the task that uses it (twice per product), so no
    read task holds it from the first pass to the second."""
    X, y = _float_problem(4, n=800)
    path = str(tmp_path / "X.zarr")
    da.to_zarr(da.from_array(X, chunks=(200, X.shape[1])), path)
    Xz = da.from_zarr(path)
    monkeypatch.setattr(placement, "memory_budget",
                        lambda client=None, working_bytes=0: X.nbytes // 2)
    Xs, cached = placement.place_rows(Xz, "auto")
    assert cached.shape[0] == 400 and is_materialized(cached)
    op = PairwiseOperator(Xs, y, 0.1, cached=cached)
    assert op.nchunks == cached.numblocks[0] + 2
    w = 0.1 * np.random.default_rng(1).standard_normal(X.shape[1])
    _, handle, _ = op.scores_and_gradient(w, (op.pos, op.neg), False)
    seen = []

    class Keys(Callback):
        def _start(self, dsk):
            seen.extend(k[0] if isinstance(k, tuple) else k for k in dsk)

    p = np.random.default_rng(0).standard_normal(X.shape[1])
    with Keys():
        hp, q = op.hessian_product(handle, p)
    assert not any(str(k).startswith(Xz.name) for k in seen)  # no Zarr read task
    np.testing.assert_allclose(q, X @ p, rtol=1e-12)
    ref = PairwiseOperator(da.from_array(X, chunks=(200, X.shape[1])), y, 0.1)
    _, handle_r, _ = ref.scores_and_gradient(w, (ref.pos, ref.neg), False)
    np.testing.assert_allclose(hp, ref.hessian_product(handle_r, p)[0], rtol=1e-12)


def test_same_model_on_a_distributed_cluster(medium, dask_cluster_client, tmp_path,
                                             monkeypatch):
    X, y, w_np = medium
    path = str(tmp_path / "X.zarr")
    da.to_zarr(da.from_array(X, chunks=(600, X.shape[1])), path)
    monkeypatch.setattr(placement, "memory_budget",
                        lambda client=None, working_bytes=0: X.nbytes // 2)
    for persist, cached in ((True, 1.0), (False, 0.0), ("auto", 0.5)):
        res = prsvm_newton(da.from_zarr(path), da.from_array(y, chunks=600), C=0.02,
                           tol=1e-10, persist=persist)
        assert res.converged and res.state["persisted"] is (persist is True)
        assert res.state["cached_fraction"] == cached
        np.testing.assert_allclose(res.coef, w_np, rtol=1e-8, atol=1e-8 * np.abs(w_np).max())


class _TaskCounter(Callback):
    """Count scheduler runs and the task names each one executed."""

    def __init__(self):
        super().__init__()
        self.runs: list[set] = []

    def _start(self, dsk):
        self.runs.append(set())

    def _pretask(self, key, dsk, state):
        name = key[0] if isinstance(key, tuple) else key
        self.runs[-1].add(name.rsplit("-", 1)[0])


def test_persist_chunks_merge_balance_and_never_split(monkeypatch):
    monkeypatch.setattr(placement, "PERSIST_CHUNK_BYTES", 64 * 8 * 100)  # 100 rows of 64 float64

    class TwoWorkers:
        def scheduler_info(self, n_workers=-1):
            return {"workers": {"a": {}, "b": {}}}

    X = da.zeros((1050, 64), chunks=(30, 64))
    for client, multiple in ((None, 1), (TwoWorkers(), 2)):
        rows, cols = persist_chunks(X, client)
        assert sum(rows) == 1050 and cols == X.chunks[1]
        # about 100 rows each (11 chunks of 96 for 1050 rows), equal but the last
        assert len(rows) % multiple == 0 and len(set(rows[:-1])) == 1
        assert len(rows) <= 11 + multiple and min(rows[:-1]) > 30
    big = da.zeros((1050, 64), chunks=(500, 64))  # chunks already larger: as many, balanced
    assert persist_chunks(big)[0] == (350, 350, 350)
    # a persisted input keeps its chunks; the solve is the same as on numpy
    Xn, y = _float_problem(5, n=400)
    Xp = dask.persist(da.from_array(Xn, chunks=(37, -1)))[0]
    res = prsvm_newton(Xp, y, C=0.1, persist=True, tol=1e-8)
    np.testing.assert_allclose(res.coef, prsvm_newton(Xn, y, C=0.1, tol=1e-8).coef,
                               rtol=1e-8, atol=1e-10)


def test_one_compute_per_gradient_and_per_hessian_product():
    X, y = _float_problem(3, n=400)
    Xd = da.from_array(X, chunks=(90, X.shape[1])).persist()
    with _TaskCounter() as counter:
        res = prsvm_newton(Xd, y, C=0.1, tol=1e-9, persist=False)
    reading = [r for r in counter.runs
               if r & {"daskauc-newton-scores", "daskauc-newton-hvp-xs"}]
    n_grad = len(res.history)
    n_hvp = sum(h.get("cg_iter", 0) for h in res.history)
    assert len(reading) == n_grad + n_hvp
    grads = [r for r in reading if "daskauc-newton-scores" in r]
    hvps = [r for r in reading if "daskauc-newton-hvp-xs" in r]
    assert len(grads) == n_grad and len(hvps) == n_hvp
    # both passes of a gradient / Hessian product sit in the same compute
    assert all("daskauc-newton-grad" in r for r in grads)
    assert all({"daskauc-newton-hvp", "daskauc-newton-hvp-lq"} <= r for r in hvps)


def test_warm_start_and_validation_history(caplog):
    X, y = _float_problem(4, n=300)
    Xv, yv = _float_problem(5, n=200)
    with caplog.at_level(logging.INFO, logger="daskauc"):
        cold = prsvm_newton(X, y, C=1.0, tol=1e-8, X_val=Xv, y_val=yv)
    assert any("newton 0:" in m for m in caplog.messages)
    np.testing.assert_allclose(cold.history[-1]["val_auc"], roc_auc_score(yv, Xv @ cold.coef),
                               rtol=1e-12)
    prev = prsvm_newton(X, y, C=0.5, tol=1e-8)
    warm = prsvm_newton(X, y, C=1.0, tol=1e-8, w0=prev.coef)
    assert warm.n_iter <= cold.n_iter
    np.testing.assert_allclose(warm.coef, cold.coef, rtol=1e-6, atol=1e-8)


def test_equal_class_means_converge_to_zero():
    # grad F(0) = 2C n+ n- (c- - c+) = 0: w = 0 is the optimum, whatever the start
    a = np.array([[1.0, 2.0], [-1.0, -2.0], [0.5, -1.0], [-0.5, 1.0]])
    X = np.vstack([a, a])
    y = np.array([1, 1, 1, 1, -1, -1, -1, -1])
    assert np.linalg.norm(ref.gradient(np.zeros(2), X, y, 1.0)) == 0
    res = prsvm_newton(X, y, C=1.0, tol=1e-3, w0=np.array([1.0, -3.0]))
    assert res.converged
    assert np.linalg.norm(res.coef) <= 1e-3 * np.linalg.norm([1.0, -3.0])


def test_callback_can_stop():
    X, y = _float_problem(6)
    seen = []
    res = prsvm_newton(X, y, C=1.0, tol=1e-12, callback=lambda w, rec: seen.append(rec) or True)
    assert len(seen) == 1 and res.n_iter == 0 and not res.converged


@pytest.mark.parametrize(
    "kwargs, match",
    [({"C": 0.0}, "C must be > 0"), ({"tol": -1.0}, "tol must be >= 0"),
     ({"line_search": "wolfe"}, "line_search must be one of"),
     ({"max_cg": 0}, "max_cg must be >= 1"), ({"w0": np.zeros(3)}, r"w0 must have shape \(4,\)"),
     ({"persist": "yes"}, "persist must be one of")],
)
def test_bad_parameters_are_named(kwargs, match):
    X, y = _float_problem(0, n=30)
    with pytest.raises(ValueError, match=match):
        prsvm_newton(X, y, **kwargs)


def test_bad_data_is_named():
    X, y = _float_problem(0, n=30)
    with pytest.raises(ValueError, match="single class"):
        prsvm_newton(X, np.ones(30))
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        prsvm_newton(Xn, y)
    with pytest.raises(ValueError, match="rows but y has"):
        prsvm_newton(X, y[:-1])


# ------------------------------------------------------------------------------- estimator


def test_ranksvm_estimator_contract():
    X, y = _float_problem(9, n=200)
    y01 = (y > 0).astype(int)  # any two-valued labels
    est = RankSVM(C=0.5, tol=1e-8)
    assert est.get_params()["C"] == 0.5
    est.fit(X, y01)
    direct = prsvm_newton(X, y, C=0.5, tol=1e-8)
    np.testing.assert_allclose(est.coef_, direct.coef, rtol=1e-12)
    assert est.n_iter_ == direct.n_iter and est.converged_
    np.testing.assert_array_equal(est.classes_, [0, 1])
    np.testing.assert_allclose(est.decision_function(X), X @ est.coef_ + est.intercept_)
    scores_dask = est.decision_function(da.from_array(X, chunks=(50, X.shape[1])))
    np.testing.assert_allclose(scores_dask.compute(), X @ est.coef_ + est.intercept_)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.coef_, est.coef_)
    assert clone(est).get_params() == est.get_params()


def test_ranksvm_warm_start_path_and_errors():
    X, y = _float_problem(10, n=200)
    est = RankSVM(C=0.1, tol=1e-8, warm_start=True).fit(X, y)
    cold = RankSVM(C=1.0, tol=1e-8).fit(X, y)
    est.set_params(C=1.0).fit(X, y)
    np.testing.assert_allclose(est.coef_, cold.coef_, rtol=1e-6, atol=1e-9)
    assert est.n_iter_ <= cold.n_iter_
    with pytest.raises(ValueError, match="warm_start=True but the previous coef_ has 4"):
        est.fit(X[:, :3], y)
    with pytest.raises(ValueError, match="C must be > 0"):
        RankSVM(C=-1.0).fit(X, y)
    with pytest.raises(TypeError, match="warm_start must be bool"):
        RankSVM(warm_start="yes").fit(X, y)


def test_cv_select_C_matches_independent_folds():
    X, y = _float_problem(12, n=240)
    Cs = [0.001, 0.1, 10.0]
    splitter = StratifiedKFold(3, shuffle=True, random_state=0)
    best, table = cv_select_C(RankSVM(tol=1e-9), X, y, Cs[::-1], cv=splitter)
    assert [row["C"] for row in table] == Cs
    expected = np.zeros((3, 3))
    for f, (tr, te) in enumerate(splitter.split(X, y)):
        for k, C in enumerate(Cs):
            w = prsvm_newton(X[tr], y[tr], C=C, tol=1e-9).coef
            expected[k, f] = roc_auc_score(y[te], X[te] @ w)
    for k, row in enumerate(table):
        np.testing.assert_allclose(row["fold_auc"], expected[k], atol=1e-9)
    assert best == Cs[int(np.argmax(expected.mean(axis=1)))]
    best_int, _ = cv_select_C(RankSVM(), X, y, Cs, cv=3, random_state=0)
    assert best_int in Cs
    with pytest.raises(ValueError, match="Cs must be"):
        cv_select_C(RankSVM(), X, y, [0.0, 1.0])


def test_dask_cv_select_C_runs_on_dask_input():
    X, y = _float_problem(13, n=180)
    Xd = da.from_array(X, chunks=(60, X.shape[1]))
    best_np, table_np = cv_select_C(RankSVM(tol=1e-9), X, y, [0.01, 1.0], random_state=3)
    best_da, table_da = cv_select_C(RankSVM(tol=1e-9), Xd, y, [0.01, 1.0], random_state=3)
    assert best_np == best_da
    for a, b in zip(table_np, table_da, strict=True):
        np.testing.assert_allclose(a["fold_auc"], b["fold_auc"], atol=1e-9)


def test_memory_budget_leaves_room_for_the_process_and_its_working_chunks():
    """Per worker: PERSIST_MEMORY_FRACTION of its limit, less its process memory and the
    working chunks of its threads (never below zero)."""
    GiB = 2**30

    class Workers:
        def scheduler_info(self, n_workers=-1):
            return {"workers": {
                "a": {"memory_limit": 2 * GiB, "nthreads": 1, "metrics": {"memory": GiB // 4}},
                "b": {"memory_limit": 4 * GiB, "nthreads": 2, "metrics": {"memory": GiB // 2}},
                "c": {"memory_limit": GiB, "nthreads": 1, "metrics": {"memory": GiB}}}}

    f = placement.PERSIST_MEMORY_FRACTION
    want = (int(2 * GiB * f) - GiB // 4 - 64 * 2**20) + (int(4 * GiB * f) - GiB // 2
                                                       - 2 * 64 * 2**20)
    assert placement.memory_budget(Workers(), working_bytes=64 * 2**20) == want
    # small workers merge smaller chunks when persisting: at most 1/16 of a limit
    X = da.zeros((100_000, 64), chunks=(1_000, 64))
    rows = placement.persist_chunks(X, Workers())[0]
    assert max(rows) * 64 * 8 <= GiB // 16 + 64 * 8


def test_streamed_chunks_are_shared_out_by_work_and_read_ahead_in_order(
        dask_cluster_client, tmp_path, monkeypatch):
    """On a cluster every streamed chunk gets a worker so that each worker's work (cached
    rows + STREAMED_CHUNK_COST x streamed rows) is as equal as whole chunks allow, its tasks
    run there in chunk order and each reads the next chunk of its worker ahead; the products
    are those of the in-memory operator."""
    X, y = _float_problem(6, n=1600)
    path = str(tmp_path / "X.zarr")
    da.to_zarr(da.from_array(X, chunks=(100, X.shape[1])), path)
    Xz = da.from_zarr(path)
    workers = sorted(dask_cluster_client.scheduler_info(n_workers=-1)["workers"])
    assert len(workers) == 2
    # 4 chunks cached, all on the first worker
    cached = dask_cluster_client.persist(Xz[:400], workers=workers[:1])
    from distributed import wait

    wait(cached)
    rows = placement.RowChunks(Xz, cached, dask_cluster_client)
    streamed = sorted(rows.where)
    assert streamed == list(range(4, 16))
    load = {w: 0.0 for w in workers}
    load[workers[0]] = 400.0
    for c in streamed:
        load[rows.where[c]] += 100 * _config.STREAMED_CHUNK_COST
    # within one streamed chunk of equal
    assert abs(load[workers[0]] - load[workers[1]]) <= 100 * _config.STREAMED_CHUNK_COST
    assert sum(rows.where[c] == workers[1] for c in streamed) > 6  # the uncached worker more
    for c in streamed:  # the next chunk of the same worker, the first after the last
        mine = [k for k in streamed if rows.where[k] == rows.where[c]]
        _, reader, ahead = rows.args[c]
        assert ahead.key == rows.args[mine[(mine.index(c) + 1) % len(mine)]][1].key
    ann = rows.annotations(["n"])
    assert ann["workers"](("n", 5)) == [rows.where[5]] and ann["workers"](("n", 2)) is None
    assert ann["priority"](("n", 5)) > ann["priority"](("n", 6))
    # the products are right whatever ran where
    op = PairwiseOperator(Xz, y, 0.1, cached=cached)
    ref = PairwiseOperator(da.from_array(X, chunks=(100, X.shape[1])), y, 0.1)
    w = 0.1 * np.random.default_rng(1).standard_normal(X.shape[1])
    p = np.random.default_rng(2).standard_normal(X.shape[1])
    _, h, _ = op.scores_and_gradient(w, (op.pos, op.neg), False)
    _, hr, _ = ref.scores_and_gradient(w, (ref.pos, ref.neg), False)
    for _ in range(2):
        hp, q = op.hessian_product(h, p)
        np.testing.assert_allclose(q, X @ p, rtol=1e-12)
        np.testing.assert_allclose(hp, ref.hessian_product(hr, p)[0], rtol=1e-12)


def test_place_rows_budgets_with_the_cluster_it_runs_on(dask_cluster_client, tmp_path,
                                                        monkeypatch):
    """Called without a client on a cluster, ``place_rows`` measures the cluster's workers,
    not this machine: with the machine's memory it cached 8 GB of a 4M-row embedding in two
    1.75 GiB workers, which spilled and were killed (benchmarks/scaling.py)."""
    seen = []
    monkeypatch.setattr(placement, "memory_budget",
                        lambda client=None, working_bytes=0: seen.append(client) or 0)
    X = np.ones((400, 3))
    path = str(tmp_path / "X.zarr")
    da.to_zarr(da.from_array(X, chunks=(100, 3)), path)
    Xs, cached = placement.place_rows(da.from_zarr(path), "auto")
    assert cached is None and seen and all(c is dask_cluster_client for c in seen)
