"""Numba kernels of OAM and Uni-Exp / Uni-Squ on sparse (CSR) chunks: one chunk per call.

The sparse counterparts of :mod:`daskauc.solvers._online_kernels`: the same updates, the
same random arrays from the Python drivers, float64 arithmetic; a row costs its non-zeros,
never the number of features ``d``. A chunk arrives as its CSR arrays ``(indptr, indices,
data)`` (canonical: sorted indices, no duplicates; :mod:`daskauc._sparse`).

The lazy weight vector
----------------------
Where a solver decays ``w`` (``w <- (1 - eta lam) w``) or adds a dense drift vector (parallel
chains, :func:`daskauc.engine.chains.chain_frame`), ``w`` is kept as ``a v + c drift`` with
scalars ``a``, ``c`` and a dense ``v`` touched only at a row's non-zeros (the sparse SGD
literature's scaled weight vector: Shalev-Shwartz et al.'s Pegasos, Bottou's svmsgd). The
running sum of the iterates that an average needs is kept as ``alpha v + gamma drift + acc``:
an iterate added to it adds ``a`` to ``alpha`` and ``c`` to ``gamma``; a change ``dv`` of
``v`` at a few features subtracts ``alpha dv`` from ``acc`` there (Xu 2011's lazy averaging).
Both are exact algebra; the O(d) fold :func:`_lazy_fold` (``v <- a v + c drift``,
``acc <- acc + alpha v + gamma drift``) runs when ``|a|`` drops below :data:`RENORM`
(:data:`AVERAGE_RENORM` while averaging; or reaches 0) and once at the end of a chunk,
when ``v`` is ``w`` and ``acc`` the sum.
The scalars travel in ``scal = [a, c, alpha, gamma]``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._config import FASTMATH

#: fold the scale into ``v`` when ``|a|`` falls below this (Bottou's svmsgd: 1e-9)
RENORM = 1e-9
#: the same while a sum of iterates is kept: ``alpha v + acc`` cancels about ``1 / |a|``
#: of its digits (1e-9 lost 1e-9 of the average, relative, under a strong decay; 1e-3 keeps
#: it near 1e-13 and folds every ``log(1e3) / (eta lam)`` steps of a geometric decay)
AVERAGE_RENORM = 1e-3


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _sparse_dot(
    v,          # IN  (d,) float64 dense vector
    indices,    # IN  column indices of a CSR block
    data,       # IN  values of a CSR block
    lo,         # scalar: the row's first non-zero
    hi,         # scalar: one past its last
):
    """``v . x`` for the row ``x`` stored at ``[lo, hi)`` of a CSR block."""
    s = 0.0
    for k in range(lo, hi):
        s += v[indices[k]] * np.float64(data[k])
    return s


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _lazy_add(
    step,       # scalar: w += step * x
    indices,    # IN  column indices of a CSR block
    data,       # IN  values of a CSR block
    lo,         # scalar: the row's first non-zero
    hi,         # scalar: one past its last
    v,          # INOUT (d,) float64: w = a v + c drift
    acc,        # INOUT (d,) or (0,) float64: sum = alpha v + gamma drift + acc
    scal,       # IN  (4,) float64 [a, c, alpha, gamma]
):
    """``w += step x`` in the lazy form, at the row's non-zeros (the sum unchanged)."""
    coef = step / scal[0]
    alpha = scal[2]
    averaging = acc.shape[0] > 0
    for k in range(lo, hi):
        dv = coef * np.float64(data[k])
        f = indices[k]
        v[f] += dv
        if averaging:
            acc[f] -= alpha * dv


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _lazy_fold(
    v,          # INOUT (d,) float64: becomes w
    acc,        # INOUT (d,) or (0,) float64: becomes the sum of the iterates
    drift,      # IN  (>= d,) or (0,) float64: the drift (its first d entries)
    scal,       # INOUT (4,) float64 [a, c, alpha, gamma] -> [1, 0, 0, 0]
):
    """``v <- a v + c drift``, ``acc <- acc + alpha v + gamma drift`` (O(d), exact)."""
    a = scal[0]
    c = scal[1]
    alpha = scal[2]
    gamma = scal[3]
    averaging = acc.shape[0] > 0
    drifting = drift.shape[0] > 0
    for f in range(v.shape[0]):
        x = v[f]
        dr = drift[f] if drifting else 0.0
        if averaging:
            acc[f] += alpha * x + gamma * dr
        v[f] = a * x + c * dr
    scal[0] = 1.0
    scal[1] = 0.0
    scal[2] = 0.0
    scal[3] = 0.0


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _lazy_scale(
    factor,     # scalar: w <- factor w
    v,          # INOUT (d,) float64
    acc,        # INOUT (d,) or (0,) float64
    drift,      # IN  (>= d,) or (0,) float64
    scal,       # INOUT (4,) float64 [a, c, alpha, gamma]
):
    """``w <- factor w``: O(1), or the O(d) fold when ``|a|`` gets below :data:`RENORM`
    (:data:`AVERAGE_RENORM` while a sum of iterates is kept)."""
    scal[0] *= factor
    scal[1] *= factor
    if abs(scal[0]) < (AVERAGE_RENORM if acc.shape[0] > 0 else RENORM):
        _lazy_fold(v, acc, drift, scal)


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _oam_sparse_chunk(
    indptr,     # IN  (m+1,) CSR row pointers of the chunk
    indices,    # IN  (nnz,) CSR column indices (sorted within a row)
    data,       # IN  (nnz,) float32/float64 CSR values
    y,          # IN  (m,) int8 labels in {-1, +1}
    order,      # IN  (s,) int64 rows in visiting order
    u,          # IN  (s,) float64 uniforms: reservoir acceptance, one per visit
    slot,       # IN  (s,) int64 in [0, K): reservoir slot replaced, one per visit
    w,          # INOUT (d,) float64 current iterate (touched at non-zeros only)
    acc,        # INOUT (d,) or (0,) float64: the chunk's sum of iterates is alpha w + acc
    alpha,      # INOUT (1,) float64 (see acc)
    starts,     # INOUT (2, K) int64 first pool position of each slot, [negatives, positives]
    lens,       # INOUT (2, K) int64 non-zeros of each slot
    pool_idx,   # INOUT (2, P) int64 column indices of the buffered rows
    pool_val,   # INOUT (2, P) float64 values of the buffered rows
    ends,       # INOUT (2,) int64 first free pool position of each class
    counts,     # INOUT (2,) int64 [negatives seen, positives seen]
    g,          # INOUT (d,) float64 zeros: OAMgra's gradient scratch (left zero)
    mark,       # INOUT (d,) int8 zeros: OAMgra's touched flags (left zero)
    touched,    # INOUT (>= touched features,) int64 scratch
    C,          # scalar: penalty C
    eta,        # scalar: step size of OAMgra
    gradient,   # scalar: False for OAMseq, True for OAMgra
    average,    # scalar: keep the sum of the iterates (acc, alpha)
):
    """:func:`daskauc.solvers._online_kernels._oam_chunk` on a CSR chunk.

    A buffered row lives in its class's pool at ``[starts, starts + lens)``; a row entering
    the reservoir is appended at ``ends`` (the caller sized the pool for every row of the
    chunk) and its slot points there. ``w.(x_t - x)`` and ``||x_t - x||^2`` are sums over the
    merge of the two sorted index lists, in the dense kernel's order over the features, and
    the step adds ``step (x_t - x)`` at their union: the dense kernel's arithmetic, feature
    for feature, at the features where either row is non-zero (where both are zero it adds
    zeros). Cost per row: O(sum over the buffer of nnz(x_t) + nnz(x)).
    """
    K = starts.shape[1]
    a = alpha[0]
    averaging = average and acc.shape[0] > 0
    for s in range(order.shape[0]):
        i = order[s]
        lo = indptr[i]
        hi = indptr[i + 1]
        if y[i] > 0:
            yt = 1.0
            own_c = 1
        else:
            yt = -1.0
            own_c = 0
        opp_c = 1 - own_c
        n_opp = counts[opp_c]
        n_fill = min(n_opp, K)
        if n_fill > 0:
            ct = C * max(1.0, n_opp / K)
            if not gradient:
                for j in range(n_fill):
                    b0 = starts[opp_c, j]
                    b1 = b0 + lens[opp_c, j]
                    dot = 0.0
                    nrm = 0.0
                    p = lo
                    q = b0
                    while p < hi or q < b1:
                        if q >= b1 or (p < hi and indices[p] < pool_idx[opp_c, q]):
                            f = indices[p]
                            diff = np.float64(data[p])
                            p += 1
                        elif p >= hi or pool_idx[opp_c, q] < indices[p]:
                            f = pool_idx[opp_c, q]
                            diff = -pool_val[opp_c, q]
                            q += 1
                        else:
                            f = indices[p]
                            diff = np.float64(data[p]) - pool_val[opp_c, q]
                            p += 1
                            q += 1
                        dot += w[f] * diff
                        nrm += diff * diff
                    loss = 1.0 - yt * dot
                    if loss > 0.0 and nrm > 0.0:
                        tau = min(0.5 * ct, loss / nrm)
                        step = tau * yt
                        p = lo
                        q = b0
                        while p < hi or q < b1:
                            if q >= b1 or (p < hi and indices[p] < pool_idx[opp_c, q]):
                                f = indices[p]
                                diff = np.float64(data[p])
                                p += 1
                            elif p >= hi or pool_idx[opp_c, q] < indices[p]:
                                f = pool_idx[opp_c, q]
                                diff = -pool_val[opp_c, q]
                                q += 1
                            else:
                                f = indices[p]
                                diff = np.float64(data[p]) - pool_val[opp_c, q]
                                p += 1
                                q += 1
                            w[f] += step * diff
                            if averaging:
                                acc[f] -= a * step * diff
            else:
                n_touched = 0
                n_viol = 0
                for j in range(n_fill):
                    b0 = starts[opp_c, j]
                    b1 = b0 + lens[opp_c, j]
                    dot = _sparse_dot(w, indices, data, lo, hi)
                    for q in range(b0, b1):
                        dot -= w[pool_idx[opp_c, q]] * pool_val[opp_c, q]
                    if 1.0 - yt * dot > 0.0:
                        n_viol += 1
                        # g += x_t - x over the union (the dense kernel's sum, feature-wise)
                        p = lo
                        q = b0
                        while p < hi or q < b1:
                            if q >= b1 or (p < hi and indices[p] < pool_idx[opp_c, q]):
                                f = indices[p]
                                diff = np.float64(data[p])
                                p += 1
                            elif p >= hi or pool_idx[opp_c, q] < indices[p]:
                                f = pool_idx[opp_c, q]
                                diff = -pool_val[opp_c, q]
                                q += 1
                            else:
                                f = indices[p]
                                diff = np.float64(data[p]) - pool_val[opp_c, q]
                                p += 1
                                q += 1
                            if mark[f] == 0:
                                mark[f] = 1
                                touched[n_touched] = f
                                n_touched += 1
                            g[f] += diff
                step = eta * ct * yt
                for k in range(n_touched):
                    f = touched[k]
                    if n_viol > 0:
                        w[f] += step * g[f]
                        if averaging:
                            acc[f] -= a * step * g[f]
                    g[f] = 0.0
                    mark[f] = 0
        counts[own_c] += 1
        if averaging:
            a += 1.0
        k = counts[own_c]
        if k <= K:
            r = k - 1
        elif u[s] < K / k:
            r = slot[s]
        else:
            continue
        e = ends[own_c]
        if e + hi - lo > pool_idx.shape[1]:
            raise IndexError("OAM reservoir pool too small for the chunk's entering rows")
        for p in range(lo, hi):
            pool_idx[own_c, e] = indices[p]
            pool_val[own_c, e] = np.float64(data[p])
            e += 1
        starts[own_c, r] = ends[own_c]
        lens[own_c, r] = hi - lo
        ends[own_c] = e
    alpha[0] = a


