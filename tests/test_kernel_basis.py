"""Kernel-basis solvers: chunk products, objective / gradient / Hessian products against brute
force, the Nystroem preconditioner, and the solvers against L-BFGS, the closed-form least-squares
optimum, the materialized Nystroem embedding and each other.

Oracles: tests/reference/kernel.py (dense kernels from scipy's exact distances, every pair
formed explicitly).
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback
from reference import kernel as ref
from scipy.optimize import minimize

from daskauc import LSAUC, KMeansNystroem
from daskauc._gaussian import gaussian_centres, kernel_block
from daskauc.solvers.kernel_basis import (
    COL_TILE,
    ROW_TILE,
    TASK_FLOPS,
    build_preconditioner,
    kernel_gram_matvec_block,
    kernel_matvec_block,
    kernel_rmatvec_block,
    kernel_row_chunks,
    kernel_scores,
)
from daskauc.solvers.kernel_lsauc import kernel_lsauc
from daskauc.solvers.kernel_newton import (
    kernel_hessian_product,
    kernel_objective_gradient,
    kernel_pairwise_newton,
)
from daskauc.solvers.newton import prsvm_newton
from daskauc.solvers.preconditioner import JITTER_PER_CENTRE, NystroemPreconditioner

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _problem(seed, n=120, d=3, m=30, gamma=0.7):
    """Rows on a nonlinear boundary; centres = distinct rows (labels known)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 0.8 + 0.3 * rng.standard_normal(n) > 0,
                 1, -1).astype(np.int8)
    idx = np.sort(rng.choice(n, size=m, replace=False))
    return X, y, X[idx], idx, gamma


class _TaskCounter(Callback):
    def __init__(self):
        super().__init__()
        self.runs: list[set] = []

    def _start(self, dsk):
        self.runs.append(set())

    def _pretask(self, key, dsk, state):
        name = key[0] if isinstance(key, tuple) else key
        self.runs[-1].add(name.rsplit("-", 1)[0])


# ------------------------------------------------------------------------- chunk products


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 3e-6)])
def test_chunk_products_match_the_dense_kernel(dtype, rtol):
    # ragged tiles on both axes, read-only rows (zarr and dask chunks can be)
    rng = np.random.default_rng(0)
    n, m, d = ROW_TILE * 2 + 37, COL_TILE + 77, 4
    X = rng.standard_normal((n, d))
    C = X[rng.choice(n, m, replace=True)] + 0.05 * rng.standard_normal((m, d))
    gamma = 0.4
    K = ref.gaussian(X, C, gamma)
    Xb = X.astype(dtype)
    Xb.setflags(write=False)
    gc = gaussian_centres(C, gamma, dtype)
    v, u, w = rng.standard_normal(m), rng.standard_normal(n), rng.random(n)

    def close(a, b):
        np.testing.assert_allclose(a, b, rtol=0, atol=rtol * np.abs(b).max())

    assert kernel_block(Xb, gc).dtype == dtype
    close(kernel_block(Xb, gc), K)
    close(kernel_matvec_block(Xb, gc, v), K @ v)
    close(kernel_rmatvec_block(Xb, gc, np.column_stack([u, w])), np.vstack([K.T @ u, K.T @ w]))
    close(kernel_rmatvec_block(Xb, gc, u)[0], K.T @ u)
    close(kernel_gram_matvec_block(Xb, gc, v, w), K.T @ (w * (K @ v)))
    for f, shape in ((lambda: kernel_matvec_block(Xb[:0], gc, v), (0,)),
                     (lambda: kernel_rmatvec_block(Xb[:0], gc, u[:0]), (1, m)),
                     (lambda: kernel_gram_matvec_block(Xb[:0], gc, v, w[:0]), (m,))):
        out = f()
        assert out.shape == shape and not out.any()


