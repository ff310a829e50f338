"""Data-parallel stochastic epochs: the combinations of chain states against their oracles
(exact averages, uniform reservoirs), the graph they build, and fits with several chains."""

import dask
import dask.array as da
import numpy as np
import pytest

from daskauc import OAM, SPAM, PairwiseHingeSGD
from daskauc.solvers.chains import merge_reservoirs, merge_running_average, mix_iterates
from daskauc.solvers.stream import epoch_graph, resolve_chains


def test_merged_running_average_is_the_average_of_every_iterate():
    rng = np.random.default_rng(0)
    start_its = rng.normal(size=(7, 3))
    chains = [rng.normal(size=(m, 3)) for m in (4, 0, 9)]
    start_avg = start_its.mean(axis=0)
    avgs = [np.vstack([start_its, c]).mean(axis=0) for c in chains]
    counts = [7 + len(c) for c in chains]
    merged = merge_running_average(start_avg, 7, avgs, counts)
    np.testing.assert_allclose(merged, np.vstack([start_its, *chains]).mean(axis=0), rtol=1e-13)
    np.testing.assert_array_equal(merge_running_average(start_avg, 7, [start_avg], [7]),
                                  start_avg)


def test_iterates_are_mixed_by_steps():
    w = [np.array([1.0, 0.0]), np.array([0.0, 1.0])]
    np.testing.assert_allclose(mix_iterates(np.zeros(2), w, [3, 1]), [0.75, 0.25])
    np.testing.assert_array_equal(mix_iterates(np.ones(2), w, [0, 0]), np.ones(2))


def _reservoir(items, K, rng):
    """Vitter's algorithm R, as OAM's kernel keeps its buffers (row ids as 1-d rows)."""
    buf, n = np.zeros((K, 1)), 0
    for x in items:
        n += 1
        if n <= K:
            buf[n - 1] = x
        elif rng.random() < K / n:
            buf[rng.integers(K)] = x
    return buf, n


def test_merged_reservoirs_are_uniform_samples_of_everything_seen():
    """Inclusion frequency of every row id over many merges against K / N (the oracle of a
    uniform sample), with a start population and three chains of different sizes."""
    K, trials = 5, 4000
    start_items, chain_items = np.arange(0, 12), [np.arange(12, 20), np.arange(20, 50),
                                                  np.arange(50, 53)]
    N = 53
    rng = np.random.default_rng(1)
    hits = np.zeros(N)
    for _ in range(trials):
        buf0, n0 = _reservoir(start_items, K, rng)
        own = [_reservoir(c, K, rng) for c in chain_items]  # each chain's own rows only
        merged = merge_reservoirs(buf0, n0, [b for b, _ in own], [n for _, n in own], rng)
        ids = merged[:, 0].astype(int)
        assert len(set(ids)) == K  # a sample without replacement
        hits[ids] += 1
    freq = hits / trials
    se = np.sqrt(K / N * (1 - K / N) / trials)
    assert np.all(np.abs(freq - K / N) < 5 * se), freq


def test_reservoirs_with_fewer_rows_than_slots_keep_them_all():
    rng = np.random.default_rng(0)
    buf0, n0 = _reservoir([1.0, 2.0], 10, rng)
    own = [_reservoir([3.0], 10, rng), _reservoir([4.0, 5.0], 10, rng)]
    merged = merge_reservoirs(buf0, n0, [b for b, _ in own], [n for _, n in own], rng)
    assert sorted(merged[:5, 0]) == [1, 2, 3, 4, 5] and not merged[5:].any()


def _step(Xb, yb, state, seed, extra):
    return state + [int(Xb[0, 0])]


