"""Sufficient statistics of the least-squares AUC objective and its exact minimizer.

Objective and update: docs/algorithms.md, "Least-squares AUC".

The pairwise least-squares AUC objective

    LS(w) = (1/(n+ n-)) sum_{i in P, j in N} (1 - w.(x_i - x_j))^2 + (lam/2) ||w||^2
          = 1 - 2 w.D + (w.D)^2 + w^T (S+ + S-) w + (lam/2) ||w||^2

depends on the data only through the class counts, means and covariances (``D = c+ - c-``,
``S+`` / ``S-`` normalized by ``1/n+`` / ``1/n-``). One distributed pass collects them
(:func:`class_statistics`); its minimizer is one r x r solve (:func:`lsauc`), or conjugate
gradient on the implicit operator where r x r does not fit (:mod:`daskauc.solvers._lsauc_cg`;
sparse rows: docs/sparse.md). The cheaper
first pass of TwoPassAUC, SPAM and SPDAM (counts, means, largest row norms) is
:func:`class_means`.

Both passes are tree reductions over the row chunks: one task per chunk (float64 partial
results even for float32 data), then a tree of combine tasks, all in one graph whose layer
is named ``daskauc-lsauc-stats`` (or ``daskauc-lsauc-means``) for the dashboard.

The stochastic members of the family share their epochs' helpers in
:mod:`daskauc.solvers._ls_epochs`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import dask.array as da
import numpy as np
import scipy.linalg
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from .._compute import compute
from .._labels import check_X_y
from .._params import AUTO_OR_BOOL, NON_NEGATIVE, Interval, Options, checks
from .._registry import solver
from .._sparse import is_sparse
from ._graphs import tree_sum
from ._lsauc_cg import LS_SOLVERS, check_exact_size, ls_conjugate_gradient, ls_route, refuse_merge
from ._result import SolverResult
from ._sparse_products import class_scatters, column_sums, row_squared_norms

#: accumulation modes of the scatter matrices (see :func:`class_statistics`).
PRECISIONS = ("auto", "float64", "mixed")

#: chunks combined per task in the tree reductions.
SPLIT_EVERY = 8


# ---------------------------------------------------------------------------------------------
# results


class _PerClass:
    """What both per-class summaries derive from counts and means (``mean_pos``/``mean_neg``)."""

    @property
    def n(self) -> int:
        return self.n_pos + self.n_neg

    @property
    def p(self) -> float:
        """Fraction of positives ``n+ / n``."""
        return self.n_pos / self.n

    @property
    def D(self) -> np.ndarray:
        """``c+ - c-``, the difference of the class means."""
        return self.mean_pos - self.mean_neg

    @property
    def max_norm(self) -> float:
        return max(self.max_norm_pos, self.max_norm_neg)


@dataclass(frozen=True)
class ClassMeans(_PerClass):
    """Counts, sums and largest row norms per class: the cheap first pass.

    Attributes
    ----------
    n_pos, n_neg : int
        Rows per class.
    sum_pos, sum_neg : ndarray of shape (r,), float64
        Sum of the rows of each class.
    max_norm_pos, max_norm_neg : float
        Largest Euclidean row norm in each class (0 for an empty class).
    sum_sq_norm : float
        Sum of the squared row norms over both classes (step sizes scale with its mean).
    """

    n_pos: int
    n_neg: int
    sum_pos: np.ndarray
    sum_neg: np.ndarray
    max_norm_pos: float
    max_norm_neg: float
    sum_sq_norm: float = 0.0

    @property
    def mean_sq_norm(self) -> float:
        """Mean squared row norm ``(1/n) sum ||x_i||^2``."""
        return self.sum_sq_norm / max(self.n, 1)

    @property
    def mean_within_sq_norm(self) -> float:
        """Mean squared distance of a row to its class mean, ``(1/n) sum ||x_i - c_{y_i}||^2``."""
        between = (self.n_pos * float(self.mean_pos @ self.mean_pos)
                   + self.n_neg * float(self.mean_neg @ self.mean_neg)) / max(self.n, 1)
        return max(0.0, self.mean_sq_norm - between)

    @property
    def max_within_sq_norm(self) -> float:
        """A bound on the largest squared distance of a row to its class mean,
        ``max over classes of (max ||x|| + ||c||)^2`` (the triangle inequality)."""
        return max((self.max_norm_pos + float(np.linalg.norm(self.mean_pos))) ** 2,
                   (self.max_norm_neg + float(np.linalg.norm(self.mean_neg))) ** 2)

    @property
    def class_weight(self) -> float:
        """``max(n/n+, n/n-)``: the weight of a row of the smaller class in a mean over rows."""
        return self.n / max(1, min(self.n_pos, self.n_neg))

    @property
    def mean_pos(self) -> np.ndarray:
        return self.sum_pos / max(self.n_pos, 1)

    @property
    def mean_neg(self) -> np.ndarray:
        return self.sum_neg / max(self.n_neg, 1)

    def combine(self, other: ClassMeans) -> ClassMeans:
        """Statistics of the union of two disjoint row sets."""
        return ClassMeans(
            self.n_pos + other.n_pos, self.n_neg + other.n_neg,
            self.sum_pos + other.sum_pos, self.sum_neg + other.sum_neg,
            max(self.max_norm_pos, other.max_norm_pos),
            max(self.max_norm_neg, other.max_norm_neg),
            self.sum_sq_norm + other.sum_sq_norm,
        )


@dataclass(frozen=True)
class ClassStats(_PerClass):
    """First and second moments per class: everything LS(w) depends on.

    Stored as counts, means and *centred* scatter matrices ``M2 = sum (x - c)(x - c)^T``
    (combined exactly by the parallel formula of Chan, Golub & LeVeque, which avoids the
    cancellation of ``sum x x^T - n c c^T``); the raw sums and scatters are properties.

    Attributes
    ----------
    n_pos, n_neg : int
    mean_pos, mean_neg : ndarray (r,), float64
    m2_pos, m2_neg : ndarray (r, r), float64
        Centred scatter matrices.
    max_norm_pos, max_norm_neg : float
        Largest row norm per class.
    """

    n_pos: int
    n_neg: int
    mean_pos: np.ndarray
    mean_neg: np.ndarray
    m2_pos: np.ndarray
    m2_neg: np.ndarray
    max_norm_pos: float = 0.0
    max_norm_neg: float = 0.0

    @property
    def n_features(self) -> int:
        return int(self.mean_pos.shape[0])

    @property
    def sum_pos(self) -> np.ndarray:
        return self.n_pos * self.mean_pos

    @property
    def sum_neg(self) -> np.ndarray:
        return self.n_neg * self.mean_neg

    @property
    def scatter_pos(self) -> np.ndarray:
        """``sum_{i in P} x_i x_i^T``."""
        return self.m2_pos + self.n_pos * np.outer(self.mean_pos, self.mean_pos)

    @property
    def scatter_neg(self) -> np.ndarray:
        return self.m2_neg + self.n_neg * np.outer(self.mean_neg, self.mean_neg)

    @property
    def cov_pos(self) -> np.ndarray:
        """``S+ = (1/n+) sum_{i in P} (x_i - c+)(x_i - c+)^T``."""
        return self.m2_pos / max(self.n_pos, 1)

    @property
    def cov_neg(self) -> np.ndarray:
        return self.m2_neg / max(self.n_neg, 1)

    def means(self) -> ClassMeans:
        """The first-pass statistics contained in these."""
        sq = (np.trace(self.m2_pos) + self.n_pos * float(self.mean_pos @ self.mean_pos)
              + np.trace(self.m2_neg) + self.n_neg * float(self.mean_neg @ self.mean_neg))
        return ClassMeans(self.n_pos, self.n_neg, self.sum_pos, self.sum_neg,
                          self.max_norm_pos, self.max_norm_neg, float(sq))

    def combine(self, other: ClassStats) -> ClassStats:
        """Statistics of the union of two disjoint row sets (exact, Chan et al.)."""
        n_p, m_p, M_p = _merge_moments(self.n_pos, self.mean_pos, self.m2_pos,
                                       other.n_pos, other.mean_pos, other.m2_pos)
        n_n, m_n, M_n = _merge_moments(self.n_neg, self.mean_neg, self.m2_neg,
                                       other.n_neg, other.mean_neg, other.m2_neg)
        return ClassStats(n_p, n_n, m_p, m_n, M_p, M_n,
                          max(self.max_norm_pos, other.max_norm_pos),
                          max(self.max_norm_neg, other.max_norm_neg))


def _merge_moments(na, ma, Ma, nb, mb, Mb):
    n = na + nb
    if na == 0:
        return nb, mb, Mb
    if nb == 0:
        return na, ma, Ma
    delta = mb - ma
    mean = ma + delta * (nb / n)
    M2 = Ma + Mb
    M2 += (na * nb / n) * np.outer(delta, delta)
    return n, mean, M2


# ---------------------------------------------------------------------------------------------
# per-chunk work


def _split(Xb, yb):
    Xb = np.asarray(Xb)
    if Xb.dtype not in (np.float32, np.float64):
        Xb = Xb.astype(np.float64)
    yb = np.asarray(yb)
    return Xb, yb > 0


def _max_norm(Xc: np.ndarray) -> float:
    if Xc.shape[0] == 0:
        return 0.0
    return float(np.sqrt(np.max(np.einsum("ij,ij->i", Xc, Xc, dtype=np.float64))))


def _chunk_means(Xb, yb) -> ClassMeans:
    if is_sparse(Xb):
        return _sparse_chunk_means(Xb, yb)
    Xb, pos = _split(Xb, yb)
    sq = np.einsum("ij,ij->i", Xb, Xb, dtype=np.float64)
    Xp, Xn = Xb[pos], Xb[~pos]
    return ClassMeans(int(Xp.shape[0]), int(Xn.shape[0]),
                      Xp.sum(axis=0, dtype=np.float64), Xn.sum(axis=0, dtype=np.float64),
                      float(np.sqrt(sq[pos].max())) if pos.any() else 0.0,
                      float(np.sqrt(sq[~pos].max())) if (~pos).any() else 0.0,
                      float(sq.sum()))


def _sparse_chunk_means(Xb, yb) -> ClassMeans:
    """:func:`_chunk_means` of a CSR block: sums over the non-zeros (dense (d,) sums)."""
    pos = np.asarray(yb) > 0
    sq = row_squared_norms(Xb)  # float64 sums (scipy's own add float32 values in float32)
    sums = [column_sums(Xb, rows) for rows in (pos, ~pos)]
    return ClassMeans(int(pos.sum()), int((~pos).sum()), sums[0], sums[1],
                      float(np.sqrt(sq[pos].max())) if pos.any() else 0.0,
                      float(np.sqrt(sq[~pos].max())) if (~pos).any() else 0.0,
                      float(sq.sum()))


def _centred_scatter(Xc: np.ndarray, precision: str):
    """Mean (float64) and centred scatter (float64) of one class's rows of a chunk."""
    r = Xc.shape[1]
    n = Xc.shape[0]
    if n == 0:
        return np.zeros(r), np.zeros((r, r))
    mean = Xc.mean(axis=0, dtype=np.float64)
    if precision == "float64" or Xc.dtype == np.float64:
        Z = Xc.astype(np.float64)
        Z -= mean
        return mean, Z.T @ Z  # numpy calls BLAS syrk for Z.T @ Z
    # "mixed": float32 GEMM on the block centred at its float32-rounded mean, then the exact
    # correction for the rounding of that centre, in float64.
    Z = Xc - mean.astype(np.float32)
    G = (Z.T @ Z).astype(np.float64)
    d = Z.mean(axis=0, dtype=np.float64)
    G -= n * np.outer(d, d)
    return mean, G