def test_pass_chunks_are_balanced_over_threads():
    rows = kernel_row_chunks(464_809, 32_768, 54, 2)
    assert sum(rows) == 464_809 and len(rows) == 18  # a multiple of the 2 threads
    assert set(rows[:-1]) == {rows[0]} and rows[-1] <= rows[0]  # equal tasks, no straggler
    assert 2.0 * rows[0] * 32_768 * 56 <= 1.2 * TASK_FLOPS
    assert kernel_row_chunks(100, 64, 3, 4) == (100,)  # never below one row tile per task
    assert len(kernel_row_chunks(10_000, 64, 3, 4)) == 4  # but one task per thread at least


# ------------------------------------------------------- objective, gradient and Hessian


@pytest.mark.parametrize("seed", range(2))
def test_objective_and_gradient_match_brute_force(seed):
    X, y, C, _, gamma = _problem(seed)
    alpha = np.random.default_rng(seed + 7).standard_normal(C.shape[0])
    Xd = da.from_array(X, chunks=(45, -1))
    F, grad, jitter = kernel_objective_gradient(Xd, y, C, alpha, gamma=gamma, lam=3e-3)
    assert jitter == JITTER_PER_CENTRE * C.shape[0]
    np.testing.assert_allclose(F, ref.pairwise_objective(alpha, X, y, C, gamma, 3e-3, jitter),
                               rtol=1e-12)
    g_ref = ref.pairwise_gradient(alpha, X, y, C, gamma, 3e-3, jitter)
    np.testing.assert_allclose(grad, g_ref, rtol=0, atol=1e-10 * np.abs(g_ref).max())


def test_hessian_product_matches_brute_force_and_finite_differences():
    X, y, C, _, gamma = _problem(3)
    rng = np.random.default_rng(4)
    alpha, v = 0.3 * rng.standard_normal(C.shape[0]), rng.standard_normal(C.shape[0])
    lam = 1e-2
    Hv = kernel_hessian_product(X, y, C, alpha, v, gamma=gamma, lam=lam)
    jitter = JITTER_PER_CENTRE * C.shape[0]
    H = ref.pairwise_hessian(alpha, X, y, C, gamma, lam, jitter)
    np.testing.assert_allclose(Hv, H @ v, rtol=0, atol=1e-10 * np.abs(H @ v).max())
    eps = 1e-6
    fd = (ref.pairwise_gradient(alpha + eps * v, X, y, C, gamma, lam, jitter)
          - ref.pairwise_gradient(alpha - eps * v, X, y, C, gamma, lam, jitter)) / (2 * eps)
    np.testing.assert_allclose(Hv, fd, rtol=0, atol=1e-6 * np.abs(fd).max())


# --------------------------------------------------------------------- the preconditioner


def _dense_factors(Kt, ridge, scale, W=None):
    T = np.linalg.cholesky(Kt).T
    W = np.eye(len(Kt)) if W is None else W
    A = np.linalg.cholesky(ridge * np.eye(len(Kt)) + scale * T @ W @ T.T).T
    return T, A


def test_preconditioner_matches_its_dense_definition():
    rng = np.random.default_rng(5)
    m = 200
    C = rng.standard_normal((m, 4))
    gamma = 0.2
    pc = build_preconditioner(C, gamma)
    Kt = ref.gaussian(C, C, gamma) + pc.jitter * np.eye(m)
    v = rng.standard_normal(m)
    np.testing.assert_allclose(pc.regularizer_matvec(v), Kt @ v, rtol=1e-12, atol=1e-12)
    T = np.linalg.cholesky(Kt).T
    np.testing.assert_allclose(pc.whiten(v), np.linalg.solve(T.T, v), rtol=1e-8)
    np.testing.assert_allclose(Kt @ pc.regularizer_solve(v), v, rtol=1e-7, atol=1e-7)
    with pytest.raises(RuntimeError, match="factor"):
        pc.apply(v)
    G = rng.standard_normal((m, m))
    W = G @ G.T / m  # a symmetric PSD operator
    for ridge, scale, op in ((1e-3, 4.0 / m, None), (0.5, 2.0, W), (1e-2, 1.0, None)):
        pc.factor(ridge, scale, None if op is None else (lambda B, W=op: W @ B), block=64)
        T, A = _dense_factors(Kt, ridge, scale, op)
        Bm = np.linalg.solve(T, np.linalg.inv(A))
        want = Bm @ Bm.T @ v
        np.testing.assert_allclose(pc.apply(v), want, rtol=0, atol=1e-7 * np.abs(want).max())
        # T survives every refactorization
        np.testing.assert_allclose(pc.regularizer_matvec(v), Kt @ v, rtol=1e-12, atol=1e-12)
    assert pc.n_factorizations == 3
    for key in ("kernel", "cholesky_T", "lauum", "cholesky_A"):
        assert pc.seconds[key] >= 0


