"""The PRSVM+ operator of the pairwise squared hinge: sorted-score coefficients, and the
gradient and Hessian-product graphs over row chunks that the Newton loop
(:mod:`daskauc.solvers.newton`) steps with.

Objective and update: docs/algorithms.md, "Pairwise squared hinge: PRSVM+ truncated Newton".

Given scores ``o`` and the row indices of the positives and negatives, one sort per class and
O(n) passes give, for every positive ``i``, the active negatives
``A_i = {j in N : o_j > o_i - 1}`` (``alpha_i = |A_i|``, ``beta_i = sum_{A_i} o_j``), for every
negative ``j`` the active positives ``B_j = {i in P : o_i < o_j + 1}`` (``gamma_j``,
``delta_j``), the loss, the gradient coefficients ``g`` and the generalized-Hessian operator
``q -> L q``. No pair is ever formed.

A pair with ``1 - o_i + o_j == 0`` exactly is inactive (zero loss, zero gradient, no Hessian
term): the active set is ``1 - o_i + o_j > 0`` strictly. Both directions of the test compare
``o_j`` with the same rounded number ``o_i - 1``, so ``j in A_i`` exactly when ``i in B_j`` and
``L`` is exactly symmetric.

:class:`PairwiseOperator` builds one graph per gradient (scores ``o = X w`` per chunk, one task
gathering and sorting them into :class:`PairwiseCoefficients`, ``X^T g`` per chunk, a tree sum)
and one per Hessian product (``q = X p`` per chunk, ``L q`` in one task, ``X^T (L q)`` per chunk,
a tree sum), in a basis: the rows themselves (:class:`LinearBasis`) or a kernel basis
(:mod:`daskauc.solvers.kernel_newton`). Where its row chunks live, persisted, cached or
streamed, is :class:`daskauc.engine.placement.RowChunks`.

Sparse row chunks (CSR blocks, :mod:`daskauc._sparse`) need nothing but ``X v`` and
``X^T u`` (and the squared values for the Jacobi diagonal): each product is O(nnz) of the
chunk plus one r-vector (:mod:`daskauc.solvers._sparse_products`), in float64.

Products with float32 chunks accumulate in float64 in numba kernels (float64 chunks use BLAS):
measured on one core, 200,000 x 200 float32, the kernels run at 8-11 GB/s against 13-14 GB/s
for BLAS ``sgemv`` but give 1e-14 instead of 1e-6 (``X^T u``) relative error, which would
otherwise limit how small a relative gradient norm can be reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import dask
import dask.array as da
import numpy as np
import scipy.linalg
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from .. import _compute
from .._compute import compute, distributed_client, share
from .._labels import check_X_y
from .._params import POSITIVE, checks
from .._sparse import is_sparse
from ..engine.placement import RowChunks
from ._graphs import fresh_token, threads_limit, tree_sum
from ._pairwise_kernels import (
    _count_active,
    _laplacian_matvec,
    _matvec_f64,
    _pair_coefficients,
    _rmatvec_f64,
    _rmatvec_sq_f64,
)
from ._sparse_products import squared


def class_indices(y) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(positives, negatives)`` of a {-1,+1} label vector, as int64 arrays."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D; got shape {y.shape}")
    pos = np.flatnonzero(y > 0).astype(np.int64)
    neg = np.flatnonzero(y <= 0).astype(np.int64)
    if pos.size == 0 or neg.size == 0:
        raise ValueError(
            "y must contain both positive (+1) and negative (-1) rows: the pairwise loss has "
            f"no pairs (got {pos.size} positives and {neg.size} negatives)"
        )
    return pos, neg


@dataclass(frozen=True)
class PairwiseCoefficients:
    """Everything the pairwise squared hinge needs from one sort of the scores.

    Attributes
    ----------
    o : (n,) float64 scores.
    pos_idx, neg_idx : int64 row indices of the positives / negatives in ascending score order.
    k : (n+,) int64; the active negatives of ``pos_idx[a]`` are ``neg_idx[k[a]:]``.
    m : (n-,) int64; the active positives of ``neg_idx[b]`` are ``pos_idx[:m[b]]``.
    alpha, beta : (n+,) float64, in the order of ``pos_idx``.
    gamma, delta : (n-,) float64, in the order of ``neg_idx``.
    g : (n,) float64 gradient coefficients in row order:
        ``g_i = -[(1 - o_i) alpha_i + beta_i]`` (P), ``g_j = (1 + o_j) gamma_j - delta_j`` (N).
    loss : float, ``sum_{i in P} sum_{j in A_i} (1 - o_i + o_j)^2``.
    """

    o: np.ndarray
    pos_idx: np.ndarray
    neg_idx: np.ndarray
    k: np.ndarray
    m: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    gamma: np.ndarray
    delta: np.ndarray
    g: np.ndarray
    loss: float

    @property
    def n_active_pairs(self) -> int:
        """Number of pairs with a positive margin ``1 - o_i + o_j``."""
        return int(self.k.shape[0] * self.neg_idx.shape[0] - self.k.sum())

    @cached_property
    def degree(self) -> np.ndarray:
        """(n,) active pairs of each row, in row order: the diagonal of ``L``."""
        d = np.zeros(self.o.shape[0])
        d[self.pos_idx] = self.alpha
        d[self.neg_idx] = self.gamma
        return d

    def laplacian_matvec(self, q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``L q`` for an n-vector ``q`` (O(n)); ``L`` is the Laplacian of the active pairs.

        ``(Lq)_i = alpha_i q_i - sum_{j in A_i} q_j`` for positives and
        ``(Lq)_j = gamma_j q_j - sum_{i in B_j} q_i`` for negatives, so
        ``q^T L q = sum over active pairs (q_i - q_j)^2``.
        """
        q = np.ascontiguousarray(q, dtype=np.float64)
        if q.shape != self.o.shape:
            raise ValueError(f"q must have shape {self.o.shape}; got {q.shape}")
        if out is None:
            out = np.empty_like(q)
        _laplacian_matvec(q, self.pos_idx, self.neg_idx, self.k, self.m, out)
        return out


