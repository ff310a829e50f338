"""Every tunable of daskauc in one place.

Numba kernels read ``FASTMATH`` so that one switch governs all of them; NaN and inf handling
(``nnan``, ``ninf``) is deliberately left out so non-finite input is never silently folded.
"""

from __future__ import annotations

#: fastmath flags shared by every numba kernel (no ``nnan`` / ``ninf``).
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}  # numba wants a set, not frozenset

#: target size of one row chunk in bytes when daskauc chooses the chunking itself.
#: 64 MiB keeps per-task overhead (~1 ms on a LocalCluster) negligible while a 1 GiB worker
#: holds several chunks at once.
TARGET_CHUNK_BYTES = 64 * 2**20

#: bounds on the number of rows in a chunk chosen by daskauc.
MIN_CHUNK_ROWS = 1_000
MAX_CHUNK_ROWS = 200_000

#: rows used by the Gaussian bandwidth rule (Khalid et al.: the first 80,000 training rows).
BANDWIDTH_ROWS = 80_000

#: relative eigenvalue cut-off of the Nystroem pseudo-inverse.
EIG_TOL = 1e-8

#: attribute that marks a Zarr store as completely written (written last).
COMPLETE_ATTR = "daskauc_complete"

#: format version written into every store daskauc creates.
STORE_FORMAT = 1


def chunk_rows_for(n_columns: int, itemsize: int, n_rows: int | None = None) -> int:
    """Rows per chunk so that one chunk of ``n_columns`` values is about TARGET_CHUNK_BYTES."""
    rows = TARGET_CHUNK_BYTES // max(1, n_columns * itemsize)
    rows = int(min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, rows)))
    if n_rows is not None:
        rows = max(1, min(rows, int(n_rows)))
    return rows


_CONTROLLER = None


def blas_limit(n_threads: int = 1):
    """Context manager limiting BLAS threads (process-wide) while Dask runs tasks in threads.

    Dask's threaded scheduler runs one task per core; letting each task's BLAS call also use
    every core oversubscribes them (measured: 24.2 s instead of 19.3 s for the covtype map).
    Distributed workers already start with one BLAS thread per worker thread.
    """
    global _CONTROLLER
    from threadpoolctl import ThreadpoolController

    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=n_threads, user_api="blas")
