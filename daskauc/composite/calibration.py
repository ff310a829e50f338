"""Platt scaling of a ranking score into a probability, fitted at the end of every fit.

Every daskauc classifier ranks rows by a raw score ``s`` (``X @ coef_``, a kernel expansion,
or a linear model on an embedding) whose scale and origin mean nothing to a threshold: AUC
ignores both. To make ``predict`` and ``predict_proba`` meaningful, ``fit`` ends by fitting

    P(y = positive | s) = 1 / (1 + exp(-(a s + b))),   a > 0,

to the training scores by maximum likelihood on Platt's smoothed targets, with a small Newton
solver (:func:`platt_scaling`). The estimator then exposes ``calibration_slope_ = a`` and
``intercept_ = b / a``: ``decision_function(X) = s + intercept_`` (the ranking, and so the AUC,
is unchanged) is positive exactly where the calibrated probability exceeds 1/2, so ``predict``
is the most probable class, as for a logistic regression.

Which rows: all training rows for in-memory (numpy) input; for dask arrays and stores a
bounded sample of whole chunks spread evenly over the rows (at most
``_config.CALIBRATION_ROWS``), its scores and labels computed in one dask compute
(:func:`calibration_data`), so calibrating never costs more than a small part of a fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dask.array as da
import numpy as np
from scipy.special import expit

from .. import _config
from .._arrays import class_counts
from .._compute import compute
from ._calibration_kernels import _platt_pass


@dataclass(frozen=True)
class PlattFit:
    """The outcome of :func:`platt_scaling`: ``P = expit(slope * s + offset)``."""

    slope: float
    offset: float
    n_iter: int
    #: True when the likelihood's slope was not positive (or the scores carried no
    #: information): the slope is then ``CALIBRATION_MIN_SLOPE`` per standard deviation of
    #: the scores and the offset gives every score about the class prior.
    prior_only: bool


def platt_targets(y: np.ndarray) -> np.ndarray:
    """Platt's smoothed targets: ``(n+ + 1)/(n+ + 2)`` for positives, ``1/(n- + 2)`` for
    negatives (``y`` in {-1, +1}); they keep the fitted slope finite on separable scores."""
    y = np.asarray(y)
    n_pos, n_neg = class_counts(y)
    return np.where(y > 0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


def check_class_weight(class_weight, classes=None) -> None:
    """Refuse a ``class_weight`` that is not None, "balanced" or a dict of positive finite
    weights by label, or (given ``classes``, the fit's two labels) whose keys are not among
    them: before any work."""
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return
    if not isinstance(class_weight, dict):
        raise ValueError(f'class_weight must be None, "balanced" or a dict {{label: weight}}; '
                         f"got {class_weight!r}")
    for label, weight in class_weight.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)) \
                or not (np.isfinite(weight) and weight > 0):
            raise ValueError(f"class_weight[{label!r}] = {weight!r}: a weight must be a "
                             "positive finite number")
    if classes is not None:
        from .._labels import matching_label

        known = np.asarray(classes)
        unknown = [k for k in class_weight if matching_label(known, k) is None]
        if unknown:
            raise ValueError(f"class_weight names {unknown}, which are not labels of y "
                             f"(the labels: {known.tolist()})")


def class_weights(class_weight, classes, y) -> tuple[float, float] | None:
    """``(w_negative, w_positive)`` of ``class_weight`` for labels ``y`` in {-1, +1} whose
    raw labels are ``classes`` (negative first), or None for no weights. "balanced" is
    scikit-learn's ``n / (2 n_class)``, counted on ``y``."""
    if class_weight is None:
        return None
    check_class_weight(class_weight, classes)
    if isinstance(class_weight, str):
        n_pos, n_neg = class_counts(y)
        n = n_pos + n_neg
        return (n / (2.0 * n_neg) if n_neg else 1.0, n / (2.0 * n_pos) if n_pos else 1.0)
    from .._labels import matching_label

    def weight(label):
        key = next((k for k in class_weight if matching_label(np.asarray([label]), k)
                    is not None), None)
        return 1.0 if key is None else float(class_weight[key])

    return weight(classes[0]), weight(classes[1])


def pm1_class_weight(class_weight, classes):
    """``class_weight`` for a solver that sees the labels as {-1, +1} (a preset's): a dict
    by the raw ``classes`` becomes one by -1 and +1."""
    if not isinstance(class_weight, dict) or classes is None:
        return class_weight
    w_neg, w_pos = class_weights(class_weight, classes, np.array([-1, 1]))  # checks it
    return {-1: w_neg, 1: w_pos}


def platt_scaling(scores, y, *, weights: tuple[float, float] | None = None,
                  max_iter: int = 100) -> PlattFit:
    """Fit ``P(y = +1 | s) = expit(a s + b)`` with ``a > 0`` to scores and {-1, +1} labels.

    Parameters
    ----------
    scores : array (n,)
        Raw ranking scores of the calibration rows.
    y : array (n,) of {-1, +1}
    weights : (w_negative, w_positive), optional
        Class weights of the likelihood (:func:`class_weights`), as scikit-learn's
        ``LogisticRegression(class_weight=...)`` weighs its loss: they move the threshold of
        ``predict`` and the probabilities, never the ranking.
    max_iter : int
        Newton steps (a few suffice: the objective is smooth and strictly convex).

    Returns
    -------
    PlattFit
        ``slope`` a > 0, ``offset`` b, Newton steps, and whether the prior-only fallback was
        used.

    Notes
    -----
    Minimizes ``L(a, b) = sum_i log(1 + exp(u_i)) - t_i u_i``, ``u_i = a s_i + b``, over the
    standardized scores ``z = (s - mean) / std`` (so the Hessian is well scaled whatever the
    scores' scale) by Newton's method with Lin et al.'s ``1e-12`` ridge on the Hessian and
    backtracking (Armijo) steps, from ``a = 0``, ``b = log((n+ + 1)/(n- + 1))`` (on more than
    ``2 WARM_ROWS`` rows, first on a strided subsample of about ``WARM_ROWS`` of them, then on
    all); one fused numba pass evaluates L, its gradient and Hessian. The result is mapped
    back to the raw scores. The targets ``t`` are Platt's (:func:`platt_targets`).

    When the fitted slope is not above ``_config.CALIBRATION_MIN_SLOPE`` per standard
    deviation of the scores (scores that do not rank the training rows, constant scores, or
    a single class), the slope is set to that value and ``b`` so that the mean score gets the
    mean target (the class prior): the ranking is kept (a > 0) and every row gets about the
    prior, so ``predict`` returns the majority class.

    References
    ----------
    J. Platt, "Probabilistic outputs for support vector machines and comparisons to
    regularized likelihood methods", Advances in Large Margin Classifiers, 1999.
    H.-T. Lin, C.-J. Lin and R. C. Weng, "A note on Platt's probabilistic outputs for support
    vector machines", Machine Learning 68, 2007.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(y).ravel()
    if s.shape != y.shape or s.size == 0:
        raise ValueError(f"scores and y must be non-empty and of equal length; got {s.shape} "
                         f"and {y.shape}")
    if not np.isfinite(s).all():
        raise ValueError("the scores to calibrate contain NaN or infinity (did the solver "
                         "diverge?)")
    t = np.ascontiguousarray(platt_targets(y), dtype=np.float64)
    w_neg, w_pos = (1.0, 1.0) if weights is None else map(float, weights)
    c = np.where(y > 0, w_pos, w_neg).astype(np.float64)
    n_pos, n_neg = class_counts(y)
    mean = float(s.mean())
    std = float(s.std())
    min_slope = float(_config.CALIBRATION_MIN_SLOPE)
    alpha, beta = 0.0, float(np.log(w_pos * (n_pos + 1.0) / (w_neg * (n_neg + 1.0))))
    n_iter = 0
    if std > 0 and np.isfinite(std) and n_pos and n_neg:
        z = np.ascontiguousarray((s - mean) / std)
        alpha, beta, n_iter = _newton(z, t, c, beta, max_iter)
    if not alpha > min_slope:
        # no positive slope: keep the ranking with a tiny one, every row near the prior
        scale = std if std > 0 and np.isfinite(std) else 1.0
        prior = float(t.mean() if weights is None else c @ t / c.sum())
        beta = float(np.log(prior / (1.0 - prior)))
        return PlattFit(slope=min_slope / scale, offset=beta - min_slope * mean / scale,
                        n_iter=n_iter, prior_only=True)
    return PlattFit(slope=alpha / std, offset=beta - alpha * mean / std, n_iter=n_iter,
                    prior_only=False)


#: rows of the strided subsample the Newton iterations start on; the full data then need
#: one or two steps from there (quadratic convergence from a close start).
WARM_ROWS = 50_000


def _newton(z: np.ndarray, t: np.ndarray, c: np.ndarray, beta0: float, max_iter: int):
    """Newton's method on ``L(alpha, beta)`` over standardized scores ``z`` (targets ``t``,
    row weights ``c``): on a strided subsample first when there are many rows, then on all
    of them."""
    alpha, beta, n_iter = 0.0, beta0, 0
    if z.size > 2 * WARM_ROWS:
        k = z.size // WARM_ROWS
        alpha, beta, n_iter = _newton_from(
            np.ascontiguousarray(z[::k]), np.ascontiguousarray(t[::k]),
            np.ascontiguousarray(c[::k]), alpha, beta, max_iter)
    alpha, beta, more = _newton_from(z, t, c, alpha, beta, max_iter)
    return alpha, beta, n_iter + more


def _newton_from(z, t, c, alpha, beta, max_iter: int):
    out, trial_out = np.empty(6), np.empty(6)
    _platt_pass(z, t, c, alpha, beta, out)
    n = z.size
    it = 0
    for it in range(1, max_iter + 1):
        g = out[1:3].copy()
        if np.max(np.abs(g)) <= 1e-10 * n * float(c.max()):
            it -= 1
            break
        H = np.array([[out[3], out[4]], [out[4], out[5]]]) + 1e-12 * np.eye(2)
        step = -np.linalg.solve(H, g)
        decrease = float(g @ step)  # < 0 for a descent direction
        lr = 1.0
        while lr >= 1e-10:
            _platt_pass(z, t, c, alpha + lr * step[0], beta + lr * step[1], trial_out)
            if trial_out[0] <= out[0] + 1e-4 * lr * decrease:
                break
            lr *= 0.5
        else:  # no decrease left: at the optimum up to rounding
            break
        alpha, beta = alpha + lr * step[0], beta + lr * step[1]
        out, trial_out = trial_out, out
        if -decrease < 1e-14 * max(1.0, abs(out[0])):
            break
    return float(alpha), float(beta), it


def calibration_blocks(chunk_rows, max_rows: int) -> tuple[list[int], int | None]:
    """Row chunks to calibrate on: whole chunks spread evenly over the array, at most
    ``max_rows`` rows in all (``k = max_rows // largest chunk`` of them, evenly spaced).

    Returns ``(block indices, None)``, or ``([middle block], max_rows)`` when a single chunk
    is larger than ``max_rows`` (then its first ``max_rows`` rows are used).
    """
    sizes = np.asarray(chunk_rows, dtype=np.int64)
    nb = sizes.size
    if int(sizes.sum()) <= max_rows:
        return list(range(nb)), None
    big = int(sizes.max())
    if big > max_rows:
        return [nb // 2], int(max_rows)
    k = min(nb, max_rows // big)
    return np.unique(np.linspace(0, nb - 1, k).round().astype(int)).tolist(), None


def calibration_data(X: da.Array, y: da.Array, score: Callable[[da.Array], da.Array], *,
                     all_rows: bool, max_rows: int | None = None):
    """Scores and {-1, +1} labels of the calibration rows, in one dask compute.

    ``score(X_rows)`` builds the lazy raw scores of row-chunked rows. With ``all_rows`` every
    row is used; otherwise the chunks of :func:`calibration_blocks` (at most ``max_rows``,
    default ``_config.CALIBRATION_ROWS``).
    """
    max_rows = int(_config.CALIBRATION_ROWS if max_rows is None else max_rows)
    Xs, ys = X, y
    if not all_rows and X.shape[0] > max_rows:
        blocks, cut = calibration_blocks(X.chunks[0], max_rows)
        Xs, ys = X.blocks[blocks], y.blocks[blocks]
        if cut is not None:
            Xs, ys = Xs[:cut], ys[:cut]
    blocks = _in_memory_blocks(Xs)
    if blocks is not None:  # rows held here (numpy input): score them without a graph
        s, yy = np.concatenate([np.asarray(score(b)) for b in blocks]), compute(ys)[0]
    else:
        s, yy = compute(score(Xs), ys)
    return np.asarray(s, dtype=np.float64), np.asarray(yy)


def _in_memory_blocks(X: da.Array) -> list[np.ndarray] | None:
    """The row blocks of ``X`` when they are numpy arrays in its graph (numpy input), in
    order; else None. Scoring them directly skips the scheduler, which took 0.17 s where the
    products took 0.05 s (2 million rows of 54 float32 features, ten blocks)."""
    from dask.core import flatten

    graph = X.__dask_graph__()
    blocks = [graph.get(k) for k in flatten(X.__dask_keys__())]
    return blocks if all(isinstance(b, np.ndarray) for b in blocks) else None


def calibrate(est, X: da.Array, y: da.Array, score: Callable[[da.Array], da.Array], *,
              all_rows: bool, batch: bool = False) -> None:
    """Platt-calibrate the model ``est`` (setting ``calibration_slope_`` and ``intercept_``)
    on ``score(rows)`` (its lazy raw scores) for rows of ``X`` / ``y`` (both row-chunked
    dask, y in {-1, +1}): every row with ``all_rows``, else a bounded sample of chunks
    (:func:`calibration_data`), weighted by ``est.class_weight`` if it has one. A
    ``partial_fit`` batch (``batch``) holding one class keeps an earlier calibration (it says
    nothing about where the classes part)."""
    s, yy = calibration_data(X, y, score, all_rows=all_rows)
    one_class = bool(np.all(yy > 0) or np.all(yy < 0))
    if batch and one_class and hasattr(est, "calibration_slope_"):
        return
    fit = platt_scaling(s, yy, weights=class_weights(
        getattr(est, "class_weight", None), est.classes_, yy))
    est.calibration_slope_ = float(fit.slope)
    est.intercept_ = float(fit.offset / fit.slope)


def calibrated_intercept(X: da.Array, y: da.Array, score) -> float:
    """The ``intercept_`` :func:`calibrate` gives a model with raw scores ``score(rows)``
    fitted on rows ``X`` (on a sample of chunks, unweighted): a selection scores a candidate
    model (each width of the walk) by the AUC of the decision function it would have."""
    fit = platt_scaling(*calibration_data(X, y, score, all_rows=False))
    return float(fit.offset / fit.slope)


def shift_block(s: np.ndarray, intercept: float) -> np.ndarray:
    """``s + intercept`` in float64 (the float64 sum never merges distinct float32 scores)."""
    return np.asarray(s, dtype=np.float64) + intercept


def proba_block(d: np.ndarray, slope: float) -> np.ndarray:
    """``[1 - p, p]`` with ``p = expit(slope * d)``, so that ``argmax`` is ``d > 0`` exactly
    (where ``expit`` rounds a tiny ``slope * d`` to 1/2, ``p`` is moved by one ulp)."""
    d = np.asarray(d, dtype=np.float64)
    p = expit(slope * d)
    p = np.where(d > 0, np.maximum(p, np.nextafter(0.5, 1.0)), np.minimum(p, 0.5))
    return np.stack([1.0 - p, p], axis=1)


def predict_block(d: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``classes[1]`` where ``d > 0``, else ``classes[0]``."""
    return classes[(np.asarray(d) > 0).astype(np.intp)]
