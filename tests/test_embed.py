"""Tests of daskauc.embed: k-means, k-means Nystroem, random Fourier features, embedding stores."""

import bz2
import io
import itertools

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import shared_data
from dask.callbacks import Callback
from distributed import get_task_stream
from helpers import ComputeCounter, dataset_store
from reference import embed as ref
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import MiniBatchKMeans as SkMiniBatchKMeans
from sklearn.datasets import load_svmlight_file, make_blobs
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from daskauc import _config
from daskauc._arrays import sample_rows
from daskauc.embed._kernels import _nearest_center, _sculley_update
from daskauc.embed.fourier import RandomFourierFeatures
from daskauc.embed.kmeans import (
    MiniBatchKMeans,
    kmeans_plusplus,
    minibatch_kmeans,
)
from daskauc.embed.nystroem import (
    KMeansNystroem,
    default_gamma,
    gaussian_kernel,
    load_embedding_map,
)
from daskauc.store.dataset import open_dataset

TOL = {np.float32: 2e-5, np.float64: 1e-12}






def _blobs(n=6000, k=6, d=4, std=0.3, seed=0):
    X, labels, centers = make_blobs(n_samples=n, centers=k, n_features=d, cluster_std=std,
                                    center_box=(-20, 20), random_state=seed,
                                    return_centers=True)
    return X, labels, centers


# ----------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 5, 16, 37])
def test_nearest_center_is_argmin_with_first_index_on_ties(dtype, k):
    rng = np.random.default_rng(k)
    C = rng.normal(size=(k, 3)).astype(dtype)
    X = np.concatenate([rng.normal(size=(50, 3)), C]).astype(dtype)
    if k > 2:
        C[k - 1] = C[1]  # a duplicate centre: the smaller index must win
    G = X @ C.T
    labels = np.empty(len(X), np.int64)
    best = np.empty(len(X))
    _nearest_center(G, np.einsum("ij,ij->i", C, C), labels, best)
    np.testing.assert_array_equal(labels, ref.nearest(X, C))
    d2 = best + np.einsum("ij,ij->i", X.astype(np.float64), X.astype(np.float64))
    np.testing.assert_allclose(d2, np.min(((X[:, None].astype(float) - C[None]) ** 2).sum(-1),
                                          axis=1), atol=1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sculley_update_equals_weighted_mean(dtype):
    rng = np.random.default_rng(1)
    Xb = rng.normal(size=(40, 3)).astype(dtype)
    C = rng.normal(size=(4, 3))
    counts = np.array([0, 3, 10, 0], np.int64)
    labels = rng.integers(0, 3, size=40)  # centre 3 gets nothing
    expect_C, expect_v = ref.minibatch_update(Xb, labels, C, counts)
    _sculley_update(Xb, labels, C, counts)
    np.testing.assert_allclose(C, expect_C, rtol=1e-12)
    np.testing.assert_array_equal(counts, expect_v)


# ----------------------------------------------------------------------------- k-means


def test_kmeans_plusplus_picks_one_row_per_separated_blob():
    X, labels, _ = _blobs(n=3000, k=8, std=0.01, seed=3)
    C = kmeans_plusplus(X, 8, random_state=0)
    hit = [int(np.flatnonzero((X == c).all(axis=1))[0]) for c in C]  # every centre is a row
    assert sorted(labels[hit]) == list(range(8))


def _plain_greedy_kmeans_plusplus(X, k, seed, trials):
    """Greedy k-means++ with every distance computed (float64, all pairs), drawing from the
    generator in the order daskauc's does: the oracle of the bound-skipping version."""
    X64 = np.asarray(X, dtype=np.float64)
    m = len(X64)
    D = ((X64[:, None, :] - X64[None, :, :]) ** 2).sum(-1)
    rng = np.random.default_rng(seed)
    chosen = [int(rng.integers(m))]
    closest = D[chosen[0]].copy()
    for _ in range(1, k):
        cum = np.cumsum(closest)
        if cum[-1] > 0:
            cand = np.minimum(np.searchsorted(cum, rng.random(trials) * cum[-1]), m - 1)
        else:
            cand = rng.integers(m, size=trials)
        pots = np.minimum(closest[None, :], D[cand]).sum(axis=1)
        chosen.append(int(cand[np.argmin(pots)]))
        closest = np.minimum(closest, D[chosen[-1]])
    return np.asarray(chosen)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["overlapping", "separated", "duplicates"])