def test_preconditioner_jitter_grows_until_the_factor_exists():
    rng = np.random.default_rng(6)
    C = rng.standard_normal((30, 2))
    C = np.vstack([C, C])  # duplicated centres: K_mm is exactly singular
    gamma = 0.5
    pc = build_preconditioner(C, gamma, jitter=0.0)
    assert pc.jitter > 0
    Kt = ref.gaussian(C, C, gamma) + pc.jitter * np.eye(60)
    v = rng.standard_normal(60)
    np.testing.assert_allclose(pc.regularizer_matvec(v), Kt @ v, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="jitter"):
        NystroemPreconditioner(lambda out: out.fill(0.0), 3, jitter=-1.0)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        NystroemPreconditioner(lambda out: out.fill(np.nan), 3)


# ------------------------------------------------------------------------------- solvers


def _lbfgs(X, y, C, gamma, lam, jitter):
    def fg(a):
        return (ref.pairwise_objective(a, X, y, C, gamma, lam, jitter),
                ref.pairwise_gradient(a, X, y, C, gamma, lam, jitter))

    res = minimize(fg, np.zeros(C.shape[0]), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 20000, "maxcor": 50})
    return res.x, res.fun


@pytest.mark.parametrize("weighting, precondition, store",
                         [("mean", True, True), ("pairs", True, True), ("mean", False, True),
                          ("pairs", True, False)])
def test_pairwise_newton_reaches_the_brute_force_optimum(weighting, precondition, store):
    X, y, C, idx, gamma = _problem(8)
    lam = 1e-3
    jitter = JITTER_PER_CENTRE * C.shape[0]
    a_ref, f_ref = _lbfgs(X, y, C, gamma, lam, jitter)
    res = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=lam, tol=1e-9, cg_tol=1e-3,
                                 max_cg=500, weighting=weighting, centre_labels=y[idx],
                                 precondition=precondition, store_kernel=store)
    assert res.converged and res.state["stored_kernel"] is store
    f = ref.pairwise_objective(res.coef, X, y, C, gamma, lam, jitter)
    assert f <= f_ref * (1 + 1e-9)
    np.testing.assert_allclose(res.history[-1]["objective"], f, rtol=1e-10)
    K = ref.gaussian(X, C, gamma)
    np.testing.assert_allclose(K @ res.coef, K @ a_ref, rtol=0, atol=1e-4)


def test_preconditioning_same_point_fewer_cg_steps():
    X, y, C, idx, gamma = _problem(9, n=400, m=80, gamma=1.0)
    lam = 1e-4  # the unpreconditioned run: 2,052 CG steps (3,837 at 1e-5, twice the time)
    runs = {
        name: kernel_pairwise_newton(X, y, C, gamma=gamma, lam=lam, tol=1e-8, cg_tol=1e-2,
                                     max_cg=2000, precondition=pc, weighting=w,
                                     centre_labels=y[idx])
        for name, pc, w in (("plain", False, "mean"), ("mean", True, "mean"),
                            ("pairs", True, "pairs"))
    }
    K = ref.gaussian(X, C, gamma)
    f_plain = K @ runs["plain"].coef
    for res in runs.values():
        assert res.converged
        np.testing.assert_allclose(K @ res.coef, f_plain, rtol=0,
                                   atol=1e-5 * np.abs(f_plain).max())
    cg = {k: sum(h.get("cg_iter", 0) for h in r.history) for k, r in runs.items()}
    assert cg["mean"] < 0.5 * cg["plain"], cg
    assert cg["pairs"] <= cg["mean"], cg


