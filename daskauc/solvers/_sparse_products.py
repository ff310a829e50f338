"""Products of CSR row blocks for the batch solvers (PRSVM+ Newton, LSAUC): O(nnz) each.

Every function takes one canonical ``scipy.sparse.csr_matrix`` row block
(:mod:`daskauc._sparse`) and returns dense float64 results: r-vectors, n-vectors of the
block's rows, or the r x r Gram matrix of the exact LSAUC route. scipy computes a product of a
float32 block with a float64 vector in float64 (it upcasts the stored values, exactly), so
float32 and float64 blocks give the products of the dense float64-accumulating kernels of
:mod:`daskauc.solvers._pairwise_kernels` up to the order of the sums. No sparse matrix is
ever made dense: the cost of a block is its non-zeros plus one r-vector (or the r x r Gram
matrix, whose size the exact route bounds: :data:`daskauc.solvers.stats.EXACT_MAX_BYTES`).

Plain scipy rather than numba kernels: ``block @ v`` and ``block.T @ u`` are the compiled
CSR / CSC loops already, O(nnz) with one pass over the values.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse


def squared(block) -> scipy.sparse.csr_matrix:
    """The block with its values squared in float64 (the same structure)."""
    data = np.square(block.data, dtype=np.float64)
    return scipy.sparse.csr_matrix((data, block.indices, block.indptr), shape=block.shape)


def as_float64(block) -> scipy.sparse.csr_matrix:
    """The block with float64 values (a float64 block as it is)."""
    return block if block.dtype == np.float64 else block.astype(np.float64)


def row_squared_norms(block) -> np.ndarray:
    """``||x_i||^2`` of every row, float64."""
    return np.asarray(squared(block).sum(axis=1)).ravel()


def column_sums(block, weights: np.ndarray) -> np.ndarray:
    """``X^T weights`` in float64 (scipy's ``sum(axis=0)`` adds float32 values in float32)."""
    return block.T @ np.asarray(weights, dtype=np.float64)


def gram(block) -> np.ndarray:
    """``X^T X`` of the block as a dense (r, r) float64 array, from the sparse product (its
    non-zeros written into the dense matrix: no sparse matrix is made dense)."""
    X = as_float64(block)
    S = (X.T @ X).tocoo()
    S.sum_duplicates()
    out = np.zeros((block.shape[1], block.shape[1]))
    out[S.row, S.col] = S.data
    return out


def centred_scatter(block) -> tuple[int, np.ndarray, np.ndarray, float]:
    """``(n, mean, M2, max_norm)`` of the block's rows: ``M2 = sum (x - mean)(x - mean)^T =
    X^T X - n mean mean^T`` (dense r x r, float64) and the largest row norm."""
    n, r = block.shape
    if n == 0:
        return 0, np.zeros(r), np.zeros((r, r)), 0.0
    mean = column_sums(block, np.ones(n)) / n
    M2 = gram(block)
    M2 -= n * np.outer(mean, mean)
    return int(n), mean, M2, float(np.sqrt(row_squared_norms(block).max()))


def class_scatters(block, pos: np.ndarray) -> tuple:
    """``(n+, n-, mean+, mean-, M2+, M2-, max_norm+, max_norm-)`` of the block's rows by the
    boolean mask ``pos`` (the fields of :class:`daskauc.solvers.stats.ClassStats`)."""
    (n_p, m_p, M_p, x_p), (n_n, m_n, M_n, x_n) = (centred_scatter(block[pos]),
                                                  centred_scatter(block[~pos]))
    return n_p, n_n, m_p, m_n, M_p, M_n, x_p, x_n
