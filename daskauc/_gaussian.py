"""The Gaussian kernel block rows x centres, ``k(x, c) = exp(-gamma ||x - c||^2)``.

The k-means Nystroem map (:mod:`daskauc.embed.nystroem`) and the kernel-basis solvers
(:mod:`daskauc.solvers.kernel_basis`) compute kernel blocks here, through one exponential
(:mod:`daskauc._gaussian_kernels`), in two forms:

* :func:`gaussian_block` (the Nystroem map): the Gram block ``X U^T`` by BLAS in the rows'
  dtype, which a numba kernel turns in place into ``exp(-gamma max(||x||^2 + ||u||^2 - 2 x.u,
  0))``; :func:`sparse_gaussian_block` the same for CSR rows (a sparse x dense product, the
  norms from the non-zeros);
* :func:`kernel_block` (the kernel-basis solvers): rows and centres shifted by the centres'
  mean and augmented (:class:`GaussianCentres`, :func:`augmented_rows`) so that one BLAS
  product gives the exponents ``-gamma ||x - c||^2`` themselves. The solvers' passes take the
  same product tile by tile and fold the exponential into the products they need.

The two forms round differently (the shift, the norms summed in float64, gamma inside the
product, a float32 polynomial of degree 6 instead of 7), and the models fitted with each are
recorded bit for bit, so both stay.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._gaussian_kernels import _exp_tile, _gauss_from_gram
from ._params import POSITIVE, check_param


def exp_bits(dtype, n: int) -> np.ndarray:
    """The row buffer (``n`` values) of the exponential's powers of two for ``dtype`` blocks."""
    return np.empty(n, np.int32 if dtype == np.float32 else np.int64)


# ----------------------------------------------------------------- the Nystroem map's form


def gaussian_block(X: np.ndarray, U: np.ndarray, usq: np.ndarray, gamma: float) -> np.ndarray:
    """``exp(-gamma ||x_i - u_j||^2)`` for one block, in X's dtype (U, usq already cast)."""
    K = X @ U.T
    xsq = np.einsum("ij,ij->i", X, X)
    _gauss_from_gram(xsq, usq, exp_bits(K.dtype, U.shape[0]), K, gamma)
    return K


def sparse_gaussian_block(X, UT: np.ndarray, usq: np.ndarray, gamma: float) -> np.ndarray:
    """:func:`gaussian_block` of CSR rows ``X`` (never made dense), in X's dtype.

    ``UT`` is ``U^T`` (d x v, C-contiguous, X's dtype): the product ``X U^T`` then reads one
    contiguous row of v values per non-zero. ``||x||^2`` is summed over the row's non-zeros in
    float64 and rounded to X's dtype.
    """
    K = np.ascontiguousarray(X @ UT)
    data = np.asarray(X.data, dtype=np.float64)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    xsq = np.bincount(rows, weights=data * data, minlength=X.shape[0]).astype(K.dtype)
    return gaussian_from_gram(K, xsq, usq, gamma)


def gaussian_from_gram(K: np.ndarray, xsq: np.ndarray, usq: np.ndarray,
                       gamma: float) -> np.ndarray:
    """The Gram block ``K = x_i . u_j`` (C-contiguous, float32/float64) turned in place into
    ``exp(-gamma max(xsq_i + usq_j - 2 K_ij, 0))`` (``usq`` in K's dtype); returns K."""
    _gauss_from_gram(xsq, usq, exp_bits(K.dtype, K.shape[1]), K, gamma)
    return K


# ------------------------------------------------------------ the kernel-basis form


@dataclass(frozen=True)
class GaussianCentres:
    """What a task needs to compute Gaussian kernel tiles against m centres.

    ``CaT`` (d + 2, m) in the working dtype holds ``[2 gamma c'; -gamma; -gamma ||c'||^2]``
    with ``c' = c - shift``, so that ``[x', ||x'||^2, 1] @ CaT = -gamma ||x - c||^2``;
    ``shift`` (the centres' mean) keeps the norms small against the distances.
    """

    CaT: np.ndarray
    shift: np.ndarray
    gamma: float

    @property
    def m(self) -> int:
        return int(self.CaT.shape[1])

    @property
    def dtype(self):
        return self.CaT.dtype


def gaussian_centres(centres, gamma: float, dtype=np.float64) -> GaussianCentres:
    """Prepare ``centres`` (m x d) and ``gamma`` for tile products in ``dtype``."""
    C = np.asarray(centres, dtype=np.float64)
    if C.ndim != 2 or C.shape[0] < 1 or C.shape[1] < 1:
        raise ValueError(f"centres must be a non-empty 2-D array; got shape {C.shape}")
    if not np.isfinite(C).all():
        raise ValueError("centres contain NaN or infinity")
    gamma = check_param("gamma", gamma, POSITIVE)
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype must be float32 or float64; got {dtype}")
    # rows and centres must be shifted by the very same numbers: round the shift to the
    # working dtype first (a float64 shift for the centres against its float32 rounding for
    # the rows moved float32 distances by up to eps * |shift|)
    shift = C.mean(axis=0).astype(dtype).astype(np.float64)
    Cs = C - shift
    CaT = np.empty((C.shape[1] + 2, C.shape[0]))
    CaT[:-2] = 2.0 * gamma * Cs.T
    CaT[-2] = -gamma
    CaT[-1] = -gamma * np.einsum("ij,ij->i", Cs, Cs)
    return GaussianCentres(CaT=np.ascontiguousarray(CaT, dtype=dtype),
                           shift=shift.astype(dtype), gamma=float(gamma))


def augmented_rows(block, gc: GaussianCentres) -> np.ndarray:
    """``[x - shift, ||x - shift||^2, 1]`` per row, in the working dtype."""
    X = np.asarray(block)
    d = gc.CaT.shape[0] - 2
    if X.ndim != 2 or X.shape[1] != d:
        raise ValueError(f"rows must have {d} features to match the centres; got {X.shape}")
    Xa = np.empty((X.shape[0], d + 2), dtype=gc.dtype)
    np.subtract(X, gc.shift, out=Xa[:, :d], casting="unsafe")
    Xs = Xa[:, :d]
    Xa[:, d] = np.einsum("ij,ij->i", Xs, Xs, dtype=np.float64)
    Xa[:, d + 1] = 1.0
    return Xa


def kernel_block(block, gc: GaussianCentres) -> np.ndarray:
    """The kernel matrix ``k(x_i, c_j)`` of a (small) block of rows, in the working dtype."""
    Xa = augmented_rows(block, gc)
    G = Xa @ gc.CaT
    if G.size:
        _exp_tile(G, exp_bits(gc.dtype, G.shape[1]))
    return G
