"""Numba kernel of the Platt calibration (:mod:`.calibration`): one pass over the scores.

The Newton driver owns the iterations, the line search and the stopping rule; the kernel
evaluates the objective, its gradient and its Hessian at one point in a single pass, with no
n-sized temporaries (numpy's version took seven passes and as many temporaries per Newton
step: 0.85 s for 2 million scores against 0.1 s here).
"""

from __future__ import annotations

import math

from numba import njit

from .._config import FASTMATH


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _platt_pass(
    z,      # IN  (n,) float64 standardized scores
    t,      # IN  (n,) float64 Platt targets in (0, 1)
    c,      # IN  (n,) float64 row weights (the class weights; ones without)
    alpha,  # IN  float slope on z
    beta,   # IN  float offset
    out,    # OUT (6,) float64: L, dL/dalpha, dL/dbeta, H_aa, H_ab, H_bb
):
    """``L = sum c (softplus(u) - t u)`` with ``u = alpha z + beta``, its gradient and
    Hessian."""
    f = 0.0
    ga = 0.0
    gb = 0.0
    haa = 0.0
    hab = 0.0
    hbb = 0.0
    for i in range(z.shape[0]):
        zi = z[i]
        u = alpha * zi + beta
        if u >= 0.0:
            e = math.exp(-u)
            p = 1.0 / (1.0 + e)
            softplus = u + math.log1p(e)
        else:
            e = math.exp(u)
            p = e / (1.0 + e)
            softplus = math.log1p(e)
        ci = c[i]
        f += ci * (softplus - t[i] * u)
        r = ci * (p - t[i])
        w = ci * p * (1.0 - p)
        ga += r * zi
        gb += r
        haa += w * zi * zi
        hab += w * zi
        hbb += w
    out[0] = f
    out[1] = ga
    out[2] = gb
    out[3] = haa
    out[4] = hab
    out[5] = hbb
