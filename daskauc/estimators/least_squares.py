"""scikit-learn estimators of the least-squares AUC family.

Objective and update: docs/algorithms.md, "Least-squares AUC".

All of them target the same objective,

    LS(w) = (1/(n+ n-)) sum_{i in P, j in N} (1 - w.(x_i - x_j))^2 + (lam/2) ||w||^2,

and every ``lam`` below is on this one scale, whatever the paper's own parametrization (each
class says how its paper's parameter maps to ``lam``), so that the methods can be compared at
equal ``lam`` and share one grid. :class:`LSAUC` computes the minimizer exactly; the others
are the stochastic methods of the literature, streaming row chunks through numba kernels.

``daskauc fit --method`` names them ``lsauc``, ``twopass``, ``opauc``, ``solam``, ``spam`` and
``spdam`` (their ``@model_class`` registration).
"""

from __future__ import annotations

import numpy as np

from .._docs import CHAIN_FRAME, fill_doc
from .._labels import check_X_y
from .._params import Interval, Options, check_params, params_checked, params_of
from .._registry import model_class
from .._validation import check_n_features, set_features_in
from ..composite.calibration import check_class_weight
from ..solvers._result import SolverResult
from ..solvers.opauc import opauc
from ..solvers.solam import solam
from ..solvers.spam import spam
from ..solvers.spdam import spdam
from ..solvers.stats import class_means, class_statistics, lsauc
from ..solvers.twopass import twopass_auc
from ._base import LinearAUCModel
from ._centring import auto_step, mean_sq_norm
from ._checkpoint import open_checkpoint

_EPOCHS = Interval(int, 1)


def _auto(solver, name: str) -> list:
    """"auto" or what ``solver`` takes for ``name`` (a step size the estimator may choose)."""
    return [Options("auto"), solver.params[name]]


class _LSModel(LinearAUCModel):
    """fit / partial_fit shared by the family; subclasses define ``_params`` and ``_run``."""

    _params: dict = {}
    #: n_iter_ counts partial_fit calls (LSAUC) instead of the state's epochs.
    _counts_calls = False

    def _run(self, X, y, state, n_epochs: int, continuing: bool) -> SolverResult:
        raise NotImplementedError

    def fit(self, X, y=None, *, checkpoint=None, resume: bool = False):
        """Fit on ``X`` (numpy, dask, Zarr array or dataset store path) and labels ``y``.

        ``checkpoint`` (a path or URL; the epoch-based solvers): save the model with its
        solver state after every epoch; ``resume=True`` continues from it. The path may hold
        nothing or a checkpoint of this class, which a fit without ``resume`` replaces;
        anything else is refused before any work
        (:func:`daskauc.estimators._checkpoint.open_checkpoint`).

        Returns
        -------
        self
        """
        check_params(self, self._params)
        if checkpoint is not None and not hasattr(self, "n_epochs"):
            raise ValueError(f"{type(self).__name__} has no epochs to checkpoint (one pass)")
        checkpoint = open_checkpoint(self, checkpoint, X, y, resume=resume)
        Xd, yd, classes = check_X_y(X, y)
        check_class_weight(self.class_weight, classes)
        set_features_in(self, X, Xd.shape[1])

        rows = self._solver_rows(Xd, X, first=True)

        def run(state, n_epochs):  # the same data: its statistics are not merged again
            with params_checked():
                return self._run(rows, yd, state, n_epochs, False)

        self._fit_epochs(run, getattr(self, "n_epochs", 1), classes, Xd.shape[1],
                         checkpoint=checkpoint,
                         calibrate=lambda: self._calibrate_linear(Xd, yd, X))
        return self

    def partial_fit(self, X, y=None, classes=None):
        """Continue from the fitted state with one more epoch over ``X``.

        ``classes`` is accepted for scikit-learn compatibility; when given it must match the
        labels the model was (or is being) fitted with.
        """
        check_params(self, self._params)
        Xd, yd, cls = check_X_y(X, y)
        check_class_weight(self.class_weight, None)
        if classes is not None and not np.array_equal(np.sort(np.asarray(classes)),
                                                      np.sort(np.asarray(cls))):
            raise ValueError(f"classes={list(classes)} do not match the labels of y {list(cls)}")
        state = self._state_to_continue()
        history: list = []
        n_done = 0
        if state is None:
            set_features_in(self, X, Xd.shape[1])
        else:
            check_n_features(Xd.shape, self.n_features_in_, type(self).__name__)
            if not np.array_equal(np.asarray(cls), self.classes_):
                raise ValueError(
                    f"y has classes {list(cls)} but the model was fitted with "
                    f"{list(self.classes_)}"
                )
            history, n_done = list(self.history_), self.n_iter_
        rows = self._solver_rows(Xd, X, first=state is None)
        with params_checked():
            res = self._run(rows, yd, state, 1, state is not None)
        self._set_result(res, cls, Xd.shape[1])
        self.history_ = history + self.history_
        if self._counts_calls:
            self.n_iter_ = n_done + 1
        self._calibrate_linear(Xd, yd, X, batch=True)
        return self


