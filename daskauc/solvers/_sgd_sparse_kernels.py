"""Numba kernels of the pairwise hinge SGD on sparse (CSR) chunks: one chunk per call.

The sparse counterparts of :mod:`daskauc.solvers._sgd_kernels`: the same steps, shrinks,
drifts and scheduled averages for the same pairs, with ``w = a v + c drift`` and the sum of
the averaged iterates ``alpha v + gamma drift + acc`` kept lazily
(:mod:`daskauc.solvers._online_sparse_kernels`, "The lazy weight vector"), so that a step
costs the non-zeros of its two rows and the shrink O(1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._config import FASTMATH
from ._online_sparse_kernels import RENORM, _lazy_add, _lazy_scale, _sparse_dot


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _pairwise_hinge_sparse_steps(
    indptr,     # IN  (m+1,) CSR row pointers of the chunk
    indices,    # IN  CSR column indices of the chunk
    data,       # IN  CSR values of the chunk (float32/float64)
    p_indptr,   # IN  (k+1,) CSR row pointers of the partner rows (k may be 0)
    p_indices,  # IN  CSR column indices of the partner rows
    p_data,     # IN  float64 CSR values of the partner rows
    pos,        # IN  (m+,) int64 row indices of positives in the chunk
    neg,        # IN  (m-,) int64 row indices of negatives in the chunk
    ri,         # IN  (s,) int64 per step: i >= 0 is pos[i] of the chunk, i < 0 partner -1 - i
    rj,         # IN  (s,) int64 per step: j >= 0 is neg[j] of the chunk, j < 0 partner -1 - j
    drift,      # IN  (r,) or (0,) float64: added to w every rskip steps (none when empty)
    v,          # INOUT (r,) float64: w = a v + c drift (w on entry, scal [1, 0, 0, 0])
    acc,        # INOUT (r,) or (0,) float64: sum of the averaged iterates (lazy form)
    scal,       # INOUT (4,) float64 [a, c, alpha, gamma]
    counters,   # INOUT (2,) int64 [t = steps done so far, q = iterates averaged]
    clock,      # INOUT (1,) float64 steps of the sequential run the steps stand for
    lam,        # scalar: L2 regularization lambda
    t0,         # scalar: step offset, eta = gain / (lam (clock + t0))
    rskip,      # scalar: scheduled regularization every rskip steps
    askip,      # scalar: scheduled averaging every askip steps (0: no averaging)
    average_start,  # scalar: clock before averaging starts
    stride,     # scalar: clock advance per step (one chain: 1)
    gain,       # scalar: step and shrink multiplier (one chain: 1)
):
    """:func:`daskauc.solvers._sgd_kernels._pairwise_hinge_steps` on CSR rows: the margin
    ``a (v.x_i - v.x_j) + c (drift.x_i - drift.x_j)``, the step ``w += eta (x_i - x_j)`` at
    the two rows' non-zeros, the shrink ``w *= shrink`` on the scalars, a drift ``c += 1``,
    an average ``alpha += a``, ``gamma += c``. The caller folds at the end
    (:func:`daskauc.solvers._online_sparse_kernels._lazy_fold`): then ``v`` is ``w`` and
    ``acc`` the sum of the iterates averaged in this call."""
    t = counters[0]
    q = counters[1]
    c = clock[0]
    drifting = drift.shape[0] > 0
    for s in range(ri.shape[0]):
        i = ri[s]
        j = rj[s]
        if i >= 0:
            r = pos[i]
            ilo, ihi = indptr[r], indptr[r + 1]
            margin = _sparse_dot(v, indices, data, ilo, ihi)
        else:
            r = -1 - i
            ilo, ihi = p_indptr[r], p_indptr[r + 1]
            margin = _sparse_dot(v, p_indices, p_data, ilo, ihi)
        if j >= 0:
            r = neg[j]
            jlo, jhi = indptr[r], indptr[r + 1]
            margin -= _sparse_dot(v, indices, data, jlo, jhi)
        else:
            r = -1 - j
            jlo, jhi = p_indptr[r], p_indptr[r + 1]
            margin -= _sparse_dot(v, p_indices, p_data, jlo, jhi)
        margin *= scal[0]
        if drifting and scal[1] != 0.0:
            dm = 0.0
            if i >= 0:
                dm += _sparse_dot(drift, indices, data, ilo, ihi)
            else:
                dm += _sparse_dot(drift, p_indices, p_data, ilo, ihi)
            if j >= 0:
                dm -= _sparse_dot(drift, indices, data, jlo, jhi)
            else:
                dm -= _sparse_dot(drift, p_indices, p_data, jlo, jhi)
            margin += scal[1] * dm
        t += 1
        c += stride
        if margin < 1.0:
            eta = gain / (lam * (c + t0))
            if i >= 0:
                _lazy_add(eta, indices, data, ilo, ihi, v, acc, scal)
            else:
                _lazy_add(eta, p_indices, p_data, ilo, ihi, v, acc, scal)
            if j >= 0:
                _lazy_add(-eta, indices, data, jlo, jhi, v, acc, scal)
            else:
                _lazy_add(-eta, p_indices, p_data, jlo, jhi, v, acc, scal)
        if t % rskip == 0:
            shrink = 1.0 - gain * rskip / (c + t0)
            if shrink < 0.0:
                shrink = 0.0
            _lazy_scale(shrink, v, acc, drift, scal)
            if drifting:
                scal[1] += 1.0
        if askip > 0 and c > average_start and t % askip == 0:
            scal[2] += scal[0]
            scal[3] += scal[1]
            q += 1
    counters[0] = t
    counters[1] = q
    clock[0] = c


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _constant_eta_cost_sparse(
    indptr,     # IN  (s+1,) CSR row pointers of the pair differences x_i - x_j
    indices,    # IN  CSR column indices
    data,       # IN  float64 CSR values
    n_features, # scalar: r
    eta,        # scalar: constant step
    lam,        # scalar: L2 regularization
):
    """:func:`daskauc.solvers._sgd_kernels._constant_eta_cost` on CSR pair differences, with
    ``w = a v`` (the decay ``1 - eta lam`` on ``a``; ``v`` folded when ``|a|`` gets below
    ``RENORM`` or 0): O(nnz) per pair, O(r) for ``||w||^2`` at the end."""
    s = indptr.shape[0] - 1
    v = np.zeros(n_features)
    a = 1.0
    decay = 1.0 - eta * lam
    for p in range(s):
        margin = a * _sparse_dot(v, indices, data, indptr[p], indptr[p + 1])
        a *= decay
        if abs(a) < RENORM:
            for k in range(n_features):
                v[k] *= a
            a = 1.0
        if margin < 1.0:
            coef = eta / a
            for k in range(indptr[p], indptr[p + 1]):
                v[indices[k]] += coef * data[k]
    loss = 0.0
    for p in range(s):
        margin = a * _sparse_dot(v, indices, data, indptr[p], indptr[p + 1])
        if margin < 1.0:
            loss += 1.0 - margin
    norm2 = 0.0
    for k in range(n_features):
        norm2 += v[k] * v[k]
    return loss / s + 0.5 * lam * a * a * norm2
