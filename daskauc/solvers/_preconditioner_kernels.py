"""Numba kernels of the Nystroem preconditioner: in-place work on the triangles of one matrix.

The preconditioner keeps two triangular factors in one m x m Fortran-ordered float64 matrix
(m = 32,768 is 8.6 GB), so every triangle operation is done in place, column by column (each
column is contiguous in Fortran order); nothing of size m x m is allocated.
"""

from __future__ import annotations

from numba import njit

from .. import _config

_JIT = dict(nogil=True, cache=True, fastmath=_config.FASTMATH)


@njit(**_JIT)
def _mirror_lower_to_upper(
    A,  # INOUT (m, m) float64, Fortran order: A[i, j] = A[j, i] for i < j afterwards
):
    """Copy the strict lower triangle onto the strict upper one (transposed), in 64 x 64
    blocks so that the strided side of the copy stays in cache."""
    m = A.shape[0]
    bs = 64
    for j0 in range(0, m, bs):
        j1 = min(j0 + bs, m)
        for i0 in range(0, j1, bs):
            i1 = min(i0 + bs, m)
            for j in range(j0, j1):
                for i in range(i0, min(i1, j)):
                    A[i, j] = A[j, i]


@njit(**_JIT)
def _mirror_upper_to_lower(
    A,  # INOUT (m, m) float64, Fortran order: A[j, i] = A[i, j] for i < j afterwards
):
    """Copy the strict upper triangle onto the strict lower one (transposed), blockwise."""
    m = A.shape[0]
    bs = 64
    for j0 in range(0, m, bs):
        j1 = min(j0 + bs, m)
        for i0 in range(0, j1, bs):
            i1 = min(i0 + bs, m)
            for j in range(j0, j1):
                for i in range(i0, min(i1, j)):
                    A[j, i] = A[i, j]


@njit(**_JIT)
def _scale_lower_add_diagonal(
    A,  # INOUT (m, m) float64, Fortran order: lower triangle (with diagonal) scaled
    scale,  # scalar: multiplies the lower triangle and the diagonal
    shift,  # scalar: then added to the diagonal
):
    """``lower(A) <- scale * lower(A) + shift * I`` (the strict upper triangle is untouched)."""
    m = A.shape[0]
    for j in range(m):
        col = A[:, j]
        for i in range(j, m):
            col[i] *= scale
        col[j] += shift