@fill_doc()
@model_class(cli="lsauc")
class LSAUC(_LSModel):
    """Exact least-squares AUC: one pass and one r x r solve, or conjugate gradient (wide).

    Parameters
    ----------
    lam : float >= 0, default 1e-3
        L2 penalty of LS.
    precision : {"auto", "float64", "mixed"}
        How the per-chunk scatter matrices are formed
        (:func:`daskauc.solvers.stats.class_statistics`).
    solver : {"auto", "exact", "cg"}, default "auto"
        "exact": the class statistics (r x r) and one solve, refused before any work above
        2 GiB per r x r matrix. "cg": conjugate gradient on the implicit operator, one pass
        per iteration, memory O(r) (:mod:`daskauc.solvers._lsauc_cg`). "auto": exact for
        dense rows up to that size and for sparse rows up to 4,096 columns, "cg" above.
    cg_tol, max_cg : float, default 1e-6, and int, default 1000
        "cg" stops when ``||A w - D|| <= cg_tol ||D||`` or after ``max_cg`` iterations.
    %(class_weight)s

    Attributes
    ----------
    coef_ : ndarray (r,)
        ``w* = A^{-1} D``, ``A = S+ + S- + D D^T + (lam/2) I``.
    history_ : list of dict
        The objective, the solve's relative residual and the timings (one record per
        iteration for "cg").
    n_iter_, converged_, classes_, n_features_in_ : as every daskauc model.
    intercept_, calibration_slope_ : float
        The Platt calibration of ``X @ coef_`` (see :class:`daskauc.RankSVM`), for every
        model of this module.

    Notes
    -----
    Minimizes LS(w) exactly (module docstring): the "B-LS-SVM" batch baseline of the SPAM /
    SPDAM papers, computed from the class statistics instead of iteratively. ``partial_fit``
    merges the statistics of a new batch and solves again (exact for a stream); "cg" keeps
    none to merge, so a second ``partial_fit`` is refused there. Sparse rows: both routes
    cost the non-zeros, never n x r (:func:`daskauc.solvers.stats.lsauc`, docs/sparse.md).

    References
    ----------
    Natole, Ying & Lyu, "Stochastic proximal algorithms for AUC maximization", ICML 2018.
    """

    _params = {**params_of(lsauc, "lam", "solver", "cg_tol", "max_cg"),
               **params_of(class_statistics, "precision")}
    _counts_calls = True
    _sparse_rows = True

    def __init__(self, lam: float = 1e-3, *, precision: str = "auto", solver: str = "auto",
                 cg_tol: float = 1e-6, max_cg: int = 1000, class_weight=None):
        self.lam = lam
        self.precision = precision
        self.solver = solver
        self.cg_tol = cg_tol
        self.max_cg = max_cg
        self.class_weight = class_weight

    def _run(self, X, y, state, n_epochs, continuing):
        import warnings

        from sklearn.exceptions import ConvergenceWarning

        from ..solvers.stats import ls_route, refuse_merge

        if ls_route(X, self.solver) == "cg" or isinstance(state, dict):
            refuse_merge(state, X.shape[1])  # "cg" keeps no statistics to merge a batch into
            res = lsauc(X, y, lam=float(self.lam), solver="cg", cg_tol=float(self.cg_tol),
                        max_cg=int(self.max_cg))
            if not res.converged:
                warnings.warn(f"LSAUC(solver='cg') did not reach cg_tol={self.cg_tol} in "
                              f"max_cg={self.max_cg} iterations; increase max_cg",
                              ConvergenceWarning, stacklevel=4)
            return res
        stats = class_statistics(X, y, precision=self.precision)
        if state is not None:
            stats = state.combine(stats)
        return lsauc(X, y, lam=float(self.lam), stats=stats)


