"""Exact AUC and ROC curves, for numpy arrays and, distributed, for dask arrays.

Both paths compute the Mann-Whitney statistic with ties counting one half, in integers, from a
compressed histogram of the scores: the distinct score values with the number of positive and
negative rows at each (a *run list*, see :mod:`daskauc._metrics_kernels`).

- numpy: each class is sorted once (``np.sort``), compressed into runs, and the two run lists
  are merged; O(n log n) time, O(n) memory, exact integer arithmetic.
- dask: a two-level bucket method that never brings every score into one task (see
  :func:`roc_auc`, Notes). One graph, one compute; layers are named ``daskauc-auc-*``.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from ._compute import compute
from ._labels import as_labels, label_classes
from ._metrics_kernels import _merge_runs, _twice_u_statistic
from ._params import Interval, check_param
from ._validation import float_dtype

#: target number of scores gathered into one bucket of the distributed AUC (about 100 MB of
#: runs in the worst case of all-distinct scores).
AUC_BUCKET_ROWS = 2**22

#: sample of the scores used to place the bucket boundaries: about this many values per
#: bucket, and never more than ``AUC_SAMPLE_MAX`` values in all.
AUC_SAMPLE_PER_BUCKET = 16
AUC_SAMPLE_MAX = 2**21

#: default bound on the number of points of a distributed ROC curve.
ROC_MAX_POINTS = 10_000

_INT64_MAX = np.iinfo(np.int64).max
_BOTH = np.array([False, True])  # labels of a validated numpy input (is_pos)


# --------------------------------------------------------------------------------------
# input checking
# --------------------------------------------------------------------------------------


def _scores_dtype(dtype: np.dtype) -> np.dtype:
    return float_dtype(np.dtype(dtype), "scores")


def _as_1d(a, name: str):
    if a.ndim == 2 and a.shape[1] == 1:
        a = a.ravel()
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,); got shape {a.shape}")
    return a


def _check_finite_scores(s: np.ndarray, offset: int = 0) -> None:
    if not np.isfinite(s).all():
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        what = "NaN" if np.isnan(s[i]) else "infinity"
        raise ValueError(
            f"scores contains {what} (first at index {offset + i}); AUC needs finite scores"
        )


def _check_lengths(n_y, n_s) -> None:
    if any(isinstance(v, float) and math.isnan(v) for v in (n_y, n_s)):
        raise ValueError(
            "y_true or scores has unknown chunk sizes; call .compute_chunk_sizes() first"
        )
    if n_y != n_s:
        raise ValueError(f"y_true has {n_y} labels but scores has {n_s} values; they must match")
    if n_s == 0:
        raise ValueError("y_true and scores are empty: AUC needs positive and negative rows")


def _dask_1d(a: da.Array, name: str) -> da.Array:
    a = _as_1d(a, name)
    if any(math.isnan(c) for c in a.chunks[0]):
        raise ValueError(
            f"{name} has unknown chunk sizes (typically after boolean indexing); "
            f"call {name}.compute_chunk_sizes() first"
        )
    return a


def _prepare(y_true, scores, pos_label):
    """Validate; return ``("numpy", s, is_pos)`` or ``("dask", s, y, pos_label)``."""
    y_dask = isinstance(y_true, da.Array)
    s_dask = isinstance(scores, da.Array)
    if not (y_dask or s_dask):
        s = _as_1d(np.asarray(scores), "scores")
        s = np.ascontiguousarray(s, dtype=_scores_dtype(s.dtype))
        y = _as_1d(np.asarray(y_true), "y_true")
        _check_lengths(y.shape[0], s.shape[0])
        _check_finite_scores(s)
        y_pm1, _ = as_labels(y, pos_label=pos_label, name="y_true")
        return "numpy", s, y_pm1 > 0

    if s_dask:
        s = _dask_1d(scores, "scores")
        s = s.astype(_scores_dtype(s.dtype))
    else:
        s = _as_1d(np.asarray(scores), "scores")
        s = np.asarray(s, dtype=_scores_dtype(s.dtype))
    if y_dask:
        y = _dask_1d(y_true, "y_true")
    else:
        y = _as_1d(np.asarray(y_true), "y_true")
    _check_lengths(y.shape[0], s.shape[0])
    if not s_dask:
        s = da.from_array(s, chunks=y.chunks, name=False)
    if y_dask:
        if y.chunks != s.chunks:
            y = y.rechunk(s.chunks)
    else:
        # labels known on the client: check them now, before any graph runs
        y_pm1, _ = as_labels(y, pos_label=pos_label, name="y_true")
        y = da.from_array(y_pm1, chunks=s.chunks, name=False)
        pos_label = None
    return "dask", s, y, pos_label


# --------------------------------------------------------------------------------------
# run lists
# --------------------------------------------------------------------------------------


def _sorted_runs(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values and multiplicities of a sorted array."""
    m = v.shape[0]
    if m == 0:
        return v, np.zeros(0, np.int64)
    starts = np.flatnonzero(np.concatenate(([True], v[1:] != v[:-1])))
    counts = np.diff(np.append(starts, m)).astype(np.int64)
    return v[starts], counts


