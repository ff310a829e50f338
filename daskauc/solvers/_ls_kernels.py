"""Numba kernels of the least-squares AUC family: one chunk of rows per call.

Each kernel visits the rows of one chunk in the order given (a permutation drawn by the Python
step from its SeedSequence), mutates only its outputs and state, and returns the step counter.
Blocks may be float32 or float64, read-only, C-contiguous; every accumulation and the model
are float64. Formulas, with their derivations, are in the solver modules:
twopass.py, opauc.py, solam.py, spam.py, spdam.py.

Per row, the O(r) kernels make two passes over r values: one dot product and one fused
update loop (which also accumulates the dot products the next row needs, e.g. ``w.c+``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .._config import FASTMATH

_JIT = dict(nogil=True, cache=True, fastmath=FASTMATH)


@register_jitable(inline="always", fastmath=FASTMATH)
def _add_drift(w, drift, cpos, cneg):
    """``w += drift`` (the other chains' expected move, :func:`daskauc.engine.chains.
    chain_frame`), returning the new ``(w . c+, w . c-)`` the kernels keep up to date."""
    a = 0.0
    b = 0.0
    for k in range(w.shape[0]):
        w[k] += drift[k]
        a += w[k] * cpos[k]
        b += w[k] * cneg[k]
    return a, b


@njit(**_JIT)
def _twopass_sgd_chunk(
    X,  # IN (b, r) float32/float64
    y,  # IN (b,) int8 in {-1, +1}
    order,  # IN (b,) int64, rows in visiting order
    cpos,  # IN (r,) float64, positive class mean
    cneg,  # IN (r,) float64, negative class mean
    drift,  # IN (r,) or (0,) float64: added to w every `every` steps
    w,  # INOUT (r,) float64
    clock,  # INOUT (1,) float64: steps of the sequential run the steps stand for
    t0,  # scalar: steps taken before this chunk
    eta,  # scalar: step size
    invsqrt,  # scalar bool: eta_t = eta / sqrt(clock) instead of eta
    lam,  # scalar: L2 penalty of LS
    wpos,  # scalar: 2 n / n+
    wneg,  # scalar: 2 n / n-
    stride,  # scalar: clock advance per step (one chain: 1)
    gain,  # scalar: step multiplier (one chain: 1)
    every,  # scalar: steps between drifts
):
    """TwoPassAUC: SGD with the unbiased per-row gradient of LS; returns the new step count."""
    r = w.shape[0]
    a = 0.0
    b = 0.0
    for k in range(r):
        a += w[k] * cpos[k]
        b += w[k] * cneg[k]
    t = t0
    c = clock[0]
    drifting = drift.shape[0] > 0
    for idx in range(order.shape[0]):
        i = order[idx]
        t += 1
        c += stride
        eta_t = gain * eta / math.sqrt(c) if invsqrt else gain * eta
        xw = 0.0
        for k in range(r):
            xw += X[i, k] * w[k]
        g2 = 2.0 * (a - b - 1.0)  # 2 (w.D - 1)
        shrink = 1.0 - eta_t * lam
        if y[i] > 0:
            coef = eta_t * wpos * (xw - a)
            a = 0.0
            b = 0.0
            for k in range(r):
                dk = cpos[k] - cneg[k]
                wk = shrink * w[k] - coef * (X[i, k] - cpos[k]) - eta_t * g2 * dk
                w[k] = wk
                a += wk * cpos[k]
                b += wk * cneg[k]
        else:
            coef = eta_t * wneg * (xw - b)
            a = 0.0
            b = 0.0
            for k in range(r):
                dk = cpos[k] - cneg[k]
                wk = shrink * w[k] - coef * (X[i, k] - cneg[k]) - eta_t * g2 * dk
                w[k] = wk
                a += wk * cpos[k]
                b += wk * cneg[k]
        if drifting and t % every == 0:
            a, b = _add_drift(w, drift, cpos, cneg)
    clock[0] = c
    return t


@njit(**_JIT)
def _spam_chunk(
    X,  # IN (b, r)
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
    """SPAM: proximal SGD step on F(w, a(w), b(w), alpha(w); z); returns the step count."""
    r = w.shape[0]
    a = 0.0
    b = 0.0
    for k in range(r):
        a += w[k] * cpos[k]
        b += w[k] * cneg[k]
    t = t0
    c = clock[0]
    n = order.shape[0]
    first = 0
    while first < n:  # segments between drifts (one when there is none)
        last = n if drift.shape[0] == 0 else min(n, first + every - t % every)
        for idx in range(first, last):
            i = order[idx]
            t += 1
            c += stride
            eta_t = eta / math.sqrt(c) if invsqrt else eta / (c + 1.0)
            if gain != 1.0:
                eta_t *= gain
            xw = 0.0
            for k in range(r):
                xw += X[i, k] * w[k]
            alpha = b - a  # w.(c- - c+), the paper's sign
            if y[i] > 0:
                g = 2.0 * (1.0 - p) * (xw - a - 1.0 - alpha)
            else:
                g = 2.0 * p * (xw - b + 1.0 + alpha)
            step = eta_t * g
            thr = eta_t * beta1
            scale = 1.0 / (1.0 + eta_t * beta)
            inv_t = 1.0 / t
            a = 0.0
            b = 0.0
            for k in range(r):
                u = w[k] - step * X[i, k]
                if thr > 0.0:
                    if u > thr:
                        u -= thr
                    elif u < -thr:
                        u += thr
                    else:
                        u = 0.0
                u *= scale
                w[k] = u
                wbar[k] += (u - wbar[k]) * inv_t
                a += u * cpos[k]
                b += u * cneg[k]
        first = last
        if drift.shape[0] > 0 and t % every == 0:
            a, b = _add_drift(w, drift, cpos, cneg)
    clock[0] = c
    return t


@njit(**_JIT)
def _solam_chunk(
    X,  # IN (b, r)
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    drift,  # IN (r + 3,) or (0,) float64: added to (w, a, b, alpha) every `every` steps
    w,  # INOUT (r,) float64
    wbar,  # INOUT (r,) float64, gamma-weighted average of the iterates
    scal,  # INOUT (8,) float64: a, b, alpha, abar, bbar, alphabar, gamma_sum, n_pos_seen
    clock,  # INOUT (1,) float64: steps of the sequential run the steps stand for
    t0,  # scalar: steps taken before this chunk
    zeta,  # scalar: gamma = zeta / sqrt(clock)
    R,  # scalar: radius of the ball of w
    kappa,  # scalar: bound on ||x|| (paper variant: |a|,|b| <= R kappa, |alpha| <= 2 R kappa)
    mode,  # scalar: 0 paper projection, 1 authors' code projection, 2 L2 penalty (regSOLAM)
    lam,  # scalar: regSOLAM penalty (LS scale), multiplied by p(1-p)
    stride,  # scalar: clock advance per step (one chain: 1)
    gain,  # scalar: step multiplier (one chain: 1)
    every,  # scalar: steps between drifts
):
    """SOLAM / regSOLAM saddle-point SGD; returns the step count."""
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
    t = t0
    c = clock[0]
    drifting = drift.shape[0] > 0
    for idx in range(order.shape[0]):
        i = order[idx]
        t += 1
        c += stride
        weight = zeta / math.sqrt(c)  # the sequential run's gamma: the iterate's weight
        gamma = gain * weight
        if y[i] > 0:
            npos += 1.0
        p = npos / t
        xw = 0.0
        for k in range(r):
            xw += X[i, k] * w[k]
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
        # gamma-weighted average of the iterate used at this step (before its update)
        gnew = gsum + weight
        f = weight / gnew
        gsum = gnew
        abar += f * (a - abar)
        bbar += f * (b - bbar)
        alphabar += f * (alpha - alphabar)
        shrink = 1.0 - gamma * lam * p * (1.0 - p) if mode == 2 else 1.0
        step = gamma * gw
        nrm2 = 0.0
        for k in range(r):
            wk = w[k]
            wbar[k] += f * (wk - wbar[k])
            wk = shrink * wk - step * X[i, k]
            w[k] = wk
            nrm2 += wk * wk
        a -= gamma * ga
        b -= gamma * gb
        alpha += gamma * gal
        if mode != 2:
            if nrm2 > R * R:
                s = R / math.sqrt(nrm2)
                for k in range(r):
                    w[k] *= s
            a = min(max(a, ab_lo), ab_hi)
            b = min(max(b, ab_lo), ab_hi)
            alpha = min(max(alpha, -al_hi), al_hi)
        if drifting and t % every == 0:
            for k in range(r):
                w[k] += drift[k]
            a += drift[r]
            b += drift[r + 1]
            alpha += drift[r + 2]
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


@njit(**_JIT)
def _opauc_chunk(
    X,  # IN (b, r)
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    w,  # INOUT (r,) float64
    sum_pos,  # INOUT (r,) float64, running sum of the positives
    sum_neg,  # INOUT (r,) float64
    G_pos,  # INOUT (r, r) float64, running sum x x^T of the positives (lower triangle)
    G_neg,  # INOUT (r, r) float64 (lower triangle)
    counts,  # INOUT (2,) int64: negatives seen, positives seen
    eta,  # scalar: constant step size
    lam,  # scalar: the OPAUC paper's penalty (lam_LS / 2)
):
    """OPAUC: one step per row with running class means and covariances (O(r^2) per row)."""
    r = w.shape[0]
    v = np.empty(r)
    steps = 0
    for idx in range(order.shape[0]):
        i = order[idx]
        if y[i] > 0:
            counts[1] += 1
            for k in range(r):
                xk = X[i, k]
                sum_pos[k] += xk
                for j in range(k + 1):
                    G_pos[k, j] += xk * X[i, j]
            n_o = counts[0]
            s_o = sum_neg
            G = G_neg
            sgn = 1.0
        else:
            counts[0] += 1
            for k in range(r):
                xk = X[i, k]
                sum_neg[k] += xk
                for j in range(k + 1):
                    G_neg[k, j] += xk * X[i, j]
            n_o = counts[1]
            s_o = sum_pos
            G = G_pos
            sgn = -1.0
        if n_o == 0:
            continue
        inv_n = 1.0 / n_o
        # v = G w (symmetric, lower triangle stored), c.w, x.w
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
            xw += X[i, k] * wk
        zw = xw - cw
        # positive x: grad = lam w - (x - c-) + (x - c-)((x - c-).w) + S- w;
        # negative x: grad = lam w + (x - c+) + (x - c+)((x - c+).w) + S+ w;
        # S w = G w / n - c (c.w)
        for k in range(r):
            ck = s_o[k] * inv_n
            xk = X[i, k]
            grad = lam * w[k] - sgn * (xk - ck) + (xk - ck) * zw + v[k] * inv_n - ck * cw
            w[k] -= eta * grad
        steps += 1
    return steps


@njit(**_JIT)
def _spdam_chunk(
    X,  # IN (b, r)
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    mpos,  # IN (r,) float64, positive mean
    mneg,  # IN (r,) float64, negative mean
    bvec,  # IN (r,) float64, b = m- - m+
    duals,  # INOUT (b,) float64, this chunk's dual variables
    u,  # INOUT (r,) float64, (1/n) sum_i beta_i xbar_i
    w,  # INOUT (r,) float64, primal iterate
    wbar,  # INOUT (r,) float64, extrapolated primal iterate
    du,  # scratch (r,) float64
    rhs,  # scratch (r,) float64
    spos,  # scalar: 1/sqrt(p)
    sneg,  # scalar: 1/sqrt(1-p)
    n_total,  # scalar: n
    m,  # scalar int: mini-batch size
    sigma,  # scalar: dual step
    tau,  # scalar: primal step
    theta,  # scalar: extrapolation
    mu,  # scalar: strong convexity of g (lam_LS / 2)
):
    """SPDAM: SPDC mini-batch iterations over one chunk; returns the number of iterations."""
    r = w.shape[0]
    c = mu + 1.0 / tau
    bb = 0.0
    for k in range(r):
        bb += bvec[k] * bvec[k]
    wm_pos = 0.0
    wm_neg = 0.0
    for k in range(r):
        wm_pos += wbar[k] * mpos[k]
        wm_neg += wbar[k] * mneg[k]
    nb = order.shape[0]
    iters = 0
    for start in range(0, nb, m):
        stop = min(start + m, nb)
        for k in range(r):
            du[k] = 0.0
        for idx in range(start, stop):
            i = order[idx]
            xw = 0.0
            for k in range(r):
                xw += X[i, k] * wbar[k]
            if y[i] > 0:
                s = spos
                ax = (xw - wm_pos) * s
            else:
                s = sneg
                ax = (xw - wm_neg) * s
            beta_new = (sigma * ax + duals[i]) / (1.0 + sigma)
            coef = (beta_new - duals[i]) * s / n_total
            duals[i] = beta_new
            if y[i] > 0:
                for k in range(r):
                    du[k] += coef * (X[i, k] - mpos[k])
            else:
                for k in range(r):
                    du[k] += coef * (X[i, k] - mneg[k])
        scale = n_total / (stop - start)
        brhs = 0.0
        for k in range(r):
            ubar = u[k] + scale * du[k]
            u[k] += du[k]
            rk = w[k] / tau - ubar - bvec[k]
            rhs[k] = rk
            brhs += bvec[k] * rk
        coefb = brhs / (c * (c + bb))
        wm_pos = 0.0
        wm_neg = 0.0
        for k in range(r):
            wn = rhs[k] / c - bvec[k] * coefb
            wb = wn + theta * (wn - w[k])
            w[k] = wn
            wbar[k] = wb
            wm_pos += wb * mpos[k]
            wm_neg += wb * mneg[k]
        iters += 1
    return iters


@njit(**_JIT)
def _dot_axpy_pass(
    X,  # IN (b, r)
    order,  # IN (b,) int64
    w,  # INOUT (r,) float64
    eta,  # scalar
):
    """The floor of an O(r) stochastic pass: per row one dot product and one axpy."""
    r = w.shape[0]
    for idx in range(order.shape[0]):
        i = order[idx]
        xw = 0.0
        for k in range(r):
            xw += X[i, k] * w[k]
        g = eta * (xw - 1.0)
        for k in range(r):
            w[k] -= g * X[i, k]
    return order.shape[0]
