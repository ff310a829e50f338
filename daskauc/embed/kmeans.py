"""Mini-batch k-means (Sculley 2010) streaming the row chunks of a dask array.

Seeding is greedy k-means++ (up to 2,048 centres) or k-means|| (above) on a uniform sample of
``max(3 k, 10 batch_size)`` rows drawn across all chunks in one compute
(:mod:`daskauc.embed.seeding`). Each epoch is then one Dask graph built by
:func:`daskauc.engine.stream.epoch_graph`: a chain of tasks ``daskauc-kmeans-epoch-<token>``
carrying ``(centers, counts)`` through the chunks in a shuffled order. Inside a chunk the rows
are visited in random mini-batches; per batch the nearest centres come from BLAS products over
bounded tiles and a numba running arg-min (:func:`daskauc.embed.assign.nearest_centres`), then
each centre moves by Sculley's per-centre learning rate in a numba kernel.

Design choices
--------------
* Centres are kept in float64 whatever the data dtype: a centre is a running mean over up to
  n / k rows and float32 would lose about ``count * 2^-24`` relative accuracy. They are cast to
  the data dtype only for the distance product (k x d values per batch, negligible next to the
  b x d x k product), so float32 data keeps float32 BLAS speed.
* Empty clusters are left as they are: a centre no row is ever assigned to stays at its
  seed, which is a data row, so it is still a sensible landmark. (scikit-learn
  instead re-seeds small clusters at random; that makes results depend on its
  ``reassignment_ratio`` and adds randomness that is hard to reproduce across chunkings.)
  The count of such centres is reported in the history (``n_empty``).
"""

from __future__ import annotations

import time

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._arrays import sample_rows
from .._compute import compute
from .._params import AUTO_OR_BOOL, Interval, check_params, seed_sequence
from .._registry import model_class
from .._sparse import is_sparse, is_sparse_dask
from .._validation import (
    as_row_chunked,
    check_n_features,
    check_predict_X,
    is_lazy_input,
    set_features_in,
)
from ..engine.stream import run_epochs
from ._kernels import _sculley_update
from .assign import default_threads, nearest_centres
from .seeding import kmeans_parallel, kmeans_plusplus, resolve_init
from .sparse_rows import (
    TransposedCentres,
    check_centre_bytes,
    dense_rows,
    kmeans_chunk,
    row_squares,
    transpose,
)

__all__ = ["MiniBatchKMeans", "minibatch_kmeans", "kmeans_plusplus"]



def _child(ss: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """A child seed addressed by ``key`` (deterministic, does not mutate ``ss``)."""
    return np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + tuple(key))


#: threads assigning a batch inside an epoch task; None: the Dask worker's threads, or the
#: process's cores under the threaded scheduler (an epoch is a chain: one task runs at a
#: time). The result does not depend on it. Covtype, 32,768 centres, a 2,048-row batch:
#: 125-145 ms on one thread, 81-85 ms on two (idle machine); no gain while another process
#: keeps the second core busy.
KMEANS_THREADS: int | None = None


def default_init_size(n_clusters: int, batch_size: int, n_samples: int) -> int:
    """Rows of the k-means++ sample: ``max(3 k, 10 batch_size)`` capped by ``n_samples``."""
    return int(min(n_samples, max(3 * n_clusters, 10 * batch_size)))


def _kmeans_step(X_block, y_block, state, seed, extra, *, batch_size: int):
    """One chunk of an epoch: random mini-batches, nearest centres, Sculley moves."""
    if is_sparse(X_block):
        return _kmeans_step_sparse(X_block, state, seed, batch_size)
    centers, counts, sse, rows = state
    centers = centers.copy()  # never mutate the state we were given (retried tasks)
    counts = counts.copy()
    X = np.ascontiguousarray(X_block)
    m = X.shape[0]
    if m == 0:
        return centers, counts, sse, rows
    rng = np.random.default_rng(seed)
    perm = rng.permutation(m)
    labels = np.empty(min(batch_size, m), np.int64)
    best = np.empty(min(batch_size, m), np.float64)
    threads = KMEANS_THREADS or default_threads()
    sse, rows = _kmeans_batches(X, perm, centers, counts, labels, best, sse, rows, batch_size,
                                threads)
    return centers, counts, sse, rows