@fill_doc(default='"auto"', note=" The first epoch of a fit runs one chain.",
          combine=': ' + CHAIN_FRAME + ', the step counter summed, the means fixed')
@model_class(cli={"twopass": {}, "tpauc": {}})
class TwoPassAUC(_LSModel):
    """TwoPassAUC (Luan & Gao 2018): class means, then SGD with an unbiased gradient of LS.

    Parameters
    ----------
    lam : float >= 0, default 1e-3
        L2 penalty of LS (the paper's lambda; its grid is {2^-10, ..., 4}).
    eta : "auto" or float > 0, default "auto"
        Step size (the paper's grid {2^-10, ..., 4}). A positive row's gradient carries
        ``(n/n+) ||x - c+||^2``, so "auto" is ``2^-7 / (max(n/n+, n/n-) * m)`` with ``m`` the
        mean squared distance of a row to its class mean (from the first pass), and at most
        ``1 / (max(n/n+, n/n-) * M)``, ``M`` a bound on the largest such distance (a step past
        it overshoots that row's own minimum), recorded in ``eta_``. Measured on spambase,
        a9a and ijcnn1, standardized or scaled to [-1, 1], it lands within 0.0035 test AUC of
        the exact LS optimum (LSAUC) in 5 epochs; the former default 2^-6 diverged or fell to
        0.39 on three of those six (tests/test_least_squares.py checks spambase). Without the
        ceiling it diverged on standardized covtype, whose rare binary columns make
        ``M / m`` about 2,900 (``||w||`` 3e22; with it, 0.8237 against LSAUC's 0.8237).
    schedule : {"constant", "invsqrt"}
        ``eta`` (the paper) or ``eta / sqrt(t)``.
    n_epochs : int >= 1, default 5
        SGD passes after the pass for the means (the paper makes one).
    shuffle : bool
        Shuffle the chunk order each epoch (rows are always permuted inside a chunk).
    random_state : None, int or Generator
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Notes
    -----
    Follows the paper, with the per-row weighting corrected from ``1/T+`` to ``n/n+`` so that
    the mean of the per-row gradients is exactly the gradient of LS
    (:mod:`daskauc.solvers.twopass`). Output: the last iterate. The paper calls it TPAUC; this
    name avoids LibAUC's TPAUC (two-way partial AUC). Sparse rows: O(nnz) a row, exact.

    References
    ----------
    Luan & Gao, "Two-pass AUC optimization", CAAI Trans. Intelligent Systems 13(3), 2018.
    """

    _params = {**params_of(twopass_auc, "lam", "schedule"), "eta": _auto(twopass_auc, "eta"),
               "n_epochs": _EPOCHS, "shuffle": bool}
    _sparse_rows = True
    #: eta="auto" is this over max(n/n+, n/n-) times the within-class mean squared norm (at
    #: most 1 over it times the largest squared norm's bound)
    AUTO_ETA = 2.0**-7

    def __init__(self, lam: float = 1e-3, *, eta="auto", schedule: str = "constant",
                 n_epochs: int = 5, shuffle: bool = True, random_state=None, n_chains="auto",
                 sync_every=None, class_weight=None):
        self.lam = lam
        self.eta = eta
        self.schedule = schedule
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    def _run(self, X, y, state, n_epochs, continuing):
        means = None
        if state is None:  # the first pass, made here so that "auto" steps see it
            means = class_means(X, y)
        eta = auto_step(self, "eta", self.AUTO_ETA, state,
                        lambda: means.class_weight * max(
                            means.mean_within_sq_norm,
                            self.AUTO_ETA * means.max_within_sq_norm))
        return twopass_auc(X, y, lam=float(self.lam), eta=eta, means=means,
                           schedule=self.schedule, n_epochs=n_epochs, shuffle=self.shuffle,
                           random_state=self.random_state, state=state,
                           update_means=continuing, n_chains=self.n_chains,
                           sync_every=self.sync_every)


