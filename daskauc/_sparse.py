"""Sparse rows: scipy CSR row blocks, from in-memory matrices and dask arrays of them.

daskauc streams sparse data as a dask array whose chunks are ``scipy.sparse.csr_matrix``
row blocks (one column chunk, ``_meta`` an empty ``csr_matrix``): dask concatenates, slices
and ships them like numpy blocks, and every consumer takes one block at a time, so memory
follows the non-zeros of a chunk, never rows x features. A block is in canonical form
(indices sorted within each row, no duplicates), float32 or float64 values, finite; kernels
read its three arrays (:func:`csr_parts`). The weight vectors stay dense (d floats).

``scipy.sparse`` matrices (``csr_matrix``) rather than sparse arrays (``csr_array``): the
blocks are 2-D either way and a dask array's ``_meta`` is what decides what its blocks are;
dask registers its concatenation for both, and ``csr_matrix @ w`` gives a 1-D ``w``-like
result on every scipy daskauc supports.

The ground floor: nothing here imports another daskauc module but ``_config``.
"""

from __future__ import annotations

import uuid
from typing import Any

import dask.array as da
import numpy as np

from . import _config

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def is_sparse(X: Any) -> bool:
    """True for a scipy sparse matrix or array (any format)."""
    import scipy.sparse

    return scipy.sparse.issparse(X)


def is_sparse_dask(X: Any) -> bool:
    """True for a dask array whose blocks are scipy sparse matrices."""
    return isinstance(X, da.Array) and is_sparse(X._meta)


def is_sparse_frame(X: Any) -> bool:
    """True for a pandas DataFrame whose every column is a ``pd.SparseDtype``."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "sparse") or not len(dtypes):
        return False
    import pandas as pd

    return all(isinstance(t, pd.SparseDtype) for t in dtypes)


def sparse_meta(n_features: int, dtype) -> Any:
    """The ``_meta`` of a sparse dask array: an empty CSR block of ``n_features`` columns."""
    import scipy.sparse

    return scipy.sparse.csr_matrix((0, int(n_features)), dtype=np.dtype(dtype))


def float_dtype_of(dtype, requested=None) -> np.dtype:
    """float32 stays, other numbers become float64 (``requested`` wins when given)."""
    if requested is not None:
        requested = np.dtype(requested)
        if requested not in FLOAT_DTYPES:
            raise TypeError(f"dtype must be float32 or float64, got {requested}")
        return requested
    dtype = np.dtype(dtype)
    if dtype in FLOAT_DTYPES:
        return dtype
    if dtype.kind in "iubf":
        return np.dtype(np.float64)
    raise TypeError(f"sparse values must be real numbers; got dtype {dtype}")


def canonical_csr(X: Any, *, name: str = "X", dtype=None, first_row: int = 0,
                  check_finite: bool = True):
    """``X`` (any scipy sparse format) as a canonical ``csr_matrix`` of float32/float64.

    Duplicate entries of a row are summed and indices sorted (scipy's meaning of an
    uncanonical matrix); NaN or infinity is a ``ValueError`` naming the first such row
    (counted from ``first_row``). Never densifies: a copy only where a conversion needs
    one."""
    import scipy.sparse

    if not isinstance(X, scipy.sparse.csr_matrix):
        X = scipy.sparse.csr_matrix(X)
    target = float_dtype_of(X.dtype, dtype)
    if X.dtype != target:
        X = X.astype(target)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    if check_finite:
        check_finite_csr(X, name, first_row)
    return X


def check_finite_csr(X, name: str = "X", first_row: int = 0) -> None:
    """NaN or infinity among the stored values is a ``ValueError`` naming the first row."""
    finite = np.isfinite(X.data)
    if not finite.all():
        pos = int(np.argmin(finite))
        row = int(np.searchsorted(X.indptr, pos, side="right")) - 1
        raise ValueError(f"{name} contains NaN or infinity (first in row {first_row + row}); "
                         "impute or drop those values before fitting")


def csr_parts(block) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of a CSR block, for the numba kernels."""
    return block.indptr, block.indices, block.data