def _chunk_stats(Xb, yb, precision: str) -> ClassStats:
    if is_sparse(Xb):  # float64 from the non-zeros, whatever the precision
        return ClassStats(*class_scatters(Xb, np.asarray(yb) > 0))
    Xb, pos = _split(Xb, yb)
    Xp, Xn = Xb[pos], Xb[~pos]
    mp, Mp = _centred_scatter(Xp, precision)
    mn, Mn = _centred_scatter(Xn, precision)
    return ClassStats(int(Xp.shape[0]), int(Xn.shape[0]), mp, mn, Mp, Mn,
                      _max_norm(Xp), _max_norm(Xn))


def _combine_all(parts: Sequence):
    out = parts[0]
    for p in parts[1:]:
        out = out.combine(p)
    return out


def tree_reduce(X: da.Array, y: da.Array, chunk_fn: Callable, *, name: str,
                split_every: int = SPLIT_EVERY) -> Delayed:
    """One graph: ``chunk_fn(X_block, y_block)`` per chunk, then a tree of ``.combine``.

    The layer (and its task keys) is called ``name`` + a token, e.g. ``daskauc-lsauc-stats-...``.
    """
    if len(X.chunks[1]) != 1:
        raise ValueError("X must be chunked along rows only")
    if X.chunks[0] != y.chunks[0]:
        raise ValueError("X and y must have the same row chunks")
    token = tokenize(X.name, y.name, name, chunk_fn, split_every)
    layer_name = f"{name}-{token}"
    layer: dict = {}
    keys = []
    for i in range(X.numblocks[0]):
        key = (layer_name, 0, i)
        layer[key] = (chunk_fn, (X.name, i, 0), (y.name, i))
        keys.append(key)
    root = tree_sum(layer, layer_name, keys, combine=_combine_all, fan_in=split_every,
                    start_level=1)
    graph = HighLevelGraph.from_collections(layer_name, layer, dependencies=[X, y])
    return Delayed(root, graph, layer=layer_name)