@fill_doc(default='"auto"', note='',
          combine=': the class sums, scatters and counts added exactly, ``w`` mixed by steps')
@model_class(cli="opauc")
class OPAUC(_LSModel):
    """OPAUC (Gao et al. 2013): one pass with running class means and covariances.

    Parameters
    ----------
    lam : float >= 0, default 1e-3
        L2 penalty of LS; the paper's ``lambda`` is ``lam / 2`` (its grid 2^[-10:0]).
    eta : "auto" or float > 0, default "auto"
        Constant step size (the paper's grid 2^[-12:10]). The update's size grows with
        ``||x||^2``, so "auto" is ``2^-5 / mean ||x||^2`` (over a bounded sample of whole
        chunks, one compute; recorded in ``eta_``): on a9a scaled to [-1, 1] (``||x||^2 =
        123``) 0.9000 test AUC, where the former default 2^-6 gave 0.877. Over 2^-6 ... 2^-3
        (one pass; a9a, ijcnn1, german, usps scaled to [-1, 1], diabetes): 2^-5 is within
        0.002 of each dataset's best but german's and usps's (0.025, 0.02), whose one pass
        over 800-1,600 rows wants larger steps.
    n_epochs : int >= 1, default 1
        The paper makes one pass.
    cov : {"auto", "full", "low-rank"}, default "auto"
        The class covariances kept. "full": two r x r matrices, O(r^2) memory and time a
        row (sparse rows too), refused when one is over 256 MiB (r > 5,792). "low-rank": the
        paper's variant for high dimensions, a Gaussian sketch of rank ``rank`` per class
        (2 r x rank floats; O(nnz rank + rank^2) a row, O(r rank) a chunk). "auto": "full"
        while it fits, else "low-rank" (:mod:`daskauc.solvers.opauc`).
    rank : int >= 1, default 50
        The sketch's rank tau (``cov="low-rank"``).
    shuffle, random_state : as :class:`TwoPassAUC`.
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Notes
    -----
    OPAUC of the paper with full covariances (O(r^2) memory and time per row), or its
    low-rank variant for high dimensions, whose sketch of the centred rows equals the
    covariance in expectation; constant step; last iterate. ``partial_fit`` continues the
    stream (statistics and model). Sparse rows: both routes (docs/sparse.md). The full route
    is impractical at r in the thousands: use "low-rank", :class:`LSAUC` or an O(r) method
    there.

    References
    ----------
    Gao, Jin, Zhu & Zhou, "One-pass AUC optimization", ICML 2013.
    """

    _params = {**params_of(opauc, "lam"), "eta": _auto(opauc, "eta"), "n_epochs": _EPOCHS,
               **params_of(opauc, "cov", "rank"), "shuffle": bool}
    _sparse_rows = True
    #: eta="auto" is this over the mean squared row norm
    AUTO_ETA = 2.0**-5

    def __init__(self, lam: float = 1e-3, *, eta="auto", n_epochs: int = 1, cov: str = "auto",
                 rank: int = 50, shuffle: bool = True, random_state=None, n_chains="auto",
                 sync_every=None, class_weight=None):
        self.lam = lam
        self.eta = eta
        self.n_epochs = n_epochs
        self.cov = cov
        self.rank = rank
        self.shuffle = shuffle
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    def _run(self, X, y, state, n_epochs, continuing):
        eta = auto_step(self, "eta", self.AUTO_ETA, state,
                        lambda: mean_sq_norm(X, all_rows=False))
        return opauc(X, y, lam=float(self.lam), eta=eta, n_epochs=n_epochs, cov=self.cov,
                     rank=int(self.rank), shuffle=self.shuffle,
                     random_state=self.random_state, state=state, n_chains=self.n_chains,
                     sync_every=self.sync_every)


