"""Sparse rows (CSR chunks) through the nonlinear route: mini-batch k-means, the k-means
Nystroem map, random Fourier features, the scaler and the presets built on them.

The oracle is the dense fit of the same rows, chunks, labels and seed: k-means on CSR rows
takes the dense run's draws and assignments (its distances round differently, at 1e-16), the
Gaussian kernel depends on differences of rows only, so a preset's map on rows scaled
without centring (all sparse rows can be) is its map on centred rows, and the fitted models
agree to rounding. Random Fourier features are not translation invariant draw by draw
(``cos(w.(x - mu) + b)`` is another draw): RFAUC is compared without standardization. Every
sparse fit runs inside ``no_dense_rows()``; the wide case (2,000 x 2^18) checks the AUC.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import no_dense_rows
from sklearn.preprocessing import StandardScaler as SkStandardScaler

from daskauc import (
    NBAUC,
    NOAM,
    NSAUC,
    NSOLAM,
    NSVMSGD2,
    RFAUC,
    KernelRankSVM,
)
from daskauc._sparse import sparse_row_blocks
from daskauc.data.scale import StandardScaler, normalize_rows
from daskauc.embed import kmeans_parallel, kmeans_plusplus
from daskauc.embed.fourier import RandomFourierFeatures
from daskauc.embed.kmeans import MiniBatchKMeans, minibatch_kmeans
from daskauc.embed.nystroem import KMeansNystroem, load_embedding_map
from daskauc.embed.sparse_rows import MAX_CENTRE_BYTES
from daskauc.metrics import roc_auc

pytestmark = [pytest.mark.usefixtures("threaded_unless_cluster"),
              pytest.mark.filterwarnings("ignore::daskauc.embed.nystroem.NystroemRankWarning")]

LABELS = {"pm1": (-1, 1), "01": (0, 1)}


def _rows(seed=0, n=300, d=40, density=0.1, dtype=np.float64, integer=False):
    """Random sparse rows (CSR): normal values, or small integers (term counts), whose
    products and sums are exact in floating point."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed, dtype=np.float64)
    X.data = rng.integers(1, 6, X.nnz).astype(float) if integer else rng.standard_normal(X.nnz)
    return X.astype(dtype)


def _problem(seed=0, labels="pm1", dtype=np.float64, **kw):
    """Sparse rows and labels of a nonlinear rule (a quadratic form of a projection)."""
    X = _rows(seed, dtype=dtype, **kw)
    s = X @ np.random.default_rng(seed + 1).standard_normal(X.shape[1])
    neg, pos = LABELS[labels]
    return X, np.where(s * s > np.quantile(s * s, 0.6), pos, neg)


def _both(X, rows):
    """The same rows as a dask array of CSR blocks and as a dense dask array, same chunks."""
    return sparse_row_blocks(X, rows), da.from_array(X.toarray(), chunks=(rows, -1))


def _close(a, b, rtol):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


# ---- k-means ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("init", ["k-means++", "random", "k-means||", None])
def test_kmeans_sparse_takes_the_dense_steps(dtype, init):
    # k-means|| draws as many exponentials as rows lie strictly away from the chosen
    # centres: that count must not hang on rounding, so its rows are exact (term counts)
    X = _rows(dtype=dtype, integer=init == "k-means||")
    Xs, Xd = _both(X, 70)
    with no_dense_rows():
        centres, counts, history = minibatch_kmeans(Xs, 12, batch_size=32, n_epochs=3,
                                                    random_state=1, init=init)
    dense = minibatch_kmeans(Xd, 12, batch_size=32, n_epochs=3, random_state=1, init=init)
    assert history[0]["init"] == dense[2][0]["init"]
    np.testing.assert_array_equal(counts, dense[1])
    _close(centres, dense[0], 1e-12)
    for h, g in zip(history[1:], dense[2][1:], strict=True):
        assert h["batch_inertia"] == pytest.approx(g["batch_inertia"], rel=1e-6)


