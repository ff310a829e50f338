"""Numba kernels of the online baselines OAM and Uni-Exp / Uni-Squ: one chunk per call.

The Python drivers (``oam.py``, ``univariate.py``) own the loop over chunks, the epochs and
every random number: the visiting order of the rows of a chunk and the reservoir decisions
arrive here as arrays, so a per-sample pure-Python reference fed the same arrays reproduces
a kernel's result. A kernel mutates only its INOUT arguments. All arithmetic is float64
whatever the dtype of the chunk (float32 rows are widened exactly).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._config import FASTMATH

#: loss codes of :func:`_univariate_chunk`.
LOSS_EXP = 0
LOSS_SQUARE = 1


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _oam_chunk(
    X,          # IN  (m, d) float32/float64, C-contiguous chunk
    y,          # IN  (m,) int8 labels in {-1, +1}
    order,      # IN  (s,) int64 rows of X in visiting order
    u,          # IN  (s,) float64 uniforms in [0, 1): reservoir acceptance, one per visit
    slot,       # IN  (s,) int64 in [0, K): reservoir slot replaced, one per visit
    w,          # INOUT (d,) float64 current iterate
    wbar,       # INOUT (d,) float64 uniform average of the iterates after each row (if average)
    buf_pos,    # INOUT (K, d) float64 positive reservoir (first min(n_pos, K) rows used)
    buf_neg,    # INOUT (K, d) float64 negative reservoir (first min(n_neg, K) rows used)
    counts,     # INOUT (2,) int64 [negatives seen, positives seen]
    C,          # scalar: penalty C
    eta,        # scalar: step size of the gradient update
    gradient,   # scalar: False for OAMseq, True for OAMgra
    average,    # scalar: maintain wbar
):
    """OAM over one chunk: update against the opposite buffer, then offer the row to its own.

    For the row ``x_t`` with label ``y_t`` and ``N_t`` rows of the opposite class seen so far,
    ``c_t = C max(1, N_t / K)``. OAMseq: for each buffered ``x`` in turn,
    ``tau = min(c_t / 2, hinge / ||x_t - x||^2)``, ``w += tau y_t (x_t - x)`` with the hinge
    ``max(0, 1 - y_t w.(x_t - x))`` at the current ``w``. OAMgra: one step
    ``w += eta c_t y_t sum (x_t - x)`` over the buffered ``x`` with a positive hinge at the
    ``w`` before the row. Then reservoir sampling: the ``k``-th row of a class fills slot
    ``k - 1`` while ``k <= K``; later, it replaces slot ``slot[s]`` when ``u[s] < K / k``.
    With ``average``, ``wbar += (w - wbar) / t`` after row ``t`` (all rows seen, 1-based).
    """
    d = X.shape[1]
    K = buf_pos.shape[0]
    g = np.zeros(d)
    for s in range(order.shape[0]):
        i = order[s]
        if y[i] > 0:
            yt = 1.0
            own = buf_pos
            opp = buf_neg
            own_c = 1
        else:
            yt = -1.0
            own = buf_neg
            opp = buf_pos
            own_c = 0
        n_opp = counts[1 - own_c]
        n_fill = min(n_opp, K)
        if n_fill > 0:
            ct = C * max(1.0, n_opp / K)
            if not gradient:
                for j in range(n_fill):
                    dot = 0.0
                    nrm = 0.0
                    for f in range(d):
                        diff = np.float64(X[i, f]) - opp[j, f]
                        dot += w[f] * diff
                        nrm += diff * diff
                    loss = 1.0 - yt * dot
                    if loss > 0.0 and nrm > 0.0:
                        tau = min(0.5 * ct, loss / nrm)
                        step = tau * yt
                        for f in range(d):
                            w[f] += step * (np.float64(X[i, f]) - opp[j, f])
            else:
                n_viol = 0
                for f in range(d):
                    g[f] = 0.0
                for j in range(n_fill):
                    dot = 0.0
                    for f in range(d):
                        dot += w[f] * (np.float64(X[i, f]) - opp[j, f])
                    if 1.0 - yt * dot > 0.0:
                        n_viol += 1
                        for f in range(d):
                            g[f] += np.float64(X[i, f]) - opp[j, f]
                if n_viol > 0:
                    step = eta * ct * yt
                    for f in range(d):
                        w[f] += step * g[f]
        counts[own_c] += 1
        if average:
            inv = 1.0 / (counts[0] + counts[1])
            for f in range(d):
                wbar[f] += (w[f] - wbar[f]) * inv
        k = counts[own_c]
        if k <= K:
            for f in range(d):
                own[k - 1, f] = X[i, f]
        elif u[s] < K / k:
            r = slot[s]
            for f in range(d):
                own[r, f] = X[i, f]


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _univariate_chunk(
    X,          # IN  (m, d) float32/float64, C-contiguous chunk
    y,          # IN  (m,) int8 labels in {-1, +1}
    order,      # IN  (s,) int64 rows of X in visiting order
    drift,      # IN  (d + 1,) or (0,) float64: added to (w, b) every `every` steps
    w,          # INOUT (d,) float64 current iterate
    wbar,       # INOUT (d,) float64 uniform average of the iterates (if average)
    offset,     # INOUT (2,) float64 [b, bbar]: the unpenalized offset and its average
    counts,     # INOUT (2,) int64 [t = steps done, positives seen]
    clock,      # INOUT (1,) float64 steps of the sequential run the steps stand for
    eta0,       # scalar: initial step
    constant,   # scalar: True for eta_t = eta0, False for eta_t = eta0 / sqrt(clock)
    lam,        # scalar: L2 penalty on w
    loss,       # scalar: LOSS_EXP or LOSS_SQUARE
    average,    # scalar: maintain wbar / bbar
    stride,     # scalar: clock advance per step (one chain: 1)
    gain,       # scalar: step multiplier (one chain: 1)
    every,      # scalar: steps between drifts
):
    """SGD steps on the class-weighted univariate loss for the rows of one chunk.

    At step ``t`` (1-based, counted over every chunk and epoch) with ``p_t`` the fraction of
    positives among the ``t`` rows seen (this one included) and score ``s = w.x + b``:
    weight ``1 / p_t`` (positive) or ``1 / (1 - p_t)`` (negative); ``l'(s)`` is
    ``-y exp(-y s)`` (exp) or ``-2 y (1 - y s)`` (square);
    ``w -= eta_t (weight l'(s) x + lam w)``, ``b -= eta_t weight l'(s)``, then
    ``wbar += (w - wbar) / t``.
    """
    d = X.shape[1]
    t = counts[0]
    n_pos = counts[1]
    b = offset[0]
    bbar = offset[1]
    c = clock[0]
    drifting = drift.shape[0] > 0
    for s in range(order.shape[0]):
        i = order[s]
        t += 1
        c += stride
        if y[i] > 0:
            yt = 1.0
            n_pos += 1
            weight = t / n_pos
        else:
            yt = -1.0
            weight = t / (t - n_pos)
        score = b
        for f in range(d):
            score += w[f] * X[i, f]
        if loss == 0:
            dl = -yt * math.exp(-yt * score)
        else:
            dl = -2.0 * yt * (1.0 - yt * score)
        gs = weight * dl
        if constant:
            eta = gain * eta0
        else:
            eta = gain * eta0 / math.sqrt(c)
        for f in range(d):
            w[f] -= eta * (gs * X[i, f] + lam * w[f])
        b -= eta * gs
        if drifting and t % every == 0:
            for f in range(d):
                w[f] += drift[f]
            b += drift[d]
        if average:
            inv = 1.0 / t
            for f in range(d):
                wbar[f] += (w[f] - wbar[f]) * inv
            bbar += (b - bbar) * inv
    counts[0] = t
    counts[1] = n_pos
    offset[0] = b
    offset[1] = bbar
    clock[0] = c


@njit(nogil=True, cache=True)
def _offer_own_rows(
    X,          # IN  (m, d) rows of the chunk
    y,          # IN  (m,) int8 labels in {-1, +1}
    order,      # IN  (m,) int64 visiting order
    u,          # IN  (m,) float64 uniform draws of the visit (oam_draws)
    slot,       # IN  (m,) int64 replacement slots of the visit
    own_neg,    # INOUT (K, d) reservoir of this chain's own negatives
    own_pos,    # INOUT (K, d) reservoir of this chain's own positives
    own_counts, # INOUT (2,) int64 [own negatives, own positives] seen
):
    """Algorithm R over one chain's own rows only (parallel chains, for the exact merge of
    OAM's reservoirs), with the visit's draws: the ``k``-th own row of a class takes slot
    ``k - 1`` while ``k <= K``, later slot ``slot[s]`` when ``u[s] < K / k``."""
    K = own_pos.shape[0]
    for s in range(order.shape[0]):
        i = order[s]
        c = 1 if y[i] > 0 else 0
        own_counts[c] += 1
        k = own_counts[c]
        if k <= K:
            j = k - 1
        elif u[s] * k < K:
            j = slot[s]
        else:
            continue
        if c == 1:
            own_pos[j, :] = X[i, :]
        else:
            own_neg[j, :] = X[i, :]
