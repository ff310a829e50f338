"""k-means seedings on an in-memory sample of rows: greedy k-means++ and k-means||.

Mini-batch k-means (:mod:`daskauc.embed.kmeans`) seeds on a uniform sample of
``max(3 k, 10 batch_size)`` rows drawn in one compute; this module picks the k seeds among the
sample's rows.

* ``"k-means++"``: greedy k-means++ (Arthur & Vassilvitskii; scikit-learn's default): k
  sequential steps, each drawing ``2 + ln k`` candidates by D^2 sampling and keeping the one
  that lowers the potential most. Done plainly each step is a product of those candidates
  with the whole sample, ``k (2 + ln k) s d`` flops with ``s >= 3 k`` sample rows: quadratic
  in k and sequential (a chain of k thin products that BLAS runs at memory speed). Here a
  step computes a candidate's distance only to the rows that the triangle inequality lets
  come closer to it (about 3% of them on covtype), with the same result: 3-6x faster.
* ``"k-means||"``: k-means|| (Bahmani et al. 2012) on the sample, in ``rounds`` rounds that
  each draw ``ceil((k - 1) / rounds)`` rows at once by D^2 sampling without replacement
  (Efraimidis-Spirakis keys ``E_i / D^2_i``, ``E_i ~ Exp(1)``, the smallest kept), then fold
  their distances into every sample row's D^2 with the tiled assignment of
  :mod:`daskauc.embed.assign`. Drawing a fixed number per round instead of Bahmani's
  independent oversampling (``l`` expected rows per round, then a weighted k-means++ to
  recluster the ``~ r l`` candidates down to k) yields exactly k seeds, so there is no
  reclustering step: on a sample of only ``3 k`` rows Bahmani's ``l = 2 k`` over 5 rounds
  would return most of the sample and the recluster would be the greedy k-means++ above.
  With ``rounds = k`` this is plain (one-candidate) k-means++. Cost: ``s k d`` flops in
  tile-sized products plus ``O(rounds s)``.
* ``"random"``: k distinct sample rows drawn uniformly.
* ``"auto"`` (default): greedy k-means++ up to ``GREEDY_MAX_CLUSTERS`` centres, k-means||
  above; on sparse rows greedy k-means++ also only while its cost stays small
  (:mod:`daskauc.embed.sparse_rows`: its skips do not fire on text).

Measurements (covtype training rows, 464,809 x 54, standardized, float32, on this 2-core
EPYC while another process ran; 2,048-row batches; means of 2-3 seeds). "seed" is the mean
squared distance of a row to its nearest seed, "final" the same after 3 epochs of mini-batch
k-means. The final inertia on covtype is dominated by a few dozen rows with rare binary
columns (standardized values near 100): about half of it sits in the 100 farthest rows and it
varies 0.6-1.1 with the sample at k = 8192, for every seeding. "bulk" is the inertia of the
99% nearest rows, which is what separates the seedings (its spread over seeds is 0.001-0.003):

=====  ===========  =======  =====  =====  ======  ======
k      seeding      seconds  seed   final  bulk    epoch
=====  ===========  =======  =====  =====  ======  ======
1024   k-means++    1.9      3.05   2.41   --      1.0 s
1024   k-means||    0.4      3.41   2.48   --
2048   k-means++    3.5      2.45   1.92   1.011   2.1 s
2048   k-means||    0.5      2.68   1.91   1.023
4096   k-means++    7.7      2.03   1.55   0.703   4.0 s
4096   k-means||    0.5      2.16   1.47   0.707
4096   random       0.0      4.0    1.45   0.737
8192   k-means++    20       1.72   0.89   0.473   8 s
8192   k-means||    0.8      1.79   0.93   0.477
8192   random       0.0      2.4    0.86   0.497
=====  ===========  =======  =====  =====  ======  ======

The seconds above are the plain greedy version's. With the triangle-inequality skips (same
centres) greedy k-means++ takes 0.3, 0.6, 1.3 and 3.8 s at k = 1024, 2048, 4096 and 8192 on the
same samples (k-means|| 0.05-0.2 s; load average 0.9).

Greedy k-means++ leaves 0.6-1.2% less bulk inertia than k-means|| at every k measured, but its
plain cost grows as k^2 (with the sample leaving the caches, faster): 2 epochs' worth at 4096, 2.5
at 8192, 162 s at 16,384 and about 13 minutes at 32,768 (4,096 of its 32,768 steps took 97 s;
every step costs the same), against 2 s and 5-8 s for k-means||. Hence "auto": greedy up to
2,048 centres, where it costs under two epochs, k-means|| above. Random seeds leave 4-5% more
bulk inertia. Batching the D^2 draws costs nothing measurable here: 1, 16, 64, 256 and 820
draws per round (k = 4096) seed within 0.5% of each other (on blobs with k = 40: 4 rounds
1.27x greedy's seeding inertia, 16 rounds 1.24x, one draw per round 1.23x; scikit-learn's
one-candidate k-means++ 1.24x).

References
----------
D. Arthur and S. Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007.
B. Bahmani, B. Moseley, A. Vattani, R. Kumar and S. Vassilvitskii, "Scalable k-means++",
PVLDB 5(7), 2012.
P. S. Efraimidis and P. G. Spirakis, "Weighted random sampling with a reservoir", Information
Processing Letters 97(5), 2006.
"""

