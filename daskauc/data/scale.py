"""Feature scaling fitted in one distributed pass: standardization, min-max, unit rows.

Fitting reads every chunk once: each chunk yields small float64 statistics (count, mean and
sum of squared deviations, or column minima and maxima), combined pairwise up a tree of
tasks (fan-in 8) into one result, computed by a single ``dask.compute``. Transforms are lazy
``map_blocks`` over dask arrays (layer ``daskauc-scale-...``) and plain numpy for numpy.

Sparse rows (CSR blocks, :mod:`daskauc._sparse`): :class:`StandardScaler` with
``with_mean=False`` and :func:`normalize_rows` read and return them, touching only the
non-zeros (subtracting a mean, or :class:`MinMaxScaler`'s offset, would make them dense and
is refused, as scikit-learn does).
"""

from __future__ import annotations

from numbers import Real

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._compute import compute
from .._params import check_param
from .._registry import model_class
from .._sparse import canonical_csr, frame_as_csr, is_sparse, is_sparse_dask, is_sparse_frame
from .._validation import (
    as_numpy_rows,
    as_row_chunked,
    check_not_empty,
    check_predict_X,
    is_lazy_input,
    set_features_in,
)

__all__ = ["StandardScaler", "MinMaxScaler", "normalize_rows"]

_FAN_IN = 8


def _tree_reduce(X: da.Array, chunk_fn, combine_fn, name: str) -> Delayed:
    """A Delayed of ``combine_fn`` folded over ``chunk_fn(block)`` of every row chunk."""
    token = tokenize(X.name, chunk_fn, combine_fn)
    layer: dict = {}
    keys = []
    for i in range(X.numblocks[0]):
        key = (f"{name}-chunk-{token}", i)
        layer[key] = (chunk_fn, (X.name, i, 0))
        keys.append(key)
    level = 0
    while len(keys) > 1:
        new = []
        for j in range(0, len(keys), _FAN_IN):
            key = (f"{name}-combine-{token}", level, j // _FAN_IN)
            layer[key] = (_fold, combine_fn, keys[j : j + _FAN_IN])
            new.append(key)
        keys = new
        level += 1
    graph = HighLevelGraph.from_collections(f"{name}-{token}", layer, dependencies=[X])
    return Delayed(keys[0], graph, layer=f"{name}-{token}")


def _fold(combine_fn, parts):
    acc = parts[0]
    for p in parts[1:]:
        acc = combine_fn(acc, p)
    return acc


def _moments(block: np.ndarray):
    """(count, mean, M2) of a block in float64; M2 = sum of squared deviations."""
    if is_sparse(block):
        return _sparse_moments(block)
    b = np.asarray(block, dtype=np.float64)
    n = b.shape[0]
    if n == 0:
        return 0, np.zeros(b.shape[1]), np.zeros(b.shape[1])
    mean = b.mean(axis=0)
    dev = b - mean
    return n, mean, np.einsum("ij,ij->j", dev, dev)


def _sparse_moments(block):
    """:func:`_moments` of a CSR block from its non-zeros: column f's squared deviations are
    ``sum over its non-zeros (x - mean_f)^2 + (n - nnz_f) mean_f^2`` (the zeros' share)."""
    n, d = block.shape
    if n == 0:
        return 0, np.zeros(d), np.zeros(d)
    data = np.asarray(block.data, dtype=np.float64)
    mean = np.bincount(block.indices, weights=data, minlength=d) / n
    dev = data - mean[block.indices]
    zeros = n - np.bincount(block.indices, minlength=d)
    return n, mean, np.bincount(block.indices, weights=dev * dev, minlength=d) + zeros * mean**2


def _combine_moments(a, b):
    """Chan, Golub & LeVeque's pairwise update of (count, mean, M2)."""
    na, ma, Ma = a
    nb, mb, Mb = b
    if na == 0:
        return b
    if nb == 0:
        return a
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), Ma + Mb + delta * delta * (na * nb / n)


