"""Sparse rows (CSR chunks) through PRSVM+ Newton (RankSVM) and least-squares AUC (LSAUC).

The oracle is the dense fit of the same rows, chunks and labels: the sparse products are the
same algebra, so the iterates agree to rounding. Gradients and Hessian products on sparse
rows are checked against the brute-force pairwise oracles (tests/reference/pairwise.py) and
finite differences; LSAUC's conjugate-gradient route against its exact route and the
closed-form optimum (tests/reference/least_squares.py). Every sparse fit runs inside
``no_dense_rows()``; the wide cases (2,000 x 2^18) count the non-zeros each pass reads.
"""

from __future__ import annotations

import tracemalloc
import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import ComputeCounter, no_dense_rows
from reference import least_squares as ref_ls
from reference import pairwise as ref
from sklearn.exceptions import ConvergenceWarning

from daskauc import LSAUC, RankSVM
from daskauc._sparse import sparse_row_blocks
from daskauc.metrics import roc_auc
from daskauc.solvers import _lsauc_cg as lsauc_cg
from daskauc.solvers import pairwise
from daskauc.solvers.newton import prsvm_newton
from daskauc.solvers.pairwise import hessian_product, objective_gradient
from daskauc.solvers.stats import class_statistics, ls_route, lsauc

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")

LABELS = {"pm1": (-1, 1), "01": (0, 1)}


