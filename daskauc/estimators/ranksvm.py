"""Linear RankSVM (PRSVM+): the pairwise squared hinge solved by truncated Newton.

The same estimator is NBAUC on a k-means Nystroem embedding and RFAUC on random Fourier
features; the presets that chain an embedding with it live with the other presets.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._arrays import class_counts
from .._docs import fill_doc
from .._labels import check_X_y
from .._params import Options, check_params, params_checked, params_of
from .._registry import model_class
from .._validation import check_n_features, set_features_in
from ..composite.calibration import check_class_weight
from ..model_selection.c_path import select_C
from ..solvers.newton import auto_pair_moments, prsvm_newton
from ._base import LinearAUCModel
from ._checkpoint import check_resumed_data, open_checkpoint


@fill_doc()
@model_class(cli="ranksvm")
class RankSVM(LinearAUCModel):
    """Linear RankSVM maximizing AUC through the pairwise squared hinge (PRSVM+).

    Parameters
    ----------
    C : "auto" or float > 0, default "auto"
        Weight of the pairwise loss in the objective below; larger C fits the training pairs
        harder. The paper selects it on ``{2^-15, ..., 2^10}`` by 3-fold CV on the whole
        training set (:func:`cv_select_C` does that). "auto" chooses it by validation AUC along
        a warm-started path on a stratified subsample of at most 20,000 rows and rescales it
        to the training set (:mod:`daskauc.model_selection.c_path`; recorded in ``C_`` and
        ``selection_``): in NBAUC() on ijcnn1 (49,990 rows, 1,600 landmarks) 6.2 s of a
        15.4 s fit, about the time of the fit at the chosen C; the former default C = 1 gave
        0.9881 test AUC against 0.9973.
    tol : float, default 1e-3
        Stop when ``||grad F(w)|| <= tol * max(||w||, ||2C X^T g(w)||)``, the gradient small
        next to its two terms (:func:`daskauc.solvers.newton.prsvm_newton`).
    max_iter : int, default 50
        Maximum Newton steps.
    cg_tol : float, default 0.1
        Relative residual ending the conjugate-gradient solve of each Newton step.
    max_cg : int, default 50
        Maximum Hessian-vector products per Newton step.
    precondition : bool, default True
        Diagonal (Jacobi) preconditioning of conjugate gradient; see
        :func:`daskauc.solvers.newton.prsvm_newton`.
    line_search : {"exact", "armijo"}, default "exact"
        Exact 1-D Newton on the piecewise quadratic (Chapelle) or backtracking.
    decrement_tol : float or None, default None
        Optional extra stop on the Newton decrement, ``-grad.s <= decrement_tol * F``.
    persist : {"auto", True, False}, default "auto"
        Keep dask input in (cluster) memory during the fit, or stream it from its source at
        every pass ("auto": persist when it fits in half the memory).
    warm_start : bool, default False
        Start from the previous ``coef_`` (a path over increasing C then costs a few steps).
    random_state : None, int or Generator, default None
        Seeds the subsample of ``C="auto"``.
    %(class_weight)s

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    C_ : float, the C used (chosen for ``C="auto"``).
    selection_ : dict, the choice of ``C="auto"`` (the path's validation AUCs, the rule);
        absent for a given C.
    n_iter_ : int, Newton steps of the last fit; after ``partial_fit``, the batches seen.
    converged_ : bool
    history_ : list of dict, one record per gradient evaluation (objective, gradient norm,
        CG steps, step length, seconds).
    intercept_, calibration_slope_ : float
        The Platt calibration of ``X @ coef_`` fitted at the end of ``fit``
        (:mod:`daskauc.composite.calibration`): ``decision_function(X) = X @ coef_ +
        intercept_``, ``predict_proba`` has ``p = expit(calibration_slope_ *
        decision_function(X))``, ``predict`` takes the more probable class.
    classes_ : ndarray, ``[negative, positive]`` label values.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, when ``X`` was a dataframe with string column names.
    input_map_sha256_ : str, when ``X`` was an embedding store: the digest of its map, which
        scoring checks (rows of another map are refused).

    Notes
    -----
    Objective, over all positive-negative pairs of the training rows::

        F(w) = 1/2 ||w||^2 + C sum_{i in P} sum_{j in N} max(0, 1 - w.x_i + w.x_j)^2.

    No pair is formed: one sort of the scores per iteration gives the gradient and the
    generalized Hessian (:mod:`daskauc.solvers.newton`). There is no intercept (AUC ignores it).

    Sparse rows (a scipy sparse matrix, a dask array of CSR blocks, a sparse store): every
    pass multiplies the non-zeros only (``X w``, ``X^T g``), so a fit costs the non-zeros
    plus r-vectors and takes the steps of the same rows held dense (docs/sparse.md). C must
    be given as a number there for now: the choice of ``C="auto"`` reads its subsample dense.

    ``partial_fit`` makes RankSVM a learner of streams of batches: each batch's problem (its
    own pairs, C as given) is solved by Newton from the current model, and ``coef_`` is the
    average of the batch solutions weighted by their pairs (the one-shot averaging of
    M-estimators of Zhang, Duchi & Wainwright, "Communication-efficient algorithms for
    statistical optimization", JMLR 2013, kept as a running mean). It needs both classes in
    every batch (pairs) and is close to the full fit when batches are large and alike; a fit
    over the whole data (a dask array or a store streams from disk) is exact.

    References
    ----------
    Chapelle, O. and Keerthi, S. S. (2010). Efficient algorithms for ranking with SVMs.
    Information Retrieval 13(3), 201-215.
    Khalid, M., Ray, I. and Chitsaz, H. Scalable nonlinear AUC maximization methods.
    """

    #: sparse rows (CSR blocks): the Newton passes cost their non-zeros (docs/sparse.md)
    _sparse_rows = True

    _params = {
        "C": [Options("auto"), prsvm_newton.params["C"]],
        **params_of(prsvm_newton, "tol", "max_iter", "cg_tol", "max_cg", "precondition",
                    "line_search", "decrement_tol", "persist"),
        "warm_start": bool,
    }

    def __init__(self, C="auto", *, tol: float = 1e-3, max_iter: int = 50,
                 cg_tol: float = 0.1, max_cg: int = 50, precondition: bool = True,
                 line_search: str = "exact",
                 decrement_tol: float | None = None, persist="auto", warm_start: bool = False,
                 random_state=None, class_weight=None):
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.cg_tol = cg_tol
        self.max_cg = max_cg
        self.precondition = precondition
        self.line_search = line_search
        self.decrement_tol = decrement_tol
        self.persist = persist
        self.warm_start = warm_start
        self.random_state = random_state
        self.class_weight = class_weight

    def _newton_kwargs(self) -> dict:
        return dict(tol=float(self.tol), max_iter=int(self.max_iter), cg_tol=float(self.cg_tol),
                    max_cg=int(self.max_cg), precondition=bool(self.precondition),
                    line_search=self.line_search, decrement_tol=self.decrement_tol)

    def _choose_C(self, Xd, yd, pair_moments=None) -> float:
        """``C`` as a number: the given one, or chosen (``C="auto"``, recorded in
        ``selection_``) with the Newton solves preconditioned by ``pair_moments``."""
        self.__dict__.pop("selection_", None)
        if not isinstance(self.C, str):
            return float(self.C)
        # the choice does not depend on max_iter (a checkpointed fit resumed with more steps
        # must choose the same C)
        with params_checked():
            self.selection_ = select_C(Xd, yd,
                                       solver_params={**self._newton_kwargs(), "max_iter": 50},
                                       random_state=self.random_state, pair_moments=pair_moments)
        return self.selection_["C"]

    def fit(self, X, y=None, *, X_val=None, y_val=None, checkpoint=None, resume: bool = False):
        """Fit on rows ``X`` (numpy, dask, zarr or a store path) and binary labels ``y``.

        ``X_val`` / ``y_val`` (optional) record the validation AUC of every iteration in
        ``history_``. ``checkpoint`` (a path or URL): save the model, with the Newton state,
        after every Newton step; ``resume=True`` continues from it (the same steps as the
        uninterrupted fit; ``max_iter`` may grow, never fall below the steps saved). The path
        may hold nothing or a checkpoint of this class, which a fit without ``resume``
        replaces; anything else is refused before any work, the choice of C included
        (:func:`daskauc.estimators._checkpoint.open_checkpoint`).
        """
        check_params(self, self._params)
        checkpoint = open_checkpoint(self, checkpoint, X, y, resume=resume)
        Xd, yd, classes = check_X_y(X, y)
        check_class_weight(self.class_weight, classes)
        self.__dict__.pop("data_fingerprint_", None)  # of an earlier checkpointed fit
        set_features_in(self, X, Xd.shape[1])
        snapshot, on_step, previous = None, None, None
        if checkpoint is not None:
            from ..io import save_model

            previous = checkpoint.previous
            if previous is not None:
                check_resumed_data(previous, checkpoint.path, Xd.shape[1], classes)
                snapshot = previous._solver_state

            def on_step(state):
                for stale in ("intercept_", "calibration_slope_"):  # of an earlier fit
                    self.__dict__.pop(stale, None)
                self.coef_, self.n_iter_ = state["w"].copy(), int(state["n_iter"])
                self.converged_, self.history_ = False, list(state["history"])
                self.classes_, self.n_features_in_ = np.asarray(classes), int(Xd.shape[1])
                self.data_fingerprint_ = checkpoint.data
                self._solver_state = state
                save_model(self, checkpoint.path, overwrite=True)

        # the preconditioner of every solve, the selection's included: a function of the data
        # alone, so a resumed fit takes the steps of the uninterrupted one
        moments = auto_pair_moments(Xd, yd) if self.precondition else None
        if previous is not None and hasattr(previous, "C_"):  # resume with the same C
            self.C_ = float(previous.C_)
            if hasattr(previous, "selection_"):
                self.selection_ = previous.selection_
        else:
            self.C_ = self._choose_C(Xd, yd, moments)
        w0 = None
        if self.warm_start and hasattr(self, "coef_"):
            if self.coef_.shape != (Xd.shape[1],):
                raise ValueError(
                    f"warm_start=True but the previous coef_ has {self.coef_.shape[0]} features "
                    f"and X has {Xd.shape[1]}; refit with warm_start=False"
                )
            w0 = self.coef_
        with params_checked():
            result = prsvm_newton(
                Xd, yd, C=self.C_, w0=w0, **self._newton_kwargs(),
                persist=self.persist, X_val=X_val, y_val=y_val, check_input=False,
                resume=snapshot, on_step=on_step, pair_moments=moments,
            )
        if not result.converged:
            warnings.warn(
                f"RankSVM did not reach tol={self.tol} in max_iter={self.max_iter} Newton "
                f"steps (relative gradient norm {result.history[-1]['rel_grad_norm']:.3g}); "
                "increase max_iter", ConvergenceWarning, stacklevel=2,
            )
        self._set_result(result, classes, Xd.shape[1])
        if checkpoint is not None:
            self.data_fingerprint_ = checkpoint.data
        self._solver_state = {**dict(result.state or {}), "pairs": float(_pairs(yd)),
                              "batches": 1}
        self._calibrate_linear(Xd, yd, X)
        return self

    def partial_fit(self, X, y=None, classes=None):
        """Fit one more batch: solve its pairwise problem by Newton from the current model
        and average the solution into ``coef_``, weighted by the batch's pairs (class Notes).

        ``classes`` (the two label values) is accepted for scikit-learn compatibility; every
        batch must hold both (a batch without pairs has no problem to solve). With
        ``C="auto"`` the first batch chooses C and later batches keep it.
        """
        check_params(self, self._params)
        state = self._state_to_continue()
        Xd, yd, found = check_X_y(X, y)
        check_class_weight(self.class_weight, None)
        if classes is not None and not np.array_equal(np.sort(np.asarray(classes)),
                                                      np.sort(np.asarray(found))):
            raise ValueError(f"classes={list(classes)} do not match the labels of y "
                             f"{list(found)}")
        pairs = float(_pairs(yd))
        if state is None:
            set_features_in(self, X, Xd.shape[1])
            self.C_ = self._choose_C(Xd, yd)
            w0, done, weight, batches = None, None, 0.0, 0
        else:
            check_n_features(Xd.shape, self.n_features_in_, type(self).__name__)
            if not np.array_equal(np.asarray(found), self.classes_):
                raise ValueError(f"y has classes {list(found)} but the model was fitted with "
                                 f"{list(self.classes_)}")
            w0, done = self.coef_, self.coef_
            weight, batches = float(state.get("pairs", 0.0)), int(state.get("batches", 0))
        with warnings.catch_warnings(), params_checked():
            warnings.simplefilter("ignore", ConvergenceWarning)
            result = prsvm_newton(Xd, yd, C=self.C_, w0=w0, **self._newton_kwargs(),
                                  persist=self.persist, check_input=False)
        coef = result.coef if done is None else (
            (weight * done + pairs * result.coef) / (weight + pairs))
        history = list(getattr(self, "history_", []))
        self._set_result(result, found, Xd.shape[1])
        self.coef_ = np.asarray(coef, dtype=np.float64)
        self.history_ = history + [{"batch": batches + 1, "pairs": pairs,
                                    "newton_steps": int(result.n_iter),
                                    "converged": bool(result.converged)}]
        self.n_iter_ = batches + 1
        self._solver_state = {"pairs": weight + pairs, "batches": batches + 1}
        self._calibrate_linear(Xd, yd, X, batch=True)
        return self


def _pairs(yd) -> int:
    """Positive-negative pairs of {-1, +1} labels (numpy or dask)."""
    pos, neg = class_counts(yd)
    return pos * neg