def _kmeans_step_sparse(X_block, state, seed, batch_size):
    """:func:`_kmeans_step` of a CSR chunk; the centres travel transposed (d x k,
    :class:`daskauc.embed.sparse_rows.TransposedCentres`)."""
    centres, counts, sse, rows = state
    m = X_block.shape[0]
    if m == 0:
        return state
    VT = centres.VT.copy()  # never mutate the state we were given (retried tasks)
    counts = counts.copy()
    perm = np.random.default_rng(seed).permutation(m)
    sse, rows = kmeans_chunk(X_block, perm, VT, counts, sse, rows, batch_size)
    return TransposedCentres(VT), counts, sse, rows


def _kmeans_batches(X, perm, centers, counts, labels, best, sse, rows, batch_size, threads):
    m = X.shape[0]
    for start in range(0, m, batch_size):
        idx = np.sort(perm[start : start + batch_size])  # sorted: cache-friendly gather
        b = idx.shape[0]
        Xb = X[idx]
        C = centers.astype(X.dtype)
        csq = np.einsum("ij,ij->i", C, C)
        nearest_centres(Xb, C, csq, labels[:b], best[:b], n_threads=threads)
        _sculley_update(Xb, labels[:b], centers, counts)
        # ||x||^2 of the batch's rows in X's dtype (as ``best``), summed in float64
        sse += float(np.einsum("ij,ij->i", Xb, Xb).sum(dtype=np.float64) + best[:b].sum())
        rows += b
    return sse, rows


def _dummy_labels(Xd: da.Array) -> da.Array:
    return da.zeros(Xd.shape[0], chunks=(Xd.chunks[0],), dtype=np.int8)


def _run_epochs(Xd, centers, counts, *, n_epochs, batch_size, ss, shuffle=True):
    """Run ``n_epochs`` epochs (one compute each); return centres, counts and history.

    On sparse rows the chain carries the centres transposed (d x k: a row's non-zeros then
    read contiguous rows of k values, :func:`daskauc.embed.sparse_rows.kmeans_chunk`)."""
    sparse = is_sparse_dask(Xd)
    if sparse:
        centers = TransposedCentres(transpose(centers))

    def record(state, seconds):
        _, counts, sse, rows = state
        # mean squared distance of each row to its centre at the time it was assigned
        return {"seconds": seconds, "batch_inertia": sse / max(rows, 1),
                "n_empty": int(np.count_nonzero(counts == 0))}

    (centers, counts, *_), history = run_epochs(
        _kmeans_step, Xd, _dummy_labels(Xd), (centers, counts), solver="kmeans",
        n_epochs=n_epochs, params={"batch_size": int(batch_size)}, shuffle=shuffle,
        seed_root=(ss.entropy, (*ss.spawn_key, 1)),
        start=lambda state: (state[0], state[1], 0.0, 0),  # the sums are the epoch's
        record=record, log=None, unit="k-means epoch")
    if sparse:
        centers = transpose(centers.VT)
    return centers, counts, history


def _check_init(init, n_clusters: int, n_features: int) -> np.ndarray:
    C = np.asarray(init, dtype=np.float64)
    if C.shape != (n_clusters, n_features):
        raise ValueError(
            f"init must have shape (n_clusters, n_features) = ({n_clusters}, {n_features}); "
            f"got {C.shape}"
        )
    if not np.isfinite(C).all():
        raise ValueError("init contains NaN or infinity")
    return np.ascontiguousarray(C)