def _problem(seed=0, n=300, d=40, density=0.1, dtype=np.float64, labels="pm1"):
    """Random sparse rows (CSR) and labels linked to them, in the convention ``labels``."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed, dtype=np.float64)
    X.data = rng.standard_normal(X.nnz)
    s = X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(n)
    neg, pos = LABELS[labels]
    y = np.where(s > np.quantile(s, 0.6), pos, neg)
    return X.astype(dtype), y


def _both(X, rows):
    """The same rows as a dask array of CSR blocks and as a dense dask array, same chunks."""
    return sparse_row_blocks(X, rows), da.from_array(X.toarray(), chunks=(rows, -1))


def _hashed_rows(n, d, seed, per_row=20, informative=200):
    """Binary hashed-feature rows: ``per_row`` columns a row drawn with power-law frequencies
    (column ``floor(d u^4)``), labels from the ``informative`` most frequent columns."""
    rng = np.random.default_rng(seed)
    cols = np.floor(d * rng.random((n, per_row)) ** 4).astype(np.int64)
    X = sp.csr_matrix((np.ones(n * per_row), cols.ravel(),
                       np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
    X.sum_duplicates()
    w = np.zeros(d)
    w[:informative] = np.random.default_rng(12345).standard_normal(informative)
    s = X @ w
    return X, np.where(s + 0.3 * rng.standard_normal(n) > np.quantile(s, 0.75), 1, -1)


# ---- PRSVM+ Newton ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, labels, precondition", [
    (np.float64, "pm1", "moments"), (np.float32, "01", "moments"),
    (np.float64, "01", "jacobi"), (np.float32, "pm1", "jacobi")])
def test_newton_sparse_takes_the_dense_steps(dtype, labels, precondition):
    X, y = _problem(dtype=dtype, labels=labels)
    Xs, Xd = _both(X, 70)
    moments = "auto" if precondition == "moments" else None
    kw = dict(C=1.0, tol=1e-8, pair_moments=moments)
    dense = prsvm_newton(Xd, y, X_val=X.toarray(), y_val=y, **kw)
    with no_dense_rows():
        sparse = prsvm_newton(Xs, y, X_val=X, y_val=y, **kw)
        in_memory = prsvm_newton(X, y, **kw)  # a scipy matrix, chunked by daskauc
    assert dense.converged and sparse.n_iter == dense.n_iter
    for key in ("cg_iter", "val_auc"):
        assert [h.get(key) for h in sparse.history] == [h.get(key) for h in dense.history]
    scale = np.abs(dense.coef).max()
    np.testing.assert_allclose(sparse.coef, dense.coef, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(in_memory.coef, dense.coef, rtol=0, atol=1e-9 * scale)


def test_sparse_gradient_and_hessian_products_match_the_pairs():
    X, y = _problem(n=80, d=12, density=0.3)
    Xa, rng, C = X.toarray(), np.random.default_rng(1), 0.7
    w, v = 0.3 * rng.standard_normal(12), rng.standard_normal(12)
    with no_dense_rows():
        F, g = objective_gradient(sparse_row_blocks(X, 25), y, w, C=C)
        Hv = hessian_product(sparse_row_blocks(X, 25), y, w, v, C=C)
        fd = [(objective_gradient(X, y, w + h * e, C=C)[0]
               - objective_gradient(X, y, w - h * e, C=C)[0]) / (2 * h)
              for h, e in ((1e-6, np.eye(12)[k]) for k in range(12))]
        h = 1e-7  # the active set does not change within h of w (a piecewise quadratic)
        fd_Hv = (objective_gradient(X, y, w + h * v, C=C)[1]
                 - objective_gradient(X, y, w - h * v, C=C)[1]) / (2 * h)
    assert F == pytest.approx(ref.objective(w, Xa, y, C), rel=1e-12)
    np.testing.assert_allclose(g, ref.gradient(w, Xa, y, C), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(Hv, ref.hessian(w, Xa, y, C) @ v, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(Hv, fd_Hv, rtol=1e-5, atol=1e-5)


def test_ranksvm_estimator_on_sparse_rows_equals_dense():
    X, y = _problem(labels="01")
    Xa = X.toarray()
    dense = RankSVM(C=1.0).fit(Xa, y)
    dense_pf = RankSVM(C=1.0).partial_fit(Xa[:150], y[:150]).partial_fit(Xa[150:], y[150:])
    with no_dense_rows():
        model = RankSVM(C=1.0).fit(sparse_row_blocks(X, 70), y)
        pf = RankSVM(C=1.0).partial_fit(X[:150], y[:150]).partial_fit(X[150:], y[150:])
        s, p, label = model.decision_function(X), model.predict_proba(X), model.predict(X)
        auto = RankSVM(random_state=0).fit(X, y)  # C="auto" selects on a sparse subsample
    auto_dense = RankSVM(random_state=0).fit(Xa, y)
    assert auto.selection_["C"] == auto_dense.selection_["C"]
    np.testing.assert_allclose(auto.coef_, auto_dense.coef_, rtol=0,
                               atol=1e-9 * np.abs(auto_dense.coef_).max())
    scale = np.abs(dense.coef_).max()
    np.testing.assert_allclose(model.coef_, dense.coef_, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(pf.coef_, dense_pf.coef_, rtol=0, atol=1e-9 * scale)
    assert model.intercept_ == pytest.approx(dense.intercept_, rel=1e-9, abs=1e-12)
    s_dense = dense.decision_function(Xa)
    np.testing.assert_allclose(s, s_dense, rtol=0, atol=1e-9 * np.abs(s_dense).max())
    np.testing.assert_allclose(p, dense.predict_proba(Xa), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(label, dense.predict(Xa))
    assert pf.n_iter_ == 2 and set(np.unique(label)) <= {0, 1}


# ---- LSAUC ------------------------------------------------------------------------------


@pytest.mark.parametrize("labels", ["pm1", "01"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lsauc_sparse_equals_dense_on_both_routes(dtype, labels):
    X, y = _problem(dtype=dtype, labels=labels)
    Xs, Xd = _both(X, 70)
    w_star = ref_ls.ls_minimizer(X.toarray().astype(np.float64), y, 1e-2)
    exact_d = lsauc(Xd, y, lam=1e-2, solver="exact").coef
    cg_d = lsauc(Xd, y, lam=1e-2, solver="cg", cg_tol=1e-12).coef
    with no_dense_rows():
        exact = lsauc(Xs, y, lam=1e-2, solver="exact")
        cg = lsauc(Xs, y, lam=1e-2, solver="cg", cg_tol=1e-12)
        stats = class_statistics(X, y)
    scale = np.abs(w_star).max()
    np.testing.assert_allclose(exact.coef, exact_d, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(cg.coef, cg_d, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(exact.coef, w_star, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(cg.coef, w_star, rtol=0, atol=1e-9 * scale)
    assert cg.converged and cg.history[-1]["relative_residual"] <= 1e-12
    assert cg.history[-1]["objective"] == pytest.approx(exact.history[0]["objective"],
                                                        rel=1e-10)
    dense_stats = class_statistics(Xd, y)
    np.testing.assert_allclose(stats.m2_pos, dense_stats.m2_pos, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(stats.mean_neg, dense_stats.mean_neg, rtol=1e-12, atol=1e-15)


def test_lsauc_cg_stops_at_its_tolerance():
    X, y = _problem(seed=3)
    exact = lsauc(X, y, lam=1e-3, solver="exact").coef
    with no_dense_rows():
        res = lsauc(X, y, lam=1e-3, solver="cg", cg_tol=1e-4)
        short = lsauc(X, y, lam=1e-3, solver="cg", cg_tol=0.0, max_cg=3)
    assert res.converged and res.history[-1]["relative_residual"] <= 1e-4
    assert [h["iter"] for h in res.history] == list(range(res.n_iter + 1))
    # the error of w is at most cond(A) times the relative residual
    A = class_statistics(X, y)
    cond = np.linalg.cond(A.cov_pos + A.cov_neg + np.outer(A.D, A.D) + 0.5e-3 * np.eye(40))
    assert np.linalg.norm(res.coef - exact) <= cond * 1e-4 * np.linalg.norm(exact)
    assert not short.converged and short.n_iter == 3
    objectives = [h["objective"] for h in res.history]
    # CG descends
    assert all(b <= a + 1e-12 for a, b in zip(objectives, objectives[1:], strict=False))


def test_lsauc_estimator_sparse_routes_and_partial_fit():
    X, y = _problem(labels="01")
    Xa = X.toarray()
    dense = LSAUC(lam=1e-2).fit(Xa, y)
    with no_dense_rows():
        exact = LSAUC(lam=1e-2).fit(sparse_row_blocks(X, 70), y)
        cg = LSAUC(lam=1e-2, solver="cg", cg_tol=1e-12).fit(X, y)
        halves = LSAUC(lam=1e-2).partial_fit(X[:150], y[:150]).partial_fit(X[150:], y[150:])
        once = LSAUC(lam=1e-2, solver="cg").partial_fit(X[:150], y[:150])
        with pytest.raises(ValueError, match="keeps no class statistics to merge"):
            once.partial_fit(X[150:], y[150:])
        with pytest.warns(Warning, match="did not reach cg_tol"):
            LSAUC(lam=1e-2, solver="cg", max_cg=2).fit(X, y)
        scores = exact.decision_function(X)
    scale = np.abs(dense.coef_).max()
    for model in (exact, cg, halves):
        np.testing.assert_allclose(model.coef_, dense.coef_, rtol=0, atol=1e-10 * scale)
    s_dense = dense.decision_function(Xa)
    np.testing.assert_allclose(scores, s_dense, rtol=0, atol=1e-9 * np.abs(s_dense).max())
    assert exact.intercept_ == pytest.approx(dense.intercept_, rel=1e-9, abs=1e-12)
    assert cg.n_iter_ == len(cg.history_) - 1 and cg.converged_
    assert halves.n_iter_ == 2


def test_lsauc_routes_and_the_exact_size_limit():
    narrow = sparse_row_blocks(sp.random(10, 4096, density=0.01, format="csr"))
    wide = sparse_row_blocks(sp.random(10, 4097, density=0.01, format="csr"))
    assert ls_route(narrow) == "exact" and ls_route(wide) == "cg"
    assert ls_route(da.zeros((10, 16_384), chunks=(5, -1))) == "exact"
    assert ls_route(da.zeros((10, 16_385), chunks=(5, -1))) == "cg"
    assert ls_route(narrow, "cg") == "cg" and ls_route(wide, "exact") == "exact"
    X = sp.random(50, 20_000, density=0.001, format="csr", random_state=0)
    y = np.r_[np.ones(25), -np.ones(25)]
    with ComputeCounter() as counter:
        with pytest.raises(ValueError, match=r"20,000 x 20,000 .*3\.0 GiB.*solver='cg'"):
            lsauc(X, y, lam=1e-3, solver="exact")
        with pytest.raises(ValueError, match="solver='cg'"):
            LSAUC(solver="exact").fit(X, y)
        with pytest.raises(ValueError, match="solver must be one of"):
            LSAUC(solver="newton").fit(X, y)
    assert counter.n == 0  # refused before any work


# ---- wide and sparse: 2,000 x 2^18, 20 non-zeros a row ------------------------------------


def _count_products(monkeypatch, module):
    """Count the non-zeros that the chunk products of ``module`` read; fail on a dense block."""
    seen = {"nnz": 0, "calls": 0}

    def counting(product):
        def call(block, v):
            assert sp.issparse(block), "a chunk product got a dense block"
            seen["nnz"] += block.nnz
            seen["calls"] += 1
            return product(block, v)
        return call

    for name in ("block_matvec", "block_rmatvec"):
        monkeypatch.setattr(module, name, counting(getattr(pairwise, name)))
    return seen


def test_wide_sparse_fits_read_only_the_non_zeros(monkeypatch):
    d = 2**18
    X, y = _hashed_rows(2000, d, 0)
    Xt, yt = _hashed_rows(2000, d, 1)
    Xd = sparse_row_blocks(X, 500)
    seen_ls = _count_products(monkeypatch, lsauc_cg)
    seen_nt = _count_products(monkeypatch, pairwise)
    tracemalloc.start()
    try:
        with no_dense_rows(), warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            ls = LSAUC(lam=1e-2).fit(Xd, y)
            rank = RankSVM(C=1e-4).fit(Xd, y)
            ls_scores, rank_scores = ls.decision_function(Xt), rank.decision_function(Xt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ls.history_[-1]["relative_residual"] <= 1e-6 and rank.converged_
    assert roc_auc(yt, ls_scores) > 0.9 and roc_auc(yt, rank_scores) > 0.9
    # every CG step reads each non-zero twice (X v, X^T u) and nothing else
    assert seen_ls["nnz"] == 2 * ls.n_iter_ * X.nnz
    assert seen_ls["calls"] == 2 * ls.n_iter_ * Xd.numblocks[0]
    # Newton: each chunk product reads the chunk's non-zeros; a pass never reads more
    assert seen_nt["calls"] > 0 and seen_nt["nnz"] * Xd.numblocks[0] == seen_nt["calls"] * X.nnz
    # no dense chunk (500 x 2^18 float64 = 1 GiB) and no d x d matrix: memory is r-vectors
    assert peak < 128 * 8 * d  # 256 MiB; measured 66 MiB


def test_lsauc_cg_pass_cost_follows_the_non_zeros_not_the_width(monkeypatch):
    # the same rows hashed into 2^14 and 2^20 columns: the same non-zeros read per pass
    reads = {}
    for d in (2**14, 2**20):
        X, y = _hashed_rows(2000, d, 0)
        seen = _count_products(monkeypatch, lsauc_cg)
        with no_dense_rows():
            res = lsauc(sparse_row_blocks(X, 1000), y, lam=1e-2, solver="cg", cg_tol=0.0,
                        max_cg=5)
        reads[d] = (seen["nnz"], X.nnz, res.n_iter)
    assert reads[2**14][2] == reads[2**20][2] == 5
    for nnz_read, nnz, n_iter in reads.values():
        assert nnz_read == 2 * n_iter * nnz
