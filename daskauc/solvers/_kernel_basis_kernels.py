"""Numba kernels of the kernel-basis solvers: Gaussian kernel tiles turned into products.

A tile ``G`` (rows x centres) arrives holding the exponents ``-gamma ||x_i - c_j||^2`` (one BLAS
product of the augmented rows and centres, :mod:`daskauc.solvers.kernel_basis`). Each kernel
takes the exponential of one tile row at a time into a small row buffer and folds it at once
into the products the solver needs, so the kernel values never leave the cache and no tile is
ever written back:

* ``_tile_matvec``: ``out_i += sum_j exp(G_ij) v_j`` (scores ``K v``);
* ``_tile_rmatvec``: ``out[:, j] += sum_i exp(G_ij) U[i, :]`` (``K^T U`` for a few vectors);
* ``_tile_matvec_store`` / ``_strip_rmatvec``: the same two halves over a stored strip of
  kernel rows, for the fused ``K^T (w * K v)`` of the least-squares solver.

Tiles are float32 or float64; the exponential (:func:`daskauc._gaussian_kernels._exp_split`)
is computed in the tile's precision (relative error 2e-7 in float32, 3e-16 in float64 for
exponents in [-1, 0], growing with their size) and every sum is accumulated in float64.
Measured on one core of covtype-shaped data (116,203 x 54 rows, 4,096 centres, 256 x 1024
tiles): the whole product takes 1.3-1.5x the bare float32 GEMM of the same tiles, the
exponential and the float64 sums running at ~1.0-1.2 G kernel values per second (2.5-3
cycles each; float32 sums would reach 1.5 G/s but lose digits to the cancellation in
``K alpha``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _config
from .._gaussian_kernels import _exp_split

_JIT = dict(nogil=True, cache=True, fastmath=_config.FASTMATH)


@njit(**_JIT)
def _tile_matvec(
    G,  # IN  (rt, ct) float32/float64: exponents -gamma ||x_i - c_j||^2
    v,  # IN  (ct,) float64: coefficients of these centres
    out,  # INOUT (rt,) float64: += exp(G) v
    p,  # scratch (ct,) G's dtype
    bits,  # scratch (ct,) int32 (float32 tiles) or int64 (float64 tiles)
):
    """``out += exp(G) @ v``, the kernel values folded in as each row is computed."""
    rt, ct = G.shape
    scale = bits[:ct].view(G.dtype)
    for i in range(rt):
        _exp_split(G[i], p[:ct], bits[:ct])
        acc = 0.0
        for j in range(ct):
            acc += np.float64(p[j] * scale[j]) * v[j]
        out[i] += acc


@njit(**_JIT)
def _tile_rmatvec(
    G,  # IN  (rt, ct) float32/float64: exponents
    U,  # IN  (rt, k) float64: k row weightings
    out,  # INOUT (k, ct) float64: += U^T exp(G)
    p,  # scratch (ct,) G's dtype
    bits,  # scratch (ct,) int32 / int64
):
    """``out += U^T exp(G)`` (``K^T U`` for the k columns of ``U``, transposed)."""
    rt, ct = G.shape
    k = U.shape[1]
    scale = bits[:ct].view(G.dtype)
    for i in range(rt):
        _exp_split(G[i], p[:ct], bits[:ct])
        if k > 1:
            for j in range(ct):
                p[j] *= scale[j]
        for c in range(k):
            u = U[i, c]
            if u != 0.0:
                o = out[c]
                if k > 1:
                    for j in range(ct):
                        o[j] += np.float64(p[j]) * u
                else:
                    for j in range(ct):
                        o[j] += np.float64(p[j] * scale[j]) * u


@njit(**_JIT)
def _tile_matvec_store(
    G,  # IN  (rt, ct) float32/float64: exponents
    v,  # IN  (ct,) float64
    out,  # INOUT (rt,) float64: += exp(G) v
    strip,  # OUT (rt, ct) G's dtype: exp(G) (a column slice of the caller's strip)
    bits,  # scratch (ct,) int32 / int64
):
    """``out += exp(G) @ v``, keeping the kernel values in ``strip`` for a second product."""
    rt, ct = G.shape
    scale = bits[:ct].view(G.dtype)
    for i in range(rt):
        row = strip[i]
        _exp_split(G[i], row, bits[:ct])
        acc = 0.0
        for j in range(ct):
            row[j] *= scale[j]
            acc += np.float64(row[j]) * v[j]
        out[i] += acc


@njit(**_JIT)
def _strip_rmatvec(
    strip,  # IN  (rt, ct) float32/float64: stored kernel values of rt rows, ct centres
    u,  # IN  (rt,) float64
    out,  # INOUT (ct,) float64: += strip^T u
):
    """``out += strip^T u`` over a stored tile of kernel rows (float64 accumulation)."""
    rt, ct = strip.shape
    for i in range(rt):
        ui = u[i]
        if ui != 0.0:
            row = strip[i]
            for j in range(ct):
                out[j] += np.float64(row[j]) * ui
