"""k-means Nystroem feature map for the Gaussian kernel: fitting the map and applying it.

``phi(x) = kappa(x, U) M`` with ``kappa(x, z) = exp(-gamma ||x - z||^2)``, landmarks ``U``
(k-means centres by default) and ``M = V_r diag(lambda_r)^(-1/2)`` from the eigenpairs of
``W = kappa(U, U)`` above ``eig_tol * lambda_1``. Then ``phi(x) . phi(z)`` approximates
``kappa(x, z)``, exactly when ``z`` is a landmark and nothing was cut.

Per chunk of rows the map is three steps: ``X_b U^T`` by BLAS, a numba kernel turning that
Gram block in place into the kernel block, and ``K M`` by BLAS. The output has the input's
dtype (float32 stays float32, computed in float32; float64 is computed in float64).

Sparse rows (CSR blocks, :mod:`daskauc._sparse`) are never made dense: ``X_b U^T`` is a
sparse x dense product against the landmarks transposed, ``||x||^2`` comes from the row's
non-zeros (:func:`daskauc._gaussian.sparse_gaussian_block`), the bandwidth rule's variance
from per-column sums over the non-zeros, and the landmarks from k-means on the sparse rows
(:mod:`daskauc.embed.sparse_rows`). The landmarks are dense, ``v x d`` float64, at most
``MAX_CENTRE_BYTES`` (2 GiB): larger is refused, naming the most landmarks that fit. The
embedding is dense (n x r), as on dense rows.

Writing an embedding to Zarr is an explicit call, :meth:`KMeansNystroem.write_embedding`,
that streams the map chunk by chunk into a store which also holds everything needed to map
new points identically (:func:`load_embedding_map`); the stores' format is
:mod:`daskauc.embed.embedding_store`.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings

import dask.array as da
import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .. import _config
from .._arrays import sample_rows
from .._compute import compute
from .._gaussian import gaussian_block, gaussian_from_gram, sparse_gaussian_block
from .._params import (
    POSITIVE,
    ArrayLike,
    FloatDType,
    Interval,
    Options,
    check_params,
    seed_sequence,
)
from .._registry import model_class
from .._sparse import is_sparse, is_sparse_dask
from .._validation import (
    as_numpy_rows,
    as_row_chunked,
    check_n_features,
    check_not_empty,
    check_predict_X,
    is_store_path,
    preserved_dtypes,
    set_features_in,
)
from ..store.dataset import Dataset, open_dataset
from . import embedding_store
from .kmeans import _child, _fit_kmeans
from .sparse_rows import (
    bandwidth_moments,
    check_centre_bytes,
    combine_bandwidth,
    dense_rows,
    gram_of_sparse_rows,
    transpose,
)

__all__ = ["KMeansNystroem", "NystroemRankWarning", "load_embedding_map", "default_gamma",
           "gaussian_kernel", "auto_landmarks"]


class NystroemRankWarning(UserWarning):
    """KMeansNystroem dropped eigenpairs of the landmarks' kernel matrix below its relative
    cut-off (``eig_tol``): its output has fewer columns (``n_components_``) than landmarks."""


#: refuse landmarks="all" beyond this many rows (W alone would take 20 GB in float64)
MAX_ALL_LANDMARKS = 50_000

#: ``n_components="auto"`` fits ``auto_landmarks(n, d)`` landmarks: the paper's 1,600, or
#: fewer rows, or, for d <= 8 features, AUTO_LANDMARKS[d - 1] (measured: see auto_landmarks)
DEFAULT_LANDMARKS = 1600
AUTO_LANDMARKS = (12, 50, 125, 300, 500, 800, 1200, 1400)


def auto_landmarks(n_rows: int, n_features: int) -> int:
    """Landmarks of ``n_components="auto"``: ``min(1600, n_rows, cap(d))``.

    The Gaussian kernel at the default width (``gamma = 1/b``, about ``1/d`` on
    standardized rows) tells few landmarks apart in few dimensions: beyond a number that
    grows with d, the eigenvalues of the landmarks' kernel matrix fall below
    ``eig_tol * lambda_1`` and the map drops them, after k-means has fitted them all. The cap
    is the most landmarks the map keeps on smooth data. Measured on standardized rows at the
    default gamma and eig_tol, k-means landmarks (3 epochs, seed 0), 20,000 rows: the rank
    kept of v = 1,600 landmarks and of v = cap(d). ``mix``: 8-cluster Gaussian mixtures (the
    lowest of 4 draws at the cap), ``cov``: covtype's first d columns; on 5,000 and 100,000
    rows the ranks at the cap are within 5% of these::

              rank kept of 1,600           cap     rank kept of cap(d)
        d   gauss unif.  mix   cov        (d)    gauss unif.  mix   cov
        1      25    13    22    27         12       12    12    12    12
        2     172    77   100   128         50       50    50    41    50
        3     571   291   369   478        125      125   125   122   125
        4    1090   784   710   898        300      300   300   282   300
        5    1482  1416  1186  1283        500      500   500   473   500
        6    1600  1600  1092  1482        800      800   800   726   800
        7    1600  1600  1521  1554       1200     1200  1200  1040  1193
        8    1600  1600  1556  1571       1400     1400  1400  1372  1387
        9    1600  1600  1584  1568       1600     1600  1600  1580  1568
        10   1600  1600  1596  1600       1600     1600  1600  1594  1600
        11+  1600  1600  1600     -       1600     1600  1600  1595     -

    So the cap keeps smooth data whole and clustered data to 82-99%. Rows with few
    distinct values keep fewer still (breast-cancer, 10 features of 10 levels, 683 rows:
    459 of 683): the :class:`NystroemRankWarning` then names the number to ask for.
    """
    n_features = int(n_features)
    cap = AUTO_LANDMARKS[n_features - 1] if n_features <= len(AUTO_LANDMARKS) else \
        DEFAULT_LANDMARKS
    return int(min(DEFAULT_LANDMARKS, int(n_rows), cap))




# ----------------------------------------------------------------------------- kernel


def _bandwidth_graph(Xd: da.Array):
    """Lazy ``b`` = mean of ``||x_i - xbar||^2`` over the first BANDWIDTH_ROWS rows (on sparse
    rows from each block's column sums and squared deviations over its non-zeros, combined
    pairwise: :func:`daskauc.embed.sparse_rows.bandwidth_moments`)."""
    m = int(min(Xd.shape[0], _config.BANDWIDTH_ROWS))
    if is_sparse_dask(Xd):
        import dask

        parts = [dask.delayed(bandwidth_moments, pure=True)(b)
                 for b in Xd[:m].to_delayed().ravel()]
        return dask.delayed(_bandwidth_of, pure=True)(parts)
    head = Xd[:m].astype(np.float64)
    return head.var(axis=0).sum()


def _bandwidth_of(parts) -> float:
    acc = parts[0]
    for p in parts[1:]:
        acc = combine_bandwidth(acc, p)
    n, _, M2 = acc
    return M2 / n


def _gamma_from_b(b: float) -> float:
    b = float(b)
    if not np.isfinite(b) or b <= 0:
        raise ValueError(
            f"cannot choose gamma by the bandwidth rule: the first rows have total variance {b} "
            "(all identical?); pass gamma explicitly"
        )
    return 1.0 / b


def default_gamma(X) -> float:
    """Gaussian kernel width ``gamma = 1 / b`` of Khalid et al.

    ``b`` is the mean of ``||x_i - xbar||^2`` over the first ``min(n, 80_000)`` rows
    (``_config.BANDWIDTH_ROWS``), ``xbar`` their mean. One compute over those rows.

    Parameters
    ----------
    X : numpy array, dask array, zarr array or dataset store path

    Returns
    -------
    gamma : float
    """
    Xd = as_row_chunked(X)
    return _gamma_from_b(compute(_bandwidth_graph(Xd))[0])


def gaussian_kernel(X, Z, gamma: float) -> np.ndarray:
    """Gaussian kernel matrix ``exp(-gamma ||x_i - z_j||^2)`` of two numpy arrays.

    Computed in the common dtype of ``X`` and ``Z`` (float64 unless both are float32) by
    ``||x||^2 + ||z||^2 - 2 x.z`` with negatives clipped at 0.
    """
    X = as_numpy_rows(X, name="X")
    Z = as_numpy_rows(Z, name="Z")
    if X.shape[1] != Z.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features and Z has {Z.shape[1]}")
    dt = np.result_type(X.dtype, Z.dtype)
    X, Z = X.astype(dt, copy=False), np.ascontiguousarray(Z, dtype=dt)
    return gaussian_block(X, Z, np.einsum("ij,ij->i", Z, Z), float(gamma))


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside daskauc (the user's call, whichever
    of KMeansNystroem, a preset or the command line made it), for a warning raised by the
    function that calls this one."""
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
            package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def _nystroem_block(block, U, usq, M, gamma, mean, scale):
    """The map of one row block: optional standardization, kernel block, projection.

    ``U`` is the landmarks (v x d) for dense rows and their transpose (d x v, C-contiguous)
    for CSR rows, as :meth:`KMeansNystroem._block_args` gives them; CSR rows are only scaled
    (``_block_args`` refuses a non-zero mean for them)."""
    if is_sparse(block):
        X = block.astype(U.dtype, copy=False)
        if scale is not None:
            X = X.__class__((X.data / scale[X.indices], X.indices, X.indptr), shape=X.shape)
        if X.shape[0] == 0:
            return np.empty((0, M.shape[1]), U.dtype)
        return sparse_gaussian_block(X, U, usq, gamma) @ M
    X = np.ascontiguousarray(block, dtype=U.dtype)
    if mean is not None:
        X = (X - mean) / scale
    if X.shape[0] == 0:
        return np.empty((0, M.shape[1]), U.dtype)
    return gaussian_block(X, U, usq, gamma) @ M


