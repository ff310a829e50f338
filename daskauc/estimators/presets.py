"""The papers' methods as single estimators: a feature map plus a linear AUC solver.

``NSAUC = StandardScaler -> KMeansNystroem -> PairwiseHingeSGD(average=True)`` and so on. Unlike
a scikit-learn ``Pipeline`` of the same steps, a preset materializes the embedding once —
persisted in memory (numpy / the cluster) or, with ``embedding_store``, written to Zarr and
streamed from there — so the solver's epochs or Newton iterations never recompute the map.

Defaults follow Khalid et al.: 1600 k-means landmarks (fewer on fewer than 9 features, where
the kernel tells fewer apart: :func:`daskauc.embed.nystroem.auto_landmarks`), Gaussian
kernel with gamma = 1/b (b the
mean squared distance to the mean over the first 80,000 rows), standardized features.

Sparse rows (a scipy sparse matrix, a dask array of CSR blocks, a sparse store) are read as
their non-zeros by the scaler and the map, and the embedding is dense (n x r). "Standardized"
then means scaled, not centred (``StandardScaler(with_mean=False)``, as scikit-learn does for
sparse input): the Gaussian kernel depends on differences of rows only, so the map is the
same as on centred rows, up to rounding. The landmarks are dense (``v x d`` float64, at most
2 GiB: :data:`daskauc.embed.sparse_rows.MAX_CENTRE_BYTES`).
"""

from __future__ import annotations

import logging
import time

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._compute import compute
from .._docs import fill_doc
from .._labels import check_X_y, classes_arg, pm1_known
from .._registry import model_class
from .._sparse import is_sparse_dask
from .._validation import (
    as_row_chunked,
    check_predict_X,
    is_lazy_input,
    is_store_path,
    set_features_in,
    without_finite_check,
)
from ..composite.calibration import check_class_weight, pm1_class_weight
from ..composite.pipeline import embed_training, fit_on_embedding, scaled
from ..embed.nystroem import DEFAULT_LANDMARKS, KMeansNystroem
from ..model_selection.c_path import check_selectable, class_counts
from ._base import AUCScoreMixin
from ._checkpoint import feature_map_token, open_checkpoint
from .least_squares import SOLAM
from .online import OAM
from .pairwise_sgd import PairwiseHingeSGD
from .ranksvm import RankSVM

logger = logging.getLogger("daskauc")

#: parameters every preset shares, and their meaning (documented once, here).
EMBEDDING_PARAMS = ("n_landmarks", "gamma", "landmarks", "kmeans_epochs", "standardize",
                    "dtype", "embedding_store", "overwrite", "persist")

_EMBEDDING_DOC = """
    n_landmarks : int or "auto", default="auto"
        Landmarks (k-means centroids) of the Nystroem map. "auto": the paper's 1600, or the
        training rows when fewer, or on fewer than 9 features as many as the kernel tells
        apart at the default gamma (125 for 3 features; :func:`daskauc.embed.nystroem.
        auto_landmarks`); for random Fourier features (RFAUC) "auto" is 1600.
    gamma : float or None, default=None
        Gaussian kernel width, kappa(x, z) = exp(-gamma ||x - z||^2); None uses the paper's
        rule gamma = 1/b, b = mean ||x_i - xbar||^2 over the first 80,000 rows.
    landmarks : {"kmeans", "random", "all"}, default="kmeans"
        How landmarks are chosen; "all" makes every training row a landmark (exact kernel).
    kmeans_epochs : int, default=3
    standardize : bool or "auto", default="auto"
        Standardize features (fitted on the training rows) before the map. "auto": dense
        rows are standardized, sparse rows used as they are (dividing each column of TF-IDF
        rows by its spread blows up rare words and every document ends up as far from every
        other: NSAUC on 20 Newsgroups, test AUC 0.921 standardized, 0.980 not). True on
        sparse rows scales them without centring (``StandardScaler(with_mean=False)``).
    dtype : {"float32", "float64"}, default="float32"
        Dtype of the embedding.
    embedding_store : str or None, default=None
        Write the training embedding to this Zarr store and stream it from there (for
        embeddings larger than memory); None keeps it in memory.
    overwrite : bool, default=False
        Allow replacing an existing ``embedding_store``.
    persist : bool, default=True
        Keep the embedding in (cluster) memory while the solver runs, when it is not written
        to a store. With a store, ``persist=True`` also loads it into memory once."""


