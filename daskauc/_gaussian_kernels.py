"""Numba kernels of the Gaussian kernel ``exp(-gamma ||x - c||^2)``: its exponential, once.

The exponential ``exp(x)``, ``x <= 0``, is ``2^k p(r)`` with ``k = round(x / ln 2)``,
``r = x - k ln 2`` (a Cody-Waite split) and ``p`` a Taylor polynomial; ``2^k`` is built from
its exponent bits in an integer row buffer and multiplied in by the caller's loop. Written out
so that LLVM vectorizes the loops (there is no SVML here). Relative error, measured against 50
digits, grows with ``|x|``: float64 2.8e-16 on [-1, 0], 1.7e-15 on [-50, -10], 2.4e-14 near
-708; float32 1.8e-7 on [-1, 0], 3.8e-7 near -87.

:func:`_exp64` and :func:`_exp32` compute ``p`` and ``k`` of one value, :func:`_pow2_64` and
:func:`_pow2_32` the bits of ``2^k``; :func:`_exp` and :func:`_pow2` pick one of them by the
precision of their argument, so each loop below is written once for float32 and float64. They
are inlined into the loops, and each loop stores ``p`` before it computes ``2^k``, as the loops
did when each of the four wrote the exponential out itself: the machine code is the same as
theirs, instruction for instruction. The loops:

* ``_gauss_from_gram``: a Gram block ``x_i . u_j`` and the norms turned into the kernel block
  in place (the Nystroem map's form, :func:`daskauc._gaussian.gaussian_block`);
* ``_exp_split`` / ``_exp_tile``: the exponential of a row / a tile of exponents
  ``-gamma ||x_i - c_j||^2`` (the kernel-basis form, :func:`daskauc._gaussian.kernel_block`;
  the tile products of :mod:`daskauc.solvers._kernel_basis_kernels` fold ``_exp_split`` into
  their own loops).

The float32 polynomial has two degrees: 7 in the Nystroem map, 6 in the kernel-basis products
(truncation error 1.2e-7, where float32 rounds at 6e-8; degree 7 measured 15% slower there for
5e-9). They round differently, and models fitted with each are recorded bit for bit, so both
stay, as the explicit ``degree`` of :func:`_exp` (float64 has one polynomial, of degree 12).

Pure functions over arrays and scalars; argument order inputs / outputs / state / scalars.
They accept read-only, C-contiguous float32 and float64 blocks and release the GIL.

numba's cache (``cache=True``) checks only the file of the kernel it compiled: after an edit
here, delete the cached kernels of ``daskauc/solvers/_kernel_basis_kernels.py`` too (its
``__pycache__/*.nbi``), which inline ``_exp_split``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload, register_jitable

from . import _config

_JIT = dict(nogil=True, cache=True, fastmath=_config.FASTMATH)

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # 17 significant bits: k * LN2_HI is exact for |k| < 2^11
_LN2_LO = 1.4286068203094173e-06
_LN2_HI32 = 0.693359375  # 9 significant bits for float32
_LN2_LO32 = -2.12194440e-4


@register_jitable(inline="always", fastmath=_config.FASTMATH)
def _exp64(e):
    """``exp(e)``, ``e <= 0``, in float64 as ``(p, k)`` with ``exp(e) = p * 2^k`` (``k`` an
    integral float64); ``p`` is 0 below -708, where ``2^k`` would not be normal."""
    x = max(e, -708.0)  # keeps 2^k normal; below this the result is 0
    kf = np.floor(x * _LOG2E + 0.5)
    r = x - kf * _LN2_HI - kf * _LN2_LO
    q = 1.0 + r * (1.0 + r * (1 / 2 + r * (1 / 6 + r * (1 / 24 + r * (
        1 / 120 + r * (1 / 720 + r * (1 / 5040 + r * (1 / 40320 + r * (
            1 / 362880 + r * (1 / 3628800 + r * (1 / 39916800 + r * (
                1 / 479001600))))))))))))
    return (q if x > -708.0 else 0.0), kf  # flush underflow to 0


@register_jitable(inline="always", fastmath=_config.FASTMATH)
def _exp32(e, degree):
    """``exp(e)``, ``e <= 0``, computed in float32 as ``(p, k)`` with ``exp(e) = p * 2^k`` (``k``
    an integral float32), ``p`` a polynomial of ``degree`` 6 or 7 (a constant of the caller); ``p``
    is 0 below -87, where ``2^k`` would not be normal."""
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
    c7 = np.float32(1 / 5040)
    x = max(e, lo)  # keeps 2^k normal; below lo the result is 0
    kf = np.floor(x * log2e + half)
    r = x - kf * lnhi - kf * lnlo
    if degree == 7:
        q = one + r * (one + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * (c6 + r * c7))))))
    else:
        q = one + r * (one + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))))
    return (q if x > lo else zero), kf


@register_jitable(inline="always", fastmath=_config.FASTMATH)
def _pow2_64(kf):
    """``2^kf`` (``kf`` an integral float64, -1022 <= kf <= 0) as the bits of a float64."""
    return (np.int64(kf) + 1023) << 52


@register_jitable(inline="always", fastmath=_config.FASTMATH)
def _pow2_32(kf):
    """``2^kf`` (``kf`` an integral float32, -126 <= kf <= 0) as the bits of a float32."""
    return (np.int32(kf) + np.int32(127)) << np.int32(23)


def _exp(x, degree):  # pragma: no cover - replaced by the overload below in numba
    """``(p, k)`` of ``exp(x)`` in x's precision: :func:`_exp32` with ``degree``, or
    :func:`_exp64` (float64 has one polynomial, whatever the degree)."""
    raise NotImplementedError


@overload(_exp, inline="always", jit_options={"fastmath": _config.FASTMATH})
def _exp_overload(x, degree):
    if x == types.float32:
        return lambda x, degree: _exp32(x, degree)
    return lambda x, degree: _exp64(x)


def _pow2(kf):  # pragma: no cover - replaced by the overload below in numba
    """:func:`_pow2_32` or :func:`_pow2_64`, by the precision of ``kf``."""
    raise NotImplementedError


@overload(_pow2, inline="always", jit_options={"fastmath": _config.FASTMATH})
def _pow2_overload(kf):
    if kf == types.float32:
        return lambda kf: _pow2_32(kf)
    return lambda kf: _pow2_64(kf)


def _typed(a, value):  # pragma: no cover - replaced by the overload below in numba
    """``value`` as a scalar of a's dtype (float32 arithmetic stays float32)."""
    raise NotImplementedError


