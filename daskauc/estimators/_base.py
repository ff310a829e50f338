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

    def _state_to_continue(self):
        """The solver state ``partial_fit`` continues from; None before the first fit. A fitted
        model without one (loaded from a file saved without it) cannot continue: starting
        over while ``history_`` claims the earlier epochs would be silently wrong."""
        state = getattr(self, "_solver_state", None)
        if state is None and hasattr(self, "coef_"):
            raise ValueError(
                f"this {type(self).__name__} has no solver state to continue from (it was "
                "loaded from a model saved without one); fit it again")
        return state

    def _fit_epochs(self, run, n_epochs: int, classes, n_features: int, *, checkpoint=None,
                    resume: bool = False, after=None) -> None:
        """Run ``n_epochs`` epochs with ``run(state, n) -> SolverResult`` and set the result.

        Without ``checkpoint`` the solver runs all epochs in one call. With it, epochs run
        one call each (the stochastic solvers continue exactly from their state: each
        epoch's randomness depends only on the seed root and the epoch number) and after each
        the whole estimator, solver state included, is saved to ``checkpoint`` atomically
        (a new store is written beside it and renamed over it). With ``resume=True`` an
        existing checkpoint of the same estimator and parameters is continued, so a fit
        killed at any point and resumed gives the model of the uninterrupted fit, bit for bit.
        ``after(result)`` sets any extra fitted attributes.
        """
        if checkpoint is None:
            result = run(None, n_epochs)
            self._set_result(result, classes, n_features)
            if after is not None:
                after(result)
            return
        state, history = None, []
        if resume:
            previous = _resumable(self, checkpoint, n_features, classes)
            if previous is not None:
                state, history = previous._solver_state, list(previous.history_)
                vars(self).update({k: v for k, v in vars(previous).items()
                                   if k.endswith("_") and not k.startswith("__")})
                self._solver_state = state
        from ..io import save_model

        while state is None or state.epoch < n_epochs:
            result = run(state, 1)
            state = result.state
            history = history + list(result.history)
            self._set_result(result, classes, n_features)
            self.history_ = history
            if after is not None:
                after(result)
            save_model(self, checkpoint, overwrite=True)

    def _set_result(self, result, classes, n_features: int) -> None:
        self.coef_ = np.asarray(result.coef, dtype=np.float64)
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)
        self.history_ = list(result.history)
        self.classes_ = np.asarray(classes)
        self.n_features_in_ = int(n_features)
        self._solver_state = result.state


def _resumable(est, checkpoint, n_features: int, classes):
    """The estimator saved at ``checkpoint`` when it is a checkpoint of ``est``'s fit (same
    class, parameters, features and classes); None when there is no checkpoint yet; an error
    naming the difference otherwise (continuing a different fit would be silently wrong)."""
    from ..data.store import resolve_path, restore_interrupted, store_exists
    from ..io import load_model

    if not store_exists(checkpoint) and not restore_interrupted(resolve_path(checkpoint)):
        return None
    previous = load_model(checkpoint)
    mine, theirs = est.get_params(deep=False), previous.get_params(deep=False)
    for length in ("n_epochs", "max_iter"):  # a resumed fit may run longer
        mine.pop(length, None)
        theirs.pop(length, None)
    if type(previous) is not type(est) or _json(mine) != _json(theirs):
        raise ValueError(
            f"the checkpoint {checkpoint} is of {type(previous).__name__}"
            f"({_json(theirs)}), not of this {type(est).__name__}({_json(mine)}); "
            "resume with the same estimator or use another checkpoint path")
    if previous.n_features_in_ != n_features or not np.array_equal(previous.classes_, classes):
        raise ValueError(f"the checkpoint {checkpoint} was fitted on other data "
                         f"({previous.n_features_in_} features, classes {list(previous.classes_)})")
    if getattr(previous, "_solver_state", None) is None:
        raise ValueError(f"the checkpoint {checkpoint} holds no solver state")
    return previous


def _json(params: dict) -> str:
    import json

    from ..io import _jsonable

    def value(v):
        try:
            return _jsonable(v)
        except TypeError:
            return repr(v)

    return json.dumps({k: value(v) for k, v in params.items()}, sort_keys=True)