def _seed_centers(Xd, n_clusters, *, init, init_size, ss, also=()):
    """Initial centres (a seeding of :mod:`.seeding` on a sample, or given) plus ``also``
    computed in the same compute as the sample, and a record of what was done."""
    n, d = Xd.shape
    if init is not None and not isinstance(init, str):
        centers = _check_init(init, n_clusters, d)
        extras = compute(*also) if also else ()
        return centers, tuple(extras), {"init": "array"}
    method = resolve_init(init, n_clusters)
    rng = np.random.default_rng(_child(ss, 0))
    m = int(min(n, init_size))
    if m < n_clusters:
        raise ValueError(
            f"init_size={m} is smaller than n_clusters={n_clusters}; raise init_size"
        )
    t0 = time.perf_counter()
    if m < n:
        sample = sample_rows(Xd, np.sort(rng.choice(n, size=m, replace=False)))
    else:
        sample = Xd
    sample, *extras = compute(sample, *also)
    t1 = time.perf_counter()
    if is_sparse(sample):
        method = resolve_init(init, n_clusters, sample)
    if method == "random" and is_sparse(sample):
        centers = dense_rows(sample[np.sort(rng.choice(m, n_clusters, replace=False))])
    elif method == "random":
        centers = np.asarray(sample[np.sort(rng.choice(m, n_clusters, replace=False))],
                             dtype=np.float64)
    elif method == "k-means||":
        centers = kmeans_parallel(sample, n_clusters, random_state=_child(ss, 0, 1))
    else:
        centers = kmeans_plusplus(sample, n_clusters, random_state=_child(ss, 0, 1))
    info = {"init": method, "init_size": m, "sample_seconds": t1 - t0,
            "seeding_seconds": time.perf_counter() - t1}
    return np.ascontiguousarray(centers), tuple(extras), info


def _fit_kmeans(Xd, n_clusters, *, batch_size, n_epochs, init_size, ss, init=None, also=()):
    n = Xd.shape[0]
    if n_clusters > n:
        raise ValueError(f"n_clusters={n_clusters} exceeds the number of rows ({n})")
    if is_sparse_dask(Xd):
        check_centre_bytes(n_clusters, Xd.shape[1], "centres")
    if init_size is None:
        init_size = default_init_size(n_clusters, batch_size, n)
    t0 = time.perf_counter()
    centers, extras, info = _seed_centers(Xd, n_clusters, init=init, init_size=init_size,
                                          ss=ss, also=also)
    seconds_init = time.perf_counter() - t0
    counts = np.zeros(n_clusters, np.int64)
    centers, counts, history = _run_epochs(Xd, centers, counts, n_epochs=n_epochs,
                                           batch_size=batch_size, ss=ss)
    history.insert(0, {"epoch": 0, "seconds": seconds_init,
                       "init_size": int(min(n, init_size)), **info})
    return centers, counts, history, extras