def test_chains_split_the_visits_and_merge_once():
    X = da.from_array(np.arange(8, dtype=float).reshape(8, 1), chunks=(1, 1))
    y = da.from_array(np.ones(8, np.int8), chunks=1)
    order = [5, 2, 7, 0, 1, 6, 3, 4]
    seen = {}

    def merge(start, finals, seed):
        seen["start"], seen["finals"] = start, finals
        return [v for f in finals for v in f]

    g = epoch_graph(_step, X, y, [], solver="t", order=order, n_chains=3, merge=merge)
    (out,) = dask.compute(g, scheduler="sync")
    assert seen["start"] == [] and seen["finals"] == [[5, 0, 3], [2, 1, 4], [7, 6]]
    (one,) = dask.compute(epoch_graph(_step, X, y, [], solver="t", order=order), scheduler="sync")
    assert one == order  # one chain: every visit in order, no merge
    with pytest.raises(ValueError, match="no way to combine"):
        epoch_graph(_step, X, y, [], solver="t", order=order, n_chains=2)
    # sync_every=1: rounds of 3 visits (one per chain), merged after each round
    rounds = []

    def merge_round(start, finals, seed):
        rounds.append(finals)
        return [v for f in finals for v in f]

    g = epoch_graph(_step, X, y, [], solver="t", order=order, n_chains=3, merge=merge_round,
                    sync_every=1)
    dask.compute(g, scheduler="sync")
    # each chain's last visit per round: 3 rounds, the last with the 2 visits left
    assert [[f[-1] for f in r] for r in rounds] == [[5, 2, 7], [0, 1, 6], [3, 4]]
    assert rounds[1][0][:3] == [5, 2, 7]  # round 2 starts from round 1's merge
    with pytest.raises(ValueError, match="sync_every"):
        epoch_graph(_step, X, y, [], solver="t", order=order, n_chains=2, merge=merge,
                    sync_every=0)


def test_n_chains_values():
    assert resolve_chains(3) == 3
    with dask.config.set(num_workers=5):
        assert resolve_chains("auto") == 5
    for bad in (0, -1, 1.5, "all", True):
        with pytest.raises(ValueError, match="n_chains"):
            resolve_chains(bad)


def _problem(n=12000, d=10, seed=0):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=d)
    X = rng.normal(size=(n + 6000, d))
    y = np.where(X @ beta + 2 * rng.normal(size=n + 6000) > 1, 1, -1)
    return (da.from_array(X[:n], chunks=(1000, d)), da.from_array(y[:n], chunks=1000),
            X[n:], y[n:])


ESTIMATORS = [(PairwiseHingeSGD, {"lam": 1e-4}), (SPAM, {"eta": 0.1}),
              (OAM, {"C": 0.01, "average": True})]


@pytest.mark.parametrize("cls, kw", ESTIMATORS)
def test_chains_reach_the_one_chain_auc_deterministically(cls, kw):
    from sklearn.metrics import roc_auc_score

    X, y, Xt, yt = _problem()
    with dask.config.set(scheduler="threads"):
        one = cls(n_epochs=3, random_state=0, **kw).fit(X, y)
        auc1 = roc_auc_score(yt, Xt @ one.coef_)
        for k in (2, 4):
            many = cls(n_epochs=3, random_state=0, n_chains=k, **kw).fit(X, y)
            # OAM's test AUC varies by 0.002-0.009 between seeds on this problem
            assert abs(roc_auc_score(yt, Xt @ many.coef_) - auc1) < (0.012 if cls is OAM
                                                                      else 0.002)
            assert not np.array_equal(many.coef_, one.coef_)  # really parallel chains
            again = cls(n_epochs=3, random_state=0, n_chains=k, **kw).fit(X, y)
            np.testing.assert_array_equal(again.coef_, many.coef_)
            # partial_fit continues exactly for a fixed n_chains
            cont = cls(n_epochs=2, random_state=0, n_chains=k, **kw).fit(X, y).partial_fit(X, y)
            np.testing.assert_array_equal(cont.coef_, many.coef_)


def test_chains_run_on_both_workers_of_a_process_cluster(dask_cluster_client):
    X0, y0, _, _ = _problem()
    X, y = X0.persist(), y0.persist()
    from distributed import get_task_stream

    with get_task_stream(dask_cluster_client) as stream:
        cluster_fit = PairwiseHingeSGD(n_epochs=1, random_state=0, n_chains=2,
                                       lam=1e-4).fit(X, y)
    workers = {t["worker"] for t in stream.data if "daskauc-nsauc-epoch" in str(t["key"])}
    with dask.config.set(scheduler="threads"):
        local = PairwiseHingeSGD(n_epochs=1, random_state=0, n_chains=2, lam=1e-4).fit(X0, y0)
    np.testing.assert_allclose(cluster_fit.coef_, local.coef_, rtol=1e-12, atol=1e-14)
    assert len(workers) == 2
