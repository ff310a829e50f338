"""Platt calibration at the end of every fit: the Newton solver against an independent oracle,
the rows it reads, and what ``decision_function``, ``predict_proba`` and ``predict`` make of
it for numpy, dask and store input."""

import dask.array as da
import numpy as np
import pytest
from helpers import ComputeCounter, dataset_store
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, balanced_accuracy_score, roc_auc_score
from sklearn.model_selection import FixedThresholdClassifier, TunedThresholdClassifierCV

from daskauc import (
    LSAUC,
    NSAUC,
    OAM,
    SPAM,
    KernelAUC,
    PairwiseHingeSGD,
    RankSVM,
    UnivariateAUC,
    load_model,
    save_model,
)
from daskauc.composite import calibration as _calibration
from daskauc.composite.calibration import (
    calibration_blocks,
    calibration_data,
    platt_scaling,
    platt_targets,
)

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


# ------------------------------------------------------------------ the solver and its oracle


def _oracle(s, y, weights=(1.0, 1.0)):
    """The same negative log-likelihood (each row weighted by its class's weight) minimized
    by BFGS on the raw scores (no scaling, no Newton, no line search of ours)."""
    t = platt_targets(y)
    c = np.where(y > 0, weights[1], weights[0])

    def f(theta):
        u = theta[0] * s + theta[1]
        r = c * (expit(u) - t)
        return np.sum(c * (np.logaddexp(0.0, u) - t * u)), np.array([r @ s, r.sum()])

    res = minimize(f, np.zeros(2), jac=True, method="BFGS", options={"gtol": 1e-11,
                                                                     "maxiter": 10_000})
    return res.x, res.fun, f


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n, pos_rate, scale", [(60, 0.5, 1.0), (500, 0.1, 3.0),
                                                (300, 0.7, 0.2), (2000, 0.3, 1.0)])
def test_platt_newton_matches_an_independent_optimizer(seed, n, pos_rate, scale):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < pos_rate, 1, -1)
    y[:2] = [1, -1]
    s = scale * (rng.normal(size=n) + 1.2 * y) + 0.7  # informative, off-centre scores
    fit = platt_scaling(s, y)
    (a, b), best, f = _oracle(s, y)
    assert not fit.prior_only and fit.slope > 0
    ours = f(np.array([fit.slope, fit.offset]))[0]
    assert ours <= best + 1e-9 * abs(best)  # at least as good as the oracle's optimum
    np.testing.assert_allclose([fit.slope, fit.offset], [a, b], rtol=1e-5, atol=1e-7)


def test_platt_on_separable_scores_stays_finite():
    # Platt's smoothed targets keep the optimum finite where 0/1 targets would send a to inf
    s = np.r_[np.linspace(-3, -1, 40), np.linspace(1, 3, 20)]
    y = np.r_[-np.ones(40), np.ones(20)]
    fit = platt_scaling(s, y)
    (a, b), _, _ = _oracle(s, y)
    np.testing.assert_allclose([fit.slope, fit.offset], [a, b], rtol=1e-5)
    assert np.isfinite(fit.slope) and fit.slope > 0


@pytest.mark.parametrize("case", ["constant", "reversed", "one class"])
def test_without_a_positive_slope_every_row_gets_the_prior(case):
    rng = np.random.default_rng(0)
    y = np.where(rng.random(300) < 0.25, 1, -1)
    s = {"constant": np.full(300, 4.0), "reversed": -2.0 * y + rng.normal(size=300),
         "one class": rng.normal(size=300)}[case]
    if case == "one class":
        y = -np.ones(300)
    fit = platt_scaling(s, y)
    assert fit.prior_only and fit.slope > 0  # the ranking is kept
    p = expit(fit.slope * s + fit.offset)
    np.testing.assert_allclose(p, platt_targets(y).mean(), atol=1e-5)


