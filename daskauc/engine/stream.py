"""The chunk-streaming engine shared by every stochastic solver.

One epoch is one Dask graph: a chain of tasks that threads the solver state through the row
chunks of ``X`` (and ``y``) in a shuffled order, as dask-ml's ``_partial.fit`` does. Each task
calls ``step(X_block, y_block, state, seed, *extras, **params)`` and returns the new state,
so only one chunk per worker thread is in use at a time: a dataset far larger than the
cluster's memory streams through with bounded memory, reading each chunk from Zarr just
before it is needed. Task keys are ``daskauc-<solver>-epoch-<token>`` so the dashboard shows
which solver runs. :func:`run_epochs` is the one epoch loop every stochastic solver (and
mini-batch k-means) runs: the epochs' seeds and chunk orders, one graph and one compute per
epoch, the history, the progress and log lines, the divergence check, the callback.

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

A streamed chain task also starts reading its chain's next chunk in a background thread of
its worker before it works on its own (read-ahead, ``_config.READ_AHEAD`` chunks per worker
thread), so reading overlaps with computing; the next task takes that read instead of
reading again. A read that fails fails the task that needs it, as reading there would.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.core import flatten
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from .. import _config
from .._compute import compute, compute_built, threads_here
from .._compute import share as share_constant
from .._sparse import is_sparse
from .chain_plan import (
    Placement,
    assign_visits,
    chunk_holders,
    is_materialized,
)
from .progress import report as report_progress
from .progress import solver_log_level

logger = logging.getLogger("daskauc")


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
    from .._params import seed_sequence

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


def _same(obj):
    return obj


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
    strides: bool = False,
    holders: Sequence[tuple[str, ...]] | None | str = "find",
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
    merge : the solver's combination of chain states (see :mod:`daskauc.engine.chains`).
    sync_every : merge after every round of ``sync_every`` visits per chain instead of once at
        the end of the epoch (None).
    strides : with several chains in a round, pass each chain's step ``stride=`` the rows of
        the round over the rows of the chain's share: the rows of one chain's visit that
        each of its rows stands for (:mod:`daskauc.engine.chains`, "Chains that stand for
        the sequential run"). One chain gets no ``stride``.
    holders : the workers holding each chunk of a persisted ``X`` (:func:`chunk_holders`),
        None for none; "find" asks the scheduler now.
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
        token = tokenize(token, n_chains, sync_every, strides)
    name = f"daskauc-{solver}-epoch-{token}"
    layer: dict = {}
    deps: list = [y] if stream else [X, y]
    if isinstance(state, Delayed):
        start = state.key
        deps.append(state)
    else:
        start = (name, "init")
        shared = share_constant(state)  # a large state (NSAUC's partner rows) is scattered
        layer[start] = state if shared is state else (_same, shared)
    # where each chunk is held when X is persisted on a cluster: a chain then visits the
    # chunks of one worker and runs there, so no chunk travels (None: anywhere is as good)
    if stream:
        holders = None
    elif isinstance(holders, str):
        holders = chunk_holders(X)
    placement: dict = {}
    # consecutive visits of a chain share a task, so that scheduling a task (a round trip to
    # the scheduler, ~4 ms here) is small beside its work
    chunk_bytes = X.nbytes / max(1, X.numblocks[0])
    per_task = max(1, int(_config.CHAIN_TASK_BYTES // max(1.0, chunk_bytes)))
    # rounds of n_chains * sync_every visits; the chains' states merge after each round
    per_round = len(order) if not sync_every or n_chains == 1 else n_chains * int(sync_every)
    for r0 in range(0, len(order), per_round):
        visits = range(r0, min(r0 + per_round, len(order)))
        shares, workers = assign_visits([int(order[k]) for k in visits], n_chains,
                                        holders if n_chains > 1 else None)
        rows = [sum(X.chunks[0][int(order[visits[i]])] for i in share) for share in shares]
        several = sum(1 for r in rows if r) > 1
        finals = []
        for share, worker, chain_rows in zip(shares, workers, rows, strict=True):
            if not share:
                continue
            chain_params = (dict(params, stride=sum(rows) / chain_rows)
                            if strides and several and chain_rows else params)
            prev = start
            chain_visits = [visits[i] for i in share]
            # a chain that runs anywhere (one chain) follows its chunks: a task holds chunks
            # of one worker only and runs there, so none of them travels
            where = (None if holders is None or worker is not None
                     else [holders[int(order[k])] for k in chain_visits])
            tasks = _task_groups(chain_visits, per_task, where)
            first = 0
            for t, group in enumerate(tasks):
                chunks = [int(order[k]) for k in group]
                if stream:  # the blocks are read inside the task, the next task's ahead
                    blocks = [BlockReader(X, c) for c in chunks]
                    ahead = (BlockReader(X, int(order[tasks[t + 1][0]]))
                             if t + 1 < len(tasks) else None)
                else:
                    blocks, ahead = [(X.name, c, 0) for c in chunks], None
                key = (name, group[0])
                layer[key] = (_run_visits, step, blocks, [(y.name, c) for c in chunks], prev,
                              [None if seeds is None else seeds[k] for k in group],
                              [None if per_chunk is None else per_chunk[c] for c in chunks],
                              chain_params, ahead)
                if worker is not None:
                    placement[key] = [worker]
                elif where is not None and where[first]:
                    placement[key] = list(where[first])
                first += len(group)
                prev = key
            finals.append(prev)
        if len(finals) == 1:
            start = finals[0]
        else:
            merged = (name, "merge", r0)
            layer[merged] = (merge, start, finals, _merge_seed(seeds, r0))
            start = merged
    # each chain runs on its chunks' worker (and elsewhere only if that worker is gone)
    annotations = ({"workers": Placement(placement), "allow_other_workers": True}
                   if placement else {})
    with dask.annotate(**annotations):
        graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return Delayed(start, graph, layer=name)


def _merge_seed(seeds, visit: int) -> np.random.SeedSequence | None:
    """A merge's own stream, a fixed function of the seed of its round's first visit."""
    if not seeds or seeds[visit] is None:
        return None
    s = seeds[visit]
    return np.random.SeedSequence(s.entropy, spawn_key=(*s.spawn_key, 1 << 30))


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
        """The block, read now; plain-bytes chunks go into reused buffers (the caller uses
        the block and drops it: :func:`daskauc.store.rawchunks.reusing_buffers`)."""
        from dask.local import get_sync

        from ..store.rawchunks import reusing_buffers

        with reusing_buffers():
            block = get_sync(self.graph, self.key)
        return block if is_sparse(block) else np.asarray(block)


def _task_groups(visits: list[int], per_task: int, where: list | None = None
                 ) -> list[list[int]]:
    """A chain's visits cut into tasks of at most ``per_task`` consecutive visits, and also
    wherever ``where`` (the holders of each visit's chunk) changes."""
    tasks: list[list[int]] = []
    for i, k in enumerate(visits):
        if (not tasks or len(tasks[-1]) == per_task
                or (where is not None and where[i] != where[i - 1])):
            tasks.append([])
        tasks[-1].append(k)
    return tasks


def _run_visits(step, blocks, y_blocks, state, seeds, extras, params, ahead):
    """One chain task: ``step`` over its visits in order. Streamed blocks (``BlockReader``)
    are taken from the read-ahead (or read now), and the read of the next one, or of the next
    task's first block ``ahead``, starts before the work on this one."""
    for i, (block, y_block, seed, extra) in enumerate(zip(blocks, y_blocks, seeds, extras,
                                                          strict=True)):
        if isinstance(block, BlockReader):
            block = _READ_AHEAD.take(block)
            following = blocks[i + 1] if i + 1 < len(blocks) else ahead
            if following is not None:
                _READ_AHEAD.start(following)
        state = step(block, y_block, state, seed, extra, **params)
    return state


class ReadAhead:
    """Background reads of the blocks that streamed chain tasks of this process need next.

    At most ``_config.READ_AHEAD`` reads per thread of the process (a Dask worker's threads,
    or the threaded scheduler's) are held, pending or done; the oldest are dropped beyond
    that (a chain that moved to another worker never takes its read here).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: OrderedDict = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None
        self._limit = 0

    def start(self, reader: BlockReader) -> None:
        with self._lock:
            if self._pool is None:
                threads = threads_here()
                self._limit = max(1, _config.READ_AHEAD * threads)
                self._pool = ThreadPoolExecutor(threads, thread_name_prefix="daskauc-read-ahead")
            if reader.key in self._pending or _config.READ_AHEAD < 1:
                return
            self._pending[reader.key] = self._pool.submit(reader)
            while len(self._pending) > self._limit:
                self._pending.popitem(last=False)[1].cancel()

    def take(self, reader: BlockReader) -> np.ndarray:
        with self._lock:
            future = self._pending.pop(reader.key, None)
        if future is None or future.cancelled():
            return reader()
        return future.result()  # a failed read raises here, in the task that needs it


_READ_AHEAD = ReadAhead()


def run_epoch(step, X, y, state, **kwargs) -> Any:
    """Build and compute one epoch (one compute, on the current Dask scheduler); on a
    cluster the starting state is let go of once the first chain task has it
    (:func:`daskauc._compute.compute_built`)."""
    return compute_built(lambda: epoch_graph(step, X, y, state, **kwargs))


def run_epochs(
    step: Callable[..., Any],
    X: da.Array,
    y: da.Array,
    state: Any,
    *,
    solver: str,
    n_epochs: int,
    params: dict | None = None,
    per_chunk: Sequence[Any] | None = None,
    shuffle: bool = True,
    n_chains: int = 1,
    merge: Callable[..., Any] | None = None,
    sync_every: int | None = None,
    strides: bool = False,
    one_chain_first: bool = False,
    remote: tuple[str, ...] = (),
    seed_root: tuple[int, tuple] | None = None,
    start: Callable[[Any], Any] | None = None,
    record: Callable[[Any, float], dict] | None = None,
    finite: Callable[[Any], Sequence[np.ndarray]] | None = None,
    diverged: str = "",
    score: Callable[[Any], float] | None = None,
    score_as: tuple[str, str] = ("auc", "AUC"),
    log: str | None = "%s epoch %d: %.2fs",
    unit: str = "epoch",
    callback: Callable[[int, dict], Any] | None = None,
) -> tuple[Any, list[dict]]:
    """Run ``n_epochs`` epochs, one graph (:func:`epoch_graph`) and one compute each; return
    the final state and the history, one record per epoch.

    An epoch visits the chunks in the order and with the seeds :func:`epoch_plan` gives for
    the run's root seed and the epoch's number. Either the state carries both (a frozen
    dataclass with ``seed_entropy``, ``seed_key`` and ``epoch``, the epochs done, which
    advances here after every epoch), so that later calls (``partial_fit``) continue one
    random stream; or the root is ``seed_root`` and this call's epochs are numbered 0, 1, ...
    The first epoch reads ``X`` through its lazy finiteness check, if it has one
    (:func:`daskauc._validation.without_finite_check`), later ones the data under it.

    What is the solver's own:

    step, params, per_chunk, n_chains, merge, sync_every, strides
        The chain of the epoch (:func:`epoch_graph`), the solver's name ``solver`` in its keys.
    one_chain_first : the first epoch of a run (epoch 0) is one chain whatever ``n_chains``
        (:mod:`daskauc.engine.chains`, "Chains that stand for the sequential run").
    remote : fields of the state (large, and needed by no function here) that stay on the
        cluster between epochs when a distributed client runs them: the epochs are then
        submitted ahead (:func:`_pipelined_epochs`); ``start`` must be None.
    start : the state an epoch starts from, made from the state the last epoch ended in.
    record : ``record(state, seconds)``, the epoch's history record after ``"epoch"``
        (default ``{"seconds": seconds}``); ``seconds`` is the time of the epoch's compute.
    finite, diverged : the arrays that must stay finite, and the message of the
        ``FloatingPointError`` raised when one does not (``{solver}`` and ``{epoch}`` filled in).
    score, score_as : the validation AUC of the state, recorded under ``score_as[0]`` and
        logged as ``score_as[1]``.
    log : the epoch's log line, formatted with the solver, the epoch and the seconds (the
        score appended); None for none.
    unit : what the progress bar counts (:func:`daskauc.engine.progress.report`).
    callback : ``callback(epoch, record)`` after every epoch (checkpoints).
    """
    from .._compute import distributed_client
    from .._validation import without_finite_check

    history = []
    n_chunks = X.numblocks[0]
    X_unchecked = without_finite_check(X)  # the NaN check runs in the first epoch only
    first = state.epoch if seed_root is None else 0
    # where the chunks are, once for the run: a chunk copied to a second worker during it
    # (a chain task run elsewhere) would otherwise change later epochs' split of the chunks
    where = None if not is_materialized(X_unchecked) else chunk_holders(X_unchecked)

    def plan(e):
        number = first + e
        if seed_root is None:
            order, seeds = epoch_plan(state.seed_entropy, state.seed_key, number, n_chunks,
                                      shuffle)
        else:
            order, seeds = epoch_plan(*seed_root, number, n_chunks, shuffle)
        return dict(order=order, seeds=seeds, solver=solver, per_chunk=per_chunk,
                    params=params, n_chains=1 if one_chain_first and number == 0 else n_chains,
                    merge=merge, sync_every=sync_every, strides=strides, holders=where)

    def done(e, light, seconds):  # an epoch's checks, history row, progress, log, callback
        epoch = first + e + 1
        if finite is not None and not all(np.isfinite(a).all() for a in finite(light)):
            raise FloatingPointError(diverged.format(solver=solver, epoch=epoch))
        row = {"epoch": epoch, **(record(light, seconds) if record else {"seconds": seconds})}
        if score is not None:
            row[score_as[0]] = score(light)
        history.append(row)
        report_progress(e + 1, n_epochs, unit)
        if log is not None:
            logger.log(solver_log_level(), log + "%s", solver, epoch, seconds,
                        f", {score_as[1]} {row[score_as[0]]:.4f}" if score is not None else "")
        if callback is not None:
            callback(epoch, row)

    client = distributed_client() if remote and start is None else None
    if client is not None and int(n_epochs) > 0:
        return _pipelined_epochs(client, step, X, X_unchecked, y, state, int(n_epochs), plan,
                                 done, remote, advance=seed_root is None), history
    for e in range(int(n_epochs)):
        tic = time.perf_counter()
        state = run_epoch(step, X if e == 0 else X_unchecked, y,
                          state if start is None else start(state), **plan(e))
        if seed_root is None:
            state = replace(state, epoch=state.epoch + 1)
        done(e, state, time.perf_counter() - tic)
    return state, history


def _light(state, remote: tuple[str, ...]):
    """``state`` without its fields ``remote`` (None in their place): what the client needs
    of an epoch's end."""
    return replace(state, **dict.fromkeys(remote))


