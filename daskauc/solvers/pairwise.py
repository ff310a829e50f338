"""Sorted-score coefficients of the pairwise squared hinge (PRSVM+).

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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ._pairwise_kernels import _count_active, _laplacian_matvec, _pair_coefficients


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