def _sorted(o: np.ndarray, idx: np.ndarray) -> np.ndarray:
    # a stable sort of ``idx`` by score; numpy's stable sort is a timsort for floats, so an
    # ``idx`` already nearly in order (the previous iteration's order) sorts in about O(n)
    return idx[np.argsort(o[idx], kind="stable")]


def pairwise_coefficients(
    o: np.ndarray, pos: np.ndarray, neg: np.ndarray
) -> PairwiseCoefficients:
    """Sort the scores once and compute every per-row coefficient of the pairwise loss.

    Parameters
    ----------
    o : (n,) array of scores ``X w`` (cast to float64).
    pos, neg : int64 row indices of the positives and negatives (from :func:`class_indices`),
        in any order; passing the ``pos_idx`` / ``neg_idx`` of nearby scores (the previous
        iteration) makes the sort nearly linear.

    Returns
    -------
    PairwiseCoefficients

    Notes
    -----
    Cost: O(n+ log n+ + n- log n-) for the sort, O(n) after it. The loss is evaluated as
    ``sum_j o_j^2 - 2 s sum_j o_j + |A_i| s^2`` with ``s = o_i - 1`` from prefix sums over the
    sorted negatives, which loses about ``eps * max(o)^2 / margin^2`` in relative accuracy.

    References
    ----------
    Chapelle, O. and Keerthi, S. S. (2010). Efficient algorithms for ranking with SVMs.
    Information Retrieval 13(3), 201-215 (PRSVM+).
    """
    o = np.ascontiguousarray(o, dtype=np.float64)
    if o.ndim != 1:
        raise ValueError(f"scores must be 1-D; got shape {o.shape}")
    if not np.isfinite(o).all():
        raise ValueError(
            "scores contain NaN or infinity; the data or the coefficients are not finite"
        )
    pos = np.asarray(pos, dtype=np.int64)
    neg = np.asarray(neg, dtype=np.int64)
    if pos.size == 0 or neg.size == 0:
        raise ValueError("need at least one positive and one negative row")
    pos_idx = _sorted(o, pos)
    neg_idx = _sorted(o, neg)
    s_pos = o[pos_idx] - 1.0
    o_neg = o[neg_idx]
    npos, nneg = pos_idx.size, neg_idx.size
    k = np.empty(npos, np.int64)
    m = np.empty(nneg, np.int64)
    _count_active(s_pos, o_neg, k, m)
    alpha = np.empty(npos)
    beta = np.empty(npos)
    gamma = np.empty(nneg)
    delta = np.empty(nneg)
    g = np.empty(o.shape[0])
    if npos + nneg != o.shape[0]:
        g[:] = 0.0  # rows in neither class (not produced by class_indices) get no gradient
    loss = _pair_coefficients(o, pos_idx, neg_idx, s_pos, k, m, alpha, beta, gamma, delta, g)
    return PairwiseCoefficients(o=o, pos_idx=pos_idx, neg_idx=neg_idx, k=k, m=m, alpha=alpha,
                                beta=beta, gamma=gamma, delta=delta, g=g, loss=float(loss))


