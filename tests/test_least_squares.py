"""The least-squares AUC family against brute-force oracles (tests/reference/least_squares.py).

Statistical tests run with a fresh random seed each time (printed on failure) and state bounds
chosen to hold for any seed: each bound is at least twice the worst value measured over 30
seeds (numbers in the comments).
"""

from __future__ import annotations

import bz2
import io
import lzma

import dask.array as da
import numpy as np
import pytest
from conftest import shared_data
from dask.callbacks import Callback
from reference import least_squares as ref
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import roc_auc_score

from daskauc.engine.stream import epoch_plan
from daskauc.estimators.least_squares import (
    LSAUC,
    OPAUC,
    SOLAM,
    SPAM,
    SPDAM,
    TwoPassAUC,
)
from daskauc.solvers import _ls_kernels as K
from daskauc.solvers._ls_epochs import row_order
from daskauc.solvers.opauc import opauc
from daskauc.solvers.solam import solam
from daskauc.solvers.spam import spam
from daskauc.solvers.spdam import spdam
from daskauc.solvers.stats import (
    class_means,
    class_statistics,
    ls_gradient,
    ls_objective,
    lsauc,
)
from daskauc.solvers.twopass import twopass_auc, twopass_gradient

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _synthetic(n=60, r=5, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.35, 1, -1)
    y[:2] = [1, -1]
    X = rng.normal(size=(n, r)) + 0.7 * y[:, None] * rng.normal(size=r)
    return X.astype(dtype), y.astype(np.int8)


def _load(path, n_features=None):
    opener = lzma.open if str(path).endswith(".xz") else bz2.open
    with opener(path, "rb") as fh:
        X, y = load_svmlight_file(io.BytesIO(fh.read()), n_features=n_features)
    return np.ascontiguousarray(X.toarray()), np.where(y > 0, 1, -1).astype(np.int8)


@pytest.fixture(scope="module")
def diabetes():
    """LIBSVM diabetes_scale (768 x 8, features in [-1, 1]) and its exact LS optima."""
    X, y = _load(shared_data("diabetes", "diabetes_scale.xz"))
    lam = 1e-2
    stats = class_statistics(X, y)
    w = ref.ls_minimizer(X, y, lam)
    w0 = ref.ls_minimizer(X, y, 0.0)
    return {"X": X, "y": y, "lam": lam, "stats": stats, "w": w, "f": ref.ls_objective(w, X, y, lam),
            "w0": w0, "f0": ref.ls_objective(w0, X, y, 0.0)}


def _seed():
    return int(np.random.SeedSequence().entropy % 2**63)