def test_kmeans_plusplus_equals_plain_greedy_oracle(dtype, case):
    # the triangle-inequality skips are exact: the same rows are chosen as by the plain
    # algorithm that computes every distance (duplicates: zero distances, then a zero
    # potential once every distinct row is a centre, where candidates are drawn uniformly)
    if case == "overlapping":
        X, _ = make_blobs(n_samples=700, centers=12, n_features=5, cluster_std=3.0,
                          random_state=2)
        k = 60
    elif case == "separated":
        X, _, _ = _blobs(n=500, k=8, std=0.05, seed=5)
        k = 40
    else:
        rows = np.random.default_rng(3).normal(size=(9, 4))
        X = np.repeat(rows, 7, axis=0)
        k = 12
    X = X.astype(dtype)
    for s in range(3):
        ss = np.random.SeedSequence(100 + s)
        C = kmeans_plusplus(X, k, random_state=ss, n_local_trials=5)
        expect = _plain_greedy_kmeans_plusplus(X, k, ss, 5)
        assert C.dtype == np.float64 and C.shape == (k, X.shape[1])
        np.testing.assert_array_equal(C, X[expect].astype(np.float64))
    assert kmeans_plusplus(X, 1, random_state=0).shape == (1, X.shape[1])


def test_kmeans_recovers_blob_centres():
    X, _, centers = _blobs()
    C, counts, history = minibatch_kmeans(da.from_array(X, chunks=1000), 6, batch_size=256,
                                          random_state=1)
    D = np.sqrt(((C[:, None] - centers[None]) ** 2).sum(-1))
    r, c = linear_sum_assignment(D)
    assert D[r, c].max() < 0.05  # std 0.3 and 1000 rows per blob: mean error ~0.01
    assert counts.sum() == 3 * len(X)
    assert [h["epoch"] for h in history] == [0, 1, 2, 3]
    assert history[-1]["n_empty"] == 0


def test_kmeans_inertia_close_to_sklearn():
    # overlapping blobs: both methods land in different local minima per seed (+-7%), so
    # compare means over 8 seeds; sklearn runs single-threaded (same result, less contention)
    X, _ = make_blobs(n_samples=8000, centers=20, n_features=5, cluster_std=2.0,
                      random_state=4)
    ours = [ref.inertia(X, minibatch_kmeans(X, 20, batch_size=512, random_state=s)[0])
            for s in range(8)]
    with threadpool_limits(1):
        sk = [ref.inertia(X, SkMiniBatchKMeans(20, batch_size=512, max_iter=3, n_init=1,
                                               random_state=s).fit(X).cluster_centers_)
              for s in range(8)]
    assert np.mean(ours) <= 1.05 * np.mean(sk), (ours, sk)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kmeans_batch_inertia_is_the_inertia_before_the_moves(dtype):
    # one chunk, one batch holding every row: the history's batch inertia is the mean squared
    # distance to the given centres (all rows are assigned before any centre moves)
    X, _, _ = _blobs(n=900, k=5, std=1.0, seed=4)
    X = X.astype(dtype)
    C0 = X[::150][:5].astype(np.float64) + 0.25
    _, counts, history = minibatch_kmeans(X, 5, init=C0, n_epochs=1, batch_size=len(X),
                                          random_state=0)
    assert counts.sum() == len(X)
    expect = ref.inertia(X.astype(np.float64), C0) / len(X)
    assert history[1]["batch_inertia"] == pytest.approx(expect, rel=TOL[dtype] * 10)


