"""Which chain of an epoch visits which row chunk, and on which worker: the count of chains
(:func:`resolve_chains`), the workers holding each chunk of an array persisted on a cluster
(:func:`chunk_holders`), the split of a round's visits over the chains (:func:`assign_visits`)
and the worker restriction of each chain task (:class:`Placement`). The epoch graph
(:mod:`.stream`) and the placement of persisted chunks (:mod:`.placement`) use them."""

from __future__ import annotations

from collections.abc import Sequence

import dask
import dask.array as da
import numpy as np
from dask.core import flatten

from .._sparse import is_sparse, nonzeros_per_row

#: non-zeros a sparse row is assumed to hold when its array does not say (chain counts only)
SPARSE_ROW_GUESS = 64


def chunk_holders(X: da.Array) -> list[tuple[str, ...]] | None:
    """The workers holding each row block of ``X`` when every block is a distributed Future
    (an array persisted on a cluster), sorted addresses per block; None otherwise."""
    from distributed import Future

    from .._validation import without_finite_check

    X = without_finite_check(X)
    graph = dict(X.__dask_graph__())
    blocks = [graph.get(k) for k in flatten(X.__dask_keys__())]
    if not blocks or not all(isinstance(b, Future) for b in blocks):
        return None
    from distributed import wait

    wait(blocks)  # a persist still running has no holders yet
    who = blocks[0].client.who_has(blocks)
    return [tuple(sorted(who.get(b.key, ()))) for b in blocks]


def assign_visits(chunks: Sequence[int], n_chains: int,
                  holders: Sequence[tuple[str, ...]] | None = None,
                  ) -> tuple[list[list[int]], list[str | None]]:
    """Split the visits of a round (the chunk of each visit, in visiting order) over chains.

    Returns the positions each chain visits (in visiting order) and the worker each chain
    should run on. Without ``holders`` chain ``k`` takes positions ``k, k + K, ...`` and has
    no worker. With ``holders`` (the workers holding each chunk, :func:`chunk_holders`) chain
    ``k`` runs on the ``k % W``-th of the W workers holding data and takes, in visiting order,
    the visits of chunks held there, up to an equal share ``ceil(visits / K)``; visits left
    over (chunks of workers without a chain, or beyond a worker's share) go to the chains
    with the fewest visits, and those chunks travel. The split depends only on the visits and
    the placement, so with the data left where it is, epochs and ``partial_fit`` are
    reproducible.
    """
    K = int(n_chains)
    if holders is None:
        return [list(range(k, len(chunks), K)) for k in range(K)], [None] * K
    workers = sorted({w for c in chunks for w in holders[c]})
    if not workers:
        return [list(range(k, len(chunks), K)) for k in range(K)], [None] * K
    chain_worker = [workers[k % len(workers)] for k in range(K)]
    share = -(-len(chunks) // K)
    shares: list[list[int]] = [[] for _ in range(K)]
    left = []
    for pos, c in enumerate(chunks):
        here = [k for k in range(K) if chain_worker[k] in holders[c] and len(shares[k]) < share]
        if here:
            shares[min(here, key=lambda k: (len(shares[k]), k))].append(pos)
        else:
            left.append(pos)
    for pos in left:
        shares[min(range(K), key=lambda k: (len(shares[k]), k))].append(pos)
    return [sorted(s) for s in shares], list(chain_worker)


class Placement:
    """Task annotation: the worker restriction of each chain task (None for other keys)."""

    def __init__(self, where: dict):
        self.where = where

    def __call__(self, key):
        return self.where.get(key)


def resolve_chains(n_chains, X: da.Array | None = None) -> int:
    """``n_chains`` as a count: an int >= 1, or "auto": with ``X``, the count of
    :func:`daskauc.engine.cost.chain_count` for its row chunks (one per worker thread of the
    current scheduler, or fewer where more do not pay); without, the worker threads."""
    if isinstance(n_chains, str):
        if n_chains != "auto":
            raise ValueError(f"n_chains must be an int >= 1 or 'auto'; got {n_chains!r}")
        threads, distributed = scheduler_threads()
        if X is None:
            return threads
        from .cost import chain_count

        row_bytes, state_bytes = X.dtype.itemsize * int(X.shape[1]), 0
        if is_sparse(X._meta):  # a row costs its non-zeros; a merge, the dense w of a chain
            per_row = nonzeros_per_row(X)
            row_bytes = (X.dtype.itemsize + 4) * (per_row if per_row is not None
                                                  else SPARSE_ROW_GUESS)
            state_bytes = 8 * int(X.shape[1])
        return chain_count([int(c) for c in X.chunks[0]], row_bytes, threads,
                           distributed=distributed, state_bytes=state_bytes)
    if isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer)) or n_chains < 1:
        raise ValueError(f"n_chains must be an int >= 1 or 'auto'; got {n_chains!r}")
    return int(n_chains)


def scheduler_threads() -> tuple[int, bool]:
    """``(threads, distributed)``: the worker threads of the scheduler dask would use now (a
    distributed client's total threads, else the threaded scheduler's; 1 for the synchronous
    one) and whether it is a distributed one."""
    import os

    from .._compute import distributed_client

    client = distributed_client()
    if client is not None:
        info = client.scheduler_info(n_workers=-1)
        return max(1, sum(w["nthreads"] for w in info["workers"].values())), True
    if dask.config.get("scheduler", None) in ("sync", "synchronous", "single-threaded"):
        return 1, False
    return max(1, int(dask.config.get("num_workers", None) or os.cpu_count() or 1)), False


def is_materialized(X: da.Array) -> bool:
    """True when every block of ``X`` is already data (persisted), not a computation."""
    from distributed import Future

    graph = dict(X.__dask_graph__())
    keys = set(flatten(X.__dask_keys__()))
    return all(isinstance(graph.get(k), (np.ndarray, Future)) or is_sparse(graph.get(k))
               for k in keys)