class EmbeddedAUCModel(AUCScoreMixin, ClassifierMixin, TransformerMixin, BaseEstimator):
    """Base of the presets: a standardized Nystroem embedding plus a linear solver.

    Subclasses set ``_solver`` (the linear estimator class), ``_solver_params`` (names of their
    parameters passed to it) and ``_feature_map`` ("nystroem" or "fourier").

    A preset is a classifier (``decision_function``, ``predict``, ``predict_proba``, ``score``
    as the AUC) and a transformer (``transform`` gives the embedding). Its scores are the
    solver's on the embedding, calibrated by the solver at the end of the fit (Platt scaling,
    :class:`daskauc.estimators._base.LinearAUCModel`): on every row for numpy input, on a
    bounded sample of chunks otherwise. ``predict`` takes the more probable class; for
    another threshold use scikit-learn's ``TunedThresholdClassifierCV`` or
    ``FixedThresholdClassifier`` around the preset.

    Attributes
    ----------
    scaler_ : StandardScaler or None
    embedding_ : KMeansNystroem or RandomFourierFeatures
        The fitted map; ``embedding_.n_components_`` is the width of ``transform``.
    solver_ : the fitted linear estimator on the embedding.
    coef_, intercept_, calibration_slope_ : the solver's (read-only views).
    n_iter_ : int, the solver's epochs or Newton steps.
    classes_ : ndarray, ``[negative, positive]`` label values.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, when ``X`` was a dataframe with string column names.
    history_ : list of dict, the solver's record.
    timings_ : dict, seconds per stage (scale, landmarks, embed, solve).
    C_, selection_ : the solver's, when it has them (NBAUC and RFAUC: the C used, and the
        path ``C="auto"`` chose it on).
    """

    _solver: type
    _solver_params: tuple[str, ...] = ()
    _solver_fixed: dict = {}
    _feature_map = "nystroem"
    #: the scaler and the map read sparse rows; the solver sees the dense embedding
    _sparse_rows = True

    # -- the pieces -------------------------------------------------------------------------
    def _make_map(self):
        if self._feature_map == "fourier":
            from ..embed.fourier import RandomFourierFeatures

            n_features = DEFAULT_LANDMARKS if self.n_landmarks == "auto" else self.n_landmarks
            return RandomFourierFeatures(n_components=n_features, gamma=self.gamma,
                                         random_state=self._seed(0), dtype=self.dtype)
        n_landmarks = self.n_landmarks if self.n_landmarks is not None else self._n_train_rows
        return KMeansNystroem(n_components=n_landmarks, gamma=self.gamma,
                              landmarks=self.landmarks, kmeans_epochs=self.kmeans_epochs,
                              dtype=self.dtype, random_state=self._seed(0))

    def linear_model(self, classes=None):
        """The linear model this preset fits on its embedding, unfitted, with the preset's
        parameters (``daskauc fit`` fits it on an embedding store). It learns the labels as
        {-1, +1}: a class weight given by the raw ``classes`` is passed on by -1 and +1 (as
        given without ``classes``: a model only looked at, as a checkpoint's class)."""
        params = {name: getattr(self, name) for name in self._solver_params}
        params.update(self._solver_fixed)
        params["class_weight"] = pm1_class_weight(self.class_weight, classes)
        if "random_state" in self._solver.__init__.__code__.co_varnames:
            params["random_state"] = self._seed(1)
        return self._solver(**params)

    def _seed(self, k: int):
        rs = self.random_state
        if rs is None or isinstance(rs, (int, np.integer)):
            return None if rs is None else int(np.random.SeedSequence(rs).generate_state(k + 1)[k])
        return rs

    # -- estimator API ----------------------------------------------------------------------
    def fit(self, X, y=None, *, checkpoint=None, resume: bool = False, **solver_fit_kwargs):
        """Fit scaler, feature map and solver; ``X`` may be a dataset store path (``y=None``).

        ``checkpoint`` / ``resume`` go to the solver (its model, with its state, is saved
        there after every epoch or Newton step); the path is checked before anything is
        fitted (:func:`daskauc.estimators._checkpoint.open_checkpoint`: it may hold nothing or
        a checkpoint of the solver's class, which a fit without ``resume`` replaces), and a
        resumed checkpoint must be of the same data and, once the embedding is fitted again,
        of the same feature map (an integer ``random_state`` makes it so). Other keywords go
        to the solver's ``fit``.
        """
        timings = {}
        tic = time.perf_counter()
        checkpoint = open_checkpoint(self, checkpoint, X, y, resume=resume)
        Xd, yd, classes = check_X_y(X, y)
        check_class_weight(self.class_weight, classes)
        solver = self.linear_model(classes)
        if isinstance(getattr(solver, "C", None), str):  # C="auto": enough rows to choose C?
            check_selectable(*class_counts(y, yd, classes))
        if checkpoint is not None:
            solver_fit_kwargs["checkpoint"] = checkpoint
        set_features_in(self, X, Xd.shape[1])
        name = type(self).__name__
        n, d = (int(v) for v in Xd.shape)
        if _standardizes(self.standardize, Xd):
            logger.info("%s: standardizing %d features over %d rows", name, d, n)
            self.scaler_ = _fit_scaler(Xd)
        else:
            self.scaler_ = None
        timings["scale"] = time.perf_counter() - tic

        tic = time.perf_counter()
        self._n_train_rows = n
        fmap = self._make_map()
        logger.info("%s: %s", name, _map_plan(fmap, n))
        fmap.fit(scaled(Xd, self.scaler_))
        self.embedding_ = fmap
        if checkpoint is not None:
            checkpoint.add_feature_map(feature_map_token(self.scaler_, fmap))
        timings["landmarks"] = time.perf_counter() - tic

        tic = time.perf_counter()
        width = int(getattr(fmap, "n_components_", 0) or 0)
        logger.info("%s: the feature map is fitted in %.1f s (%d features); embedding %d "
                    "rows%s%s", name, timings["landmarks"], width, n,
                    f" into {self.embedding_store}" if self.embedding_store else "",
                    " (kept in memory)" if self.persist else "")
        Z = embed_training(Xd, yd, feature_map=fmap, scaler=self.scaler_,
                           store=self.embedding_store, overwrite=self.overwrite,
                           persist_rows=bool(self.persist))
        timings["embed"] = time.perf_counter() - tic
        logger.info("%s: embedding ready in %.1f s; fitting %s on it", name, timings["embed"],
                    type(solver).__name__)

        tic = time.perf_counter()
        self.solver_ = fit_on_embedding(solver, Z, yd, all_rows=not is_lazy_input(X),
                                        **solver_fit_kwargs)
        # what the solver chose (C="auto", its selection path): on the model, as documented
        for name in ("C_", "selection_"):
            if hasattr(solver, name):
                setattr(self, name, getattr(solver, name))
        timings["solve"] = time.perf_counter() - tic
        self.classes_ = np.asarray(classes)
        self.n_iter_ = int(getattr(solver, "n_iter_", 0))
        self.timings_ = timings
        self.history_ = list(getattr(solver, "history_", []))
        return self

    def partial_fit(self, X, y=None, classes=None):
        """Learn from one more batch (a stream of batches, dask-ml's ``Incremental``).

        On the first call the scaler and the feature map are fitted on this batch (with at
        most as many landmarks as it has rows) and then kept fixed; every call passes the
        batch's embedding to the solver's ``partial_fit``: one more epoch for the stochastic
        solvers, one more averaged batch solution for the Newton presets
        (:meth:`daskauc.RankSVM.partial_fit`). ``classes`` (the two label values) is needed on
        the first call when that batch does not hold both (the stochastic solvers; the
        Newton presets need both in every batch). ``X`` may be a dataset store path
        (``y=None``).
        """
        if is_store_path(X) and y is None:
            from ..store.dataset import open_dataset

            ds = open_dataset(X)
            X, y = ds.X, ds.y
        if y is None:
            raise ValueError("y is required: pass labels, or a dataset store path as X")
        first = not hasattr(self, "solver_")
        if first:
            Xd = as_row_chunked(X, sparse=True)
            set_features_in(self, X, Xd.shape[1])
            self.scaler_ = _fit_scaler(Xd) if _standardizes(self.standardize, Xd) else None
            self._n_train_rows = int(Xd.shape[0])
            fmap = self._make_map()
            if getattr(fmap, "n_components", None) not in (None, "auto"):  # auto: <= rows
                fmap.set_params(n_components=min(int(fmap.n_components), int(Xd.shape[0])))
            self.embedding_ = fmap.fit(scaled(Xd, self.scaler_))
            self.timings_ = {}
            if classes is None:
                seen = np.unique(np.asarray(compute(y)[0] if isinstance(y, da.Array) else y))
                if seen.size != 2:
                    raise ValueError(
                        f"the first batch holds the labels {seen.tolist()[:5]}; pass "
                        "classes=[negative, positive] on the first partial_fit call")
                classes = seen
            self.classes_ = classes_arg(classes)
            self.solver_ = self.linear_model(self.classes_)
        Z = self.transform(X)
        # the solver learns {-1, +1} labels (as in fit); the caller's are mapped by classes_
        if isinstance(y, da.Array):
            y = y.rechunk((Z.chunks[0],)) if isinstance(Z, da.Array) else compute(y)[0]
        if isinstance(y, da.Array):
            y_pm1 = y.map_blocks(pm1_known, self.classes_, dtype=np.int8,
                                 token="daskauc-labels")
        else:
            y_pm1 = pm1_known(np.asarray(y), self.classes_)
        self.solver_.partial_fit(Z, y_pm1, classes=[-1, 1])
        self.n_iter_ = int(getattr(self.solver_, "n_iter_", 0))
        self.history_ = list(getattr(self.solver_, "history_", []))
        return self

    def transform(self, X):
        """The embedding of ``X`` (standardized then mapped): numpy or lazy dask like the input."""
        check_is_fitted(self, "embedding_")
        Xv = check_predict_X(self, X)
        if isinstance(Xv, da.Array):  # the map (or the scaler) checks the values as it reads
            Xv = without_finite_check(Xv)
        return self.embedding_.transform(scaled(Xv, self.scaler_))

    def decision_function(self, X):
        """Calibrated scores of ``X`` (the solver's on the embedding, float64): numpy for
        numpy input, a lazy dask array for dask or a store path."""
        check_is_fitted(self, "solver_")
        return self.solver_.decision_function(self.transform(X))

    @property
    def coef_(self):
        return self.solver_.coef_

    @property
    def intercept_(self):
        return self.solver_.intercept_

    @property
    def calibration_slope_(self):
        return self.solver_.calibration_slope_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:  # transform's output has the dtype parameter's type, whatever the input's
            tags.transformer_tags.preserves_dtype = [np.dtype(self.dtype).name]
        except TypeError:
            pass
        return tags


