"""k-means, its seedings, nearest centres and the kernel width on sparse rows (CSR blocks).

The k-means Nystroem map reads sparse rows (:mod:`daskauc._sparse`: canonical CSR row
blocks) without ever making them dense; what is dense is what k-means and the map are made
of: the centres (landmarks), ``k x d`` float64. That matrix is the one thing here that grows
with the width d, so its size is bounded (:data:`MAX_CENTRE_BYTES`, refused above it with the
numbers to change). Everything else costs the non-zeros:

* nearest centres: ``||x - c||^2 = ||x||^2 + ||c||^2 - 2 x.c`` with ``x.c`` from a CSR x
  dense product against the centres transposed (``d x k``, each non-zero reads one contiguous
  row of k values), ``||x||^2`` from the row's non-zeros, in row blocks of bounded size;
* a mini-batch k-means chunk (:func:`kmeans_chunk`): the centres live transposed (``d x k``)
  and lazily scaled, ``c_j = s_j v_j``: Sculley's move ``c <- c + (x - c) / count`` shrinks
  ``s_j`` and adds to the row's non-zeros of ``v_j`` only (O(nnz) a row, where the dense move
  touches all d values); the scales are folded in once per chunk;
* greedy k-means++ and k-means|| on a CSR sample: the dense seedings' steps, with distances of
  sparse rows by merging their sorted indices.

Greedy k-means++'s triangle-inequality skips (:mod:`daskauc.embed.seeding`) hardly fire on
text: tf-idf rows are all about equally far apart (distances near sqrt(2)), so every row is
compared with every candidate, ``(2 + ln k) k nnz(sample)`` steps plus the candidates'
products with the chosen centres. ``init="auto"`` on sparse rows therefore uses greedy
k-means++ only while that costs at most :data:`SPARSE_GREEDY_MAX_OPS`, and k-means|| above.
"""

from __future__ import annotations

import uuid

import numpy as np

from .._sparse import is_sparse
from ._kernels import _nearest_center
from ._sparse_kernels import (
    _count_row_nonzeros,
    _fill_csr,
    _kpp_accept_sparse,
    _kpp_gains_sparse,
    _row_squares,
    _scale_columns,
    _sculley_update_sparse,
    _sparse_gram,
    _transpose_tiles,
    _zero_columns,
)

__all__ = ["MAX_CENTRE_BYTES", "TransposedCentres", "bandwidth_moments", "check_centre_bytes",
           "combine_bandwidth", "dense_rows", "gram_of_sparse_rows", "kmeans_chunk",
           "kmeans_parallel_sparse", "kmeans_plusplus_sparse", "nearest_centres_sparse",
           "row_squares", "sparse_greedy_ops", "transpose"]

#: the largest dense centre (landmark) matrix fitted on sparse rows, k x d float64. At 2 GiB:
#: 1,600 landmarks of up to 167,000 features (20 Newsgroups' 130,107 take 1.7 GB); k-means
#: holds about three such matrices at its peak (the centres handed from chunk to chunk, the
#: chunk's working copy, the result), the map one more in its working dtype.
MAX_CENTRE_BYTES = 2 * 2**30

#: ``init="auto"`` seeds sparse rows by greedy k-means++ when its estimated steps
#: (:func:`sparse_greedy_ops`) are at most this many (about 2-5 s here), by k-means|| above.
SPARSE_GREEDY_MAX_OPS = 2e9

#: Gram values (rows x centres) formed at a time by the sparse nearest-centre search.
ASSIGN_VALUES = 2**19