def minibatch_kmeans(
    X,
    n_clusters: int,
    *,
    batch_size: int = 2048,
    n_epochs: int = 3,
    init_size: int | None = None,
    random_state=None,
    init=None,
) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Mini-batch k-means over a row-chunked array, one Dask graph per epoch.

    Parameters
    ----------
    X : numpy array, dask array, zarr array, dataset store path or sparse rows, shape (n, d)
        Sparse rows (a scipy sparse matrix, a dask array of CSR blocks, a sparse store) are
        read as their non-zeros (:mod:`daskauc.embed.sparse_rows`); the centres are dense,
        ``k x d`` float64, at most ``MAX_CENTRE_BYTES`` (2 GiB).
    n_clusters : int
        Number of centres k (at most n).
    batch_size : int, default 2048
        Rows per mini-batch (batches never straddle chunks).
    n_epochs : int, default 3
        Passes over the data after seeding (0 returns the seeds).
    init_size : int, optional
        Rows of the k-means++ sample; default ``max(3 k, 10 batch_size)`` capped by n.
    random_state : None, int, SeedSequence or Generator
    init : None, "auto", "k-means++", "k-means||", "random" or array of shape (k, d)
        Seeding on the sample (:mod:`daskauc.embed.seeding`): greedy k-means++, k-means|| in
        rounds, k distinct uniformly drawn rows, or given centres (no sample is drawn).
        None and "auto" mean greedy k-means++ up to 2,048 centres and k-means|| above.

    Returns
    -------
    centers : ndarray (k, d), float64
    counts : ndarray (k,), int64
        Rows assigned to each centre over all epochs (0 for a centre never used).
    history : list of dict
        Entry 0 describes seeding (``seconds``, ``init`` the seeding used, ``init_size``,
        ``sample_seconds`` drawing the sample, ``seeding_seconds`` seeding on it); then one
        entry per epoch with ``seconds``, ``batch_inertia`` (mean squared distance of each row
        to its centre when it was assigned) and ``n_empty``.

    Notes
    -----
    Objective (k-means): minimize ``sum_i min_j ||x_i - c_j||^2``. Sculley's update: for each
    mini-batch, assign every row to its nearest centre, then for each row in turn
    ``v[c] += 1; c <- c + (x - c) / v[c]`` (a per-centre learning rate ``1 / v[c]``, with
    ``v`` accumulated over all epochs). Centres are float64; empty clusters keep their seed.

    References
    ----------
    D. Sculley, "Web-scale k-means clustering", WWW 2010.
    D. Arthur and S. Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007.
    B. Bahmani et al., "Scalable k-means++", PVLDB 5(7), 2012.
    """
    check_params(dict(n_clusters=n_clusters, batch_size=batch_size, n_epochs=n_epochs,
                      init_size=init_size), MiniBatchKMeans._params)
    Xd = as_row_chunked(X, sparse=True)
    centers, counts, history, _ = _fit_kmeans(
        Xd, n_clusters, batch_size=batch_size, n_epochs=n_epochs, init_size=init_size,
        ss=seed_sequence(random_state), init=init,
    )
    return centers, counts, history


# ---------------------------------------------------------------------------- estimator


def _rows(block):
    """A row block as the assignment reads it: CSR as it is, dense C-contiguous."""
    return block if is_sparse(block) else np.ascontiguousarray(block)


def _squares(X) -> np.ndarray:
    """``||x_i||^2`` in X's dtype."""
    if is_sparse(X):
        return row_squares(X).astype(X.dtype)
    return np.einsum("ij,ij->i", X, X)


def _predict_block(block, C, csq):
    X = _rows(block)
    labels = np.empty(X.shape[0], np.int64)
    best = np.empty(X.shape[0], np.float64)
    nearest_centres(X, C, csq, labels, best)
    return labels


def _distances_block(block, C, csq):
    X = _rows(block)
    D = np.asarray(X @ C.T)
    D *= -2
    D += _squares(X)[:, None]
    D += csq[None, :]
    np.maximum(D, 0, out=D)
    return np.sqrt(D, out=D)


def _labels_sse_block(block, C, csq):
    """Nearest centre of every row and the block's sum of squared distances to them."""
    X = _rows(block)
    labels = np.empty(X.shape[0], np.int64)
    best = np.empty(X.shape[0], np.float64)
    nearest_centres(X, C, csq, labels, best)
    xx = row_squares(X).sum() if is_sparse(X) else np.einsum("ij,ij->", X, X, dtype=np.float64)
    return labels, float(xx + best.sum())


def _sse_block(block, C, csq):
    return np.array([_labels_sse_block(block, C, csq)[1]])