def _fit_scaler(Xd):
    """The preset's scaler fitted on the training rows: centring and scaling, or on sparse
    rows scaling only (centring would make them dense)."""
    from ..data.scale import StandardScaler

    return StandardScaler(with_mean=not is_sparse_dask(Xd)).fit(Xd)


def _standardizes(standardize, Xd: da.Array) -> bool:
    """Whether a preset standardizes ``Xd`` (``standardize="auto"``: dense rows only)."""
    if isinstance(standardize, str):
        if standardize != "auto":
            raise ValueError(f"standardize must be True, False or 'auto'; got {standardize!r}")
        return not is_sparse_dask(Xd)
    return bool(standardize)


def _init_embedding(self, n_landmarks, gamma, landmarks, kmeans_epochs, standardize, dtype,
                    embedding_store, overwrite, persist, random_state):
    self.n_landmarks = n_landmarks
    self.gamma = gamma
    self.landmarks = landmarks
    self.kmeans_epochs = kmeans_epochs
    self.standardize = standardize
    self.dtype = dtype
    self.embedding_store = embedding_store
    self.overwrite = overwrite
    self.persist = persist
    self.random_state = random_state


@fill_doc()
@model_class(cli="nsauc")
class NSAUC(EmbeddedAUCModel):
    __doc__ = f"""NSAUC: k-means Nystroem embedding + averaged pairwise hinge SGD (Khalid et al.).

    Parameters
    ----------
    lam : float, default=1e-8
        L2 regularization; the paper's grid is {{1e-10, ..., 1e-7}} (on ijcnn1 every value
        of it gives the same test AUC within 0.0001: the eta0 search makes the step nearly
        constant over the epochs, so lam hardly acts).
    n_epochs : int, default=20
        Epochs of n pair steps. ijcnn1 in file order (seeds 0 and 1): 5 epochs 0.9959-0.9961,
        10 0.9965-0.9966, 20 0.9968-0.9969, 40 0.9970-0.9971 (paper: 0.9969).
    rskip, askip : int, default=16
    t0 : float or None (None: SVMSGD2's eta0 search)
    {_EMBEDDING_DOC}
    random_state : int or None

    See :class:`daskauc.PairwiseHingeSGD` for the solver and its objective.
    %(class_weight)s
    """

    _solver = PairwiseHingeSGD
    _solver_params = ("lam", "n_epochs", "rskip", "askip", "t0")
    _solver_fixed = {"average": True}

    def __init__(self, lam=1e-8, *, n_epochs=20, rskip=16, askip=16, t0=None,
                 n_landmarks="auto", gamma=None, landmarks="kmeans", kmeans_epochs=3,
                 standardize="auto", dtype="float32", embedding_store=None, overwrite=False,
                 persist=True, random_state=None, class_weight=None):
        self.lam = lam
        self.n_epochs = n_epochs
        self.rskip = rskip
        self.askip = askip
        self.t0 = t0
        _init_embedding(self, n_landmarks, gamma, landmarks, kmeans_epochs, standardize, dtype,
                        embedding_store, overwrite, persist, random_state)
        self.class_weight = class_weight


