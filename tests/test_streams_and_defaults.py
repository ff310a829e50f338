"""Defaults that choose (C="auto", step sizes from the rows' scale), streams (partial_fit on
the presets and RankSVM, dask-ml's Incremental, GridSearchCV), the chunking rule that makes
numpy and dask inputs give the same model, and score(store) everywhere."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from helpers import assert_covered, model_classes
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score

import daskauc
from daskauc import NBAUC, NSAUC, OPAUC, SPAM, PairwiseHingeSGD, RankSVM
from daskauc.estimators.presets import EmbeddedAUCModel
from daskauc.solvers.newton import prsvm_newton

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _nonlinear(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 1 + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return X, y


def _linear(n=1200, d=8, seed=1, noise=2.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + noise * rng.normal(size=n) > 0, 1, -1)
    return X, y


# ------------------------------------------------------------------------------ C="auto"


def test_C_auto_is_the_best_validation_C_of_independent_fits_rescaled():
    """The oracle: on the same subsample and split, a cold fit at each C of the path (each to
    tol 1e-8) ranks the validation rows with the AUC the warm path recorded, the chosen C is
    the first of highest validation AUC, and the C used is it times (n_tr / n) ** 1.5."""
    from daskauc._arrays import stratified_split, stratified_subsample
    from daskauc.model_selection import c_path

    X, y = _linear(n=900)
    est = RankSVM(tol=1e-8, random_state=3).fit(X, y)
    sel = est.selection_
    assert sel["n_rows"] == 900 and est.C_ == pytest.approx(
        sel["C_subsample"] * (sel["n_train"] / 900) ** c_path.C_EXPONENT)
    # the same subsample and split, rebuilt from the seed
    rng = np.random.default_rng(3)
    idx = stratified_subsample(y, c_path.SELECTION_ROWS, rng)
    tr, va = stratified_split(y[idx], c_path.TRAIN_SHARE, rng)
    Xs, ys = X[idx], y[idx]
    assert tr.size == sel["n_train"]
    for row in sel["table"]:
        w = prsvm_newton(Xs[tr], ys[tr], C=row["C_subsample"], tol=1e-8).coef
        assert roc_auc_score(ys[va], Xs[va] @ w) == pytest.approx(row["val_auc"], abs=1e-6)
    aucs = [r["val_auc"] for r in sel["table"]]
    assert sel["C_subsample"] == sel["table"][int(np.argmax(aucs))]["C_subsample"]
    # the path stopped PATIENCE points past its best, or at the end of the grid
    best = int(np.argmax(aucs))
    assert len(aucs) == min(best + 1 + c_path.PATIENCE, len(c_path.C_GRID))
    assert sel["stopped"] == ("the end of the grid" if len(aucs) == len(c_path.C_GRID) else
                              f"{c_path.PATIENCE} points in a row below the best validation AUC")
    assert all(r["seconds"] > 0 and r["hessian_products"] >= r["newton_steps"] > 0
               for r in sel["table"])
    # a given C is used as it is, with no selection
    given = RankSVM(C=0.5).fit(X, y)
    assert given.C_ == 0.5 and not hasattr(given, "selection_")
    with pytest.raises(ValueError, match="C must be 'auto' or a float"):
        RankSVM(C="best").fit(X, y)


def test_nbauc_chooses_C_on_its_embedding_by_default():
    X, y = _nonlinear(n=1500)
    m = NBAUC(n_landmarks=60, random_state=0).fit(X, y)
    assert m.solver_.C_ == m.solver_.selection_["C"] and m.solver_.selection_["table"]
    assert m.score(X, y) > 0.9


# ------------------------------------------------------------------------- step sizes


def test_spam_and_opauc_auto_steps_scale_with_the_rows():
    """eta="auto" is AUTO_ETA over the mean squared row norm (numpy's), computed once:
    partial_fit keeps it; scaling the rows by s scales it by 1/s^2."""
    X, y = _linear(n=800)
    for cls in (SPAM, OPAUC):
        m = cls(random_state=0).fit(X, y)
        assert m.eta_ == pytest.approx(cls.AUTO_ETA / np.mean(np.sum(X**2, axis=1)), rel=1e-9)
        eta = m.eta_
        m.partial_fit(X[:100] * 5, y[:100])
        assert m.eta_ == eta
        big = cls(random_state=0).fit(10 * X, y)
        assert big.eta_ == pytest.approx(eta / 100, rel=1e-9)
        assert cls(eta=0.01).fit(X, y).eta_ == 0.01
        with pytest.raises(ValueError, match="eta must be 'auto'"):
            cls(eta="big").fit(X, y)


# ------------------------------------------------------------------------ partial_fit


def test_ranksvm_partial_fit_averages_the_batch_optima_by_their_pairs():
    """The oracle: each batch's problem solved on its own (cold, tight tol); coef_ after the
    batches is their average weighted by positive-negative pairs."""
    X, y = _linear(n=1200)
    batches = [slice(0, 300), slice(300, 700), slice(700, 1200)]
    est = RankSVM(C=0.01, tol=1e-9, max_iter=100)
    optima, weights = [], []
    for b in batches:
        est.partial_fit(X[b], y[b])
        optima.append(prsvm_newton(X[b], y[b], C=0.01, tol=1e-9, max_iter=100).coef)
        weights.append(np.sum(y[b] > 0) * np.sum(y[b] < 0))
    np.testing.assert_allclose(est.coef_, np.average(optima, axis=0, weights=weights),
                               rtol=1e-6, atol=1e-9)
    assert est.n_iter_ == 3 and len(est.history_) == 3
    assert est.predict_proba(X).shape == (1200, 2)
    with pytest.raises(ValueError, match="single class"):
        est.partial_fit(X[y > 0][:50], y[y > 0][:50])
    with pytest.raises(ValueError, match="5 features"):
        est.partial_fit(X[:, :5], y)


#: the registered presets (an embedding and a linear model: each streams by partial_fit)
PRESETS = model_classes(lambda cls: issubclass(cls, EmbeddedAUCModel))
#: presets whose stream is not tested here, and why
NOT_STREAMED = {
    "NSVMSGD2": "NSAUC's map and stream without averaging: its last SGD iterate after three "
                "one-epoch batches was 0.028 below one pass over all rows (measured, "
                "random_state 0), outside the bound that NSAUC's average meets",
    "KernelRankSVM": "NBAUC's map (landmarks='all': the first batch's rows) and solver; it "
                     "streamed within the bound (0.947 against 0.956), but its one-pass fit "
                     "with every row a landmark made the case 9 s (NBAUC's: 4 s)",
}


def test_every_preset_streams_or_says_why_not():
    assert_covered(PRESETS, {n for n in PRESETS if n not in NOT_STREAMED}, NOT_STREAMED,
                   "NOT_STREAMED")


def _fitted(fmap) -> dict:
    """A fitted map's learned attributes (landmarks and projection, or Fourier weights)."""
    return {k: np.copy(v) for k, v in vars(fmap).items()
            if k.endswith("_") and isinstance(v, np.ndarray)}


@pytest.mark.parametrize("cls", [cls for name, cls in PRESETS.items()
                                 if name not in NOT_STREAMED], ids=lambda cls: cls.__name__)
def test_presets_partial_fit_fit_the_map_once_then_stream(cls):
    """The first batch fits the scaler and the map (at most its rows of landmarks or
    features); later batches reuse them unchanged and continue the solver; the stream (one
    pass over the rows) reaches the AUC of a fit of one pass over all rows (within 0.02 here:
    the map saw a third of the rows)."""
    X, y = _nonlinear(n=3000)
    Xte, yte = X[2000:], y[2000:]
    X, y = X[:2000], y[:2000]
    m = cls(n_landmarks=80, random_state=0)
    m.partial_fit(X[:700], y[:700], classes=[0, 1])
    fitted = _fitted(m.embedding_)
    assert fitted
    mean = m.scaler_.mean_.copy()
    for b in (slice(700, 1400), slice(1400, 2000)):
        m.partial_fit(X[b], y[b])
    after = _fitted(m.embedding_)
    assert after.keys() == fitted.keys()
    for k, v in fitted.items():
        np.testing.assert_array_equal(after[k], v, err_msg=k)
    np.testing.assert_array_equal(m.scaler_.mean_, mean)
    assert m.n_iter_ == 3 and list(m.classes_) == [0, 1]
    one_pass = {"n_epochs": 1} if "n_epochs" in cls().get_params() else {}
    full = cls(n_landmarks=80, random_state=0, **one_pass).fit(X, y)
    assert m.score(Xte, yte) > full.score(Xte, yte) - 0.02
    small = cls(n_landmarks=500, random_state=0).partial_fit(X[:300], y[:300])
    assert small.embedding_.n_components <= 300  # landmarks or Fourier features: the cap
    assert getattr(small.embedding_, "n_components_", 0) <= 300  # Nystroem: those it kept
    assert small.transform(X[:5]).shape[1] <= 300
    with pytest.raises(ValueError, match="features"):
        m.partial_fit(X[:, :3], y)


def test_dask_ml_incremental_and_gridsearchcv_run_with_daskauc():
    """The two examples of docs/user_guide.md: dask-ml's Incremental feeding a preset one
    dask block at a time, and scikit-learn's GridSearchCV over a preset and a linear model."""
    dask_ml_wrappers = pytest.importorskip("dask_ml.wrappers")
    from sklearn.model_selection import GridSearchCV

    X, y = _nonlinear(n=2400)
    Xd, yd = da.from_array(X, chunks=600), da.from_array(y, chunks=600)
    inc = dask_ml_wrappers.Incremental(NSAUC(n_landmarks=60, random_state=0),
                                       shuffle_blocks=False)
    inc.fit(Xd, yd, classes=[0, 1])
    assert inc.estimator_.n_iter_ == 4  # one epoch per block
    assert inc.score(Xd, yd) > 0.85  # the preset's score: the exact AUC
    gs = GridSearchCV(NSAUC(n_epochs=3, random_state=0), {"n_landmarks": [10, 60]},
                      cv=3).fit(X, y)
    assert gs.best_params_ == {"n_landmarks": 60} and gs.best_score_ > 0.85
    lin = GridSearchCV(PairwiseHingeSGD(n_epochs=2, random_state=0),
                       {"lam": [1e-4, 1e-2]}, cv=3, scoring="roc_auc").fit(*_linear())
    assert set(lin.cv_results_["mean_test_score"]) and lin.best_score_ > 0.7


def test_cv_select_C_takes_the_presets():
    X, y = _nonlinear(n=900)
    best, table = daskauc.cv_select_C(NBAUC(n_landmarks=30, random_state=0), X, y,
                                      [0.001, 0.1], cv=3, random_state=0)
    assert best in (0.001, 0.1) and len(table) == 2


# ---------------------------------------------------------------------- the chunk rule


def test_numpy_and_default_chunked_dask_give_the_same_model_bit_for_bit():
    """numpy input is cut into daskauc's default row chunks; a dask array in those chunks
    (default_chunks) gives the same scaler, map and model bit for bit, also through a
    Pipeline with daskauc's scaler; other chunks give another model (the documented rule)."""
    from sklearn.pipeline import make_pipeline

    X, y = _nonlinear(n=3000)
    for make in (lambda: NSAUC(n_landmarks=40, n_epochs=3, random_state=1),
                 lambda: make_pipeline(daskauc.StandardScaler(),
                                       NSAUC(n_landmarks=40, n_epochs=3, random_state=1))):
        a = make().fit(X, y)
        b = make().fit(daskauc.default_chunks(da.from_array(X, chunks=(700, 5))), y)
        np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    other = NSAUC(n_landmarks=40, n_epochs=3, random_state=1).fit(
        da.from_array(X, chunks=(700, 5)), y)
    assert not np.array_equal(other.decision_function(X), a.decision_function(X))
    with pytest.raises(TypeError, match="2-D dask array"):
        daskauc.default_chunks(X)


# --------------------------------------------------------------------- score(store)


def test_score_of_a_store_needs_no_labels_for_every_kind_of_model(tmp_path):
    from daskauc import ingest_array

    X, y = _nonlinear(n=1200)
    path = str(tmp_path / "ds.zarr")
    ingest_array(X, y, path)
    for est in (PairwiseHingeSGD(n_epochs=2, random_state=0), RankSVM(C=0.1), SPAM(),
                NSAUC(n_landmarks=30, n_epochs=2, random_state=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X, y)
        assert est.score(path) == pytest.approx(est.score(X, y), abs=1e-12)


def test_choosing_C_on_a_cluster_ships_no_large_graph(tmp_path, dask_cluster_client):
    """C="auto"'s path solves a subsample held in the client: on a cluster every Newton pass
    sent it again in its graph ("Sending large graph of size 42 MiB", 30-48 times in one CLI
    fit). It now solves it on the client's threads."""
    import warnings

    import daskauc

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3_000, 100))  # the subsample's 2,000 fitting rows: 1.6 MB
    y = X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(size=3_000) > 0
    daskauc.ingest_array(X, y, tmp_path / "s.zarr", chunk_rows=1_000)
    with warnings.catch_warnings(), dask.config.set(
            {"distributed.admin.large-graph-warning-threshold": "1MB"}):
        warnings.filterwarnings("error", message=".*Sending large graph.*")
        model = daskauc.RankSVM(C="auto", max_iter=5).fit(str(tmp_path / "s.zarr"))
    assert model.C_ == model.selection_["C"] > 0
