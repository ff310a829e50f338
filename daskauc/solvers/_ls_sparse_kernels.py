"""Numba kernels of TwoPassAUC and SPDAM on sparse CSR chunks: one chunk per call (SPAM's
are in :mod:`daskauc.solvers._spam_sparse_kernels`).

The same steps as their dense kernels (:mod:`daskauc.solvers._ls_kernels`, the reference),
with a row costing O(nnz(row)) instead of O(r). Each kernel takes the chunk's CSR arrays
``(indptr, indices, data)`` (canonical, float32/float64 values, read-only is fine), keeps the
model dense (r float64) but in a lazy form that a row changes only at its non-zeros, and
writes the plain model back at the end of the chunk (O(r) per chunk). The lazy forms are
exact algebra: the sparse and the dense kernel differ by float64 rounding only. Derivations:

TwoPassAUC. The step ``w' = s w - coef (x - c_y) - eta g2 D`` (``s = 1 - eta lam``) adds
multiples of the dense ``c+``, ``c-`` and decays ``w``. Kept as
``w = alpha v + beta+ c+ + beta- c- + gamma f`` (``f`` the chains' drift, added every
``every`` steps by ``gamma += 1``): a step scales ``alpha``, ``beta+-``, ``gamma`` by ``s``,
adds to ``beta+-`` and moves ``v`` on the row's non-zeros by ``-coef / alpha x``; ``w.c+-``
and ``x.w`` follow from ``v.c+-`` (kept up to date on the non-zeros) and the 3 x 3 Gram
matrix of ``c+, c-, f``.

SPDAM. An SPDC iteration adds ``du = e - pi+ m+ - pi- m-`` (``e = sum_K coef_i x_i``, sparse)
to ``u`` and sets ``w' = rho w - (u + sigma du) / c - b (1/c + coefb)``
(``rho = 1 / (tau c)``), ``wbar' = (1 + theta) w' - theta w``. With ``u = U + mu_u . M``,
``w = alpha U + omega V + mu_w . M`` (``M = (m+, m-)``; ``U`` and ``V`` change on the batch's
non-zeros only: ``U += e``, ``V += g / omega' e``), ``wbar`` is
``alpha_b U + omega_b V + eps_b e_last + mu_b . M`` with ``e_last`` the last batch's sparse
increment; the scalars ``b.u``, ``b.w``, ``wbar.m+-`` come from ``U``'s and ``V``'s dot
products with ``m+, m-, b`` (kept up to date) and the Gram matrix of ``m+, m-, b``.

A scale (``alpha``, ``omega``) that falls below :data:`RENORM` is folded into its vector
(O(r)); with the step sizes of these solvers it happens seldom (never within a chunk of
their defaults on rows of unit norm), and only a penalty step ``eta lam`` near 1 (a regime
where the solvers are unstable) makes it frequent.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .._config import FASTMATH

_JIT = dict(nogil=True, cache=True, fastmath=FASTMATH)

#: a lazy scale below this is folded into its vector (O(r)); it bounds the rounding of the
#: prefix sums of SPAM's average relative to one step's share (float64 eps / RENORM)
RENORM = 1e-6


# ---------------------------------------------------------------------------------------
# TwoPassAUC


@njit(**_JIT)
def _twopass_sgd_chunk_csr(
    indptr,  # IN (b + 1,) int32/int64, CSR row pointers
    indices,  # IN (nnz,) int32/int64, column indices (sorted per row)
    data,  # IN (nnz,) float32/float64, values
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
    """TwoPassAUC on a CSR chunk (``_ls_kernels._twopass_sgd_chunk``); returns the step
    count. ``w`` holds ``v`` of ``w = alpha v + beta+ c+ + beta- c- + gamma f`` inside."""
    r = w.shape[0]
    drifting = drift.shape[0] > 0
    cpp = 0.0
    cpn = 0.0
    cnn = 0.0
    fcp = 0.0
    fcn = 0.0
    for k in range(r):
        cpp += cpos[k] * cpos[k]
        cpn += cpos[k] * cneg[k]
        cnn += cneg[k] * cneg[k]
        if drifting:
            fcp += drift[k] * cpos[k]
            fcn += drift[k] * cneg[k]
    vcp, vcn = _dots2(w, cpos, cneg)
    alpha = 1.0
    bpos = 0.0
    bneg = 0.0
    gamma = 0.0
    t = t0
    c = clock[0]
    for idx in range(order.shape[0]):
        i = order[idx]
        t += 1
        c += stride
        eta_t = gain * eta / math.sqrt(c) if invsqrt else gain * eta
        lo = indptr[i]
        hi = indptr[i + 1]
        xv = 0.0
        xcp = 0.0
        xcn = 0.0
        xf = 0.0
        for j in range(lo, hi):
            k = indices[j]
            xk = data[j]
            xv += xk * w[k]
            xcp += xk * cpos[k]
            xcn += xk * cneg[k]
            if drifting:
                xf += xk * drift[k]
        xw = alpha * xv + bpos * xcp + bneg * xcn + gamma * xf
        a = alpha * vcp + bpos * cpp + bneg * cpn + gamma * fcp  # w . c+
        b = alpha * vcn + bpos * cpn + bneg * cnn + gamma * fcn  # w . c-
        g2 = eta_t * 2.0 * (a - b - 1.0)  # eta 2 (w.D - 1)
        shrink = 1.0 - eta_t * lam
        if y[i] > 0:
            coef = eta_t * wpos * (xw - a)
            bpos = shrink * bpos + coef - g2
            bneg = shrink * bneg + g2
        else:
            coef = eta_t * wneg * (xw - b)
            bpos = shrink * bpos - g2
            bneg = shrink * bneg + coef + g2
        gamma *= shrink
        alpha *= shrink
        if not RENORM <= abs(alpha) <= 1.0 / RENORM:
            _scale(w, alpha)
            alpha = 1.0
            vcp, vcn = _dots2(w, cpos, cneg)
        f = coef / alpha
        for j in range(lo, hi):
            w[indices[j]] -= f * data[j]
        vcp -= f * xcp
        vcn -= f * xcn
        if drifting and t % every == 0:
            gamma += 1.0
    for k in range(r):
        wk = alpha * w[k] + bpos * cpos[k] + bneg * cneg[k]
        if drifting:
            wk += gamma * drift[k]
        w[k] = wk
    clock[0] = c
    return t


@register_jitable(fastmath=FASTMATH)
def _dots2(v, p, q):
    """``(v.p, v.q)``."""
    a = 0.0
    b = 0.0
    for k in range(v.shape[0]):
        a += v[k] * p[k]
        b += v[k] * q[k]
    return a, b


@register_jitable(fastmath=FASTMATH)
def _scale(v, s):
    """``v *= s`` (folding a lazy scale into its vector)."""
    for k in range(v.shape[0]):
        v[k] *= s


# ---------------------------------------------------------------------------------------
# SPDAM


@njit(**_JIT)
def _spdam_chunk_csr(
    indptr,  # IN (b + 1,) CSR row pointers
    indices,  # IN (nnz,) column indices
    data,  # IN (nnz,) float32/float64 values
    y,  # IN (b,) int8
    order,  # IN (b,) int64
    mpos,  # IN (r,) float64, positive mean
    mneg,  # IN (r,) float64, negative mean
    bvec,  # IN (r,) float64, b = m- - m+
    duals,  # INOUT (b,) float64, this chunk's dual variables
    u,  # INOUT (r,) float64, (1/n) sum_i beta_i xbar_i
    w,  # INOUT (r,) float64, primal iterate
    wbar,  # INOUT (r,) float64, extrapolated primal iterate
    spos,  # scalar: 1/sqrt(p)
    sneg,  # scalar: 1/sqrt(1-p)
    n_total,  # scalar: n
    m,  # scalar int: mini-batch size
    sigma,  # scalar: dual step
    tau,  # scalar: primal step
    theta,  # scalar: extrapolation
    mu,  # scalar: strong convexity of g (lam_LS / 2)
):
    """SPDAM on a CSR chunk (``_ls_kernels._spdam_chunk``); returns the iterations. Inside,
    ``u`` holds ``U`` and ``w`` holds ``V`` of the module docstring's lazy form."""
    r = w.shape[0]
    nb = order.shape[0]
    c = mu + 1.0 / tau
    rho = 1.0 / (tau * c)
    pp = 0.0
    pn = 0.0
    nn = 0.0
    pb = 0.0
    nb_ = 0.0
    bb = 0.0
    for k in range(r):
        pp += mpos[k] * mpos[k]
        pn += mpos[k] * mneg[k]
        nn += mneg[k] * mneg[k]
        pb += mpos[k] * bvec[k]
        nb_ += mneg[k] * bvec[k]
        bb += bvec[k] * bvec[k]
    Up, Un = _dots2(u, mpos, mneg)
    Ub = _dot(u, bvec)
    Vp, Vn = _dots2(w, mpos, mneg)
    Vb = _dot(w, bvec)
    wm_pos, wm_neg = _dots2(wbar, mpos, mneg)
    # u = U + mup m+ + mun m-;  w = alpha U + omega V + mwp m+ + mwn m-;
    # wbar = ab U + ob V + eb e_last + mbp m+ + mbn m- (+ zeta wbar_0 before the first batch)
    mup = 0.0
    mun = 0.0
    alpha = 0.0
    omega = 1.0
    mwp = 0.0
    mwn = 0.0
    ab = 0.0
    ob = 0.0
    eb = 0.0
    mbp = 0.0
    mbn = 0.0
    zeta = 1.0
    ecur = np.zeros(r)
    elast = np.zeros(r)
    mark_cur = np.zeros(r, np.bool_)
    mark_last = np.zeros(r, np.bool_)
    room = min(r, indptr[indptr.shape[0] - 1]) + 1  # distinct columns of a batch
    list_cur = np.empty(room, np.int64)
    list_last = np.empty(room, np.int64)
    n_cur = 0
    n_last = 0
    iters = 0
    for start in range(0, nb, m):
        stop = min(start + m, nb)
        pip = 0.0
        pin = 0.0
        ecp = 0.0
        ecn = 0.0
        ecb = 0.0
        for idx in range(start, stop):
            i = order[idx]
            lo = indptr[i]
            hi = indptr[i + 1]
            xU = 0.0
            xV = 0.0
            xE = 0.0
            x0 = 0.0
            xp = 0.0
            xn = 0.0
            xb = 0.0
            for j in range(lo, hi):
                k = indices[j]
                xk = data[j]
                xU += xk * u[k]
                xV += xk * w[k]
                xE += xk * elast[k]
                xp += xk * mpos[k]
                xn += xk * mneg[k]
                xb += xk * bvec[k]
                if zeta != 0.0:
                    x0 += xk * wbar[k]
            xw = ab * xU + ob * xV + eb * xE + mbp * xp + mbn * xn + zeta * x0
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
                pip += coef
            else:
                pin += coef
            if coef != 0.0:
                for j in range(lo, hi):
                    k = indices[j]
                    if not mark_cur[k]:
                        mark_cur[k] = True
                        list_cur[n_cur] = k
                        n_cur += 1
                    ecur[k] += coef * data[j]
                ecp += coef * xp
                ecn += coef * xn
                ecb += coef * xb
        # the primal step (Sherman-Morrison) in the lazy form's scalars
        sig = n_total / (stop - start)
        dub = ecb - pip * pb - pin * nb_  # du . b
        ub = Ub + mup * pb + mun * nb_  # u . b
        wdb = alpha * Ub + omega * Vb + mwp * pb + mwn * nb_  # w . b
        brhs = wdb / tau - (ub + sig * dub) - bb
        coefb = brhs / (c * (c + bb))
        alpha_new = rho * alpha - 1.0 / c
        g = -alpha_new - sig / c  # coefficient of e in w'
        omega_new = rho * omega
        mwp_new = rho * mwp - (mup - sig * pip) / c + (1.0 / c + coefb)
        mwn_new = rho * mwn - (mun - sig * pin) / c - (1.0 / c + coefb)
        ab = (1.0 + theta) * alpha_new - theta * alpha
        ob = (1.0 + theta) * omega_new - theta * omega
        eb = theta * (alpha + g / rho)
        mbp = (1.0 + theta) * mwp_new - theta * mwp
        mbn = (1.0 + theta) * mwn_new - theta * mwn
        zeta = 0.0
        gv = g / omega_new
        for q in range(n_last):
            k = list_last[q]
            elast[k] = 0.0
            mark_last[k] = False
        for q in range(n_cur):
            k = list_cur[q]
            ek = ecur[k]
            u[k] += ek
            w[k] += gv * ek
        ecur, elast = elast, ecur
        mark_cur, mark_last = mark_last, mark_cur
        list_cur, list_last = list_last, list_cur
        n_last = n_cur
        n_cur = 0
        Up += ecp
        Un += ecn
        Ub += ecb
        Vp += gv * ecp
        Vn += gv * ecn
        Vb += gv * ecb
        mup -= pip
        mun -= pin
        alpha = alpha_new
        omega = omega_new
        mwp = mwp_new
        mwn = mwn_new
        wm_pos = ab * Up + ob * Vp + eb * ecp + mbp * pp + mbn * pn
        wm_neg = ab * Un + ob * Vn + eb * ecn + mbp * pn + mbn * nn
        if omega < RENORM:  # fold omega into V
            _scale(w, omega)
            Vp *= omega
            Vn *= omega
            Vb *= omega
            ob /= omega
            omega = 1.0
        iters += 1
    if zeta == 0.0:
        for k in range(r):
            wbar[k] = ab * u[k] + ob * w[k] + eb * elast[k] + mbp * mpos[k] + mbn * mneg[k]
    for k in range(r):
        Uk = u[k]
        w[k] = alpha * Uk + omega * w[k] + mwp * mpos[k] + mwn * mneg[k]
        u[k] = Uk + mup * mpos[k] + mun * mneg[k]
    return iters


@register_jitable(fastmath=FASTMATH)
def _dot(v, p):
    a = 0.0
    for k in range(v.shape[0]):
        a += v[k] * p[k]
    return a