def _extrema(block: np.ndarray):
    b = np.asarray(block)
    if b.shape[0] == 0:
        return 0, np.full(b.shape[1], np.inf), np.full(b.shape[1], -np.inf)
    return b.shape[0], b.min(axis=0).astype(np.float64), b.max(axis=0).astype(np.float64)


def _combine_extrema(a, b):
    return a[0] + b[0], np.minimum(a[1], b[1]), np.maximum(a[2], b[2])


def _as_input(X, sparse: bool = False):
    """(kind, array): numpy stays numpy (float64 unless float32), anything else -> dask; with
    ``sparse``, an in-memory sparse matrix becomes canonical CSR ("numpy") and sparse dask
    arrays and stores stay CSR blocks."""
    if is_lazy_input(X):
        return "dask", as_row_chunked(X, sparse=sparse)
    if sparse and (is_sparse(X) or is_sparse_frame(X)):
        return "numpy", canonical_csr(frame_as_csr(X) if is_sparse_frame(X) else X)
    return "numpy", as_numpy_rows(X)


def _fit_stats(X, chunk_fn, combine_fn, name, sparse=False):
    kind, A = _as_input(X, sparse)
    check_not_empty(A.shape)
    if kind == "numpy":
        return A.shape[1], chunk_fn(A)
    (stats,) = compute(_tree_reduce(A, chunk_fn, combine_fn, name))
    return A.shape[1], stats


def _scaler_tags(tags):
    """Float32 is scaled in float32, float64 in float64; dense input only."""
    tags.transformer_tags.preserves_dtype = ["float64", "float32"]
    tags.input_tags.sparse = False
    return tags


def _transform(est, X, fn, name):
    check_is_fitted(est)
    A = check_predict_X(est, X)
    if getattr(est, "with_mean", False) and (is_sparse(A) or is_sparse_dask(A)):
        _refuse_centring()  # before any work (the blocks would refuse it as they are read)
    if not isinstance(A, da.Array):
        return fn(A, est)
    token = tokenize(A.name, name, *(getattr(est, a) for a in est._transform_attrs))
    return A.map_blocks(fn, est, dtype=A.dtype, name=f"daskauc-{name}-{token}", meta=A._meta)


@model_class(no_cli="a scaler: the presets and KernelAUC standardize their input, daskauc embed "
                     "before its map")
