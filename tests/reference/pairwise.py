"""Brute-force oracles for the pairwise squared hinge (PRSVM+): every pair formed explicitly.

O(n+ n-) memory and time: only for small data. Nothing here shares code with daskauc.
"""

from __future__ import annotations

import numpy as np


def pair_margins(o, y):
    """Matrix M[a, b] = 1 - o_i + o_j for the a-th positive i and b-th negative j (row order)."""
    o = np.asarray(o, dtype=np.float64)
    y = np.asarray(y)
    op = o[y > 0]
    on = o[y <= 0]
    return 1.0 - op[:, None] + on[None, :]


def coefficients(o, y):
    """alpha, beta (per positive, in row order), gamma, delta (per negative, in row order)."""
    o = np.asarray(o, dtype=np.float64)
    y = np.asarray(y)
    op = o[y > 0]
    on = o[y <= 0]
    alpha = np.array([sum(1 for oj in on if 1.0 - oi + oj > 0) for oi in op], dtype=float)
    beta = np.array([sum(oj for oj in on if 1.0 - oi + oj > 0) for oi in op], dtype=float)
    gamma = np.array([sum(1 for oi in op if 1.0 - oi + oj > 0) for oj in on], dtype=float)
    delta = np.array([sum(oi for oi in op if 1.0 - oi + oj > 0) for oj in on], dtype=float)
    return alpha, beta, gamma, delta


def loss(o, y):
    """sum over (i in P, j in N) of max(0, 1 - o_i + o_j)^2."""
    M = pair_margins(o, y)
    return float(np.sum(np.maximum(M, 0.0) ** 2))


def score_gradient(o, y):
    """d loss / d o_k, divided by 2 (so that it equals the solver's g)."""
    o = np.asarray(o, dtype=np.float64)
    y = np.asarray(y)
    P = np.flatnonzero(y > 0)
    N = np.flatnonzero(y <= 0)
    g = np.zeros_like(o)
    for i in P:
        for j in N:
            h = 1.0 - o[i] + o[j]
            if h > 0:
                g[i] -= h
                g[j] += h
    return g


def laplacian(o, y):
    """Dense L = sum over active pairs of (e_i - e_j)(e_i - e_j)^T (active: 1 - o_i + o_j > 0)."""
    o = np.asarray(o, dtype=np.float64)
    y = np.asarray(y)
    n = o.shape[0]
    L = np.zeros((n, n))
    for i in np.flatnonzero(y > 0):
        for j in np.flatnonzero(y <= 0):
            if 1.0 - o[i] + o[j] > 0:
                L[i, i] += 1
                L[j, j] += 1
                L[i, j] -= 1
                L[j, i] -= 1
    return L


def pair_difference_matrix(X, y):
    """A with one row x_i - x_j per (positive i, negative j) pair, positives outer."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    Xp = X[y > 0]
    Xn = X[y <= 0]
    return (Xp[:, None, :] - Xn[None, :, :]).reshape(-1, X.shape[1])


def objective(w, X, y, C):
    """F(w) = 1/2 ||w||^2 + C sum_pairs max(0, 1 - w.(x_i - x_j))^2, pairs formed explicitly."""
    A = pair_difference_matrix(X, y)
    h = np.maximum(1.0 - A @ w, 0.0)
    return 0.5 * float(w @ w) + C * float(h @ h)


def gradient(w, X, y, C):
    """grad F(w) = w - 2C A^T max(0, 1 - A w), pairs formed explicitly."""
    A = pair_difference_matrix(X, y)
    h = np.maximum(1.0 - A @ w, 0.0)
    return w - 2.0 * C * (A.T @ h)


def hessian(w, X, y, C):
    """Generalized Hessian I + 2C sum_{active pairs} (x_i - x_j)(x_i - x_j)^T (dense)."""
    A = pair_difference_matrix(X, y)
    active = (1.0 - A @ w) > 0
    Aa = A[active]
    return np.eye(X.shape[1]) + 2.0 * C * (Aa.T @ Aa)
