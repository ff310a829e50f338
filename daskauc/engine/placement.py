"""Where the row chunks of a solver's passes live: persisted in (cluster) memory when they fit
in the memory budget, partly cached, or streamed from their source at every pass; and, on a
distributed cluster, which worker runs the tasks of each streamed chunk.

Used by the pairwise Newton solver (:mod:`daskauc.solvers.newton`, through
:class:`RowChunks`), the kernel-basis solvers (:func:`should_persist`), the estimators' route
and cross-validation choices (:func:`memory_budget`, :func:`should_persist`).
"""

from __future__ import annotations

import logging
import math

import dask.array as da
import numpy as np

from .. import _compute, _config
from .._compute import distributed_client
from .._validation import without_finite_check
from .chain_plan import Placement, chunk_holders, is_materialized
from .stream import _READ_AHEAD, BlockReader

logger = logging.getLogger(__name__)

#: persist ``X`` (``persist="auto"``) when it takes at most this fraction of the memory of the
#: cluster (sum of worker memory limits) or, without a distributed client, of available RAM.
PERSIST_MEMORY_FRACTION = 0.5

#: when persisting, row chunks are merged up to about this many bytes (fewer, larger tasks per
#: pass: on covtype, 45 chunks of 66 MB -> 8 of 370 MB made a Hessian product 15% faster).
PERSIST_CHUNK_BYTES = 384 * 2**20


def worker_records(client) -> dict:
    """The scheduler's worker records (address -> info); empty without a client."""
    if client is None:
        return {}
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # older distributed
        info = client.scheduler_info()
    return info.get("workers", {})


def memory_budget(client=None, working_bytes: int = 0) -> int:
    """Bytes ``persist="auto"`` may keep in memory: for each worker, ``PERSIST_MEMORY_FRACTION``
    of its memory limit, less what its process holds already and ``working_bytes`` per thread
    (the chunks a pass reads and computes with beside what is kept). Without a distributed
    client, the fraction of this machine's available memory less ``working_bytes`` per core.

    On small workers the process itself (~0.3-0.4 GiB of Python, numba and the libraries) and
    a pass's working chunks are a large part of the limit: counting only the limit, 50% of
    2 x 1.75 GiB workers kept 0.875 GiB each and workers were killed at 95% of their limit
    (benchmarks/scaling.py, 2M-8M rows)."""
    import os

    import psutil

    workers = worker_records(client)
    total = 0
    for w in workers.values():
        lim = w.get("memory_limit") or psutil.virtual_memory().total // max(1, len(workers))
        used = (w.get("metrics") or {}).get("memory") or 0
        threads = w.get("nthreads") or 1
        total += max(0, int(lim * PERSIST_MEMORY_FRACTION) - used - working_bytes * threads)
    if not workers:
        total = max(0, int(psutil.virtual_memory().available * PERSIST_MEMORY_FRACTION)
                    - working_bytes * (os.cpu_count() or 1))
    return total


def _chunk_bytes(X: da.Array) -> int:
    return int(max(X.chunks[0], default=0) * X.shape[1] * X.dtype.itemsize)


#: bytes per row of the one task that sorts the scores and holds the pairwise coefficients
#: (PairwiseCoefficients: ten n-vectors, plus the gathered scores and the sort's temporaries)
SORT_BYTES_PER_ROW = 112


def _working_bytes(X: da.Array) -> int:
    """What a worker needs beside what is kept: the chunks a pass reads and computes with
    (two per thread, the pool's included) and, on whichever worker sorts, the O(n) pairwise
    coefficients (0.9 GB at 8M rows: with 1.75 GiB workers the cache left no room for it and
    workers were killed)."""
    return 2 * _chunk_bytes(X) + SORT_BYTES_PER_ROW * int(X.shape[0])