# ----------------------------------------------------------------------------- estimator


@model_class(no_cli="the feature map: daskauc embed fits it and writes the embedding")
class KMeansNystroem(TransformerMixin, BaseEstimator):
    """Nystroem feature map of the Gaussian kernel on k-means landmarks.

    Parameters
    ----------
    n_components : int or "auto", default "auto"
        Number of landmarks v. "auto": the paper's 1,600, or the number of rows when fewer,
        or, on fewer than 9 features, as many as the kernel tells apart at the default gamma
        (:func:`auto_landmarks`: 125 for 3 features), so that k-means fits no landmarks the
        map then drops. An integer is used as given (capped at the number of rows, with a
        warning).
    gamma : float, optional
        Kernel width in ``exp(-gamma ||x - z||^2)``; default ``1 / b`` with ``b`` the mean of
        ``||x_i - xbar||^2`` over the first ``min(n, 80_000)`` rows.
    landmarks : {"kmeans", "random", "all"} or array of shape (v, d), default "kmeans"
        Centres of mini-batch k-means (k-means++ seeding on a sample, ``kmeans_epochs``
        epochs); a uniform sample of rows; every training row (the exact kernel map, for small
        n only); or given landmarks.
    kmeans_epochs : int, default 3
        Epochs of mini-batch k-means after seeding. One epoch takes about half the time of
        three and approximates the kernel as well within a few per cent (relative Frobenius
        error on 2,000 held-out rows, 1,600 landmarks, 3 seeds: covtype within 1%, a9a equal,
        ijcnn1 2-3% higher), with a higher k-means inertia (covtype: 14%, still 16% below
        scikit-learn's MiniBatchKMeans at the same batch size; docs/benchmarks/embed.md).
    batch_size : int, default 2048
        k-means mini-batch rows.
    eig_tol : float, default 1e-8 (``_config.EIG_TOL``)
        Keep the eigenpairs of W with ``lambda_k > eig_tol * lambda_1``.
    dtype : None, float32 or float64
        Working and output dtype; default: the input's (integers become float64).
    random_state : None, int, SeedSequence or Generator

    Attributes
    ----------
    landmarks_ : ndarray (v, d), float64
    components_ : the same array as ``landmarks_`` (scikit-learn's name)
    projection_ : ndarray (v, r), float64
        ``M = V_r diag(lambda_r)^(-1/2)``.
    eigenvalues_ : ndarray (v,), float64
        Every eigenvalue of W, in descending order.
    gamma_ : float
    n_components_ : int
        r, the number of eigenpairs kept: the width of ``transform``'s output. It is less
        than the number of landmarks when eigenvalues of W fall below ``eig_tol * lambda_1``
        (nearly dependent landmarks); fit then warns with :class:`NystroemRankWarning`,
        naming the cut-off and the smallest kept eigenvalue.
    n_features_in_ : int
    kmeans_counts_, kmeans_history_ : when ``landmarks="kmeans"``, the k-means cluster sizes
        and history.
    input_sha256_ : str
        sha256 of the landmarks, gamma and (for a store input) the dataset store attributes.
    scaler_mean_, scaler_scale_ : only on maps loaded from an embedding store written with a
        scaler: ``transform`` standardizes its input with them first.

    Notes
    -----
    ``kappa(x, z) = exp(-gamma ||x - z||^2)``, ``W = kappa(U, U) = V diag(lambda) V^T``
    (descending), ``M = V_r diag(lambda_r)^(-1/2)`` keeping ``lambda_k > eig_tol lambda_1``
    (a pseudo-inverse, never a blind inverse), ``phi(x) = kappa(x, U) M``. Then
    ``phi(X) phi(Z)^T = kappa(X, U) W_r^+ kappa(U, Z)``, which equals ``kappa(X, Z)`` when
    the rows of Z are landmarks and r = v. With ``landmarks="all"`` this is the exact kernel
    feature map of the training rows (Khalid et al.'s RBF-RankSVM baseline).

    Sparse rows (a scipy sparse matrix, a dask array of CSR blocks, a sparse store) are read
    as their non-zeros and never made dense (see the module docstring); the landmarks are
    dense, at most ``MAX_CENTRE_BYTES`` (2 GiB) of float64, and the output is dense.

    References
    ----------
    M. Khalid, I. N. Ray and H. Chitsaz, "Scalable Nonlinear AUC Maximization Methods",
    ECML-PKDD 2018, Sec. 3.2, Alg. 1.
    K. Zhang, I. W. Tsang and J. T. Kwok, "Improved Nystrom low-rank approximation and error
    analysis", ICML 2008.
    """

    #: fit / transform / write_embedding read sparse rows (CSR blocks)
    _sparse_rows = True

    _params = {
        "n_components": [Options("auto"), Interval(int, 1)],
        "gamma": [POSITIVE, None],
        "kmeans_epochs": Interval(int, 0),
        "batch_size": Interval(int, 1),
        "eig_tol": Interval(float, 0.0, 1.0),
        "landmarks": [Options("kmeans", "random", "all"), ArrayLike("an array of landmarks")],
        "dtype": [None, FloatDType()],
    }

    def __init__(self, n_components="auto", *, gamma=None, landmarks="kmeans", kmeans_epochs=3,
                 batch_size=2048, eig_tol=_config.EIG_TOL, dtype=None, random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.landmarks = landmarks
        self.kmeans_epochs = kmeans_epochs
        self.batch_size = batch_size
        self.eig_tol = eig_tol
        self.dtype = dtype
        self.random_state = random_state

    # ------------------------------------------------------------------ fit

    def fit(self, X, y=None):
        """Choose landmarks and gamma, then eigendecompose W (one or two computes over X).

        Parameters
        ----------
        X : numpy array, dask array, zarr array or dataset store path, shape (n, d)
        y : ignored
        """
        check_params(self, self._params)
        for stale in ("scaler_mean_", "scaler_scale_", "kmeans_counts_", "kmeans_history_"):
            self.__dict__.pop(stale, None)  # from an earlier fit or a loaded map
        source_attrs = open_dataset(X).attrs if is_store_path(X) else None
        Xd = as_row_chunked(X, dtype=self.dtype, sparse=True)
        sparse = is_sparse_dask(Xd)
        check_not_empty(Xd.shape, min_samples=2 if self.gamma is None else 1)
        n, d = Xd.shape
        set_features_in(self, X, d)
        ss = seed_sequence(self.random_state)
        b_graph = _bandwidth_graph(Xd) if self.gamma is None else None
        also = (b_graph,) if b_graph is not None else ()
        kind = self.landmarks if isinstance(self.landmarks, str) else "array"
        if isinstance(self.n_components, str):  # "auto"
            v = auto_landmarks(n, d)
        else:
            v = int(self.n_components)
            if kind in ("kmeans", "random") and v > n:
                warnings.warn(f"n_components={v} > n_samples={n}: using {n} landmarks",
                              stacklevel=2)
                v = n
        extras: tuple = ()
        if sparse and kind != "array":
            check_centre_bytes(n if kind == "all" else v, d, "landmarks")
        if kind == "array":
            U = np.asarray(self.landmarks, dtype=np.float64)
            if U.ndim != 2 or U.shape[1] != d or U.shape[0] < 1:
                raise ValueError(
                    f"landmarks must be an array of shape (v, {d}) (X has {d} features); "
                    f"got shape {U.shape}"
                )
            if not np.isfinite(U).all():
                raise ValueError("landmarks contain NaN or infinity")
            extras = tuple(compute(*also))
        elif kind == "all":
            if n > MAX_ALL_LANDMARKS:
                raise ValueError(
                    f"landmarks='all' with {n} rows would need a {n} x {n} kernel matrix; it is "
                    f"meant for small n (<= {MAX_ALL_LANDMARKS}): use 'kmeans'"
                )
            U, *extras = compute(Xd, *also)
        elif kind == "random":
            rng = np.random.default_rng(_child(ss, 3))
            idx = np.sort(rng.choice(n, size=v, replace=False))
            U, *extras = compute(sample_rows(Xd, idx) if sparse else Xd[idx], *also)
        else:
            U, counts, history, extras = _fit_kmeans(
                Xd, v, batch_size=self.batch_size, n_epochs=self.kmeans_epochs, init_size=None,
                ss=ss, also=also,
            )
            self.kmeans_counts_ = counts
            self.kmeans_history_ = history
        gamma = float(self.gamma) if self.gamma is not None else _gamma_from_b(extras[0])
        if is_sparse(U):  # landmarks drawn from sparse rows (within MAX_CENTRE_BYTES)
            U = dense_rows(U)
        self._fit_map(np.asarray(U, dtype=np.float64), gamma, d, sparse=sparse)
        h = hashlib.sha256()
        h.update(memoryview(np.ascontiguousarray(self.landmarks_)))  # bytes, not a copy
        h.update(repr(self.gamma_).encode())
        if source_attrs is not None:
            h.update(json.dumps(source_attrs, sort_keys=True, default=str).encode())
        self.input_sha256_ = h.hexdigest()
        return self

    def _fit_map(self, U: np.ndarray, gamma: float, n_features: int, sparse=False) -> None:
        U = np.ascontiguousarray(U, dtype=np.float64)
        if sparse:  # landmarks of sparse rows are mostly zeros: their products over those
            usq = np.einsum("ij,ij->i", U, U)
            W = gaussian_from_gram(gram_of_sparse_rows(U), usq, usq, gamma)
        else:
            W = gaussian_kernel(U, U, gamma)
        W = 0.5 * (W + W.T)
        np.fill_diagonal(W, 1.0)
        # single-threaded: OpenBLAS's threaded eigensolver slows 5-25x when another process
        # shares the cores (measured 0.6 s on one thread, 3-15 s on two, v = 1600)
        with _config.blas_limit(1):
            lam, V = scipy.linalg.eigh(W, driver="evd")
        lam, V = lam[::-1], V[:, ::-1]
        keep = lam > self.eig_tol * lam[0]
        r = int(np.count_nonzero(keep))
        if r < U.shape[0]:
            v = U.shape[0]
            warnings.warn(NystroemRankWarning(
                f"KMeansNystroem kept {r} of {v} eigenpairs (eig_tol * lambda_1 = "
                f"{self.eig_tol * lam[0]:.3g} cut the rest), so its output has {r} columns: "
                f"ask for {r} landmarks (n_components, n_landmarks, --landmarks) to skip "
                f"fitting the {v - r} the kernel cannot tell apart."),
                stacklevel=_caller_level())
        self.landmarks_ = U
        self.components_ = self.landmarks_
        self.projection_ = np.ascontiguousarray(V[:, :r] / np.sqrt(lam[:r]))
        self.eigenvalues_ = np.ascontiguousarray(lam)
        self.gamma_ = float(gamma)
        self.n_components_ = r
        self.n_features_in_ = int(n_features)

    # ------------------------------------------------------------------ transform

    def _block_args(self, dtype, scaler_mean=None, scaler_scale=None, *, sparse=False):
        """Arrays the block map needs, cast once to the working dtype; for CSR rows
        (``sparse``) the landmarks transposed, and a scaler that centres is refused."""
        if sparse:
            U = transpose(self.landmarks_, dtype)
            usq = np.einsum("ij,ij->j", U, U)
        else:
            U = np.ascontiguousarray(self.landmarks_, dtype=dtype)
            usq = np.einsum("ij,ij->i", U, U)
        M = np.ascontiguousarray(self.projection_, dtype=dtype)
        if scaler_mean is None:
            scaler_mean = getattr(self, "scaler_mean_", None)
            scaler_scale = getattr(self, "scaler_scale_", None)
        if scaler_mean is not None:
            if sparse and np.any(np.asarray(scaler_mean) != 0):
                raise ValueError(
                    "this map standardizes its input by subtracting a mean, which would make "
                    "sparse rows dense: fit the scaler with with_mean=False on sparse rows "
                    "(as the presets do), or pass dense rows")
            scaler_mean = np.asarray(scaler_mean, dtype=dtype)
            scaler_scale = np.asarray(scaler_scale, dtype=dtype)
        return U, usq, M, self.gamma_, scaler_mean, scaler_scale

    def _map_dask(self, Xd: da.Array, scaler_mean=None, scaler_scale=None) -> da.Array:
        check_n_features(Xd.shape, self.n_features_in_, type(self).__name__)
        args = self._block_args(Xd.dtype, scaler_mean, scaler_scale,
                                sparse=is_sparse_dask(Xd))
        r = self.n_components_
        return Xd.map_blocks(
            _nystroem_block, *args, chunks=(Xd.chunks[0], (r,)), dtype=Xd.dtype,
            token="daskauc-nystroem", meta=np.empty((0, 0), Xd.dtype),
        )

    def _rows_per_block(self, itemsize: int, n: int) -> int:
        """Rows per task: about 64 MiB of kernel block, split evenly over the rows."""
        width = max(self.landmarks_.shape[0], self.n_components_)
        return _even_rows(n, _config.chunk_rows_for(width, itemsize))

    def transform(self, X):
        """Map rows to ``phi(x) = kappa(x, U) M`` (width ``n_components_``).

        Parameters
        ----------
        X : numpy array -> numpy array; dask array, zarr array or store path -> lazy dask array
            with one ``daskauc-nystroem`` task per row chunk (chunks larger than about 64 MiB
            of output are split first). The output dtype is the input's (or ``dtype``).
            Sparse rows: a scipy sparse matrix -> numpy array, a dask array of CSR blocks or
            a sparse store -> lazy dask array; the output is dense.
        """
        check_is_fitted(self, "projection_")
        Xv = check_predict_X(self, X, dtype=self.dtype)
        if isinstance(Xv, da.Array):
            rows = self._rows_per_block(Xv.dtype.itemsize, Xv.shape[0])
            if max(Xv.chunks[0]) > rows:
                Xv = Xv.rechunk({0: rows})
            return self._map_dask(Xv)
        Xn = Xv
        args = self._block_args(Xn.dtype, sparse=is_sparse(Xn))
        rows = self._rows_per_block(Xn.dtype.itemsize, Xn.shape[0])
        if Xn.shape[0] <= rows:
            return _nystroem_block(Xn, *args)
        out = np.empty((Xn.shape[0], self.n_components_), Xn.dtype)
        for s in range(0, Xn.shape[0], rows):
            out[s : s + rows] = _nystroem_block(Xn[s : s + rows], *args)
        return out

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "projection_")
        return np.asarray([f"kmeansnystroem{i}" for i in range(self.n_components_)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = preserved_dtypes(self.dtype)
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ persistence

    def write_embedding(self, source, store, *, y=None, scaler=None, overwrite: bool = False,
                        chunk_rows: int | None = None, compressor=None) -> Dataset:
        """Map ``source`` and write an embedding store (one compute).

        Parameters
        ----------
        source : dataset store path (X and y are read from it) or an array X (then ``y``)
        store : path or URL of the embedding store to create
        y : labels when ``source`` is an array (any two-valued convention -> int8 {-1, +1})
        scaler : fitted object with ``mean_`` and ``scale_`` (e.g. StandardScaler), optional
            Rows are standardized ``(x - mean_) / scale_`` inside the map tasks; the statistics
            are saved with the map so :func:`load_embedding_map` applies them to new rows.
        overwrite : bool
            Replace an existing store (never done silently).
        chunk_rows : int, optional
            Rows per chunk of the embedding (dask chunk = Zarr chunk); default about 64 MiB.
        compressor : None, "none", "zstd" or a Zarr codec
            None means ``DEFAULT_COMPRESSOR`` ("none", chosen by measurement: see
            :mod:`daskauc.embed.embedding_store`).

        Returns
        -------
        Dataset
            The new store opened with :func:`daskauc.open_dataset`.

        Notes
        -----
        The store holds ``X`` (n x r, the map's dtype), ``y`` (int8), a subgroup ``map``
        (landmarks, projection, eigenvalues, scaler statistics; gamma and parameters in its
        attributes), and provenance (parameters, ``input_sha256``, ``map_sha256``, versions,
        class counts) in the group attributes. It is written through
        :func:`daskauc.store.write.writing_store`, so an interrupted write never looks complete.
        Under the threaded scheduler BLAS is limited to one thread per task while writing.
        """
        check_is_fitted(self, "projection_")
        return embedding_store.write_embedding(
            self, _nystroem_block, source, store, y=y, scaler=scaler, overwrite=overwrite,
            chunk_rows=chunk_rows, compressor=compressor)

    def save(self, path, overwrite: bool = False) -> None:
        """Save the fitted map to a Zarr group (arrays + JSON attributes, no pickle)."""
        check_is_fitted(self, "projection_")
        embedding_store.save_map(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path) -> KMeansNystroem:
        """Load a map written by :meth:`save`."""
        return embedding_store.load_map(path, cls)


def load_embedding_map(store) -> KMeansNystroem:
    """The fitted map of an embedding store, so new points map exactly as the stored rows.

    If the store was written with a scaler, the returned model's ``transform`` standardizes
    its input with the saved statistics first (``scaler_mean_``, ``scaler_scale_``).
    """
    return embedding_store.read_embedding_map(store, KMeansNystroem)


# ----------------------------------------------------------------------------- helpers


def _even_rows(n: int, target: int) -> int:
    """Rows per chunk near ``target`` that split ``n`` rows into equal chunks (so the last
    task is not a short straggler, nor the first one twice the rest)."""
    if n <= 0:
        return max(1, target)
    k = -(-n // max(1, target))
    return -(-n // k)
