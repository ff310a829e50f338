"""Slow, obviously correct oracles for daskauc.embed (small data only)."""

from __future__ import annotations

import numpy as np


def gaussian_kernel(X, Z, gamma):
    """exp(-gamma ||x - z||^2) from explicit differences (no Gram trick), float64."""
    X = np.asarray(X, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    K = np.empty((X.shape[0], Z.shape[0]))
    for i in range(X.shape[0]):
        diff = Z - X[i]
        K[i] = np.exp(-gamma * np.sum(diff * diff, axis=1))
    return K


def bandwidth_gamma(X, max_rows=80_000):
    """1 / mean ||x_i - xbar||^2 over the first max_rows rows, by a plain loop over rows."""
    X = np.asarray(X, dtype=np.float64)[:max_rows]
    xbar = X.sum(axis=0) / X.shape[0]
    total = 0.0
    for x in X:
        total += float(np.dot(x - xbar, x - xbar))
    return X.shape[0] / total


def nystroem_kernel(X, Z, U, gamma, rcond=1e-8):
    """The Nystroem approximation kappa(X, U) W^+ kappa(U, Z), W^+ by numpy's pinv."""
    W = gaussian_kernel(U, U, gamma)
    return gaussian_kernel(X, U, gamma) @ np.linalg.pinv(W, rcond=rcond, hermitian=True) @ (
        gaussian_kernel(U, Z, gamma)
    )


def inertia(X, centers):
    """sum_i min_j ||x_i - c_j||^2 by explicit differences."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    return float(sum(np.min(np.sum((C - x) ** 2, axis=1)) for x in X))


def nearest(X, centers):
    """Index of the nearest centre of each row, by explicit differences."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    return np.array([int(np.argmin(np.sum((C - x) ** 2, axis=1))) for x in X])


def minibatch_update(Xb, labels, centers, counts):
    """Closed form of Sculley's per-row updates over one batch: every centre becomes the
    weighted mean (old centre with weight count, plus its assigned rows), count += assigned."""
    Xb = np.asarray(Xb, dtype=np.float64)
    C = np.array(centers, dtype=np.float64)
    v = np.array(counts, dtype=np.int64)
    for c in range(C.shape[0]):
        rows = Xb[labels == c]
        if rows.shape[0]:
            C[c] = (C[c] * v[c] + rows.sum(axis=0)) / (v[c] + rows.shape[0])
            v[c] += rows.shape[0]
    return C, v


def random_fourier(X, weights, offset):
    """sqrt(2/D) cos(x . omega_k + b_k) by a loop over features."""
    X = np.asarray(X, dtype=np.float64)
    D = weights.shape[1]
    Z = np.empty((X.shape[0], D))
    for k in range(D):
        Z[:, k] = np.sqrt(2.0 / D) * np.cos(X @ weights[:, k] + offset[k])
    return Z
