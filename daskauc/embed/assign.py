"""Nearest centres by BLAS products over bounded tiles, for k-means epochs, seeding and predict.

The squared distance ``||x - c||^2 = ||x||^2 + ||c||^2 - 2 x . c`` needs the Gram products of
rows and centres; their arg-min over centres is the nearest centre. Formed whole for a batch
of b rows and k centres the Gram block is b x k (268 MB for 2,048 rows and 32,768 centres in
float32). Here the rows are taken ``ASSIGN_ROWS`` at a time and, for each such block, the
centres ``ASSIGN_CENTRES`` at a time: one BLAS product per tile, then a numba kernel folds the
tile into the block's running minimum. Memory is one tile whatever k is, and the tile is
still in cache when the kernel reads it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _config
from .._sparse import is_sparse
from ._kernels import _nearest_center, _nearest_center_tile
from .sparse_rows import nearest_centres_sparse

__all__ = ["nearest_centres", "default_threads"]

_POOL_LOCK = threading.Lock()

#: below this many flops per product, BLAS runs on one thread: a two-thread OpenBLAS call on
#: a small product costs milliseconds of thread hand-off when the cores are busy (measured
#: here: a 256 x 22 x 200 product 0.15 ms on one thread, 14.5 ms on two under load; a
#: 512 x 54 x 256 tile 0.2 ms on one thread, 30 ms on two while another process ran).
SMALL_GEMM_FLOPS = 5e7

#: rows x centres of one assignment tile (the Gram tile is 512 KiB in float32, 1 MiB in
#: float64: it stays in a core's 1 MiB L2 between the product and the arg-min). Measured on
#: covtype rows, a 2048-row batch against 32,768 centres: 111 ms tiled (256 x 512, one BLAS
#: thread) against 332 ms for the whole 268 MB block (two BLAS threads); 256 x 1024 and
#: 512 x 512 tie with it, 128 x 1024 and 2048 x 512 are 30-50% slower.
ASSIGN_ROWS = 256
ASSIGN_CENTRES = 512

#: below this many centres the whole Gram block is one small product and the lane-blocked
#: arg-min (:func:`_nearest_center`) is as fast as tiles (measured equal at 20 centres,
#: tiles 1.5x faster at 64 and 1.8x at 512).
UNTILED_CENTRES = 32


def blas_for(flops: float):
    """One BLAS thread for a product of fewer than ``SMALL_GEMM_FLOPS`` flops, else BLAS's
    own choice."""
    return _config.blas_limit(1) if flops < SMALL_GEMM_FLOPS else contextlib.nullcontext()


def nearest_centres(X: np.ndarray, C: np.ndarray, csq: np.ndarray, labels: np.ndarray,
                    best: np.ndarray, *, n_threads: int = 1) -> None:
    """Nearest centre of every row, by BLAS products of bounded tiles and a running arg-min.

    Parameters
    ----------
    X : ndarray (b, d), float32 or float64; or CSR rows (read as their non-zeros:
        :func:`daskauc.embed.sparse_rows.nearest_centres_sparse`, one thread)
    C : ndarray (k, d), X's dtype, C-contiguous
    csq : ndarray (k,), X's dtype
        ``||c_j||^2``.
    labels : ndarray (b,), int64
        Out: ``argmin_j ||c_j||^2 - 2 x_i . c_j`` evaluated in X's dtype, the first index on
        ties (``np.argmin`` of the same numbers).
    best : ndarray (b,), float64
        Out: that minimum (add ``||x_i||^2`` for the squared distance).
    n_threads : int, default 1
        Threads sharing the row blocks (each runs one-thread BLAS and the nogil kernel). The
        blocks are the same whatever the count, so the result is too.

    Notes
    -----
    Rows are taken ``ASSIGN_ROWS`` at a time; for each block the centres ``ASSIGN_CENTRES``
    at a time: the product ``C_tile X_block^T`` (BLAS, one thread), then
    :func:`_nearest_center_tile` folds it into the block's running minimum, replacing a
    label only on a strictly smaller value. Below ``UNTILED_CENTRES`` centres the whole
    block ``X C^T`` is formed and reduced by :func:`_nearest_center`. Given the same
    products both paths return the same labels, ties included; BLAS may round a product
    differently in a differently shaped call (last bit), which can only move a label
    between centres whose distances tie to that bit.
    """
    b, k = X.shape[0], C.shape[0]
    if b == 0:
        return
    if is_sparse(X):
        nearest_centres_sparse(X, C, csq, labels, best)
        return
    if k < UNTILED_CENTRES:
        with blas_for(2.0 * b * X.shape[1] * k):
            _nearest_center(np.ascontiguousarray(X) @ C.T, csq, labels, best)
        return
    rows = min(ASSIGN_ROWS, b)
    n_blocks = -(-b // rows)
    parts = min(max(1, int(n_threads)), n_blocks)
    # whole row blocks per thread, so every block (and its products) is the same as in one
    # thread; BLAS is limited here, around the threads, not in each of them
    cuts = [rows * (n_blocks * t // parts) for t in range(parts)] + [b]
    with blas_for(2.0 * rows * X.shape[1] * min(k, ASSIGN_CENTRES)):
        if parts == 1:
            _assign_rows(X, C, csq, labels, best, rows)
            return
        futures = [
            _pool(parts).submit(_assign_rows, X[a:z], C, csq, labels[a:z], best[a:z], rows)
            for a, z in zip(cuts[:-1], cuts[1:], strict=True)
        ]
        for f in futures:
            f.result()


def _assign_rows(X, C, csq, labels, best, rows):
    """:func:`nearest_centres` on one thread: row blocks of ``rows``, centre tiles."""
    b, k = X.shape[0], C.shape[0]
    lab = np.empty(rows, np.int32)  # int32 lanes: twice as many per vector as int64
    bst = np.empty(rows, X.dtype)
    for r0 in range(0, b, rows):
        xT = X[r0 : r0 + rows].T
        r = xT.shape[1]
        lab[:] = 0
        bst[:] = np.inf
        for j0 in range(0, k, ASSIGN_CENTRES):
            GT = C[j0 : j0 + ASSIGN_CENTRES] @ xT
            _nearest_center_tile(GT, csq[j0 : j0 + ASSIGN_CENTRES], lab[:r], bst[:r], j0)
        labels[r0 : r0 + r] = lab[:r]
        best[r0 : r0 + r] = bst[:r]


_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0


def _pool(n: int) -> ThreadPoolExecutor:
    """A process-wide pool of at least ``n`` threads (replaced by a larger one on demand)."""
    global _POOL, _POOL_SIZE
    with _POOL_LOCK:
        if _POOL_SIZE < n:
            old, _POOL, _POOL_SIZE = _POOL, ThreadPoolExecutor(n, "daskauc-assign"), n
            if old is not None:
                old.shutdown(wait=False)  # its running work finishes; no new work goes there
        return _POOL


def default_threads() -> int:
    """Threads for the assignment inside a task: the running Dask worker's thread count,
    else the cores this process may use."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1
