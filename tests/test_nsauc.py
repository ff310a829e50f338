import dask
import dask.array as da
import numpy as np
import pytest
from reference import sgd as ref
from sklearn.metrics import roc_auc_score

from daskauc._labels import check_X_y
from daskauc.estimators.pairwise_sgd import PairwiseHingeSGD
from daskauc.solvers._sgd_kernels import _constant_eta_cost, _pairwise_hinge_steps
from daskauc.solvers.nsauc import pair_rate, search_eta0


def _separable(n=2000, d=6, seed=0, gap=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3 * n, d))
    s = X @ np.linspace(1, 2, d)
    keep = np.abs(s) > gap
    X, s = X[keep][:n], s[keep][:n]
    return X, np.where(s > 0, 1, -1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("frame", [None, (2.5, 2.5, False), (2.5, 1.0, True)])
def test_kernel_equals_reference_loop(dtype, frame):
    """One chain, and a chain's frame (stride, gain, drift): its first round (steps scaled by
    the stride) and a later one (sequential steps and a drift)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 7)).astype(dtype)
    y = np.where(rng.random(60) < 0.3, 1, -1)
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
    partners = rng.normal(size=(9, 7)).astype(dtype)
    ri = rng.integers(0, pos.size, 500)
    # negatives of the chunk and partners (negative indices), mixed
    rj = np.where(rng.random(500) < 0.5, rng.integers(0, neg.size, 500),
                  -1 - rng.integers(0, 9, 500))
    w0 = rng.normal(size=7) * 0.1
    w, wbar = w0.copy(), np.zeros(7)
    counters = np.array([3, 0], dtype=np.int64)
    stride, gain, drifting = (1.0, 1.0, False) if frame is None else frame
    drift = rng.normal(size=7) * 1e-3 if drifting else None
    clock = np.array([3.0 if frame is None else 7.5])
    _pairwise_hinge_steps(X, partners, pos, neg, ri, rj,
                          np.zeros(0) if drift is None else drift, w, wbar, counters, clock,
                          1e-2, 50.0, 4, 3, 10, stride, gain)
    rw, rwbar, rt, rq, rc = ref.pairwise_hinge_steps(
        X, pos, neg, ri, rj, w0, np.zeros(7), 3, 0, 1e-2, 50.0, 4, 3, 10, partners=partners,
        clock=3.0 if frame is None else 7.5, stride=stride, gain=gain, drift=drift)
    np.testing.assert_allclose(w, rw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wbar, rwbar, rtol=1e-10, atol=1e-12)
    assert (counters[0], counters[1], clock[0]) == (rt, rq, rc)


def test_constant_eta_cost_and_eta0_search_against_reference():
    rng = np.random.default_rng(2)
    D = rng.normal(size=(300, 5))
    for eta in (0.01, 0.3, 4.0):
        assert _constant_eta_cost(D, eta, 1e-3) == pytest.approx(
            ref.regularized_cost_after_pass(D, eta, 1e-3), rel=1e-10)
    eta0 = search_eta0(D, 1e-3)
    cost = lambda e: ref.regularized_cost_after_pass(D, e, 1e-3)  # noqa: E731
    # Bottou's search ends with a local minimum of the doubling grid at eta0 or 2*eta0
    # (it keeps the smaller step of the final bracket)
    local_min_at_eta0 = cost(eta0) <= cost(eta0 / 2) and cost(eta0) <= cost(2 * eta0)
    local_min_at_2eta0 = cost(2 * eta0) <= cost(eta0) and cost(2 * eta0) <= cost(4 * eta0)
    assert local_min_at_eta0 or local_min_at_2eta0


def test_pair_rate_makes_an_epoch_of_n_steps():
    counts = np.array([[10, 5], [7, 0], [20, 1], [3, 3]])  # (negatives, positives)
    n_neg, n_pos = 40, 9
    assert pair_rate(counts) == pytest.approx(49 / (40 * 9))
    assert pair_rate(counts) * n_neg * n_pos == pytest.approx(49)
    with pytest.raises(ValueError, match="both positive and negative"):
        pair_rate(np.array([[5, 0], [7, 0]]))


def _replay_pairs(y_chunks, epochs, seed=0):
    """The pairs the step draws, by row id, over ``epochs`` epochs of the solver's visiting
    order (as ``_nsauc_step`` draws them, the window's samples kept as ids)."""
    from daskauc.engine.stream import epoch_plan, seed_root
    from daskauc.solvers.nsauc import draw_pairs, sample_partners, window_size

    counts = np.array([[np.sum(c < 0), np.sum(c > 0)] for c in y_chunks])
    rate = pair_rate(counts)
    C = len(y_chunks)
    ids = [(np.arange(len(c)) + 1000 * k)[:, None] for k, c in enumerate(y_chunks)]
    entropy, key = seed_root(seed)
    window: list = []  # ((positive ids, negative ids), chunk, (m+, m-)), oldest first
    for epoch in range(epochs):
        order, seeds = epoch_plan(entropy, key, epoch, C)
        for v, c in enumerate(order):
            rng = np.random.default_rng(seeds[v])
            pos, neg = np.flatnonzero(y_chunks[c] > 0), np.flatnonzero(y_chunks[c] < 0)
            entries = [(e, of) for e, k, of in window if k != c]
            ri, rj = draw_pairs(rng, pos.size, neg.size,
                                [(len(pp), len(pn), *of) for (pp, pn), of in entries],
                                rate=rate, n_chunks=C)
            partners = np.concatenate([np.zeros((0, 1), int)] + [
                part for (pp, pn), _ in entries for part in (pp, pn)])
            for i, j in zip(ri, rj, strict=True):
                yield (int(ids[c][pos[i], 0]) if i >= 0 else int(partners[-1 - i, 0]),
                       int(ids[c][neg[j], 0]) if j >= 0 else int(partners[-1 - j, 0]))
            window = [e for e in window if e[1] != c]
            window = window[max(0, len(window) - window_size(C) + 1):]
            window.append(((sample_partners(ids[c], pos, rng, C),
                            sample_partners(ids[c], neg, rng, C)), c, (pos.size, neg.size)))


def test_pairs_are_uniform_over_all_pairs_whatever_the_chunks():
    """The oracle is Algorithm 3's law, every positive-negative pair equally likely, ``rate``
    times per epoch. Replaying the draws of 400 epochs of the solver's visiting orders over 12
    time-ordered chunks whose share of positives rises from 10% to 60%: the steps per epoch
    are n (within 1%), pairs across chunks are drawn as often as uniform pairs are (within 1%),
    and every chunk's negatives and positives are drawn as often as uniform pairs draw them
    (per row, summed over the chunk: ~12,000 draws each, sampling noise ~1%; bound 4%, the
    rest being the first visits of the run, whose window is not full yet). Pairs drawn inside
    chunks (before) never pair rows of different chunks."""
    rng0 = np.random.default_rng(5)
    y_chunks = [np.where(rng0.random(40) < 0.1 + 0.5 * k / 11, 1, -1) for k in range(12)]
    counts = np.array([[np.sum(c < 0), np.sum(c > 0)] for c in y_chunks])
    n_neg, n_pos = counts.sum(axis=0)
    per_pos: dict = {}
    per_neg: dict = {}
    across = total = 0
    epochs = 400
    for a, b in _replay_pairs(y_chunks, epochs):
        per_pos[a] = per_pos.get(a, 0) + 1
        per_neg[b] = per_neg.get(b, 0) + 1
        across += a // 1000 != b // 1000
        total += 1
    assert abs(total / epochs / (n_neg + n_pos) - 1) < 0.01
    within = sum(int(cn * cp) for cn, cp in counts) / (n_pos * n_neg)
    assert abs(across / total - (1 - within)) < 0.01, (across / total, 1 - within)
    for marginal, col in ((per_neg, 0), (per_pos, 1)):
        got = np.array([sum(v for r, v in marginal.items() if r // 1000 == k) / counts[k, col]
                        for k in range(12)]) / (total / counts[:, col].sum())
        assert np.abs(got - 1).max() < 0.04, got


def test_time_ordered_chunks_learn_what_only_pairs_across_chunks_show():
    """A feature that is constant inside each chunk (a drift over time) and rises with the
    share of positives carries signal only between chunks: pairs drawn inside chunks cannot
    see it (its difference is 0 in every within-chunk pair). The oracle is one chunk
    (Algorithm 3 on the whole data): the chunked fit of the time-ordered data must match its
    AUC, and beat the best model without that feature."""
    rng = np.random.default_rng(11)
    n, chunks = 6000, 12
    time = np.repeat(np.linspace(-1, 1, chunks), n // chunks)
    y = np.where(rng.random(n) < 0.15 + 0.7 * (time + 1) / 2, 1, -1)
    X = np.column_stack([y * 0.5 + rng.normal(size=n), time])
    Xc = da.from_array(X, chunks=(n // chunks, 2))
    yc = da.from_array(y, chunks=n // chunks)
    kw = dict(lam=1e-4, n_epochs=3, random_state=2)
    one = PairwiseHingeSGD(**kw).fit(da.from_array(X, chunks=X.shape),
                                     da.from_array(y, chunks=y.shape))
    many = PairwiseHingeSGD(**kw).fit(Xc, yc)
    auc_one, auc_many = roc_auc_score(y, X @ one.coef_), roc_auc_score(y, X @ many.coef_)
    without = roc_auc_score(y, X[:, 0])  # the drift feature left out
    # the drift is worth ~0.08 AUC; the two fits draw different pairs (SGD noise ~0.005)
    assert auc_one > without + 0.05 and auc_many > without + 0.05, (auc_many, auc_one, without)
    assert abs(auc_many - auc_one) < 0.015, (auc_many, auc_one, without)


def test_separable_toy_reaches_auc_one():
    X, y = _separable()
    model = PairwiseHingeSGD(lam=1e-4, n_epochs=3, random_state=0).fit(X, y)
    assert roc_auc_score(y, model.decision_function(X)) == 1.0
    assert model.score(X, y) == 1.0
    assert model.n_iter_ == 3 and len(model.history_) == 3


def test_numpy_dask_and_zarr_give_the_same_model(tmp_path):
    X, y = _separable(n=1500)
    m_np = PairwiseHingeSGD(lam=1e-4, n_epochs=2, random_state=7).fit(X, y)
    # numpy of this size is one chunk: the dask one-chunk run must match exactly
    m_da = PairwiseHingeSGD(lam=1e-4, n_epochs=2, random_state=7).fit(
        da.from_array(X, chunks=X.shape), da.from_array(y, chunks=y.shape))
    np.testing.assert_array_equal(m_np.coef_, m_da.coef_)
    # many chunks: a dask array and the Zarr store written from it agree exactly
    from daskauc.store.dataset import open_dataset
    from daskauc.store.write import create_array, writing_store

    Xd = da.from_array(X, chunks=(300, X.shape[1]))
    yd = da.from_array(y.astype(np.int8), chunks=300)
    with writing_store(tmp_path / "ds.zarr", kind="dataset") as g:
        zx = create_array(g, "X", shape=X.shape, dtype=X.dtype, chunks=(300, X.shape[1]))
        zy = create_array(g, "y", shape=y.shape, dtype=np.int8, chunks=(300,))
        da.store([Xd, yd], [zx, zy])
    m_many = PairwiseHingeSGD(lam=1e-4, n_epochs=2, random_state=7).fit(Xd, yd)
    m_zarr = PairwiseHingeSGD(lam=1e-4, n_epochs=2, random_state=7).fit(
        str(tmp_path / "ds.zarr"))
    np.testing.assert_array_equal(m_many.coef_, m_zarr.coef_)
    assert open_dataset(tmp_path / "ds.zarr").X.numblocks[0] == 5
    # one chunk and many chunks sample pairs differently; both must solve the toy
    assert roc_auc_score(y, X @ m_many.coef_) == 1.0


def test_distributed_equals_threaded(dask_cluster_client):
    X, y = _separable(n=1200, seed=3)
    Xd = da.from_array(X, chunks=(200, X.shape[1]))
    yd = da.from_array(y, chunks=200)
    with dask.config.set(scheduler="threads"):
        local = PairwiseHingeSGD(lam=1e-4, n_epochs=2, random_state=5).fit(Xd, yd)
    dist = PairwiseHingeSGD(lam=1e-4, n_epochs=2, random_state=5).fit(Xd, yd)  # client default
    np.testing.assert_array_equal(local.coef_, dist.coef_)


def test_epoch_is_one_graph_with_named_tasks():
    X, y = _separable(n=800)
    Xd, yd, _ = check_X_y(X, y, chunk_rows=100)
    from dask.utils import key_split

    from daskauc.engine.stream import epoch_graph
    from daskauc.solvers.nsauc import PairwiseSGDState, _nsauc_step

    state = PairwiseSGDState(w=np.zeros(6), wbar=np.zeros(6), t=0, q=0, t0=10.0)
    g = epoch_graph(_nsauc_step, Xd, yd, state, solver="nsauc", order=np.arange(8),
                    per_chunk=list(range(8)), params=dict(lam=1e-3, rskip=4, askip=4,
                                                          average_start=0, rate=0.01,
                                                          n_chunks=8))
    names = {key_split(k) for k in dict(g.__dask_graph__())}
    assert "daskauc-nsauc-epoch" in names


def test_partial_fit_continues_the_state():
    X, y = _separable(n=600)
    m = PairwiseHingeSGD(lam=1e-3, n_epochs=1, random_state=0)
    m.partial_fit(X, y)
    t1 = m._solver_state.t
    m.partial_fit(X, y)
    assert m._solver_state.t == 2 * t1 == 2 * len(y)
    assert m.n_iter_ == 2 and len(m.history_) == 2


def test_chunked_sampling_close_to_global_on_shuffled_data():
    # within-chunk pair sampling on exchangeable chunks performs like global sampling
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6000, 10))
    y = np.where(X @ rng.normal(size=10) + rng.normal(size=6000) > 1.0, 1, -1)
    one = PairwiseHingeSGD(lam=1e-4, n_epochs=3, random_state=1).fit(
        da.from_array(X, chunks=X.shape), da.from_array(y, chunks=y.shape))
    many = PairwiseHingeSGD(lam=1e-4, n_epochs=3, random_state=1).fit(
        da.from_array(X, chunks=(500, 10)), da.from_array(y, chunks=500))
    a1, a2 = roc_auc_score(y, X @ one.coef_), roc_auc_score(y, X @ many.coef_)
    assert abs(a1 - a2) < 0.01


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0]]), np.array([1, -1]), "NaN or infinity"),
        (np.ones((4, 2)), np.ones(4), "single class"),
        (np.ones((4, 2)), np.array([1, -1, 1]), "4 rows but y has 3"),
        (np.ones((4, 2)), np.array([0, 1, 2, 1]), "group the classes"),
    ],
)
def test_bad_input_errors(X, y, match):
    with pytest.raises(ValueError, match=match):
        PairwiseHingeSGD().fit(X, y)


