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

Tiles are float32 or float64; the exponential is computed in the tile's precision (relative
error below 3e-7 in float32, 2e-15 in float64) and every sum is accumulated in float64.
Measured on one core of covtype-shaped data (116,203 x 54 rows, 4,096 centres, 256 x 1024
tiles): the whole product takes 1.3-1.5x the bare float32 GEMM of the same tiles, the
exponential and the float64 sums running at ~1.0-1.2 G kernel values per second (2.5-3
cycles each; float32 sums would reach 1.5 G/s but lose digits to the cancellation in
``K alpha``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .. import _config

_JIT = dict(nogil=True, cache=True, fastmath=_config.FASTMATH)

# exp(x), x <= 0, as 2^k p(r): k = round(x / ln 2), r = x - k ln 2 (Cody-Waite split), p a
# Taylor polynomial; 2^k comes from its exponent bits in an integer row buffer. Written out so
# that LLVM vectorizes the loop (there is no SVML here).
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # 17 significant bits: k * LN2_HI is exact for |k| < 2^11
_LN2_LO = 1.4286068203094173e-06
_LN2_HI32 = 0.693359375  # 9 significant bits for float32
_LN2_LO32 = -2.12194440e-4


def _exp_split(g, p, bits):  # pragma: no cover - replaced by the overload below in numba
    """``exp(min(g[j], 0)) = p[j] * bits[j].view(float)``: the polynomial part into ``p``, the
    power of two as float bits into ``bits`` (the caller folds the product into its own loop)."""
    raise NotImplementedError


def _exp_split_f32(g, p, bits):
    n = g.shape[0]
    zero = np.float32(0.0)
    lo = np.float32(-87.0)  # exp(-87) ~ 1.6e-38, the smallest normal float32
    half = np.float32(0.5)
    log2e = np.float32(_LOG2E)
    lnhi = np.float32(_LN2_HI32)
    lnlo = np.float32(_LN2_LO32)
    one = np.float32(1.0)
    c2 = np.float32(1 / 2)
    c3 = np.float32(1 / 6)
    c4 = np.float32(1 / 24)
    c5 = np.float32(1 / 120)
    c6 = np.float32(1 / 720)
    for j in range(n):
        x = max(min(g[j], zero), lo)  # rounding can leave tiny positive exponents
        kf = np.floor(x * log2e + half)
        r = x - kf * lnhi - kf * lnlo
        # degree 6 on |r| <= ln 2 / 2: truncation error 1.2e-7 (float32 rounds at 6e-8);
        # degree 7 measured 15% slower for 5e-9
        q = one + r * (one + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))))
        p[j] = q if x > lo else zero  # flush what underflows to 0
        bits[j] = (np.int32(kf) + np.int32(127)) << np.int32(23)


def _exp_split_f64(g, p, bits):
    n = g.shape[0]
    for j in range(n):
        x = max(min(g[j], 0.0), -708.0)  # keeps 2^k normal; below this the result is 0
        kf = np.floor(x * _LOG2E + 0.5)
        r = x - kf * _LN2_HI - kf * _LN2_LO
        q = 1.0 + r * (1.0 + r * (1 / 2 + r * (1 / 6 + r * (1 / 24 + r * (
            1 / 120 + r * (1 / 720 + r * (1 / 5040 + r * (1 / 40320 + r * (
                1 / 362880 + r * (1 / 3628800 + r * (1 / 39916800 + r * (
                    1 / 479001600))))))))))))
        p[j] = q if x > -708.0 else 0.0
        bits[j] = (np.int64(kf) + 1023) << 52


@overload(_exp_split, inline="always", jit_options={"fastmath": _config.FASTMATH})
def _exp_split_overload(g, p, bits):
    # chosen when the kernel is compiled for the tile's dtype
    if g.dtype == types.float32:
        return _exp_split_f32
    return _exp_split_f64


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


@njit(**_JIT)
def _exp_tile(
    G,  # INOUT (rt, ct) float32/float64: exponents in, kernel values out
    bits,  # scratch (ct,) int32 / int64
):
    """Kernel values in place (for materializing small kernel blocks)."""
    rt, ct = G.shape
    scale = bits[:ct].view(G.dtype)
    for i in range(rt):
        row = G[i]
        _exp_split(row, row, bits[:ct])
        for j in range(ct):
            row[j] *= scale[j]