@model_class(no_cli="k-means landmarks: daskauc embed fits them")
class MiniBatchKMeans(TransformerMixin, ClusterMixin, BaseEstimator):
    """Mini-batch k-means over numpy or out-of-core dask arrays (Sculley 2010).

    Parameters
    ----------
    n_clusters : int, default 8
    batch_size : int, default 2048
        Rows per mini-batch.
    n_epochs : int, default 3
        Passes over the data after k-means++ seeding.
    init_size : int, optional
        Rows of the k-means++ sample; default ``max(3 n_clusters, 10 batch_size)``, capped by n.
    compute_labels : {"auto", True, False}, default "auto"
        Label the training rows with the final centres after fitting (``labels_`` and
        ``inertia_``, one more pass and an n-vector on the client). "auto" does it for
        in-memory (numpy) input and not for dask arrays or stores, where ``predict`` labels
        lazily instead.
    random_state : None, int, SeedSequence or Generator

    Attributes
    ----------
    cluster_centers_ : ndarray (n_clusters, n_features), float64
    counts_ : ndarray (n_clusters,), int64
        Rows assigned to each centre so far (all epochs and ``partial_fit`` calls).
    labels_ : ndarray (n_samples,), int64
        Index of the nearest final centre of each training row (of the last ``partial_fit``
        batch); only when labels are computed (``compute_labels``).
    inertia_ : float
        ``sum_i min_j ||x_i - c_j||^2`` over the same rows, with ``labels_``.
    history_ : list of dict
        Seeding and per-epoch records (see :func:`minibatch_kmeans`).
    n_iter_ : int
        Epochs run (``partial_fit`` calls count one each).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names, when ``X`` was a dataframe with string column names.

    Notes
    -----
    See :func:`minibatch_kmeans` for the objective and update. Without computed labels use
    :meth:`predict` and :meth:`score` (minus the inertia, as in scikit-learn) explicitly.

    Sparse rows (a scipy sparse matrix, a dask array of CSR blocks, a sparse store) are read
    as their non-zeros (:mod:`daskauc.embed.sparse_rows`); the centres stay dense, at most
    ``MAX_CENTRE_BYTES`` (2 GiB) of them.

    References
    ----------
    D. Sculley, "Web-scale k-means clustering", WWW 2010.
    """

    #: fit / partial_fit / predict / transform read sparse rows (CSR blocks)
    _sparse_rows = True

    _params = {
        "n_clusters": Interval(int, 1),
        "batch_size": Interval(int, 1),
        "n_epochs": Interval(int, 0),
        "init_size": [Interval(int, 1), None],
        "compute_labels": AUTO_OR_BOOL,
    }

    def __init__(self, n_clusters=8, *, batch_size=2048, n_epochs=3, init_size=None,
                 compute_labels="auto", random_state=None):
        self.n_clusters = n_clusters
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.init_size = init_size
        self.compute_labels = compute_labels
        self.random_state = random_state

    def _check_params(self):
        check_params(self, self._params)

    def fit(self, X, y=None):
        """Seed with k-means++ on a sample, then run ``n_epochs`` epochs over ``X``."""
        self._check_params()
        Xd = as_row_chunked(X, sparse=True)
        set_features_in(self, X, Xd.shape[1])
        self._seed = seed_sequence(self.random_state)
        centers, counts, history, _ = _fit_kmeans(
            Xd, self.n_clusters, batch_size=self.batch_size, n_epochs=self.n_epochs,
            init_size=self.init_size, ss=self._seed,
        )
        self._set_fitted(centers, counts, history, Xd.shape[1])
        self.n_iter_ = int(self.n_epochs)
        self._n_partial = 0
        self._set_labels(Xd, X)
        return self

    def partial_fit(self, X, y=None):
        """One more epoch over ``X`` (an array or a chunk); seeds from ``X`` on the first call."""
        self._check_params()
        Xd = as_row_chunked(X, sparse=True)
        if not hasattr(self, "cluster_centers_"):
            set_features_in(self, X, Xd.shape[1])
            self._seed = seed_sequence(self.random_state)
            self._n_partial = 0
            centers, counts, history, _ = _fit_kmeans(
                Xd, self.n_clusters, batch_size=self.batch_size, n_epochs=0,
                init_size=self.init_size, ss=self._seed,
            )
            self._set_fitted(centers, counts, history, Xd.shape[1])
            self.n_iter_ = 0
        check_n_features(Xd.shape, self.n_features_in_, type(self).__name__)
        self._n_partial += 1
        centers, counts, history = _run_epochs(
            Xd, self.cluster_centers_, self.counts_, n_epochs=1, batch_size=self.batch_size,
            ss=_child(self._seed, 2, self._n_partial),
        )
        self._set_fitted(centers, counts, self.history_ + history, self.n_features_in_)
        self.n_iter_ += 1
        self._set_labels(Xd, X)
        return self

    def _set_fitted(self, centers, counts, history, n_features):
        self.cluster_centers_ = np.asarray(centers, dtype=np.float64)
        self.counts_ = np.asarray(counts, dtype=np.int64)
        self.history_ = list(history)
        self.n_features_in_ = int(n_features)

    def _set_labels(self, Xd: da.Array, X_input) -> None:
        """``labels_`` and ``inertia_`` of the rows of ``Xd`` (one compute) when
        ``compute_labels`` asks for them; otherwise drop stale ones."""
        want = self.compute_labels
        if want == "auto":
            want = not is_lazy_input(X_input)
        if not want:
            for stale in ("labels_", "inertia_"):
                self.__dict__.pop(stale, None)
            return
        C = self.cluster_centers_.astype(Xd.dtype)
        csq = np.einsum("ij,ij->i", C, C)
        token = tokenize(Xd.name, C)
        parts = compute(*[
            dask.delayed(_labels_sse_block, pure=True)(
                block, C, csq, dask_key_name=f"daskauc-kmeans-labels-{token}-{i}")
            for i, block in enumerate(Xd.to_delayed().ravel())])
        self.labels_ = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
        self.inertia_ = float(sum(p[1] for p in parts))

    def _map(self, X, func, *, kind: str, out_cols: int | None):
        """Apply ``func(block, C, csq)`` to numpy or dask input (returning the same kind)."""
        check_is_fitted(self, "cluster_centers_")
        Xv = check_predict_X(self, X)
        C = self.cluster_centers_.astype(Xv.dtype)
        csq = np.einsum("ij,ij->i", C, C)
        if not isinstance(Xv, da.Array):
            return func(Xv, C, csq)
        out_dtype = np.int64 if out_cols is None else Xv.dtype
        if out_cols is None:
            return Xv.map_blocks(func, C, csq, drop_axis=1, dtype=out_dtype,
                                 token=f"daskauc-kmeans-{kind}", meta=np.empty((0,), out_dtype))
        return Xv.map_blocks(func, C, csq, chunks=(Xv.chunks[0], (out_cols,)), dtype=out_dtype,
                             token=f"daskauc-kmeans-{kind}", meta=np.empty((0, 0), out_dtype))

    def fit_predict(self, X, y=None):
        """``fit(X)``, then ``labels_`` (in-memory ``X`` with labels computed) or
        ``predict(X)`` (lazy for dask input)."""
        self.fit(X)
        if hasattr(self, "labels_") and not is_lazy_input(X):
            return self.labels_
        return self.predict(X)

    def predict(self, X):
        """Index of the nearest centre of each row (numpy or lazy dask, like ``X``)."""
        return self._map(X, _predict_block, kind="predict", out_cols=None)

    def transform(self, X):
        """Euclidean distances to every centre, shape (n, n_clusters)."""
        return self._map(X, _distances_block, kind="transform", out_cols=self.n_clusters)

    def score(self, X, y=None) -> float:
        """Minus the inertia ``sum_i min_j ||x_i - c_j||^2`` of ``X`` (one pass)."""
        check_is_fitted(self, "cluster_centers_")
        Xv = check_predict_X(self, X)
        C = self.cluster_centers_.astype(Xv.dtype)
        csq = np.einsum("ij,ij->i", C, C)
        if not isinstance(Xv, da.Array):
            return -float(_sse_block(Xv, C, csq)[0])
        parts = Xv.map_blocks(_sse_block, C, csq, chunks=((1,) * Xv.numblocks[0],),
                              drop_axis=1, dtype=np.float64, token="daskauc-kmeans-score",
                              meta=np.empty((0,), np.float64))
        return -float(compute(parts.sum())[0])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = True
        return tags
