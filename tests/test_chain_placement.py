"""Parallel chains over an array persisted on a cluster: each chain visits the chunks held by
its worker and runs there (daskauc.solvers.stream.assign_visits / chunk_holders), checked
against a brute-force count of the visits that must travel and against where the tasks of a
real process cluster ran."""

import dask
import dask.array as da
import numpy as np
import pytest

from daskauc.solvers.stream import assign_visits, chunk_holders, epoch_graph


def test_without_holders_chains_interleave_the_visits():
    shares, workers = assign_visits([4, 1, 0, 3, 2, 5, 6], 3)
    assert shares == [[0, 3, 6], [1, 4], [2, 5]] and workers == [None] * 3


def _travelling(chunks, shares, workers, holders):
    return sum(workers[k] not in holders[chunks[p]] for k, s in enumerate(shares) for p in s)


@pytest.mark.parametrize("seed", range(40))
def test_each_chain_takes_its_workers_chunks_up_to_an_equal_share(seed):
    rng = np.random.default_rng(seed)
    n_chunks, W, K = int(rng.integers(1, 30)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    names = [f"tcp://w{i}" for i in range(W)]
    holders = [(names[int(rng.integers(W))],) for _ in range(n_chunks)]
    chunks = list(rng.permutation(n_chunks))[: int(rng.integers(1, n_chunks + 1))]
    shares, workers = assign_visits(chunks, K, holders)
    assert sorted(p for s in shares for p in s) == list(range(len(chunks)))
    assert all(s == sorted(s) for s in shares)
    cap = -(-len(chunks) // K)
    assert max(len(s) for s in shares) <= cap
    held = sorted({h[0] for h in (holders[c] for c in chunks)})
    assert workers == [held[k % len(held)] for k in range(K)]
    # brute force: a worker's chains take at most cap of its visits each; the rest travel
    must_travel = sum(max(0, sum(holders[c][0] == w for c in chunks) - cap * workers.count(w))
                      for w in held)
    assert _travelling(chunks, shares, workers, holders) == must_travel


def test_replicated_chunks_go_to_the_least_loaded_chain_that_holds_them():
    holders = [("a", "b")] * 4
    shares, workers = assign_visits([0, 1, 2, 3], 2, holders)
    assert shares == [[0, 2], [1, 3]] and workers == ["a", "b"]


def _record(Xb, yb, state, seed, extra):
    from distributed import get_worker

    return state + [(int(Xb[0, 0]), get_worker().address)]


def _concat(start, finals, seed):
    return start + [v for f in finals for v in f[len(start):]]


def test_chains_run_where_their_chunks_are_held(dask_cluster_client):
    """Six chunks scattered unevenly (four on one worker, two on the other): each chain's
    tasks run on its worker, and exactly the one visit that must travel does."""
    client = dask_cluster_client
    a, b = sorted(client.scheduler_info()["workers"])
    blocks = [np.full((5, 2), float(i)) for i in range(6)]
    where = [a, a, a, b, a, b]
    futures = [client.scatter(blk, workers=[w]) for blk, w in zip(blocks, where, strict=True)]
    X = da.concatenate([da.from_delayed(f, shape=(5, 2), dtype=float) for f in futures])
    y = da.ones(30, dtype=np.int8, chunks=5)
    X, y = client.persist([X, y])
    holders = chunk_holders(X)
    assert [h[0] for h in holders] == where
    order = [3, 0, 5, 1, 4, 2]
    shares, workers = assign_visits(order, 2, holders)
    assert workers == [a, b] and _travelling(order, shares, workers, holders) == 1
    g = epoch_graph(_record, X, y, [], solver="t", order=order, n_chains=2, merge=_concat)
    (visits,) = dask.compute(g)
    ran = dict(visits)
    assert sorted(ran) == sorted(order)
    for k, share in enumerate(shares):
        assert all(ran[order[p]] == workers[k] for p in share), (ran, shares)
