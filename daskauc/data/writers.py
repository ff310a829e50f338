"""Writing parsed row chunks into a store's arrays, through temporary spill files.

* :class:`_DirectWriter` writes the chunks in file order.
* :class:`_ShuffleWriter` writes them in a uniformly random row order with bounded memory:
  every row is sent to its destination chunk's region of a temporary spill file as its
  chunk is parsed, then each destination chunk is read back, put in its final order and
  written. The permutation itself is a memory-mapped spill file too.
* Both spill the label codes and write ``y`` from them once the label set is known (a pass
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
from ..store.sparse import CSR, FORMAT_ATTR, FORMAT_VERSION, GROUP, ROWS_ATTR, write_csr_chunk
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
        return {ROWS_ATTR: CSR, FORMAT_ATTR: FORMAT_VERSION, "n_nonzero": int(sum(self.nnz)),
                "chunk_nonzeros": [int(c) for c in self.nnz]}


def _write_labels(zy, a: int, yb: np.ndarray, counts: np.ndarray) -> None:
    """Write ``yb`` to ``y`` from row ``a``; add its (negatives, positives) to ``counts``."""
    zy[a : a + yb.shape[0]] = yb
    pos = int(np.count_nonzero(yb > 0))
    counts += (yb.shape[0] - pos, pos)


def _perm_itemsize(n: int) -> int:
    return 4 if n < 2**31 else 8


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
        idx = np.dtype(np.int32 if _perm_itemsize(n) == 4 else np.int64)
        self.perm_map = np.memmap(os.path.join(spill, "perm.bin"), dtype=idx, mode="w+",
                                  shape=(n,))
        self.perm = self.perm_map.view(np.ndarray)  # Generator.shuffle of a memmap: 70x slower
        step = 1 << 22
        for a in range(0, n, step):
            self.perm[a : a + step] = np.arange(a, min(n, a + step), dtype=idx)
        np.random.default_rng(seed).shuffle(self.perm)  # = permutation(n), in place
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
        dest = final // self.cr
        order = np.argsort(dest, kind="stable")
        js, starts = np.unique(dest[order], return_index=True)
        ends = np.append(starts[1:], m)
        for j, s0, s1 in zip(js.tolist(), starts.tolist(), ends.tolist(), strict=True):
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


class _GuardedTarget:
    """A Zarr array that refuses writes once its write has failed, so that the failure can
    wait for the writes in flight before the partial store is removed: dask's local
    schedulers raise the first task error while other tasks still run, and a chunk written
    after the abort re-created the hidden partial store. Pickled (to distributed workers)
    it is the plain array."""

    def __init__(self, array):
        self._array = array
        self._gate = Gate()
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