@fill_doc(default='"auto"', note=" The first epoch of a fit runs one chain.", combine=(
    ': ' + CHAIN_FRAME + ' (all of ``(w, a, b, alpha)``), the gamma-weighted averages exact, '
    'the counters summed'
))
@model_class(cli="solam")
class SOLAM(_LSModel):
    """SOLAM (Ying, Wen & Lyu 2016) and regSOLAM (``penalty="l2"``, Natole et al. 2019).

    Parameters
    ----------
    zeta : "auto" or float > 0, default "auto"
        Step constant, ``gamma_t = zeta / sqrt(t)`` (the authors' demo: 100 on their scaled
        data; grid 1:9:100). The gradient grows with ``||x||^2``, so "auto" is
        ``5 / mean ||x||^2`` (over a bounded sample of whole chunks), recorded in ``zeta_``.
        Test AUC against the exact LS optimum on spambase, a9a and ijcnn1, standardized or
        scaled to [-1, 1]: within 0.001 on five of the six, 0.025 below on spambase in
        [-1, 1] (where the former default 100 gave 0.24-0.33 on two splits).
    R : float > 0, default 10
        Radius of the ball of ``w`` (demo: 10; grid 10^[-1:5]).
    penalty : {"projection", "l2"}
        SOLAM's projection, or regSOLAM's L2 penalty ``p(1-p) (lam/2) ||w||^2`` (which makes
        its saddle point the minimizer of LS with ``lam``).
    lam : float >= 0, default 0
        regSOLAM's penalty on the LS scale (unused with ``"projection"``).
    variant : {"paper", "authors"}
        ``"paper"``: zero initialization, projection of ``a, b`` onto ``[-R kappa, R kappa]``
        and of ``alpha`` onto ``[-2 R kappa, 2 R kappa]``. ``"authors"``: the authors' code,
        ``w = (R / sqrt(r)) 1``, ``a = b = R``, ``alpha = 2R``, ``a, b <= R`` and
        ``|alpha| <= 2R``.
    kappa : float, optional
        Bound on ``||x||``; default the running maximum over the chunks seen.
    n_epochs : int >= 1, default 15
        The demo makes 15 passes.
    shuffle, random_state : as :class:`TwoPassAUC`.
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Notes
    -----
    Saddle-point SGD on ``F(w, a, b, alpha; z)`` with ``p`` estimated online; output the
    gamma-weighted average of the iterates (:mod:`daskauc.solvers.solam`). Sparse rows: the
    same steps in O(nnz) a row (a lazily scaled iterate and a lazy average, exact;
    docs/sparse.md).

    References
    ----------
    Ying, Wen & Lyu, "Stochastic online AUC maximization", NIPS 2016.
    Natole, Ying & Lyu, "Stochastic AUC optimization algorithms with linear convergence",
    Front. Appl. Math. Stat. 5:30, 2019.
    """

    _params = {"zeta": _auto(solam, "zeta"),
               **params_of(solam, "R", "penalty", "lam", "variant", "kappa"),
               "n_epochs": _EPOCHS, "shuffle": bool}
    _sparse_rows = True

    #: zeta="auto" is this over the mean squared row norm
    AUTO_ZETA = 5.0

    def __init__(self, zeta="auto", *, R: float = 10.0, penalty: str = "projection",
                 lam: float = 0.0, variant: str = "paper", kappa: float | None = None,
                 n_epochs: int = 15, shuffle: bool = True, random_state=None, n_chains="auto",
                 sync_every=None, class_weight=None):
        self.zeta = zeta
        self.R = R
        self.penalty = penalty
        self.lam = lam
        self.variant = variant
        self.kappa = kappa
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    def _run(self, X, y, state, n_epochs, continuing):
        zeta = auto_step(self, "zeta", self.AUTO_ZETA, state,
                         lambda: mean_sq_norm(X, all_rows=False))
        return solam(X, y, zeta=zeta, R=float(self.R), penalty=self.penalty,
                     lam=float(self.lam), variant=self.variant,
                     kappa=None if self.kappa is None else float(self.kappa),
                     n_epochs=n_epochs, shuffle=self.shuffle, random_state=self.random_state,
                     state=state, n_chains=self.n_chains, sync_every=self.sync_every)