def test_kernel_solution_is_the_exact_kernel_rank_svm():
    # every training row a centre: the kernel-basis model equals NBAUC on the exact
    # (landmarks="all") Nystroem feature map with C = 1 / (lam n+ n-)
    X, y, _, _, gamma = _problem(10, n=150, gamma=1.5)
    Xt = np.random.default_rng(11).standard_normal((60, 3))
    lam = 1e-4
    n_pairs = np.sum(y > 0) * np.sum(y < 0)
    emb = KMeansNystroem(landmarks="all", gamma=gamma, eig_tol=1e-14).fit(X)
    assert emb.n_components_ == X.shape[0]  # nothing cut: the same problem
    lin = prsvm_newton(emb.transform(X), y, C=1.0 / (lam * n_pairs), tol=1e-10, cg_tol=1e-6,
                       max_cg=500)
    ker = kernel_pairwise_newton(X, y, X, gamma=gamma, lam=lam, tol=1e-10, cg_tol=1e-6,
                                 max_cg=500)
    want = emb.transform(Xt) @ lin.coef
    np.testing.assert_allclose(kernel_scores(Xt, X, gamma, ker.coef), want, rtol=0,
                               atol=1e-6 * np.abs(want).max())
    # the same stopping rule in both bases: the embedding's gradient norm
    assert abs(len(ker.history) - len(lin.history)) <= 1


def test_least_squares_matches_the_closed_form_and_lsauc():
    X, y, C, _, gamma = _problem(12, n=160, m=40)
    lam = 1e-3
    res = kernel_lsauc(da.from_array(X, chunks=(50, -1)), y, C, gamma=gamma, lam=lam,
                       tol=1e-12, max_iter=500)
    assert res.converged
    a_ref = ref.least_squares_optimum(X, y, C, gamma, lam, res.state["jitter"])
    K = ref.gaussian(X, C, gamma)
    np.testing.assert_allclose(K @ res.coef, K @ a_ref, rtol=0, atol=1e-8 * np.abs(K @ a_ref).max())
    # LSAUC on the r = m embedding of the same centres is the same model
    emb = KMeansNystroem(landmarks=C, gamma=gamma, eig_tol=1e-14).fit(X)
    assert emb.n_components_ == C.shape[0]
    ls = LSAUC(lam=lam).fit(emb.transform(X), y)
    np.testing.assert_allclose(K @ res.coef, emb.transform(X) @ ls.coef_, rtol=0,
                               atol=1e-6 * np.abs(K @ a_ref).max())
    # its objective from the CG residual is the brute-force LS
    f = K @ res.coef
    A = (f[y > 0][:, None] - f[y < 0][None, :]).ravel()
    Kt = ref.gaussian(C, C, gamma) + res.state["jitter"] * np.eye(C.shape[0])
    ls_ref = 0.5 * lam * res.coef @ Kt @ res.coef + np.mean((1 - A) ** 2)
    np.testing.assert_allclose(res.history[-1]["objective"], ls_ref, rtol=1e-8)
    plain = kernel_lsauc(X, y, C, gamma=gamma, lam=lam, tol=1e-12, max_iter=5000,
                         precondition=False)
    assert plain.converged and plain.n_iter > res.n_iter
    np.testing.assert_allclose(K @ plain.coef, K @ res.coef, rtol=0, atol=1e-6)