# --------------------------------------------------------------------------- chunk functions


def block_matvec(block: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``block @ v`` in float64 (BLAS for float64 blocks, a float64-accumulating kernel else;
    a CSR block multiplies its non-zeros)."""
    if is_sparse(block):
        return block @ v
    Xb = np.ascontiguousarray(block)
    if Xb.dtype == np.float64:
        return Xb @ v
    out = np.empty(Xb.shape[0])
    _matvec_f64(Xb, v, out)
    return out


def block_rmatvec(block: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``block.T @ u`` in float64 (a CSR block: its non-zeros, then one r-vector)."""
    u = np.ascontiguousarray(u, dtype=np.float64)
    if is_sparse(block):
        return block.T @ u
    Xb = np.ascontiguousarray(block)
    if Xb.dtype == np.float64:
        return Xb.T @ u
    out = np.zeros(Xb.shape[1])
    _rmatvec_f64(Xb, u, out)
    return out


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n)


def _rows(v: np.ndarray, start: int, stop: int) -> np.ndarray:
    return v[start:stop]


def _gather_coefficients(blocks: list, pos: np.ndarray, neg: np.ndarray) -> PairwiseCoefficients:
    return pairwise_coefficients(np.concatenate(blocks), pos, neg)


def _grad_block(block, coef: PairwiseCoefficients, start: int, stop: int, g0,
                precondition: bool) -> np.ndarray:
    """Rows: ``X^T g``, then ``(X*X)^T degree`` (preconditioner) and ``X^T g0`` when asked."""
    u = coef.g[start:stop]
    if is_sparse(block):
        rows = [block_rmatvec(block, u)]
        if precondition:
            rows.append(squared(block).T @ coef.degree[start:stop])
        if g0 is not None:
            rows.append(block_rmatvec(block, g0))
        return np.vstack(rows)
    Xb = np.ascontiguousarray(block)
    if precondition:
        out = np.zeros((2, Xb.shape[1]))
        _rmatvec_sq_f64(Xb, u, coef.degree[start:stop], out[0], out[1])
    else:
        out = block_rmatvec(Xb, u)[None, :]
    if g0 is not None:
        out = np.vstack([out, block_rmatvec(Xb, g0)])
    return out


def _hvp_laplacian(blocks: list, coef: PairwiseCoefficients):
    q = np.concatenate(blocks)
    return q, coef.laplacian_matvec(q)


def _hvp_block(rmatvec, block, const: tuple, packed, start: int, stop: int) -> np.ndarray:
    return rmatvec(block, *const, packed[1][start:stop])


def _concatenate(parts: list) -> np.ndarray:
    return np.concatenate(parts)


def _hvp_result(packed, total):
    return total, packed[0]


# ------------------------------------------------------------------------------- the bases