def test_calibration_blocks_are_whole_chunks_spread_over_the_rows():
    assert calibration_blocks((100,) * 10, 2_000) == (list(range(10)), None)
    assert calibration_blocks((100,) * 10, 250) == ([0, 9], None)
    assert calibration_blocks((100,) * 10, 400) == ([0, 3, 6, 9], None)
    blocks, cut = calibration_blocks((100,) * 9 + (40,), 300)
    assert cut is None and len(blocks) == 3 and sum([100] * 3) <= 300
    assert calibration_blocks((500, 500, 500), 200) == ([1], 200)  # one chunk too large


def test_calibration_data_reads_a_bounded_sample_in_one_compute():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1000, 4))
    y = np.where(X[:, 0] > 0, 1, -1).astype(np.int8)
    Xd, yd = da.from_array(X, chunks=(100, 4)), da.from_array(y, chunks=100)
    w = np.array([1.0, 0.5, 0.0, -1.0])
    with ComputeCounter() as counter:
        s, yy = calibration_data(Xd, yd, lambda R: R @ w, all_rows=False, max_rows=400)
    assert counter.n == 1
    rows = np.r_[0:100, 300:400, 600:700, 900:1000]
    np.testing.assert_allclose(s, X[rows] @ w)
    np.testing.assert_array_equal(yy, y[rows])
    s_all, _ = calibration_data(Xd, yd, lambda R: R @ w, all_rows=True, max_rows=400)
    assert s_all.shape == (1000,)


# ------------------------------------------------------------------ the estimators


