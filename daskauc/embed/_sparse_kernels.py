"""Numba kernels of k-means and its seedings on sparse rows (CSR: ``indptr, indices, data``).

The sparse twins of :mod:`daskauc.embed._kernels`: the same loops, with a row read as its
non-zeros (indices sorted within a row, no duplicates: :mod:`daskauc._sparse`). Pure functions
over arrays and scalars; argument order inputs / outputs / state / scalars. Sums in float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _config

_JIT = dict(nogil=True, cache=True, fastmath=_config.FASTMATH)


@njit(**_JIT)
def _sparse_squared_distance(
    indptr,  # IN  (m + 1,) int: row pointers of S
    indices,  # IN  (nnz,) int: column indices, sorted within a row
    data,  # IN  (nnz,) float32/float64: values
    i,  # scalar int: a row of S
    j,  # scalar int: another row of S
):
    """``||s_i - s_j||^2`` from the differences (a merge of the two sorted index lists), so
    near-duplicate rows are near 0 without cancellation, as the dense kernel."""
    a, a_end = indptr[i], indptr[i + 1]
    b, b_end = indptr[j], indptr[j + 1]
    s = 0.0
    while a < a_end and b < b_end:
        ca, cb = indices[a], indices[b]
        if ca == cb:
            v = np.float64(data[a]) - np.float64(data[b])
            a += 1
            b += 1
        elif ca < cb:
            v = np.float64(data[a])
            a += 1
        else:
            v = np.float64(data[b])
            b += 1
        s += v * v
    while a < a_end:
        v = np.float64(data[a])
        s += v * v
        a += 1
    while b < b_end:
        v = np.float64(data[b])
        s += v * v
        b += 1
    return s


@njit(**_JIT)
def _sparse_dot(
    indptr,  # IN  (m + 1,) int: row pointers of S
    indices,  # IN  (nnz,) int: column indices, sorted within a row
    data,  # IN  (nnz,) float32/float64
    i,  # scalar int: a row of S
    j,  # scalar int: another row of S
):
    """``s_i . s_j`` in float64 (a merge of the two sorted index lists)."""
    a, a_end = indptr[i], indptr[i + 1]
    b, b_end = indptr[j], indptr[j + 1]
    s = 0.0
    while a < a_end and b < b_end:
        ca, cb = indices[a], indices[b]
        if ca == cb:
            s += np.float64(data[a]) * np.float64(data[b])
            a += 1
            b += 1
        elif ca < cb:
            a += 1
        else:
            b += 1
    return s


@njit(**_JIT)
def _sparse_gram(
    indptr,  # IN  (m + 1,) int
    indices,  # IN  (nnz,) int
    data,  # IN  (nnz,) float32/float64
    rows,  # IN  (j,) int64: rows of S (the chosen centres)
    cand,  # IN  (t,) int64: rows of S (the candidates)
    G,  # OUT (j, t) float64: s_rows[a] . s_cand[c]
):
    """The products of the chosen centres with the candidates (:func:`_sparse_dot`)."""
    for a in range(rows.shape[0]):
        for c in range(cand.shape[0]):
            G[a, c] = _sparse_dot(indptr, indices, data, rows[a], cand[c])


@njit(**_JIT)
def _kpp_gains_sparse(
    indptr,  # IN  (m + 1,) int: the rows seeded from (CSR)
    indices,  # IN  (nnz,) int
    data,  # IN  (nnz,) float32/float64
    cand,  # IN  (t,) int64: rows drawn as candidates y_c
    G,  # IN  (j, t) float64: c_a . y_c for the j centres chosen so far
    csq,  # IN  (>= j,) float64: ||c_a||^2
    ysq,  # IN  (t,) float64: ||y_c||^2
    assign,  # IN  (m,) int32: the nearest chosen centre a(i) of each row
    closest,  # IN  (m,) float64: D_i^2 = ||x_i - c_a(i)||^2
    gains,  # OUT (t,) float64: sum_i min(0, ||x_i - y_c||^2 - D_i^2) (<= 0)
    gap,  # OUT (>= j,) float64 scratch: min_c ||c_a - y_c||^2
):
    """:func:`daskauc.embed._kernels._kpp_gains` on CSR rows: the same bounds and skips, the
    distances by :func:`_sparse_squared_distance`."""
    m = indptr.shape[0] - 1
    t = cand.shape[0]
    j = G.shape[0]
    for a in range(j):
        v = np.inf
        for c in range(t):
            v = min(v, csq[a] + ysq[c] - 2.0 * G[a, c])
        gap[a] = v
    for c in range(t):
        gains[c] = 0.0
    for i in range(m):
        a = assign[i]
        di = closest[i]
        lim = 4.0 * di
        if gap[a] < lim:
            for c in range(t):
                if csq[a] + ysq[c] - 2.0 * G[a, c] < lim:
                    v = _sparse_squared_distance(indptr, indices, data, i, cand[c])
                    if v < di:
                        gains[c] += v - di


@njit(**_JIT)
def _kpp_accept_sparse(
    indptr,  # IN  (m + 1,) int: the rows seeded from (CSR)
    indices,  # IN  (nnz,) int
    data,  # IN  (nnz,) float32/float64
    g,  # IN  (j,) float64: c_a . y for the centres chosen before it (any stride)
    csq,  # IN  (>= j,) float64: ||c_a||^2
    cumsum,  # OUT (m,) float64: running sums of the new D_i^2 (the D^2 sampling table)
    assign,  # INOUT (m,) int32: nearest chosen centre of each row
    closest,  # INOUT (m,) float64: squared distance to it (inf before the first centre)
    y,  # scalar int: the row of S that is the new centre
    ysq,  # scalar float64: ||y||^2
    j,  # scalar int: index of the new centre
):
    """:func:`daskauc.embed._kernels._kpp_accept` on CSR rows (the new centre is row ``y``)."""
    s = 0.0
    for i in range(closest.shape[0]):
        di = closest[i]
        a = assign[i]
        if csq[a] + ysq - 2.0 * g[a] < 4.0 * di:
            v = _sparse_squared_distance(indptr, indices, data, i, y)
            if v < di:
                closest[i] = v
                assign[i] = j
                di = v
        s += di
        cumsum[i] = s


@njit(**_JIT)
def _sculley_update_sparse(
    indptr,  # IN  (b + 1,) int: the mini-batch rows (CSR)
    indices,  # IN  (nnz,) int
    data,  # IN  (nnz,) float32/float64
    labels,  # IN  (b,) int64: nearest centre of each row (computed before any move)
    VT,  # INOUT (d, k) float64: centre j is scale[j] * VT[:, j] (0 for unassigned ones)
    scale,  # INOUT (k,) float64: the centres' lazy scales
    vsq,  # INOUT (k,) float64: ||VT[:, j]||^2, kept up to date
    counts,  # INOUT (k,) int64: rows assigned so far to each centre (all epochs)
):
    """Sculley's move ``c <- c + (x - c) / count`` on a lazily scaled centre, in O(nnz(x)).

    With ``c = s v``, ``(1 - eta) c + eta x = s' (v + (eta / s') x)`` with ``s' = (1 - eta) s``:
    the scale takes the shrink and only the row's non-zeros of ``v`` move. A centre's first
    row (``count = 1``, ``eta = 1``) replaces it: ``v = x``, ``s = 1``; its column of ``VT``
    must be zero already (:func:`_zero_columns` before the batch: one pass for all of them).
    ``s`` is a ratio of counts (at least 1 / (rows in the chunk + 1)): it never underflows.
    """
    for i in range(labels.shape[0]):
        c = labels[i]
        counts[c] += 1
        if counts[c] == 1:
            s2 = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                x = np.float64(data[p])
                VT[indices[p], c] = x
                s2 += x * x
            scale[c] = 1.0
            vsq[c] = s2
            continue
        eta = 1.0 / counts[c]
        scale[c] *= 1.0 - eta
        step = eta / scale[c]
        s2 = vsq[c]
        for p in range(indptr[i], indptr[i + 1]):
            f = indices[p]
            old = VT[f, c]
            new = old + step * np.float64(data[p])
            s2 += new * new - old * old
            VT[f, c] = new
        vsq[c] = s2


@njit(**_JIT)
def _scale_columns(
    scale,  # IN  (k,) float64
    VT,  # INOUT (d, k) float64: VT[:, j] *= scale[j]
):
    """Fold the lazy scales into the centres (row by row: one contiguous pass)."""
    d, k = VT.shape
    for f in range(d):
        for j in range(k):
            VT[f, j] *= scale[j]


@njit(**_JIT)
def _row_squares(
    indptr,  # IN  (b + 1,) int
    data,  # IN  (nnz,) float32/float64
    out,  # OUT (b,) float64: ||x_i||^2
):
    """Squared norms of CSR rows, summed in float64."""
    for i in range(out.shape[0]):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[p])
            s += v * v
        out[i] = s


@njit(**_JIT)
def _transpose_tiles(
    A,  # IN  (p, q) float32/float64, C-contiguous
    out,  # OUT (q, p) float32/float64, C-contiguous: A^T (cast to out's dtype)
):
    """``out = A^T`` in 64 x 64 tiles, so that both sides stay in cache (numpy's strided
    copy of a 1.7 GB transpose takes 5 s here, missing the cache on every write)."""
    p, q = A.shape
    for i0 in range(0, p, 64):
        i1 = min(i0 + 64, p)
        for j0 in range(0, q, 64):
            j1 = min(j0 + 64, q)
            for j in range(j0, j1):
                for i in range(i0, i1):
                    out[j, i] = A[i, j]


@njit(**_JIT)
def _zero_columns(
    cols,  # IN  (c,) int64: columns to clear, sorted
    VT,  # INOUT (d, k) float64: VT[:, cols] = 0
):
    """Clear some columns of a row-major matrix in one pass along its rows."""
    for f in range(VT.shape[0]):
        for c in cols:
            VT[f, c] = 0.0


@njit(**_JIT)
def _count_row_nonzeros(
    U,  # IN  (v, d) float64
    counts,  # OUT (v,) int64: non-zeros of each row
):
    for j in range(U.shape[0]):
        c = 0
        for f in range(U.shape[1]):
            if U[j, f] != 0.0:
                c += 1
        counts[j] = c


@njit(**_JIT)
def _fill_csr(
    U,  # IN  (v, d) float64
    indptr,  # IN  (v + 1,) int64: row pointers (from _count_row_nonzeros)
    indices,  # OUT (nnz,) int64: column indices, sorted within a row
    data,  # OUT (nnz,) float64
):
    """The non-zeros of a dense matrix in CSR order (one pass; numpy's ``nonzero`` takes two
    and a copy)."""
    for j in range(U.shape[0]):
        p = indptr[j]
        for f in range(U.shape[1]):
            if U[j, f] != 0.0:
                indices[p] = f
                data[p] = U[j, f]
                p += 1