class LinearBasis:
    """Scores ``X w`` of the rows themselves; regularizer ``||w||^2``; preconditioned by the
    pairs' second moment when it is given (``pair_moments``), else by Jacobi.

    A basis tells :class:`PairwiseOperator` how one row chunk turns coefficients into scores
    (``matvec``; ``row_matvec`` for other rows, which may differ from the operator's chunks),
    scores' coefficients into the gradient (``gradient``) and into Hessian products
    (``rmatvec``), and tells the Newton loop the regularizer ``R`` of
    ``F = 1/2 w^T R w + C loss`` and the preconditioner. The functions are module-level (they
    travel in task graphs); ``const`` are the extra arguments every task gets after its chunk.

    ``pair_moments`` (:class:`PairMoments`) holds ``E[(x_i - x_j)(x_i - x_j)^T]`` over the
    (positive, negative) pairs, of these rows or of a sample of them
    (:func:`daskauc.solvers.stats.pair_second_moment`), and ``n_pairs``
    the pairs of these rows.
    """

    def __init__(self, precondition: bool = True, pair_moments: np.ndarray | None = None,
                 n_pairs: float = 0.0):
        self.precondition = precondition
        self.pair_moments = pair_moments if precondition else None
        self.n_pairs = float(n_pairs)
        # the Jacobi diagonal is gathered in the gradient pass only when it is the preconditioner
        self.const: tuple = (precondition and self.pair_moments is None,)

    @staticmethod
    def matvec(block, precondition, v):
        return block_matvec(block, v)

    #: scores of other rows (validation rows): the same product here
    row_matvec = matvec

    @staticmethod
    def gradient(block, precondition, coef, start, stop, g0):
        return _grad_block(block, coef, start, stop, g0, precondition)

    @staticmethod
    def rmatvec(block, precondition, u):
        return block_rmatvec(block, u)

    def regularize(self, v: np.ndarray) -> np.ndarray:
        return v

    def norm(self, v: np.ndarray) -> float:
        """The norm of gradients and CG residuals: Euclidean (``R = I``)."""
        return float(np.linalg.norm(v))

    def preconditioner(self, w, coef, extra_rows, C: float):
        """``M^{-1}`` for CG on ``H = I + 2C X^T L X`` (``L`` the active pairs' Laplacian).

        With ``pair_moments`` ``E``: ``M = I + 2C rho n_pairs E``, ``rho`` the share of pairs
        active at ``w``. ``X^T L X`` is the sum of ``(x_i - x_j)(x_i - x_j)^T`` over the active
        pairs, and ``n_pairs E`` that sum over all of them: ``M`` is the Hessian were the
        active pairs a uniform share of all (exactly so at ``w = 0``). ``E``'s
        eigendecomposition, made once (:class:`PairMoments`), applies ``M^{-1}`` for any C
        and rho with two r x r products: no pass over the rows. On ijcnn1's 1,600-column
        Nystroem embedding (13,334 rows) it took the C path 2^-15 .. 2^-5 from 2,077 Hessian
        products to 529 (37 s to 8 s), and the fit on 49,990 rows from 9-41 CG steps per
        Newton step to 5-19.

        Else Jacobi: the diagonal of ``I + 2C X^T D X`` (D the active pairs per row), gathered
        in the gradient pass; the Nystroem columns have scales spread like the kernel's
        eigenvalues, which Jacobi undoes (covtype, r = 1593: 13-21 CG steps per Newton step
        instead of 200+). Without ``precondition``: plain CG."""
        if not self.precondition:
            return np.copy
        if self.pair_moments is not None:
            rho = coef.n_active_pairs / self.n_pairs
            return self.pair_moments.inverse(2.0 * C * rho * self.n_pairs)
        inv_m = 1.0 / (1.0 + 2.0 * C * extra_rows[0])
        return lambda r: inv_m * r


class PairMoments:
    """The pairs' second moment ``E`` (r x r) by its eigendecomposition ``V diag(ev) V^T``,
    made once: ``(I + c E)^{-1} = V diag(1 / (1 + c ev)) V^T`` for every ``c`` (every Newton
    step of every C of a path) with two r x r products per application."""

    def __init__(self, moments: np.ndarray):
        ev, V = scipy.linalg.eigh(np.asarray(moments, dtype=np.float64), check_finite=False)
        self.ev = np.maximum(ev, 0.0)  # a positive semidefinite matrix's rounding
        self.V = V

    @property
    def shape(self) -> tuple[int, int]:
        return self.V.shape

    def inverse(self, c: float):
        """``r -> (I + c E)^{-1} r``."""
        V, scale = self.V, 1.0 / (1.0 + float(c) * self.ev)
        return lambda r: V @ (scale * (V.T @ r))