@overload(_typed, inline="always", jit_options={"fastmath": _config.FASTMATH})
def _typed_overload(a, value):
    if a.dtype == types.float32:
        return lambda a, value: np.float32(value)
    return lambda a, value: np.float64(value)


# ----------------------------------------------------------------- the Nystroem map's form


@njit(**_JIT)
def _gauss_from_gram(
    xsq,  # IN  (b,) float32/float64: ||x_i||^2
    usq,  # IN  (v,) K's dtype: ||u_j||^2
    bits,  # IN  (v,) int32 (float32 K) / int64 (float64 K) scratch row (contents ignored)
    K,  # INOUT (b, v) float32/float64: x_i . u_j in, exp(-gamma ||x_i - u_j||^2) out
    gamma,  # scalar > 0
):
    """Turn a Gram block into the Gaussian kernel block in place, in K's precision."""
    b, v = K.shape
    scale = bits.view(K.dtype)
    g = _typed(K, gamma)
    two = _typed(K, 2.0)
    zero = _typed(K, 0.0)
    for i in range(b):
        xi = xsq[i]
        row = K[i]
        for j in range(v):
            d2 = xi + usq[j] - two * row[j]
            d2 = max(d2, zero)  # rounding can leave tiny negatives
            row[j], kf = _exp(-g * d2, 7)  # degree 7 in float32: the map's polynomial
            bits[j] = _pow2(kf)
        for j in range(v):
            row[j] *= scale[j]


# ------------------------------------------------------------ the kernel-basis form


@register_jitable(inline="always", fastmath=_config.FASTMATH)
def _exp_split(
    g,  # IN  (n,) float32/float64: exponents, a few maybe rounded just above 0
    p,  # OUT (n,) g's dtype (may be g itself): the polynomial parts of exp(min(g, 0))
    bits,  # OUT (n,) int32 / int64: the powers of two, as float bits
):
    """``exp(min(g[j], 0)) = p[j] * bits[j].view(float)``: the caller folds the product into
    its own loop."""
    n = g.shape[0]
    zero = _typed(g, 0.0)
    for j in range(n):
        p[j], kf = _exp(min(g[j], zero), 6)  # degree 6 in float32: the products' polynomial
        bits[j] = _pow2(kf)


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