def _compute_small(obj: Delayed, n_chunks: int):
    """Compute one reduction; on the threaded scheduler limit BLAS to one thread per task."""
    from .._config import blas_limit

    distributed = False
    mod = sys.modules.get("distributed")  # no client can exist unless distributed is loaded
    if mod is not None:
        try:
            mod.default_client()
            distributed = True
        except ValueError:
            pass
    if distributed or n_chunks < 2:
        (out,) = compute(obj)
        return out
    with blas_limit(1):
        (out,) = compute(obj)
    return out


def _as_xy(X, y):
    """Validate (check_X_y) unless X, y already come out of daskauc's validation or stores.

    Taken as validated: a float dask X whose graph daskauc built (name ``daskauc-...``: the
    lazy finite check of :func:`as_row_chunked`, or a store) with int8 dask labels on the same
    row chunks; the kernels then read ``y > 0`` as positive and anything else as negative.
    """
    if isinstance(X, da.Array) and isinstance(y, da.Array) and y.dtype == np.int8 \
            and str(X.name).startswith("daskauc-") and X.dtype in (np.float32, np.float64) \
            and X.chunks[0] == y.chunks[0] and len(X.chunks[1]) == 1:
        return X, y
    Xd, yd, _ = check_X_y(X, y)
    return Xd, yd