def test_unknown_chunks_and_bad_params():
    X = da.from_array(np.random.default_rng(0).normal(size=(20, 2)), chunks=5)
    Xu = X[X[:, 0] > -10]
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        PairwiseHingeSGD().fit(Xu, np.ones(20))
    with pytest.raises(ValueError, match="lam must be > 0"):
        PairwiseHingeSGD(lam=0.0).fit(np.ones((4, 2)), np.array([1, -1, 1, -1]))
    with pytest.raises(TypeError, match="dtype object"):
        PairwiseHingeSGD().fit(np.array([["a", 1]], dtype=object), np.array([1]))


def test_nan_in_dask_input_is_caught_in_the_first_epoch_only():
    from daskauc._validation import check_finite, without_finite_check
    from daskauc.engine.chain_plan import is_materialized

    X, y = _separable(n=400)
    X_bad = X.copy()
    X_bad[350, 2] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(first in row 350\)"):
        PairwiseHingeSGD(lam=1e-3, n_epochs=2, random_state=0).fit(
            da.from_array(X_bad, chunks=(100, 6)), da.from_array(y, chunks=100))
    Xp = da.from_array(X, chunks=(100, 6)).persist()
    checked = check_finite(Xp)
    assert not is_materialized(checked)
    assert is_materialized(without_finite_check(checked))
    np.testing.assert_array_equal(without_finite_check(checked).compute(), X)
