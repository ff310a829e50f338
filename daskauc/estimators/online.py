"""Online AUC baselines as scikit-learn estimators: OAM and Uni-Exp / Uni-Squ.

Objectives and updates: docs/algorithms.md, "Online pairwise hinge: OAM" and "Univariate
baselines".
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from .._docs import CHAIN_FRAME, fill_doc
from .._labels import check_X_y, classes_arg, pm1_known
from .._params import Interval, Options, check_params, params_checked, params_of, seed_sequence
from .._registry import model_class
from .._validation import as_row_chunked, check_n_features, set_features_in
from ..composite.calibration import check_class_weight
from ..solvers._result import SolverResult
from ..solvers.oam import oam
from ..solvers.univariate import univariate_sgd
from ._base import LinearAUCModel
from ._centring import auto_step, mean_sq_norm
from ._checkpoint import open_checkpoint


class _OnlineAUCModel(LinearAUCModel):
    """fit / partial_fit shared by the online estimators (subclasses define the solver)."""

    _params: dict = {}
    #: both solvers read CSR chunks, O(non-zeros) per row (docs/sparse.md)
    _sparse_rows = True

    def _solve(self, X, y, *, n_epochs, state, validation) -> SolverResult:  # pragma: no cover
        raise NotImplementedError

    def _check(self) -> None:
        check_params(self, self._params)
        seed_sequence(self.random_state)  # TypeError for a bad random_state

    def fit(self, X, y=None, *, checkpoint=None, resume: bool = False):
        """Run ``n_epochs`` passes from scratch.

        Parameters
        ----------
        X : array-like, dask array or dataset store path, shape (n, d).
        y : labels with two values (the larger is positive), or None with a store path.
        checkpoint : path or URL, optional
            Save the model with its solver state after every epoch. The path may hold
            nothing or a checkpoint of this class, which a fit without ``resume`` replaces;
            anything else is refused before any work
            (:func:`daskauc.estimators._checkpoint.open_checkpoint`).
        resume : bool
            Continue from ``checkpoint`` when it holds a checkpoint of this estimator (of the
            same parameters and data, and no more epochs than ``n_epochs``).

        Returns
        -------
        self
        """
        self._check()
        checkpoint = open_checkpoint(self, checkpoint, X, y, resume=resume)
        Xd, yd, classes = check_X_y(X, y)
        check_class_weight(self.class_weight, classes)
        set_features_in(self, X, Xd.shape[1])
        rows = self._solver_rows(Xd, X, first=True)

        def run(state, n_epochs):
            with params_checked():
                return self._solve(rows, yd, n_epochs=n_epochs, state=state,
                                   validation=(Xd, yd) if self.record_auc else None)

        self._fit_epochs(run, self.n_epochs, classes, Xd.shape[1], checkpoint=checkpoint,
                         calibrate=lambda: self._calibrate_linear(Xd, yd, X))
        return self

    def partial_fit(self, X, y, classes=None):
        """One pass over ``X``, continuing from the current state (or starting one).

        Parameters
        ----------
        X : array-like or dask array, shape (n, d).
        y : labels; after the first call (or with ``classes``) a batch may hold one class.
        classes : the two label values, needed on the first call only when ``y`` does not
            hold both.

        Returns
        -------
        self
        """
        self._check()
        state = self._state_to_continue()
        if state is None and classes is None:
            Xd, yd, classes_ = check_X_y(X, y)
            check_class_weight(self.class_weight, None)
            history = []
            set_features_in(self, X, Xd.shape[1])
        else:
            classes_ = self.classes_ if state is not None else classes_arg(classes)
            Xd = as_row_chunked(X, sparse=True)
            if state is not None:
                check_n_features(Xd.shape, self.n_features_in_, type(self).__name__)
            else:
                set_features_in(self, X, Xd.shape[1])
            if isinstance(y, da.Array):
                yd = y.rechunk((Xd.chunks[0],)).map_blocks(
                    pm1_known, classes_, dtype=np.int8, token="daskauc-labels")
            else:
                y_arr = np.asarray(y)
                if y_arr.shape[0] != Xd.shape[0]:
                    raise ValueError(
                        f"X has {Xd.shape[0]} rows but y has {y_arr.shape[0]} labels; "
                        "they must match"
                    )
                yd = da.from_array(pm1_known(y_arr, classes_), chunks=(Xd.chunks[0],),
                                   name=False)
            history = list(getattr(self, "history_", []))
        rows = self._solver_rows(Xd, X, first=state is None)
        with params_checked():
            result = self._solve(rows, yd, n_epochs=1, state=state,
                                 validation=(Xd, yd) if self.record_auc else None)
        self._set_result(result, classes_, Xd.shape[1])
        self.history_ = history + self.history_
        self._calibrate_linear(Xd, yd, X, batch=True)
        return self


@fill_doc(default='"auto"', note='', combine=(
    ': ``w`` mixed by rows, the average exact, the reservoirs merged into uniform samples'
    ' of all rows seen'
))
@model_class(cli="oam")
class OAM(_OnlineAUCModel):
    """Online AUC maximization with reservoir buffers (OAMseq / OAMgra).

    Linear scores ``X @ coef_``; on a Nystroem embedding this is the "NOAM" baseline of
    Khalid et al.

    Parameters
    ----------
    C : float, default=1.0
        Penalty of the pairwise hinge.
    buffer_size : int, default=100
        Reservoir size K of each class.
    update : {"seq", "gra"}, default="seq"
        Sequential passive-aggressive steps per buffered row (OAMseq) or one gradient step
        over the violating buffered rows (OAMgra).
    eta : float, default=0.5
        Step size of OAMgra (unused by OAMseq); 0.5 caps a pair's step at ``c_t / 2`` as
        OAMseq does.
    average : bool, default=False
        Use the uniform average of the iterates (one per row) instead of Zhao et al.'s last
        iterate.
    n_epochs : int, default=1
        Passes over the data in ``fit`` (``partial_fit`` makes one).
    shuffle : bool, default=True
        Random chunk order and random row order inside each chunk, every epoch.
    record_auc : bool, default=False
        Record the training AUC in ``history_`` after every epoch (one extra pass each; with
        ``partial_fit``, the AUC on the batch, which must then hold both classes).
    random_state : None, int or numpy Generator, default=None
        Seed of every random choice (orders and reservoir decisions).
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Attributes
    ----------
    coef_ : ndarray (d,)
        The last iterate ``w`` (or the average, with ``average``).
    classes_ : ndarray (2,)
        ``[negative, positive]`` label values.
    n_iter_ : int
        Epochs run so far.
    history_ : list of dict
        Per epoch: ``epoch``, ``rows`` seen, ``seconds`` and (``record_auc``) ``auc``.
    intercept_, calibration_slope_ : float
        The Platt calibration of ``X @ coef_`` (see :class:`daskauc.RankSVM`); ``partial_fit``
        refits it on its batch (and keeps it for a batch of one class).
    n_features_in_, feature_names_in_, input_map_sha256_ : as every daskauc model.

    Notes
    -----
    Objective ``(1/2)||w||^2 + C sum_{i in P, j in N} max(0, 1 - w.(x_i - x_j))``, met online:
    row ``t`` pays ``c_t sum_{x in B} max(0, 1 - y_t w.(x_t - x))`` against the buffer ``B``
    of the other class, ``c_t = C max(1, N_t / K)`` with ``N_t`` rows of that class seen.
    OAMseq: ``tau = min(c_t / 2, hinge / ||x_t - x||^2)``, ``w += tau y_t (x_t - x)`` for each
    ``x`` in turn; OAMgra: ``w += eta c_t y_t sum_{hinge > 0} (x_t - x)``. Then ``x_t``
    enters its class's reservoir with probability ``min(1, K / k)`` (the ``k``-th row of its
    class). See :func:`daskauc.solvers.oam.oam`.

    The last iterate is noisy: on ijcnn1 (LIBSVM features, one epoch, K = 100, mean of 3
    seeds) OAMseq's test AUC was 0.77-0.85 for C in {2^-10, 2^-7, 2^-4, 2^-1}, and 0.898
    (C = 1) to 0.906 (C = 2^-10) with ``average=True``; Natole et al. report 0.921 for OAMseq
    with C chosen by cross-validation.

    References
    ----------
    Zhao, Hoi, Jin & Yang, "Online AUC Maximization", ICML 2011.
    Khalid, Ray & Chitsaz, "Scalable Nonlinear AUC Maximization Methods" (NOAM).
    """

    def __init__(self, C: float = 1.0, *, buffer_size: int = 100, update: str = "seq",
                 eta: float = 0.5, average: bool = False, n_epochs: int = 1,
                 shuffle: bool = True, record_auc: bool = False, random_state=None,
                 n_chains="auto", sync_every=None, class_weight=None):
        self.C = C
        self.buffer_size = buffer_size
        self.update = update
        self.eta = eta
        self.average = average
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.record_auc = record_auc
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    _params = {
        **params_of(oam, "C", "update", "eta", "average", "shuffle"),
        "buffer_size": Interval(int, 1),
        "n_epochs": Interval(int, 1),
        "record_auc": bool,
    }

    def _solve(self, X, y, *, n_epochs, state, validation) -> SolverResult:
        return oam(X, y, C=float(self.C), buffer_size=int(self.buffer_size), update=self.update,
                   eta=float(self.eta), average=self.average, n_epochs=n_epochs,
                   shuffle=self.shuffle, random_state=self.random_state, state=state,
                   validation=validation, n_chains=self.n_chains,
                   sync_every=self.sync_every)


@fill_doc(default='"auto"', note=" The first epoch of a fit runs one chain.",
          combine=(': ' + CHAIN_FRAME + ' (``w`` and ``b``), the averages exact, the counters '
                   'summed'))
@model_class(cli={"uni-exp": {"loss": "exp"}, "uni-squ": {"loss": "square"}})
class UnivariateAUC(_OnlineAUCModel):
    """Online SGD on the class-weighted univariate exponential or squared loss.

    Parameters
    ----------
    loss : {"exp", "square"}, default="exp"
        ``exp(-y s)`` (Uni-Exp) or ``(1 - y s)^2`` (Uni-Squ), ``s = w.x + b``.
    lam : float, default=0.0
        L2 penalty ``(lam/2)||w||^2``.
    eta0 : "auto" or float > 0, default="auto"
        Step size: ``eta0 / sqrt(t)`` or constant, by ``schedule``. The gradient grows with
        ``||x||^2 + 1`` (the row with the offset's 1), so "auto" is
        ``0.2 / (1 + mean ||x||^2)`` over the rows the solver sees (centred, if they are),
        recorded in ``eta0_``: on spambase, a9a and ijcnn1,
        standardized or scaled to [-1, 1], it never diverged, where the former default 0.01
        diverged on standardized spambase.
    schedule : {"invsqrt", "constant"}, default="invsqrt"
        Step size schedule.
    n_epochs : int, default=5
        Passes over the data in ``fit`` (``partial_fit`` makes one).
    average : bool, default=True
        Use the uniform average of the iterates (else the last iterate).
    shuffle : bool, default=True
        Random chunk order and random row order inside each chunk, every epoch.
    record_auc : bool, default=False
        Record the training AUC in ``history_`` after every epoch (one extra pass each).
    random_state : None, int or numpy Generator, default=None
        Seed of the chunk and row orders.
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Attributes
    ----------
    coef_ : ndarray (d,)
        ``w`` (averaged or last).
    offset_ : float
        The learned offset ``b`` (averaged or last); it does not enter
        ``decision_function``, whose ``intercept_`` comes from the calibration.
    center_ : ndarray (d,)
        The point the rows were centred at for the solver: their mean when it dominates
        their spread (rows far from the origin, where SGD on the raw rows overflows), else
        zeros (:mod:`daskauc.estimators._centring`). The objective does not change (the
        offset absorbs a translation); ``coef_`` and ``offset_`` apply to the rows as given.
    classes_, n_iter_, history_, intercept_, calibration_slope_ : as for :class:`OAM`
        (``history_`` rows have ``steps``).

    Notes
    -----
    Objective, ``p`` the fraction of positives:
    ``(1/n) sum_i [1(y_i = 1)/p + 1(y_i = -1)/(1 - p)] l(y_i (w.x_i + b)) + (lam/2)||w||^2``
    with ``p`` estimated online (``p_t`` = positives among the rows seen so far). With the
    unpenalized offset, the exponential loss's minimizer over ``w`` is the pairwise
    exponential loss's, and the squared loss's is parallel to the least-squares AUC optimum.
    See :func:`daskauc.solvers.univariate.univariate_sgd`.

    References
    ----------
    Kotlowski, Dembczynski & Huellermeier, "Bipartite Ranking through Minimization of
    Univariate Loss", ICML 2011.
    """

    _centre_rows = True

    #: eta0="auto" is this over the mean squared row norm
    AUTO_ETA0 = 0.2

    def __init__(self, loss: str = "exp", *, lam: float = 0.0, eta0="auto",
                 schedule: str = "invsqrt", n_epochs: int = 5, average: bool = True,
                 shuffle: bool = True, record_auc: bool = False, random_state=None,
                 n_chains="auto", sync_every=None, class_weight=None):
        self.loss = loss
        self.lam = lam
        self.eta0 = eta0
        self.schedule = schedule
        self.n_epochs = n_epochs
        self.average = average
        self.shuffle = shuffle
        self.record_auc = record_auc
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    _params = {
        **params_of(univariate_sgd, "loss", "lam", "schedule", "average", "shuffle"),
        "eta0": [Options("auto"), univariate_sgd.params["eta0"]],
        "n_epochs": Interval(int, 1),
        "record_auc": bool,
    }

    def _solve(self, X, y, *, n_epochs, state, validation) -> SolverResult:
        eta0 = auto_step(self, "eta0", self.AUTO_ETA0, state,
                         lambda: 1.0 + mean_sq_norm(X, all_rows=False))
        return univariate_sgd(X, y, loss=self.loss, lam=float(self.lam), eta0=eta0,
                              schedule=self.schedule, average=self.average, n_epochs=n_epochs,
                              shuffle=self.shuffle, random_state=self.random_state,
                              state=state, validation=validation, n_chains=self.n_chains,
                              sync_every=self.sync_every)

    def _set_result(self, result, classes, n_features: int) -> None:
        super()._set_result(result, classes, n_features)
        b = float(result.state.offset[1 if self.average else 0])
        self.offset_ = b - float(self.coef_ @ getattr(self, "center_", np.zeros_like(self.coef_)))


