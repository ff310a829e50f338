"""Shared behaviour of daskauc's linear AUC models (scores are ``X @ coef_``)."""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .._validation import as_row_chunked, check_n_features, is_store_path
from ..solvers._linear import linear_scores


class AUCScoreMixin:
    """``predict``, ``score`` (the exact AUC) and the tags of a binary model whose
    ``decision_function`` ranks rows; needs ``classes_``."""

    def predict(self, X):
        """Class labels (``classes_``): positive where the score is > 0."""
        scores = self.decision_function(X)
        classes = self.classes_
        if isinstance(scores, da.Array):
            return scores.map_blocks(
                lambda s: classes[(s > 0).astype(np.intp)], dtype=classes.dtype,
                token="daskauc-predict",
            )
        return classes[(scores > 0).astype(np.intp)]

    def score(self, X, y=None, sample_weight=None):
        """Exact AUC of ``decision_function(X)`` against ``y`` (ties count one half; a store
        path may carry ``y``)."""
        if sample_weight is not None:
            raise NotImplementedError("sample_weight is not supported by the AUC score")
        from ..metrics import roc_auc

        if is_store_path(X) and y is None:
            from ..data.store import open_dataset

            ds = open_dataset(X)
            X, y = ds.X, ds.y
        return float(roc_auc(y, self.decision_function(X)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


class LinearAUCModel(AUCScoreMixin, ClassifierMixin, BaseEstimator):
    """Base of linear models whose scores ``X @ coef_`` are ranked by AUC.

    There is no intercept: AUC does not depend on one. ``predict`` thresholds the score at 0
    (positive when ``X @ coef_ > 0``), which is only meaningful for losses with a margin at 0;
    rank by ``decision_function`` for anything AUC-related. ``score`` returns the AUC.
    """

    def decision_function(self, X):
        """Scores ``X @ coef_``: numpy for numpy input, a lazy dask array for dask/Zarr input."""
        check_is_fitted(self, "coef_")
        coef = self.coef_
        if isinstance(X, da.Array) or is_store_path(X):
            Xd = as_row_chunked(X)
            check_n_features(Xd.shape, coef.shape[0])
            return linear_scores(Xd, coef)
        Xn = np.asarray(X)
        if Xn.ndim != 2:
            raise ValueError(f"X must be 2-D; got shape {Xn.shape}")
        check_n_features(Xn.shape, coef.shape[0])
        if Xn.dtype.kind not in "f":
            Xn = Xn.astype(np.float64)
        if not np.isfinite(Xn).all():
            raise ValueError("X contains NaN or infinity")
        return linear_scores(Xn, coef)

    def _set_result(self, result, classes, n_features: int) -> None:
        self.coef_ = np.asarray(result.coef, dtype=np.float64)
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)
        self.history_ = list(result.history)
        self.classes_ = np.asarray(classes)
        self.n_features_in_ = int(n_features)
        self._solver_state = result.state
