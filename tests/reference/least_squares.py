"""Slow, obviously correct oracles for the least-squares AUC family (small data only).

Everything here works from the definitions: explicit sums over all positive-negative pairs,
the saddle functions written as printed in the papers and differentiated numerically (they are
quadratic, so central differences are exact up to rounding), plain Python loops over rows,
dense solves instead of Sherman-Morrison, a scalar optimizer instead of closed-form duals.
Nothing is imported from daskauc.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize


def _pm1(y):
    return np.where(np.asarray(y) > 0, 1, -1)


def pair_differences(X, y) -> np.ndarray:
    """All ``x_i - x_j`` for i positive, j negative: shape (n+ n-, r)."""
    X = np.asarray(X, dtype=np.float64)
    y = _pm1(y)
    P, N = X[y > 0], X[y < 0]
    return (P[:, None, :] - N[None, :, :]).reshape(-1, X.shape[1])


def ls_objective(w, X, y, lam) -> float:
    """(1/(n+ n-)) sum over pairs of (1 - w.(x_i - x_j))^2 + (lam/2)||w||^2, summed pair by pair."""
    d = pair_differences(X, y)
    return float(np.mean((1.0 - d @ w) ** 2) + 0.5 * lam * (w @ w))


def ls_gradient(w, X, y, lam) -> np.ndarray:
    d = pair_differences(X, y)
    return -2.0 * d.T @ (1.0 - d @ w) / d.shape[0] + lam * w


def ls_minimizer(X, y, lam) -> np.ndarray:
    """Solve the normal equations of the pairwise objective built from explicit pairs."""
    d = pair_differences(X, y)
    M = d.T @ d / d.shape[0] + 0.5 * lam * np.eye(d.shape[1])
    return np.linalg.solve(M, d.mean(axis=0))


def ls_minimizer_scipy(X, y, lam) -> np.ndarray:
    """The same minimizer by a generic optimizer on the pairwise objective (second opinion)."""
    r = np.asarray(X).shape[1]
    res = scipy.optimize.minimize(ls_objective, np.zeros(r), args=(X, y, lam),
                                  jac=ls_gradient, method="BFGS",
                                  options={"gtol": 1e-12, "maxiter": 10_000})
    return res.x


def elastic_net_minimizer(X, y, lam, l1, iters=20_000) -> np.ndarray:
    """argmin LS(w) + l1 ||w||_1 by FISTA on the pairwise quadratic."""
    d = pair_differences(X, y)
    A = d.T @ d / d.shape[0] + 0.5 * lam * np.eye(d.shape[1])
    v = d.mean(axis=0)
    L = 2.0 * np.linalg.eigvalsh(A)[-1]
    w = np.zeros(d.shape[1])
    z = w.copy()
    t = 1.0
    for _ in range(iters):
        u = z - (2.0 * A @ z - 2.0 * v) / L
        wn = np.sign(u) * np.maximum(np.abs(u) - l1 / L, 0.0)
        tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        z = wn + (t - 1.0) / tn * (wn - w)
        w, t = wn, tn
    return w


def numerical_gradient(f, w, h=1e-4) -> np.ndarray:
    """Central differences (exact for quadratics up to rounding)."""
    w = np.asarray(w, dtype=np.float64)
    g = np.empty_like(w)
    for k in range(w.shape[0]):
        e = np.zeros_like(w)
        e[k] = h
        g[k] = (f(w + e) - f(w - e)) / (2.0 * h)
    return g


def class_means(X, y):
    X = np.asarray(X, dtype=np.float64)
    y = _pm1(y)
    return X[y > 0].mean(axis=0), X[y < 0].mean(axis=0), float(np.mean(y > 0))


# ---- TwoPassAUC -------------------------------------------------------------------------


def twopass_row_loss(w, x, yt, X, y, lam) -> float:
    """L_t(w) with the n/n_c weighting (docs/algorithms.md, "TwoPassAUC"), from the definition."""
    yy = _pm1(y)
    n, n_pos, n_neg = len(yy), np.sum(yy > 0), np.sum(yy < 0)
    cp, cn, _ = class_means(X, y)
    D = cp - cn
    c, weight = (cp, n / n_pos) if yt > 0 else (cn, n / n_neg)
    return (weight * (w @ (x - c)) ** 2 + 1.0 - 2.0 * (w @ D) + (w @ D) ** 2
            + 0.5 * lam * (w @ w))


def twopass_run(X, y, order, eta, lam, invsqrt=False) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    w = np.zeros(X.shape[1])
    for t, i in enumerate(order, start=1):
        g = numerical_gradient(lambda v, i=i: twopass_row_loss(v, X[i], y[i], X, y, lam), w)
        w = w - (eta / np.sqrt(t) if invsqrt else eta) * g
    return w


# ---- OPAUC ------------------------------------------------------------------------------


def opauc_run(X, y, order, eta, lam_ls) -> np.ndarray:
    """Gao et al.: for each row, the mean pairwise gradient against every earlier row of the
    other class (kept explicitly), penalty lam_ls/2 (the paper's lambda)."""
    X = np.asarray(X, dtype=np.float64)
    y = _pm1(y)
    w = np.zeros(X.shape[1])
    seen = {1: [], -1: []}
    for i in order:
        seen[y[i]].append(X[i])
        other = seen[-y[i]]
        if not other:
            continue
        O = np.asarray(other)
        d = (X[i] - O) if y[i] > 0 else (O - X[i])
        grad = 0.5 * lam_ls * w + np.mean(-(1.0 - d @ w)[:, None] * d, axis=0)
        w = w - eta * grad
    return w


# ---- SOLAM / SPAM: the saddle function F --------------------------------------------------


def solam_F(w, a, b, alpha, x, yt, p) -> float:
    """F(w, a, b, alpha; z) as printed (Ying et al. 2016)."""
    s = w @ x
    pos, neg = float(yt > 0), float(yt < 0)
    return ((1 - p) * (s - a) ** 2 * pos + p * (s - b) ** 2 * neg
            + 2 * (1 + alpha) * (p * s * neg - (1 - p) * s * pos) - p * (1 - p) * alpha ** 2)


def spam_row_gradient(w, x, yt, cp, cn, p) -> np.ndarray:
    """d/dw F at a(w) = w.c+, b(w) = w.c-, alpha(w) = w.(c- - c+), a, b, alpha held fixed."""
    a, b, alpha = w @ cp, w @ cn, w @ (cn - cp)
    return numerical_gradient(lambda v: solam_F(v, a, b, alpha, x, yt, p), w)


def spam_run(X, y, order, eta, lam_ls, l1_ls, invsqrt=True):
    """SPAM as in Natole et al. (2018): gradient step, then prox (soft-threshold, shrink);
    returns (last, average) with beta = p(1-p) lam, beta1 = p(1-p) l1."""
    X = np.asarray(X, dtype=np.float64)
    cp, cn, p = class_means(X, y)
    beta, beta1 = p * (1 - p) * lam_ls, p * (1 - p) * l1_ls
    w = np.zeros(X.shape[1])
    total = np.zeros_like(w)
    for t, i in enumerate(order, start=1):
        eta_t = eta / np.sqrt(t) if invsqrt else eta / (t + 1)
        u = w - eta_t * spam_row_gradient(w, X[i], y[i], cp, cn, p)
        u = np.sign(u) * np.maximum(np.abs(u) - eta_t * beta1, 0.0)
        w = u / (1 + eta_t * beta)
        total += w
    return w, total / len(order)


def solam_run(X, y, order, zeta, R, kappa, variant="paper", lam_ls=None):
    """SOLAM pseudo-code (Ying, Wen & Lyu 2016) with numerical gradients of F.

    ``lam_ls`` not None: regSOLAM (no projection, penalty p(1-p) lam/2 ||w||^2).
    Returns the gamma-weighted average of w."""
    X = np.asarray(X, dtype=np.float64)
    y = _pm1(y)
    r = X.shape[1]
    if variant == "authors" and lam_ls is None:
        w, a, b, alpha = np.full(r, R / np.sqrt(r)), R, R, 2 * R
    else:
        w, a, b, alpha = np.zeros(r), 0.0, 0.0, 0.0
    wbar, gsum, npos = np.zeros(r), 0.0, 0
    for t, i in enumerate(order, start=1):
        gamma = zeta / np.sqrt(t)
        npos += y[i] > 0
        p = npos / t
        x = X[i]

        def F(v, a_, b_, al_, x=x, yt=y[i], p=p):
            val = solam_F(v[:r], a_, b_, al_, x, yt, p)
            if lam_ls is not None:
                val += 0.5 * p * (1 - p) * lam_ls * (v[:r] @ v[:r])
            return val

        g = numerical_gradient(lambda v, F=F, al=alpha: F(v, v[r], v[r + 1], al),
                               np.r_[w, a, b])
        g_alpha = numerical_gradient(lambda v, F=F, w=w, a=a, b=b: F(w, a, b, v[0]),
                                     np.array([alpha]))[0]
        wbar = (gsum * wbar + gamma * w) / (gsum + gamma)
        gsum += gamma
        w = w - gamma * g[:r]
        a, b = a - gamma * g[r], b - gamma * g[r + 1]
        alpha = alpha + gamma * g_alpha
        if lam_ls is None:
            nw = np.linalg.norm(w)
            if nw > R:
                w = w * (R / nw)
            if variant == "paper":
                a, b = np.clip(a, -R * kappa, R * kappa), np.clip(b, -R * kappa, R * kappa)
                alpha = np.clip(alpha, -2 * R * kappa, 2 * R * kappa)
            else:
                a, b = min(a, R), min(b, R)
                alpha = np.clip(alpha, -2 * R, 2 * R)
    return wbar


# ---- SPDAM ------------------------------------------------------------------------------


def spdam_xbar(X, y) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    y = _pm1(y)
    cp, cn, p = class_means(X, y)
    return np.where((y > 0)[:, None], (X - cp) / np.sqrt(p), (X - cn) / np.sqrt(1 - p))


def spdam_primal(w, X, y, lam_ls) -> float:
    """P(w) = (1/n) sum (w.xbar_i)^2/2 + (b.w)^2/2 + b.w + (lam/4)||w||^2."""
    cp, cn, _ = class_means(X, y)
    b = cn - cp
    Xb = spdam_xbar(X, y)
    return float(np.mean((Xb @ w) ** 2) / 2 + (b @ w) ** 2 / 2 + b @ w + 0.25 * lam_ls * (w @ w))


def spdc_run(X, y, batches, lam_ls, sigma, tau, theta) -> np.ndarray:
    """SPDC (Zhang & Xiao) on SPDAM's problem: dual maximized by a scalar optimizer, primal
    by a dense solve; ``batches`` a list of row-index arrays."""
    Xb = spdam_xbar(X, y)
    n, r = Xb.shape
    cp, cn, _ = class_means(X, y)
    b = cn - cp
    mu = 0.5 * lam_ls
    beta = np.zeros(n)
    u = np.zeros(r)
    w = np.zeros(r)
    wbar = np.zeros(r)
    H = np.outer(b, b) + (mu + 1.0 / tau) * np.eye(r)
    for K in batches:
        old = beta[K].copy()
        for k in K:
            s = Xb[k] @ wbar
            res = scipy.optimize.minimize_scalar(
                lambda v, s=s, k=k: -(v * s - v * v / 2 - (v - beta[k]) ** 2 / (2 * sigma)))
            beta[k] = res.x
        du = Xb[K].T @ (beta[K] - old) / n
        ubar = u + (n / len(K)) * du
        u = u + du
        w_new = np.linalg.solve(H, w / tau - ubar - b)
        wbar = w_new + theta * (w_new - w)
        w = w_new
    return w