def _check_counts(n_pos: int, n_neg: int) -> None:
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            f"the data has {n_pos} positive and {n_neg} negative rows; the least-squares AUC "
            "objective needs both classes"
        )


# ---------------------------------------------------------------------------------------------
# public passes


def class_means(X, y) -> ClassMeans:
    """Counts, per-class sums and largest row norms in one distributed pass.

    Parameters
    ----------
    X : array-like or dask array of shape (n, r), or a dataset store path
    y : labels (any two-valued convention, mapped to {-1, +1})

    Returns
    -------
    ClassMeans
        With ``mean_pos``, ``mean_neg``, ``D``, ``p`` as properties. Sums are float64 for
        float32 data too.

    Notes
    -----
    The first pass of TwoPassAUC (Luan & Gao 2018), SPAM (Natole et al. 2018) and SPDAM
    (Natole et al. 2019). Graph layer ``daskauc-lsauc-means``.
    """
    Xd, yd = _as_xy(X, y)
    out = _compute_small(tree_reduce(Xd, yd, _chunk_means, name="daskauc-lsauc-means"),
                         Xd.numblocks[0])
    _check_counts(out.n_pos, out.n_neg)
    return out


@checks({"precision": Options(*PRECISIONS)})
def class_statistics(X, y, *, precision: str = "auto") -> ClassStats:
    """Per-class counts, means and scatter matrices in one distributed pass.

    Parameters
    ----------
    X : array-like or dask array of shape (n, r), or a dataset store path
    y : labels (any two-valued convention, mapped to {-1, +1})
    precision : {"auto", "float64", "mixed"}
        How a chunk's ``r x r`` scatter is formed. ``"float64"``: the chunk's class rows are
        cast to float64, centred at their chunk mean and multiplied in float64 (BLAS syrk).
        ``"mixed"`` (float32 data only): centred in float32 and multiplied by float32 syrk,
        then converted and corrected in float64. ``"auto"`` is ``"float64"``. Measured by
        ``benchmarks/least_squares.py --quick`` (40,000 x 400 float32 in memory, 2
        cores): mixed 0.14 s, float64 0.21 s, against 0.18 s for a plain float32 ``X^T X``;
        mixed's relative covariance error 1.3e-7 and relative error of ``w*`` 5e-8 at
        ``lam = 1e-4``. The pass runs once, so float64 (whose accuracy does not depend on
        the conditioning of the data) is the default; ``"mixed"`` trades ~1e-7 relative
        accuracy for ~1.5x speed on in-memory embeddings.

    Returns
    -------
    ClassStats

    Notes
    -----
    Sparse chunks contribute ``X_c^T X_c - n_c m_c m_c^T`` per class from their non-zeros
    (float64). Over ``EXACT_MAX_BYTES`` per r x r matrix: ``ValueError`` before any work.

    Every chunk contributes ``(n_c, mean_c, M2_c)`` per class in float64, and chunks are
    combined in a tree (``SPLIT_EVERY`` per task) by the exact parallel update
    ``M2 = M2_a + M2_b + (n_a n_b / n) (m_b - m_a)(m_b - m_a)^T``. Graph layer
    ``daskauc-lsauc-stats``; nothing larger than ``r x r`` reaches the client.

    References
    ----------
    Chan, Golub & LeVeque, "Updating formulae and a pairwise algorithm for computing sample
    variances", 1979.
    """
    Xd, yd = _as_xy(X, y)
    check_exact_size(int(Xd.shape[1]))
    prec = "float64" if precision == "auto" else precision
    out = _compute_small(
        tree_reduce(Xd, yd, partial(_chunk_stats, precision=prec), name="daskauc-lsauc-stats"),
        Xd.numblocks[0],
    )
    _check_counts(out.n_pos, out.n_neg)
    return out


