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
    drift,      # IN  (r,) or (0,) float64: added to w every rskip steps (none when empty)
    w,          # INOUT (r,) float64 current iterate
    wbar,       # INOUT (r,) float64 average of the iterates
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
    r = X.shape[1]
    t = counters[0]
    q = counters[1]
    c = clock[0]
    drifting = drift.shape[0] > 0
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
        c += stride
        if margin < 1.0:
            eta = gain / (lam * (c + t0))
            for k in range(r):
                w[k] += eta * (np.float64(xi[k]) - np.float64(xj[k]))
        if t % rskip == 0:
            shrink = 1.0 - gain * rskip / (c + t0)
            if shrink < 0.0:
                shrink = 0.0
            for k in range(r):
                w[k] *= shrink
            if drifting:
                for k in range(r):
                    w[k] += drift[k]
        if askip > 0 and c > average_start and t % askip == 0:
            inv = 1.0 / (q + 1.0)
            for k in range(r):
                wbar[k] += (w[k] - wbar[k]) * inv
            q += 1
    counters[0] = t
    counters[1] = q
    clock[0] = c


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