def test_kmeans_numpy_equals_dask_one_chunk_and_estimator():
    X, _, _ = _blobs(n=2000)
    a = minibatch_kmeans(X, 5, batch_size=128, random_state=7)
    b = minibatch_kmeans(da.from_array(X, chunks=-1), 5, batch_size=128, random_state=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    est = MiniBatchKMeans(5, batch_size=128, random_state=7).fit(X)
    np.testing.assert_array_equal(est.cluster_centers_, a[0])
    # many chunks is a different (valid) run, not the same numbers
    c = minibatch_kmeans(da.from_array(X, chunks=300), 5, batch_size=128, random_state=7)
    assert ref.inertia(X, c[0]) < 1.05 * ref.inertia(X, a[0])


def test_seeding_sample_does_not_depend_on_chunking():
    X, _, _ = _blobs(n=3000)
    idx = np.sort(np.random.default_rng(0).choice(3000, 400, replace=False))
    Xd = da.from_array(X, chunks=450)
    s = sample_rows(Xd, idx)
    assert "daskauc-sample" in s.name
    np.testing.assert_array_equal(s.compute(), X[idx])
    seeds = [minibatch_kmeans(Xin, 6, n_epochs=0, init_size=500, random_state=2)[0]
             for Xin in (X, Xd, da.from_array(X, chunks=1000))]
    for other in seeds[1:]:
        np.testing.assert_array_equal(other, seeds[0])
    hits = [(X == c).all(axis=1).any() for c in seeds[0]]
    assert all(hits)  # seeds are data rows


def test_kmeans_epoch_is_one_compute_with_named_chain(monkeypatch):
    from daskauc import _config

    monkeypatch.setattr(_config, "CHAIN_TASK_BYTES", 1)  # one chunk per chain task
    X, _, _ = _blobs(n=3000)
    Xd = da.from_array(X, chunks=500)
    with ComputeCounter() as cc:
        minibatch_kmeans(Xd, 4, n_epochs=2, random_state=0)
    assert cc.n == 3  # the k-means++ sample, then one compute per epoch

    seen = []

    class Keys(Callback):
        def _start(self, dsk):
            seen.extend(str(k) for k in dsk)

    with Keys():
        minibatch_kmeans(Xd, 4, n_epochs=1, random_state=0)
    assert sum("daskauc-kmeans-epoch-" in k for k in seen) >= 6  # one task per chunk


def test_kmeans_estimator_predict_transform_score_partial_fit():
    X, _, centers = _blobs(n=3000)
    est = MiniBatchKMeans(6, batch_size=200, random_state=0).fit(X)
    Xd = da.from_array(X, chunks=700)
    np.testing.assert_array_equal(est.predict(X), ref.nearest(X, est.cluster_centers_))
    np.testing.assert_array_equal(est.predict(Xd).compute(), est.predict(X))
    Dist = est.transform(X)
    expect = np.sqrt(((X[:, None] - est.cluster_centers_[None]) ** 2).sum(-1))
    np.testing.assert_allclose(Dist, expect, atol=1e-6)
    np.testing.assert_allclose(est.transform(Xd).compute(), Dist, atol=1e-12)
    assert est.score(X) == pytest.approx(-ref.inertia(X, est.cluster_centers_), rel=1e-10)
    np.testing.assert_array_equal(est.fit_predict(X), est.predict(X))

    inc = MiniBatchKMeans(6, batch_size=200, random_state=0)
    for part in np.array_split(X, 3):
        inc.partial_fit(part)
    assert inc.n_iter_ == 3 and inc.counts_.sum() == len(X)
    D = np.sqrt(((inc.cluster_centers_[:, None] - centers[None]) ** 2).sum(-1))
    assert D[linear_sum_assignment(D)].max() < 0.1
    with pytest.raises(ValueError, match="features"):
        inc.partial_fit(X[:, :3])


def test_kmeans_bad_input_errors():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="n_clusters"):
        minibatch_kmeans(X, 0)
    with pytest.raises(ValueError, match="exceeds the number of rows"):
        minibatch_kmeans(X, 21)
    with pytest.raises(ValueError, match="init must have shape"):
        minibatch_kmeans(X, 3, init=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="batch_size"):
        MiniBatchKMeans(2, batch_size=0).fit(X)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MiniBatchKMeans(2).fit(bad)
    est = MiniBatchKMeans(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="3 features"):
        est.predict(np.zeros((2, 3)))


# ----------------------------------------------------------------------------- Nystroem


def test_nystroem_all_landmarks_is_the_exact_kernel_map():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8))
    m = KMeansNystroem(landmarks="all").fit(X)
    assert m.n_components_ == 300 and m.landmarks_.shape == (300, 8)
    assert m.gamma_ == pytest.approx(ref.bandwidth_gamma(X), rel=1e-12)
    Z = m.transform(X)
    K = ref.gaussian_kernel(X, X, m.gamma_)
    np.testing.assert_allclose(Z @ Z.T, K, rtol=0, atol=1e-8)
    Xnew = rng.normal(size=(40, 8)) * 1.5
    np.testing.assert_allclose(m.transform(Xnew) @ Z.T, ref.gaussian_kernel(Xnew, X, m.gamma_),
                               rtol=0, atol=1e-8)


