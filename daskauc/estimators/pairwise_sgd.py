"""Linear pairwise hinge SGD estimator (the solver of NSAUC and NSVMSGD2)."""

from __future__ import annotations

from .._docs import CHAIN_FRAME, fill_doc
from .._labels import check_X_y
from .._params import Interval, check_params, params_checked, params_of
from .._registry import model_class
from .._validation import check_n_features, set_features_in
from ..composite.calibration import check_class_weight
from ..solvers.nsauc import pairwise_hinge_sgd
from ._base import LinearAUCModel
from ._checkpoint import open_checkpoint


@fill_doc(default='"auto"', note=" The first epoch of a fit runs one chain.", combine=(
    ": " + CHAIN_FRAME + ", the averages merged exactly"
))
@model_class(cli="pairwise-hinge")
class PairwiseHingeSGD(LinearAUCModel):
    """Stochastic pairwise hinge AUC maximization streaming row chunks (SAUC / SVMSGD2).

    Parameters
    ----------
    lam : float, default=1e-8
        L2 regularization. Khalid et al. choose it from {1e-10, ..., 1e-7} by 3-fold CV.
    n_epochs : int, default=5
        Epochs of ``n`` pair steps each; ``partial_fit`` runs one more.
    average : bool, default=True
        Return the scheduled average of the iterates (SAUC, Algorithm 3) or the last
        iterate (SVMSGD2).
    rskip, askip : int, default=16
        Apply the regularization shrink every ``rskip`` steps and update the average every
        ``askip`` steps.
    average_start : int, default=0
        Steps before averaging starts.
    t0 : float or None, default=None
        Step offset in ``eta_t = 1/(lam (t + t0))``; None searches eta0 as SVMSGD2 does on
        ``eta0_pairs`` pairs and sets ``t0 = 1/(lam eta0)``.
    eta0_pairs : int, default=1000
    shuffle : bool, default=True
        Visit the chunks in a new random order every epoch.
    random_state : int, Generator or None
    %(n_chains)s
    %(sync_every)s
    %(class_weight)s

    Attributes
    ----------
    coef_ : ndarray (n_features,)
    classes_ : ndarray, [negative, positive] raw labels
    n_iter_ : int, epochs run
    history_ : list of dict, one per epoch (seconds, steps, optional val_auc)
    t0_ : float, the step offset used
    intercept_, calibration_slope_ : float
        The Platt calibration of ``X @ coef_`` (see :class:`daskauc.RankSVM`); ``partial_fit``
        refits it on its batch.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, when ``X`` was a dataframe with string column names.
    input_map_sha256_ : str, when ``X`` was an embedding store: the digest of its map, which
        scoring checks (rows of another map are refused).

    Notes
    -----
    Objective ``(lam/2)||w||^2 + (1/(n+ n-)) sum_{i in P, j in N} max(0, 1 - w.(x_i - x_j))``.
    Each visit of a chunk pairs its rows with rows of the other class from the chunk itself
    and from a sample of the last chunks visited (a window of at most 8 chunks), with the
    steps scaled so that every positive-negative pair of the data is drawn equally often in
    expectation whatever the row order: see :mod:`daskauc.solvers.nsauc` and
    docs/algorithms.md, "Pairwise hinge SGD: NSAUC and NSVMSGD2".

    References
    ----------
    Khalid, Ray & Chitsaz, "Scalable Nonlinear AUC Maximization Methods", Algorithm 3.
    Bordes, Bottou & Gallinari, "SGD-QN: Careful quasi-Newton stochastic gradient descent", 2009.
    """

    _params = {**params_of(pairwise_hinge_sgd), "n_epochs": Interval(int, 1)}
    #: its solver reads CSR chunks, O(non-zeros) per step (docs/sparse.md)
    _sparse_rows = True

    def __init__(self, lam=1e-8, *, n_epochs=5, average=True, rskip=16, askip=16,
                 average_start=0, t0=None, eta0_pairs=1000, shuffle=True, random_state=None,
                 n_chains="auto", sync_every=None, class_weight=None):
        self.lam = lam
        self.n_epochs = n_epochs
        self.average = average
        self.rskip = rskip
        self.askip = askip
        self.average_start = average_start
        self.t0 = t0
        self.eta0_pairs = eta0_pairs
        self.shuffle = shuffle
        self.random_state = random_state
        self.n_chains = n_chains
        self.sync_every = sync_every
        self.class_weight = class_weight

    def _solver_kwargs(self):
        return dict(lam=float(self.lam), average=self.average, rskip=int(self.rskip),
                    askip=int(self.askip), average_start=int(self.average_start),
                    t0=self.t0, eta0_pairs=int(self.eta0_pairs), shuffle=self.shuffle,
                    random_state=self.random_state, n_chains=self.n_chains,
                    sync_every=self.sync_every)

    def fit(self, X, y=None, *, validation=None, callback=None, checkpoint=None,
            resume: bool = False):
        """Fit on ``X`` (numpy, dask, or a dataset/embedding store path with ``y=None``).

        ``checkpoint`` (a path or URL): save the model with its solver state after every
        epoch; ``resume=True`` continues from it (see :ref:`checkpoints <checkpoints>`). The
        path may hold nothing or a checkpoint of this class, which a fit without ``resume``
        replaces; anything else is refused before any work
        (:func:`daskauc.estimators._checkpoint.open_checkpoint`).
        """
        check_params(self, self._params)
        checkpoint = open_checkpoint(self, checkpoint, X, y, resume=resume)
        Xd, yd, classes = check_X_y(X, y)
        check_class_weight(self.class_weight, classes)
        set_features_in(self, X, Xd.shape[1])

        def run(state, n_epochs):
            with params_checked():
                return pairwise_hinge_sgd(Xd, yd, n_epochs=n_epochs, state=state,
                                          validation=validation, callback=callback,
                                          **self._solver_kwargs())

        self._fit_epochs(run, int(self.n_epochs), classes, Xd.shape[1], checkpoint=checkpoint,
                         after=self._set_t0,
                         calibrate=lambda: self._calibrate_linear(Xd, yd, X))
        return self

    def _set_t0(self, result) -> None:
        self.t0_ = float(result.state.t0)

    def partial_fit(self, X, y=None, classes=None):
        """Run one more epoch over ``X`` continuing from the current state.

        ``classes`` (the two raw label values) is accepted for scikit-learn compatibility;
        when given on the first call, the larger is positive. The calibration is refitted on
        this batch (kept when the batch holds one class).
        """
        check_params(self, self._params)
        state = self._state_to_continue()
        pos_label = None
        if hasattr(self, "classes_"):
            pos_label = self.classes_[1]
        elif classes is not None:
            pos_label = sorted(classes)[-1]
        Xd, yd, found = check_X_y(X, y, pos_label=pos_label)
        check_class_weight(self.class_weight, None)
        if state is None:
            set_features_in(self, X, Xd.shape[1])
        else:
            check_n_features(Xd.shape, self.n_features_in_, type(self).__name__)
        with params_checked():
            result = pairwise_hinge_sgd(Xd, yd, n_epochs=1, state=state,
                                        **self._solver_kwargs())
        history = list(getattr(self, "history_", [])) + list(result.history)
        self._set_result(result, getattr(self, "classes_", found), Xd.shape[1])
        self.history_ = history
        self.t0_ = float(result.state.t0)
        self._calibrate_linear(Xd, yd, X, batch=True)
        return self