def _offset_problem(n=600, seed=0, d=4):
    """Rows far from the origin (every feature about 5): the raw ranking score X @ w has no
    intercept, so thresholding it at 0 puts every row in one class."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + 5.0
    y = np.where(X[:, 0] - 5.0 + 0.5 * (X[:, 1] - 5.0) + 0.5 * rng.normal(size=n) > 0, 1, 0)
    return X, y


LINEAR = [
    lambda: RankSVM(C=1.0),
    lambda: PairwiseHingeSGD(lam=1e-4, random_state=0),
    lambda: LSAUC(lam=1e-3),
    lambda: SPAM(eta=0.1, random_state=0),  # its default step diverges on these off-centre rows
    lambda: OAM(average=True, random_state=0),
]


@pytest.mark.parametrize("make", LINEAR)
def test_decision_proba_and_predict_agree_with_the_calibration(make):
    X, y = _offset_problem()
    Xt, yt = _offset_problem(seed=1)
    est = make().fit(X, y)
    raw = Xt @ est.coef_
    d = est.decision_function(Xt)
    assert d.dtype == np.float64
    np.testing.assert_allclose(d, raw + est.intercept_, rtol=1e-12, atol=1e-12 * np.abs(d).max())
    assert roc_auc_score(yt, d) == pytest.approx(roc_auc_score(yt, raw), abs=1e-12)
    assert est.calibration_slope_ > 0
    proba = est.predict_proba(Xt)
    np.testing.assert_allclose(proba[:, 1], expit(est.calibration_slope_ * d), rtol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    pred = est.predict(Xt)
    np.testing.assert_array_equal(pred, est.classes_[(d > 0).astype(int)])
    np.testing.assert_array_equal(pred, est.classes_[proba.argmax(axis=1)])
    # the threshold at 0 of the raw score gave one class for every row
    assert min(accuracy_score(yt, est.classes_[(raw > 0).astype(int)]), 1 - yt.mean()) < 0.7
    # as accurate as a logistic regression with an intercept (0.857 here)
    logistic = LogisticRegression().fit(X, y).predict(Xt)
    assert accuracy_score(yt, pred) > accuracy_score(yt, logistic) - 0.02
    # the calibration is Platt's fit on every training row (numpy input)
    fit = platt_scaling(X @ est.coef_, np.where(y > 0, 1, -1))
    assert est.calibration_slope_ == pytest.approx(fit.slope, rel=1e-9)
    assert est.intercept_ == pytest.approx(fit.offset / fit.slope, rel=1e-9, abs=1e-9)


def test_dask_input_gives_lazy_named_outputs_with_the_same_values():
    X, y = _offset_problem()
    est = RankSVM(C=1.0).fit(X, y)
    Xd = da.from_array(X, chunks=(128, -1))
    for method in ("decision_function", "predict_proba", "predict"):
        lazy = getattr(est, method)(Xd)
        assert isinstance(lazy, da.Array) and lazy.name.startswith("daskauc-")
        np.testing.assert_allclose(lazy.compute(), getattr(est, method)(X), rtol=1e-12)


def test_dask_and_store_input_calibrate_on_a_bounded_sample(monkeypatch, tmp_path):
    monkeypatch.setattr(_calibration._config, "CALIBRATION_ROWS", 300)
    X, y = _offset_problem(n=1000)
    y_pm1 = np.where(y > 0, 1, -1)
    rows = np.r_[0:100, 400:500, 900:1000]  # 3 chunks of 100 spread evenly
    lazy = RankSVM(C=1.0).fit(da.from_array(X, chunks=(100, -1)), y)
    fit = platt_scaling(X[rows] @ lazy.coef_, y_pm1[rows])
    assert lazy.calibration_slope_ == pytest.approx(fit.slope, rel=1e-9)
    store = dataset_store(tmp_path / "ds.zarr", X, y_pm1, rows=100)
    stored = RankSVM(C=1.0).fit(store)
    assert stored.calibration_slope_ == pytest.approx(fit.slope, rel=1e-6)
    # numpy input: every row, however many
    eager = RankSVM(C=1.0).fit(X, y)
    full = platt_scaling(X @ eager.coef_, y_pm1)
    assert eager.calibration_slope_ == pytest.approx(full.slope, rel=1e-9)


def test_presets_calibrate_their_solver_on_every_row_of_numpy_input(monkeypatch):
    monkeypatch.setattr(_calibration._config, "CALIBRATION_ROWS", 200)
    X, y = _offset_problem(n=500)
    model = NSAUC(lam=1e-4, n_landmarks=30, random_state=0).fit(X, y)
    Z = model.transform(X)
    fit = platt_scaling(Z.astype(np.float64) @ model.coef_, np.where(y > 0, 1, -1))
    assert model.calibration_slope_ == pytest.approx(fit.slope, rel=1e-4)
    d = model.decision_function(X)
    np.testing.assert_allclose(d, model.solver_.decision_function(Z))
    np.testing.assert_array_equal(model.predict(X), model.classes_[model.predict_proba(X)
                                                                   .argmax(axis=1)])
    assert accuracy_score(y, model.predict(X)) > 0.85


def test_kernel_auc_is_calibrated():
    X, y = _offset_problem(n=400)
    est = KernelAUC(n_centres=40, gamma="rule", lam=1e-3, random_state=0).fit(X, y)
    proba = est.predict_proba(X)
    np.testing.assert_array_equal(est.predict(X), est.classes_[proba.argmax(axis=1)])
    assert accuracy_score(y, est.predict(X)) > 0.85
    assert "calibration" in est.timings_


def test_partial_fit_calibrates_on_its_batch_and_keeps_it_for_one_class():
    X, y = _offset_problem(n=800)
    est = OAM(random_state=0).partial_fit(X[:400], y[:400])
    fit = platt_scaling(X[:400] @ est.coef_, np.where(y[:400] > 0, 1, -1))
    assert est.calibration_slope_ == pytest.approx(fit.slope, rel=1e-9)
    est.partial_fit(X[400:], y[400:])
    fit = platt_scaling(X[400:] @ est.coef_, np.where(y[400:] > 0, 1, -1))
    assert est.calibration_slope_ == pytest.approx(fit.slope, rel=1e-9)
    before = (est.calibration_slope_, est.intercept_)
    one = y == 1
    est.partial_fit(X[one][:50], y[one][:50])  # one class says nothing about the threshold
    assert (est.calibration_slope_, est.intercept_) == before


def test_thresholds_for_another_operating_point():
    # 10% positives: the calibrated predict favours the majority class; a threshold tuned for
    # balanced accuracy (cross-validated on decision_function) trades it for recall
    rng = np.random.default_rng(3)
    n = 1500
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + 0.8 * rng.normal(size=n) > 1.5, 1, 0)
    Xt = rng.normal(size=(n, 3))
    yt = np.where(Xt[:, 0] + 0.8 * rng.normal(size=n) > 1.5, 1, 0)
    plain = PairwiseHingeSGD(lam=1e-4, random_state=0).fit(X, y)
    tuned = TunedThresholdClassifierCV(PairwiseHingeSGD(lam=1e-4, random_state=0),
                                       scoring="balanced_accuracy").fit(X, y)
    assert balanced_accuracy_score(yt, tuned.predict(Xt)) > \
        balanced_accuracy_score(yt, plain.predict(Xt)) + 0.05
    fixed = FixedThresholdClassifier(plain, threshold=0.0,
                                     response_method="decision_function").fit(X, y)
    np.testing.assert_array_equal(fixed.predict(Xt), plain.predict(Xt))
    preset = TunedThresholdClassifierCV(NSAUC(lam=1e-4, n_landmarks=20, random_state=0),
                                        scoring="balanced_accuracy", cv=3).fit(X, y)
    assert balanced_accuracy_score(yt, preset.predict(Xt)) > 0.7


def test_calibration_round_trips_through_save_model(tmp_path):
    X, y = _offset_problem()
    for est in (PairwiseHingeSGD(lam=1e-4, random_state=0).fit(X, y),
                UnivariateAUC(random_state=0).fit(X, y),
                NSAUC(lam=1e-4, n_landmarks=20, random_state=0).fit(X, y)):
        save_model(est, tmp_path / f"{type(est).__name__}.zarr")
        back = load_model(tmp_path / f"{type(est).__name__}.zarr")
        assert back.calibration_slope_ == est.calibration_slope_
        assert back.intercept_ == est.intercept_
        np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


def test_a_model_without_calibration_says_so():
    X, y = _offset_problem()
    est = RankSVM().fit(X, y)
    del est.intercept_, est.calibration_slope_
    with pytest.raises(NotFittedError, match="no calibration"):
        est.predict(X)
    with pytest.raises(NotFittedError):
        RankSVM().predict_proba(X)


# ------------------------------------------------------------------ class weights


@pytest.mark.parametrize("weights", [(1.0, 5.0), (0.2, 1.0), (3.0, 0.5)])
def test_weighted_platt_matches_the_weighted_oracle(weights):
    rng = np.random.default_rng(3)
    y = np.where(rng.random(800) < 0.15, 1, -1)
    s = rng.normal(size=800) + 1.3 * y
    fit = platt_scaling(s, y, weights=weights)
    (a, b), best, f = _oracle(s, y, weights)
    assert f(np.array([fit.slope, fit.offset]))[0] <= best + 1e-9 * abs(best)
    np.testing.assert_allclose([fit.slope, fit.offset], [a, b], rtol=1e-5, atol=1e-7)
    # unit weights are no weights, bit for bit
    assert platt_scaling(s, y, weights=(1.0, 1.0)) == platt_scaling(s, y)


def _imbalanced(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = np.where(X[:, 0] + 0.8 * rng.normal(size=n) > 1.6, 1, 0)  # about 9% positive
    return X, y


@pytest.mark.parametrize("make", [lambda cw: RankSVM(C=1.0, class_weight=cw),
                                  lambda cw: NSAUC(n_landmarks=40, n_epochs=2, random_state=0,
                                                   class_weight=cw),
                                  lambda cw: KernelAUC(80, gamma="rule", lam=1e-3,
                                                       random_state=0, class_weight=cw)])
def test_class_weight_moves_the_threshold_not_the_ranking(make):
    """As in scikit-learn's LogisticRegression: "balanced" predicts the rare class more
    often (the threshold moves), the scores only shift by a constant (the same AUC); it is
    the dict of scikit-learn's n / (2 n_class)."""
    X, y = _imbalanced()
    plain, balanced = make(None).fit(X, y), make("balanced").fit(X, y)
    shift = balanced.decision_function(X) - plain.decision_function(X)
    np.testing.assert_allclose(shift, shift[0], atol=1e-9 * np.abs(shift).max() + 1e-12)
    # the same AUC, up to rounding: adding another constant may tie (or untie) two scores
    # one unit in the last place apart
    assert abs(roc_auc_score(y, balanced.decision_function(X))
               - roc_auc_score(y, plain.decision_function(X))) < 1e-6
    assert balanced.predict(X).mean() > 2 * plain.predict(X).mean()
    assert balanced_accuracy_score(y, balanced.predict(X)) > \
        balanced_accuracy_score(y, plain.predict(X))
    n, n_pos = y.size, int(y.sum())
    by_label = make({0: n / (2 * (n - n_pos)), 1: n / (2 * n_pos)}).fit(X, y)
    np.testing.assert_allclose(by_label.decision_function(X), balanced.decision_function(X),
                               rtol=1e-12, atol=1e-12)


