"""Numba kernels of SOLAM and OPAUC on sparse rows: one CSR chunk per call.

A chunk comes as its three CSR arrays ``(indptr, indices, data)`` (canonical: sorted indices,
no duplicates; float32 or float64 values, read-only is fine); the model and every accumulation
are float64. The dense kernels, the reference these follow step for step, are in
:mod:`daskauc.solvers._ls_kernels`; the formulas and their derivations in
:mod:`daskauc.solvers.solam` and :mod:`daskauc.solvers.opauc`.

Per row, SOLAM and the low-rank OPAUC touch only the row's non-zeros (and, for OPAUC, its
``tau``-sized sketch); the dense parts of their updates are kept in scalar (SOLAM) or
``tau``-vector (OPAUC) coefficients of a lazy representation of the iterate, folded back into
the dense vectors once per chunk (O(d) for SOLAM, O(d tau) for OPAUC). The exact OPAUC route
keeps d x d matrices and costs O(d^2) a row whatever the sparsity.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._config import FASTMATH

_JIT = dict(nogil=True, cache=True, fastmath=FASTMATH)

#: fold a lazy scale back into the dense vector when it leaves [2^-20, 2^20]: the sums the
#: lazy form keeps lose about log2(scale drift) bits to cancellation, so 20 bits at most
_SCALE_LOW = 2.0**-20
_SCALE_HIGH = 2.0**20


@njit(**_JIT)
def _row_sq_max(
    indptr,  # IN (b + 1,) int
    data,  # IN (nnz,) float32/float64
):
    """The largest squared row norm of a CSR block (float64; 0 for an empty block)."""
    best = 0.0
    for i in range(indptr.shape[0] - 1):
        s = 0.0
        for j in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[j])
            s += v * v
        if s > best:
            best = s
    return best


# ---- SOLAM ---------------------------------------------------------------------------------


@njit(**_JIT)
def _solam_flush(
    vu,  # INOUT (r, 2): [:, 0] the lazy vector, set to the iterate; [:, 1] U, zeroed
    wsum,  # INOUT (r,): the gamma-weighted sum of the iterates so far
    drift,  # IN (r + 3,) or (0,)
    s,  # scalar: iterate = s * v + e * drift[:r]
    e,  # scalar
    A,  # scalar: sum of gamma * s over the steps since the last flush
    E,  # scalar: sum of gamma * e, likewise
):
    """Fold the lazy form into the dense vectors: ``wsum += A v - U + E drift``, then
    ``v = s v + e drift`` (O(r)); returns the new ``(vv, vd, dd)`` = ``(v.v, v.drift,
    drift.drift)``."""
    r = vu.shape[0]
    drifting = drift.shape[0] > 0
    vv = 0.0
    vd = 0.0
    dd = 0.0
    for k in range(r):
        vk = vu[k, 0]
        acc = A * vk - vu[k, 1]
        new = s * vk
        if drifting:
            dk = drift[k]
            acc += E * dk
            new += e * dk
            vd += new * dk
            dd += dk * dk
        wsum[k] += acc
        vu[k, 0] = new
        vu[k, 1] = 0.0
        vv += new * new
    return vv, vd, dd


@njit(**_JIT)
def _solam_sparse_chunk(
    indptr,  # IN (b + 1,) int
    indices,  # IN (nnz,) int, sorted within each row
    data,  # IN (nnz,) float32/float64
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    drift,  # IN (r + 3,) or (0,) float64: added to (w, a, b, alpha) every `every` steps
    w,  # INOUT (r,) float64
    wbar,  # INOUT (r,) float64, gamma-weighted average of the iterates
    vu,  # scratch (r, 2) float64: the lazy vector v and the average's correction U
    scal,  # INOUT (8,) float64: a, b, alpha, abar, bbar, alphabar, gamma_sum, n_pos_seen
    clock,  # INOUT (1,) float64: steps of the sequential run the steps stand for
    t0,  # scalar: steps taken before this chunk
    zeta,  # scalar: gamma = zeta / sqrt(clock)
    R,  # scalar: radius of the ball of w
    kappa,  # scalar: bound on ||x||
    mode,  # scalar: 0 paper projection, 1 authors' code projection, 2 L2 penalty (regSOLAM)
    lam,  # scalar: regSOLAM penalty (LS scale), multiplied by p(1-p)
    stride,  # scalar: clock advance per step (one chain: 1)
    gain,  # scalar: step multiplier (one chain: 1)
    every,  # scalar: steps between drifts
):
    """SOLAM / regSOLAM on CSR rows, the steps of ``_ls_kernels._solam_chunk`` in O(nnz) a
    row; returns the step count.

    Lazy form: the iterate is ``s * v + e * drift[:r]``, so the shrink, the projection onto
    the ball (a scale change, ``||iterate||^2`` kept from ``v.v`` and ``v.drift``, updated
    per non-zero) and the drift are scalar updates. The gamma-weighted sum of the iterates
    is ``sum_t g_t (s_t v_t + e_t d) = A v - U + E d`` with ``A = sum g_t s_t``,
    ``E = sum g_t e_t`` and ``U_k = sum (change of v_k) * A at that change`` (the scaled-sum
    form of averaged SGD, Xu 2011), exact; it is folded into ``wbar`` at the end of the
    chunk, or when ``s`` leaves [2^-20, 2^20]. ``v`` and ``U`` side by side in ``vu``: a
    non-zero reads one cache line."""
    r = w.shape[0]
    a = scal[0]
    b = scal[1]
    alpha = scal[2]
    abar = scal[3]
    bbar = scal[4]
    alphabar = scal[5]
    gsum = scal[6]
    npos = scal[7]
    if mode == 0:
        ab_lo = -R * kappa
        ab_hi = R * kappa
        al_hi = 2.0 * R * kappa
    else:
        ab_lo = -np.inf
        ab_hi = R
        al_hi = 2.0 * R
    drifting = drift.shape[0] > 0
    # wbar as the weighted sum gsum * wbar (its average again at the end)
    for k in range(r):
        wbar[k] *= gsum
        vu[k, 0] = w[k]
        vu[k, 1] = 0.0
    s = 1.0
    e = 0.0
    A = 0.0
    E = 0.0
    vv, vd, dd = _solam_flush(vu, wbar, drift, 1.0, 0.0, 0.0, 0.0)
    t = t0
    c = clock[0]
    for idx in range(order.shape[0]):
        i = order[idx]
        lo = indptr[i]
        hi = indptr[i + 1]
        t += 1
        c += stride
        weight = zeta / math.sqrt(c)  # the sequential run's gamma: the iterate's weight
        gamma = gain * weight
        if y[i] > 0:
            npos += 1.0
        p = npos / t
        xv = 0.0
        xd = 0.0
        for j in range(lo, hi):
            xv += data[j] * vu[indices[j], 0]
        if drifting:
            for j in range(lo, hi):
                xd += data[j] * drift[indices[j]]
        xw = s * xv + e * xd
        if y[i] > 0:
            gw = 2.0 * (1.0 - p) * (xw - a - 1.0 - alpha)
            ga = -2.0 * (1.0 - p) * (xw - a)
            gb = 0.0
            gal = -2.0 * (1.0 - p) * xw - 2.0 * p * (1.0 - p) * alpha
        else:
            gw = 2.0 * p * (xw - b + 1.0 + alpha)
            ga = 0.0
            gb = -2.0 * p * (xw - b)
            gal = 2.0 * p * xw - 2.0 * p * (1.0 - p) * alpha
        gnew = gsum + weight
        f = weight / gnew
        gsum = gnew
        abar += f * (a - abar)
        bbar += f * (b - bbar)
        alphabar += f * (alpha - alphabar)
        A += weight * s  # the iterate this step started from enters the average
        E += weight * e
        shrink = 1.0 - gamma * lam * p * (1.0 - p) if mode == 2 else 1.0
        s *= shrink
        e *= shrink
        if not (_SCALE_LOW < abs(s) < _SCALE_HIGH):
            vv, vd, dd = _solam_flush(vu, wbar, drift, s, e, A, E)
            s = 1.0
            e = 0.0
            A = 0.0
            E = 0.0
        coef = gamma * gw / s
        for j in range(lo, hi):
            k = indices[j]
            old = vu[k, 0]
            new = old - coef * data[j]
            delta = new - old
            vu[k, 0] = new
            vu[k, 1] += delta * A
            vv += delta * (new + old)
            if drifting:
                vd += delta * drift[k]
        a -= gamma * ga
        b -= gamma * gb
        alpha += gamma * gal
        if mode != 2:
            nrm2 = s * s * vv
            if drifting:
                nrm2 += 2.0 * s * e * vd + e * e * dd
            if nrm2 > R * R:
                sc = R / math.sqrt(nrm2)
                s *= sc
                e *= sc
            a = min(max(a, ab_lo), ab_hi)
            b = min(max(b, ab_lo), ab_hi)
            alpha = min(max(alpha, -al_hi), al_hi)
        if drifting and t % every == 0:
            e += 1.0
            a += drift[r]
            b += drift[r + 1]
            alpha += drift[r + 2]
    _solam_flush(vu, wbar, drift, s, e, A, E)
    inv = 1.0 / gsum if gsum > 0.0 else 1.0
    for k in range(r):
        w[k] = vu[k, 0]
        wbar[k] *= inv
    scal[0] = a
    scal[1] = b
    scal[2] = alpha
    scal[3] = abar
    scal[4] = bbar
    scal[5] = alphabar
    scal[6] = gsum
    scal[7] = npos
    clock[0] = c
    return t


# ---- OPAUC, full covariances ---------------------------------------------------------------


@njit(**_JIT)
def _opauc_full_sparse_chunk(
    indptr,  # IN (b + 1,) int
    indices,  # IN (nnz,) int, sorted within each row
    data,  # IN (nnz,) float32/float64
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    w,  # INOUT (r,) float64
    sum_pos,  # INOUT (r,) float64, running sum of the positives
    sum_neg,  # INOUT (r,) float64
    G_pos,  # INOUT (r, r) float64, running sum x x^T of the positives (lower triangle)
    G_neg,  # INOUT (r, r) float64 (lower triangle)
    counts,  # INOUT (2,) int64: negatives seen, positives seen
    xrow,  # scratch (r,) float64, zeros on entry and on return
    eta,  # scalar: constant step size
    lam,  # scalar: the OPAUC paper's penalty (lam_LS / 2)
):
    """OPAUC with full covariances on CSR rows: ``_ls_kernels._opauc_chunk`` with the
    rank-one scatter update over the row's non-zero pairs (O(nnz^2)); the symmetric
    matrix-vector product ``G w`` and the dense gradient stay O(r^2) a row."""
    r = w.shape[0]
    v = np.empty(r)
    steps = 0
    for idx in range(order.shape[0]):
        i = order[idx]
        lo = indptr[i]
        hi = indptr[i + 1]
        if y[i] > 0:
            counts[1] += 1
            s_own = sum_pos
            G_own = G_pos
            n_o = counts[0]
            s_o = sum_neg
            G = G_neg
            sgn = 1.0
        else:
            counts[0] += 1
            s_own = sum_neg
            G_own = G_neg
            n_o = counts[1]
            s_o = sum_pos
            G = G_pos
            sgn = -1.0
        for p in range(lo, hi):
            kp = indices[p]
            xp = data[p]
            s_own[kp] += xp
            for q in range(lo, p + 1):
                G_own[kp, indices[q]] += xp * data[q]
        if n_o == 0:
            continue
        for p in range(lo, hi):
            xrow[indices[p]] = data[p]
        inv_n = 1.0 / n_o
        cw = 0.0
        xw = 0.0
        for k in range(r):
            v[k] = 0.0
        for k in range(r):
            wk = w[k]
            s = 0.0
            for j in range(k):
                g = G[k, j]
                s += g * w[j]
                v[j] += g * wk
            v[k] += s + G[k, k] * wk
            cw += s_o[k] * inv_n * wk
            xw += xrow[k] * wk
        zw = xw - cw
        for k in range(r):
            ck = s_o[k] * inv_n
            xk = xrow[k]
            grad = lam * w[k] - sgn * (xk - ck) + (xk - ck) * zw + v[k] * inv_n - ck * cw
            w[k] -= eta * grad
        for p in range(lo, hi):
            xrow[indices[p]] = 0.0
        steps += 1
    return steps


# ---- OPAUC, low-rank sketch of the covariances (OPAUCr) ------------------------------------


@njit(**_JIT)
def _sketch_dots(
    w,  # IN (d,)
    S,  # IN (d, 2)
    Z,  # IN (d, 2, tau)
    zv,  # OUT (2, tau): Z_k^T w
    sv,  # OUT (2,): s_k . w
):
    """The lazy form's dot products of a fresh dense vector (O(d tau))."""
    tau = zv.shape[1]
    for k in range(2):
        sv[k] = 0.0
        for q in range(tau):
            zv[k, q] = 0.0
    for m in range(w.shape[0]):
        wm = w[m]
        if wm == 0.0:
            continue
        for k in range(2):
            sv[k] += S[m, k] * wm
            for q in range(tau):
                zv[k, q] += Z[m, k, q] * wm
    return 0