from __future__ import annotations

import numpy as np

from .._params import Interval, Options, check_param, seed_sequence
from .._sparse import canonical_csr, is_sparse
from .._validation import float_dtype
from ._kernels import _kpp_accept, _kpp_gains
from .assign import blas_for, default_threads, nearest_centres
from .sparse_rows import (
    SPARSE_GREEDY_MAX_OPS,
    kmeans_parallel_sparse,
    kmeans_plusplus_sparse,
    sparse_greedy_ops,
)

__all__ = ["kmeans_plusplus", "kmeans_parallel", "resolve_init", "INITS"]

#: seedings by name ("auto" resolves to one of the others by k).
INITS = ("auto", "k-means++", "k-means||", "random")

#: "auto" seeds by greedy k-means++ up to this many centres and by k-means|| above (see the
#: module's table: greedy is better by a few per cent at 1024-2048 centres and costs less
#: than an epoch there; at 4096 it costs two epochs and is not better).
GREEDY_MAX_CLUSTERS = 2048

#: rounds of k-means|| (each draws ceil((k - 1) / rounds) rows).
KMEANS_PARALLEL_ROUNDS = 16


def resolve_init(init, n_clusters: int, sample=None) -> str:
    """The seeding ``init`` names (None and "auto" choose by ``n_clusters``; on a sparse
    ``sample`` also by the cost of greedy k-means++ there,
    :data:`daskauc.embed.sparse_rows.SPARSE_GREEDY_MAX_OPS`)."""
    if init is None or init == "auto":
        greedy = n_clusters <= GREEDY_MAX_CLUSTERS
        if greedy and sample is not None and is_sparse(sample):
            greedy = sparse_greedy_ops(n_clusters, sample) <= SPARSE_GREEDY_MAX_OPS
        return "k-means++" if greedy else "k-means||"
    check_param("init", init, Options(*INITS))
    return init


