"""Shared behaviour of daskauc's classifiers: calibrated scores, predict, predict_proba.

A daskauc classifier ranks rows by a raw score ``s`` (``X @ coef_`` for the linear models).
``fit`` ends with a Platt calibration of ``s`` (:mod:`daskauc.composite.calibration`), kept as
``calibration_slope_ = a > 0`` and ``intercept_ = b / a``; then

* ``decision_function(X) = s + intercept_`` (float64; the same ranking, so the same AUC),
* ``predict_proba(X) = [1 - p, p]`` with ``p = expit(calibration_slope_ * decision_function(X))``,
* ``predict(X) = classes_[decision_function(X) > 0]``, the most probable class under the
  calibration (as for a logistic regression),
* ``score(X, y)``: the exact AUC.
"""

from __future__ import annotations

import functools

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._readers import reading_once
from .._validation import (
    check_predict_X,
    check_sparse_accepted,
    is_lazy_input,
    is_store_path,
)
from ..composite.calibration import (
    calibrate,
    predict_block,
    proba_block,
    shift_block,
)
from ..solvers._linear import linear_scores
from ._checkpoint import check_resumed_data


def _reading_once(method):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with reading_once():
            check_sparse_accepted(self, args[0] if args else kwargs.get("X"))
            return method(self, *args, **kwargs)

    call._reads_once = True
    return call