class StandardScaler(TransformerMixin, BaseEstimator):
    """Standardize features to zero mean and unit variance, fitted in one pass.

    Parameters
    ----------
    with_mean : bool, default True
        Subtract the mean. Sparse rows cannot be centred without making them dense:
        transforming them needs ``with_mean=False`` (a ``ValueError`` otherwise, as in
        scikit-learn; fitting on them works either way, the statistics are the same).
    with_std : bool, default True
        Divide by the standard deviation (population, ``ddof=0``).

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,), float64
    var_ : ndarray of shape (n_features,), float64
    scale_ : ndarray of shape (n_features,), float64
        ``sqrt(var_)``, with 1 for (numerically) constant features.
    n_samples_seen_ : int
    n_features_in_ : int

    Notes
    -----
    ``x -> (x - mean_) / scale_``. Each chunk contributes its count, float64 mean and sum of
    squared deviations M2; chunks are merged with the pairwise formulas of Chan, Golub &
    LeVeque (n = na + nb, delta = mb - ma, mean = ma + delta nb / n,
    M2 = M2a + M2b + delta^2 na nb / n), which stay accurate where the sum-of-squares formula
    cancels. A feature is treated as constant (scale 1) when its variance is within the
    rounding bound of the two-pass algorithm, ``var <= n eps var + (n mean eps)^2``, the
    test scikit-learn uses. Float32 input is transformed in float32.

    On sparse rows (a scipy sparse matrix, a dask array of CSR blocks, a sparse store) the
    statistics come from the non-zeros (a column's zeros add ``(n - nnz) mean^2`` to its M2)
    and ``transform`` divides the stored values by ``scale_``: CSR in, CSR out.

    References
    ----------
    Chan, Golub & LeVeque, "Algorithms for computing the sample variance: analysis and
    recommendations", The American Statistician 37(3), 1983.
    """

    _transform_attrs = ("mean_", "scale_", "with_mean", "with_std")

    #: fit reads sparse rows; transform / inverse_transform too with with_mean=False
    _sparse_rows = True

    def __init__(self, *, with_mean: bool = True, with_std: bool = True):
        self.with_mean = with_mean
        self.with_std = with_std

    def fit(self, X, y=None):
        """Compute the mean and standard deviation of every feature (one pass over X)."""
        check_param("with_mean", self.with_mean, bool)
        check_param("with_std", self.with_std, bool)
        d, (n, mean, M2) = _fit_stats(X, _moments, _combine_moments, "daskauc-scale-fit",
                                      sparse=True)
        var = M2 / n
        eps = np.finfo(np.float64).eps
        constant = var <= n * eps * var + (n * mean * eps) ** 2
        scale = np.sqrt(var)
        scale[constant] = 1.0
        self.mean_ = np.asarray(mean, dtype=np.float64)
        self.var_ = np.asarray(var, dtype=np.float64)
        self.scale_ = scale
        self.n_samples_seen_ = int(n)
        set_features_in(self, X, d)
        return self

    def transform(self, X):
        """Standardize X: numpy for numpy input, a lazy dask array otherwise."""
        return _transform(self, X, _standardize, "scale")

    def inverse_transform(self, X):
        """Undo :meth:`transform`."""
        return _transform(self, X, _unstandardize, "unscale")

    def __sklearn_tags__(self):
        tags = _scaler_tags(super().__sklearn_tags__())
        tags.input_tags.sparse = True  # fit reads sparse rows; transform needs with_mean=False
        return tags


def _refuse_centring():
    raise ValueError(
        "cannot centre sparse rows (subtracting the mean would make them dense): use "
        "StandardScaler(with_mean=False), which scales the non-zeros only")


def _scale_columns(block, factor: np.ndarray, divide: bool):
    """A CSR block with every stored value divided (or multiplied) by its column's factor."""
    f = factor.astype(block.dtype)[block.indices]
    data = block.data / f if divide else block.data * f
    return block.__class__((data, block.indices.copy(), block.indptr.copy()),
                           shape=block.shape)


def _standardize(block, est):
    if is_sparse(block):
        if est.with_mean:
            _refuse_centring()
        return _scale_columns(block, est.scale_, True) if est.with_std else block.copy()
    out = np.array(block, copy=True)
    if est.with_mean:
        out -= est.mean_.astype(out.dtype)
    if est.with_std:
        out /= est.scale_.astype(out.dtype)
    return out


def _unstandardize(block, est):
    if is_sparse(block):
        if est.with_mean:
            _refuse_centring()
        return _scale_columns(block, est.scale_, False) if est.with_std else block.copy()
    out = np.array(block, copy=True)
    if est.with_std:
        out *= est.scale_.astype(out.dtype)
    if est.with_mean:
        out += est.mean_.astype(out.dtype)
    return out