def test_nystroem_matches_dense_pinv_reference_with_cut_eigenvalues():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 3))
    U = np.concatenate([X[:30], X[:10] + 1e-9])  # near-duplicates: W is singular
    m = KMeansNystroem(landmarks=U, gamma=0.3).fit(X)
    assert m.n_components_ < len(U)
    lam = m.eigenvalues_
    assert np.all(np.diff(lam) <= 0) and np.all(lam[: m.n_components_] > 1e-8 * lam[0])
    Z = m.transform(X[:50])
    np.testing.assert_allclose(Z @ Z.T, ref.nystroem_kernel(X[:50], X[:50], U, 0.3),
                               rtol=0, atol=1e-6)


def test_nystroem_equals_sklearn_on_same_landmarks_up_to_rotation():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 6))
    m = KMeansNystroem(60, random_state=0, batch_size=64).fit(X)
    assert m.n_components_ == 60  # well conditioned: sklearn does not truncate
    sk = Nystroem(kernel="rbf", gamma=m.gamma_, n_components=60, random_state=0)
    sk.fit(m.landmarks_)  # n_components == rows: sklearn's basis is every landmark
    Z, Zs = m.transform(X), sk.transform(X)
    np.testing.assert_allclose(Z @ Z.T, Zs @ Zs.T, rtol=0, atol=1e-6)


def _ijcnn1_sample(n=4000, head=12_000):
    # a uniform subsample of the first `head` rows (parsing all 49,990 takes ~5 s)
    with bz2.open(shared_data("ijcnn1", "ijcnn1.trn.bz2"), "rb") as f:
        text = b"".join(itertools.islice(f, head))
    X, y = load_svmlight_file(io.BytesIO(text), n_features=22)
    rows = np.sort(np.random.default_rng(0).choice(X.shape[0], size=n, replace=False))
    X = StandardScaler().fit_transform(X[rows].toarray())
    return X, y[rows]


def _rel_frobenius_error(m, X, K):
    Z = m.transform(X)
    return np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K)


def test_kmeans_landmarks_beat_random_on_ijcnn1(capsys):
    X, _ = _ijcnn1_sample()
    km = KMeansNystroem(200, batch_size=256, random_state=0).fit(X)
    K = gaussian_kernel(X, X, km.gamma_)
    np.testing.assert_allclose(K[:50, :50], ref.gaussian_kernel(X[:50], X[:50], km.gamma_),
                               atol=1e-12)
    err_km = _rel_frobenius_error(km, X, K)
    err_rand = np.mean([_rel_frobenius_error(
        KMeansNystroem(200, landmarks="random", random_state=s).fit(X), X, K) for s in range(3)])
    with capsys.disabled():
        print(f"\nijcnn1 4000 rows, 200 landmarks, rel. Frobenius error: k-means {err_km:.4f}, "
              f"random {err_rand:.4f} (mean of 3)")
    assert err_km < err_rand


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nystroem_input_kinds_agree(tmp_path, dtype):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(900, 5)).astype(dtype)
    y = np.where(rng.random(900) < 0.3, 1, -1)
    m = KMeansNystroem(40, random_state=0, batch_size=100).fit(X)
    Z = m.transform(X)
    assert Z.dtype == dtype and Z.shape == (900, m.n_components_)
    one = m.transform(da.from_array(X, chunks=-1))
    many = m.transform(da.from_array(X, chunks=128))
    assert any(str(k[0] if isinstance(k, tuple) else k).startswith("daskauc-nystroem")
               for k in many.__dask_keys__()[0])
    store = dataset_store(tmp_path / "ds.zarr", X, y, rows=200)
    for other in (one.compute(), many.compute(), m.transform(store).compute()):
        assert other.dtype == dtype
        np.testing.assert_allclose(other, Z, rtol=0, atol=TOL[dtype])
    # the same fit from a dask array in one chunk and from the store's single pass
    m1 = KMeansNystroem(40, random_state=0, batch_size=100).fit(da.from_array(X, chunks=-1))
    np.testing.assert_array_equal(m1.landmarks_, m.landmarks_)


