"""Online baselines: OAM (seq / gra) and Uni-Exp / Uni-Squ (docs/algorithms.md)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback
from reference.online import (
    least_squares_auc_optimum,
    oam_reference,
    pairwise_exp_optimum,
    univariate_reference,
    weighted_square_optimum,
)
from sklearn.base import clone
from sklearn.metrics import roc_auc_score

from daskauc._registry import method_class
from daskauc.engine.stream import epoch_plan
from daskauc.estimators.online import OAM, UnivariateAUC
from daskauc.solvers._online_kernels import _oam_chunk
from daskauc.solvers.oam import oam, oam_draws
from daskauc.solvers.univariate import univariate_draws, univariate_sgd


def _data(n=240, d=4, p=0.3, seed=0, shift=1.0):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < p, 1, -1).astype(np.int8)
    A = rng.normal(size=(d, d)) / np.sqrt(d) + np.eye(d)
    X = rng.normal(size=(n, d)) @ A + shift * np.outer(y > 0, rng.normal(size=d))
    return X, y


def _starts(chunks):
    return np.concatenate([[0], np.cumsum(chunks)[:-1]])


def _oam_visits(chunks, state, epochs, K, shuffle=True):
    starts = _starts(chunks)
    visits = []
    for e in epochs:
        order, seeds = epoch_plan(state.seed_entropy, state.seed_key, e, len(chunks), shuffle)
        for k, c in enumerate(order):
            rows, u, slot = oam_draws(seeds[k], chunks[c], K, shuffle)
            visits.append((starts[c] + rows, u, slot))
    return visits


def _uni_visits(chunks, state, epochs, shuffle=True):
    starts = _starts(chunks)
    visits = []
    for e in epochs:
        order, seeds = epoch_plan(state.seed_entropy, state.seed_key, e, len(chunks), shuffle)
        for k, c in enumerate(order):
            visits.append(starts[c] + univariate_draws(seeds[k], chunks[c], shuffle))
    return visits


# ---------------------------------------------------------------------------------------
# exact agreement with the per-sample pure-Python references


@pytest.mark.parametrize("update,dtype,average", [
    ("seq", np.float64, False), ("gra", np.float64, False), ("seq", np.float32, False),
    ("seq", np.float64, True), ("gra", np.float32, True),
])
def test_oam_matches_reference(update, dtype, average):
    X, y = _data()
    X = X.astype(dtype)
    K, C, eta = 7, 0.3, 0.05
    Xd = da.from_array(X, chunks=(60, X.shape[1]))
    res = oam(Xd, y, C=C, buffer_size=K, update=update, eta=eta, average=average, n_epochs=2,
              random_state=11)
    st = res.state
    visits = _oam_visits(Xd.chunks[0], st, [0, 1], K)
    ref = oam_reference(X, y, visits, C=C, buffer_size=K, update=update, eta=eta,
                        average=average)
    expect = ref["wbar"] if average else ref["w"]
    assert np.abs(expect).max() > 0.1  # the run did move
    np.testing.assert_allclose(res.coef, expect, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(st.w, ref["w"], rtol=1e-10, atol=1e-10)
    assert (st.counts[1], st.counts[0]) == (ref["n_pos"], ref["n_neg"]) == ((y > 0).sum() * 2,
                                                                           (y < 0).sum() * 2)
    np.testing.assert_array_equal(st.buf_pos, np.asarray(ref["pos"]))
    np.testing.assert_array_equal(st.buf_neg, np.asarray(ref["neg"]))


@pytest.mark.parametrize("loss,schedule,average,lam", [
    ("exp", "invsqrt", True, 0.01),
    ("exp", "constant", False, 0.0),
    ("square", "constant", False, 0.1),
    ("square", "invsqrt", True, 0.0),
])
def test_univariate_matches_reference(loss, schedule, average, lam):
    X, y = _data(seed=1)
    eta0 = 0.05 if schedule == "invsqrt" else 0.01
    Xd = da.from_array(X, chunks=(60, X.shape[1]))
    res = univariate_sgd(Xd, y, loss=loss, lam=lam, eta0=eta0, schedule=schedule,
                         average=average, n_epochs=3, random_state=5)
    visits = _uni_visits(Xd.chunks[0], res.state, [0, 1, 2])
    ref = univariate_reference(X, y, visits, loss=loss, lam=lam, eta0=eta0, schedule=schedule,
                               average=average)
    expect = ref["wbar"] if average else ref["w"]
    assert np.abs(expect).max() > 0.05
    np.testing.assert_allclose(res.coef, expect, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(res.state.offset, [ref["b"], ref["bbar"] if average else 0.0],
                               rtol=1e-10, atol=1e-10)
    assert tuple(res.state.counts) == (ref["t"], ref["n_pos"]) == (3 * len(y), 3 * (y > 0).sum())


def test_reservoir_keeps_a_uniform_sample():
    # n positive rows stream through a K-row reservoir R times (fresh seeds): every row must
    # end up in the buffer with probability K/n. Binomial std sqrt(q(1-q)/R) = 0.0073; the
    # bound is 5 std, so a correct reservoir fails with probability < 50 * 6e-7.
    n, K, R = 60, 12, 3000
    X = np.arange(n, dtype=np.float64).reshape(-1, 1)
    y = np.ones(n, dtype=np.int8)
    hits = np.zeros(n)
    root = np.random.SeedSequence(2024)
    for seed in root.spawn(R):
        order, u, slot = oam_draws(seed, n, K, shuffle=True)
        w, wbar, bp, bn = np.zeros(1), np.zeros(1), np.zeros((K, 1)), np.zeros((K, 1))
        counts = np.zeros(2, dtype=np.int64)
        _oam_chunk(X, y, order, u, slot, w, wbar, bp, bn, counts, 1.0, 0.5, False, False)
        kept = bp[:, 0].astype(int)
        assert np.unique(kept).size == K
        hits[kept] += 1
    assert np.abs(hits / R - K / n).max() < 5 * np.sqrt(K / n * (1 - K / n) / R)


# ---------------------------------------------------------------------------------------
# quality against independent optima


def _separable(n=600, d=5, seed=0):
    w = np.random.default_rng(99).normal(size=d)  # the same separating direction for all
    X = np.random.default_rng(seed).normal(size=(n, d))
    m = X @ w / np.linalg.norm(w)
    keep = np.abs(m) > 0.3  # a margin
    X, m = X[keep], m[keep]
    y = np.where(m > 0.8, 1, -1)  # imbalanced, separable by w
    return X, y


@pytest.mark.parametrize("est", [OAM(random_state=0), OAM(update="gra", random_state=0),
                                 OAM(average=True, random_state=0),
                                 UnivariateAUC("exp", random_state=0),
                                 UnivariateAUC("square", random_state=0, n_epochs=3)],
                         ids=["oam-seq", "oam-gra", "oam-avg", "uni-exp", "uni-squ"])
def test_separable_problem_reaches_auc_one(est):
    X, y = _separable()
    Xt, yt = _separable(seed=1)
    est.fit(X, y)
    assert roc_auc_score(y, est.decision_function(X)) > 0.99
    assert roc_auc_score(yt, est.decision_function(Xt)) > 0.99


def test_oracles_agree_uni_squ_direction_is_least_squares_auc():
    # The squared univariate minimizer (with offset) is parallel to the LS optimum
    # (docs/algorithms.md).
    X, y = _data(n=500, d=4, seed=3)
    for lam in (0.0, 0.3):
        w, _ = weighted_square_optimum(X, y, lam)
        ls = least_squares_auc_optimum(X, y, lam)
        cos = w @ ls / np.linalg.norm(w) / np.linalg.norm(ls)
        assert cos > 1 - 1e-10


def test_uni_squ_converges_to_closed_form():
    X, y = _data(n=3000, d=3, p=0.25, seed=4)
    lam = 0.1
    w_star, _ = weighted_square_optimum(X, y, lam)
    res = univariate_sgd(X, y, loss="square", lam=lam, eta0=0.05, schedule="invsqrt",
                         average=True, n_epochs=30, random_state=0, chunk_rows=1000)
    err = np.linalg.norm(res.coef - w_star) / np.linalg.norm(w_star)
    assert err < 0.02, err  # measured 0.0012-0.0030 over 6 seeds


def test_uni_exp_converges_to_pairwise_exponential_optimum():
    X, y = _data(n=1500, d=3, p=0.3, seed=5, shift=0.7)
    w_star = pairwise_exp_optimum(X, y)
    # The weighted exponential loss with its offset minimized out is the pairwise one, so
    # the SGD's w approaches the brute-force pairwise optimum (slowly: the average carries
    # the early iterates; measured relative error 0.016-0.017 over 6 seeds at 100 epochs).
    res = univariate_sgd(X, y, loss="exp", lam=0.0, eta0=0.02, schedule="invsqrt",
                         average=True, n_epochs=100, random_state=0)
    err = np.linalg.norm(res.coef - w_star) / np.linalg.norm(w_star)
    assert err < 0.04, err


# ---------------------------------------------------------------------------------------
# input kinds, schedulers, determinism, partial_fit


@pytest.mark.parametrize("cls", [OAM, UnivariateAUC])
def test_numpy_and_dask_one_chunk_agree_exactly(cls):
    X, y = _data(n=300, seed=6)
    a = cls(random_state=3, n_epochs=2).fit(X, y).coef_
    b = cls(random_state=3, n_epochs=2).fit(da.from_array(X, chunks=X.shape), y).coef_
    np.testing.assert_array_equal(a, b)


def test_numpy_and_dask_many_chunks_agree_exactly_and_differ_from_one_chunk():
    X, y = _data(n=300, seed=7)
    Xd = da.from_array(X, chunks=(70, X.shape[1]))
    yd = da.from_array(y, chunks=70)
    for solve in (lambda X, y, **k: oam(X, y, buffer_size=10, **k),
                  lambda X, y, **k: univariate_sgd(X, y, **k)):
        a = solve(X, y, random_state=9, chunk_rows=70, n_epochs=2).coef
        b = solve(Xd, yd, random_state=9, n_epochs=2).coef
        c = solve(X, y, random_state=9, n_epochs=2).coef
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)  # the chunking is part of the random plan


def test_zarr_input_streams_like_dask(tmp_path):
    import zarr

    X, y = _data(n=200, seed=15)
    z = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, chunks=(50, 4),
                          dtype="float64")
    z[:] = X
    a = OAM(buffer_size=6, average=True, random_state=1).fit(z, y).coef_
    b = oam(da.from_array(X, chunks=(50, 4)), y, buffer_size=6, average=True,
            random_state=1).coef
    np.testing.assert_array_equal(a, b)


def test_distributed_cluster_equals_threads(dask_cluster_client):
    X, y = _data(n=300, seed=8)
    Xd = da.from_array(X.astype(np.float32), chunks=(100, X.shape[1]))
    with dask.config.set(scheduler="threads"):
        a = oam(Xd, y, buffer_size=9, update="gra", eta=0.1, random_state=2).coef
        b = univariate_sgd(Xd, y, loss="square", random_state=2, n_epochs=2).coef
    a2 = oam(Xd, y, buffer_size=9, update="gra", eta=0.1, random_state=2).coef
    b2 = univariate_sgd(Xd, y, loss="square", random_state=2, n_epochs=2).coef
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)


class _Graphs(Callback):
    def __init__(self):
        super().__init__()
        self.keys = []

    def _start(self, dsk):
        self.keys.append([str(k) for k in dsk])


def test_one_named_graph_per_epoch(monkeypatch):
    from daskauc import _config

    monkeypatch.setattr(_config, "CHAIN_TASK_BYTES", 1)  # one chunk per chain task
    X, y = _data(n=200, seed=9)
    Xd = da.from_array(X, chunks=(50, X.shape[1]))
    yd = da.from_array(y, chunks=50)
    for solve, name in ((oam, "daskauc-oam-epoch-"), (univariate_sgd, "daskauc-uni-exp-epoch-")):
        with dask.config.set(scheduler="sync"), _Graphs() as g:
            solve(Xd, yd, n_epochs=3, random_state=0)
        assert len(g.keys) == 3
        # one task per chunk (4) plus the initial state
        assert all(sum(name in k and "init" not in k for k in keys) == 4 for keys in g.keys)


@pytest.mark.parametrize("make", [lambda: OAM(buffer_size=6, average=True, random_state=4),
                                  lambda: UnivariateAUC("square", random_state=4)],
                         ids=["oam", "uni-squ"])
def test_partial_fit_continues_the_state(make):
    X, y = _data(n=200, seed=10)
    two = make().set_params(n_epochs=2).fit(X, y)
    one = make().set_params(n_epochs=1).fit(X, y)
    one.partial_fit(X, y)
    np.testing.assert_array_equal(one.coef_, two.coef_)
    assert one.n_iter_ == two.n_iter_ == 2 and len(one.history_) == 2


def test_partial_fit_single_class_batches_and_label_values():
    X, y = _data(n=200, seed=12)
    labels = np.where(y > 0, "spam", "ham")
    first = np.arange(200) < 80
    first[y > 0] &= False  # batch 1: negatives only, batch 2: the rest
    est = OAM(buffer_size=5, random_state=0)
    est.partial_fit(X[first], labels[first], classes=["spam", "ham"])
    np.testing.assert_array_equal(est.coef_, 0.0)  # no positives yet: nothing to compare with
    est.partial_fit(X[~first], labels[~first])
    assert list(est.classes_) == ["ham", "spam"] and est.n_iter_ == 2
    # the same as the reference streaming batch 1 (epoch 0) then batch 2 (epoch 1)
    Xs, ys = np.concatenate([X[first], X[~first]]), np.concatenate([y[first], y[~first]])
    n1 = int(first.sum())
    st = est._solver_state
    visits = _oam_visits([n1], st, [0], 5) + [
        (n1 + r, u, s) for r, u, s in _oam_visits([200 - n1], st, [1], 5)]
    ref = oam_reference(Xs, ys, visits, C=1.0, buffer_size=5, update="seq", eta=0.5)
    np.testing.assert_allclose(est.coef_, ref["w"], rtol=1e-10, atol=1e-10)
    assert np.abs(est.coef_).max() > 0.1
    with pytest.raises(ValueError, match="not among the classes"):
        est.partial_fit(X[:5], ["spam", "eggs", "ham", "ham", "ham"])
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:5, :2], labels[:5])


def test_record_auc_and_float32_dask_input():
    X, y = _data(n=300, seed=13)
    Xd = da.from_array(X.astype(np.float32), chunks=(100, X.shape[1]))
    est = UnivariateAUC("exp", n_epochs=2, record_auc=True, random_state=1).fit(Xd, y)
    assert [r["epoch"] for r in est.history_] == [1, 2]
    assert all(r["seconds"] >= 0 for r in est.history_)
    scores = est.decision_function(X.astype(np.float32))
    assert est.history_[-1]["auc"] == pytest.approx(roc_auc_score(y, scores), abs=1e-12)
    assert est.coef_.dtype == np.float64 and isinstance(est.offset_, float)


def test_readonly_blocks_are_accepted():
    X, y = _data(n=120, seed=14)
    X.setflags(write=False)
    y.setflags(write=False)
    a = oam(X, y, random_state=0).coef
    b = univariate_sgd(X.copy(), y.copy(), random_state=0).coef
    assert np.isfinite(a).all() and np.isfinite(b).all()


# ---------------------------------------------------------------------------------------
# parameters and errors


@pytest.mark.parametrize("est,exc,match", [
    (OAM(C=-1.0), ValueError, "C must be > 0"),
    (OAM(update="pa"), ValueError, "update must be one of"),
    (OAM(buffer_size=0), ValueError, "buffer_size must be >= 1"),
    (OAM(n_epochs=1.5), TypeError, "n_epochs must be int"),
    (OAM(random_state="x"), TypeError, "random_state"),
    (UnivariateAUC(loss="hinge"), ValueError, "loss must be one of"),
    (UnivariateAUC(eta0=0.0), ValueError, "eta0 must be > 0"),
    (UnivariateAUC(lam=-1.0), ValueError, "lam must be >= 0"),
    (UnivariateAUC(schedule="1/t"), ValueError, "schedule must be one of"),
])
def test_bad_parameters_are_named(est, exc, match):
    X, y = _data(n=50)
    with pytest.raises(exc, match=match):
        est.fit(X, y)


def test_bad_data_and_divergence():
    X, y = _data(n=50)
    with pytest.raises(ValueError, match="single class"):
        OAM().fit(X, np.ones(50))
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        UnivariateAUC().fit(Xn, y)
    with pytest.raises(FloatingPointError, match="diverged"):
        UnivariateAUC("exp", eta0=1e4, schedule="constant", random_state=0).fit(100 * X, y)


def test_sklearn_contract_and_registry():
    est = OAM(2.0, buffer_size=3)
    assert clone(est).get_params() == est.get_params()
    assert not hasattr(est, "coef_")
    cls, fixed = method_class("uni-squ")
    uni = cls(**fixed, lam=0.5)
    assert (uni.loss, uni.lam) == ("square", 0.5)
    assert method_class("uni-exp") == (UnivariateAUC, {"loss": "exp"})
    assert method_class("oam") == (OAM, {})
    with pytest.raises(KeyError, match="no method 'uni'; the methods: kernel, lsauc"):
        method_class("uni")
    X, y = _data(n=100)
    fitted = UnivariateAUC(**method_class("uni-exp")[1], random_state=0).fit(X, y)
    assert fitted.get_params()["loss"] == "exp" and fitted.predict(X).shape == (100,)
