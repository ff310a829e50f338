"""Every tunable of daskauc in one place.

Numba kernels read ``FASTMATH`` so that one switch governs all of them; NaN and inf handling
(``nnan``, ``ninf``) is deliberately left out so non-finite input is never silently folded.
"""

from __future__ import annotations

import contextlib
import threading

#: fastmath flags shared by every numba kernel (no ``nnan`` / ``ninf``).
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}  # numba wants a set, not frozenset

#: target size of one row chunk in bytes when daskauc chooses the chunking itself.
#: 64 MiB keeps per-task overhead (~1 ms on a LocalCluster) negligible while a 1 GiB worker
#: holds several chunks at once.
TARGET_CHUNK_BYTES = 64 * 2**20

#: blocks a streamed chain reads ahead of the one it works on (in a background thread of its
#: worker, so reading the next chunk overlaps with the work on this one); per worker thread.
READ_AHEAD = 1

#: constants at least this large (pickled size estimate) that a graph needs, such as the
#: Nystroem projection, a stochastic solver's state or Newton's sort order, are scattered to
#: the cluster once and referenced by the graph's tasks, not embedded in the graph: an
#: embedded one travels with every graph (and makes distributed warn "Sending large graph").
SHARE_BYTES = 2**20

#: bytes of X one task of a stochastic chain visits: consecutive chunks of a chain share a
#: task up to this size, so that the scheduler's round trip between the tasks of a chain
#: (~4 ms on a LocalCluster, against ~11 ms for NSAUC over one 64 MiB chunk) stays small.
CHAIN_TASK_BYTES = 256 * 2**20

#: NSAUC / NSVMSGD2 pair the positives of a chunk with negatives of the last PAIR_CHUNKS
#: chunks visited, samples of which they keep in their state: PAIR_PARTNERS rows in all
#: (r floats each; 13 MB at r = 1600 float32) (daskauc.solvers.nsauc).
PAIR_PARTNERS = 2048
PAIR_CHUNKS = 8

#: the time of a pass over one streamed row chunk (read from the store, then computed with)
#: against the same chunk kept in memory, used to give each worker an equal share of a
#: Newton pass when some chunks are cached: covtype's 64 MiB embedding chunks took 6.4 ms
#: cached and 25 ms streamed per matrix-vector product (2 workers, page cache).
STREAMED_CHUNK_COST = 3.0

#: bounds on the number of rows in a chunk chosen by daskauc. The floor is one row: a floor
#: of 1,000 rows made a chunk of 3,000,000 float32 features 12 GB, whatever
#: TARGET_CHUNK_BYTES said; a chunk now stays about TARGET_CHUNK_BYTES (or one row).
MIN_CHUNK_ROWS = 1
MAX_CHUNK_ROWS = 200_000

#: LIBSVM text is sparse and daskauc stores it dense. An ingest that would densify it into
#: more than DENSE_MAX_BYTES AND more than DENSE_MAX_RATIO times the bytes of the non-zero
#: values read (fewer than 1% of the entries non-zero) is refused unless ``allow_dense=True``:
#: one stray index of 3,000,000 turns a 1 MB file into a store of gigabytes of zeros.
DENSE_MAX_BYTES = 2**30
DENSE_MAX_RATIO = 100

#: LIBSVM text with ``rows="auto"`` is stored sparse (CSR row chunks) when its dense matrix
#: would take more than SPARSE_ROWS_MIN_BYTES (one chunk) and fewer than
#: SPARSE_ROWS_MAX_DENSITY of its entries are non-zero; dense otherwise
SPARSE_ROWS_MIN_BYTES = 64 * 2**20
SPARSE_ROWS_MAX_DENSITY = 0.1

#: the longest line a text ingest reads (without its newline). Lines are held whole in
#: memory; a file without line breaks (binary data, one giant record) would otherwise be
#: read until memory runs out. A dense row of 64 MiB of text holds millions of values.
MAX_LINE_BYTES = 64 * 2**20

#: the most distinct raw label tokens a text ingest accepts: it keeps a table of them for
#: the whole pass, and a regression target or an ID column read as labels would grow it with
#: every row (a two-class file has two, or a few spellings of them).
MAX_LABELS = 65_536

#: the most distinct values a text column one-hot encoded by an ingest may hold
#: (``categorical="onehot"``): each value is a feature, and an ID or free-text column would
#: make one per row.
MAX_ONEHOT_LEVELS = 1_000

#: refuse, before any work, a local dataset write whose size is known beforehand (arrays;
#: text after its first scan: X and y uncompressed, plus the spill files) when the target's
#: file system has less free space. The estimate ignores compression, so data that compresses
#: well (mostly zeros) may fit where the check refuses: set False to write anyway.
CHECK_FREE_SPACE = True

#: rows used by the Gaussian bandwidth rule (Khalid et al.: the first 80,000 training rows).
BANDWIDTH_ROWS = 80_000

#: relative eigenvalue cut-off of the Nystroem pseudo-inverse.
EIG_TOL = 1e-8