def sparse_chunk_rows(n_rows: int, nnz: int, itemsize: int, index_itemsize: int = 4) -> int:
    """Rows per chunk so that a chunk's non-zeros (values and column indices) are about
    ``_config.TARGET_CHUNK_BYTES``, from the mean number of non-zeros per row."""
    per_row = max(1.0, nnz / max(1, n_rows)) * (itemsize + index_itemsize) + 8
    rows = int(_config.TARGET_CHUNK_BYTES // per_row)
    rows = int(min(_config.MAX_CHUNK_ROWS, max(_config.MIN_CHUNK_ROWS, rows)))
    return max(1, min(rows, int(n_rows)))


def sparse_row_blocks(X, rows: int | None = None, *, name: str = "X", dtype=None,
                      check_finite: bool = True) -> da.Array:
    """A dask array of canonical CSR row blocks of the in-memory sparse matrix ``X``.

    The blocks are row slices of one canonical copy (validated here, once, before any work:
    NaN or infinity names its row); ``rows`` defaults to :func:`sparse_chunk_rows`."""
    X = canonical_csr(X, name=name, dtype=dtype, check_finite=check_finite)
    n, d = X.shape
    if rows is None:
        rows = sparse_chunk_rows(n, X.nnz, X.dtype.itemsize, X.indices.dtype.itemsize)
    key = f"daskauc-sparse-{uuid.uuid4().hex}"
    starts = list(range(0, n, rows)) or [0]
    graph, sizes = {}, []
    for i, a in enumerate(starts):
        block = X[a:a + rows]
        graph[(key, i, 0)] = block
        sizes.append(block.shape[0])
    return da.Array(graph, key, chunks=(tuple(sizes), (d,)), meta=sparse_meta(d, X.dtype))


def frame_as_csr(X) -> Any:
    """A pandas DataFrame of sparse columns as a CSR matrix (its fill values must be 0)."""
    fills = {c: t.fill_value for c, t in X.dtypes.items() if t.fill_value != 0
             and not (isinstance(t.fill_value, float) and np.isnan(t.fill_value))}
    if fills:
        raise ValueError(f"sparse columns with a fill value other than 0 ({fills}) are not "
                         "sparse rows; convert them with .sparse.to_dense() first")
    return X.sparse.to_coo().tocsr()


def canonical_blocks(X: da.Array, *, name: str = "X", dtype=None,
                     check_finite: bool = True) -> da.Array:
    """A dask array of sparse blocks made canonical CSR of a float dtype, block by block
    (lazily: the check of each block runs when it is read)."""
    target = float_dtype_of(X.dtype, dtype)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X.map_blocks(_canonical_block, name, target, check_finite, dtype=target,
                        meta=sparse_meta(X.shape[1], target), token="daskauc-sparse-check")


def _canonical_block(block, name, dtype, check_finite, block_info=None):
    first = block_info[0]["array-location"][0][0] if block_info else 0
    return canonical_csr(block, name=name, dtype=dtype, first_row=first,
                         check_finite=check_finite)


def sparse_squares(block) -> np.ndarray:
    """``[sum of the squared values]`` of a block, float64 (one value per block)."""
    data = np.asarray(block.data, dtype=np.float64)
    return np.array([float(data @ data)])


def nonzeros_per_row(X: da.Array) -> float | None:
    """Mean non-zeros a row of a sparse dask array, when known without reading it: from its
    blocks held in memory, or from the chunk counts a sparse store records (its reader's
    ``chunk_nonzeros``); None otherwise."""
    graph = dict(X.__dask_graph__())
    nnz = 0
    for i in range(X.numblocks[0]):
        value = graph.get((X.name, i, 0))
        if is_sparse(value):
            nnz += value.nnz
            continue
        counts = getattr(value[1], "chunk_nonzeros", None) if isinstance(value, tuple) \
            and len(value) == 3 else None
        if counts is None or value[2] >= len(counts):
            return None
        nnz += counts[value[2]]
    return nnz / max(1, X.shape[0])


def sparse_nbytes(block) -> int:
    """Bytes of a CSR block's three arrays."""
    return int(block.data.nbytes + block.indices.nbytes + block.indptr.nbytes)
