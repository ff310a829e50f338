"""Figures a user looks at: the ROC (and precision-recall) curve of a model's scores, and a
fit's history (objective, validation AUC, gradient norm per epoch or Newton step).

matplotlib is an optional dependency (``pip install daskauc[plot]``); these functions import
it when called and say so when it is missing.
"""

from __future__ import annotations

import numpy as np

from ._arrays import class_counts
from ._compute import compute

#: history columns drawn by plot_history, in panel order, with their axis labels
HISTORY_PANELS = (
    ("objective", "objective"),
    ("rel_grad_norm", "relative gradient norm"),
    ("val_auc", "validation AUC"),
    ("auc", "AUC (validation rows)"),
    ("batch_inertia", "batch inertia"),
)
LOG_SCALE = {"objective", "rel_grad_norm", "batch_inertia"}
#: ROC curves of at least this AUC get an inset of the top-left corner, where they run
ZOOM_AUC = 0.95


def pyplot():
    try:  # matplotlib itself falls back to Agg where there is no display
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'daskauc[plot]'") from exc
    return plt


def _curve_points(y, scores):
    """False and true positive rates and precision at every threshold (exact; thinned only
    for very large dask inputs, as :func:`daskauc.roc_curve`)."""
    from .metrics import roc_auc, roc_curve

    fpr, tpr, _ = roc_curve(y, scores, drop_intermediate=False)
    auc = float(roc_auc(y, scores))
    yv = np.asarray(compute(y)[0] if hasattr(y, "compute") else y)
    n_pos, n_neg = class_counts(yv)
    tp, fp = tpr * n_pos, fpr * n_neg
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1e-300), 1.0)
    return np.asarray(fpr), np.asarray(tpr), precision, auc, n_pos, n_neg


def plot_roc(y, scores, *, ax=None, pr: bool = False, label: str | None = None):
    """Plot the ROC curve of ``scores`` for labels ``y`` with its exact AUC in the legend.

    Parameters
    ----------
    y : array-like or dask array of two-valued labels (the larger value is positive).
    scores : the model's ``decision_function`` (or any ranking score) for the same rows.
    ax : matplotlib Axes to draw on; a new figure if None. With ``pr=True``, a pair of Axes.
    pr : also draw the precision-recall curve (with its average precision) beside it.
    label : legend name of the curve (default "model").

    Returns
    -------
    The Axes drawn on (a tuple ``(roc_ax, pr_ax)`` with ``pr=True``); ``ax.figure`` is the
    figure, for ``savefig``.
    """
    plt = pyplot()
    fpr, tpr, precision, auc, n_pos, n_neg = _curve_points(y, scores)
    if ax is None:
        _, ax = plt.subplots(1, 2 if pr else 1, figsize=(10 if pr else 5, 4.6),
                             layout="constrained")
    roc_ax, pr_ax = (ax if pr else (ax, None))
    name = label or "model"
    roc_ax.plot(fpr, tpr, lw=2, label=f"{name} (AUC = {auc:.4f})")
    roc_ax.plot([0, 1], [0, 1], ls="--", lw=1, color="grey", label="chance (AUC = 0.5)")
    roc_ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="false positive rate",
               ylabel="true positive rate",
               title=f"ROC curve ({n_pos:,} positive, {n_neg:,} negative)")
    roc_ax.set_aspect("equal")
    roc_ax.grid(alpha=0.3)
    roc_ax.legend(loc="lower right")
    if auc >= ZOOM_AUC:
        _zoom_corner(roc_ax, fpr, tpr)
    if pr_ax is not None:
        # average precision: the precision at each recall step, weighted by the step
        ap = float(np.sum(np.diff(tpr, prepend=0.0) * precision))
        pr_ax.step(tpr, precision, where="post", lw=2, label=f"{name} (AP = {ap:.4f})")
        prior = n_pos / max(1, n_pos + n_neg)
        pr_ax.axhline(prior, ls="--", lw=1, color="grey", label=f"chance ({prior:.3f})")
        pr_ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="recall", ylabel="precision",
                  title="precision-recall curve")
        pr_ax.grid(alpha=0.3)
        pr_ax.legend(loc="best")
        return roc_ax, pr_ax
    return roc_ax