@model_class(cli="nsvmsgd2")
class NSVMSGD2(NSAUC):
    """NSVMSGD2: NSAUC without averaging (the last SGD iterate), as in Khalid et al. Fig. 1."""

    _solver_fixed = {"average": False}


@fill_doc()
@model_class(cli="nbauc")
class NBAUC(EmbeddedAUCModel):
    __doc__ = f"""NBAUC: k-means Nystroem embedding + PRSVM+ truncated Newton (Khalid Alg. 2).

    Parameters
    ----------
    C : "auto" or float > 0, default="auto"
        Weight of the pairwise squared hinge in ``1/2 ||w||^2 + C sum_(i in P, j in N)
        max(0, 1 - w.(phi(x_i) - phi(x_j)))^2``; the paper's grid is {{2^-15, ..., 2^10}}.
        "auto" chooses it on the embedding by validation AUC along a warm-started path on a
        subsample (:class:`daskauc.RankSVM`): on ijcnn1 the former default 1 gave 0.9881,
        the chosen C about 0.997.
    tol : float, default=1e-3
        Stop when the gradient is ``tol`` times its two terms (:class:`daskauc.RankSVM`).
    max_iter : int, default=50
        Newton iterations.
    {_EMBEDDING_DOC}
    random_state : int or None

    See :class:`daskauc.RankSVM` for the solver.
    %(class_weight)s
    """

    _solver = RankSVM
    _solver_params = ("C", "tol", "max_iter")

    def __init__(self, C="auto", *, tol=1e-3, max_iter=50, n_landmarks="auto", gamma=None,
                 landmarks="kmeans", kmeans_epochs=3, standardize="auto", dtype="float32",
                 embedding_store=None, overwrite=False, persist=True, random_state=None,
                 class_weight=None):
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        _init_embedding(self, n_landmarks, gamma, landmarks, kmeans_epochs, standardize, dtype,
                        embedding_store, overwrite, persist, random_state)
        self.class_weight = class_weight