def test_class_weight_by_raw_labels_and_errors_before_any_work(tmp_path):
    X, y = _imbalanced(n=800)
    labels = np.where(y == 1, "fraud", "ok")
    # the classes sort as ['fraud', 'ok']: 'ok' is positive; the weights follow the names
    named = RankSVM(C=1.0, class_weight={"fraud": 4.0}).fit(X, labels)
    pm1 = RankSVM(C=1.0, class_weight={-1: 4.0, 1: 1.0}).fit(X, np.where(y == 1, -1, 1))
    np.testing.assert_array_equal(named.decision_function(X), pm1.decision_function(X))
    for cw, message in [({"fraudd": 2.0}, r"names \['fraudd'\], which are not labels of y"),
                        ({"fraud": -1.0}, "positive finite"),
                        ("auto", 'None, "balanced" or a dict')]:
        with pytest.raises(ValueError, match=message):
            NSAUC(n_landmarks=500, class_weight=cw).fit(X, labels)  # refused before k-means
    model = RankSVM(C=1.0, class_weight={0: 1.0, 1: 3.0}).fit(X, y)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.get_params()["class_weight"] == {0: 1.0, 1: 3.0}
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def _same_fit(a, b) -> None:
    for name in ("coef_", "intercept_", "calibration_slope_", "classes_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("labels", [(0, 1), (1, 2)])
def test_class_weight_keys_are_matched_to_numeric_labels_as_a_positive_label_is(labels,
                                                                               tmp_path):
    """A key names a label as ``pos_label`` does: 1 and 1.0 name the label 1 (of numpy labels
    or of a store ingested from labels 1.0 / 2.0) and give the same model; the text "1" is
    not a number in Python (as ``pos_label="1"`` is refused; the command line reads its JSON
    keys as values, tests/test_cli.py); a key naming no label is refused naming it and the
    labels, before any work."""
    from daskauc import ingest_array

    X, y = _imbalanced(n=600)
    y = np.where(y == 1, labels[1], labels[0])
    make = lambda cw: NSAUC(n_landmarks=20, n_epochs=2, random_state=0,  # noqa: E731
                            class_weight=cw)
    _same_fit(make({1.0: 10.0}).fit(X, y), make({1: 10.0}).fit(X, y))
    store = str(tmp_path / "s.zarr")
    ingest_array(X, y.astype(np.float64), store, chunk_rows=200)
    _same_fit(make({1: 10.0}).fit(store), make({1.0: 10.0}).fit(store))
    shown = rf"\(the labels: \[{labels[0]}, {labels[1]}\]\)"
    for cw, message in [({"1": 2.0}, r"class_weight names \['1'\], which are not labels of y "
                         + shown),
                        ({3: 2.0}, r"class_weight names \[3\], which are not labels of y "
                         + shown)]:
        with pytest.raises(ValueError, match=message):
            make(cw).fit(X, y)
