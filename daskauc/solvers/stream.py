"""The chunk-streaming engine shared by every stochastic solver.

One epoch is one Dask graph: a chain of tasks that threads the solver state through the row
chunks of ``X`` (and ``y``) in a shuffled order, as dask-ml's ``_partial.fit`` does. Each task
calls ``step(X_block, y_block, state, seed, *extras, **params)`` and returns the new state,
so only one chunk per worker thread is in use at a time: a dataset far larger than the
cluster's memory streams through with bounded memory, reading each chunk from Zarr just
before it is needed. Task keys are ``daskauc-<solver>-epoch-<token>`` so the dashboard shows
which solver runs.

A step must not mutate the ``state`` it receives (a retried task would see the mutation);
it copies what it changes.

Where the chunks come from
--------------------------
When ``X`` is materialized (persisted in memory, on the client or the cluster) each chain
task depends on its block as usual. When ``X`` is lazy (read from Zarr, or computed on the
fly), an ordinary dependency would let idle workers read every chunk ahead of the chain and
hold them all in memory; so in that case each chain task carries the culled graph of its own
block and computes it synchronously inside the task (``stream=True``). Memory then stays at
one chunk per running chain task however large the data is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.core import flatten
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph


def chunk_order(n_chunks: int, seed: np.random.SeedSequence, shuffle: bool = True) -> np.ndarray:
    """The order in which an epoch visits the chunks (a permutation when ``shuffle``)."""
    if not shuffle:
        return np.arange(n_chunks)
    return np.random.default_rng(seed).permutation(n_chunks)


def seed_root(random_state) -> tuple[int, tuple]:
    """``(entropy, spawn_key)`` of the root ``SeedSequence`` of a run.

    Solver states keep this pair so that later epochs (``partial_fit``) continue one random
    stream.
    """
    from .._validation import seed_sequence

    ss = seed_sequence(random_state)
    return int(ss.entropy), tuple(ss.spawn_key)


def epoch_plan(seed_entropy: int, seed_key: tuple, epoch: int, n_chunks: int,
               shuffle: bool = True) -> tuple[np.ndarray, list[np.random.SeedSequence]]:
    """Chunk order and one ``SeedSequence`` per visit for epoch ``epoch`` (0-based).

    Both are children of ``(*seed_key, epoch)`` of the run's root, so an epoch's randomness
    depends only on the root and the epoch number: ``k`` epochs in one call and ``k`` calls
    of one epoch (``partial_fit``) draw the same numbers.
    """
    ss = np.random.SeedSequence(seed_entropy, spawn_key=(*tuple(seed_key), int(epoch)))
    order_ss, visit_ss = ss.spawn(2)
    return chunk_order(n_chunks, order_ss, shuffle), visit_ss.spawn(n_chunks)


def epoch_graph(
    step: Callable[..., Any],
    X: da.Array,
    y: da.Array,
    state: Any,
    *,
    solver: str,
    order: Sequence[int],
    seeds: Sequence[np.random.SeedSequence] | None = None,
    per_chunk: Sequence[Any] | None = None,
    params: dict | None = None,
    stream: bool | None = None,
    n_chains: int = 1,
    merge: Callable[..., Any] | None = None,
    sync_every: int | None = None,
) -> Delayed:
    """Build the graph of one epoch; return a Delayed of the final state.

    Parameters
    ----------
    step : callable
        ``step(X_block, y_block, state, seed, extra, **params) -> state``.
    X, y : dask arrays with the same row chunks (X chunked along rows only).
    state : initial solver state (a small picklable object, or a Delayed).
    solver : short name used in task keys (``daskauc-<solver>-epoch``).
    order : chunk indices in visiting order (a chunk may be repeated or skipped).
    seeds : one ``SeedSequence`` per visit, or None.
    per_chunk : one small object per chunk index passed as ``extra`` (e.g. class counts).
    params : keyword arguments for ``step`` (scalars).
    stream : read each block inside its chain task (see the module docstring); None decides
        by :func:`is_materialized`.
    n_chains : chains run in parallel, each from ``state`` over its share of the visits
        (visits ``k, k + n_chains, ...``, each with its own seed as in one chain); their final
        states are combined by ``merge(state, finals, seed)`` in one last task. 1 is one
        chain: the graph (and the result) of the sequential solver.
    merge : the solver's combination of chain states (see :mod:`daskauc.solvers.chains`).
    sync_every : merge after every round of ``sync_every`` visits per chain instead of once at
        the end of the epoch (None).
    """
    if len(X.chunks[1]) != 1:
        raise ValueError("X must be chunked along rows only")
    if X.chunks[0] != y.chunks[0]:
        raise ValueError("X and y must have the same row chunks")
    params = dict(params or {})
    if stream is None:
        # the first epoch reads X through a lazy finiteness check: what matters is whether
        # the data under it is in memory (a persisted array must not be streamed: its chunks
        # live on the workers, not in a graph a chain task could run)
        from .._validation import without_finite_check

        stream = not is_materialized(without_finite_check(X))
    token = tokenize(X.name, y.name, stream, list(map(int, order)), solver,
                     [s.entropy if s is not None else None for s in (seeds or [])],
                     [s.spawn_key if s is not None else None for s in (seeds or [])],
                     state if not isinstance(state, Delayed) else state.key, params)
    if sync_every is not None and (isinstance(sync_every, bool) or not isinstance(
            sync_every, (int, np.integer)) or sync_every < 1):
        raise ValueError(f"sync_every must be None or an int >= 1; got {sync_every!r}")
    n_chains = max(1, min(int(n_chains), len(order)))
    if n_chains > 1:
        if merge is None:
            raise ValueError(f"{solver} has no way to combine parallel chains; use n_chains=1")
        token = tokenize(token, n_chains, sync_every)
    name = f"daskauc-{solver}-epoch-{token}"
    layer: dict = {}
    deps: list = [y] if stream else [X, y]
    if isinstance(state, Delayed):
        start = state.key
        deps.append(state)
    else:
        start = (name, "init")
        layer[start] = state
    # rounds of n_chains * sync_every visits; the chains' states merge after each round
    per_round = len(order) if not sync_every or n_chains == 1 else n_chains * int(sync_every)
    for r0 in range(0, len(order), per_round):
        visits = range(r0, min(r0 + per_round, len(order)))
        finals = []
        for chain in range(min(n_chains, len(visits))):
            prev = start
            for k in visits[chain::n_chains]:
                c = int(order[k])
                seed = None if seeds is None else seeds[k]
                extra = None if per_chunk is None else per_chunk[c]
                key = (name, k)
                x_arg = (_read, BlockReader(X, c)) if stream else (X.name, c, 0)
                layer[key] = (_apply_step, step, x_arg, (y.name, c), prev, seed, extra, params)
                prev = key
            finals.append(prev)
        if len(finals) == 1:
            start = finals[0]
        else:
            merged = (name, "merge", r0)
            layer[merged] = (merge, start, finals, _merge_seed(seeds, r0))
            start = merged
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return Delayed(start, graph, layer=name)


def resolve_chains(n_chains) -> int:
    """``n_chains`` as a count: an int >= 1, or "auto" = the worker threads of the current
    scheduler (a distributed client's total threads, else the threaded scheduler's)."""
    if isinstance(n_chains, str):
        if n_chains != "auto":
            raise ValueError(f"n_chains must be an int >= 1 or 'auto'; got {n_chains!r}")
        try:
            from distributed import get_client

            info = get_client().scheduler_info(n_workers=-1)
            return max(1, sum(w["nthreads"] for w in info["workers"].values()))
        except (ImportError, ValueError):
            import os

            return max(1, int(dask.config.get("num_workers", None) or os.cpu_count() or 1))
    if isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer)) or n_chains < 1:
        raise ValueError(f"n_chains must be an int >= 1 or 'auto'; got {n_chains!r}")
    return int(n_chains)


def _merge_seed(seeds, visit: int) -> np.random.SeedSequence | None:
    """A merge's own stream, a fixed function of the seed of its round's first visit."""
    if not seeds or seeds[visit] is None:
        return None
    s = seeds[visit]
    return np.random.SeedSequence(s.entropy, spawn_key=(*s.spawn_key, 1 << 30))


def _apply_step(step, X_block, y_block, state, seed, extra, params):
    return step(X_block, y_block, state, seed, extra, **params)


def is_materialized(X: da.Array) -> bool:
    """True when every block of ``X`` is already data (persisted), not a computation."""
    from distributed import Future

    graph = dict(X.__dask_graph__())
    keys = set(flatten(X.__dask_keys__()))
    return all(isinstance(graph.get(k), (np.ndarray, Future)) for k in keys)


class BlockReader:
    """Row block ``c`` of ``X`` as an opaque, picklable object holding only that block's graph.

    Calling it computes the block synchronously in the calling thread (inside a chain task).
    Dask does not look inside it, so its keys are not dependencies of the chain.
    """

    def __init__(self, X: da.Array, c: int):
        blk = X.blocks[c]
        (self.key,) = list(flatten(blk.__dask_keys__()))
        self.graph = dict(blk.__dask_graph__().cull({self.key}))

    def __call__(self) -> np.ndarray:
        from dask.local import get_sync

        return np.asarray(get_sync(self.graph, self.key))


def _read(reader: BlockReader) -> np.ndarray:
    return reader()


def run_epoch(step, X, y, state, **kwargs) -> Any:
    """Build and compute one epoch (one compute, on the current Dask scheduler)."""
    (out,) = dask.compute(epoch_graph(step, X, y, state, **kwargs))
    return out


def class_counts_block(block: np.ndarray) -> np.ndarray:
    """``[[negatives, positives]]`` of one block of {-1,+1} labels."""
    block = np.asarray(block)
    return np.array([[np.count_nonzero(block < 0), np.count_nonzero(block > 0)]],
                    dtype=np.int64)


def block_class_counts(y: da.Array) -> np.ndarray:
    """Per-chunk (negatives, positives) counts of a {-1,+1} label array: shape (n_chunks, 2).

    One small pass over ``y``; the result is used to weight chunks and sample pairs.
    """
    counts = y.map_blocks(class_counts_block, chunks=((1,) * y.numblocks[0], (2,)), new_axis=1,
                          dtype=np.int64, token="daskauc-class-counts")
    return np.asarray(counts.compute())