def _merge(a, b):
    va, pa, na = a
    vb, pb, nb = b
    size = va.shape[0] + vb.shape[0]
    out_v = np.empty(size, dtype=va.dtype)
    out_p = np.empty(size, dtype=np.int64)
    out_n = np.empty(size, dtype=np.int64)
    k = _merge_runs(va, pa, na, vb, pb, nb, out_v, out_p, out_n)
    return out_v[:k], out_p[:k], out_n[:k]


def _merge_all(parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge run lists pairwise in a balanced tree: O(total * log(len(parts)))."""
    parts = [p for p in parts if p[0].shape[0]] or parts[:1]
    while len(parts) > 1:
        merged = [_merge(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            merged.append(parts[-1])
        parts = merged
    return parts[0]


def _sorted_by_label(s: np.ndarray, y: np.ndarray, labels: np.ndarray | None = None):
    """Sort the scores of each label of a block: ``(labels, [sorted scores of each label])``.

    At most two labels are allowed. A plain ``np.sort`` per class is much faster than one
    argsort of the block, and keeps the memory at one copy of the scores.
    """
    if labels is None:
        labels = np.unique(y)
    if labels.shape[0] > 2:
        raise ValueError(
            f"y_true has more than two classes (at least {labels.tolist()[:10]}); "
            "AUC is for binary labels"
        )
    if labels.shape[0] == 1:
        return labels, [np.sort(s)]
    return labels, [np.sort(s[y == lab]) for lab in labels]


def _joint_runs(pos_sorted: np.ndarray, neg_sorted: np.ndarray):
    """Run list ``(v, p, n)`` of sorted positive and sorted negative scores (linear time)."""
    vp, cp = _sorted_runs(pos_sorted)
    vn, cn = _sorted_runs(neg_sorted)
    return _merge((vp, cp, np.zeros_like(cp)), (vn, np.zeros_like(cn), cn))


def _twice_u(p: np.ndarray, n: np.ndarray) -> int:
    """``2 U`` as an exact Python int (int64 kernel unless that could overflow)."""
    total_p = int(p.sum())
    total_n = int(n.sum())
    if 2 * total_p * total_n + total_p < _INT64_MAX:
        return int(_twice_u_statistic(p, n))
    below = np.cumsum(n.astype(object)) - n.astype(object)
    return int(np.sum(p.astype(object) * (2 * below + n.astype(object))))


def _thin(v, p, n, n_pos: int, n_neg: int, budget: int):
    """Thin runs (increasing ``v``) so the ROC points kept are ~2/budget apart in fpr + tpr.

    Walking from the highest score down, a point is kept when ``fpr + tpr`` (over the
    runs given, normalized by the global class totals) crosses the next multiple of
    ``2 / budget``; the last run is always kept. Dropped runs are folded into the next kept
    one, so every kept point keeps its exact cumulative counts. At most ``budget + 1``
    runs remain (``budget <= 0`` keeps only the last).
    """
    r = v.shape[0]
    if r == 0:
        return v, p, n
    tp = np.cumsum(p[::-1])
    fp = np.cumsum(n[::-1])
    if budget > 0:
        arc = tp / max(n_pos, 1) + fp / max(n_neg, 1)
        cell = np.floor(arc * (budget / 2.0)).astype(np.int64)
        keep = np.flatnonzero(np.diff(np.concatenate(([0], cell))) > 0)
        if keep.shape[0] == 0 or keep[-1] != r - 1:
            keep = np.append(keep, r - 1)
    else:
        keep = np.array([r - 1])
    tp_k = tp[keep]
    fp_k = fp[keep]
    p_k = np.diff(np.concatenate(([0], tp_k)))
    n_k = np.diff(np.concatenate(([0], fp_k)))
    v_k = v[::-1][keep]
    return v_k[::-1].copy(), p_k[::-1].copy(), n_k[::-1].copy()


def _roc_points(v, p, n, drop_intermediate: bool):
    """Points of the ROC curve from runs, exactly as ``sklearn.metrics.roc_curve`` lists them.

    Returns ``(fps, tps, thresholds)`` without the leading (0, 0, +inf) point, in decreasing
    order of threshold.
    """
    thr = v[::-1].astype(np.float64)
    tps = np.cumsum(p[::-1])
    fps = np.cumsum(n[::-1])
    if drop_intermediate and fps.shape[0] > 2:
        corner = np.logical_or(np.diff(fps, 2) != 0, np.diff(tps, 2) != 0)
        keep = np.flatnonzero(np.concatenate(([True], corner, [True])))
        fps, tps, thr = fps[keep], tps[keep], thr[keep]
    return fps, tps, thr


def _finish_roc(fps, tps, thr):
    fps = np.concatenate(([0], fps)).astype(np.float64)
    tps = np.concatenate(([0], tps)).astype(np.float64)
    thr = np.concatenate(([np.inf], thr))
    return fps / fps[-1], tps / tps[-1], thr


# --------------------------------------------------------------------------------------
# the distributed graph
# --------------------------------------------------------------------------------------


def _chunk_task(s_block, y_block, offset: int, n_sample: int):
    """Per chunk: check the scores, sort each class; take an evenly spaced sample.

    Returns ``((labels, sorted scores per label), (labels, counts per label, sample values,
    sample weights))``; the second item is the small part the plan needs.
    """
    s = np.asarray(s_block).ravel()
    y = np.asarray(y_block).ravel()
    _check_finite_scores(s, offset)
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y_true contains NaN or infinity")
    labels, sorted_ = _sorted_by_label(s, y)
    m = s.shape[0]
    totals = np.array([a.shape[0] for a in sorted_], dtype=np.int64)
    sample_v, sample_w = [s[:0]], [np.zeros(0)]
    for a in sorted_:  # order statistics of each class, weighted by the rows they stand for
        k = min(a.shape[0], max(1, math.ceil(n_sample * a.shape[0] / max(m, 1))))
        if k:
            ranks = np.floor((np.arange(k) + 0.5) * (a.shape[0] / k)).astype(np.int64)
            sample_v.append(a[ranks])
            sample_w.append(np.full(k, a.shape[0] / k))
    return (labels, sorted_), (labels, totals, np.concatenate(sample_v), np.concatenate(sample_w))


def _plan_task(samples: list, n_buckets: int, pos_label):
    """Resolve the positive class and place ``n_buckets - 1`` boundaries at sample quantiles.

    Bucket ``b`` holds the scores in ``(bounds[b - 1], bounds[b]]`` (open-ended at both
    ends); boundaries are score values, so equal scores always share a bucket. Repeated
    boundaries (heavy ties) just leave empty buckets.
    """
    labels = np.unique(np.concatenate([smp[0] for smp in samples]))
    positives = label_classes(labels, pos_label)
    n_pos = n_neg = 0
    for lab, tot, _, _ in samples:
        is_pos = np.isin(lab, positives)
        n_pos += int(tot[is_pos].sum())
        n_neg += int(tot[~is_pos].sum())
    sv = np.concatenate([smp[2] for smp in samples])
    sw = np.concatenate([smp[3] for smp in samples])
    order = np.argsort(sv, kind="stable")
    sv, cw = sv[order], np.cumsum(sw[order])
    targets = cw[-1] * np.arange(1, n_buckets) / n_buckets
    idx = np.minimum(np.searchsorted(cw, targets, side="left"), sv.shape[0] - 1)
    return positives, sv[idx], n_pos, n_neg


def _split_task(chunk, plan, b: int):
    """The runs of one chunk that fall in bucket ``b``, as (values, n_pos, n_neg)."""
    labels, sorted_ = chunk
    positives, bounds = plan[0], plan[1]
    parts = {True: None, False: None}
    for lab, a in zip(labels, sorted_, strict=True):
        i0 = 0 if b == 0 else int(np.searchsorted(a, bounds[b - 1], side="right"))
        i1 = a.shape[0] if b == bounds.shape[0] else int(np.searchsorted(a, bounds[b], "right"))
        parts[bool(np.isin(lab, positives))] = a[i0:i1]
    empty = bounds[:0]
    pos = empty if parts[True] is None else parts[True]
    neg = empty if parts[False] is None else parts[False]
    return _joint_runs(pos, neg)


def _bucket_task(parts: list, plan, max_points):
    """Merge one bucket's runs from every chunk; its within-bucket ``2 U`` and class totals.

    With ``max_points`` (ROC), also return the merged runs, thinned when more than
    ``max_points`` (the flag says whether they were).
    """
    v, p, n = _merge_all(parts)
    out = (_twice_u(p, n), int(p.sum()), int(n.sum()))
    if max_points is None:
        return out
    thinned = v.shape[0] > max_points
    if thinned:
        v, p, n = _thin(v, p, n, plan[2], plan[3], max_points)
    return out + (v, p, n, thinned)


def _combine_u(buckets: list) -> tuple[int, int, int]:
    """``2 U`` of the whole data from per-bucket results in increasing order of score.

    Every positive in bucket ``b`` beats every negative of the buckets below it.
    """
    twice_u = below = n_pos = 0
    for u2, bp, bn in (bk[:3] for bk in buckets):
        twice_u += u2 + 2 * bp * below
        below += bn
        n_pos += bp
    return twice_u, n_pos, below


def _combine_auc_task(buckets: list):
    return _combine_u(buckets)


def _combine_roc_task(buckets: list, plan, drop_intermediate: bool, max_points: int):
    _, n_pos, n_neg = _combine_u(buckets)
    parts = [bk[3:6] for bk in buckets]
    v = np.concatenate([pt[0] for pt in parts])
    p = np.concatenate([pt[1] for pt in parts])
    n = np.concatenate([pt[2] for pt in parts])
    fps, tps, thr = _roc_points(v, p, n, drop_intermediate)
    if fps.shape[0] > max_points - 1:
        # back to runs of the surviving points, thin globally
        vk = thr[::-1]
        pk = np.diff(np.concatenate(([0], tps)))[::-1]
        nk = np.diff(np.concatenate(([0], fps)))[::-1]
        vk, pk, nk = _thin(vk, pk, nk, n_pos, n_neg, max_points - 2)
        fps, tps, thr = _roc_points(vk, pk, nk, drop_intermediate)
    return _finish_roc(fps, tps, thr)


def _default_buckets(n: int, n_chunks: int) -> int:
    return int(max(min(n_chunks, 4), math.ceil(n / AUC_BUCKET_ROWS)))


def _layer(name: str, layer: dict, deps: list, key) -> Delayed:
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return Delayed(key, graph, layer=name)


def _auc_graph(
    s: da.Array, y: da.Array, pos_label, n_buckets: int | None, *, roc: tuple | None = None
) -> Delayed:
    """Build the one-compute graph of the distributed AUC (or ROC when ``roc`` is given)."""
    n = int(s.shape[0])
    C = s.numblocks[0]
    B = int(n_buckets) if n_buckets is not None else _default_buckets(n, C)
    budget = min(AUC_SAMPLE_MAX, AUC_SAMPLE_PER_BUCKET * B * C)
    offsets = np.concatenate(([0], np.cumsum(s.chunks[0])))
    token = tokenize(s.name, y.name, pos_label, B, roc)

    chunk = f"daskauc-auc-chunk-{token}"
    layer = {
        (chunk, c): (
            _chunk_task,
            (s.name, c),
            (y.name, c),
            int(offsets[c]),
            max(1, math.ceil(budget * s.chunks[0][c] / n)),
        )
        for c in range(C)
    }
    chunks = _layer(chunk, layer, [s, y], (chunk, 0))

    sample = f"daskauc-auc-sample-{token}"
    layer = {(sample, c): (operator.getitem, (chunk, c), 1) for c in range(C)}
    samples = _layer(sample, layer, [chunks], (sample, 0))

    plan = f"daskauc-auc-plan-{token}"
    layer = {plan: (_plan_task, [(sample, c) for c in range(C)], B, pos_label)}
    plan_d = _layer(plan, layer, [samples], plan)

    split = f"daskauc-auc-split-{token}"
    layer = {
        (split, c, b): (_split_task, (operator.getitem, (chunk, c), 0), plan, b)
        for c in range(C)
        for b in range(B)
    }
    splits = _layer(split, layer, [chunks, plan_d], (split, 0, 0))

    bucket = f"daskauc-auc-bucket-{token}"
    max_points = None if roc is None else roc[1]
    layer = {
        (bucket, b): (_bucket_task, [(split, c, b) for c in range(C)], plan, max_points)
        for b in range(B)
    }
    buckets = _layer(bucket, layer, [splits, plan_d], (bucket, 0))

    if roc is None:
        final = f"daskauc-auc-combine-{token}"
        layer = {final: (_combine_auc_task, [(bucket, b) for b in range(B)])}
    else:
        final = f"daskauc-auc-roc-{token}"
        layer = {final: (_combine_roc_task, [(bucket, b) for b in range(B)], plan, roc[0], roc[1])}
    return _layer(final, layer, [buckets, plan_d], final)


# --------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------


def roc_auc(y_true: Any, scores: Any, *, pos_label=None, n_buckets: int | None = None) -> float:
    """Exact area under the ROC curve, ties counting one half; numpy or dask input.

    Parameters
    ----------
    y_true : array-like or dask array of shape (n_samples,)
        Labels with exactly two distinct values (any type: -1/+1, 0/1, strings ...).
    scores : array-like or dask array of shape (n_samples,)
        Finite real scores; higher means more likely positive. float32 and float64 are used
        as they are, integers and booleans as float64. If either input is a dask array the
        distributed method runs (the other is chunked like it).
    pos_label : scalar, optional
        The positive class. By default the larger of the two label values (scikit-learn's
        ``classes_[1]``): +1 of -1/+1, 1 of 0/1.
    n_buckets : int, optional
        Dask input only: number of score buckets (default: ``max(min(n_chunks, 4),
        ceil(n / AUC_BUCKET_ROWS))``). It changes only how the work is split, never the result.

    Returns
    -------
    float
        ``U / (n+ n-)``, equal to ``sklearn.metrics.roc_auc_score`` (to rounding).

    Raises
    ------
    ValueError
        Empty input, length mismatch, a single class, more than two classes, a ``pos_label``
        absent from ``y_true``, NaN or infinite scores (for dask input, raised by the compute).

    Notes
    -----
    AUC = (1 / (n+ n-)) sum_{i in P} sum_{j in N} [1(o_i > o_j) + 1/2 1(o_i = o_j)] = U / (n+ n-),
    the Mann-Whitney U statistic with midranks. It is computed from the runs (distinct score,
    positives at it, negatives at it) in increasing order of score as
    2 U = sum_r p_r (2 * (negatives below run r) + n_r), all in integers (int64 while
    2 n+ n- fits, Python integers beyond), and divided once at the end, so there is no
    floating-point cancellation at any n.

    numpy input: each class is sorted once and compressed to runs, the two run lists are
    merged in linear time (O(n log n) total).

    dask input, one compute, without ever gathering all scores in one task:

    1. ``daskauc-auc-chunk``: per chunk, check the scores are finite, sort each class, and
       take evenly spaced order statistics of the sorted classes as a sample (in all about
       ``AUC_SAMPLE_PER_BUCKET = 16`` values per bucket, at most ``AUC_SAMPLE_MAX``).
       ``daskauc-auc-sample`` tasks pick that small part out where the chunk is.
    2. ``daskauc-auc-plan``: one small task resolves the positive class from the labels seen
       in the chunks and picks ``n_buckets - 1`` boundaries t_1 <= ... at weighted quantiles
       of the sample. Bucket b holds the scores in (t_{b-1}, t_b]; boundaries are score
       values, so equal scores always fall into the same bucket.
    3. ``daskauc-auc-split``: per (chunk, bucket), the chunk's sorted scores in the bucket
       (a binary search), compressed to runs (where the chunk is: ties shrink before moving).
    4. ``daskauc-auc-bucket``: per bucket, merge the runs of every chunk (ties across chunks
       add up) and compute the bucket's own 2 U_b and class totals. A bucket holds about
       n / n_buckets scores at most (fewer with ties), never all n.
    5. ``daskauc-auc-combine``: 2 U = sum_b 2 U_b + 2 sum_b n+(b) n-(buckets below b),
       since every positive beats every negative of a lower bucket.

    The sample only balances the buckets; the result is exact whatever the boundaries. The
    sorted chunks (one copy of the scores) stay in worker memory until their splits ran,
    like a persisted score vector; task count 2 C + C B + B + 2 for C chunks, B buckets.

    References
    ----------
    Mann, H. B. and Whitney, D. R. (1947). On a test of whether one of two random variables
    is stochastically larger than the other. Annals of Mathematical Statistics 18(1).
    Hanley, J. A. and McNeil, B. J. (1982). The meaning and use of the area under a receiver
    operating characteristic (ROC) curve. Radiology 143(1).
    """
    if n_buckets is not None:
        check_param("n_buckets", n_buckets, Interval(int, 1))
    prepared = _prepare(y_true, scores, pos_label)
    if prepared[0] == "numpy":
        _, s, is_pos = prepared
        _, (neg, pos) = _sorted_by_label(s, is_pos, _BOTH)  # both classes are present
        _, p, n = _joint_runs(pos, neg)
        twice_u, n_pos, n_neg = _twice_u(p, n), int(p.sum()), int(n.sum())
    else:
        _, s, y, pos_label = prepared
        (result,) = compute(_auc_graph(s, y, pos_label, n_buckets))
        twice_u, n_pos, n_neg = result
    return twice_u / (2 * n_pos * n_neg)


def roc_curve(
    y_true: Any,
    scores: Any,
    *,
    pos_label=None,
    drop_intermediate: bool = True,
    max_points: int = ROC_MAX_POINTS,
    n_buckets: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve points (fpr, tpr, thresholds); numpy or dask input.

    Parameters
    ----------
    y_true, scores, pos_label, n_buckets
        As in :func:`roc_auc`.
    drop_intermediate : bool, default True
        Drop thresholds whose point lies on a straight segment between its neighbours with
        equal steps, as ``sklearn.metrics.roc_curve`` does.
    max_points : int, default 10_000
        Dask input only: the most points returned (at least 2).

    Returns
    -------
    fpr, tpr : ndarray of float64
        False and true positive rates, increasing, from (0, 0) to (1, 1).
    thresholds : ndarray of float64
        ``thresholds[i]`` is the lowest score counted positive at point i; the first is +inf.

    Notes
    -----
    Point k of the curve is (FP(t_k) / n-, TP(t_k) / n+) with TP(t) (FP(t)) the positives
    (negatives) scoring >= t, over the distinct scores t_1 > t_2 > ... in decreasing order.

    numpy input: the same points and thresholds as ``sklearn.metrics.roc_curve``.

    dask input: computed from the distributed per-score counts of :func:`roc_auc` (same
    graph, one compute). When every bucket holds at most ``max_points`` distinct scores
    and the curve has at most ``max_points`` points, it is again identical to scikit-learn's.
    Otherwise the curve is thinned: walking down the thresholds, a point is kept each time
    fpr + tpr crosses the next multiple of about 2 / max_points (first inside the buckets,
    then over the whole curve), so at most ``max_points`` points remain, spread evenly along
    the curve. Every point returned is an exact point of the full curve, and (0, 0) and
    (1, 1) are always kept.
    """
    check_param("drop_intermediate", drop_intermediate, bool)
    check_param("max_points", max_points, Interval(int, 2))
    if n_buckets is not None:
        check_param("n_buckets", n_buckets, Interval(int, 1))
    prepared = _prepare(y_true, scores, pos_label)
    if prepared[0] == "numpy":
        _, s, is_pos = prepared
        _, (neg, pos) = _sorted_by_label(s, is_pos, _BOTH)
        return _finish_roc(*_roc_points(*_joint_runs(pos, neg), drop_intermediate))
    _, s, y, pos_label = prepared
    graph = _auc_graph(s, y, pos_label, n_buckets, roc=(drop_intermediate, max_points))
    (result,) = compute(graph)
    return result