class AUCScoreMixin:
    """``decision_function``, ``predict``, ``predict_proba``, ``score`` (the exact AUC) and
    the tags of a binary model that ranks rows; needs ``classes_``.

    Subclasses define ``_raw_scores(X)`` (validating ``X``) and call ``_calibrate`` at the
    end of ``fit``; a model whose calibration lives elsewhere (the presets) overrides
    ``decision_function`` and ``calibration_slope_`` instead.
    """

    #: whether ``fit`` / ``partial_fit`` / ``predict`` read sparse rows (CSR blocks,
    #: :mod:`daskauc._sparse`); a class that does not says why in ``_dense_only``
    _sparse_rows = False
    _dense_only = "its solver works on dense row blocks"

    def __init_subclass__(cls, **kwargs):
        """A subclass's own ``fit`` and ``partial_fit`` open a store path once
        (:func:`daskauc._readers.reading_once`): the scope of one public call."""
        super().__init_subclass__(**kwargs)
        for name in ("fit", "partial_fit"):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_reads_once", False):
                setattr(cls, name, _reading_once(method))

    def _raw_scores(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def _calibration(self) -> tuple[float, float]:
        """``(calibration_slope_, intercept_)``; a clear error for a model without them."""
        try:
            return float(self.calibration_slope_), float(self.intercept_)
        except AttributeError:
            raise NotFittedError(
                f"this {type(self).__name__} has no calibration (calibration_slope_, "
                "intercept_): it was saved in the middle of a fit (a checkpoint) or by an "
                "older daskauc; fit it again, or resume the fit to its end") from None

    def decision_function(self, X):
        """Calibrated scores ``s + intercept_`` (float64): numpy for numpy input, a lazy dask
        array for dask, Zarr or a store path. Positive where class ``classes_[1]`` is the
        more probable; ranks rows as the raw score does (the same AUC)."""
        s = self._raw_scores(X)
        _, intercept = self._calibration()
        if isinstance(s, da.Array):
            return s.map_blocks(shift_block, intercept, dtype=np.float64,
                                token="daskauc-decision", meta=np.empty((0,), np.float64))
        return shift_block(s, intercept)

    def predict_proba(self, X):
        """Calibrated class probabilities, shape (n, 2) in the order of ``classes_``:
        ``[1 - p, p]`` with ``p = expit(calibration_slope_ * decision_function(X))``
        (numpy for numpy input, a lazy dask array otherwise)."""
        d = self.decision_function(X)
        slope = float(self.calibration_slope_)
        if isinstance(d, da.Array):
            return d.map_blocks(proba_block, slope, new_axis=1, chunks=(d.chunks[0], (2,)),
                                dtype=np.float64, token="daskauc-predict-proba",
                                meta=np.empty((0, 0), np.float64))
        return proba_block(d, slope)

    def predict(self, X):
        """Class labels (``classes_``): ``classes_[1]`` where ``decision_function(X) > 0``,
        the more probable class under the calibration (numpy, or lazy dask like ``X``).

        For another operating point (e.g. balanced accuracy on imbalanced classes), tune
        the threshold on ``decision_function`` with scikit-learn's
        ``TunedThresholdClassifierCV(model, scoring="balanced_accuracy")``, or fix one with
        ``FixedThresholdClassifier(model, threshold=t, response_method="decision_function")``.
        """
        d = self.decision_function(X)
        classes = self.classes_
        if isinstance(d, da.Array):
            return d.map_blocks(predict_block, classes, dtype=classes.dtype,
                                token="daskauc-predict", meta=np.empty((0,), classes.dtype))
        return predict_block(d, classes)

    def score(self, X, y=None, sample_weight=None):
        """Exact AUC of ``decision_function(X)`` against ``y`` (ties count one half; a store
        path may carry ``y``)."""
        if sample_weight is not None:
            raise NotImplementedError("sample_weight is not supported by the AUC score")
        from ..metrics import roc_auc

        if is_store_path(X) and y is None:  # the store's y: -1 / +1
            from ..store.dataset import open_dataset

            ds = open_dataset(X)
            return float(roc_auc(ds.y, self.decision_function(ds.X)))
        return float(roc_auc(y, self.decision_function(X), pos_label=self._positive_in(y)))

    def _positive_in(self, y):
        """The ``pos_label`` that scores ``y``: the model's positive class ``classes_[1]``, not
        the larger of y's labels, when it sorts first (a model fitted on a store whose
        positive class was named, "fraud" against "ok"); None (the larger label) otherwise,
        and for y in daskauc's own -1 / +1 (a store's ``y``)."""
        neg, pos = self.classes_[0], self.classes_[1]
        if not neg > pos:
            return None
        from .._labels import matching_label

        labels = np.unique(np.asarray(y.compute() if isinstance(y, da.Array) else y))
        if matching_label(labels, pos) is None and set(labels.tolist()) <= {-1, 1}:
            return None
        return pos

    def _calibrate(self, X: da.Array, y: da.Array, score, *, all_rows: bool,
                   batch: bool = False) -> None:
        """Platt-calibrate this model on ``score(rows)``
        (:func:`daskauc.composite.calibration.calibrate`)."""
        calibrate(self, X, y, score, all_rows=all_rows, batch=batch)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = bool(self._sparse_rows)
        tags.input_tags.allow_nan = False
        return tags


class LinearAUCModel(AUCScoreMixin, ClassifierMixin, BaseEstimator):
    """Base of linear models whose raw scores ``X @ coef_`` are ranked by AUC.

    ``coef_`` is the solver's solution as it is (no intercept: AUC does not depend on one).
    ``fit`` then calibrates the scores (Platt scaling,
    :mod:`daskauc.composite.calibration`): ``intercept_`` and ``calibration_slope_`` make
    ``decision_function(X) = X @ coef_ + intercept_`` positive where the positive class is
    the more probable, ``predict_proba`` the calibrated probabilities and ``predict`` the
    more probable class. ``score`` returns the AUC.
    """

    #: run the solver on rows centred at their mean when it dominates their spread
    #: (:mod:`._centring`; for solvers whose default steps overflow on rows far from 0)
    _centre_rows = False

    def _solver_rows(self, Xd: da.Array, X_input, first: bool) -> da.Array:
        """The rows the solver runs on: ``Xd``, or ``Xd - center_`` with ``_centre_rows``
        (``center_`` chosen on the first call of a fit or ``partial_fit`` run, kept after)."""
        if not self._centre_rows:
            return Xd
        from ._centring import centred_rows, dominant_mean

        if first or getattr(self, "center_", None) is None:
            self.center_ = dominant_mean(Xd, all_rows=not is_lazy_input(X_input))
        return centred_rows(Xd, self.center_)

    def _raw_scores(self, X):
        """``X @ coef_``: numpy for numpy input, a lazy dask array for dask/Zarr input."""
        check_is_fitted(self, "coef_")
        return linear_scores(check_predict_X(self, X), self.coef_)

    def _calibrate_linear(self, Xd: da.Array, yd: da.Array, X_input, *,
                          batch: bool = False) -> None:
        """Calibrate ``Xd @ coef_`` on the fit's rows (every row for in-memory ``X_input``)."""
        coef = self.coef_
        self._calibrate(Xd, yd, lambda rows: linear_scores(rows, coef),
                        all_rows=not is_lazy_input(X_input), batch=batch)

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
                    after=None, calibrate=None) -> None:
        """Run ``n_epochs`` epochs with ``run(state, n) -> SolverResult`` and set the result.

        Without ``checkpoint`` the solver runs all epochs in one call. With one (a
        :class:`Checkpoint` from :func:`open_checkpoint`, checked at the top of ``fit``),
        epochs run one call each (the stochastic solvers continue exactly from their state:
        each epoch's randomness depends only on the seed root and the epoch number) and after
        each the whole estimator, solver state and ``data_fingerprint_`` included, is saved
        to the checkpoint atomically (a new store is written beside it and renamed over it).
        A resumed checkpoint (``checkpoint.previous``) is continued, so a fit killed at any
        point and resumed gives the model of the uninterrupted fit, bit for bit.
        ``after(result)`` sets any extra fitted attributes; ``calibrate()`` calibrates the
        scores at the end. A checkpoint is a point to resume from: it holds no calibration.
        """
        self.__dict__.pop("data_fingerprint_", None)  # of an earlier checkpointed fit
        if checkpoint is None:
            result = run(None, n_epochs)
            self._set_result(result, classes, n_features)
            if after is not None:
                after(result)
            if calibrate is not None:
                calibrate()
            return
        state, history = None, []
        for stale in ("intercept_", "calibration_slope_"):  # of an earlier fit
            self.__dict__.pop(stale, None)
        previous = checkpoint.previous
        if previous is not None:
            check_resumed_data(previous, checkpoint.path, n_features, classes)
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
            self.data_fingerprint_ = checkpoint.data
            save_model(self, checkpoint.path, overwrite=True)
        self.data_fingerprint_ = checkpoint.data
        if calibrate is not None:
            calibrate()

    def _set_result(self, result, classes, n_features: int) -> None:
        self.coef_ = np.asarray(result.coef, dtype=np.float64)
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)
        self.history_ = list(result.history)
        self.classes_ = np.asarray(classes)
        self.n_features_in_ = int(n_features)
        self._solver_state = result.state
