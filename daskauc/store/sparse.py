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

import dask.array as da
import numpy as np
import zarr

from .protocol import StoreIntegrityError

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


class CsrChunkReader:
    """Reads CSR row chunk ``i`` of a sparse store on the worker that needs it: the three
    arrays through :class:`~daskauc.store.dataset.CheckedZarrArray` (each chunk checked
    against the checksum the commit recorded for its position), then their structure
    (pointers from 0 to the values' count, non-decreasing; columns in range, increasing
    within a row), so a damaged or hand-made chunk is an error naming it, never rows that
    no longer line up."""

    def __init__(self, group: zarr.Group, label: str, rows: tuple[int, ...], n_features: int,
                 dtype, checksums: dict[str, int]):
        self.group, self.label, self.rows = group, label, tuple(int(r) for r in rows)
        self.n_features, self.dtype = int(n_features), np.dtype(dtype)
        self.checksums = checksums

    def __call__(self, i: int):
        import scipy.sparse

        from .dataset import CheckedZarrArray

        where = f"{self.label} row chunk {i} ({chunk_path(i)})"
        try:
            arrays = [self.group[f"{chunk_path(i)}/{name}"] for name in PARTS]
        except KeyError:
            raise StoreIntegrityError(f"{where} is missing; write the store again") from None
        parts = []
        for name, z in zip(PARTS, arrays, strict=True):
            if z.shape[0] == 0:
                parts.append(np.zeros(0, dtype=z.dtype))
                continue
            prefix = f"{chunk_path(i)}/{name}/"
            sums = {k: v for k, v in self.checksums.items() if k.startswith(prefix)}
            parts.append(CheckedZarrArray(z, f"{where} {name}", sums)[(slice(None),)])
        indptr, indices, data = parts
        self._check(where, i, indptr, indices, data)
        return scipy.sparse.csr_matrix((data, indices, indptr),
                                       shape=(self.rows[i], self.n_features))

    def _check(self, where: str, i: int, indptr, indices, data) -> None:
        n = self.rows[i]
        if indptr.shape[0] != n + 1 or indptr[0] != 0 or indptr[-1] != data.shape[0] \
                or indices.shape[0] != data.shape[0] or np.any(np.diff(indptr) < 0):
            raise StoreIntegrityError(
                f"{where}: its row pointers do not match its {n} rows and {data.shape[0]} "
                "values; write the store again")
        if data.dtype != self.dtype:
            raise StoreIntegrityError(f"{where}: values of dtype {data.dtype}, the store "
                                      f"says {self.dtype}; write the store again")
        if indices.shape[0]:
            step = np.diff(indices.astype(np.int64))
            starts = indptr[1:-1][(indptr[1:-1] > 0) & (indptr[1:-1] < indices.shape[0])]
            step[starts - 1] = 1  # a new row may start at any column
            if indices.min() < 0 or indices.max() >= self.n_features or np.any(step <= 0):
                raise StoreIntegrityError(
                    f"{where}: column indices out of range [0, {self.n_features}) or not "
                    "increasing within a row; write the store again")
        if not np.isfinite(data).all():
            raise StoreIntegrityError(f"{where}: holds NaN or infinity; write the store again")


def _read_chunk(reader: CsrChunkReader, i: int):
    return reader(i)


def open_csr_X(group: zarr.Group, label: str, name: str, checksums: dict[str, int]) -> da.Array:
    """``X`` of a sparse store as a dask array of CSR row chunks (one task a chunk)."""
    from .._sparse import sparse_meta

    attrs = group.attrs
    n, d = int(attrs["n_samples"]), int(attrs["n_features"])
    cr = int(attrs["chunk_rows"])
    rows = tuple([cr] * (n // cr) + ([n % cr] if n % cr else []))
    dtype = np.dtype(attrs["dtype"])
    reader = CsrChunkReader(group, label, rows, d, dtype, checksums)
    graph = {(name, i, 0): (_read_chunk, reader, i) for i in range(len(rows))}
    return da.Array(graph, name, chunks=(rows, (d,)), meta=sparse_meta(d, dtype))
