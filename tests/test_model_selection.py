"""Cross-validated AUC (daskauc.model_selection.cross_validate_auc) against an independent
oracle: scikit-learn's StratifiedKFold and roc_auc_score, every fit made by hand."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from daskauc import LSAUC, PairwiseHingeSGD, cross_validate_auc


def _data(seed: int, n: int = 300, d: int = 5, labels=(-1, 1)):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X @ rng.standard_normal(d) + rng.standard_normal(n) > 0, labels[1], labels[0])
    return X, y


def test_grid_cv_is_the_mean_fold_auc_of_fits_made_by_hand():
    X, y = _data(0, labels=(0, 1))
    folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=4)
    grid = {"lam": [10.0, 1e-1, 1e-3], "precision": ["float64", "mixed"]}
    best, table = cross_validate_auc(LSAUC(), X, y, grid, cv=folds)
    points = [{"lam": lam, "precision": p} for lam in grid["lam"] for p in grid["precision"]]
    assert [{k: r[k] for k in ("lam", "precision")} for r in table] == points
    oracle = []
    for point in points:
        aucs = [roc_auc_score(y[va], LSAUC(**point).fit(X[tr], y[tr]).decision_function(X[va]))
                for tr, va in folds.split(X, y)]
        oracle.append(np.mean(aucs))
        row = table[len(oracle) - 1]
        np.testing.assert_allclose(row["fold_auc"], aucs, rtol=0, atol=1e-12)
        assert row["mean_auc"] == pytest.approx(np.mean(aucs), abs=1e-12)
        assert row["std_auc"] == pytest.approx(np.std(aucs), abs=1e-12)
    assert best == points[int(np.argmax(oracle))]
    # dask input: the same folds, the same AUCs (to the rounding of the distributed sums)
    _, table_da = cross_validate_auc(LSAUC(), da.from_array(X, chunks=100), y, grid, cv=folds)
    np.testing.assert_allclose([r["mean_auc"] for r in table_da], oracle, rtol=0, atol=1e-9)


def test_epoch_path_scores_each_count_as_a_fresh_run_of_that_many_epochs():
    X, y = _data(1, n=240)
    folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
    model = PairwiseHingeSGD(n_epochs=1, random_state=0)
    best, table = cross_validate_auc(model, X, y, {"lam": [1e-4, 1e-1]}, cv=folds,
                                     epochs=[1, 2, 4])
    assert [(r["lam"], r["n_epochs"]) for r in table] == [
        (1e-4, 1), (1e-4, 2), (1e-4, 4), (1e-1, 1), (1e-1, 2), (1e-1, 4)]
    for row in table:
        aucs = []
        for tr, va in folds.split(X, y):
            est = PairwiseHingeSGD(lam=row["lam"], n_epochs=1, random_state=0)
            for _ in range(row["n_epochs"]):
                est.partial_fit(X[tr], y[tr])
            aucs.append(roc_auc_score(y[va], est.decision_function(X[va])))
        assert row["mean_auc"] == pytest.approx(np.mean(aucs), abs=1e-12)
    means = [r["mean_auc"] for r in table]
    assert best == {k: table[int(np.argmax(means))][k] for k in ("lam", "n_epochs")}
    seconds = [r["seconds"] for r in table[:3]]
    assert seconds == sorted(seconds)  # along the path, up to each count


class _MaybeDiverging(BaseEstimator):
    """Scores rows by their first feature, or NaN when ``diverge``."""

    def __init__(self, diverge=False):
        self.diverge = diverge

    def fit(self, X, y):
        return self

    def decision_function(self, X):
        s = np.asarray(X)[:, 0].astype(float)
        return np.full_like(s, np.nan) if self.diverge else s


def test_a_diverged_point_scores_error_score_and_ranks_last():
    X, y = _data(2)
    grid = {"diverge": [True, False]}
    best, table = cross_validate_auc(_MaybeDiverging(), X, y, grid, error_score=np.nan,
                                     random_state=0)
    assert np.isnan(table[0]["mean_auc"]) and best == {"diverge": False}
    best, table = cross_validate_auc(_MaybeDiverging(), X, y, grid, error_score=0.0,
                                     random_state=0)
    assert table[0]["fold_auc"] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="AUC needs finite scores"):
        cross_validate_auc(_MaybeDiverging(), X, y, grid)


@pytest.mark.parametrize("kw, match", [
    ({"cv": 1}, "cv must be an int >= 2"),
    ({"epochs": [2, 1]}, "epochs must be increasing"),
    ({"epochs": [1, 2], "warm_start": True}, "two different paths"),
    ({"param_grid": []}, "at least one point"),
])
def test_bad_arguments_are_named(kw, match):
    X, y = _data(3, n=60)
    with pytest.raises(ValueError, match=match):
        cross_validate_auc(LSAUC(), X, y, **kw)


def test_the_threaded_width_selection_leaves_the_warning_filters_as_they_were():
    """The (fold, width) paths run in threads; a ``warnings.catch_warnings`` in each left an
    "ignore ConvergenceWarning" filter installed after two of them interleaved, so KernelAUC's
    own warning (and every later one of the caller's) was silenced."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from daskauc import KernelAUC

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 5))
    y = np.where(X[:, 0] + X[:, 1] ** 2 + rng.normal(size=1200) > 1, 1, -1)
    before = list(warnings.filters)
    with pytest.warns(ConvergenceWarning, match="did not reach"):
        KernelAUC(n_centres=80, tol=1e-9, max_iter=2, selection_rows=300, width_rows=0,
                  cv=2, random_state=0).fit(X, y)
    assert list(warnings.filters) == before