@njit(**_JIT)
def _sketch_settle(
    w,  # INOUT (d,): the lazy vector, set to the iterate
    S,  # IN (d, 2)
    Z,  # IN (d, 2, tau)
    P,  # INOUT (2, tau), zeroed
    B,  # INOUT (2,), zeroed
    a,  # scalar: iterate = a w + Z_0 P_0 + Z_1 P_1 + B_0 s_0 + B_1 s_1
):
    """Fold the lazy form of the iterate into ``w`` (O(d tau))."""
    tau = P.shape[1]
    for m in range(w.shape[0]):
        acc = a * w[m] + B[0] * S[m, 0] + B[1] * S[m, 1]
        for k in range(2):
            for q in range(tau):
                acc += Z[m, k, q] * P[k, q]
        w[m] = acc
    for k in range(2):
        B[k] = 0.0
        for q in range(tau):
            P[k, q] = 0.0
    return 0


@njit(**_JIT)
def _opauc_sketch_chunk(
    indptr,  # IN (b + 1,) int
    indices,  # IN (nnz,) int
    data,  # IN (nnz,) float32/float64
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    draws,  # IN (b, tau) float64: row i's Gaussian vector r_i, N(0, I / tau)
    w,  # INOUT (d,) float64
    S,  # INOUT (d, 2) float64: class sums [negatives, positives]
    Z,  # INOUT (d, 2, tau) float64: class sketches sum x r^T
    H,  # INOUT (2, tau) float64: class sums of the r's
    counts,  # INOUT (2,) int64: negatives seen, positives seen
    G,  # INOUT (2, 2, tau, tau) float64: Z_k^T Z_l
    ZS,  # INOUT (2, 2, tau) float64: Z_k^T s_l
    SS,  # INOUT (2, 2) float64: s_k . s_l
    eta,  # scalar: constant step size
    lam,  # scalar: the OPAUC paper's penalty (lam_LS / 2)
):
    """OPAUC with the low-rank covariance sketch on CSR rows (formulas:
    :mod:`daskauc.solvers.opauc`); returns the number of steps.

    Per row O(nnz tau + tau^2): the iterate is kept as
    ``a w + Z_0 P_0 + Z_1 P_1 + B_0 s_0 + B_1 s_1`` (``w`` holds the lazy vector), so that the
    gradient's dense terms (the class mean and ``Z u``) are updates of ``P`` and ``B``; the
    dot products the step needs (``x.w``, ``s_o.w``, ``Z_o^T w``) come from the kept
    ``Z_k^T w``, ``s_k.w`` and the Gram blocks ``G``, ``ZS``, ``SS`` of the statistics, each
    updated exactly when a row joins its class. O(d tau) at the start and the end of the
    chunk (and when ``a`` leaves [2^-20, 2^20])."""
    tau = H.shape[1]
    P = np.zeros((2, tau))
    B = np.zeros(2)
    a = 1.0
    zv = np.empty((2, tau))
    sv = np.empty(2)
    _sketch_dots(w, S, Z, zv, sv)
    ztx = np.empty((2, tau))
    xs = np.empty(2)
    u = np.empty(tau)
    steps = 0
    for idx in range(order.shape[0]):
        i = order[idx]
        lo = indptr[i]
        hi = indptr[i + 1]
        yc = 1 if y[i] > 0 else 0
        o = 1 - yc
        # x against the statistics before the row joins them
        xv = 0.0
        xx = 0.0
        for k in range(2):
            xs[k] = 0.0
            for q in range(tau):
                ztx[k, q] = 0.0
        for j in range(lo, hi):
            m = indices[j]
            xj = np.float64(data[j])
            xv += xj * w[m]
            xx += xj * xj
            for k in range(2):
                xs[k] += xj * S[m, k]
                for q in range(tau):
                    ztx[k, q] += xj * Z[m, k, q]
        # the row joins its class: s_y += x, Z_y += x r^T, h_y += r; the iterate's terms
        # Z_y P_y + B_y s_y grow by x (r.P_y + B_y), which w gives back (w += dl x)
        rp = 0.0
        for q in range(tau):
            rp += draws[i, q] * P[yc, q]
        dl = -(rp + B[yc]) / a
        xv_new = xv + dl * xx
        for q in range(tau):
            rq = draws[i, q]
            zv[o, q] += dl * ztx[o, q]
            zv[yc, q] += dl * ztx[yc, q] + rq * xv_new
            ZS[yc, yc, q] += ztx[yc, q] + rq * (xs[yc] + xx)
            ZS[yc, o, q] += rq * xs[o]
            ZS[o, yc, q] += ztx[o, q]
            for q2 in range(tau):
                r2 = draws[i, q2]
                G[yc, yc, q, q2] += ztx[yc, q] * r2 + rq * ztx[yc, q2] + xx * rq * r2
                G[o, yc, q, q2] += ztx[o, q] * r2
                G[yc, o, q, q2] += rq * ztx[o, q2]
        sv[o] += dl * xs[o]
        sv[yc] += dl * xs[yc] + xv_new
        SS[yc, yc] += 2.0 * xs[yc] + xx
        SS[yc, o] += xs[o]
        SS[o, yc] += xs[o]
        for j in range(lo, hi):
            m = indices[j]
            xj = np.float64(data[j])
            w[m] += dl * xj
            S[m, yc] += xj
            for q in range(tau):
                Z[m, yc, q] += xj * draws[i, q]
        for q in range(tau):
            H[yc, q] += draws[i, q]
            ztx[yc, q] += xx * draws[i, q]
        counts[yc] += 1
        xs[yc] += xx
        xv = xv_new
        if counts[o] == 0:
            continue
        # the gradient against the other class, at the iterate (unchanged by the join)
        T = np.float64(counts[o])
        xw = a * xv + B[0] * xs[0] + B[1] * xs[1]
        sw = a * sv[o] + SS[o, 0] * B[0] + SS[o, 1] * B[1]
        for q in range(tau):
            xw += ztx[0, q] * P[0, q] + ztx[1, q] * P[1, q]
            sw += ZS[0, o, q] * P[0, q] + ZS[1, o, q] * P[1, q]
        cw = sw / T
        zw = xw - cw
        hu = 0.0
        for q in range(tau):
            acc = a * zv[o, q] + ZS[o, 0, q] * B[0] + ZS[o, 1, q] * B[1]
            for q2 in range(tau):
                acc += G[o, 0, q, q2] * P[0, q2] + G[o, 1, q, q2] * P[1, q2]
            uq = acc - H[o, q] * cw  # u = Zc^T w, Zc = Z_o - c h_o^T
            u[q] = uq
            hu += H[o, q] * uq
        sgn = 1.0 if yc == 1 else -1.0
        shrink = 1.0 - eta * lam
        a *= shrink
        for k in range(2):
            B[k] *= shrink
            for q in range(tau):
                P[k, q] *= shrink
        # w -= eta (-sgn (x - c) + (x - c) zw + (Z_o u - s_o (h_o.u) / T) / T)
        B[o] += eta * (zw - sgn) / T + eta * hu / (T * T)
        for q in range(tau):
            P[o, q] -= eta / T * u[q]
        dl = eta * (sgn - zw) / a
        for j in range(lo, hi):
            w[indices[j]] += dl * data[j]
        for k in range(2):
            sv[k] += dl * xs[k]
            for q in range(tau):
                zv[k, q] += dl * ztx[k, q]
        steps += 1
        if not (_SCALE_LOW < abs(a) < _SCALE_HIGH):
            _sketch_settle(w, S, Z, P, B, a)
            a = 1.0
            _sketch_dots(w, S, Z, zv, sv)
    _sketch_settle(w, S, Z, P, B, a)
    return steps