@fill_doc(default='"auto"', note=" The first epoch of a fit runs one chain.",
          combine=': ' + CHAIN_FRAME + ', the average exact, the class means fixed')
@model_class(cli="spam")
class SPAM(_LSModel):
    """SPAM-L2 / SPAM-NET (Natole, Ying & Lyu 2018): stochastic proximal AUC maximization.

    Parameters
    ----------
    lam : float >= 0, default 1e-3
        L2 penalty on the LS scale; the paper's ``beta = p (1-p) lam``.
    l1 : float >= 0, default 0
        L1 penalty on the LS scale (``beta1 = p (1-p) l1``); ``l1 > 0`` is SPAM-NET.
    eta : "auto" or float > 0, default "auto"
        Step constant: ``eta / sqrt(t)`` (``schedule="invsqrt"``, the authors' code, ``eta`` =
        their C) or ``eta / (t + 1)`` (``"inverse"``, the O(log T/T) theorem, ``eta = 1/C~``).
        The gradient grows with ``||x||^2``, so "auto" is ``1 / mean ||x||^2`` (from the
        first pass, no extra read; recorded in ``eta_``): a9a scaled to [-1, 1] (``||x||^2
        = 123``) gave 0.9000 test AUC against 0.43-0.62 with the former default 1 (over a
        grid of 1/4 to 16 over mean ||x||^2, 1 was best).
    schedule : {"invsqrt", "inverse"}
    average : bool, default False
        Output the uniform average of the iterates (``True``), or the last iterate (the
        iterate the paper's theorems bound; on a9a with "auto" steps 0.9000 against 0.8992
        averaged, both at 20 epochs).
    n_epochs : int >= 1, default 20
    shuffle, random_state : as :class:`TwoPassAUC`.
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Attributes
    ----------
    center_ : ndarray (d,)
        The point the rows were centred at for the solver: their mean when it dominates
        their spread, else zeros (:mod:`daskauc.estimators._centring`; with ``eta = 1`` the
        iterates overflow on rows around 100). LS is unchanged by a translation of the rows;
        ``coef_`` applies to the rows as given.

    Notes
    -----
    Class means from a first pass (as the authors' code); per row a gradient step on
    ``F(w, a(w), b(w), alpha(w); z)`` with ``alpha(w) = w.(c- - c+)`` (the paper's sign), then
    the proximal map (soft-threshold, then shrink). Output: the uniform average of the
    iterates (or the last one). Objective: ``LS(w) + l1 ||w||_1``
    (:mod:`daskauc.solvers.spam`). Sparse rows (not centred): O(nnz) a row, exact.

    References
    ----------
    Natole, Ying & Lyu, "Stochastic proximal algorithms for AUC maximization", ICML 2018.
    """

    _centre_rows = True
    _params = {**params_of(spam, "lam", "l1"), "eta": _auto(spam, "eta"),
               **params_of(spam, "schedule", "average"), "n_epochs": _EPOCHS, "shuffle": bool}
    _sparse_rows = True
    #: eta="auto" is this over the mean squared row norm
    AUTO_ETA = 1.0

    def __init__(self, lam: float = 1e-3, *, l1: float = 0.0, eta="auto",
                 schedule: str = "invsqrt", average: bool = False, n_epochs: int = 20,
                 shuffle: bool = True, random_state=None, n_chains="auto", sync_every=None,
                 class_weight=None):
        self.lam = lam
        self.l1 = l1
        self.eta = eta
        self.schedule = schedule
        self.average = average
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    def _run(self, X, y, state, n_epochs, continuing):
        means = None
        if state is None:  # the first pass, made here so that "auto" steps see it
            means = class_means(X, y)
        eta = auto_step(self, "eta", self.AUTO_ETA, state, lambda: means.mean_sq_norm)
        return spam(X, y, lam=float(self.lam), l1=float(self.l1), eta=eta,
                    schedule=self.schedule, average=self.average, n_epochs=n_epochs,
                    shuffle=self.shuffle, random_state=self.random_state, state=state,
                    means=means, update_means=continuing, n_chains=self.n_chains,
                    sync_every=self.sync_every)


