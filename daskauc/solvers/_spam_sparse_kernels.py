"""Numba kernel of SPAM on sparse CSR chunks, with its lazy L1 prox and lazy average.

The sparse counterpart of ``_ls_kernels._spam_chunk`` (the reference), O(nnz(row)) a row
(O(nnz log) with L1) and O(r) a chunk; the conventions and the folding of a small scale are
those of :mod:`daskauc.solvers._ls_sparse_kernels`.

The step is ``w' = scale * soft(w - step x, thr)``; ``w = alpha v + gamma f``, with the
L1 threshold applied lazily per coordinate (the cumulative penalty of Tsuruoka, Tsujii &
Ananiadou 2009, with the scale): over steps that do not touch coordinate ``k``,
``scale_j soft(., thr_j)`` compose to ``alpha_s soft(v_k, Phi_s - Phi_l)``, with
``Phi_s = sum_{j<=s} thr_j / alpha_{j-1}`` (soft-thresholds add up once the scale is taken
out), so a coordinate is brought up to date only when a row touches it, and it is zero from
the step its ``tau_k = Phi_l + |v_k|`` is reached on. ``w.c+-`` needs every coordinate: it is
``alpha (P - Phi Q)`` over the active coordinates (``P = sum sign_k tau_k c_k``,
``Q = sum sign_k c_k``), a coordinate leaving ``P, Q`` when ``Phi`` passes its ``tau_k``
(a binary heap of the ``tau_k``, O(log) per touch). The uniform average of the iterates is
kept as a running sum: per coordinate, the steps it was not touched in add
``sign_k (tau_k (A_J - A_l) - (B_J - B_l))`` with the prefix sums ``A_s = sum alpha_j``,
``B_s = sum alpha_j Phi_j`` over the chunk's steps and ``J`` the last step it was active in
(binary search in ``Phi``); the drift's share is ``(sum_j gamma_j) f``. Without L1 the
threshold terms vanish (``P = v.c``). With L1 the drift cannot be lazy (a dense addition
between soft-thresholds does not compose): every coordinate is brought up to date (O(r)) and
the drift added, every ``every`` steps, which the solver sets so that this is O(nnz) per row.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .._config import FASTMATH
from ._ls_sparse_kernels import RENORM, _dots2

_JIT = dict(nogil=True, cache=True, fastmath=FASTMATH)


# A binary min-heap of (tau, coordinate) for the L1 thresholds. An entry is current
# while ``tau[k]`` equals its key: ``tau[k] > 0`` for an active coordinate, ``-tau`` once Phi
# passed it (the catch-up still needs it), 0 when ``v[k]`` is 0; stale entries are dropped
# when they surface or when the arrays are full.


@register_jitable
def _sift_down(hkey, hidx, pos, n):
    key = hkey[pos]
    k = hidx[pos]
    while True:
        child = 2 * pos + 1
        if child >= n:
            break
        if child + 1 < n and hkey[child + 1] < hkey[child]:
            child += 1
        if hkey[child] >= key:
            break
        hkey[pos] = hkey[child]
        hidx[pos] = hidx[child]
        pos = child
    hkey[pos] = key
    hidx[pos] = k


@register_jitable
def _heapify(hkey, hidx, n):
    for pos in range(n // 2 - 1, -1, -1):
        _sift_down(hkey, hidx, pos, n)


@register_jitable
def _heap_pop(hkey, hidx, n):
    """Remove the smallest entry (the caller read it); returns the new size."""
    n -= 1
    if n > 0:
        hkey[0] = hkey[n]
        hidx[0] = hidx[n]
        _sift_down(hkey, hidx, 0, n)
    return n


@register_jitable
def _heap_push(hkey, hidx, n, key, k):
    """Push ``(key, k)`` (room for it: :func:`_heap_room`); returns the new size."""
    pos = n
    while pos > 0:
        parent = (pos - 1) >> 1
        if hkey[parent] <= key:
            break
        hkey[pos] = hkey[parent]
        hidx[pos] = hidx[parent]
        pos = parent
    hkey[pos] = key
    hidx[pos] = k
    return n + 1


@register_jitable
def _heap_room(hkey, hidx, n, tau):
    """A full heap without its stale entries and, if still more than half full, in arrays
    twice as long: ``(hkey, hidx, n)``."""
    m = 0
    for q in range(n):
        if tau[hidx[q]] == hkey[q]:
            hkey[m] = hkey[q]
            hidx[m] = hidx[q]
            m += 1
    if 2 * m > hkey.shape[0]:
        cap = 2 * hkey.shape[0]
        nkey = np.empty(cap)
        nidx = np.empty(cap, np.int64)
        nkey[:m] = hkey[:m]
        nidx[:m] = hidx[:m]
        hkey, hidx = nkey, nidx
    _heapify(hkey, hidx, m)
    return hkey, hidx, m


@register_jitable(fastmath=FASTMATH)
def _catch_up(indices, lo, hi, s, v, last, tau, wsum, Phi, A, B):
    """With L1: bring the coordinates ``indices[lo:hi]`` (``lo:hi`` themselves when
    ``indices`` is None) of ``v`` up to step ``s`` of the segment, adding their values at the
    steps since their last update to the running sum ``wsum`` (module docstring)."""
    for j in range(lo, hi):
        k = j if indices is None else indices[j]
        start = last[k]
        if start == s:
            continue
        last[k] = s
        vk = v[k]
        if vk == 0.0:
            continue
        tk = abs(tau[k])
        if Phi[s] < tk:
            J = s
        else:  # the last step it was active in: Phi[start] < tk <= Phi[s]
            J = start
            top = s
            while top - J > 1:
                mid = (J + top) >> 1
                if Phi[mid] < tk:
                    J = mid
                else:
                    top = mid
        if J > start:
            acc = tk * (A[J] - A[start]) - (B[J] - B[start])
            wsum[k] += acc if vk > 0.0 else -acc
        if J == s:
            v[k] = tk - Phi[s] if vk > 0.0 else Phi[s] - tk
        else:
            v[k] = 0.0


@njit(**_JIT)
def _spam_chunk_csr(
    indptr,  # IN (b + 1,) CSR row pointers
    indices,  # IN (nnz,) column indices
    data,  # IN (nnz,) float32/float64 values
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    cpos,  # IN (r,) float64
    cneg,  # IN (r,) float64
    drift,  # IN (r,) or (0,) float64: added to w every `every` steps
    w,  # INOUT (r,) float64, current iterate
    wbar,  # INOUT (r,) float64, running average of the iterates
    clock,  # INOUT (1,) float64: steps of the sequential run the steps stand for
    t0,  # scalar: steps taken before this chunk
    eta,  # scalar: step constant
    invsqrt,  # scalar bool: eta_t = eta/sqrt(clock) (True) or eta/(clock+1) (False)
    p,  # scalar: n+ / n
    beta,  # scalar: L2 weight of the penalty
    beta1,  # scalar: L1 weight (0 for SPAM-L2)
    stride,  # scalar: clock advance per step (one chain: 1)
    gain,  # scalar: step multiplier (one chain: 1)
    every,  # scalar: steps between drifts
):
    """SPAM on a CSR chunk (``_ls_kernels._spam_chunk``); returns the step count. Inside,
    ``w`` holds ``v`` of ``w = alpha soft(v, Phi - Phi_last) + gamma f`` and ``wbar`` the
    running sum of the iterates."""
    r = w.shape[0]
    nb = order.shape[0]
    l1 = beta1 > 0.0
    drifting = drift.shape[0] > 0
    lazy_drift = drifting and not l1
    last = np.zeros(r, np.int32)
    Phi = np.zeros(nb + 1)
    A = np.zeros(nb + 1)
    B = np.zeros(nb + 1)
    tau = np.zeros(r if l1 else 0)
    hkey = np.empty(0)
    hidx = np.empty(0, np.int64)
    fcp = 0.0
    fcn = 0.0
    if lazy_drift:
        fcp, fcn = _dots2(drift, cpos, cneg)
    t = t0
    c = clock[0]
    for k in range(r):  # the running sum of the t0 iterates so far
        wbar[k] *= t0
    # a segment: from a plain w (alpha 1, gamma 0) to the next fold
    Pp, Pn, Qp, Qn, nh, hkey, hidx = _spam_segment(w, cpos, cneg, tau, hkey, hidx, l1)
    alpha = 1.0
    gamma = 0.0
    gsum = 0.0
    s = 0
    for idx in range(nb):
        i = order[idx]
        t += 1
        c += stride
        eta_t = eta / math.sqrt(c) if invsqrt else eta / (c + 1.0)
        if gain != 1.0:
            eta_t *= gain
        lo = indptr[i]
        hi = indptr[i + 1]
        if l1:  # (without L1, catching up leaves v as it is: done in the update below)
            _catch_up(indices, lo, hi, s, w, last, tau, wbar, Phi, A, B)
        xv = 0.0
        xf = 0.0
        for j in range(lo, hi):
            k = indices[j]
            xv += data[j] * w[k]
            if lazy_drift:
                xf += data[j] * drift[k]
        xw = alpha * xv + gamma * xf
        a = alpha * (Pp - Phi[s] * Qp) + gamma * fcp
        b = alpha * (Pn - Phi[s] * Qn) + gamma * fcn
        al = b - a  # w.(c- - c+), the paper's sign
        if y[i] > 0:
            g = 2.0 * (1.0 - p) * (xw - a - 1.0 - al)
        else:
            g = 2.0 * p * (xw - b + 1.0 + al)
        stepv = eta_t * g / alpha  # in units of v
        th = eta_t * beta1 / alpha
        scale = 1.0 / (1.0 + eta_t * beta)
        s1 = s + 1
        Phi[s1] = Phi[s] + th
        alpha_new = alpha * scale
        A[s1] = A[s] + alpha_new
        B[s1] = B[s] + alpha_new * Phi[s1]
        gamma *= scale
        gsum += gamma
        for j in range(lo, hi):
            k = indices[j]
            vk = w[k]
            u = vk - stepv * data[j]
            if l1:
                if vk != 0.0:  # leaves P, Q (and its heap entry lapses)
                    sk = 1.0 if vk > 0.0 else -1.0
                    tk = sk * tau[k]
                    Pp -= tk * cpos[k]
                    Pn -= tk * cneg[k]
                    Qp -= sk * cpos[k]
                    Qn -= sk * cneg[k]
                    tau[k] = 0.0
                if u > th:
                    u -= th
                elif u < -th:
                    u += th
                else:
                    u = 0.0
                if u != 0.0:
                    tk = Phi[s1] + abs(u)
                    tau[k] = tk
                    sk = 1.0 if u > 0.0 else -1.0
                    Pp += sk * tk * cpos[k]
                    Pn += sk * tk * cneg[k]
                    Qp += sk * cpos[k]
                    Qn += sk * cneg[k]
                    if nh == hkey.shape[0]:
                        hkey, hidx, nh = _heap_room(hkey, hidx, nh, tau)
                    nh = _heap_push(hkey, hidx, nh, tk, k)
                wbar[k] += alpha_new * u
            else:  # caught up to step s and the value at step s + 1, at once
                Pp += (u - vk) * cpos[k]
                Pn += (u - vk) * cneg[k]
                wbar[k] += vk * (A[s] - A[last[k]]) + alpha_new * u
            w[k] = u
            last[k] = s1
        s = s1
        alpha = alpha_new
        if l1:  # coordinates whose threshold Phi passed leave P, Q
            while nh > 0 and hkey[0] <= Phi[s]:
                k = hidx[0]
                tk = hkey[0]
                if tau[k] == tk:
                    sk = 1.0 if w[k] > 0.0 else -1.0
                    Pp -= sk * tk * cpos[k]
                    Pn -= sk * tk * cneg[k]
                    Qp -= sk * cpos[k]
                    Qn -= sk * cneg[k]
                    tau[k] = -tk
                nh = _heap_pop(hkey, hidx, nh)
        drift_now = drifting and t % every == 0
        if lazy_drift and drift_now:
            gamma += 1.0
        elif drift_now or alpha < RENORM:  # fold: every coordinate up to date, O(r)
            _spam_fold(w, wbar, drift, last, tau, Phi, A, B, s, alpha, gamma, gsum, l1, lazy_drift)
            if drift_now:
                for k in range(r):
                    w[k] += drift[k]
            Pp, Pn, Qp, Qn, nh, hkey, hidx = _spam_segment(w, cpos, cneg, tau, hkey, hidx, l1)
            alpha = 1.0
            gamma = 0.0
            gsum = 0.0
            s = 0
    _spam_fold(w, wbar, drift, last, tau, Phi, A, B, s, alpha, gamma, gsum, l1, lazy_drift)
    if t > 0:
        inv_t = 1.0 / t
        for k in range(r):
            wbar[k] *= inv_t
    clock[0] = c
    return t


@register_jitable(fastmath=FASTMATH)
def _spam_fold(w, wsum, drift, last, tau, Phi, A, B, s, alpha, gamma, gsum, l1, lazy_drift):
    """End of a segment at its step ``s``: ``w`` the plain iterate, ``wsum`` complete."""
    if l1:
        _catch_up(None, 0, w.shape[0], s, w, last, tau, wsum, Phi, A, B)
    for k in range(w.shape[0]):
        wk = w[k]
        if not l1:
            wsum[k] += wk * (A[s] - A[last[k]])
        if lazy_drift:
            wsum[k] += gsum * drift[k]
            w[k] = alpha * wk + gamma * drift[k]
        else:
            w[k] = alpha * wk
        last[k] = 0


@register_jitable(fastmath=FASTMATH)
def _spam_segment(w, cpos, cneg, tau, hkey, hidx, l1):
    """Start of a segment from the plain ``w``: ``(P+, P-, Q+, Q-)`` and the heap of the
    non-zeros' thresholds (arrays grown to twice their number when short)."""
    Pp, Pn = _dots2(w, cpos, cneg)
    Qp = 0.0
    Qn = 0.0
    nh = 0
    if l1:
        nz = 0
        for k in range(w.shape[0]):
            if w[k] != 0.0:
                nz += 1
        if hkey.shape[0] < nz + 16:
            cap = 2 * nz + 16
            hkey = np.empty(cap)
            hidx = np.empty(cap, np.int64)
        for k in range(w.shape[0]):
            wk = w[k]
            tau[k] = abs(wk)
            if wk != 0.0:
                sk = 1.0 if wk > 0.0 else -1.0
                Qp += sk * cpos[k]
                Qn += sk * cneg[k]
                hkey[nh] = abs(wk)
                hidx[nh] = k
                nh += 1
        _heapify(hkey, hidx, nh)
    return Pp, Pn, Qp, Qn, nh, hkey, hidx
