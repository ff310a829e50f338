"""Sparse dataset stores: ``X`` kept as CSR row chunks (format version 1).

Layout (docs/store_format.md, "Sparse dataset stores"): the group attributes say
``rows = "csr"`` and ``sparse_format = 1``, with ``n_samples``, ``n_features``,
``n_nonzero``, ``chunk_rows``, ``dtype``, the class counts and the provenance as in a dense
store. Row chunk ``i`` (rows ``i * chunk_rows`` up to the next chunk) is the subgroup
``Xcsr/<i, six digits>`` holding three 1-D arrays of one Zarr chunk each:

* ``indptr``: int64, its rows + 1 entries, from 0 to the chunk's non-zeros;
* ``indices``: int32 (int64 from 2**31 features), the column of each value, increasing
  within a row;
* ``data``: the values (float32 or float64), finite.

``y`` is the same int8 array as in a dense store, chunked by the same rows. Every array is
written by :func:`daskauc.store.write.create_array` (CRC32C in each chunk, every chunk
present) and committed by the same protocol (:mod:`daskauc.store.protocol`), so a missing,
truncated, altered or swapped chunk file is detected exactly as for a dense store: each read
checks the chunk against the checksum the commit recorded for its position.

Why one subgroup per row chunk rather than three long arrays: the chunks' numbers of
non-zeros differ, and a Zarr array's chunks are all one size, so a row chunk of three long
arrays would straddle Zarr chunks that its neighbours also write (a race between parallel
writers) and read part of its neighbours' bytes. One Zarr chunk per array per row chunk
keeps each write and each checked read to exactly one row chunk.
"""

from __future__ import annotations

import numpy as np
import zarr

#: the group attribute that says a dataset store keeps CSR rows, and its format version
ROWS_ATTR, CSR = "rows", "csr"
FORMAT_ATTR, FORMAT_VERSION = "sparse_format", 1
GROUP = "Xcsr"
PARTS = ("indptr", "indices", "data")


def is_sparse_store(attrs: dict) -> bool:
    """True for the attributes of a store that keeps CSR rows (and a format it can read)."""
    if attrs.get(ROWS_ATTR) != CSR:
        return False
    version = attrs.get(FORMAT_ATTR)
    if version != FORMAT_VERSION:
        raise ValueError(f"this store keeps sparse rows in format {version!r}; this daskauc "
                         f"reads format {FORMAT_VERSION}: write it again with this version")
    return True


def chunk_path(i: int) -> str:
    return f"{GROUP}/{i:06d}"


def index_dtype(n_features: int) -> np.dtype:
    return np.dtype(np.int32 if n_features < 2**31 else np.int64)


def write_csr_chunk(group: zarr.Group, i: int, block, *, compressors="auto") -> int:
    """Write CSR row chunk ``i`` (a canonical ``csr_matrix``) under ``group``; return its
    non-zeros."""
    from .write import create_array

    sub = group.require_group(chunk_path(i))
    idx = index_dtype(block.shape[1])
    parts = (np.asarray(block.indptr, dtype=np.int64), np.asarray(block.indices, dtype=idx),
             np.asarray(block.data))
    for name, arr in zip(PARTS, parts, strict=True):
        z = create_array(sub, name, shape=arr.shape, chunks=(max(1, arr.shape[0]),),
                         dtype=arr.dtype, compressors=compressors)
        if arr.shape[0]:
            z[:] = arr
    return int(block.nnz)