@model_class(no_cli="a random Fourier map: fit it in Python")
class RFAUC(NBAUC):
    """RFAUC: random Fourier features (``n_landmarks`` of them) + PRSVM+ (the RFAUC baseline).

    The parameters are NBAUC's; ``n_landmarks`` is the number of Fourier features D and
    ``landmarks`` / ``kmeans_epochs`` are ignored.
    """

    _feature_map = "fourier"


@model_class(no_cli="every training row a landmark: daskauc embed --landmarks N_ROWS, then "
                     "--method ranksvm")
class KernelRankSVM(NBAUC):
    """Exact Gaussian-kernel RankSVM for small n: every training row is a landmark.

    Nystroem with all rows as landmarks is the exact kernel feature map (up to the
    pseudo-inverse's eigenvalue cut-off), so PRSVM+ on it solves the kernel problem; this is
    how Khalid et al. obtain their RBF-RankSVM baseline. Cost O(n^2) memory: small n only.
    """

    def __init__(self, C="auto", *, tol=1e-3, max_iter=50, n_landmarks=None, gamma=None,
                 landmarks="all", kmeans_epochs=3, standardize="auto", dtype="float64",
                 embedding_store=None, overwrite=False, persist=True, random_state=None,
                 class_weight=None):
        super().__init__(C, tol=tol, max_iter=max_iter, n_landmarks=n_landmarks, gamma=gamma,
                         landmarks=landmarks, kmeans_epochs=kmeans_epochs,
                         standardize=standardize, dtype=dtype, embedding_store=embedding_store,
                         overwrite=overwrite, persist=persist, random_state=random_state)
        self.class_weight = class_weight


