"""Parallel chains over an array persisted on a cluster: each chain visits the chunks held by
its worker and runs there (daskauc.engine.chain_plan.assign_visits / chunk_holders), checked
against a brute-force count of the visits that must travel and against where the tasks of a
real process cluster ran."""

import dask
import dask.array as da
import numpy as np
import pytest

from daskauc.engine.chain_plan import assign_visits, chunk_holders
from daskauc.engine.stream import epoch_graph


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
    tasks ask for its worker, and exactly the one visit that must travel does."""
    client = dask_cluster_client
    a, b = sorted(client.scheduler_info()["workers"])
    blocks = [np.full((5, 2), float(i)) for i in range(6)]
    where = [a, a, a, b, a, b]
    # hash=False: the other test scatters the same values; shared keys would be released
    futures = [client.scatter(blk, workers=[w], hash=False)
               for blk, w in zip(blocks, where, strict=True)]
    X = da.concatenate([da.from_delayed(f, shape=(5, 2), dtype=float) for f in futures])
    y = da.ones(30, dtype=np.int8, chunks=5)
    X, y = client.persist([X, y])
    holders = chunk_holders(X)
    assert [h[0] for h in holders] == where
    order = [3, 0, 5, 1, 4, 2]
    shares, workers = assign_visits(order, 2, holders)
    assert workers == [a, b] and _travelling(order, shares, workers, holders) == 1
    g = epoch_graph(_record, X, y, [], solver="t", order=order, n_chains=2, merge=_concat)
    name = _epoch_name(g)
    # tiny chunks: each chain is one task, keyed by its first visit, asking for its worker
    assert _restrictions(g) == {(name, share[0]): (w,) for share, w in zip(shares, workers,
                                                                          strict=True)}
    (visits,) = dask.compute(g)
    assert sorted(c for c, _ in visits) == sorted(order)


def _restrictions(g) -> dict:
    """The worker restriction each task of an epoch graph asks for (its annotations). Where
    a task then runs is the scheduler's business: a loose restriction lets an idle worker
    steal a task whose data is tiny, as in these tests, but not a 64 MiB chunk's."""
    out = {}
    for layer in g.__dask_graph__().layers.values():
        fn = (layer.annotations or {}).get("workers")
        if fn is not None:
            assert layer.annotations["allow_other_workers"] is True  # a lost worker: elsewhere
            for key in layer:
                if fn(key) is not None:
                    out[key] = tuple(fn(key))
    return out


def _epoch_name(g) -> str:
    return next(n for n in g.__dask_graph__().layers if n.startswith("daskauc-t-epoch"))


def test_task_groups_cut_at_the_size_and_where_the_holder_changes():
    from daskauc.engine.stream import _task_groups

    assert _task_groups(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    where = ["a", "a", "b", "b", "b", "a", "a"]
    assert _task_groups(list(range(7)), 2, where) == [[0, 1], [2, 3], [4], [5, 6]]


def test_one_chain_follows_its_chunks_from_worker_to_worker(dask_cluster_client):
    """One chain over chunks held by two workers: each task holds chunks of one worker only
    and asks to run there (the chain hops, no chunk travels)."""
    client = dask_cluster_client
    a, b = sorted(client.scheduler_info()["workers"])
    where = [a, a, b, b, a, b]
    futures = [client.scatter(np.full((5, 2), float(i)), workers=[w], hash=False)
               for i, w in enumerate(where)]
    X = da.concatenate([da.from_delayed(f, shape=(5, 2), dtype=float) for f in futures])
    y = da.ones(30, dtype=np.int8, chunks=5)
    X, y = client.persist([X, y])
    assert [h[0] for h in chunk_holders(X)] == where
    order = [0, 1, 2, 3, 4, 5]
    g = epoch_graph(_record, X, y, [], solver="t", order=order)
    name = _epoch_name(g)
    # tasks [0 1] [2 3] [4] [5], keyed by their first visit, each asking for its chunks' holder
    assert _restrictions(g) == {(name, 0): (a,), (name, 2): (b,), (name, 4): (a,),
                                (name, 5): (b,)}
    (visits,) = dask.compute(g)
    assert [c for c, _ in visits] == order  # the sequential chain, in order


def test_a_streamed_chain_stays_on_one_worker(dask_cluster_client, tmp_path):
    """A chain over a store read inside its tasks: its state (two d-vectors, 4 MiB here)
    weighs its bytes for the scheduler, so each task runs where the last one left the state,
    and none crosses to the other worker. Weighed at ~50 bytes (``sys.getsizeof``), the
    state followed the y blocks from worker to worker at every chunk."""
    import scipy.sparse as sp
    from distributed import get_task_stream

    import daskauc
    from daskauc.solvers.univariate import univariate_sgd

    client = dask_cluster_client
    rng = np.random.default_rng(0)
    cols = np.sort(rng.choice(2**18, size=(4000, 20)), axis=1)  # duplicates are summed
    X = sp.csr_matrix((np.ones(cols.size, np.float32), cols.ravel(),
                       np.arange(0, cols.size + 1, 20)), shape=(4000, 2**18))
    X.sum_duplicates()
    y = np.where(rng.random(4000) < 0.3, 1, -1).astype(np.int8)
    path = str(tmp_path / "wide.zarr")
    daskauc.write_dataset(X, y, path, chunk_rows=250)
    ds = daskauc.open_dataset(path)
    with get_task_stream(client) as ts:
        univariate_sgd(ds.X, ds.y, n_epochs=1, random_state=0)
    chain = [t["worker"] for t in sorted(ts.data, key=lambda t: t["startstops"][0]["start"])
             if "-epoch-" in str(t["key"]) and "init" not in str(t["key"])]
    assert len(chain) == 16 and len(set(chain)) == 1, chain