# ---------------------------------------------------------------------------------------------
# the objective and its minimizer


def ls_objective(w: np.ndarray, stats: ClassStats, lam: float) -> float:
    """LS(w) from the statistics in O(r^2).

    ``1 - 2 w.D + (w.D)^2 + w^T (S+ + S-) w + (lam/2) ||w||^2``, equal to the mean over all
    positive-negative pairs of ``(1 - w.(x_i - x_j))^2`` plus the penalty.
    """
    w = np.asarray(w, dtype=np.float64)
    wD = float(w @ stats.D)
    quad = float(w @ (stats.cov_pos @ w) + w @ (stats.cov_neg @ w))
    return 1.0 - 2.0 * wD + wD * wD + quad + 0.5 * lam * float(w @ w)


def ls_gradient(w: np.ndarray, stats: ClassStats, lam: float) -> np.ndarray:
    """Gradient of LS: ``2 (S+ + S-) w + 2 (w.D - 1) D + lam w``."""
    w = np.asarray(w, dtype=np.float64)
    D = stats.D
    return 2.0 * (stats.cov_pos @ w + stats.cov_neg @ w) + 2.0 * (w @ D - 1.0) * D + lam * w


def pair_second_moment(stats: ClassStats) -> np.ndarray:
    """``E[(x_i - x_j)(x_i - x_j)^T]`` over the (positive, negative) pairs: ``S+ + S- + D
    D^T``, the class covariances and the outer product of the difference of the class means
    (LS's Hessian over 2, and the Newton solver's preconditioner,
    :class:`daskauc.solvers.pairwise.LinearBasis`)."""
    D = stats.D
    return stats.cov_pos + stats.cov_neg + np.outer(D, D)


