"""Line searches of the PRSVM+ Newton loop along a step ``s`` from ``w``: neither reads the data.

``phi(t) = F(w + t s) = 1/2 ww + t ws + 1/2 t^2 ss + C loss(o + t d)`` with ``o = X w`` and
``d = X s`` (accumulated from the conjugate gradient's Hessian products) and ``ww``, ``ws``,
``ss`` the regularizer's terms: every step is one sort of ``o + t d`` on the client
(:func:`daskauc.solvers.pairwise.pairwise_coefficients`), nearly linear since the previous
order is the hint. Objective: docs/algorithms.md, "Pairwise squared hinge: PRSVM+ truncated
Newton".
"""

from __future__ import annotations

import math

import numpy as np

from .pairwise import pairwise_coefficients

#: the line searches of :func:`daskauc.solvers.newton.prsvm_newton` (``line_search=``).
LINE_SEARCHES = ("exact", "armijo")


def _phi(t, ww, ws, ss, C, loss):
    return 0.5 * ww + t * ws + 0.5 * t * t * ss + C * loss


def line_search_exact(
    o: np.ndarray,
    d: np.ndarray,
    pos: np.ndarray,
    neg: np.ndarray,
    *,
    C: float,
    ww: float,
    ws: float,
    ss: float,
    dphi0: float,
    t0: float = 1.0,
    rtol: float = 1e-9,
    max_steps: int = 30,
):
    """Minimize ``phi(t) = F(w + t s)`` exactly by a safeguarded 1-D Newton method.

    ``phi(t) = 1/2 ww + t ws + 1/2 t^2 ss + C loss(o + t d)`` with ``o = X w``, ``d = X s``;
    ``phi`` is convex, piecewise quadratic and C^1, so once the active set at ``t`` is the one
    at the minimizer the Newton step lands on it exactly (Chapelle 2007). Steps that leave the
    bracket ``[lo, hi]`` (``phi'(lo) < 0 < phi'(hi)``) are replaced by bisection. Ends when
    ``|phi'(t)| <= rtol |phi'(0)|`` (``dphi0 = phi'(0) = grad F(w).s < 0``).

    Returns ``(t, coef, phi_t, n_steps)`` with ``coef`` the pair coefficients at ``o + t d``.
    """
    lo, hi = 0.0, math.inf
    t = t0
    coef = None
    steps = 0
    for steps in range(1, max_steps + 1):  # noqa: B007
        coef = pairwise_coefficients(o + t * d, pos, neg)
        pos, neg = coef.pos_idx, coef.neg_idx
        dphi = ws + t * ss + 2.0 * C * float(coef.g @ d)
        if abs(dphi) <= rtol * abs(dphi0):
            break
        if dphi < 0:
            lo = t
        else:
            hi = t
        ddphi = ss + 2.0 * C * float(d @ coef.laplacian_matvec(d))
        t_new = t - dphi / ddphi
        if not (lo < t_new < hi):
            t_new = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * max(t, lo)
        if abs(t_new - t) <= 1e-13 * max(1.0, abs(t)):
            break
        t = t_new
    return t, coef, _phi(t, ww, ws, ss, C, coef.loss), steps


def line_search_armijo(
    o: np.ndarray,
    d: np.ndarray,
    pos: np.ndarray,
    neg: np.ndarray,
    *,
    C: float,
    ww: float,
    ws: float,
    ss: float,
    dphi0: float,
    phi0: float,
    t0: float = 1.0,
    c1: float = 1e-4,
    max_steps: int = 40,
):
    """Backtracking: halve ``t`` from ``t0`` until a sufficient decrease.

    Sufficient decrease is Armijo's ``phi(t) <= phi(0) + c1 t phi'(0)`` or, because near the
    optimum that difference of objective values drowns in rounding, its derivative form
    (Hager and Zhang's approximate Armijo) ``phi'(t) <= (1 - 2 c1) |phi'(0)|`` together with
    ``phi(t) <= phi(0) + 1e-10 |phi(0)|``. Returns ``(t, coef, phi_t, n_steps)``.
    """
    t = t0
    coef = None
    phi = math.inf
    steps = 0
    for steps in range(1, max_steps + 1):  # noqa: B007
        coef = pairwise_coefficients(o + t * d, pos, neg)
        pos, neg = coef.pos_idx, coef.neg_idx
        phi = _phi(t, ww, ws, ss, C, coef.loss)
        if phi <= phi0 + c1 * t * dphi0:
            break
        dphi = ws + t * ss + 2.0 * C * float(coef.g @ d)
        if dphi <= (1.0 - 2.0 * c1) * abs(dphi0) and phi <= phi0 + 1e-10 * abs(phi0):
            break
        t *= 0.5
    return t, coef, phi, steps