@njit(nogil=True, cache=True)
def _offer_own_sparse(
    indptr,     # IN  (m+1,) CSR row pointers of the chunk
    indices,    # IN  CSR column indices
    data,       # IN  CSR values
    y,          # IN  (m,) int8 labels in {-1, +1}
    order,      # IN  (m,) int64 visiting order
    u,          # IN  (m,) float64 uniform draws of the visit
    slot,       # IN  (m,) int64 replacement slots of the visit
    starts,     # INOUT (2, K) int64 slots of this chain's own reservoirs (as _oam_sparse_chunk)
    lens,       # INOUT (2, K) int64
    pool_idx,   # INOUT (2, P) int64
    pool_val,   # INOUT (2, P) float64
    ends,       # INOUT (2,) int64
    own_counts, # INOUT (2,) int64 [own negatives, own positives] seen
):
    """:func:`daskauc.solvers._online_kernels._offer_own_rows` on a CSR chunk."""
    K = starts.shape[1]
    for s in range(order.shape[0]):
        i = order[s]
        c = 1 if y[i] > 0 else 0
        own_counts[c] += 1
        k = own_counts[c]
        if k <= K:
            r = k - 1
        elif u[s] * k < K:
            r = slot[s]
        else:
            continue
        e = ends[c]
        if e + indptr[i + 1] - indptr[i] > pool_idx.shape[1]:
            raise IndexError("OAM reservoir pool too small for the chunk's entering rows")
        starts[c, r] = e
        lens[c, r] = indptr[i + 1] - indptr[i]
        for p in range(indptr[i], indptr[i + 1]):
            pool_idx[c, e] = indices[p]
            pool_val[c, e] = np.float64(data[p])
            e += 1
        ends[c] = e