def check_centre_bytes(k: int, d: int, what: str = "centres") -> None:
    """Refuse a dense ``k x d`` float64 centre matrix larger than :data:`MAX_CENTRE_BYTES`."""
    nbytes = 8 * int(k) * int(d)
    if nbytes > MAX_CENTRE_BYTES:
        from dask.utils import format_bytes

        k_max = MAX_CENTRE_BYTES // (8 * int(d))
        raise ValueError(
            f"{k:,} {what} of {d:,} sparse features make a dense {k:,} x {d:,} float64 matrix "
            f"of {format_bytes(nbytes)}, above the {format_bytes(MAX_CENTRE_BYTES)} that "
            f"daskauc fits on sparse rows (daskauc.embed.sparse_rows.MAX_CENTRE_BYTES): ask "
            f"for at most {k_max:,} {what}, or reduce the features first (hash them into fewer "
            "columns with sklearn.feature_extraction.FeatureHasher, or keep the frequent ones)")


def transpose(A: np.ndarray, dtype=None) -> np.ndarray:
    """``A^T`` as a new C-contiguous array (of ``dtype``), copied in cache-sized tiles: the
    centres (k x d) and their transpose (d x k) trade places once per k-means run and map."""
    A = np.ascontiguousarray(A)
    out = np.empty(A.shape[::-1], dtype=A.dtype if dtype is None else dtype)
    _transpose_tiles(A, out)
    return out


def row_squares(X) -> np.ndarray:
    """``||x_i||^2`` of the rows of a CSR matrix, float64."""
    out = np.empty(X.shape[0])
    _row_squares(X.indptr, X.data, out)
    return out


def dense_rows(X, dtype=np.float64) -> np.ndarray:
    """The rows of a (small) CSR matrix as a dense array: centres and landmarks drawn from
    sparse rows, the one place their rows become dense (bounded by the caller)."""
    out = np.zeros(X.shape, dtype=dtype)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    out[rows, X.indices] = X.data
    return out