class PairwiseOperator:
    """Builds the per-iteration graphs over a row-chunked ``X``; owns nothing but references.

    ``basis`` (:class:`LinearBasis` or a kernel basis) supplies the chunk products."""

    def __init__(self, X: da.Array, y: np.ndarray, C: float, precondition: bool = True,
                 basis=None, cached: da.Array | None = None,
                 pair_moments: np.ndarray | None = None):
        self.X = X
        self.C = C
        self.y = y
        self.rows = RowChunks(X, cached, distributed_client())
        self.bounds = self.rows.bounds
        self.nchunks = self.rows.nchunks
        self.pos, self.neg = class_indices(y)
        npos, nneg = self.pos.size, self.neg.size
        self.basis = basis if basis is not None else \
            LinearBasis(precondition, pair_moments, float(npos) * float(nneg))
        # gradient coefficients at w = 0 (every pair active with margin 1): the reference
        # gradient norm is ||grad F(0)||, independent of the starting point
        self.g0 = np.where(y > 0, -float(nneg), float(npos))
        self._g0_ref = None

    def _chunk(self, c: int):
        return self.rows.arg(c)

    def scores_and_gradient(self, w: np.ndarray, hint, with_g0: bool):
        """One compute: o = X w, the sort, X^T g, the basis' extra rows (the Jacobi diagonal
        ``(X*X)^T degree`` for the linear basis) and ``X^T g0`` (if ``with_g0``, last row).

        Returns (coef, coef_handle, sums)."""
        basis = self.basis
        tok = fresh_token()
        name_s = f"daskauc-newton-scores-{tok}"
        name_c = f"daskauc-newton-sort-{tok}"
        name_g = f"daskauc-newton-grad-{tok}"
        layer: dict = {}
        zero = not np.any(w)
        w_key = (f"{name_s}-w", 0)
        layer[w_key] = w
        for c in range(self.nchunks):
            size = int(self.bounds[c + 1] - self.bounds[c])
            layer[(name_s, c)] = ((_zeros, size) if zero
                                  else (basis.matvec, self._chunk(c), *basis.const, w_key))
        coef_key = (name_c, 0)
        # the sort order hint and g0 are n-vectors: scattered, not sent inside the graph
        layer[coef_key] = (_gather_coefficients, [(name_s, c) for c in range(self.nchunks)],
                           share(hint[0]), share(hint[1]))
        if with_g0 and self._g0_ref is None:
            self._g0_ref = share(self.g0)
        keys = []
        for c in range(self.nchunks):
            a, b = int(self.bounds[c]), int(self.bounds[c + 1])
            g0 = (_rows, self._g0_ref, a, b) if with_g0 else None
            layer[(name_g, c)] = (basis.gradient, self._chunk(c), *basis.const, coef_key, a, b,
                                  g0)
            keys.append((name_g, c))
        root = tree_sum(layer, f"{name_g}-sum", keys)
        with dask.annotate(**self.rows.annotations([name_s, name_g])):
            graph = HighLevelGraph.from_collections(name_g, layer, dependencies=self.rows.deps)
        coef_d = Delayed(coef_key, graph, layer=name_g)
        sum_d = Delayed(root, graph, layer=name_g)
        coef_p, sum_p = _compute.persist(coef_d, sum_d)
        coef, sums = compute(coef_p, sum_p)
        self.rows.checked_once()
        return coef, coef_p, sums

    def hessian_product(self, coef_handle: Delayed, p: np.ndarray):
        """One compute: q = X p, L q, X^T L q. Returns (X^T L q, q)."""
        basis = self.basis
        tok = fresh_token()
        name_q = f"daskauc-newton-hvp-xs-{tok}"
        name_l = f"daskauc-newton-hvp-lq-{tok}"
        name_h = f"daskauc-newton-hvp-{tok}"
        layer: dict = {}
        p_key = (f"{name_q}-p", 0)
        layer[p_key] = p
        for c in range(self.nchunks):
            layer[(name_q, c)] = (basis.matvec, self._chunk(c), *basis.const, p_key)
        lq_key = (name_l, 0)
        layer[lq_key] = (_hvp_laplacian, [(name_q, c) for c in range(self.nchunks)],
                         coef_handle.key)
        keys = []
        for c in range(self.nchunks):
            a, b = int(self.bounds[c]), int(self.bounds[c + 1])
            layer[(name_h, c)] = (_hvp_block, basis.rmatvec, self._chunk(c), basis.const,
                                  lq_key, a, b)
            keys.append((name_h, c))
        root = tree_sum(layer, f"{name_h}-sum", keys)
        out_key = (f"{name_h}-out", 0)
        layer[out_key] = (_hvp_result, lq_key, root)
        with dask.annotate(**self.rows.annotations([name_q, name_h])):
            graph = HighLevelGraph.from_collections(name_h, layer,
                                                    dependencies=[*self.rows.deps, coef_handle])
        (xtlq, q) = compute(Delayed(out_key, graph, layer=name_h))[0]
        return xtlq, q

    def scores(self, Xv: da.Array, w: np.ndarray) -> np.ndarray:
        """``Xv w`` in this basis for another row-chunked array (validation rows)."""
        tok = fresh_token()
        name = f"daskauc-newton-val-scores-{tok}"
        layer: dict = {(f"{name}-w", 0): w}
        for c in range(Xv.numblocks[0]):
            layer[(name, c)] = (self.basis.row_matvec, (Xv.name, c, 0), *self.basis.const,
                                (f"{name}-w", 0))
        layer[(f"{name}-cat", 0)] = (_concatenate, [(name, c) for c in range(Xv.numblocks[0])])
        graph = HighLevelGraph.from_collections(name, layer, dependencies=[Xv])
        return compute(Delayed((f"{name}-cat", 0), graph, layer=name))[0]