@fill_doc(default="1", note=(
    " SPDAM stays at one chain by default: two chains lost 0.008 test AUC on standardized "
    "covtype (docs/benchmarks/chains.md)."), combine=(
    ": each chunk's duals from the chain that visited it and ``u`` summed, both exact; "
    "``w`` and ``wbar`` mixed by iterations"
))
@model_class(cli="spdam")
class SPDAM(_LSModel):
    """SPDAM (Natole, Ying & Lyu 2019): stochastic primal-dual, linear convergence to LSAUC.

    Parameters
    ----------
    lam : float > 0, default 1e-3
        L2 penalty of LS (the strong convexity of SPDC's ``g`` is ``lam / 2``).
    batch_size : int >= 1, default 1
        Mini-batch size ``m``. Per epoch, SPDC's guaranteed contraction is
        ``theta^(n/m)``, best at small ``m``; the paper's figures use 10% of n.
    n_epochs : int >= 1, default 10
    R : float, optional
        Bound on the rescaled row norms used by SPDC's step rules; default from the first
        pass.
    shuffle, random_state : as :class:`TwoPassAUC`.
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Notes
    -----
    SPDC (Zhang & Xiao) on ``(1/n) sum_i (w.xbar_i)^2 / 2 + g(w) = (LS(w) - 1)/2`` with
    closed-form dual steps, a Sherman-Morrison primal step and SPDC's sigma, tau, theta
    (:mod:`daskauc.solvers.spdam`). One dual per row: ``partial_fit`` continues on the same
    rows only. Sparse rows: O(nnz) a row, exact (docs/sparse.md).

    References
    ----------
    Natole, Ying & Lyu, "Stochastic AUC optimization algorithms with linear convergence",
    Front. Appl. Math. Stat. 5:30, 2019.
    Zhang & Xiao, "Stochastic primal-dual coordinate method for regularized empirical risk
    minimization", JMLR 18, 2017.
    """

    _params = {**params_of(spdam, "lam", "batch_size"), "n_epochs": _EPOCHS,
               **params_of(spdam, "R"), "shuffle": bool}
    _sparse_rows = True

    def __init__(self, lam: float = 1e-3, *, batch_size: int = 1, n_epochs: int = 10,
                 R: float | None = None, shuffle: bool = True, random_state=None, n_chains=1,
                 sync_every=None, class_weight=None):
        self.lam = lam
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.R = R
        self.shuffle = shuffle
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    def _run(self, X, y, state, n_epochs, continuing):
        return spdam(X, y, lam=float(self.lam), batch_size=int(self.batch_size),
                     n_epochs=n_epochs, shuffle=self.shuffle, random_state=self.random_state,
                     R=None if self.R is None else float(self.R), state=state,
                     n_chains=self.n_chains, sync_every=self.sync_every)


__all__ = ["LSAUC", "TwoPassAUC", "OPAUC", "SOLAM", "SPAM", "SPDAM"]