@model_class(no_cli="a scaler: fit it in Python (daskauc embed standardizes)")
class MinMaxScaler(TransformerMixin, BaseEstimator):
    """Scale every feature linearly onto ``feature_range``, fitted in one pass.

    Parameters
    ----------
    feature_range : (float, float), default (-1, 1)
        The range of the transformed training data (the [-1, 1] scaling of the TPAUC, SOLAM
        and SPAM experiments).
    clip : bool, default False
        Clip transformed values of new data to ``feature_range``.

    Attributes
    ----------
    data_min_, data_max_, data_range_ : ndarray of shape (n_features,), float64
    scale_, min_ : ndarray of shape (n_features,), float64
        ``x -> x * scale_ + min_``; a constant feature gets range 1.
    n_samples_seen_ : int
    n_features_in_ : int

    Notes
    -----
    ``scale_ = (hi - lo) / (data_max_ - data_min_)`` and ``min_ = lo - data_min_ scale_``,
    as scikit-learn's ``MinMaxScaler``; per-chunk minima and maxima are combined up a tree.
    """

    _transform_attrs = ("scale_", "min_", "clip", "feature_range")

    def __init__(self, feature_range=(-1, 1), *, clip: bool = False):
        self.feature_range = feature_range
        self.clip = clip

    def fit(self, X, y=None):
        """Compute the minimum and maximum of every feature (one pass over X)."""
        fr = self.feature_range
        if (not isinstance(fr, (tuple, list)) or len(fr) != 2
                or not all(isinstance(v, Real) and np.isfinite(v) for v in fr) or fr[0] >= fr[1]):
            raise ValueError(f"feature_range must be a pair (lo, hi) with lo < hi; got {fr!r}")
        check_param("clip", self.clip, bool)
        d, (n, lo, hi) = _fit_stats(X, _extrema, _combine_extrema, "daskauc-minmax-fit")
        rng = hi - lo
        safe = rng.copy()
        safe[safe < 10 * np.finfo(np.float64).eps] = 1.0
        self.scale_ = (float(fr[1]) - float(fr[0])) / safe
        self.min_ = float(fr[0]) - lo * self.scale_
        self.data_min_, self.data_max_, self.data_range_ = lo, hi, rng
        self.n_samples_seen_ = int(n)
        set_features_in(self, X, d)
        return self

    def transform(self, X):
        """Scale X: numpy for numpy input, a lazy dask array otherwise."""
        return _transform(self, X, _minmax, "minmax")

    def inverse_transform(self, X):
        """Undo :meth:`transform` (without clipping)."""
        return _transform(self, X, _unminmax, "unminmax")

    def __sklearn_tags__(self):
        return _scaler_tags(super().__sklearn_tags__())


def _minmax(block, est):
    out = np.array(block, copy=True)
    out *= est.scale_.astype(out.dtype)
    out += est.min_.astype(out.dtype)
    if est.clip:
        np.clip(out, est.feature_range[0], est.feature_range[1], out=out)
    return out


def _unminmax(block, est):
    out = np.array(block, copy=True)
    out -= est.min_.astype(out.dtype)
    out /= est.scale_.astype(out.dtype)
    return out


def _unit_rows(block):
    if is_sparse(block):
        data = np.asarray(block.data, dtype=np.float64)
        rows = np.repeat(np.arange(block.shape[0]), np.diff(block.indptr))
        norms = np.sqrt(np.bincount(rows, weights=data * data, minlength=block.shape[0]))
        norms[norms == 0] = 1.0
        return block.__class__(((data / norms[rows]).astype(block.dtype),
                                block.indices.copy(), block.indptr.copy()), shape=block.shape)
    b = np.asarray(block)
    norms = np.sqrt(np.einsum("ij,ij->i", b, b, dtype=np.float64))
    norms[norms == 0] = 1.0
    return (b / norms[:, None]).astype(b.dtype, copy=False)


def normalize_rows(X):
    """Scale every row to unit Euclidean norm (rows of zeros stay zero).

    numpy input gives numpy; a dask array, Zarr array or store path gives a lazy dask array
    (layer ``daskauc-normalize``). The dtype is kept; norms are accumulated in float64.
    Sparse rows stay sparse (an in-memory matrix gives CSR, sparse dask input CSR blocks).
    """
    kind, A = _as_input(X, sparse=True)
    if kind == "numpy":
        return _unit_rows(A)
    return A.map_blocks(_unit_rows, dtype=A.dtype, meta=A._meta,
                        name=f"daskauc-normalize-{tokenize(A.name)}")