# ------------------------------------------------------------------- objective and products


def _operator_for(X, y, C: float) -> PairwiseOperator:
    Xd, yd, _ = check_X_y(X, y)
    return PairwiseOperator(Xd, np.asarray(compute(yd)[0]), float(C), precondition=False)


def as_vector(v, r: int, name: str) -> np.ndarray:
    """``v`` as a new float64 r-vector for ``X``'s ``r`` columns; a wrong shape or a
    non-finite entry is an error naming ``name``."""
    v = np.array(v, dtype=np.float64, copy=True).ravel()
    if v.shape != (r,):
        raise ValueError(f"{name} must have shape ({r},) to match X's {r} columns; got {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return v


@checks({"C": POSITIVE})
def objective_gradient(X, y, w, *, C: float = 1.0) -> tuple[float, np.ndarray]:
    """``F(w)`` and ``grad F(w) = w + 2C X^T g`` through the solver's own graph (one compute).

    ``F(w) = 1/2 ||w||^2 + C sum_{i in P} sum_{j in N} max(0, 1 - w.x_i + w.x_j)^2``; ``X``
    and ``y`` as for :func:`daskauc.solvers.newton.prsvm_newton`.
    """
    op = _operator_for(X, y, C)
    w = as_vector(w, op.X.shape[1], "w")
    with threads_limit(distributed_client()):
        coef, _, sums = op.scores_and_gradient(w, (op.pos, op.neg), with_g0=False)
    return 0.5 * float(w @ w) + op.C * coef.loss, w + 2.0 * op.C * sums[0]


@checks({"C": POSITIVE})
def hessian_product(X, y, w, v, *, C: float = 1.0) -> np.ndarray:
    """Generalized Hessian at ``w`` times ``v``: ``v + 2C X^T L X v`` (the solver's graphs).

    ``L`` is the Laplacian of the pairs active at ``w`` (``1 - w.x_i + w.x_j > 0``).
    """
    op = _operator_for(X, y, C)
    w = as_vector(w, op.X.shape[1], "w")
    v = as_vector(v, op.X.shape[1], "v")
    with threads_limit(distributed_client()):
        _, handle, _ = op.scores_and_gradient(w, (op.pos, op.neg), with_g0=False)
        xtlq, _ = op.hessian_product(handle, v)
    return v + 2.0 * op.C * xtlq