def kmeans_plusplus(
    X: np.ndarray, n_clusters: int, *, random_state=None, n_local_trials: int | None = None
) -> np.ndarray:
    """Greedy k-means++ seeding of ``n_clusters`` centres among the rows of ``X`` (numpy).

    Each new centre is the best (lowest resulting potential) of ``n_local_trials`` candidates
    drawn with probability proportional to the squared distance to the nearest chosen centre
    (``2 + ln k`` candidates by default, as in Arthur & Vassilvitskii's greedy variant and
    scikit-learn). The potentials are exact, but computed only where the triangle inequality
    allows a row to come closer to a candidate (:func:`_kpp_gains`).

    Parameters
    ----------
    X : ndarray of shape (m, d), or a scipy sparse matrix
        Rows to choose from (a sample of the training rows), float32 or float64; distances
        are summed in that dtype from the differences, potentials in float64. Sparse rows
        are read as their non-zeros (:func:`daskauc.embed.sparse_rows.kmeans_plusplus_sparse`:
        the same choices; distances summed in float64).
    n_clusters : int
        Number of centres, at most ``m``.
    random_state : None, int, SeedSequence or Generator
    n_local_trials : int, optional

    Returns
    -------
    centers : ndarray of shape (n_clusters, d), float64
        Rows of ``X``.

    Notes
    -----
    Each step draws the candidates ``y_c`` by D^2 sampling, forms their products with the
    chosen centres (one small BLAS product, ``j t d`` flops at step j), and evaluates
    ``||x_i - y_c||^2`` only for the rows whose nearest centre ``c_a`` satisfies
    ``||y_c - c_a||^2 < 4 D_i^2``; the others cannot change the potential. The chosen centres
    are those of the plain algorithm (``k t m d`` flops), up to rounding in near ties. On
    covtype (20,480 sample rows, 1,600 centres) about 3% of the row-candidate pairs are
    evaluated: 0.5 s instead of 1.4 s for the plain BLAS version, with the same centres.

    References
    ----------
    D. Arthur and S. Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007.
    C. Elkan, "Using the triangle inequality to accelerate k-means", ICML 2003.
    E. Raff, "Exact acceleration of k-means++ and k-means||", IJCAI 2021.
    """
    if is_sparse(X):
        S = canonical_csr(X)
        check_param("n_clusters", n_clusters, Interval(int, 1, S.shape[0]))
        rng = np.random.default_rng(seed_sequence(random_state))
        trials = n_local_trials if n_local_trials is not None else 2 + int(np.log(n_clusters))
        return kmeans_plusplus_sparse(S, n_clusters, rng, trials)
    S = np.asarray(X)
    S = np.ascontiguousarray(S, dtype=float_dtype(S.dtype, "X"))
    m, d = S.shape
    check_param("n_clusters", n_clusters, Interval(int, 1, m))
    rng = np.random.default_rng(seed_sequence(random_state))
    trials = n_local_trials if n_local_trials is not None else 2 + int(np.log(n_clusters))
    ssq = np.einsum("ij,ij->i", S, S, dtype=np.float64)
    centers = np.empty((n_clusters, d))
    csq = np.empty(n_clusters)
    assign = np.zeros(m, np.int32)
    closest = np.full(m, np.inf)
    cumsum = np.empty(m)
    first = int(rng.integers(m))
    centers[0] = S[first]
    csq[0] = ssq[first]
    _kpp_accept(S, S[first], csq[:1], csq, cumsum, assign, closest, csq[0], 0)
    with blas_for(2.0 * trials * d * n_clusters):
        _kmeans_plusplus_steps(S, ssq, centers, csq, assign, closest, cumsum, rng, trials)
    return centers


def _kmeans_plusplus_steps(S, ssq, centers, csq, assign, closest, cumsum, rng, trials):
    m = S.shape[0]
    k = centers.shape[0]
    G = np.empty((k, trials))
    gains = np.empty(trials)
    gap = np.empty(k)
    for j in range(1, k):
        pot = cumsum[-1]
        if pot > 0.0:
            cand = np.searchsorted(cumsum, rng.random(trials) * pot)
            np.minimum(cand, m - 1, out=cand)
        else:  # every row coincides with a chosen centre: any row will do
            cand = rng.integers(m, size=trials)
        Y = S[cand].astype(np.float64)
        np.matmul(centers[:j], Y.T, out=G[:j])
        _kpp_gains(S, cand, G[:j], csq, ssq[cand], assign, closest, gains, gap)
        best = int(np.argmin(gains))
        centers[j] = Y[best]
        csq[j] = ssq[cand[best]]
        # the column contiguous, as the kernel's first call has it: one compiled signature
        _kpp_accept(S, S[cand[best]], np.ascontiguousarray(G[:j, best]), csq, cumsum, assign,
                    closest, csq[j], j)