#: most rows the Platt calibration at the end of a fit reads from dask or store input (whole
#: chunks spread evenly over the rows, one compute); numpy input is calibrated on every row.
#: Two parameters fitted on 100,000 rows have a relative sampling error of order
#: 1/sqrt(100,000) = 0.3%, while scoring 100,000 rows costs one small pass, not one over n.
CALIBRATION_ROWS = 100_000

#: slope (per standard deviation of the scores) of a calibration whose fitted slope is not
#: positive: the ranking is kept and every row gets about the class prior.
CALIBRATION_MIN_SLOPE = 1e-6

#: attribute that marks a Zarr store as completely written (written last).
COMPLETE_ATTR = "daskauc_complete"

#: append a CRC32C checksum to every chunk daskauc writes (verified on every read). Off only
#: to measure its cost (benchmarks/integrity.py); stores written without it still open.
CHECKSUMS = True

#: attribute listing every chunk file of a store and its size, written by the commit.
MANIFEST_ATTR = "daskauc_chunks"

#: format version written into every store daskauc creates (2: per-chunk CRC32C checksums,
#: every chunk written, the chunk record of MANIFEST_ATTR).
STORE_FORMAT = 2

#: daskauc's first request to an S3 endpoint (``_urls.check_access``, here and on one
#: worker): seconds to connect, seconds to wait for the answer, and attempts in all (the
#: second after botocore's backoff, up to 1 s: a blip does not fail a command). An endpoint
#: that does not answer is then one error within 1-2 s (a refused port) or 10 s (a host that
#: drops packets), where botocore's own retries took 15 s to minutes. The user's options,
#: unchanged, serve every later request.
PROBE_CONNECT_TIMEOUT = 5
PROBE_READ_TIMEOUT = 10
PROBE_ATTEMPTS = 2


def chunk_rows_for(n_columns: int, itemsize: int, n_rows: int | None = None) -> int:
    """Rows per chunk so that one chunk of ``n_columns`` values is about TARGET_CHUNK_BYTES
    (one row when a single row is larger; never more rows than ``n_rows``)."""
    rows = TARGET_CHUNK_BYTES // max(1, n_columns * itemsize)  # 0 for a row > the target
    rows = int(min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, rows)))
    if n_rows is not None:
        rows = max(1, min(rows, int(n_rows)))
    return rows


_CONTROLLER = None
_BLAS_LOCK = threading.Lock()
_BLAS_REQUESTS: list[int] = []
_BLAS_ORIGINAL = None  # the limiter of the first user: it restores the original counts


@contextlib.contextmanager
def blas_limit(n_threads: int = 1):
    """Limit BLAS threads (process-wide) while Dask runs tasks in threads.

    Dask's threaded scheduler runs one task per core; letting each task's BLAS call also use
    every core oversubscribes them (measured: 24.2 s instead of 19.3 s for the covtype map),
    and two-thread calls on tile-sized products stalled at ~30 ms instead of 0.2 ms under
    load. Distributed workers already start with one BLAS thread per worker thread.

    The thread count is one setting for the whole process, so concurrent and nested users
    share it: the smallest request in force wins (a task limiting BLAS to one thread is
    never oversubscribed by another asking for all cores), and the original counts come back
    when the last user leaves (with one independent limiter per thread, the first to leave
    would lift the limit under the others and the last could "restore" a count it found
    limited, leaving one thread for good).

    threadpoolctl (3.8) lets only one "controlling" thread change OpenBLAS's pthreads pool and
    silently ignores the others while it lives: after a Dask pool thread limited BLAS once,
    the main thread's limits did nothing (and the other way round). This function is the one
    authority, under its own lock, so each change first takes control for the calling thread.
    """
    global _CONTROLLER, _BLAS_ORIGINAL
    from threadpoolctl import ThreadpoolController

    n = max(1, int(n_threads))
    with _BLAS_LOCK:
        if _CONTROLLER is None:
            _CONTROLLER = ThreadpoolController()
        _take_blas_control()
        if not _BLAS_REQUESTS:
            _BLAS_ORIGINAL = _CONTROLLER.limit(limits=n, user_api="blas")
        _BLAS_REQUESTS.append(n)
        _CONTROLLER.limit(limits=min(_BLAS_REQUESTS), user_api="blas")
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _take_blas_control()
            _BLAS_REQUESTS.remove(n)
            if _BLAS_REQUESTS:
                _CONTROLLER.limit(limits=min(_BLAS_REQUESTS), user_api="blas")
            else:
                _BLAS_ORIGINAL.restore_original_limits()
                _BLAS_ORIGINAL = None


def _take_blas_control() -> None:
    """Make the calling thread threadpoolctl's controlling thread for OpenBLAS (see above)."""
    from threadpoolctl import OpenBLASController

    clear = getattr(OpenBLASController, "clear_controlling_thread", None)  # threadpoolctl >= 3.8
    if clear is not None:
        clear(force=True)