def test_nystroem_fit_budget_and_default_gamma(monkeypatch):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2000, 4)) * [1, 2, 3, 4] + 5
    monkeypatch.setattr(_config, "BANDWIDTH_ROWS", 300)  # the rule reads the first rows only
    X[300:] *= 10
    Xd = da.from_array(X, chunks=400)
    with ComputeCounter() as cc:
        m = KMeansNystroem(20, kmeans_epochs=2, random_state=0).fit(Xd)
    assert cc.n == 3  # sample + bandwidth together, then one per epoch
    assert m.gamma_ == pytest.approx(ref.bandwidth_gamma(X, max_rows=300), rel=1e-12)
    assert default_gamma(Xd) == pytest.approx(m.gamma_, rel=1e-12)
    assert len(m.kmeans_history_) == 3


def test_nystroem_bad_input_errors():
    X = np.random.default_rng(0).normal(size=(50, 3))
    for kwargs, match in (({"n_components": 0}, "n_components"),
                          ({"eig_tol": 2.0}, "eig_tol"),
                          ({"gamma": -1.0}, "gamma"),
                          ({"landmarks": "bogus"}, "landmarks"),
                          ({"landmarks": np.zeros((4, 2))}, r"shape \(v, 3\)")):
        with pytest.raises(ValueError, match=match):
            KMeansNystroem(**kwargs).fit(X)
    with pytest.raises(ValueError, match="identical"):
        KMeansNystroem(3).fit(np.ones((10, 3)))
    with pytest.warns(UserWarning, match="n_components=60"):
        m = KMeansNystroem(60, landmarks="random", random_state=0).fit(X)
    assert m.landmarks_.shape == (50, 3)
    with pytest.raises(ValueError, match="2 features"):
        m.transform(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="2 features"):
        m.transform(da.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        m.transform(np.full((2, 3), np.nan))


# ----------------------------------------------------------------------------- stores


@pytest.mark.parametrize("sizes, target, exact, rows, rechunked", [
    ((200_000, 200_000, 64_810), 10_530, False, 10_000, False),  # an equal split of a chunk
    ((1_000,) * 4, 1_500, False, 1_000, False),  # a chunk near the target is one output chunk
    ((997,) * 3, 100, False, 100, (1_000, 1_000, 991)),  # no equal split: whole outputs per input
    ((700,), 128, True, 128, (640, 60)),  # given rows
    ((256, 256, 100), 128, True, 128, False),  # given rows that split the input's chunks
])
def test_embedding_write_chunks_hold_whole_output_chunks(sizes, target, exact, rows,
                                                         rechunked):
    from daskauc.embed.embedding_store import _write_chunking

    Xd = da.zeros((sum(sizes), 3), chunks=(sizes, 3))
    got_rows, out = _write_chunking(Xd, target, exact)
    assert got_rows == rows
    assert (out is Xd) if rechunked is False else out.chunks[0] == rechunked
    assert all(c % rows == 0 for c in out.chunks[0][:-1])


def test_embedding_write_is_one_task_per_input_chunk(tmp_path):
    """Map and write fused: a store's chunks are not rechunked and each is mapped and written
    by one task (so a worker holds one input and one output chunk per thread)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 4)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1, -1).astype(np.int8)
    src = dataset_store(tmp_path / "in.zarr", X, y, rows=500)
    m = KMeansNystroem(20, random_state=0).fit(X)
    keys = []

    class Keys(Callback):
        def _start(self, dsk):
            keys.extend(str(k) for k in dsk)

    with Keys():
        ds = m.write_embedding(src, tmp_path / "emb.zarr", chunk_rows=250)
    writes = [k for k in keys if "daskauc-nystroem-write" in k]
    assert len(writes) == 4 and not any("rechunk" in k for k in keys)
    assert ds.X.chunks[0] == (250,) * 8
    np.testing.assert_allclose(ds.X.compute(), m.transform(X), rtol=0, atol=2e-6)


def test_write_embedding_round_trip(tmp_path):
    rng = np.random.default_rng(6)
    raw = (rng.normal(size=(700, 4)) * [1, 10, 100, 0.1] + 3).astype(np.float32)
    y = np.where(rng.random(700) < 0.2, 2, 1)  # any two-valued convention
    scaler = StandardScaler().fit(raw)
    Xs = ((raw - scaler.mean_.astype(np.float32)) / scaler.scale_.astype(np.float32))
    m = KMeansNystroem(30, random_state=0, batch_size=64).fit(Xs)
    path = tmp_path / "emb.zarr"
    with ComputeCounter() as cc:
        ds = m.write_embedding(raw, path, y=y, scaler=scaler, chunk_rows=128)
    assert cc.n == 1
    assert ds.X.dtype == np.float32 and ds.X.shape == (700, m.n_components_)
    assert ds.X.chunks[0][:-1] == (128,) * 5
    np.testing.assert_allclose(ds.X.compute(), m.transform(Xs), rtol=0, atol=2e-6)
    np.testing.assert_array_equal(ds.y.compute(), np.where(y == 2, 1, -1))
    assert ds.attrs["n_positive"] == int((y == 2).sum())
    assert ds.attrs["map_sha256"] and ds.attrs["input_sha256"] == m.input_sha256_

    loaded = load_embedding_map(path)
    np.testing.assert_array_equal(loaded.scaler_mean_, scaler.mean_)
    new = (rng.normal(size=(25, 4)) * [1, 10, 100, 0.1] + 3).astype(np.float32)
    np.testing.assert_allclose(loaded.transform(new),
                               m.transform((new - scaler.mean_) / scaler.scale_),
                               rtol=0, atol=2e-6)
    # The same map, not the same bits: BLAS blocks a 64-row GEMM differently from the
    # 128-row chunk the writer ran, so float32 results may differ in the last ulp.
    np.testing.assert_allclose(loaded.transform(raw[:64]), ds.X[:64].compute(),
                               rtol=0, atol=4 * np.finfo(np.float32).eps)

    with pytest.raises(FileExistsError, match="overwrite"):
        m.write_embedding(raw, path, y=y)
    with pytest.raises(ValueError, match="5 features"):
        m.write_embedding(np.zeros((3, 5)), tmp_path / "bad.zarr", y=[1, -1, 1])
    with pytest.raises(ValueError, match="y is required"):
        m.write_embedding(raw, tmp_path / "bad.zarr")
    assert not (tmp_path / "bad.zarr").exists()


def test_write_embedding_from_store_and_save_load(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(500, 3))
    y = np.where(rng.random(500) < 0.5, 1, -1)
    src = dataset_store(tmp_path / "ds.zarr", X, y, rows=100)
    m = KMeansNystroem(25, random_state=1, batch_size=64).fit(src)
    for codec in ("none", "zstd"):
        ds = m.write_embedding(src, tmp_path / f"emb-{codec}.zarr", compressor=codec)
        assert ds.X.dtype == np.float64
        np.testing.assert_allclose(ds.X.compute(), m.transform(X), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(ds.y.compute(), y)
        assert ds.attrs["source"] == src and ds.attrs["compressor"] == codec
    ds2 = m.write_embedding(src, tmp_path / "emb-none.zarr", overwrite=True, chunk_rows=64)
    assert ds2.X.chunks[0][0] == 64
    m.save(tmp_path / "map.zarr")
    back = KMeansNystroem.load(tmp_path / "map.zarr")
    assert back.get_params()["n_components"] == 25 and back.gamma_ == m.gamma_
    np.testing.assert_array_equal(back.transform(X[:30]), m.transform(X[:30]))
    with pytest.raises(FileExistsError):
        m.save(tmp_path / "map.zarr")
    with pytest.raises(ValueError, match="not a 'nystroem' store"):
        KMeansNystroem.load(tmp_path / "emb-zstd.zarr")


# ----------------------------------------------------------------------------- Fourier


def test_random_fourier_features_converge_to_the_kernel():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(6, 5))
    gamma = 0.2
    K = ref.gaussian_kernel(X, X, gamma)
    rms = {}
    for D in (100, 1000, 20000):
        Z = RandomFourierFeatures(D, gamma=gamma, random_state=D).fit(X).transform(X)
        err = Z @ Z.T - K
        # each of the D terms has variance <= 1: |error| < 4.5 sd for every pair
        assert np.abs(err).max() < 4.5 / np.sqrt(D), (D, np.abs(err).max())
        rms[D] = np.sqrt(np.mean(err**2))
    assert rms[20000] < rms[100] / 3


def test_random_fourier_features_match_formula_and_sklearn():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(300, 4))
    f = RandomFourierFeatures(64, random_state=0).fit(X)
    assert f.gamma_ == pytest.approx(ref.bandwidth_gamma(X), rel=1e-12)
    assert f.random_weights_.std() == pytest.approx(np.sqrt(2 * f.gamma_), rel=0.1)
    Z = f.transform(X)
    np.testing.assert_allclose(Z, ref.random_fourier(X, f.random_weights_, f.random_offset_),
                               atol=1e-12)
    sk = RBFSampler(gamma=f.gamma_, n_components=64).fit(X)
    sk.random_weights_, sk.random_offset_ = f.random_weights_, f.random_offset_
    np.testing.assert_allclose(Z, sk.transform(X), atol=1e-12)
    Zd = f.transform(da.from_array(X, chunks=70))
    assert "daskauc-rff" in Zd.name
    np.testing.assert_allclose(Zd.compute(), Z, atol=1e-12)
    Z32 = f.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z, atol=1e-5)
    with pytest.raises(ValueError, match="features"):
        f.transform(X[:, :2])


# ----------------------------------------------------------------------------- cluster


def test_cluster_gives_the_same_embedding(dask_cluster_client, tmp_path):
    rng = np.random.default_rng(10)
    X = rng.normal(size=(1500, 4)).astype(np.float32)
    y = np.where(rng.random(1500) < 0.3, 1, -1)
    src = dataset_store(tmp_path / "ds.zarr", X, y, rows=300)
    results = {}
    for sched in ("threads", dask_cluster_client):
        key = "threads" if sched == "threads" else "cluster"
        with dask.config.set(scheduler=sched), get_task_stream(dask_cluster_client) as ts:
            m = KMeansNystroem(30, kmeans_epochs=1, random_state=3, batch_size=128).fit(src)
            ds = m.write_embedding(src, tmp_path / f"emb-{key}.zarr")
            results[key] = (m.landmarks_, ds.X.compute(scheduler="sync"))
        names = {t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in ts.data}
        on_cluster = {p for p in ("daskauc-kmeans-epoch", "daskauc-nystroem")
                      if any(p in str(nm) for nm in names)}
        assert on_cluster == (set() if key == "threads" else
                              {"daskauc-kmeans-epoch", "daskauc-nystroem"})
    np.testing.assert_allclose(results["cluster"][0], results["threads"][0], atol=1e-10)
    np.testing.assert_allclose(results["cluster"][1], results["threads"][1], atol=1e-5)
    assert open_dataset(tmp_path / "emb-cluster.zarr").attrs["n_positive"] == int((y > 0).sum())


# ------------------------------------------------------------ a model knows the map it needs


def test_a_model_refuses_rows_from_a_map_it_was_not_fitted_on(tmp_path, capsys):
    """Two embeddings of the same training rows, 60 landmarks each (other seeds): the same
    width, other features. A model fitted on one scored rows mapped by the other with exit 0
    and an AUC of 0.386 for 0.984 (only the width was compared). The model now records the
    map's digest (``input_map_sha256_``, kept in its file), and every way of scoring refuses
    rows or a map of another map before any work, naming both digests; its own map works."""
    from daskauc import PairwiseHingeSGD, ingest_array, load_model, roc_auc, save_model
    from daskauc.cli import main
    from daskauc.embed.embedding_store import map_sha256
    from daskauc.scoring import write_scores

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 5))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 + 0.2 * rng.normal(size=1500) > 1.4, 1, -1)
    ingest_array(X[:1000], y[:1000], tmp_path / "train.zarr", chunk_rows=500)
    ingest_array(X[1000:], y[1000:], tmp_path / "test.zarr", chunk_rows=500)
    for name, seed in (("emb", 0), ("other", 7)):
        fmap = KMeansNystroem(60, kmeans_epochs=1, random_state=seed).fit(
            str(tmp_path / "train.zarr"))
        fmap.write_embedding(tmp_path / "train.zarr", tmp_path / f"{name}-train.zarr")
        fmap.write_embedding(tmp_path / "test.zarr", tmp_path / f"{name}-test.zarr")
    model = PairwiseHingeSGD(n_epochs=3, random_state=0).fit(str(tmp_path / "emb-train.zarr"))
    digest = open_dataset(tmp_path / "emb-train.zarr").attrs["map_sha256"]
    assert model.input_map_sha256_ == digest
    assert map_sha256(load_embedding_map(tmp_path / "emb-train.zarr")) == digest
    save_model(model, tmp_path / "m.zarr")
    assert load_model(tmp_path / "m.zarr").input_map_sha256_ == digest
    own = model.score(str(tmp_path / "emb-test.zarr"))
    assert own > 0.9
    # the same model from the store's arrays records the same digest
    ds = open_dataset(tmp_path / "emb-train.zarr")
    assert PairwiseHingeSGD(n_epochs=1).fit(ds.X, ds.y).input_map_sha256_ == digest
    assert not hasattr(PairwiseHingeSGD(n_epochs=1).fit(np.asarray(ds.X), np.asarray(ds.y)),
                       "input_map_sha256_")  # numpy rows: nothing to record

    other = open_dataset(tmp_path / "other-test.zarr")
    wrong = roc_auc(other.y, np.asarray(other.X) @ model.coef_.ravel())  # what it scored
    assert wrong < own - 0.1
    another = r"embedded by another map \(map sha256 \w{12}\) than the rows PairwiseHingeSGD"
    with pytest.raises(ValueError, match=another):
        model.score(str(tmp_path / "other-test.zarr"))
    with pytest.raises(ValueError, match=another):
        model.decision_function(other.X)
    with pytest.raises(ValueError, match="other-test.zarr holds raw rows|embedded by another"):
        model.predict(str(tmp_path / "other-test.zarr"))
    out = tmp_path / "s.zarr"
    with pytest.raises(ValueError, match=r"the map .*other-train.zarr \(map sha256 \w{12}\) "
                                         r"is not the one the model .* was fitted on"):
        write_scores(tmp_path / "m.zarr", tmp_path / "test.zarr", out,
                     map=tmp_path / "other-train.zarr")
    with pytest.raises(ValueError, match=another):
        write_scores(tmp_path / "m.zarr", tmp_path / "other-test.zarr", out)
    assert not out.exists()
    # the command line, as the probe ran it: exit 1, one line, nothing written
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "m.zarr"), str(tmp_path / "test.zarr"), str(out),
                 "--map", str(tmp_path / "other-train.zarr")]) == 1
    assert main(["evaluate", str(tmp_path / "m.zarr"), str(tmp_path / "other-test.zarr")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "is not the one the model" in err[0] and \
        "embedded by another map" in err[1]
    assert not out.exists()
    # its own map: the scores of the embedded test rows
    written = write_scores(tmp_path / "m.zarr", tmp_path / "test.zarr", out,
                           map=tmp_path / "emb-train.zarr")
    import zarr

    scores = zarr.open_group(written.path, mode="r")["decision_function"][...]
    np.testing.assert_allclose(scores, model.decision_function(
        np.asarray(open_dataset(tmp_path / "emb-test.zarr").X)), rtol=1e-5, atol=1e-6)


def test_a_raw_store_of_the_embedding_width_is_refused(tmp_path):
    """A raw store that happens to have as many columns as the embedding: its rows are not
    embedded; the model fitted on the embedding says so instead of scoring them."""
    from daskauc import PairwiseHingeSGD, ingest_array

    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    ingest_array(X, y, tmp_path / "d.zarr", chunk_rows=200)
    fmap = KMeansNystroem(6, kmeans_epochs=1, random_state=0).fit(str(tmp_path / "d.zarr"))
    fmap.write_embedding(tmp_path / "d.zarr", tmp_path / "e.zarr")
    model = PairwiseHingeSGD(n_epochs=1, random_state=0).fit(str(tmp_path / "e.zarr"))
    width = model.n_features_in_
    ingest_array(rng.normal(size=(100, width)), y[:100], tmp_path / "raw.zarr")
    with pytest.raises(ValueError, match=r"raw.zarr holds raw rows, but PairwiseHingeSGD was "
                                         r"fitted on rows embedded by a Nystroem map"):
        model.score(str(tmp_path / "raw.zarr"))