def test_warm_start_and_validation_history():
    X, y, C, _, gamma = _problem(13, n=200)
    Xv, yv, _, _, _ = _problem(14, n=100)
    prev = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=1e-2, tol=1e-8)
    cold = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=1e-3, tol=1e-8, X_val=Xv,
                                  y_val=yv)
    warm = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=1e-3, tol=1e-8, alpha0=prev.coef,
                                  preconditioner=prev.state["preconditioner"])
    assert warm.n_iter <= cold.n_iter
    assert warm.state["preconditioner"] is prev.state["preconditioner"]
    np.testing.assert_allclose(warm.coef, cold.coef, rtol=1e-5, atol=1e-6 * np.abs(cold.coef).max())
    from sklearn.metrics import roc_auc_score

    np.testing.assert_allclose(cold.history[-1]["val_auc"],
                               roc_auc_score(yv, kernel_scores(Xv, C, gamma, cold.coef)),
                               rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stored_kernel_gives_the_recomputed_model(dtype):
    """The same Newton iterates whether the passes read the stored kernel blocks or
    recompute them (the sums differ in order only), validation rows scored through the
    kernel either way; "auto" stores when the memory budget allows, not otherwise."""
    X, y, C, idx, gamma = _problem(20, n=400)
    Xv, yv, _, _, _ = _problem(21, n=150)
    Xd = da.from_array(X.astype(dtype), chunks=(90, -1))
    kw = dict(gamma=gamma, lam=1e-3, tol=1e-8, weighting="pairs", centre_labels=y[idx],
              X_val=Xv.astype(dtype), y_val=yv)
    stored = kernel_pairwise_newton(Xd, y, C, store_kernel="auto", **kw)
    recomputed = kernel_pairwise_newton(Xd, y, C, store_kernel=False, **kw)
    assert stored.state["stored_kernel"] and not recomputed.state["stored_kernel"]
    # the sums differ in order only, so the iterates agree to ~1e-10: the same Newton steps,
    # CG counts within one (a residual can cross cg_tol on another BLAS), and the same
    # validation AUC (a swapped pair of its 150 rows would move it by ~2e-4)
    assert len(stored.history) == len(recomputed.history)
    for a, b in zip(stored.history, recomputed.history, strict=True):
        assert abs(a.get("cg_iter", 0) - b.get("cg_iter", 0)) <= 1
        assert a["val_auc"] == pytest.approx(b["val_auc"], abs=1e-6)
    K = ref.gaussian(X, C, gamma)
    tol = 1e-9 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(K @ stored.coef, K @ recomputed.coef, rtol=0,
                               atol=tol * np.abs(K @ recomputed.coef).max())


def test_stored_kernel_only_within_the_memory_budget(monkeypatch):
    from daskauc.engine import placement

    X, y, C, _, gamma = _problem(22, n=200)
    monkeypatch.setattr(placement, "PERSIST_MEMORY_FRACTION", 0.0)
    res = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=1e-3, tol=1e-6)
    assert not res.state["stored_kernel"]
    # persist=False asks to stream the rows: "auto" does not keep their kernel either
    monkeypatch.undo()
    res = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=1e-3, tol=1e-6, persist=False)
    assert not res.state["stored_kernel"]
    forced = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=1e-3, tol=1e-6, persist=False,
                                    store_kernel=True)
    assert forced.state["stored_kernel"]


def test_float32_rows_give_the_float64_model():
    X, y, C, _, gamma = _problem(15, n=300)
    r64 = kernel_pairwise_newton(X, y, C, gamma=gamma, lam=1e-3, tol=1e-6)
    r32 = kernel_pairwise_newton(X.astype(np.float32), y, C, gamma=gamma, lam=1e-3, tol=1e-6)
    K = ref.gaussian(X, C, gamma)
    np.testing.assert_allclose(K @ r32.coef, K @ r64.coef, rtol=0, atol=1e-4)