def _pipelined_epochs(client, step, X, X_unchecked, y, state, n_epochs: int, plan, done,
                      remote: tuple[str, ...], *, advance: bool):
    """``run_epochs`` on a distributed client for a state whose fields ``remote`` are large:
    the state stays on the cluster from epoch to epoch (each epoch's graph starts from the
    last one's persisted end) and the client gets it without them (:func:`_light`) for the
    epoch's checks and record. Epoch ``e + 1`` is submitted before the client waits for
    epoch ``e``, so the client's round trip and the next graph's submission overlap the
    cluster's work; an epoch's seconds are then between the ends of consecutive epochs. One
    compute of the whole state at the end."""
    from dask import delayed

    from .._compute import compute, persist

    # the steps never read the epoch count, so the states on the cluster keep the run's
    # first one and the client's copies (and the final state) get theirs: no task between
    # an epoch's merge and the next epoch's chains
    epoch = getattr(state, "epoch", 0)
    current, pending, tic = state, [], time.perf_counter()
    try:
        for e in range(n_epochs):
            (current,) = persist(epoch_graph(step, X if e == 0 else X_unchecked, y, current,
                                             **plan(e)))
            pending.append(client.compute(delayed(_light)(current, remote)))
            while pending and (len(pending) > 1 or e == n_epochs - 1):
                light = pending.pop(0).result()
                now = time.perf_counter()
                done_e = e - len(pending)
                done(done_e, replace(light, epoch=epoch + done_e + 1) if advance else light,
                     now - tic)
                tic = now
    except BaseException:
        for f in pending:
            f.cancel()
        raise
    (state,) = compute(current)
    return replace(state, epoch=epoch + n_epochs) if advance else state


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
    return np.asarray(compute(counts)[0])
