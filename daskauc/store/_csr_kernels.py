"""Numba kernel of the sparse store's reader: the structure check of a CSR row chunk in one
pass over its arrays (:class:`daskauc.store.dataset.CsrChunkReader`)."""

from __future__ import annotations

import math

from numba import njit

#: what :func:`csr_fault` finds: nothing, the row pointers, the column indices, a value
CSR_OK, CSR_POINTERS, CSR_COLUMNS, CSR_VALUES = 0, 1, 2, 3


@njit(nogil=True, cache=True)
def csr_fault(
    indptr,     # IN  (n + 1,) row pointers
    indices,    # IN  (nnz,) column indices
    data,       # IN  (nnz,) values
    n_rows,     # scalar: the rows the chunk must hold
    n_features, # scalar: columns are in [0, n_features)
):
    """The first fault of a CSR chunk, or :data:`CSR_OK`: pointers that are not ``n_rows + 1``
    non-decreasing values from 0 to the values' count (:data:`CSR_POINTERS`), a column out of
    range or not increasing within its row (:data:`CSR_COLUMNS`), a NaN or infinite value
    (:data:`CSR_VALUES`)."""
    nnz = data.shape[0]
    if indptr.shape[0] != n_rows + 1 or indices.shape[0] != nnz:
        return CSR_POINTERS
    if indptr[0] != 0 or indptr[n_rows] != nnz:
        return CSR_POINTERS
    for i in range(n_rows):
        lo = indptr[i]
        hi = indptr[i + 1]
        if hi < lo:
            return CSR_POINTERS
        previous = -1
        for k in range(lo, hi):
            c = indices[k]
            if c <= previous or c >= n_features:
                return CSR_COLUMNS
            previous = c
    for k in range(nnz):
        if not math.isfinite(data[k]):
            return CSR_VALUES
    return CSR_OK
