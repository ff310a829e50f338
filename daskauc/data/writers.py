"""Writing parsed row chunks into a store's arrays, through temporary spill files.

* :class:`_DirectWriter` writes the chunks in file order.
* :class:`_ShuffleWriter` writes them in a uniformly random row order with bounded memory:
  every row is sent to its destination chunk's region of a temporary spill file as its
  chunk is parsed, then each destination chunk is read back, put in its final order and
  written. The permutation itself is a memory-mapped spill file too.
* :class:`_SparseWriter` and :class:`_SparseShuffleWriter` do the same for CSR chunks (a
  sparse store's rows); a shuffled sparse row is spilled to its destination chunk's own
  append-only files, as its size (its non-zeros) is known only once it is parsed.
* All spill the label codes and write ``y`` from them once the label set is known (a pass
  over 4 bytes per row, not over ``X``).
* The spill files live beside a local store (:func:`_spill_dir`; the same file system) and
  their size counts in the free space a text ingest needs (:func:`_check_text_space`).
* :class:`_GuardedTarget` is the Zarr target of a dask write that refuses writes once the
  write has failed.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from ..store.protocol import is_url, owned_tmp_name, remove_stale, resolve_path
from ..store.sparse import (
    CSR,
    FORMAT_ATTR,
    FORMAT_VERSION,
    GROUP,
    ROWS_ATTR,
    index_dtype,
    write_csr_chunk,
)
from ..store.write import Gate
from .parse import _Chunk
from .space import _check_free_space, _check_store_space, _nbytes


def _check_text_space(store, rows: int, d: int, itemsize: int, shuffle: bool) -> None:
    """The free space a text ingest needs once its first scan knows the rows: X and y, the
    label codes' spill file, and the shuffle's spill files (beside a local store; in the
    temporary directory for a URL)."""
    spill = 4 * rows  # label codes
    if shuffle:  # X, each row's place in its chunk, the permutation
        spill += rows * (d * itemsize + 4 + _perm_itemsize(rows))
    if is_url(os.fspath(store)):
        _check_store_space(store, rows, d, itemsize)
        _check_free_space(os.path.join(tempfile.gettempdir(), "spill"), spill,
                          "the spill files of the ingest")
        return
    _check_free_space(store, rows * (d * itemsize + 1) + spill,
                      f"X and y uncompressed and {_nbytes(spill)} of spill files")


def _check_sparse_text_space(store, rows: int, values: int, itemsize: int,
                             index_itemsize: int, shuffle: bool) -> None:
    """The free space a sparse text ingest needs once its first scan knows the rows and the
    non-zeros: the CSR arrays and ``y``, the label codes' spill file, and the shuffle's spill
    files (each row's place, label code and non-zeros, its indices and values, and the
    permutation)."""
    nonzeros = values * (itemsize + index_itemsize)
    spill = 4 * rows  # label codes
    if shuffle:
        spill += rows * (24 + _perm_itemsize(rows)) + nonzeros
    stored = nonzeros + rows * (8 + 1)  # indptr, y
    if is_url(os.fspath(store)):
        _check_free_space(os.path.join(tempfile.gettempdir(), "spill"), spill,
                          "the spill files of the ingest")
        return
    _check_free_space(store, stored + spill,
                      f"the sparse rows and y uncompressed and {_nbytes(spill)} of spill "
                      "files")


def _spill_dir(store) -> str:
    """A temporary directory beside a local target (same filesystem), named after this host
    and process so that the next ingest there removes it if this one is killed."""
    p = os.fspath(store)
    if is_url(p):
        return tempfile.mkdtemp(prefix=".daskauc-spill-")
    parent = os.path.dirname(resolve_path(p))
    os.makedirs(parent, exist_ok=True)
    prefix = os.path.join(parent, ".daskauc-spill-")
    remove_stale(prefix)
    path = owned_tmp_name(prefix)
    os.mkdir(path)
    return path


class _DirectWriter:
    """Write chunks in file order; spill label codes to a temporary file."""

    def __init__(self, zX, spill: str, cr: int, known_rows: bool):
        self.zX, self.cr, self.known = zX, cr, known_rows
        self.codes_path = os.path.join(spill, "codes.i32")
        self.codes_file = open(self.codes_path, "wb")  # noqa: SIM115 - closed in finish
        self.n = 0

    def close(self) -> None:
        self.codes_file.close()

    def write(self, chunk: _Chunk) -> None:
        m = chunk.X.shape[0]
        a, b = self.n, self.n + m
        if not self.known:
            self.zX.resize((b, self.zX.shape[1]))
        self.zX[a:b] = chunk.X
        chunk.codes.tofile(self.codes_file)
        self.n = b

    def finish(self, zy, lut: np.ndarray) -> np.ndarray:
        self.close()
        counts = np.zeros(2, dtype=np.int64)
        for a in range(0, self.n, self.cr):
            m = min(self.cr, self.n - a)
            codes = np.fromfile(self.codes_path, dtype=np.int32, count=m, offset=4 * a)
            _write_labels(zy, a, lut[codes], counts)
        return counts


class _SparseWriter(_DirectWriter):
    """Write CSR chunks in file order as a sparse store's row chunks
    (:func:`daskauc.store.sparse.write_csr_chunk`); label codes spilled as for dense rows."""

    def __init__(self, group, spill: str, cr: int):
        super().__init__(None, spill, cr, known_rows=True)
        self.group, self.n_chunks, self.nnz = group, 0, []
        group.require_group(GROUP)

    def write(self, chunk: _Chunk) -> None:
        self.nnz.append(write_csr_chunk(self.group, self.n_chunks, chunk.X))
        chunk.codes.tofile(self.codes_file)
        self.n_chunks += 1
        self.n += chunk.X.shape[0]

    def attrs(self) -> dict:
        return _csr_attrs(self.nnz)


def _csr_attrs(nnz: list[int]) -> dict:
    """The attributes of a sparse store whose row chunks hold ``nnz`` non-zeros each."""
    return {ROWS_ATTR: CSR, FORMAT_ATTR: FORMAT_VERSION, "n_nonzero": int(sum(nnz)),
            "chunk_nonzeros": [int(c) for c in nnz]}


def _write_labels(zy, a: int, yb: np.ndarray, counts: np.ndarray) -> None:
    """Write ``yb`` to ``y`` from row ``a``; add its (negatives, positives) to ``counts``."""
    zy[a : a + yb.shape[0]] = yb
    pos = int(np.count_nonzero(yb > 0))
    counts += (yb.shape[0] - pos, pos)


def _perm_itemsize(n: int) -> int:
    return 4 if n < 2**31 else 8


def _permutation_file(spill: str, n: int, seed) -> tuple[np.memmap, np.ndarray]:
    """``default_rng(seed).permutation(n)`` in a memory-mapped file of ``spill``: the map
    and a plain ndarray view of it (``Generator.shuffle`` of a memmap is 70x slower)."""
    idx = np.dtype(np.int32 if _perm_itemsize(n) == 4 else np.int64)
    perm_map = np.memmap(os.path.join(spill, "perm.bin"), dtype=idx, mode="w+", shape=(n,))
    perm = perm_map.view(np.ndarray)
    step = 1 << 22
    for a in range(0, n, step):
        perm[a : a + step] = np.arange(a, min(n, a + step), dtype=idx)
    np.random.default_rng(seed).shuffle(perm)  # = permutation(n), in place
    return perm_map, perm


def _destinations(final: np.ndarray, cr: int):
    """The rows of a parsed chunk grouped by destination chunk: ``order`` (the chunk's rows,
    stable by destination) and, per destination ``j``, the slice ``s0:s1`` of ``order``."""
    dest = final // cr
    order = np.argsort(dest, kind="stable")
    js, starts = np.unique(dest[order], return_index=True)
    ends = np.append(starts[1:], final.shape[0])
    return order, zip(js.tolist(), starts.tolist(), ends.tolist(), strict=True)


class _ShuffleWriter:
    """Bounded-memory shuffle: spill each row into its destination chunk's region, then
    read every destination chunk back, put its rows in their final order and write it.

    The final order is a uniform random permutation ``perm`` (row ``i`` goes to position
    ``perm[i]``), drawn from the seed: the same as ``default_rng(seed).permutation(n)``. It
    lives in a memory-mapped file of the spill directory, and each spilled row's position in
    its destination chunk is spilled beside it, so the memory held does not grow with the
    rows: ``permutation(n)`` and its inverse (``argsort``) held 16-24 bytes a row, 24 GB for
    the billion rows a first scan can report.
    """

    def __init__(self, zX, spill: str, n: int, cr: int, d: int, dtype, seed):
        self.zX, self.cr, self.d, self.dtype, self.n_total = zX, cr, d, dtype, n
        self.perm_map, self.perm = _permutation_file(spill, n, seed)
        self.fill = np.zeros(-(-n // cr), dtype=np.int64)
        self.row_bytes = d * dtype.itemsize
        self.x_path = os.path.join(spill, "X.bin")
        self.c_path = os.path.join(spill, "codes.i32")
        self.l_path = os.path.join(spill, "local.i32")  # each row's place in its chunk
        self.x_fd = os.open(self.x_path, os.O_RDWR | os.O_CREAT, 0o600)
        self.c_fd = os.open(self.c_path, os.O_RDWR | os.O_CREAT, 0o600)
        self.l_fd = os.open(self.l_path, os.O_RDWR | os.O_CREAT, 0o600)
        self.n = 0

    def close(self) -> None:
        """Close the spill files once (``finish`` closes them and the caller's ``finally``
        again): a second ``os.close`` of the same number closes whatever file the process
        opened with that number in between, such as another thread's, and made
        ``shutil.rmtree`` of the spill directory fail with EBADF."""
        for name in ("x_fd", "c_fd", "l_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                os.close(fd)
        self.perm = self.perm_map = None  # unmaps the permutation's file

    def write(self, chunk: _Chunk) -> None:
        m = chunk.X.shape[0]
        a, b = self.n, self.n + m
        if b > self.n_total:
            raise RuntimeError("the file has more rows than its first scan found")
        final = self.perm[a:b]
        order, groups = _destinations(final, self.cr)
        for j, s0, s1 in groups:
            sel = order[s0:s1]
            off = j * self.cr + int(self.fill[j])
            os.pwrite(self.x_fd, np.ascontiguousarray(chunk.X[sel]).data, off * self.row_bytes)
            os.pwrite(self.c_fd, np.ascontiguousarray(chunk.codes[sel]).data, off * 4)
            local = (final[sel] - j * self.cr).astype(np.int32)
            os.pwrite(self.l_fd, local.data, off * 4)
            self.fill[j] += sel.size
        self.n = b

    def finish(self, zy, lut: np.ndarray) -> np.ndarray:
        self.close()
        counts = np.zeros(2, dtype=np.int64)
        for j in range(self.fill.size):
            a = j * self.cr
            m = min(self.cr, self.n - a)
            bucket = np.fromfile(self.x_path, dtype=self.dtype, count=m * self.d,
                                 offset=a * self.row_bytes).reshape(m, self.d)
            codes = np.fromfile(self.c_path, dtype=np.int32, count=m, offset=4 * a)
            local = np.fromfile(self.l_path, dtype=np.int32, count=m, offset=4 * a)
            X = np.empty_like(bucket)
            X[local] = bucket
            del bucket
            yb = np.empty(m, dtype=np.int8)
            yb[local] = lut[codes]
            self.zX[a : a + m] = X
            _write_labels(zy, a, yb, counts)
        return counts


class _SparseShuffleWriter:
    """The shuffle of :class:`_ShuffleWriter` for CSR chunks, written as a sparse store.

    The same permutation (``default_rng(seed).permutation(n)``, memory-mapped), so a file
    and a seed give the same row order stored dense or sparse. A sparse row's size is its
    non-zeros, known only once it is parsed, so the destination chunks cannot have regions
    of one spill file laid out in advance: each destination chunk ``j`` has its own
    append-only files, ``rows.<j>`` (per row, int64: its place in the chunk, its label code,
    its non-zeros), ``indices.<j>`` and ``data.<j>``. A parsed chunk is put in destination
    order once (one gather of its non-zeros) and appended slice by slice. ``finish`` reads
    each destination back (its rows' non-zeros: about one chunk of them, twice while it is
    put in its final order), writes it as row chunk ``j`` and removes its files. Memory: a
    chunk of non-zeros, plus 16 bytes per destination chunk; disk: the non-zeros once more.
    """

    def __init__(self, group, spill: str, n: int, cr: int, d: int, dtype, seed):
        self.group, self.spill, self.cr, self.d, self.n_total = group, spill, cr, d, n
        self.dtype, self.index = np.dtype(dtype), index_dtype(d)
        self.perm_map, self.perm = _permutation_file(spill, n, seed)
        self.fill = np.zeros(-(-n // cr), dtype=np.int64)
        self.nnz: list[int] = []
        self.n = 0
        group.require_group(GROUP)

    def _path(self, part: str, j: int) -> str:
        return os.path.join(self.spill, f"{part}.{j}")

    def close(self) -> None:
        self.perm = self.perm_map = None  # unmaps the permutation's file

    def write(self, chunk: _Chunk) -> None:
        X = chunk.X
        m = X.shape[0]
        a, b = self.n, self.n + m
        if b > self.n_total:
            raise RuntimeError("the file has more rows than its first scan found")
        final = self.perm[a:b]
        order, groups = _destinations(final, self.cr)
        Xo = X[order]  # rows by destination (stable): a gather of the non-zeros
        ptr = Xo.indptr
        rec = np.empty((m, 3), dtype=np.int64)
        rec[:, 0] = final[order]
        rec[:, 1] = chunk.codes[order]
        rec[:, 2] = np.diff(ptr)
        for j, s0, s1 in groups:
            rec[s0:s1, 0] -= j * self.cr  # the row's place in its destination chunk
            _append(self._path("rows", j), rec[s0:s1])
            p0, p1 = int(ptr[s0]), int(ptr[s1])
            if p1 > p0:
                _append(self._path("indices", j), Xo.indices[p0:p1].astype(self.index,
                                                                             copy=False))
                _append(self._path("data", j), Xo.data[p0:p1])
            self.fill[j] += s1 - s0
        self.n = b

    def finish(self, zy, lut: np.ndarray) -> np.ndarray:
        import scipy.sparse

        self.close()
        counts = np.zeros(2, dtype=np.int64)
        for j in range(self.fill.size):
            a = j * self.cr
            m = min(self.cr, self.n - a)
            rec = _read(self._path("rows", j), np.int64).reshape(-1, 3)
            if rec.shape[0] != m or self.fill[j] != m:
                raise RuntimeError(f"the shuffle's spill of row chunk {j} holds "
                                   f"{rec.shape[0]} rows, not {m}")
            indptr = np.zeros(m + 1, dtype=np.int64)
            np.cumsum(rec[:, 2], out=indptr[1:])
            spilled = scipy.sparse.csr_matrix(
                (_read(self._path("data", j), self.dtype),
                 _read(self._path("indices", j), self.index), indptr), shape=(m, self.d))
            where = np.empty(m, dtype=np.int64)
            where[rec[:, 0]] = np.arange(m)  # the spilled row at each final place
            yb = np.empty(m, dtype=np.int8)
            yb[rec[:, 0]] = lut[rec[:, 1]]
            self.nnz.append(write_csr_chunk(self.group, j, spilled[where]))
            del spilled
            _write_labels(zy, a, yb, counts)
            for part in ("rows", "indices", "data"):
                if os.path.exists(self._path(part, j)):
                    os.remove(self._path(part, j))
        return counts

    def attrs(self) -> dict:
        return _csr_attrs(self.nnz)


def _append(path: str, arr: np.ndarray) -> None:
    """Append the bytes of ``arr`` to the file ``path`` (created if absent)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        view = memoryview(np.ascontiguousarray(arr)).cast("B")
        while view.nbytes:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _read(path: str, dtype) -> np.ndarray:
    """The whole spill file ``path`` as ``dtype`` (empty when it was never written)."""
    if not os.path.exists(path):
        return np.empty(0, dtype=dtype)
    return np.fromfile(path, dtype=dtype)


class _GuardedTarget:
    """A Zarr array that refuses writes once its write has failed, so that the failure can
    wait for the writes in flight before the partial store is removed: dask's local
    schedulers raise the first task error while other tasks still run, and a chunk written
    after the abort re-created the hidden partial store. Pickled (to distributed workers)
    it is the plain array. ``gate``: one shared with the store's other writes."""

    def __init__(self, array, gate: Gate | None = None):
        self._array = array
        self._gate = Gate() if gate is None else gate
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __setitem__(self, key, value) -> None:
        with self._gate:
            self._array[key] = value

    def close_and_wait(self) -> None:
        self._gate.close_and_wait()

    def __reduce__(self):
        return (_same, (self._array,))


def _same(x):
    return x
