"""Numba kernels of the pairwise hinge SGD (NSAUC / NSVMSGD2): one chunk per call.

The Python driver (``nsauc.py``) owns the loop over chunks, the schedules and the random
numbers; a kernel runs the steps of one chunk and mutates only its state arguments.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._config import FASTMATH


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _pairwise_hinge_steps(
    X,          # IN  (m, r) float32/float64, C-contiguous chunk
    partners,   # IN  (k, r) same dtype, C-contiguous: rows of other chunks (k may be 0)
    pos,        # IN  (m+,) int64 row indices of positives in X
    neg,        # IN  (m-,) int64 row indices of negatives in X
    ri,         # IN  (s,) int64 per step: i >= 0 is pos[i] of X, i < 0 is partners[-1 - i]
    rj,         # IN  (s,) int64 per step: j >= 0 is neg[j] of X, j < 0 is partners[-1 - j]
    w,          # INOUT (r,) float64 current iterate
    wbar,       # INOUT (r,) float64 average of the iterates
    counters,   # INOUT (2,) int64 [t = steps done so far, q = iterates averaged]
    lam,        # scalar: L2 regularization lambda
    t0,         # scalar: step offset, eta_t = 1 / (lam (t + t0))
    rskip,      # scalar: scheduled regularization every rskip steps
    askip,      # scalar: scheduled averaging every askip steps (0: no averaging)
    average_start,  # scalar: steps before averaging starts
):
    r = X.shape[1]
    t = counters[0]
    q = counters[1]
    for s in range(ri.shape[0]):
        i = ri[s]
        if i >= 0:
            xi = X[pos[i]]
        else:
            xi = partners[-1 - i]
        j = rj[s]
        if j >= 0:
            xj = X[neg[j]]
        else:
            xj = partners[-1 - j]
        margin = 0.0
        for k in range(r):
            margin += w[k] * (np.float64(xi[k]) - np.float64(xj[k]))
        t += 1
        if margin < 1.0:
            eta = 1.0 / (lam * (t + t0))
            for k in range(r):
                w[k] += eta * (np.float64(xi[k]) - np.float64(xj[k]))
        if t % rskip == 0:
            shrink = 1.0 - rskip / (t + t0)
            if shrink < 0.0:
                shrink = 0.0
            for k in range(r):
                w[k] *= shrink
        if askip > 0 and t > average_start and t % askip == 0:
            inv = 1.0 / (q + 1.0)
            for k in range(r):
                wbar[k] += (w[k] - wbar[k]) * inv
            q += 1
    counters[0] = t
    counters[1] = q


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _constant_eta_cost(
    D,        # IN  (s, r) float64 pair differences x_i - x_j
    eta,      # scalar: constant step
    lam,      # scalar: L2 regularization
):
    """Run plain SGD with a constant step over the pairs once; return the regularized cost.

    This is SVMSGD2's ``evaluateEta``: the cost after one pass is what the eta0 search compares.
    """
    s, r = D.shape
    w = np.zeros(r)
    for p in range(s):
        margin = 0.0
        for k in range(r):
            margin += w[k] * D[p, k]
        decay = 1.0 - eta * lam
        for k in range(r):
            w[k] *= decay
        if margin < 1.0:
            for k in range(r):
                w[k] += eta * D[p, k]
    loss = 0.0
    for p in range(s):
        margin = 0.0
        for k in range(r):
            margin += w[k] * D[p, k]
        if margin < 1.0:
            loss += 1.0 - margin
    norm2 = 0.0
    for k in range(r):
        norm2 += w[k] * w[k]
    return loss / s + 0.5 * lam * norm2
