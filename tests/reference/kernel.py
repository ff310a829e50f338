"""Brute-force oracles for the kernel-basis solvers: dense kernels, every pair formed.

O(n m) and O(n+ n-) memory: only for small data. Nothing here shares code with daskauc.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from . import pairwise as ref_pairwise


def gaussian(X, Z, gamma):
    """exp(-gamma ||x - z||^2) from scipy's exact squared distances, float64."""
    return np.exp(-gamma * cdist(np.asarray(X, np.float64), np.asarray(Z, np.float64),
                                 "sqeuclidean"))


def pairwise_objective(alpha, X, y, centres, gamma, lam, jitter):
    """lam/2 a^T (K_mm + jitter I) a + mean over pairs of max(0, 1 - f_i + f_j)^2."""
    K = gaussian(X, centres, gamma)
    Kmm = gaussian(centres, centres, gamma) + jitter * np.eye(len(centres))
    f = K @ alpha
    y = np.asarray(y)
    n_pairs = np.sum(y > 0) * np.sum(y <= 0)
    return 0.5 * lam * alpha @ Kmm @ alpha + ref_pairwise.loss(f, y) / n_pairs


def pairwise_gradient(alpha, X, y, centres, gamma, lam, jitter):
    """lam K~ a + (1/P) K^T d loss / d f, the pair sums done explicitly."""
    K = gaussian(X, centres, gamma)
    Kmm = gaussian(centres, centres, gamma) + jitter * np.eye(len(centres))
    y = np.asarray(y)
    n_pairs = np.sum(y > 0) * np.sum(y <= 0)
    return lam * Kmm @ alpha + 2.0 * K.T @ ref_pairwise.score_gradient(K @ alpha, y) / n_pairs


def pairwise_hessian(alpha, X, y, centres, gamma, lam, jitter):
    """lam K~ + (2/P) K^T L K with L the dense Laplacian of the active pairs."""
    K = gaussian(X, centres, gamma)
    Kmm = gaussian(centres, centres, gamma) + jitter * np.eye(len(centres))
    y = np.asarray(y)
    n_pairs = np.sum(y > 0) * np.sum(y <= 0)
    return lam * Kmm + 2.0 * K.T @ ref_pairwise.laplacian(K @ alpha, y) @ K / n_pairs


def least_squares_optimum(X, y, centres, gamma, lam, jitter):
    """argmin lam/2 a^T K~ a + mean over pairs of (1 - f_i + f_j)^2, every pair formed."""
    K = gaussian(X, centres, gamma)
    Kmm = gaussian(centres, centres, gamma) + jitter * np.eye(len(centres))
    y = np.asarray(y)
    A = ref_pairwise.pair_difference_matrix(K, y)  # rows k_i - k_j
    n_pairs = A.shape[0]
    H = lam * Kmm + 2.0 * A.T @ A / n_pairs
    return np.linalg.solve(H, 2.0 * A.sum(axis=0) / n_pairs)