# ---- statistics and LSAUC -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["numpy", "dask-1", "dask-7"])
def test_lsauc_equals_pairwise_minimizer(kind):
    X, y = _synthetic(n=70, r=6)
    lam = 1e-3
    if kind != "numpy":
        n_chunks = int(kind.split("-")[1])
        X = da.from_array(X, chunks=(-(-70 // n_chunks), 6))
        y = da.from_array(y, chunks=(X.chunks[0],))
    res = lsauc(X, y, lam=lam)
    Xn, yn = _synthetic(n=70, r=6)
    w_ref = ref.ls_minimizer(Xn, yn, lam)
    np.testing.assert_allclose(res.coef, w_ref, rtol=1e-8, atol=1e-10)
    # second, independent opinion: a generic optimizer on the pairwise sum
    np.testing.assert_allclose(res.coef, ref.ls_minimizer_scipy(Xn, yn, lam), rtol=1e-5)
    assert res.history[0]["objective"] == pytest.approx(ref.ls_objective(w_ref, Xn, yn, lam),
                                                        rel=1e-12)


def test_lsauc_on_cluster(dask_cluster_client):
    X, y = _synthetic(n=90, r=5, seed=3)
    Xd = da.from_array(X, chunks=(20, 5))
    yd = da.from_array(y, chunks=(20,))
    res = lsauc(Xd, yd, lam=1e-2)
    np.testing.assert_allclose(res.coef, ref.ls_minimizer(X, y, 1e-2), rtol=1e-8, atol=1e-10)


def test_class_statistics_match_definitions():
    X, y = _synthetic(n=80, r=4, seed=1)
    Xd = da.from_array(X, chunks=(13, 4))
    st = class_statistics(Xd, da.from_array(y, chunks=(13,)))
    P, N = X[y > 0], X[y < 0]
    assert (st.n_pos, st.n_neg) == (len(P), len(N))
    np.testing.assert_allclose(st.sum_pos, P.sum(0), rtol=1e-12)
    np.testing.assert_allclose(st.scatter_neg, N.T @ N, rtol=1e-12)
    np.testing.assert_allclose(st.cov_pos, np.cov(P.T, bias=True), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(st.D, P.mean(0) - N.mean(0), rtol=1e-12)
    assert st.p == pytest.approx(len(P) / len(X))
    assert st.max_norm_pos == pytest.approx(np.linalg.norm(P, axis=1).max())
    cm = class_means(Xd, da.from_array(y, chunks=(13,)))
    np.testing.assert_allclose(cm.mean_neg, N.mean(0), rtol=1e-12)
    assert cm.max_norm == pytest.approx(np.linalg.norm(X, axis=1).max())


@pytest.mark.parametrize("precision", ["float64", "mixed"])
def test_float32_statistics(precision):
    # float32 data with a large common offset: the centred float64 accumulation stays accurate
    X, y = _synthetic(n=3000, r=8, seed=2)
    X32 = (X + 50.0).astype(np.float32)
    X64 = X32.astype(np.float64)
    st = class_statistics(da.from_array(X32, chunks=(700, 8)), y, precision=precision)
    P = X64[y > 0]
    tol = 1e-10 if precision == "float64" else 1e-4
    np.testing.assert_allclose(st.cov_pos, np.cov(P.T, bias=True), rtol=tol, atol=tol)
    w = lsauc(X32, y, lam=1e-3, precision=precision).coef
    w_ref = ref.ls_minimizer(X64, y, 1e-3)
    np.testing.assert_allclose(w, w_ref, rtol=10 * tol, atol=10 * tol)


def test_objective_and_gradient_equal_pairwise_sums():
    X, y = _synthetic(n=50, r=4, seed=4)
    st = class_statistics(X, y)
    w = np.random.default_rng(0).normal(size=4)
    for lam in (0.0, 0.3):
        assert ls_objective(w, st, lam) == pytest.approx(ref.ls_objective(w, X, y, lam),
                                                         rel=1e-12)
        np.testing.assert_allclose(ls_gradient(w, st, lam), ref.ls_gradient(w, X, y, lam),
                                   rtol=1e-10, atol=1e-12)


# ---- per-row gradients: unbiasedness and kernels against references ---------------------


def test_twopass_gradient_is_unbiased():
    X, y = _synthetic(n=40, r=4, seed=5)
    means = class_means(X, y)
    w = np.random.default_rng(1).normal(size=4)
    lam = 0.1
    G = twopass_gradient(w, X, y, means, lam)
    np.testing.assert_allclose(G.mean(axis=0), ref.ls_gradient(w, X, y, lam), rtol=1e-10,
                               atol=1e-12)
    # and each row's gradient is the derivative of the row loss L_t defined in
    # docs/algorithms.md, "TwoPassAUC"
    for i in (0, 1, 7):
        g = ref.numerical_gradient(lambda v, i=i: ref.twopass_row_loss(v, X[i], y[i], X, y, lam),
                                   w)
        np.testing.assert_allclose(G[i], g, rtol=1e-7, atol=1e-9)
    # with the paper's printed 1/T+ (1/T-) weighting the mean is not the gradient
    n_pos, n_neg = int(np.sum(y > 0)), int(np.sum(y < 0))
    c = np.where((y > 0)[:, None], means.mean_pos, means.mean_neg)
    printed = np.where(y > 0, 1.0 / n_pos, 1.0 / n_neg)
    Z = X - c
    G_printed = ((2 * printed * (Z @ w))[:, None] * Z + 2 * (w @ means.D - 1) * means.D
                 + lam * w)
    assert not np.allclose(G_printed.mean(0), ref.ls_gradient(w, X, y, lam), rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_twopass_kernel_matches_reference(dtype):
    X, y = _synthetic(n=30, r=4, seed=6, dtype=dtype)
    order = np.random.default_rng(2).permutation(30).astype(np.int64)
    m = class_means(X, y)
    for invsqrt in (False, True):
        w = np.zeros(4)
        K._twopass_sgd_chunk(X, y, order, m.mean_pos, m.mean_neg, np.zeros(0), w,
                             np.zeros(1), 0, 0.05, invsqrt, 0.1, 2 * m.n / m.n_pos,
                             2 * m.n / m.n_neg, 1.0, 1.0, 16)
        w_ref = ref.twopass_run(X.astype(np.float64), y, order, 0.05, 0.1, invsqrt)
        np.testing.assert_allclose(w, w_ref, rtol=1e-6, atol=1e-8)


def test_opauc_kernel_matches_pairwise_reference():
    X, y = _synthetic(n=40, r=5, seed=7)
    order = np.random.default_rng(3).permutation(40).astype(np.int64)
    r = 5
    w = np.zeros(r)
    counts = np.zeros(2, np.int64)
    K._opauc_chunk(X, y, order, w, np.zeros(r), np.zeros(r), np.zeros((r, r)),
                   np.zeros((r, r)), counts, 0.05, 0.5 * 0.2)
    np.testing.assert_allclose(w, ref.opauc_run(X, y, order, 0.05, 0.2), rtol=1e-10,
                               atol=1e-12)
    assert counts.tolist() == [int(np.sum(y < 0)), int(np.sum(y > 0))]


def test_spam_gradient_is_unbiased_with_paper_sign():
    X, y = _synthetic(n=40, r=4, seed=8)
    cp, cn, p = ref.class_means(X, y)
    w = np.random.default_rng(4).normal(size=4)
    G = np.array([ref.spam_row_gradient(w, X[i], y[i], cp, cn, p) for i in range(40)])
    # E[d/dw F(w, a(w), b(w), alpha(w))] = p (1-p) grad LS_0(w)   (Natole et al. 2018, Lemma)
    np.testing.assert_allclose(G.mean(0), p * (1 - p) * ref.ls_gradient(w, X, y, 0.0),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("l1,invsqrt", [(0.0, True), (0.3, True), (0.0, False)])
def test_spam_kernel_matches_reference(l1, invsqrt):
    X, y = _synthetic(n=30, r=4, seed=9)
    order = np.random.default_rng(5).permutation(30).astype(np.int64)
    m = class_means(X, y)
    p = m.p
    w, wbar = np.zeros(4), np.zeros(4)
    K._spam_chunk(X, y, order, m.mean_pos, m.mean_neg, np.zeros(0), w, wbar, np.zeros(1), 0,
                  0.3, invsqrt, p, p * (1 - p) * 0.1, p * (1 - p) * l1, 1.0, 1.0, 16)
    w_ref, wbar_ref = ref.spam_run(X, y, order, 0.3, 0.1, l1, invsqrt)
    np.testing.assert_allclose(w, w_ref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(wbar, wbar_ref, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("mode,variant", [(0, "paper"), (1, "authors"), (2, "l2")])
def test_solam_kernel_matches_reference(mode, variant):
    X, y = _synthetic(n=30, r=4, seed=10)
    order = np.random.default_rng(6).permutation(30).astype(np.int64)
    R, kappa, zeta = 1.0, float(np.linalg.norm(X, axis=1).max()), 0.5
    from daskauc.solvers.solam import initial_state

    st = initial_state(4, R=R, variant="authors" if mode == 1 else "paper",
                       penalty="l2" if mode == 2 else "projection", random_state=0)
    w, wbar, scal = st.w.copy(), st.wbar.copy(), st.scal.copy()
    K._solam_chunk(X, y, order, np.zeros(0), w, wbar, scal, np.zeros(1), 0, zeta, R, kappa,
                   mode, 0.2, 1.0, 1.0, 16)
    wbar_ref = ref.solam_run(X, y, order, zeta, R, kappa, variant="authors" if mode == 1
                             else "paper", lam_ls=0.2 if mode == 2 else None)
    np.testing.assert_allclose(wbar, wbar_ref, rtol=1e-6, atol=1e-8)


def test_spdam_primal_is_half_ls():
    X, y = _synthetic(n=40, r=4, seed=11)
    w = np.random.default_rng(7).normal(size=4)
    for lam in (0.01, 1.0):
        assert ref.spdam_primal(w, X, y, lam) == pytest.approx(
            0.5 * (ref.ls_objective(w, X, y, lam) - 1.0), rel=1e-10)


@pytest.mark.parametrize("n_chunks,batch", [(1, 1), (3, 4)])
def test_spdam_solver_matches_spdc_reference(n_chunks, batch):
    """The whole streaming solver (state and duals threaded through shuffled chunks) equals a
    plain SPDC run on the same batches."""
    X, y = _synthetic(n=36, r=3, seed=12)
    lam, seed = 0.1, 123
    Xd = da.from_array(X, chunks=(36 // n_chunks, 3))
    yd = da.from_array(y, chunks=(36 // n_chunks,))
    res = spdam(Xd, yd, lam=lam, batch_size=batch, n_epochs=2, random_state=seed)
    pr = res.state.params
    ss = np.random.SeedSequence(seed)
    batches = []
    size = 36 // n_chunks
    for e in range(2):
        order, seeds = epoch_plan(ss.entropy, ss.spawn_key, e, n_chunks, True)
        for c, s in zip(order, seeds, strict=True):
            rows = c * size + row_order(s, size)
            batches += [rows[j:j + batch] for j in range(0, size, batch)]
    w_ref = ref.spdc_run(X, y, batches, lam, pr["sigma"], pr["tau"], pr["theta"])
    np.testing.assert_allclose(res.coef, w_ref, rtol=1e-6, atol=1e-8)


def test_twopass_solver_threads_state_through_chunks():
    X, y = _synthetic(n=30, r=3, seed=13)
    seed = 99
    res = twopass_auc(da.from_array(X, chunks=(10, 3)), da.from_array(y, chunks=(10,)),
                      lam=0.1, eta=0.05, n_epochs=2, random_state=seed)
    ss = np.random.SeedSequence(seed)
    rows = []
    for e in range(2):
        order, seeds = epoch_plan(ss.entropy, ss.spawn_key, e, 3, True)
        rows += [c * 10 + row_order(s, 10) for c, s in zip(order, seeds, strict=True)]
    w_ref = ref.twopass_run(X, y, np.concatenate(rows), 0.05, 0.1)
    np.testing.assert_allclose(res.coef, w_ref, rtol=1e-7, atol=1e-9)


# ---- convergence on real data toward LSAUC's optimum -------------------------------------

# (name, run(X, y, seed, n_epochs, state), target, bounds on (relative distance, objective
# gap) after 1, 5 and 20 epochs). Worst over 30 seeds measured in comments.
CONVERGENCE = {
    # worst rel .48/.27/.11, gap .057/.013/.0020 (deterministic up to the order)
    "twopass": (lambda d, s, e, st: twopass_auc(d["X"], d["y"], lam=d["lam"], eta=2.0**-5,
                                                schedule="invsqrt", n_epochs=e,
                                                random_state=s, state=st),
                "w", [(0.75, 0.15), (0.5, 0.04), (0.25, 0.006)]),
    # worst rel .53/.12/.023, gap .071/.0024/.00031
    "opauc": (lambda d, s, e, st: opauc(d["X"], d["y"], lam=d["lam"], eta=2.0**-8, n_epochs=e,
                                        random_state=s, state=st),
              "w", [(0.9, 0.2), (0.3, 0.01), (0.06, 0.001)]),
    # worst rel .87/.21/.060, gap .15/.0077/.00064
    "spam": (lambda d, s, e, st: spam(d["X"], d["y"], lam=d["lam"], eta=1.0, n_epochs=e,
                                      random_state=s, state=st),
             "w", [(None, 0.35), (0.45, 0.02), (0.15, 0.002)]),
    # regSOLAM, worst rel .56/.34/.20, gap .088/.029/.010
    "regsolam": (lambda d, s, e, st: solam(d["X"], d["y"], zeta=0.5, penalty="l2", lam=d["lam"],
                                           n_epochs=e, random_state=s, state=st),
                 "w", [(0.9, 0.2), (0.7, 0.07), (0.45, 0.025)]),
    # SOLAM (projection, R = 10 > ||w*(0)|| = 1.26) toward the unpenalized optimum;
    # worst rel .57/.35/.21, gap .090/.029/.010
    "solam": (lambda d, s, e, st: solam(d["X"], d["y"], zeta=0.5, R=10.0, n_epochs=e,
                                        random_state=s, state=st),
              "w0", [(0.9, 0.2), (0.7, 0.07), (0.45, 0.025)]),
    # worst rel .56/.30/.0048, gap .22/.030/1.1e-5
    "spdam": (lambda d, s, e, st: spdam(d["X"], d["y"], lam=d["lam"], n_epochs=e,
                                        random_state=s, state=st),
              "w", [(0.9, 0.45), (0.6, 0.07), (0.02, 1e-4)]),
}


@pytest.mark.parametrize("name", list(CONVERGENCE))
def test_convergence_toward_lsauc(diabetes, name):
    run, target, bounds = CONVERGENCE[name]
    w_t = diabetes[target]
    lam = 0.0 if target == "w0" else diabetes["lam"]
    f_t = diabetes["f0" if target == "w0" else "f"]
    seed = _seed()
    state, done = None, 0
    for epochs, (rel_bound, gap_bound) in zip((1, 5, 20), bounds, strict=True):
        res = run(diabetes, seed, epochs - done, state)
        state, done = res.state, epochs
        rel = np.linalg.norm(res.coef - w_t) / np.linalg.norm(w_t)
        gap = ref.ls_objective(res.coef, diabetes["X"], diabetes["y"], lam) - f_t
        msg = f"{name} seed={seed} epochs={epochs}: rel={rel:.3g} gap={gap:.3g}"
        assert gap >= -1e-12, msg
        assert gap < gap_bound, msg
        if rel_bound is not None:
            assert rel < rel_bound, msg


def test_spam_net_converges_to_elastic_net_optimum(diabetes):
    # worst over 30 seeds: rel .066 and gap .00082 after 20 epochs
    X, y, lam, l1 = diabetes["X"], diabetes["y"], diabetes["lam"], 1e-2
    w_t = ref.elastic_net_minimizer(X, y, lam, l1)
    f_t = ref.ls_objective(w_t, X, y, lam) + l1 * np.abs(w_t).sum()
    seed = _seed()
    res = spam(X, y, lam=lam, l1=l1, eta=1.0, n_epochs=20, random_state=seed)
    gap = ref.ls_objective(res.coef, X, y, lam) + l1 * np.abs(res.coef).sum() - f_t
    rel = np.linalg.norm(res.coef - w_t) / np.linalg.norm(w_t)
    assert -1e-12 <= gap < 0.002 and rel < 0.15, f"seed={seed} rel={rel:.3g} gap={gap:.3g}"


def test_spdam_converges_linearly(diabetes):
    """gap(20) < gap(5) * rho^15 with rho = SPDC's guaranteed per-epoch contraction
    theta^(n/m) (0.79 here); measured worst ratio over 30 seeds 4e-4 (rho^15 = 0.03)."""
    d = diabetes
    seed = _seed()
    res = spdam(d["X"], d["y"], lam=d["lam"], n_epochs=20, random_state=seed, stats=d["stats"])
    gaps = np.array([h["objective"] for h in res.history]) - d["f"]
    rho = res.state.params["epoch_rate"]
    assert 0.5 < rho < 0.9
    assert gaps[19] < gaps[4] * rho**15, f"seed={seed} gaps={gaps}"
    # and geometric all along: every 5 epochs the gap shrinks by at least rho^5
    for a in (5, 10):
        assert gaps[a + 4] < gaps[a - 1] * rho**5, f"seed={seed} gaps={gaps}"


# ---- estimators ------------------------------------------------------------------------


def test_estimators_fit_partial_fit_and_auc(diabetes):
    X, y = diabetes["X"], diabetes["y"]
    y01 = (y > 0).astype(int)  # any two-valued labels
    auc_opt = roc_auc_score(y, X @ diabetes["w"])
    for cls in (LSAUC, TwoPassAUC, OPAUC, SOLAM, SPAM, SPDAM):
        name = cls.__name__
        kw = {"zeta": 0.5} if name == "SOLAM" else {"lam": diabetes["lam"]}
        if name != "LSAUC":
            kw["random_state"] = 0
        est = cls(**kw).fit(X, y01)
        assert est.coef_.shape == (8,) and est.classes_.tolist() == [0, 1]
        assert len(est.history_) == est.n_iter_
        auc = roc_auc_score(y01, est.decision_function(X))
        assert auc > auc_opt - 0.01, (name, auc, auc_opt)
        n_before = est.n_iter_
        est.partial_fit(X, y01)
        assert est.n_iter_ == n_before + 1 and len(est.history_) == n_before + 1
    np.testing.assert_allclose(LSAUC(lam=diabetes["lam"]).fit(X, y).coef_, diabetes["w"],
                               rtol=1e-8)


def test_partial_fit_from_scratch_equals_fit_of_one_epoch():
    X, y = _synthetic(n=50, r=3, seed=14)
    a = SPAM(lam=0.1, n_epochs=1, random_state=5, average=True).fit(X, y)
    b = SPAM(lam=0.1, random_state=5, average=True).partial_fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = SPAM(lam=0.1, n_epochs=1, random_state=5, average=False).fit(X, y)
    np.testing.assert_array_equal(c.coef_, a._solver_state.w)
    assert not np.allclose(c.coef_, a.coef_)
    # LSAUC.partial_fit on two halves equals fit on the whole (exact statistics merge)
    h = LSAUC(lam=0.1).partial_fit(X[:25], y[:25]).partial_fit(X[25:], y[25:])
    np.testing.assert_allclose(h.coef_, LSAUC(lam=0.1).fit(X, y).coef_, rtol=1e-10)


def test_dask_one_chunk_equals_numpy_and_cluster_equals_threaded(dask_cluster_client):
    X, y = _synthetic(n=60, r=4, seed=15)
    est_np = TwoPassAUC(lam=0.1, eta=0.05, n_epochs=2, random_state=3).fit(X, y)
    Xd1 = da.from_array(X, chunks=(60, 4))
    est_d1 = TwoPassAUC(lam=0.1, eta=0.05, n_epochs=2, random_state=3).fit(Xd1, y)
    np.testing.assert_array_equal(est_np.coef_, est_d1.coef_)
    Xd = da.from_array(X, chunks=(15, 4))
    yd = da.from_array(y, chunks=(15,))
    with dask_cluster_client.as_current():
        on_cluster = [cls(random_state=3, n_epochs=2).fit(Xd, yd).coef_
                      for cls in (TwoPassAUC, OPAUC, SPAM, SPDAM)]
    import dask

    with dask.config.set(scheduler="threads"):
        threaded = [cls(random_state=3, n_epochs=2).fit(Xd, yd).coef_
                    for cls in (TwoPassAUC, OPAUC, SPAM, SPDAM)]
    for a, b in zip(on_cluster, threaded, strict=True):
        np.testing.assert_array_equal(a, b)


class _Graphs(Callback):
    def __init__(self):
        super().__init__()
        self.keys = []

    def _start(self, dsk):
        self.keys.append([str(k) for k in dsk])


@pytest.mark.parametrize("cls,name,first_pass", [
    (TwoPassAUC, "daskauc-twopass-epoch-", True), (SPAM, "daskauc-spam-epoch-", True),
    (SPDAM, "daskauc-spdam-epoch-", True), (OPAUC, "daskauc-opauc-epoch-", False),
    (SOLAM, "daskauc-solam-epoch-", False),
])
def test_one_named_graph_per_pass(cls, name, first_pass, monkeypatch):
    from daskauc import _config

    monkeypatch.setattr(_config, "CHAIN_TASK_BYTES", 1)  # one chunk per chain task
    X, y = _synthetic(n=80, r=3, seed=17)
    Xd = da.from_array(X, chunks=(20, 3))
    yd = da.from_array(y, chunks=(20,))
    with _Graphs() as g:
        cls(n_epochs=3, random_state=0).fit(Xd, yd)
    # the label check (check_X_y), SPAM's centring statistics (a bounded sample of chunks:
    # here all), the class means (first pass), OPAUC's and SOLAM's mean squared row norm for
    # their "auto" steps (a bounded sample: here all), one graph per epoch, the calibration's
    # scores
    centring = cls is SPAM
    norms = cls in (OPAUC, SOLAM)
    assert len(g.keys) == 1 + centring + first_pass + norms + 3 + 1
    if first_pass:
        assert any("daskauc-lsauc-means" in k for k in g.keys[1 + centring])
    for keys in g.keys[-4:-1]:
        # one task per chunk, plus the key holding the initial state
        assert sum(k.startswith(f"('{name}") for k in keys) == 4 + 1
    assert any("daskauc-scores" in k for k in g.keys[-1])
    with _Graphs() as g:
        LSAUC().fit(Xd, yd)
    assert len(g.keys) == 3 and any("daskauc-lsauc-stats" in k for k in g.keys[1])
    assert any("daskauc-scores" in k for k in g.keys[2])


def test_spdam_partial_fit_needs_same_rows():
    X, y = _synthetic(n=40, r=3, seed=16)
    est = SPDAM(lam=0.1, random_state=0, n_epochs=1).fit(X, y)
    est.partial_fit(da.from_array(X, chunks=(13, 3)), y)  # same rows, other chunks: fine
    with pytest.raises(ValueError, match="one dual variable per training row"):
        est.partial_fit(X[:30], y[:30])


@pytest.mark.parametrize("est,match", [
    (LSAUC(lam=-1.0), "lam must be >= 0"),
    (TwoPassAUC(eta=0.0), "eta must be > 0"),
    (TwoPassAUC(schedule="cosine"), "schedule must be one of"),
    (SPAM(n_epochs=0), "n_epochs must be >= 1"),
    (SPDAM(lam=0.0), "lam must be > 0"),
    (SOLAM(penalty="l1"), "penalty must be one of"),
    (OPAUC(lam="big"), "lam must be float"),
])
def test_bad_parameters_are_named(est, match):
    X, y = _synthetic(n=20, r=2)
    with pytest.raises((ValueError, TypeError), match=match):
        est.fit(X, y)


def test_bad_data_errors():
    X, y = _synthetic(n=20, r=2)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        LSAUC().fit(Xn, y)
    with pytest.raises(ValueError, match="single class"):
        SPAM().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="rows but y has"):
        TwoPassAUC().fit(X, y[:10])
    with pytest.raises(np.linalg.LinAlgError, match="use lam > 0"):
        LSAUC(lam=0.0).fit(np.c_[X, X], y)
    est = OPAUC(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(np.c_[X, X], y)


def test_mean_squared_row_norm_from_either_pass():
    """Step sizes scale with the mean squared row norm: the first pass (class_means, many
    chunks) and the statistics pass (class_statistics().means()) both give numpy's value."""
    from daskauc.solvers.stats import class_means, class_statistics

    rng = np.random.default_rng(8)
    X = rng.normal(size=(500, 6)) * [1, 2, 3, 0.5, 10, 1] + 4
    y = np.where(rng.random(500) < 0.3, 1, -1)
    expected = float(np.mean(np.sum(X**2, axis=1)))
    Xd = da.from_array(X, chunks=(90, 6))
    yd = da.from_array(y, chunks=90)
    assert class_means(Xd, yd).mean_sq_norm == pytest.approx(expected, rel=1e-12)
    assert class_statistics(Xd, yd).means().mean_sq_norm == pytest.approx(expected, rel=1e-10)


@pytest.fixture(scope="module")
def spambase_scalings(tmp_path_factory):
    """The shipped spambase, stratified 80/20 split (seed 0), standardized and scaled to
    [-1, 1]: the two scalings users pick, on which fixed step sizes diverged."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    import daskauc

    ds = daskauc.data.load_default(tmp_path_factory.mktemp("sb") / "s.zarr")
    X, y = ds.X.compute().astype(np.float64), ds.y.compute()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    out = {}
    for name, scaler in (("standardized", StandardScaler()), ("[-1, 1]", MinMaxScaler((-1, 1)))):
        scaler.fit(Xtr)
        out[name] = (scaler.transform(Xtr), ytr, scaler.transform(Xte), yte)
    return out


@pytest.mark.parametrize("scaling", ["standardized", "[-1, 1]"])
def test_auto_steps_do_not_depend_on_the_scaling(spambase_scalings, scaling):
    """eta / zeta / eta0 = "auto" (the defaults): TwoPassAUC and SOLAM land near the exact LS
    optimum (LSAUC at the same lam) and UnivariateAUC stays finite and accurate, whatever the
    scaling. The former fixed defaults diverged (TwoPassAUC eta=2^-6 and UnivariateAUC
    eta0=0.01 on standardized rows) or gave 0.24-0.33 (SOLAM zeta=100 on [-1, 1])."""
    from daskauc import UnivariateAUC

    Xtr, ytr, Xte, yte = spambase_scalings[scaling]
    optimum = LSAUC(lam=1e-3).fit(Xtr, ytr).score(Xte, yte)
    twopass = TwoPassAUC(random_state=0).fit(Xtr, ytr)
    assert twopass.eta_ > 0 and twopass.score(Xte, yte) > optimum - 0.004
    solam_model = SOLAM(random_state=0).fit(Xtr, ytr)
    assert solam_model.score(Xte, yte) > optimum - (0.002 if scaling == "standardized" else 0.03)
    for loss in ("exp", "square"):
        uni = UnivariateAUC(loss, random_state=0).fit(Xtr, ytr)
        assert np.isfinite(uni.coef_).all() and uni.score(Xte, yte) > 0.93
    # continuing keeps the step of the first fit
    eta = twopass.eta_
    twopass.partial_fit(Xtr[:500], ytr[:500])
    assert twopass.eta_ == eta


@pytest.mark.parametrize("n_chains", [1, 2])
def test_auto_eta_has_a_ceiling_for_rows_far_from_their_class_mean(n_chains):
    """Standardized rare binary columns put a few rows hundreds of mean norms from their
    class mean (covtype: 2,900x). eta="auto" from the mean norm alone overshoots on them and
    diverges (||w|| 1e13 here, 3e22 on covtype, and with two chains the mixed iterate's sign
    flipped: test AUC 0.26); the ceiling from the largest norm keeps ``w`` finite and the fit
    at the exact LS optimum's AUC."""
    rng = np.random.default_rng(0)
    n = 20_000
    rare = np.zeros((n, 3))
    for j in range(3):
        rare[rng.choice(n, 3, replace=False), j] = 1.0
    X = np.hstack([rng.standard_normal((n, 8)), rare])
    y = np.where(X[:, :8] @ rng.standard_normal(8) + rng.standard_normal(n) > 0, 1, -1)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    means = class_means(X, y)
    mean_rule = TwoPassAUC.AUTO_ETA / (means.class_weight * means.mean_within_sq_norm)
    Xd, yd = da.from_array(X, chunks=(5_000, -1)), da.from_array(y, chunks=5_000)
    optimum = LSAUC(lam=1e-3).fit(X, y).score(X, y)
    model = TwoPassAUC(random_state=0, n_chains=n_chains).fit(Xd, yd)
    assert model.eta_ < mean_rule / 4  # the ceiling binds here
    assert np.linalg.norm(model.coef_) < 10 and model.score(X, y) > optimum - 0.001
    # the oracle that the ceiling is needed: the mean rule alone diverges on these rows
    diverged = TwoPassAUC(eta=mean_rule, random_state=0, n_chains=n_chains).fit(Xd, yd)
    assert np.linalg.norm(diverged.coef_) > 1e6
