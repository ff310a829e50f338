"""The papers' presets: a feature map plus a linear solver as one estimator."""

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.metrics import roc_auc_score

from daskauc import PairwiseHingeSGD, RankSVM, load_model, save_model
from daskauc.embed import gaussian_kernel
from daskauc.estimators.presets import (
    NBAUC,
    NOAM,
    NSAUC,
    NSOLAM,
    NSVMSGD2,
    RFAUC,
    KernelRankSVM,
)


def _circle(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where((X[:, :2] ** 2).sum(1) > 1.4, 1, -1)
    return X, y


@pytest.mark.parametrize(
    "make",
    [
        lambda: NSAUC(lam=1e-4, n_epochs=5, n_landmarks=80, random_state=0),
        lambda: NSVMSGD2(lam=1e-4, n_epochs=5, n_landmarks=80, random_state=0),
        lambda: NBAUC(C=1e-3, n_landmarks=80, random_state=0),
        lambda: RFAUC(C=1e-3, n_landmarks=300, random_state=0),
        lambda: NOAM(C=0.5, n_epochs=3, n_landmarks=80, random_state=0),
        lambda: NSOLAM(zeta=10.0, R=10.0, n_epochs=5, n_landmarks=80, random_state=0),
    ],
)
def test_presets_learn_a_nonlinear_ranking(make):
    X, y = _circle()
    Xt, yt = _circle(seed=1)
    linear = PairwiseHingeSGD(lam=1e-4, random_state=0).fit(X, y)
    assert roc_auc_score(yt, linear.decision_function(Xt)) < 0.75  # a circle is not linear
    model = make().fit(X, y)
    assert model.score(Xt, yt) > 0.9
    assert model.score(Xt, yt) == pytest.approx(roc_auc_score(yt, model.decision_function(Xt)))


def test_embedding_store_and_in_memory_embed_identically(tmp_path):
    X, y = _circle(n=300)
    a = NSAUC(lam=1e-4, n_landmarks=40, random_state=3).fit(X, y)
    b = NSAUC(lam=1e-4, n_landmarks=40, random_state=3,
              embedding_store=str(tmp_path / "emb.zarr")).fit(X, y)
    np.testing.assert_allclose(a.transform(X), b.transform(X), rtol=1e-5, atol=1e-5)  # float32
    from daskauc import open_dataset

    stored = open_dataset(tmp_path / "emb.zarr").X.compute()
    np.testing.assert_allclose(stored, a.transform(X), rtol=1e-5, atol=1e-5)
    with pytest.raises(FileExistsError):
        NSAUC(lam=1e-4, n_landmarks=40, embedding_store=str(tmp_path / "emb.zarr")).fit(X, y)


def test_kernel_ranksvm_solves_the_exact_kernel_problem():
    # oracle: minimize 1/2 a'Ka + C sum_{P x N} max(0, 1 - f_i + f_j)^2 over a, f = K a
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    C = 0.05
    model = KernelRankSVM(C=C, tol=1e-10, max_iter=100, standardize=False).fit(X, y)
    K = gaussian_kernel(X, X, model.embedding_.gamma_)
    P, N = np.flatnonzero(y > 0), np.flatnonzero(y < 0)

    def objective(a):
        f = K @ a
        m = np.maximum(0.0, 1.0 - f[P][:, None] + f[N][None, :])
        g_f = np.zeros_like(f)
        np.add.at(g_f, P, -2 * C * m.sum(1))
        np.add.at(g_f, N, 2 * C * m.sum(0))
        return 0.5 * a @ K @ a + C * (m ** 2).sum(), K @ a + K @ g_f

    best = minimize(objective, np.zeros(len(y)), jac=True, method="L-BFGS-B",
                    options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-12})
    Z = model.transform(X)
    w = model.coef_
    m = np.maximum(0.0, 1.0 - (Z @ w)[P][:, None] + (Z @ w)[N][None, :])
    ours = 0.5 * w @ w + C * (m ** 2).sum()
    assert ours == pytest.approx(best.fun, rel=1e-6)
    np.testing.assert_allclose(Z @ w, K @ best.x, atol=1e-4)


def test_preset_round_trip_through_save_model(tmp_path):
    X, y = _circle(n=300)
    model = NSAUC(lam=1e-4, n_landmarks=30, random_state=1).fit(X, y)
    save_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    np.testing.assert_allclose(back.decision_function(X), model.decision_function(X),
                               rtol=1e-6)
    assert back.get_params() == model.get_params()


# ---------------------------------------------------------------- C="auto" on tiny data


@pytest.mark.parametrize("per_class", [(1, 1), (1, 5), (4, 1)])
@pytest.mark.parametrize("make", [
    lambda: RankSVM(random_state=0),
    lambda: NBAUC(n_landmarks=4, random_state=0),
    lambda: RFAUC(n_landmarks=8, random_state=0),
    lambda: KernelRankSVM(random_state=0),
])
def test_auto_C_on_too_few_rows_of_a_class_says_so_before_any_work(make, per_class):
    """The reported case: RankSVM() on one row per class failed with "X has 0 samples" from
    an empty selection fold (NBAUC after fitting its embedding)."""
    from dask.callbacks import Callback

    pos, neg = per_class
    rng = np.random.default_rng(0)
    X = rng.normal(size=(pos + neg, 3))
    y = np.r_[np.ones(pos), -np.ones(neg)]
    computes = []

    class Count(Callback):
        def _start(self, dsk):
            computes.append(1)

    with Count(), pytest.raises(ValueError) as info:
        make().fit(X, y)
    msg = str(info.value)
    assert 'C="auto"' in msg and f"{pos} positive and {neg} negative" in msg
    assert "at least 2 of each" in msg and "C=1.0" in msg
    if not isinstance(make(), RankSVM):
        assert not computes, "the feature map was fitted before the refusal"


def test_auto_C_works_from_two_rows_of_each_class():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 3))
    y = np.array([1, 1, -1, -1])
    assert RankSVM(random_state=0).fit(X, y).C_ > 0
    with pytest.raises(ValueError, match='C="auto"'):
        RankSVM(random_state=0).partial_fit(X[1:], y[1:])  # one positive in the first batch
    assert NBAUC(n_landmarks=4, random_state=0).fit(X, y).solver_.C_ > 0
