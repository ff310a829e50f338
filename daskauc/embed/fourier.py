"""Random Fourier features of the Gaussian kernel (Rahimi & Recht), lazy over row chunks.

Sparse rows (CSR blocks) are read as their non-zeros: ``X W`` is a sparse x dense product
(W is ``d x D``, each non-zero reads one contiguous row of it); W itself is dense, at most
``MAX_CENTRE_BYTES`` (2 GiB) of float64 on sparse rows. The features are dense.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._compute import compute
from .._params import POSITIVE, FloatDType, Interval, check_params, seed_sequence
from .._registry import model_class
from .._sparse import is_sparse, is_sparse_dask
from .._validation import (
    as_row_chunked,
    check_not_empty,
    check_predict_X,
    preserved_dtypes,
    set_features_in,
)
from .nystroem import _bandwidth_graph, _gamma_from_b
from .sparse_rows import check_centre_bytes

__all__ = ["RandomFourierFeatures"]



def _rff_block(block, W, b, scale):
    """``scale * cos(X W + b)`` for one row block, in W's dtype."""
    if is_sparse(block):
        P = np.ascontiguousarray(block.astype(W.dtype, copy=False) @ W)
    else:
        X = np.ascontiguousarray(block, dtype=W.dtype)
        P = X @ W
    P += b
    np.cos(P, out=P)
    P *= scale
    return P


@model_class(no_cli="a random Fourier map: fit it in Python (daskauc embed writes k-means "
                     "Nystroem embeddings)")
class RandomFourierFeatures(TransformerMixin, BaseEstimator):
    """Random Fourier features ``z(x) = sqrt(2/D) cos(Omega x + b)`` of the Gaussian kernel.

    Parameters
    ----------
    n_components : int, default 1600
        D, the number of features.
    gamma : float, optional
        Kernel width in ``exp(-gamma ||x - z||^2)``; default ``1 / b`` with ``b`` the mean of
        ``||x_i - xbar||^2`` over the first ``min(n, 80_000)`` rows (as for KMeansNystroem).
    random_state : None, int, SeedSequence or Generator
    dtype : None, float32 or float64
        Working and output dtype; default: the input's.

    Attributes
    ----------
    random_weights_ : ndarray (n_features, D), float64
        Omega^T, entries ~ N(0, 2 gamma) (scikit-learn's RBFSampler layout).
    random_offset_ : ndarray (D,), float64, entries ~ U[0, 2 pi)
    gamma_ : float
    n_features_in_ : int

    Notes
    -----
    ``E[z(x) . z(y)] = exp(-gamma ||x - y||^2)`` because the Gaussian kernel is the Fourier
    transform of N(0, 2 gamma I) (Bochner); the error of one draw is O(1 / sqrt(D)).

    References
    ----------
    A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NIPS 2007.
    """

    #: fit / transform read sparse rows (CSR blocks); the features are dense
    _sparse_rows = True

    _params = {
        "n_components": Interval(int, 1),
        "gamma": [POSITIVE, None],
        "dtype": [None, FloatDType()],
    }

    def __init__(self, n_components=1600, *, gamma=None, random_state=None, dtype=None):
        self.n_components = n_components
        self.gamma = gamma
        self.random_state = random_state
        self.dtype = dtype

    def fit(self, X, y=None):
        """Draw Omega and b (reads the first rows of X only when gamma is None)."""
        check_params(self, self._params)
        Xd = as_row_chunked(X, dtype=self.dtype, sparse=True)
        check_not_empty(Xd.shape, min_samples=2 if self.gamma is None else 1)
        d = Xd.shape[1]
        if is_sparse_dask(Xd):
            check_centre_bytes(self.n_components, d, "Fourier features")
        set_features_in(self, X, d)
        if self.gamma is None:
            gamma = _gamma_from_b(compute(_bandwidth_graph(Xd))[0])
        else:
            gamma = float(self.gamma)
        rng = np.random.default_rng(seed_sequence(self.random_state))
        self.random_weights_ = np.sqrt(2.0 * gamma) * rng.standard_normal((d, self.n_components))
        self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, size=self.n_components)
        self.gamma_ = gamma
        self.n_features_in_ = int(d)
        return self

    def _args(self, dtype):
        W = np.ascontiguousarray(self.random_weights_, dtype=dtype)
        b = np.asarray(self.random_offset_, dtype=dtype)
        return W, b, dtype.type(np.sqrt(2.0 / self.n_components))

    def transform(self, X):
        """``z(X)``: numpy for numpy input, a lazy dask array (``daskauc-rff``) otherwise."""
        check_is_fitted(self, "random_weights_")
        D = self.random_weights_.shape[1]
        Xv = check_predict_X(self, X, dtype=self.dtype)
        if isinstance(Xv, da.Array):
            return Xv.map_blocks(_rff_block, *self._args(Xv.dtype), chunks=(Xv.chunks[0], (D,)),
                                 dtype=Xv.dtype, token="daskauc-rff",
                                 meta=np.empty((0, 0), Xv.dtype))
        return _rff_block(Xv, *self._args(Xv.dtype))

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "random_weights_")
        D = self.random_weights_.shape[1]
        return np.asarray([f"randomfourierfeatures{i}" for i in range(D)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = preserved_dtypes(self.dtype)
        tags.input_tags.sparse = True
        return tags