@fill_doc()
@model_class(no_cli="daskauc embed, then --method oam")
class NOAM(EmbeddedAUCModel):
    __doc__ = f"""NOAM: k-means Nystroem embedding + OAM with 100+100 reservoir buffers.

    Parameters
    ----------
    C : float, default=1.0
    buffer_size : int, default=100
    update : {{"seq", "gra"}}, default="seq"
    n_epochs : int, default=1
    {_EMBEDDING_DOC}
    random_state : int or None
    %(class_weight)s
    """

    _solver = OAM
    _solver_params = ("C", "buffer_size", "update", "n_epochs")

    def __init__(self, C=1.0, *, buffer_size=100, update="seq", n_epochs=1, n_landmarks="auto",
                 gamma=None, landmarks="kmeans", kmeans_epochs=3, standardize="auto",
                 dtype="float32", embedding_store=None, overwrite=False, persist=True,
                 random_state=None, class_weight=None):
        self.C = C
        self.buffer_size = buffer_size
        self.update = update
        self.n_epochs = n_epochs
        _init_embedding(self, n_landmarks, gamma, landmarks, kmeans_epochs, standardize, dtype,
                        embedding_store, overwrite, persist, random_state)
        self.class_weight = class_weight


@fill_doc()
@model_class(no_cli="daskauc embed, then --method solam --param zeta=25 --epochs 30 "
                     "(NSOLAM's defaults)")
class NSOLAM(EmbeddedAUCModel):
    __doc__ = f"""NSOLAM: k-means Nystroem embedding + SOLAM (Khalid et al.'s NSOLAM baseline).

    Parameters
    ----------
    zeta : float, default=25.0
        Step scale, gamma_t = zeta / sqrt(t); the paper's grid is {{1:9:100}}. On the
        Gaussian-kernel embedding ``||phi(x)||^2 <= 1``, so one value serves every dataset:
        ijcnn1 in file order, 3 seeds, 15 epochs: zeta 1: 0.965-0.975, 5: 0.972-0.987,
        15: 0.987-0.989, 25: 0.988-0.990, 35: 0.986-0.990, 55: 0.981-0.987, 100 (the
        authors' demo, the former default): 0.973-0.983.
    R : float, default=10.0
        Radius of the projection ||w|| <= R; the paper's grid is {{1e-1, ..., 1e5}}.
    n_epochs : int, default=30
        ijcnn1 at zeta 25: 15 epochs 0.988-0.990, 30 epochs 0.990-0.991 (paper: 0.9886).
    {_EMBEDDING_DOC}
    random_state : int or None

    See :class:`daskauc.estimators.least_squares.SOLAM` for the solver.
    %(class_weight)s
    """

    _solver = SOLAM
    _solver_params = ("zeta", "R", "n_epochs")

    def __init__(self, zeta=25.0, *, R=10.0, n_epochs=30, n_landmarks="auto", gamma=None,
                 landmarks="kmeans", kmeans_epochs=3, standardize="auto", dtype="float32",
                 embedding_store=None, overwrite=False, persist=True, random_state=None,
                 class_weight=None):
        self.zeta = zeta
        self.R = R
        self.n_epochs = n_epochs
        _init_embedding(self, n_landmarks, gamma, landmarks, kmeans_epochs, standardize, dtype,
                        embedding_store, overwrite, persist, random_state)
        self.class_weight = class_weight


def _map_plan(fmap, n_rows: int) -> str:
    """What fitting the feature map ``fmap`` does, said before it starts."""
    from ..embed.fourier import RandomFourierFeatures

    if isinstance(fmap, RandomFourierFeatures):
        return f"drawing {fmap.n_components} random Fourier features"
    given = fmap.landmarks
    if not isinstance(given, str):
        return f"the Nystroem map of {len(given)} given landmarks"
    k = fmap.n_components
    k = "up to 1,600" if k == "auto" else f"{k}"
    how = {"kmeans": f"by mini-batch k-means ({fmap.kmeans_epochs} epochs)",
           "random": "uniformly at random"}.get(given)
    if how is None:  # "all": every row a landmark
        return f"the exact kernel map: every one of the {n_rows} rows a landmark"
    return f"choosing {k} landmarks among {n_rows} rows {how}"
