"""Numba kernels of the exact AUC / ROC computation (:mod:`daskauc.metrics`).

A *run list* is the compressed histogram of a set of scores: strictly increasing distinct
values ``v`` with, for each value, the number of positive (``p``) and negative (``n``) rows
holding it. Merging two run lists is a linear two-pointer merge that adds the counts of
values present in both; that is how per-chunk histograms become one per bucket.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _config


@njit(nogil=True, cache=True, fastmath=_config.FASTMATH)
def _merge_runs(
    va,  # IN  (a,) strictly increasing values
    pa,  # IN  (a,) int64 positive counts
    na,  # IN  (a,) int64 negative counts
    vb,  # IN  (b,) strictly increasing values, same dtype as va
    pb,  # IN  (b,) int64 positive counts
    nb,  # IN  (b,) int64 negative counts
    out_v,  # OUT (>= a + b,) merged distinct values
    out_p,  # OUT (>= a + b,) int64
    out_n,  # OUT (>= a + b,) int64
):
    """Merge two run lists into ``out_*``; return the number of merged runs written."""
    a = va.shape[0]
    b = vb.shape[0]
    i = 0
    j = 0
    k = 0
    while i < a and j < b:
        x = va[i]
        z = vb[j]
        if x < z:
            out_v[k] = x
            out_p[k] = pa[i]
            out_n[k] = na[i]
            i += 1
        elif z < x:
            out_v[k] = z
            out_p[k] = pb[j]
            out_n[k] = nb[j]
            j += 1
        else:
            out_v[k] = x
            out_p[k] = pa[i] + pb[j]
            out_n[k] = na[i] + nb[j]
            i += 1
            j += 1
        k += 1
    while i < a:
        out_v[k] = va[i]
        out_p[k] = pa[i]
        out_n[k] = na[i]
        i += 1
        k += 1
    while j < b:
        out_v[k] = vb[j]
        out_p[k] = pb[j]
        out_n[k] = nb[j]
        j += 1
        k += 1
    return k


@njit(nogil=True, cache=True, fastmath=_config.FASTMATH)
def _twice_u_statistic(
    p,  # IN (r,) int64 positive counts of the runs, in increasing order of value
    n,  # IN (r,) int64 negative counts of the runs
):
    """Return ``2 U`` = sum over runs of ``p_r (2 * negatives below r + n_r)`` (int64).

    ``U`` is the Mann-Whitney statistic with ties counting one half, so doubling it keeps the
    whole computation in integers.
    """
    below = np.int64(0)
    total = np.int64(0)
    for r in range(p.shape[0]):
        total += p[r] * (2 * below + n[r])
        below += n[r]
    return total