def _zoom_corner(ax, fpr: np.ndarray, tpr: np.ndarray) -> None:
    """An inset of the top-left corner, where a curve of AUC near 1 is drawn on the frame:
    false positive rates up to 1.5 times where the true positive rate reaches 99%."""
    reach = fpr[np.searchsorted(tpr, 0.99)] if tpr[-1] >= 0.99 else 1.0
    x_max = float(min(1.0, max(0.01, 1.5 * reach)))
    # from the true positive rate a tenth of the way in: the knee, not the vertical start
    y_min = float(max(0.0, tpr[min(tpr.size - 1, np.searchsorted(fpr, 0.1 * x_max))] - 0.01))
    inset = ax.inset_axes([0.3, 0.32, 0.62, 0.45])
    inset.plot(fpr, tpr, lw=1.5)
    inset.set(xlim=(0, x_max), ylim=(y_min, 1.001))
    inset.grid(alpha=0.3)
    inset.tick_params(labelsize=7)
    inset.set_title("top-left corner", fontsize=8)
    ax.indicate_inset_zoom(inset, edgecolor="grey")


def _history_of(model_or_history) -> list[dict]:
    history = getattr(model_or_history, "history_", model_or_history)
    if not isinstance(history, (list, tuple)) or not all(isinstance(r, dict) for r in history):
        raise TypeError("plot_history takes a fitted daskauc model (with history_) or its "
                        f"history, a list of dicts; got {type(model_or_history).__name__}")
    if not history:
        raise ValueError("the history is empty: fit the model first")
    return list(history)


def plot_history(model_or_history, *, axes=None, title: str | None = None):
    """Plot a fit's history: one panel per recorded quantity against the epoch or Newton step.

    Panels, when recorded: the objective and the relative gradient norm (log scale; Newton
    solvers), the validation AUC (fits given ``validation=``), the batch inertia (k-means);
    otherwise the seconds per epoch.

    Parameters
    ----------
    model_or_history : a fitted estimator with ``history_``, or that list of dicts.
    axes : sequence of Axes, one per panel; a new figure if None.
    title : figure title (default: the estimator's class name).

    Returns
    -------
    The list of Axes drawn on.
    """
    plt = pyplot()
    history = _history_of(model_or_history)
    xkey = "epoch" if "epoch" in history[0] else "iter" if "iter" in history[0] else None
    x = (np.array([r[xkey] for r in history]) if xkey else np.arange(1, len(history) + 1))
    xlabel = {"epoch": "epoch", "iter": "Newton step"}.get(xkey, "record")
    panels = [(k, lab) for k, lab in HISTORY_PANELS
              if any(isinstance(r.get(k), (int, float)) for r in history)]
    if not panels:
        panels = [("seconds", "seconds")]
    if axes is None:
        _, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8),
                               layout="constrained", squeeze=False)
        axes = list(axes[0])
    for ax, (key, label) in zip(axes, panels, strict=False):
        xs = [xi for xi, r in zip(x, history, strict=True) if isinstance(r.get(key), (int, float))]
        ys = [r[key] for r in history if isinstance(r.get(key), (int, float))]
        ax.plot(xs, ys, marker="o", ms=3, lw=1.5)
        if key in LOG_SCALE and min(ys) > 0:
            ax.set_yscale("log")
        ax.set(xlabel=xlabel, ylabel=label)
        ax.grid(alpha=0.3)
        if key in ("val_auc", "auc"):
            best = int(np.argmax(ys))
            ax.annotate(f"best {ys[best]:.4f}", (xs[best], ys[best]),
                        textcoords="offset points", xytext=(-4, -14), ha="right")
    name = title or (type(model_or_history).__name__
                     if hasattr(model_or_history, "history_") else "fit")
    axes[0].figure.suptitle(f"{name}: {len(history)} {xlabel}s")
    return axes
