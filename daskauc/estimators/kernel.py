"""KernelAUC: Gaussian-kernel AUC maximization with many centres and a chosen bandwidth.

The model is ``f(x) = sum_j alpha_j exp(-gamma ||x' - c_j||^2)`` over m centres ``c_j`` in the
scaled feature space (``x'`` the scaled row), fitted by NBAUC's pairwise squared hinge or
LSAUC's least-squares loss, in one of two routes that give the same model:

* ``solver="kernel"``: the kernel-basis solvers (nothing n x m stored; every pass recomputes
  the kernel blocks; Nystroem-preconditioned conjugate gradient) for large m;
* ``solver="embedding"``: the materialized k-means-Nystroem embedding with these centres as
  landmarks and NBAUC's / LSAUC's solver on it, for small m;
* ``solver="auto"`` picks the cheaper by the measured-cost model of
  :mod:`daskauc.engine.cost` (the embedding only when it fits in memory).

``gamma="auto"`` and ``lam="auto"`` choose both by validation AUC on a stratified subsample
(:mod:`daskauc.model_selection.gamma_lam`). The estimator validates, asks for the choice,
draws the centres and calls the route's solver functions
(:mod:`daskauc.composite.kernel_model`, shared with the width walk), then copies the
result into its fitted attributes.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._arrays import class_counts
from .._compute import compute
from .._docs import fill_doc
from .._labels import as_labels, check_X_y
from .._params import (
    ArrayLike,
    FloatDType,
    Grid,
    Interval,
    Options,
    check_params,
    child_seed,
    params_checked,
    params_of,
    seed_sequence,
)
from .._registry import model_class
from .._validation import as_row_chunked, check_predict_X, is_lazy_input, set_features_in
from ..composite.calibration import check_class_weight
from ..composite.kernel_model import (
    KernelFunction,
    KernelSettings,
    choose_route,
    fit_kernel_model,
)
from ..model_selection.gamma_lam import SELECTION_CENTRES, SELECTION_ROWS, choose_gamma_lam
from ..model_selection.width_walk import WIDTH_CENTRES, WIDTH_ROWS
from ..solvers.kernel_basis import factor_placement, kernel_scores
from ..solvers.kernel_newton import WEIGHTINGS, kernel_pairwise_newton
from ._base import AUCScoreMixin
from ._checkpoint import check_resumed_data, open_checkpoint

logger = logging.getLogger("daskauc")

LOSSES = ("squared_hinge", "least_squares")
ROUTES = ("auto", "kernel", "embedding")
SCALINGS = ("standard", "minmax", None)


@fill_doc()
@model_class(cli="kernel")
class KernelAUC(AUCScoreMixin, ClassifierMixin, BaseEstimator):
    """Gaussian-kernel AUC maximization with many centres, gamma and lam chosen.

    Parameters
    ----------
    n_centres : int, default=4096
        Centres m of the kernel expansion (capped at the number of training rows). AUC
        grows with m on large data (covtype: 1 - AUC falls about as m^-0.32); the
        kernel-basis route never stores an n x m matrix, so m is bounded by the m x m
        preconditioner (8 m^2 bytes: 8.6 GB at m = 32,768).
    loss : {"squared_hinge", "least_squares"}, default="squared_hinge"
        NBAUC's pairwise squared hinge or LSAUC's least squares, each the mean over all
        positive-negative pairs (objectives in Notes).
    lam : "auto" or float, default="auto"
        Regularization (> 0) of ``lam/2 alpha^T K alpha``; "auto" chooses it with gamma.
    gamma : "auto", "rule" or float, default="auto"
        Kernel width; "rule" is Khalid et al.'s ``1/b`` (b the mean squared distance to the
        mean over the first 80,000 scaled rows); "auto" chooses among
        ``gamma_grid x 1/b`` by validation AUC, then (with many centres) walks it at the
        final model's scale (``width_rows``). The automatic choice is most of a default
        fit's time: on ijcnn1 (49,990 rows, 22 features, 2 cores) 72 s of 102 s (the
        screen 2 s, the gamma/lam search 70 s: 7 paths of 6 lam on 2,048 centres), test
        AUC 0.9976 (``docs/benchmarks/cli_text_labels.md``); every candidate is logged
        with its validation AUC, ``i/N`` and the time left. Numbers for ``gamma`` and
        ``lam`` skip it.
    centres : {"uniform", "kmeans"} or array of shape (m, n_features), default="uniform"
        Centres drawn uniformly among the training rows (as good as k-means on covtype and
        cheaper; their labels enable the "pairs" preconditioner), k-means centroids, or given
        (in the original feature space).
    solver : {"auto", "kernel", "embedding"}, default="auto"
        The route (see the module); "auto" takes the cheaper by measured cost.
    scaling : {"standard", "minmax", None}, default="standard"
        Feature scaling fitted on the training rows before the kernel.
    tol : float, default=1e-3
        Squared hinge: stop Newton when ``||grad|| <= tol ||grad(0)||`` (in the embedding's
        coordinates); least squares (kernel route): CG's relative residual, ``tol**2``.
    max_iter : int, default=50
        Newton steps (squared hinge) or CG steps (least squares, kernel route).
    cg_tol : float, default=0.1
    max_cg : int, default=100
    weighting : {"auto", "mean", "pairs"}, default="auto"
        The kernel route's preconditioner for the squared hinge; "auto" is "pairs" when the
        centres' labels are known (uniform centres) and "mean" otherwise.
    selection_rows : int, default=20000
        Rows of the stratified subsample of the automatic choice.
    selection_centres : int, default=2048
        Cap on the centres used in the automatic choice.
    cv : int, default=3
        Folds of the automatic choice.
    width_rows : int, default=150000
        ``gamma="auto"``: rows of the stratified subsample (two thirds train, one third
        validate) on which the chosen width is walked by factors of 2 at the final model's
        scale, with ``min(n_centres, width_centres)`` centres, while the validation AUC
        rises. It runs when those centres are at least 4 times the selection's; 0 turns it
        off. The best width grows with m: on covtype the selection's 2/b gave 0.939 at 8,192
        centres where 8/b gave 0.954.
    width_centres : int, default=8192
        Cap on the centres of the width walk.
    gamma_grid : sequence of float or None
        Multiples of 1/b tried by ``gamma="auto"``. Default
        ``daskauc.model_selection.gamma_lam.GAMMA_MULTIPLIERS`` (1/4 .. 16), extended by
        factors of 2 past an end where the best width sits (at most three more); a given grid
        is used as it is.
    lam_grid : sequence of float or None
        lam values tried by ``lam="auto"`` at the subsample's scale (default 1e-1 .. 1e-9).
    persist : {"auto", True, False}, default="auto"
        Keep the (scaled) rows or the embedding in (cluster) memory during the fit.
    dtype : {"float32", "float64"}, default="float32"
        Working dtype of the kernel tiles or the embedding (sums are float64 either way).
    factor_placement : {"auto", "client", "workers"}, default="auto"
        Where the kernel route keeps the preconditioner's factor of the m x m kernel matrix of
        the centres: "client" (one m x m float64 matrix in this process, LAPACK on its
        threads), "workers" (two lower triangles of tiles held by the distributed cluster's
        workers, 8 m (m + b) bytes over them; the client keeps m-vectors only), or "auto",
        the cheaper of the two that fits by :func:`daskauc.engine.cost.factor_costs` (the
        client without a distributed cluster). The model is the same either way (to
        rounding, ~1e-14 relative).
    warm_start : bool, default=False
        Start the kernel route from the previous fit's function: its coefficients carried
        over exactly when its centres are rows among the new ones with the same gamma (uniform
        centres with the same random_state are nested: the first m of one permutation), else
        interpolated at the new centres. Growing ``n_centres`` along a path then costs a few
        Newton steps per size.
    random_state : None, int or Generator
    %(class_weight)s

    Attributes
    ----------
    centres_ : ndarray (m, n_features), float64
        The centres, in the scaled feature space.
    centre_labels_ : ndarray (m,) of {-1, +1}
        Labels of the centres (uniform centres only; empty otherwise).
    centre_index_ : ndarray (m,) of int64
        Training rows the centres are (uniform centres only; empty otherwise).
    dual_coef_ : ndarray (m,), float64
        ``alpha``.
    gamma_, lam_ : float
    route_ : str
        "kernel" or "embedding".
    route_costs_ : dict
        The cost estimates behind ``solver="auto"`` (seconds, bytes, measured rates).
    selection_ : dict
        The automatic choice: chosen values, the rule, and the table of validation AUC per
        (gamma, lam); empty when neither was "auto".
    scaler_ : fitted scaler or None
    n_iter_, converged_, history_ : the solver's record.
    jitter_ : float
        Jitter on K_mm (kernel route): the regularizer is ``K_mm + jitter I``.
    factor_placement_ : str
        Where the kernel route's factor was: "client" or "workers" ("" on the embedding
        route).
    timings_ : dict
        Seconds per stage (scale, selection, centres, solve, calibration).
    intercept_, calibration_slope_ : float
        The Platt calibration of ``f`` fitted at the end of ``fit`` (on every training row
        for numpy input, on at most ``_config.CALIBRATION_ROWS`` rows of whole chunks
        otherwise): ``decision_function(X) = f(X) + intercept_``, ``predict_proba(X)`` has
        ``p = expit(calibration_slope_ * decision_function(X))`` and ``predict`` takes the
        more probable class; see :class:`daskauc.RankSVM` for other thresholds.
    classes_, n_features_in_
    feature_names_in_ : ndarray of str
        The column names, when ``X`` was a dataframe with string column names.

    Notes
    -----
    With ``f = K alpha`` (rows against centres), pairs ``(i in P, j in N)``::

        squared hinge:  lam/2 alpha^T K_mm alpha + mean_pairs max(0, 1 - f_i + f_j)^2
        least squares:  lam/2 alpha^T K_mm alpha + mean_pairs (1 - f_i + f_j)^2

    With the centres as landmarks and r = m the first is NBAUC with
    ``C = 1 / (lam n+ n-)`` (Khalid et al.), the second LSAUC.

    References
    ----------
    M. Khalid, I. N. Ray and H. Chitsaz, "Scalable Nonlinear AUC Maximization Methods", 2018.
    A. Rudi, L. Carratino and L. Rosasco, "FALKON: an optimal large scale kernel method",
    NeurIPS 2017; G. Meanti et al., "Kernel methods through the roof", NeurIPS 2020.
    """

    def __init__(self, n_centres=4096, *, loss="squared_hinge", lam="auto", gamma="auto",
                 centres="uniform", solver="auto", scaling="standard", tol=1e-3, max_iter=50,
                 cg_tol=0.1, max_cg=100, weighting="auto", selection_rows=SELECTION_ROWS,
                 selection_centres=SELECTION_CENTRES, cv=3, width_rows=WIDTH_ROWS,
                 width_centres=WIDTH_CENTRES, gamma_grid=None, lam_grid=None,
                 persist="auto", dtype="float32", factor_placement="auto", warm_start=False,
                 random_state=None, class_weight=None):
        self.n_centres = n_centres
        self.loss = loss
        self.lam = lam
        self.gamma = gamma
        self.centres = centres
        self.solver = solver
        self.scaling = scaling
        self.tol = tol
        self.max_iter = max_iter
        self.cg_tol = cg_tol
        self.max_cg = max_cg
        self.weighting = weighting
        self.selection_rows = selection_rows
        self.selection_centres = selection_centres
        self.cv = cv
        self.width_rows = width_rows
        self.width_centres = width_centres
        self.gamma_grid = gamma_grid
        self.lam_grid = lam_grid
        self.persist = persist
        self.dtype = dtype
        self.factor_placement = factor_placement
        self.warm_start = warm_start
        self.random_state = random_state
        self.class_weight = class_weight

    # ------------------------------------------------------------------------ checks

    _params = {
        "n_centres": Interval(int, 1),
        "loss": Options(*LOSSES),
        "solver": Options(*ROUTES),
        "scaling": Options(*SCALINGS),
        "weighting": Options("auto", *WEIGHTINGS),
        **params_of(kernel_pairwise_newton, "tol", "max_iter", "cg_tol", "max_cg"),
        "selection_rows": Interval(int, 10),
        "selection_centres": Interval(int, 1),
        "cv": Interval(int, 2),
        "width_rows": Interval(int, 0),
        "width_centres": Interval(int, 1),
        **params_of(kernel_pairwise_newton, "persist"),
        "factor_placement": factor_placement.params["placement"],
        "lam": [Options("auto"), kernel_pairwise_newton.params["lam"]],
        "gamma": [Options("auto", "rule"), kernel_pairwise_newton.params["gamma"]],
        "centres": [Options("uniform", "kmeans"), ArrayLike("an array (m, n_features)")],
        "dtype": FloatDType(),
        "gamma_grid": [Grid(), None],
        "lam_grid": [Grid(), None],
    }

    # ------------------------------------------------------------------------ fit

    def fit(self, X, y=None, *, X_val=None, y_val=None, checkpoint=None, resume: bool = False):
        """Fit on rows ``X`` (numpy, dask, zarr or a dataset store path with ``y=None``).

        ``X_val`` / ``y_val`` (optional, raw features) record the validation AUC of every
        iteration in ``history_``. ``checkpoint`` (a path or URL; ``loss="squared_hinge"``):
        save the model, with the Newton state, after every Newton step; ``resume=True``
        continues from it: the scaler, gamma, lam, centres and route are the checkpoint's,
        the preconditioner's factors (or the embedding) are computed again from them, and the
        steps are those of the uninterrupted fit, bit for bit (``max_iter`` may grow, never
        fall below the steps saved). The path may hold nothing or a checkpoint of this
        class, which a fit without ``resume`` replaces; anything else is refused before any
        work, the selection included (:func:`daskauc.estimators._checkpoint.open_checkpoint`).
        """
        from ..data.scale import MinMaxScaler, StandardScaler

        check_params(self, self._params)
        if checkpoint is not None and self.loss != "squared_hinge":
            raise ValueError(
                f"checkpoint: KernelAUC(loss={self.loss!r}) solves in one conjugate-gradient "
                "solve, with no Newton steps to checkpoint; use loss='squared_hinge' or fit "
                "without checkpoint")
        checkpoint = open_checkpoint(self, checkpoint, X, y, resume=resume)
        timings: dict[str, float] = {}
        tic = time.perf_counter()
        Xd, yd, classes = check_X_y(X, y, dtype=self.dtype)
        check_class_weight(self.class_weight, classes)
        self.__dict__.pop("data_fingerprint_", None)  # of an earlier checkpointed fit
        set_features_in(self, X, int(Xd.shape[1]))
        y_np = np.asarray(compute(yd)[0] if isinstance(yd, da.Array) else yd)
        n, d = (int(s) for s in Xd.shape)
        previous = checkpoint.previous if checkpoint is not None else None
        if previous is not None:
            check_resumed_data(previous, checkpoint.path, d, classes)
        else:
            self._check_selectable(y_np)
        scaler = {"standard": StandardScaler, "minmax": MinMaxScaler, None: None}[self.scaling]
        if previous is not None:
            self.scaler_ = previous.scaler_
        else:
            self.scaler_ = scaler().fit(Xd) if scaler is not None else None
        Xs = self._scale(Xd)
        timings["scale"] = time.perf_counter() - tic
        ss = seed_sequence(self.random_state)
        settings = self._settings()

        m = int(self.n_centres)
        if not isinstance(self.centres, str):
            m = int(np.asarray(self.centres).shape[0])
        elif m > n:
            warnings.warn(f"n_centres={m} > n_samples={n}: using {n} centres (every row)",
                          stacklevel=2)
            m = n

        tic = time.perf_counter()
        if previous is not None:  # the checkpoint's choice (random_state=None would redraw)
            gamma, lam, selection = previous.gamma_, previous.lam_, previous.selection_
        else:
            with params_checked():
                gamma, lam, selection = choose_gamma_lam(
                    Xs, y_np, gamma=self.gamma, lam=self.lam, n_centres=m,
                    gamma_grid=self.gamma_grid, lam_grid=self.lam_grid, cv=int(self.cv),
                    rows=int(self.selection_rows), max_centres=int(self.selection_centres),
                    width_rows=int(self.width_rows), width_centres=int(self.width_centres),
                    solver=self.solver, settings=settings,
                    random_state=ss)
        timings["selection"] = time.perf_counter() - tic

        tic = time.perf_counter()
        if previous is not None:
            centres = previous.centres_
            labels = previous.centre_labels_ if len(previous.centre_labels_) else None
            index = previous.centre_index_ if len(previous.centre_index_) else None
        else:
            centres, labels, index = self._centres(Xs, y_np, m, child_seed(ss, 2))
        timings["centres"] = time.perf_counter() - tic

        tic = time.perf_counter()
        route, costs = choose_route(n, d, m, loss=self.loss, solver=self.solver,
                                    persist=self.persist)
        if previous is not None:
            route = previous.route_
        Xv = yv = None
        if X_val is not None:
            if y_val is None:
                raise ValueError("X_val was given without y_val")
            Xv = self._scale(as_row_chunked(X_val, name="X_val", dtype=self.dtype))
            yv, _ = as_labels(y_val, name="y_val")
        warm = self._previous_function()  # before this fit's centres replace the last's
        self._set_model(centres, labels, index, gamma, lam, route, costs, selection)
        self.classes_ = np.asarray(classes)
        self.n_features_in_ = d
        on_step = None
        if checkpoint is not None:
            on_step = self._checkpoint_step(checkpoint)
        with params_checked():
            alpha, result = fit_kernel_model(
                route, Xs, y_np, centres, labels, index, gamma, lam, settings,
                previous=warm, X_val=Xv, y_val=yv, on_step=on_step,
                resume=previous._solver_state if previous is not None else None)
        timings["solve"] = time.perf_counter() - tic
        if not result.converged and self.loss == "squared_hinge":
            warnings.warn(f"KernelAUC did not reach tol={self.tol} in max_iter={self.max_iter} "
                          "Newton steps; increase max_iter", ConvergenceWarning, stacklevel=2)

        self.dual_coef_ = np.asarray(alpha, dtype=np.float64)
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)
        self.history_ = list(result.history)
        state = result.state or {}
        self.jitter_ = float(state.get("jitter", 0.0))
        self.factor_placement_ = str(state.get("placement", ""))
        self.passes_ = int(state.get("passes", 0))
        self.preconditioner_seconds_ = {k: float(v) for k, v in state.get("seconds", {}).items()}
        self.__dict__.pop("_solver_state", None)
        if checkpoint is not None:
            self.data_fingerprint_ = checkpoint.data
        tic = time.perf_counter()
        # the scores as a solver function of the fitted arrays (not a method of this model)
        score = functools.partial(kernel_scores, centres=self.centres_, gamma=self.gamma_,
                                  alpha=self.dual_coef_, dtype=np.dtype(self.dtype))
        self._calibrate(Xs, yd, score, all_rows=not is_lazy_input(X))
        timings["calibration"] = time.perf_counter() - tic
        self.timings_ = timings
        return self

    def _set_model(self, centres, labels, index, gamma, lam, route, costs, selection):
        """The fitted attributes that are fixed before the solve (a checkpoint saves them)."""
        self.centres_ = np.ascontiguousarray(centres, dtype=np.float64)
        self.centre_labels_ = (np.asarray(labels, dtype=np.int8) if labels is not None
                               else np.empty(0, np.int8))
        self.centre_index_ = (np.asarray(index, dtype=np.int64) if index is not None
                              else np.empty(0, np.int64))
        self.gamma_ = float(gamma)
        self.lam_ = float(lam)
        self.route_ = route
        self.route_costs_ = costs
        self.selection_ = selection if selection is not None else {}

    def _checkpoint_step(self, checkpoint):
        """``on_step(snapshot, alpha, history)``: save this model, uncalibrated, with the
        Newton snapshot, to the checkpoint (atomically: a new store renamed over the old)."""
        from ..io import save_model

        def on_step(snapshot, alpha, history):
            for stale in ("intercept_", "calibration_slope_", "timings_"):  # of an earlier fit
                self.__dict__.pop(stale, None)
            self.dual_coef_ = np.asarray(alpha, dtype=np.float64).copy()
            self.n_iter_, self.converged_ = int(snapshot["n_iter"]), False
            self.history_ = [dict(h) for h in history]
            self.data_fingerprint_ = checkpoint.data
            self._solver_state = snapshot
            save_model(self, checkpoint.path, overwrite=True)

        return on_step

    def _check_selectable(self, y: np.ndarray) -> None:
        """``gamma`` / ``lam="auto"`` choose by ``cv``-fold cross-validation, stratified:
        each fold needs a row of each class (else "n_splits=3 cannot be greater than the
        number of members in each class", or a division by zero)."""
        auto = [name for name in ("gamma", "lam") if getattr(self, name) == "auto"]
        pos, neg = class_counts(y)
        if auto and min(pos, neg) < int(self.cv):
            raise ValueError(
                f'{" and ".join(f"{a}=auto" for a in auto)} choose by {self.cv}-fold '
                f"cross-validation and need at least {self.cv} rows of each class; y has {pos} "
                f"positive and {neg} negative rows: pass numbers (e.g. gamma='rule', lam=1e-3)"
                " or a smaller cv")

    def _settings(self) -> KernelSettings:
        return KernelSettings(loss=self.loss, weighting=self.weighting, persist=self.persist,
                              dtype=self.dtype, factor_placement=self.factor_placement,
                              tol=float(self.tol), max_iter=int(self.max_iter),
                              cg_tol=float(self.cg_tol), max_cg=int(self.max_cg))

    def _previous_function(self) -> KernelFunction | None:
        """The previous fit's function, where ``warm_start`` continues from; else None."""
        if not self.warm_start or not hasattr(self, "dual_coef_"):
            return None
        index = getattr(self, "centre_index_", np.empty(0))
        return KernelFunction(centres=self.centres_, index=index, gamma=self.gamma_,
                              alpha=self.dual_coef_)

    def _scale(self, X):
        return self.scaler_.transform(X) if self.scaler_ is not None else X

    def _centres(self, Xs, y_np, m, ss):
        if not isinstance(self.centres, str):
            C = np.asarray(self.centres, dtype=np.float64)
            if C.ndim != 2 or C.shape[1] != Xs.shape[1]:
                raise ValueError(f"centres must have shape (m, {Xs.shape[1]}); got {C.shape}")
            if not np.isfinite(C).all():
                raise ValueError("centres contain NaN or infinity")
            if self.scaler_ is not None:
                C = np.asarray(self.scaler_.transform(C), dtype=np.float64)
            return C, None, None
        from ..embed.centres import select_centres

        sel = select_centres(Xs, m, method=self.centres, y=y_np, random_state=ss)
        return np.asarray(sel.centres, dtype=np.float64), sel.labels, sel.index

    # ------------------------------------------------------------------------ predict

    def _raw_scores(self, X):
        """``f(x)`` before calibration: numpy for numpy input, a lazy dask array for dask or
        a store (computed in ``dtype``)."""
        check_is_fitted(self, "dual_coef_")
        Xd = check_predict_X(self, X, dtype=self.dtype if is_lazy_input(X) else None)
        return self._kernel_scores(self._scale(Xd))

    def _kernel_scores(self, Xs):
        return kernel_scores(Xs, self.centres_, self.gamma_, self.dual_coef_,
                             dtype=np.dtype(self.dtype))