@njit(nogil=True, cache=True)
def _compact_slots(
    starts,     # IN  (K,) int64 one class's slots
    lens,       # IN  (K,) int64
    pool_idx,   # IN  (P,) int64 that class's pool
    pool_val,   # IN  (P,) float64
    indptr,     # OUT (K+1,) int64 CSR row pointers of the K slots
    indices,    # OUT (sum lens,) int64
    data,       # OUT (sum lens,) float64
):
    """The slots of one class's pool as a compact CSR of ``K`` rows."""
    e = 0
    indptr[0] = 0
    for j in range(starts.shape[0]):
        for q in range(starts[j], starts[j] + lens[j]):
            indices[e] = pool_idx[q]
            data[e] = pool_val[q]
            e += 1
        indptr[j + 1] = e


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _univariate_sparse_chunk(
    indptr,     # IN  (m+1,) CSR row pointers of the chunk
    indices,    # IN  (nnz,) CSR column indices
    data,       # IN  (nnz,) float32/float64 CSR values
    y,          # IN  (m,) int8 labels in {-1, +1}
    order,      # IN  (s,) int64 rows in visiting order
    drift,      # IN  (d + 1,) or (0,) float64: added to (w, b) every `every` steps
    v,          # INOUT (d,) float64: w = a v + c drift (w on entry with scal [1, 0, 0, 0])
    acc,        # INOUT (d,) or (0,) float64: sum of the iterates = alpha v + gamma drift + acc
    scal,       # INOUT (4,) float64 [a, c, alpha, gamma]
    offset,     # INOUT (2,) float64 [b, bbar]
    counts,     # INOUT (2,) int64 [t = steps done, positives seen]
    clock,      # INOUT (1,) float64 steps of the sequential run the steps stand for
    eta0,       # scalar: initial step
    constant,   # scalar: True for eta_t = eta0, False for eta_t = eta0 / sqrt(clock)
    lam,        # scalar: L2 penalty on w
    loss,       # scalar: LOSS_EXP (0) or LOSS_SQUARE (1)
    average,    # scalar: keep the sum of the iterates and bbar
    stride,     # scalar: clock advance per step (one chain: 1)
    gain,       # scalar: step multiplier (one chain: 1)
    every,      # scalar: steps between drifts
):
    """:func:`daskauc.solvers._online_kernels._univariate_chunk` on a CSR chunk, with ``w``
    in the lazy form (module docstring): the step ``w <- (1 - eta lam) w - eta g x`` scales
    ``a`` (and ``c``) and adds ``-eta g x / a`` to ``v`` at the row's non-zeros; a drift adds
    1 to ``c``; each step adds the iterate to the sum (``alpha += a``, ``gamma += c``). The
    caller folds at the end (:func:`_lazy_fold`): then ``v`` is ``w`` and ``acc`` the sum of
    this chunk's iterates."""
    d = v.shape[0]
    t = counts[0]
    n_pos = counts[1]
    b = offset[0]
    bbar = offset[1]
    c = clock[0]
    drifting = drift.shape[0] > 0
    for s in range(order.shape[0]):
        i = order[s]
        lo = indptr[i]
        hi = indptr[i + 1]
        t += 1
        c += stride
        if y[i] > 0:
            yt = 1.0
            n_pos += 1
            weight = t / n_pos
        else:
            yt = -1.0
            weight = t / (t - n_pos)
        score = b + scal[0] * _sparse_dot(v, indices, data, lo, hi)
        if drifting and scal[1] != 0.0:
            score += scal[1] * _sparse_dot(drift, indices, data, lo, hi)
        if loss == 0:
            dl = -yt * math.exp(-yt * score)
        else:
            dl = -2.0 * yt * (1.0 - yt * score)
        gs = weight * dl
        if constant:
            eta = gain * eta0
        else:
            eta = gain * eta0 / math.sqrt(c)
        if lam != 0.0:
            _lazy_scale(1.0 - eta * lam, v, acc, drift, scal)
        _lazy_add(-eta * gs, indices, data, lo, hi, v, acc, scal)
        b -= eta * gs
        if drifting and t % every == 0:
            scal[1] += 1.0
            b += drift[d]
        if average:
            scal[2] += scal[0]
            scal[3] += scal[1]
            bbar += (b - bbar) / t
    counts[0] = t
    counts[1] = n_pos
    offset[0] = b
    offset[1] = bbar
    clock[0] = c


@njit(nogil=True, cache=True)
def _sum_of_average(
    wbar,       # IN  (r,) float64: the average over q0 iterates
    q0,         # scalar: iterates in wbar
):
    """``q0 wbar`` as a new vector: the sum a chunk's lazy sum of iterates adds to, so that one
    new d-vector holds both (:func:`_average_of_sum` ends it): beside a sum started at 0,
    one d-vector less at the step's peak (128 MiB at 2**24 features)."""
    out = np.empty_like(wbar)
    for k in range(wbar.shape[0]):
        out[k] = q0 * wbar[k]
    return out


@njit(nogil=True, cache=True)
def _average_of_sum(
    total,      # INOUT (r,) float64: the sum of q iterates -> their average
    q,          # scalar: iterates in the sum (> 0)
):
    """``total <- total / q``, in place; returns it."""
    inv = 1.0 / q
    for k in range(total.shape[0]):
        total[k] *= inv
    return total


@njit(nogil=True, cache=True)
def _add_scaled(
    total,      # INOUT (r,) float64
    a,          # scalar
    x,          # IN  (r,) float64
):
    """``total <- total + a x``, in place (no temporary d-vector); returns it."""
    for k in range(total.shape[0]):
        total[k] += a * x[k]
    return total
