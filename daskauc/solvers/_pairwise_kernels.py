"""Numba kernels of the PRSVM+ solver: sorted-score pair coefficients and mixed-precision products.

All kernels are pure functions over arrays; the Python drivers in :mod:`daskauc.solvers.pairwise`
own sorting, validation and scheduling.

Notation (docs/algorithms.md, "Pairwise squared hinge: PRSVM+ truncated Newton"): positives
``P`` and negatives ``N`` each sorted by score, ``pos_idx`` / ``neg_idx`` their row indices in
ascending score order, ``s = o[pos_idx] - 1`` the positives' shifted scores (computed once,
outside, so that both directions of the pair test compare the very same floating-point
numbers). A pair ``(i, j)`` is active when
``o_j > s_i``, i.e. ``1 - o_i + o_j > 0`` strictly.

* ``k[a]`` = number of negatives with ``o_j <= s_a``: the active negatives of the ``a``-th
  positive are the sorted negatives ``k[a], ..., n- - 1`` (``alpha = n- - k``).
* ``m[b]`` = number of positives with ``s_i < o_j``: the active positives of the ``b``-th
  negative are the sorted positives ``0, ..., m[b] - 1`` (``gamma = m``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _config

_JIT = dict(nogil=True, cache=True, fastmath=_config.FASTMATH)


@njit(**_JIT)
def _count_active(
    s_pos,  # IN  (n+,) float64, ascending: shifted positive scores o_i - 1
    o_neg,  # IN  (n-,) float64, ascending: negative scores
    k,  # OUT (n+,) int64: negatives with o_j <= s_i
    m,  # OUT (n-,) int64: positives with s_i < o_j
):
    """Two merges of the sorted positives and negatives (O(n+ + n-))."""
    npos = s_pos.shape[0]
    nneg = o_neg.shape[0]
    b = 0
    for a in range(npos):
        s = s_pos[a]
        while b < nneg and o_neg[b] <= s:
            b += 1
        k[a] = b
    a = 0
    for b in range(nneg):
        t = o_neg[b]
        while a < npos and s_pos[a] < t:
            a += 1
        m[b] = a


@njit(**_JIT)
def _pair_coefficients(
    o,  # IN  (n,) float64 scores
    pos_idx,  # IN  (n+,) int64, positives in ascending score order
    neg_idx,  # IN  (n-,) int64, negatives in ascending score order
    s_pos,  # IN  (n+,) float64, o[pos_idx] - 1
    k,  # IN  (n+,) int64 from _count_active
    m,  # IN  (n-,) int64 from _count_active
    alpha,  # OUT (n+,) float64 |A_i|
    beta,  # OUT (n+,) float64 sum_{j in A_i} o_j
    gamma,  # OUT (n-,) float64 |B_j|
    delta,  # OUT (n-,) float64 sum_{i in B_j} o_i
    g,  # OUT (n,) float64 gradient coefficients
):
    """Fill the PRSVM+ coefficients and ``g``; return the pairwise squared-hinge loss.

    ``g_i = -sum_{j in A_i} (o_j - s_i)`` for positives and ``g_j = sum_{i in B_j} (o_j - s_i)``
    for negatives, the same margins ``1 - o_i + o_j`` as the loss, so ``F'(w) = w + 2C X^T g``.
    """
    npos = pos_idx.shape[0]
    nneg = neg_idx.shape[0]
    # prefix sums over the sorted negatives of o_j and o_j^2
    c1 = np.zeros(nneg + 1)
    c2 = np.zeros(nneg + 1)
    acc1 = 0.0
    acc2 = 0.0
    for b in range(nneg):
        v = o[neg_idx[b]]
        acc1 += v
        acc2 += v * v
        c1[b + 1] = acc1
        c2[b + 1] = acc2
    loss = 0.0
    for a in range(npos):
        kk = k[a]
        cnt = nneg - kk
        sm = c1[nneg] - c1[kk]
        sq = c2[nneg] - c2[kk]
        s = s_pos[a]
        alpha[a] = cnt
        beta[a] = sm
        if cnt > 0:
            # sum_j (o_j - s)^2 over the active negatives
            loss += sq - 2.0 * s * sm + cnt * s * s
        g[pos_idx[a]] = cnt * s - sm
    # prefix sums over the sorted positives of o_i and of s_i
    p1 = np.zeros(npos + 1)
    ps = np.zeros(npos + 1)
    acc1 = 0.0
    accs = 0.0
    for a in range(npos):
        acc1 += o[pos_idx[a]]
        accs += s_pos[a]
        p1[a + 1] = acc1
        ps[a + 1] = accs
    for b in range(nneg):
        mm = m[b]
        gamma[b] = mm
        delta[b] = p1[mm]
        g[neg_idx[b]] = mm * o[neg_idx[b]] - ps[mm]
    return loss


@njit(**_JIT)
def _laplacian_matvec(
    q,  # IN  (n,) float64
    pos_idx,  # IN  (n+,) int64
    neg_idx,  # IN  (n-,) int64
    k,  # IN  (n+,) int64
    m,  # IN  (n-,) int64
    out,  # OUT (n,) float64: L q
):
    """``L q``: ``alpha_i q_i - sum_{A_i} q_j`` (P) and ``gamma_j q_j - sum_{B_j} q_i`` (N).

    ``L = sum over active pairs of (e_i - e_j)(e_i - e_j)^T``; O(n) from prefix sums of ``q``.
    """
    npos = pos_idx.shape[0]
    nneg = neg_idx.shape[0]
    cn = np.zeros(nneg + 1)
    acc = 0.0
    for b in range(nneg):
        acc += q[neg_idx[b]]
        cn[b + 1] = acc
    cp = np.zeros(npos + 1)
    acc = 0.0
    for a in range(npos):
        acc += q[pos_idx[a]]
        cp[a + 1] = acc
    for a in range(npos):
        kk = k[a]
        i = pos_idx[a]
        out[i] = (nneg - kk) * q[i] - (cn[nneg] - cn[kk])
    for b in range(nneg):
        mm = m[b]
        j = neg_idx[b]
        out[j] = mm * q[j] - cp[mm]


@njit(**_JIT)
def _matvec_f64(
    X,  # IN  (n, r) float32 or float64, C-contiguous
    v,  # IN  (r,) float64
    out,  # OUT (n,) float64: X @ v accumulated in float64
):
    """Row dot products in float64 (four rows per sweep of ``v``: ~1.5x faster than one)."""
    n, r = X.shape
    n4 = n - n % 4
    for i in range(0, n4, 4):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for c in range(r):
            vc = v[c]
            a0 += X[i, c] * vc
            a1 += X[i + 1, c] * vc
            a2 += X[i + 2, c] * vc
            a3 += X[i + 3, c] * vc
        out[i] = a0
        out[i + 1] = a1
        out[i + 2] = a2
        out[i + 3] = a3
    for i in range(n4, n):
        acc = 0.0
        for c in range(r):
            acc += X[i, c] * v[c]
        out[i] = acc


@njit(**_JIT)
def _rmatvec_f64(
    X,  # IN  (n, r) float32 or float64, C-contiguous
    u,  # IN  (n,) float64
    out,  # INOUT (r,) float64: out += X^T u accumulated in float64
):
    """``out += X^T u`` in float64, four rows per update of ``out``."""
    n, r = X.shape
    n4 = n - n % 4
    for i in range(0, n4, 4):
        u0 = u[i]
        u1 = u[i + 1]
        u2 = u[i + 2]
        u3 = u[i + 3]
        if u0 == 0.0 and u1 == 0.0 and u2 == 0.0 and u3 == 0.0:
            continue
        for c in range(r):
            out[c] += X[i, c] * u0 + X[i + 1, c] * u1 + X[i + 2, c] * u2 + X[i + 3, c] * u3
    for i in range(n4, n):
        ui = u[i]
        for c in range(r):
            out[c] += X[i, c] * ui


@njit(**_JIT)
def _rmatvec_sq_f64(
    X,  # IN  (n, r) float32 or float64, C-contiguous
    u,  # IN  (n,) float64
    d,  # IN  (n,) float64 row weights
    out_u,  # INOUT (r,) float64: out_u += X^T u
    out_d,  # INOUT (r,) float64: out_d += (X * X)^T d
):
    """``X^T u`` and the weighted column sums of squares ``(X*X)^T d`` in one sweep of ``X``."""
    n, r = X.shape
    for i in range(n):
        ui = u[i]
        di = d[i]
        for c in range(r):
            x = np.float64(X[i, c])
            out_u[c] += x * ui
            out_d[c] += x * x * di