def persist_chunks(X: da.Array, client=None) -> tuple:
    """Row chunks for persisting ``X``: equal chunks of about ``PERSIST_CHUNK_BYTES`` or of the
    current largest chunk, whichever is more, their count rounded up to a multiple of the
    workers (when there are enough chunks) so that every worker gets as many."""
    n = int(X.shape[0])
    row_bytes = max(1, int(X.dtype.itemsize * X.shape[1]))
    info = worker_records(client)
    limits = [w.get("memory_limit") or 0 for w in info.values()]
    # a merge task holds its inputs and its output: on small workers, smaller merged chunks
    target = min([PERSIST_CHUNK_BYTES, *(lim // 16 for lim in limits if lim)])
    rows = max(max(X.chunks[0]), target // row_bytes)
    workers = max(1, len(info))
    count = max(1, math.ceil(n / rows))
    count = min(len(X.chunks[0]), math.ceil(count / workers) * workers) if count > 1 else 1
    rows = math.ceil(n / count)
    return ((rows,) * (n // rows) + ((n % rows,) if n % rows else ()), X.chunks[1])


def place_rows(X: da.Array, persist="auto", client=None) -> tuple[da.Array, da.Array | None]:
    """``(X, cached)`` for the passes of a solver: ``X`` persisted whole when it fits in
    :func:`memory_budget` (or ``persist=True``); else, for ``persist="auto"``, its leading
    chunks that fit persisted as ``cached`` and the rest streamed at every pass; ``persist=False``
    streams everything."""
    if is_materialized(X):
        return X, None
    if client is None:  # the budget is the cluster's, not this machine's
        client = distributed_client()
    if should_persist(X, persist, client):
        chunks = persist_chunks(X, client)
        logger.info("persisting X (%.1f MB, %d row chunks) for the Newton iterations",
                    X.nbytes / 1e6, len(chunks[0]))
        if chunks != X.chunks:
            X = X.rechunk(chunks)
        (X,) = _compute.persist(X)
        return X, None
    budget = memory_budget(client, working_bytes=_working_bytes(X))
    rows = cache_rows(X, budget) if persist == "auto" else 0
    if rows == 0:
        logger.info("streaming X (%.1f MB) at every pass", X.nbytes / 1e6)
        return X, None
    # kept in the store's chunks: merging them would hold copies while the rest streams
    (head,) = _compute.persist(X[:rows])
    logger.info("keeping %d of %d rows of X (%.1f of %.1f MB) in memory, streaming the rest at "
                "every pass", rows, X.shape[0], head.nbytes / 1e6, X.nbytes / 1e6)
    return X, head


def should_persist(X: da.Array, persist="auto", client=None) -> bool:
    """Decide whether to persist ``X``: always (True), never (False), or when it fits ("auto")."""
    if persist is True or persist is False:
        return persist
    if client is None:
        client = distributed_client()
    return X.nbytes <= memory_budget(client, working_bytes=_working_bytes(X))


class RowChunks:
    """Where each row chunk of ``X`` comes from in a pass of a solver's graphs (Newton's).

    The first chunks may be ``cached`` (the leading rows of ``X``, persisted in the workers'
    memory, in chunks of their own); the others are read inside each task that uses them, so
    no worker holds a streamed chunk between the two passes of a Hessian product (a shared
    read task would keep every chunk in memory from the first pass to the second, or spill
    it). Streamed chunks are therefore read twice per product: the algebra needs ``L X p``
    over all rows before ``X^T`` can start.

    On a distributed cluster each streamed chunk is given a worker (:meth:`placement`): the
    cached chunks stay where they are and the streamed ones are shared out so that every
    worker has the same work (a streamed chunk costs ``_config.STREAMED_CHUNK_COST`` cached
    ones). Left to the scheduler, the streamed tasks of a pass, which depend on nothing but a
    small vector, went mostly to one worker: with half of covtype's embedding cached, one
    worker was busy 1.0 s of a 1.2 s Hessian product and the other 0.3 s. Each streamed task
    starts the read of the next chunk of its worker (the first one again after the last, for
    the next pass) in a background thread before it computes (:class:`~daskauc.engine.stream.
    ReadAhead`), so reading overlaps with the work on the chunk before.
    """

    def __init__(self, X: da.Array, cached: da.Array | None = None, client=None):
        self.deps: list = []
        self.args: list = []
        self.checked: dict = {}  # chunk -> its read with the finiteness check (first pass)
        self.where: dict[int, str] = {}  # streamed chunk -> the worker that runs its tasks
        n_cached = 0
        if cached is not None:
            n_cached = int(cached.shape[0])
            self.deps.append(cached)
            self.args += [(cached.name, c, 0) for c in range(cached.numblocks[0])]
        sizes = list(cached.chunks[0]) if cached is not None else []
        streamed: list[int] = []
        if n_cached < X.shape[0]:
            rest = X[n_cached:] if n_cached else X
            if is_materialized(rest):
                self.deps.append(rest)
                self.args += [(rest.name, c, 0) for c in range(rest.numblocks[0])]
            else:
                # the first pass reads through the finiteness check, the others do not
                first = len(self.args)
                streamed = list(range(first, first + rest.numblocks[0]))
                plain = without_finite_check(rest)
                readers = [BlockReader(plain, c) for c in range(rest.numblocks[0])]
                checked = ([BlockReader(rest, c) for c in range(rest.numblocks[0])]
                           if plain is not rest else None)
            sizes += list(rest.chunks[0])
        self.bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.nchunks = len(sizes)
        self.cached_rows = n_cached
        if streamed:
            self.where = self.placement(streamed, cached, client)
            ahead = self._read_ahead_order(streamed)
            first = streamed[0]

            def read(rs, c):
                return (_read_block, rs[c - first], None if ahead[c] is None else
                        rs[ahead[c] - first])

            self.args += [read(readers, c) for c in streamed]
            if checked is not None:
                self.checked = {c: read(checked, c) for c in streamed}

    def placement(self, streamed: list[int], cached: da.Array | None, client) -> dict[int, str]:
        """The worker of each streamed chunk on a distributed cluster (empty otherwise):
        chunks in order, each to the worker whose work per thread (its cached rows, plus
        ``STREAMED_CHUNK_COST`` times its streamed rows) would be smallest with it."""
        workers = worker_records(client)
        if not workers:
            return {}
        threads = {w: max(1, int(info.get("nthreads") or 1)) for w, info in workers.items()}
        load = dict.fromkeys(sorted(workers), 0.0)
        if cached is not None:
            for c, holders in enumerate(chunk_holders(cached) or []):
                for w in holders[:1]:
                    if w in load:
                        load[w] += float(self.bounds[c + 1] - self.bounds[c])
        where = {}
        for c in streamed:
            rows = float(self.bounds[c + 1] - self.bounds[c]) * _config.STREAMED_CHUNK_COST
            best = min(load, key=lambda w: ((load[w] + rows) / threads[w], w))
            load[best] += rows
            where[c] = best
        return where

    def _read_ahead_order(self, streamed: list[int]) -> dict[int, int | None]:
        """The chunk each streamed chunk's task reads ahead: the next one of its worker, which
        runs its streamed tasks in chunk order (:meth:`annotations`), and the first again after
        the last (the next pass starts there). Without placement (the threaded scheduler)
        nothing is read ahead: the order in which its threads take tasks is not known, and
        with several threads one reads while another computes anyway."""
        if not self.where:
            return dict.fromkeys(streamed)
        groups: dict[str, list[int]] = {}
        for c in streamed:
            groups.setdefault(self.where[c], []).append(c)
        ahead: dict[int, int | None] = {}
        for chunks in groups.values():
            for k, c in enumerate(chunks):
                ahead[c] = chunks[(k + 1) % len(chunks)]
        return ahead

    def arg(self, c: int):
        """The task argument that is chunk ``c``: a key, or a read run inside the task (with
        the finiteness check until :meth:`checked_once`)."""
        return self.checked.get(c, self.args[c])

    def checked_once(self) -> None:
        """Every streamed chunk has been read through its check: later passes skip it."""
        self.checked = {}

    def annotations(self, names: list[str]) -> dict:
        """``dask.annotate`` arguments that run the tasks ``(name, c)`` of streamed chunks on
        their workers (elsewhere only if that worker is gone), each worker's in chunk order:
        a priority falling with the chunk index (below the default 0 of every other task, so
        the cached chunks, which need no read, go first). Left to the graph's order a worker
        ran them as 0, 42, 36, 30, ... and almost no read ahead was the one needed next."""
        if not self.where:
            return {}
        where = {(name, c): [w] for name in names for c, w in self.where.items()}
        priority = {(name, c): -1 - c for name in names for c in self.where}
        return {"workers": Placement(where), "allow_other_workers": True,
                "priority": Placement(priority)}


def _read_block(reader, ahead=None) -> np.ndarray:
    """Chunk ``reader``, taken from the read-ahead (or read now); then the read of ``ahead``
    starts in the background while the caller works on this one."""
    block = _READ_AHEAD.take(reader)
    if ahead is not None and ahead.key != reader.key:
        _READ_AHEAD.start(ahead)
    return block


def cache_rows(X: da.Array, budget: int) -> int:
    """Leading rows of ``X`` to keep in memory under ``budget`` bytes: whole chunks of ``X``."""
    row_bytes = max(1, X.dtype.itemsize * int(X.shape[1]))
    rows = 0
    for size in X.chunks[0]:
        if (rows + size) * row_bytes > budget:
            break
        rows += size
    return rows