def test_one_compute_per_pass():
    X, y, C, _, gamma = _problem(16, n=300)
    with _TaskCounter() as counter:
        res = kernel_pairwise_newton(da.from_array(X, chunks=(70, -1)), y, C, gamma=gamma,
                                     lam=1e-3, tol=1e-8)
        ls = kernel_lsauc(X, y, C, gamma=gamma, lam=1e-3, tol=1e-10)
    n_grad = len(res.history)
    n_hvp = sum(h.get("cg_iter", 0) for h in res.history)
    grads = [r for r in counter.runs if "daskauc-newton-scores" in r]
    hvps = [r for r in counter.runs if "daskauc-newton-hvp-xs" in r]
    assert len(grads) == n_grad and len(hvps) == n_hvp
    assert res.state["passes"] == 2 * (n_grad + n_hvp)
    ls_runs = [r for r in counter.runs if r & {"daskauc-kernel-ls-means", "daskauc-kernel-ls-hvp"}]
    assert len(ls_runs) == ls.state["passes"] == ls.n_iter + 1


def test_kernel_scores_numpy_and_dask_agree():
    X, _, C, _, gamma = _problem(17, n=250)
    alpha = np.random.default_rng(0).standard_normal(C.shape[0])
    want = ref.gaussian(X, C, gamma) @ alpha
    np.testing.assert_allclose(kernel_scores(X, C, gamma, alpha), want, rtol=1e-12)
    lazy = kernel_scores(da.from_array(X, chunks=(64, -1)), C, gamma, alpha)
    assert isinstance(lazy, da.Array) and lazy.chunks == ((64, 64, 64, 58),)
    np.testing.assert_allclose(lazy.compute(), want, rtol=1e-12)


def test_same_model_on_a_distributed_cluster(dask_cluster_client):
    X, y, C, idx, gamma = _problem(18, n=300)
    Xd = da.from_array(X, chunks=(80, -1))
    dist = kernel_pairwise_newton(Xd, y, C, gamma=gamma, lam=1e-3, tol=1e-8,
                                  weighting="pairs", centre_labels=y[idx])
    dist_ls = kernel_lsauc(Xd, y, C, gamma=gamma, lam=1e-3, tol=1e-10)
    with dask.config.set(scheduler="threads"):
        local = kernel_pairwise_newton(Xd, y, C, gamma=gamma, lam=1e-3, tol=1e-8,
                                       weighting="pairs", centre_labels=y[idx])
        local_ls = kernel_lsauc(Xd, y, C, gamma=gamma, lam=1e-3, tol=1e-10)
    # the same graphs give the same scores; alpha itself is ill-determined along the small
    # eigenvalues of K_mm, where the client's BLAS thread count (1 under the threaded
    # scheduler, 2 beside a cluster) changes its rounding
    assert dist.state["stored_kernel"] and local.state["stored_kernel"]
    K = ref.gaussian(X, C, gamma)
    for a, b in ((dist, local), (dist_ls, local_ls)):
        # that rounding can also move the last CG residual across tol (40 vs 39 CG steps
        # for the least-squares solve, run alone, at tol 1e-10)
        assert abs(a.n_iter - b.n_iter) <= 1
        np.testing.assert_allclose(K @ a.coef, K @ b.coef, rtol=0,
                                   atol=1e-8 * np.abs(K @ b.coef).max())


@pytest.mark.parametrize(
    "kwargs, match",
    [({"lam": 0.0}, "lam must be > 0"), ({"gamma": -1.0}, "gamma must be > 0"),
     ({"centres": np.zeros((4, 2))}, r"centres must have shape \(m, 3\)"),
     ({"centres": np.full((4, 3), np.nan)}, "NaN"),
     ({"alpha0": np.zeros(5)}, r"alpha0 must have shape \(30,\)"),
     ({"weighting": "pairs"}, "needs centre_labels"),
     ({"weighting": "degree"}, "weighting must be one of")],
)
def test_bad_parameters_are_named(kwargs, match):
    X, y, C, _, gamma = _problem(19)
    args = {"centres": C, "gamma": gamma, "lam": 1e-3, **kwargs}
    centres = args.pop("centres")
    with pytest.raises((ValueError, TypeError), match=match):
        kernel_pairwise_newton(X, y, centres, **args)