def ls_system(stats: ClassStats, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """The normal equations ``A w = D`` of LS: ``A = S+ + S- + D D^T + (lam/2) I``."""
    A = pair_second_moment(stats)
    A[np.diag_indices_from(A)] += 0.5 * lam
    return A, stats.D


@checks({"lam": NON_NEGATIVE})
def lsauc_from_stats(stats: ClassStats, lam: float) -> np.ndarray:
    """The exact minimizer ``w* = (S+ + S- + D D^T + (lam/2) I)^{-1} D`` (Cholesky solve)."""
    A, D = ls_system(stats, lam)
    try:
        return scipy.linalg.solve(A, D, assume_a="pos", check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise np.linalg.LinAlgError(
            f"S+ + S- + D D^T + (lam/2) I is not positive definite (lam={lam}): the features "
            "are linearly dependent; use lam > 0"
        ) from exc


@solver(kind="least-squares", states=(ClassStats,), tags=("linear", "least-squares loss"),
        sparse=True, params={"lam": NON_NEGATIVE, "solver": Options(*LS_SOLVERS),
                             "cg_tol": NON_NEGATIVE, "max_cg": Interval(int, 0),
                             "persist": AUTO_OR_BOOL})
def lsauc(X, y, *, lam: float, precision: str = "auto", stats: ClassStats | None = None,
          solver: str = "auto", cg_tol: float = 1e-6, max_cg: int = 1000,
          persist: str | bool = "auto") -> SolverResult:
    """Least-squares AUC: one pass and one r x r solve, or conjugate gradient (wide rows).

    Parameters
    ----------
    X : array-like or dask array (n, r), a dataset store path, or sparse rows (scipy sparse,
        a dask array of CSR blocks)
    y : labels
    lam : float >= 0
        L2 penalty of LS (see Notes).
    precision : see :func:`class_statistics` (the exact route)
    stats : ClassStats, optional
        Reuse statistics already computed (no pass over the data; the exact route).
    solver : {"auto", "exact", "cg"}, default "auto"
        "exact": the class statistics (r x r scatter matrices) and a Cholesky solve, refused
        before any work above ``EXACT_MAX_BYTES`` per matrix. "cg": Jacobi-preconditioned
        conjugate gradient on the implicit operator, one pass over the rows per iteration,
        memory O(r) (:mod:`daskauc.solvers._lsauc_cg`). "auto": :func:`ls_route`.
    cg_tol, max_cg, persist
        "cg": stop when ``||A w - D|| <= cg_tol ||D||`` (``w``'s relative error is at most
        ``cond(A) cg_tol``) or after ``max_cg`` passes; keep the rows in memory between passes
        (:func:`daskauc.engine.placement.place_rows`).

    Returns
    -------
    SolverResult
        ``coef`` the minimizer. Exact: ``history`` one record (objective, relative residual,
        seconds of the pass and of the solve), ``state`` the statistics (more data can be added
        exactly). CG: ``n_iter`` its iterations, ``history`` one record per iteration,
        ``state`` a dict (counts, ``D``, passes) that no batch can be merged into.

    Notes
    -----
    Minimizes

        LS(w) = (1/(n+ n-)) sum_{i in P, j in N} (1 - w.(x_i - x_j))^2 + (lam/2) ||w||^2,

    a quadratic with minimizer ``w* = A^{-1} D``, ``A = S+ + S- + D D^T + (lam/2) I``: the
    batch "B-LS-SVM" baseline of the SPAM / SPDAM tables, solved exactly. On sparse rows the
    exact route's scatter is ``X_c^T X_c - n_c c c^T`` per class and CG applies
    ``S+- v = (1/n+-) X+-^T (X+- v) - c+- (c+-.v)``: both cost the non-zeros (plus r^2 per
    chunk for the exact one), never n x r.

    References
    ----------
    Natole, Ying & Lyu, "Stochastic proximal algorithms for AUC maximization", ICML 2018.
    Gao, Jin, Zhu & Zhou, "One-pass AUC optimization", ICML 2013.
    """
    t0 = time.perf_counter()
    route = "exact" if stats is not None else None
    if stats is None:
        X, y = _as_xy(X, y)
        route = ls_route(X, solver)
    if route == "cg":
        y_np = np.asarray(compute(y)[0])
        _check_counts(int(np.count_nonzero(y_np > 0)), int(np.count_nonzero(y_np <= 0)))
        out = ls_conjugate_gradient(X, y_np, lam=float(lam), tol=float(cg_tol),
                                    max_iter=int(max_cg), persist=persist)
        return SolverResult(**out)
    if stats is None:
        stats = class_statistics(X, y, precision=precision)
    t1 = time.perf_counter()
    w = lsauc_from_stats(stats, lam)
    t2 = time.perf_counter()
    A, D = ls_system(stats, lam)
    resid = float(np.linalg.norm(A @ w - D) / max(np.linalg.norm(D), 1e-300))
    history = [{"objective": ls_objective(w, stats, lam), "relative_residual": resid,
                "seconds_pass": t1 - t0, "seconds_solve": t2 - t1}]
    return SolverResult(coef=w, n_iter=1, converged=True, history=history, state=stats)


__all__ = [
    "ClassMeans", "ClassStats", "class_means", "class_statistics", "ls_objective",
    "ls_gradient", "ls_system", "lsauc", "lsauc_from_stats", "tree_reduce",
    "PRECISIONS", "LS_SOLVERS", "check_exact_size", "ls_route", "refuse_merge",
]