def test_seedings_on_csr_rows_choose_the_dense_rows():
    X = _rows(integer=True)
    with no_dense_rows():
        pp = kmeans_plusplus(X, 15, random_state=3)
        par = kmeans_parallel(X, 15, rounds=4, random_state=3)
    np.testing.assert_array_equal(pp, kmeans_plusplus(X.toarray(), 15, random_state=3))
    np.testing.assert_array_equal(par, kmeans_parallel(X.toarray(), 15, rounds=4,
                                                        random_state=3))


def test_minibatch_kmeans_estimator_on_sparse_rows():
    X = _rows()
    Xs, Xd = _both(X, 70)
    kw = dict(n_clusters=10, batch_size=40, random_state=0)
    with no_dense_rows():
        sparse = MiniBatchKMeans(**kw).fit(X)
        lazy = MiniBatchKMeans(**kw).fit(Xs)
        labels, dist, score = sparse.predict(Xs).compute(), sparse.transform(X), sparse.score(X)
        part = MiniBatchKMeans(**kw).partial_fit(Xs).partial_fit(Xs[:140])
    dense = MiniBatchKMeans(**kw).fit(X.toarray())
    _close(sparse.cluster_centers_, dense.cluster_centers_, 1e-12)
    _close(lazy.cluster_centers_, MiniBatchKMeans(**kw).fit(Xd).cluster_centers_, 1e-12)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    assert sparse.inertia_ == pytest.approx(dense.inertia_, rel=1e-12)
    np.testing.assert_array_equal(labels, dense.predict(X.toarray()))
    _close(dist, dense.transform(X.toarray()), 1e-12)
    assert score == pytest.approx(dense.score(X.toarray()), rel=1e-12)
    dpart = MiniBatchKMeans(**kw).partial_fit(Xd).partial_fit(Xd[:140])
    _close(part.cluster_centers_, dpart.cluster_centers_, 1e-12)


# ---- the Nystroem map, random Fourier features, the scaler --------------------------------