def _assign(X, CT, csq, labels, best, scale=None) -> None:
    """Nearest centre of every CSR row from ``X @ CT`` (columns times ``scale`` if given),
    in row blocks of at most :data:`ASSIGN_VALUES` Gram values; the arg-min of
    :func:`daskauc.embed._kernels._nearest_center` (first index on ties)."""
    b, k = X.shape[0], CT.shape[1]
    rows = max(1, min(b, ASSIGN_VALUES // max(1, k)))
    for r0 in range(0, b, rows):
        G = np.ascontiguousarray(X[r0 : r0 + rows] @ CT)
        if scale is not None:
            G *= scale
        _nearest_center(G, csq.astype(G.dtype, copy=False), labels[r0 : r0 + rows],
                        best[r0 : r0 + rows])


def nearest_centres_sparse(X, C: np.ndarray, csq: np.ndarray, labels: np.ndarray,
                           best: np.ndarray) -> None:
    """:func:`daskauc.embed.assign.nearest_centres` for CSR rows ``X``: the same outputs
    (``labels``, ``best = min_j ||c_j||^2 - 2 x.c_j``) in the dtype of ``X`` and ``C``."""
    if X.shape[0] == 0:
        return
    _assign(X, transpose(C), csq, labels, best)


def gram_of_sparse_rows(U: np.ndarray) -> np.ndarray:
    """``U U^T`` (float64) of dense rows that are mostly zeros (centres of sparse rows: each
    the mean of the rows assigned to it, non-zero only on their columns), by a sparse
    product over their non-zeros: the dense product costs ``v^2 d`` (1600 landmarks of
    130,107 features: 3.3e11 flops, minutes), this the pairs of shared columns."""
    import scipy.sparse

    U = np.ascontiguousarray(U, dtype=np.float64)
    counts = np.empty(U.shape[0], np.int64)
    _count_row_nonzeros(U, counts)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = np.empty(indptr[-1], np.int64)
    data = np.empty(indptr[-1])
    _fill_csr(U, indptr, indices, data)
    Us = scipy.sparse.csr_matrix((data, indices, indptr), shape=U.shape)
    return dense_rows((Us @ Us.T).tocsr())


# ---------------------------------------------------------------------------- k-means epochs


class TransposedCentres:
    """k-means centres transposed (``VT``, d x k float64), as the chain of a sparse epoch
    carries them. Dask names an epoch's graph by a token of its state: this one is a token
    drawn when the centres are made, not a hash of their d k floats (1.7 GB at 1,600 x
    130,107: seconds per epoch)."""

    __slots__ = ("VT", "_token")

    def __init__(self, VT: np.ndarray):
        self.VT = VT
        self._token = uuid.uuid4().hex

    def __dask_tokenize__(self):
        return ("daskauc-kmeans-centres", self._token)


def kmeans_chunk(X, perm: np.ndarray, VT: np.ndarray, counts: np.ndarray, sse: float,
                 rows: int, batch_size: int) -> tuple[float, int]:
    """One chunk of a mini-batch k-means epoch on CSR rows (the dense chunk's batches).

    ``VT`` (d x k, float64) holds the centres as columns and is updated in place, as
    ``counts``; returns the running ``(sse, rows)``. Per batch: nearest centres from
    ``X_b @ VT`` scaled by the lazy scales, then Sculley's moves on the non-zeros
    (:func:`daskauc.embed._sparse_kernels._sculley_update_sparse`); the scales are folded in at
    the end. The distances are evaluated in float64 (the dense chunk: in the rows' dtype).
    """
    k = VT.shape[1]
    vsq = np.einsum("ij,ij->j", VT, VT)
    scale = np.ones(k)
    m = X.shape[0]
    labels = np.empty(min(batch_size, m), np.int64)
    best = np.empty(min(batch_size, m), np.float64)
    for start in range(0, m, batch_size):
        idx = np.sort(perm[start : start + batch_size])
        b = idx.shape[0]
        Xb = X[idx]
        _assign(Xb, VT, scale * scale * vsq, labels[:b], best[:b], scale=scale)
        fresh = np.unique(labels[:b][counts[labels[:b]] == 0])
        if fresh.size:  # their first row replaces their seed: clear them in one pass
            _zero_columns(fresh, VT)
        _sculley_update_sparse(Xb.indptr, Xb.indices, Xb.data, labels[:b], VT, scale, vsq,
                               counts)
        sse += float(row_squares(Xb).sum() + best[:b].sum())
        rows += b
    _scale_columns(scale, VT)
    return sse, rows


# ---------------------------------------------------------------------------- seedings


def sparse_greedy_ops(n_clusters: int, S) -> float:
    """Estimated steps of greedy k-means++ on the CSR sample ``S``: every row against every
    candidate (no skips), and the candidates' products with the chosen centres."""
    trials = 2 + int(np.log(n_clusters))
    nnz_row = S.nnz / max(1, S.shape[0])
    return float(n_clusters) * trials * (S.nnz + n_clusters * nnz_row)


def kmeans_plusplus_sparse(S, n_clusters: int, rng: np.random.Generator,
                           trials: int) -> np.ndarray:
    """Greedy k-means++ (:func:`daskauc.embed.seeding.kmeans_plusplus`) on CSR rows: the same
    draws, bounds and choices; the centres' products with the candidates and the distances
    by merging sorted indices. Returns the chosen rows, dense float64 (k x d)."""
    indptr, indices, data = S.indptr, S.indices, S.data
    m = S.shape[0]
    ssq = row_squares(S)
    chosen = np.empty(n_clusters, np.int64)
    csq = np.empty(n_clusters)
    assign = np.zeros(m, np.int32)
    closest = np.full(m, np.inf)
    cumsum = np.empty(m)
    first = int(rng.integers(m))
    chosen[0] = first
    csq[0] = ssq[first]
    _kpp_accept_sparse(indptr, indices, data, csq[:1], csq, cumsum, assign, closest, first,
                       csq[0], 0)
    G = np.empty((n_clusters, trials))
    gains = np.empty(trials)
    gap = np.empty(n_clusters)
    for j in range(1, n_clusters):
        pot = cumsum[-1]
        if pot > 0.0:
            cand = np.searchsorted(cumsum, rng.random(trials) * pot)
            np.minimum(cand, m - 1, out=cand)
        else:  # every row coincides with a chosen centre: any row will do
            cand = rng.integers(m, size=trials)
        cand = cand.astype(np.int64)
        _sparse_gram(indptr, indices, data, chosen[:j], cand, G[:j])
        _kpp_gains_sparse(indptr, indices, data, cand, G[:j], csq, ssq[cand], assign, closest,
                          gains, gap)
        best = int(np.argmin(gains))
        chosen[j] = cand[best]
        csq[j] = ssq[cand[best]]
        _kpp_accept_sparse(indptr, indices, data, np.ascontiguousarray(G[:j, best]), csq,
                           cumsum, assign, closest, int(cand[best]), csq[j], j)
    return dense_rows(S[chosen])


def kmeans_parallel_sparse(S, n_clusters: int, rounds: int,
                           rng: np.random.Generator) -> np.ndarray:
    """k-means|| (:func:`daskauc.embed.seeding.kmeans_parallel`) on CSR rows: the same
    rounds and draws; each round's new centres are made dense (``b x d``, b = (k - 1) /
    rounds) for the distances. Returns the chosen rows, dense float64 (k x d)."""
    m = S.shape[0]
    ssq = row_squares(S)
    closest = np.full(m, np.inf)
    chosen = np.zeros(m, bool)
    order = np.empty(n_clusters, np.int64)
    order[0] = rng.integers(m)
    new = order[:1]
    per_round = -(-(n_clusters - 1) // rounds) if n_clusters > 1 else 0
    labels = np.empty(m, np.int64)
    best = np.empty(m)
    done = 1
    while True:
        chosen[new] = True
        C = dense_rows(S[np.sort(new)], S.dtype)
        nearest_centres_sparse(S, C, np.einsum("ij,ij->i", C, C), labels, best)
        np.minimum(closest, np.maximum(ssq + best, 0.0), out=closest)
        if done == n_clusters:
            break
        b = min(per_round, n_clusters - done)
        keys = np.full(m, np.inf)
        live = closest > 0.0
        keys[live] = rng.standard_exponential(int(live.sum())) / closest[live]
        keys[chosen] = np.nan  # sorts after inf: never drawn again
        new = np.argpartition(keys, b - 1)[:b]
        new = new[np.argsort(keys[new], kind="stable")]
        order[done : done + b] = new
        done += b
    return dense_rows(S[order])


# ---------------------------------------------------------------------------- kernel width


def bandwidth_moments(block) -> tuple[int, np.ndarray, float]:
    """``(n, column means, M2)`` of a CSR block, float64; M2 = the sum over all columns of the
    squared deviations from the column means, counting the zeros: for column f,
    ``sum over its non-zeros (x - mean_f)^2 + (n - nnz_f) mean_f^2`` (no cancellation)."""
    if not is_sparse(block):  # pragma: no cover - the caller passes CSR blocks
        raise TypeError("bandwidth_moments reads CSR blocks")
    n, d = block.shape
    if n == 0:
        return 0, np.zeros(d), 0.0
    data = np.asarray(block.data, dtype=np.float64)
    mean = np.bincount(block.indices, weights=data, minlength=d) / n
    dev = data - mean[block.indices]
    zeros = n - np.bincount(block.indices, minlength=d)
    return n, mean, float(dev @ dev + zeros @ (mean * mean))


def combine_bandwidth(a, b):
    """Chan, Golub & LeVeque's pairwise update of ``(n, mean, M2)`` (M2 summed over columns)."""
    na, ma, Ma = a
    nb, mb, Mb = b
    if na == 0:
        return b
    if nb == 0:
        return a
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), Ma + Mb + float(delta @ delta) * (na * nb / n)