def kmeans_parallel(
    X: np.ndarray, n_clusters: int, *, rounds: int = KMEANS_PARALLEL_ROUNDS, random_state=None
) -> np.ndarray:
    """k-means|| seeding of ``n_clusters`` centres among the rows of ``X`` (numpy), in rounds.

    The first centre is a uniformly drawn row; then each of ``rounds`` rounds draws
    ``ceil((k - 1) / rounds)`` further rows at once, without replacement, with probability
    proportional to their squared distance ``D^2`` to the nearest centre chosen so far, and
    updates ``D^2`` by one tiled BLAS pass over the sample.

    Parameters
    ----------
    X : ndarray of shape (m, d), or a scipy sparse matrix
        Rows to choose from (a sample of the training rows), float32 or float64; the
        distances are computed in that dtype (``D^2`` is accumulated in float64). Sparse rows
        are read as their non-zeros (:func:`daskauc.embed.sparse_rows.kmeans_parallel_sparse`).
    n_clusters : int
        Number of centres k, at most ``m``.
    rounds : int, default ``KMEANS_PARALLEL_ROUNDS``
        Rounds of D^2 sampling (capped at ``k - 1``; ``rounds = k - 1`` is k-means++ with
        one candidate per step).
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    centers : ndarray of shape (n_clusters, d), float64
        Distinct rows of ``X``, in the order they were drawn.

    Notes
    -----
    A round draws by Efraimidis-Spirakis keys: with ``E_i ~ Exp(1)`` independent, the rows
    of the ``b`` smallest ``E_i / D^2_i`` are a weighted sample without replacement with
    weights ``D^2_i`` (successive sampling). Rows already chosen are excluded; rows at
    distance 0 from a centre (duplicates) come last, in an arbitrary order. This is
    k-means|| (Bahmani et al.) with a fixed number of draws per round and no reclustering
    (see the module docstring). Cost ``m k d`` flops in tile-sized products and
    ``O(rounds m)`` for the keys, against ``k (2 + ln k) m d`` in k sequential steps for
    greedy k-means++.

    References
    ----------
    B. Bahmani, B. Moseley, A. Vattani, R. Kumar and S. Vassilvitskii, "Scalable k-means++",
    PVLDB 5(7), 2012.
    P. S. Efraimidis and P. G. Spirakis, "Weighted random sampling with a reservoir",
    Information Processing Letters 97(5), 2006.
    """
    if is_sparse(X):
        S = canonical_csr(X)
        check_param("n_clusters", n_clusters, Interval(int, 1, S.shape[0]))
        check_param("rounds", rounds, Interval(int, 1))
        rng = np.random.default_rng(seed_sequence(random_state))
        return kmeans_parallel_sparse(S, n_clusters, rounds, rng)
    S = np.asarray(X)
    S = np.ascontiguousarray(S, dtype=float_dtype(S.dtype, "X"))
    m = S.shape[0]
    check_param("n_clusters", n_clusters, Interval(int, 1, m))
    check_param("rounds", rounds, Interval(int, 1))
    rng = np.random.default_rng(seed_sequence(random_state))
    ssq = np.einsum("ij,ij->i", S, S, dtype=np.float64)
    closest = np.full(m, np.inf)
    chosen = np.zeros(m, bool)
    order = np.empty(n_clusters, np.int64)
    order[0] = rng.integers(m)
    new = order[:1]
    per_round = -(-(n_clusters - 1) // rounds) if n_clusters > 1 else 0
    labels = np.empty(m, np.int64)
    best = np.empty(m)
    threads = default_threads()
    done = 1
    while True:
        chosen[new] = True
        C = np.ascontiguousarray(S[np.sort(new)])
        nearest_centres(S, C, np.einsum("ij,ij->i", C, C), labels, best, n_threads=threads)
        np.minimum(closest, np.maximum(ssq + best, 0.0), out=closest)
        if done == n_clusters:
            break
        b = min(per_round, n_clusters - done)
        keys = np.full(m, np.inf)
        live = closest > 0.0
        keys[live] = rng.standard_exponential(int(live.sum())) / closest[live]
        keys[chosen] = np.nan  # sorts after inf: never drawn again
        new = np.argpartition(keys, b - 1)[:b]
        new = new[np.argsort(keys[new], kind="stable")]  # in the order successive draws take
        order[done : done + b] = new
        done += b
    return np.asarray(S[order], dtype=np.float64)