@pytest.mark.parametrize("landmarks", ["kmeans", "random", "all"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nystroem_map_of_sparse_rows_is_the_dense_map(landmarks, dtype):
    X = _rows(dtype=dtype)
    Xs, Xd = _both(X, 70)
    kw = dict(n_components=20, landmarks=landmarks, random_state=0)
    with no_dense_rows():
        fmap = KMeansNystroem(**kw).fit(Xs)
        lazy = fmap.transform(Xs).compute()
        eager = fmap.transform(X)
    dense = KMeansNystroem(**kw).fit(Xd)
    assert fmap.gamma_ == pytest.approx(dense.gamma_, rel=1e-12)
    _close(fmap.landmarks_, dense.landmarks_, 1e-12)
    assert fmap.n_components_ == dense.n_components_
    Z = dense.transform(Xd).compute()
    tol = 1e-10 if dtype == np.float64 else 2e-4  # float32: the map's own rounding
    assert lazy.dtype == eager.dtype == dtype
    _close(lazy, Z, tol)
    _close(eager, Z, tol)


def test_nystroem_with_every_row_a_landmark_reproduces_the_kernel():
    X = _rows(n=60)
    with no_dense_rows():
        fmap = KMeansNystroem(landmarks="all", gamma=0.1, eig_tol=1e-14).fit(X)
        Z = fmap.transform(X)
    A = X.toarray()
    K = np.exp(-0.1 * ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1))
    _close(Z @ Z.T, K, 1e-7)


def test_sparse_landmarks_above_the_limit_are_refused_before_any_work():
    d = 2**21
    X = sp.csr_matrix((np.ones(3000), (np.arange(3000), np.arange(3000) * 7)), shape=(3000, d))
    k = MAX_CENTRE_BYTES // (8 * d) + 1
    with pytest.raises(ValueError, match=rf"at most {k - 1:,} landmarks"):
        KMeansNystroem(n_components=k, gamma=1.0).fit(X)
    with pytest.raises(ValueError, match="FeatureHasher"):
        MiniBatchKMeans(k).fit(X)
    with pytest.raises(ValueError, match="Fourier features"):
        RandomFourierFeatures(k, gamma=1.0).fit(X)


def test_random_fourier_features_of_sparse_rows():
    X = _rows()
    Xs, Xd = _both(X, 70)
    with no_dense_rows():
        rff = RandomFourierFeatures(30, random_state=0).fit(Xs)
        Z = rff.transform(Xs).compute()
    dense = RandomFourierFeatures(30, random_state=0).fit(Xd)
    assert rff.gamma_ == pytest.approx(dense.gamma_, rel=1e-12)
    _close(Z, dense.transform(X.toarray()), 1e-12)


def test_scaler_on_sparse_rows_scales_without_centring():
    X = _rows(dtype=np.float32)
    Xs, _ = _both(X, 70)
    sk = SkStandardScaler(with_mean=False).fit(X)
    with no_dense_rows():
        ours = StandardScaler(with_mean=False).fit(Xs)
        eager = StandardScaler(with_mean=False).fit(X)
        out = ours.transform(X)
        back = ours.inverse_transform(ours.transform(Xs)).compute()
        unit = normalize_rows(Xs).compute()
    for est in (ours, eager):  # float64 statistics; scikit-learn's of float32 are float32
        np.testing.assert_allclose(est.mean_, sk.mean_, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(est.var_, sk.var_, rtol=1e-6)
        np.testing.assert_allclose(est.scale_, sk.scale_, rtol=1e-6)
    dense = StandardScaler().fit(X.toarray())
    np.testing.assert_allclose(ours.var_, dense.var_, rtol=1e-12)
    np.testing.assert_allclose(ours.mean_, dense.mean_, rtol=1e-12, atol=1e-15)
    assert sp.issparse(out) and out.dtype == np.float32 and out.nnz == X.nnz
    np.testing.assert_allclose(out.toarray(), sk.transform(X).toarray(), rtol=1e-6)
    np.testing.assert_allclose(back.toarray(), X.toarray(), rtol=1e-6)
    np.testing.assert_allclose(unit.toarray(), normalize_rows(X.toarray()), rtol=1e-6)
    centring = StandardScaler().fit(Xs)  # the statistics: with or without centring
    np.testing.assert_array_equal(centring.scale_, ours.scale_)
    with pytest.raises(ValueError, match="cannot centre sparse rows.*with_mean=False"):
        centring.transform(X)
    with pytest.raises(ValueError, match="cannot centre sparse rows"):
        centring.transform(Xs)


def test_embedding_store_of_sparse_rows(tmp_path):
    X, y = _problem()
    scaler = StandardScaler(with_mean=False).fit(X)
    with no_dense_rows():
        fmap = KMeansNystroem(20, random_state=0).fit(scaler.transform(X))
        ds = fmap.write_embedding(sparse_row_blocks(X, 70), tmp_path / "emb", y=y,
                                  scaler=scaler)
        loaded = load_embedding_map(tmp_path / "emb")
        again = loaded.transform(X[:50])
    stored = np.asarray(ds.X[:50].compute())
    _close(stored, fmap.transform(scaler.transform(X[:50])), 1e-12)
    _close(again, stored, 1e-12)
    centring = SkStandardScaler().fit(X.toarray())
    with pytest.raises(ValueError, match="with_mean=False"):
        fmap.write_embedding(X, tmp_path / "bad", y=y, scaler=centring)


# ---- the presets --------------------------------------------------------------------------

SMALL = dict(n_landmarks=20, dtype="float64", random_state=0, standardize=True)
PRESETS = [(NSAUC, SMALL), (NSVMSGD2, SMALL), (NBAUC, SMALL), (NOAM, SMALL),
           (NSOLAM, SMALL), (KernelRankSVM, dict(C=1.0, random_state=0, standardize=True)),
           (RFAUC, dict(SMALL, standardize=False))]


def test_presets_standardize_dense_rows_and_leave_sparse_rows_as_they_are_by_default():
    X, y = _problem()
    kw = dict(n_landmarks=20, dtype="float64", random_state=0)
    with no_dense_rows():
        sparse = NSAUC(**kw).fit(X, y)
    assert sparse.standardize == "auto" and sparse.scaler_ is None
    dense = NSAUC(**kw).fit(X.toarray(), y)
    assert dense.scaler_ is not None and dense.scaler_.with_mean
    unscaled = NSAUC(**kw, standardize=False).fit(X.toarray(), y)
    _close(sparse.coef_, unscaled.coef_, 1e-10)
    with pytest.raises(ValueError, match="standardize must be True, False or 'auto'"):
        NSAUC(**kw, standardize="yes").fit(X, y)


@pytest.mark.parametrize("cls, kw", PRESETS, ids=[c.__name__ for c, _ in PRESETS])
@pytest.mark.parametrize("labels", ["pm1", "01"])
def test_preset_on_sparse_rows_is_the_dense_model(cls, kw, labels):
    X, y = _problem(labels=labels)
    with no_dense_rows():
        sparse = cls(**kw).fit(X, y)
        scores = sparse.decision_function(X)
    dense = cls(**kw).fit(X.toarray(), y)
    _close(sparse.coef_, dense.coef_, 1e-10)
    _close(scores, dense.decision_function(X.toarray()), 1e-10)
    assert sparse.scaler_ is None or not sparse.scaler_.with_mean
    assert sparse.score(X, y) == pytest.approx(dense.score(X.toarray(), y), abs=1e-12)


def test_nsauc_float32_and_dask_chunks():
    X, y = _problem(dtype=np.float32)
    Xs, Xd = _both(X, 70)
    kw = dict(n_landmarks=20, random_state=0, standardize=True)
    with no_dense_rows():
        sparse = NSAUC(**kw).fit(Xs, y)
        scores = sparse.decision_function(Xs).compute()
    dense = NSAUC(**kw).fit(Xd, y)
    assert sparse.transform(X).dtype == np.float32
    _close(sparse.coef_, dense.coef_, 1e-4)  # float32 embeddings: their rounding
    _close(scores, dense.decision_function(Xd).compute(), 1e-4)


def test_preset_partial_fit_on_sparse_chunks():
    X, y = _problem()
    kw = dict(n_landmarks=20, dtype="float64", random_state=0, standardize=True)
    sparse, dense = NSAUC(**kw), NSAUC(**kw)
    with no_dense_rows():
        for a in range(0, 300, 100):
            sparse.partial_fit(X[a:a + 100], y[a:a + 100], classes=[-1, 1])
    for a in range(0, 300, 100):
        dense.partial_fit(X[a:a + 100].toarray(), y[a:a + 100], classes=[-1, 1])
    _close(sparse.coef_, dense.coef_, 1e-10)


def test_preset_on_a_sparse_store(tmp_path):
    from daskauc import ingest_array

    X, y = _problem()
    ingest_array(X, y, tmp_path / "sparse", chunk_rows=75)
    with no_dense_rows():
        model = NBAUC(**SMALL).fit(str(tmp_path / "sparse"))
    dense = NBAUC(**SMALL).fit(da.from_array(X.toarray(), chunks=(75, -1)), y)
    _close(model.coef_, dense.coef_, 1e-10)


def _topics(n, d, seed, per_row=20, n_topics=16, vocabulary=400):
    """Hashed-feature rows drawn from topics: each topic its own ``vocabulary`` columns of
    ``d``, a row ``per_row`` of its topic's columns; the positive class is a quarter of the
    topics."""
    rng = np.random.default_rng(seed)
    words = np.random.default_rng(99).choice(d, size=(n_topics, vocabulary), replace=False)
    topic = rng.integers(n_topics, size=n)
    cols = words[topic[:, None], rng.integers(vocabulary, size=(n, per_row))]
    X = sp.csr_matrix((rng.random(n * per_row) + 0.5, cols.ravel(),
                       np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
    X.sum_duplicates()
    return X, np.where(topic % 4 == 0, 1, -1)


def test_wide_sparse_rows_in_no_dense_rows():
    d = 2**18
    X, y = _topics(2000, d, seed=0)
    Xt, yt = _topics(1000, d, seed=1)
    with no_dense_rows(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = NSAUC(n_landmarks=64, n_epochs=5, random_state=0).fit(
            sparse_row_blocks(X, 500), y)
        auc = roc_auc(yt, model.decision_function(Xt))
    assert model.embedding_.landmarks_.shape == (64, d)
    assert model.transform(Xt[:3]).shape == (3, model.embedding_.n_components_)
    assert auc > 0.95
