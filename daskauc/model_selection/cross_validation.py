"""Cross-validated AUC of an estimator over a grid of parameters or along an epoch path.

:func:`cross_validate_auc` is the protocol of the papers' cross-validation: stratified folds;
at every point of the grid the estimator is fitted on the training part of each fold and
scored by the exact AUC of its ``decision_function`` on the validation part; the mean over
the folds ranks the points. Three ways through the grid, each fold on its own:

* cold (default): a fresh clone of the estimator per point;
* ``warm_start=True``: one clone per fold visits the points in order, each fit starting from
  the previous point's solution (RankSVM along increasing C);
* ``epochs``: one ``partial_fit`` run per point, scored after each count of epochs (the
  stochastic methods' choice of the number of epochs costs one run, not one per count).

:func:`cv_select_C` is the first two over C (the PRSVM+ papers' protocol).
"""

from __future__ import annotations

import itertools
import time
import warnings

import dask.array as da
import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold

from .._compute import compute, persist
from .._labels import check_X_y
from .._params import seed_sequence
from ..engine.placement import should_persist
from ..engine.progress import search_progress
from ..metrics import roc_auc

#: what a row of the table records besides the point's parameters
_RECORDS = ("mean_auc", "std_auc", "fold_auc", "n_iter", "seconds")


def check_cv(cv, random_state=None):
    """``cv`` as a splitter: a scikit-learn splitter (an object with ``split(X, y)`` and
    ``get_n_splits()``) as it is, or an int >= 2 of stratified folds, shuffled with a seed
    drawn from ``random_state``."""
    if hasattr(cv, "split") and hasattr(cv, "get_n_splits"):
        return cv
    if isinstance(cv, int) and not isinstance(cv, bool) and cv >= 2:
        seed = int(seed_sequence(random_state).generate_state(1)[0])
        return StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed)
    raise ValueError(f"cv must be an int >= 2 or a scikit-learn splitter; got {cv!r}")


def _grid_points(param_grid) -> list[dict]:
    """A dict of sequences -> every combination (the last key varying fastest); a sequence of
    dicts -> those points; None -> one point, the estimator as it is."""
    if param_grid is None:
        return [{}]
    if isinstance(param_grid, dict):
        keys = list(param_grid)
        return [dict(zip(keys, values, strict=True))
                for values in itertools.product(*(list(param_grid[k]) for k in keys))]
    points = [dict(p) for p in param_grid]
    if not points:
        raise ValueError("param_grid must hold at least one point")
    return points


def _check_epochs(epochs) -> list[int] | None:
    if epochs is None:
        return None
    out = [int(e) for e in epochs]
    if not out or out[0] < 1 or any(b <= a for a, b in zip(out[:-1], out[1:], strict=True)):
        raise ValueError(f"epochs must be increasing positive integers; got {epochs!r}")
    return out


def _fold_auc(y, est, X, error_score) -> float:
    """Exact AUC of ``est.decision_function(X)``; ``error_score`` for non-finite scores unless
    it is "raise" (then :func:`daskauc.roc_auc` raises)."""
    scores = est.decision_function(X)
    if isinstance(scores, da.Array):
        scores = compute(scores)[0]
    if not isinstance(error_score, str) and not np.all(np.isfinite(np.asarray(scores))):
        return float(error_score)
    return float(roc_auc(y, scores))


def _point_text(point: dict) -> str:
    """``C=0.5, n_epochs=3`` (``the estimator as given`` for the empty point)."""
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in point.items()) or "the estimator as given"


def _timed(fit, X, y) -> float:
    """Seconds of ``fit(X, y)`` (an estimator's ``fit`` or ``partial_fit``), convergence
    warnings silenced."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit(X, y)
    return time.perf_counter() - t0


def _table(points, counts, aucs, iters, secs) -> list[dict]:
    """One row per (point, count of epochs) of :func:`cross_validate_auc`'s arrays."""
    table = []
    for k, params in enumerate(points):
        for j, count in enumerate(counts):
            row = dict(params) if count is None else {**params, "n_epochs": count}
            table.append({**row, "mean_auc": float(aucs[k, j].mean()),
                          "std_auc": float(aucs[k, j].std()), "fold_auc": aucs[k, j].tolist(),
                          "n_iter": iters[k, j].tolist(), "seconds": float(secs[k, j])})
    return table


def cross_validate_auc(estimator, X, y=None, param_grid=None, *, cv=3, epochs=None,
                       warm_start: bool = False, error_score="raise", random_state=None):
    """Mean validation AUC over stratified folds of every point of a grid (module docstring).

    Parameters
    ----------
    estimator : a daskauc classifier, or any estimator with ``fit`` and ``decision_function``
        Cloned per fold (per point unless ``warm_start``); its other parameters are kept.
    X, y : training rows and labels (numpy, dask, zarr or a store path with ``y=None``).
        Folds of numpy input are numpy; of dask input, dask (persisted when the estimator's
        ``persist`` would persist them). The fits see the labels as {-1, +1}.
    param_grid : dict of sequences, sequence of dicts, or None
        The points: every combination of a dict's values (the last key varying fastest), the
        given dicts in order, or only the estimator as it is.
    cv : int or splitter, default 3
        Number of stratified, shuffled folds, or a scikit-learn splitter (an object with
        ``split(X, y)`` and ``get_n_splits()``) used as is.
    epochs : increasing sequence of int, optional
        Score each point after these counts of ``partial_fit`` calls (one epoch each) of one
        run per (point, fold), instead of one ``fit``: the table then has a row per (point,
        count), with ``n_epochs``.
    warm_start : bool, default False
        One clone per fold fits the points in order, each from the previous point's solution
        (the estimator's ``warm_start`` parameter is set to True when it has one).
    error_score : "raise" or float, default "raise"
        The AUC of a fold whose validation scores are not finite (a diverged fit); "raise"
        lets :func:`daskauc.roc_auc` raise. Such points rank last when NaN.
    random_state : None, int or Generator
        Seeds the fold shuffle when ``cv`` is an int.

    Returns
    -------
    best_params : dict
        The point (with ``n_epochs`` for an epoch path) of highest mean validation AUC (the
        first such in the grid's order on ties; NaN means rank last).
    table : list of dict
        One row per point (and count of epochs): its parameters, ``mean_auc``, ``std_auc``,
        ``fold_auc`` (list), ``n_iter`` (the estimator's ``n_iter_`` per fold, 0 without
        one) and ``seconds`` (fit time summed over folds; along an epoch path, up to that
        count).
    """
    points = _grid_points(param_grid)
    epochs = _check_epochs(epochs)
    if epochs is not None and warm_start:
        raise ValueError("epochs and warm_start=True are two different paths; pass one")
    folds = check_cv(cv, random_state)
    is_numpy = not isinstance(X, da.Array) and not isinstance(X, str) and hasattr(X, "__array__")
    Xd, yd, _ = check_X_y(X, y)
    y_np = np.asarray(compute(yd)[0])
    if is_numpy:
        Xn = np.asarray(X)
    counts = epochs if epochs is not None else [None]
    placeholder = np.zeros((y_np.shape[0], 1))
    n_folds = folds.get_n_splits(placeholder, y_np)
    aucs = np.empty((len(points), len(counts), n_folds))
    iters = np.zeros(aucs.shape, dtype=int)
    secs = np.zeros(aucs.shape[:2])
    best_mean = None  # the best mean over the folds among the points done on every fold
    with search_progress("cross-validation", len(points) * len(counts) * n_folds,
                         unit="(point, fold)") as search:
        for f, (tr, te) in enumerate(folds.split(placeholder, y_np)):
            if is_numpy:
                Xtr, Xte = Xn[tr], Xn[te]
            else:
                Xtr, Xte = Xd[tr], Xd[te]
                if should_persist(Xtr, estimator.get_params().get("persist", "auto")):
                    Xtr, Xte = persist(Xtr, Xte)
            est = clone(estimator)
            if warm_start and "warm_start" in est.get_params():  # a path from the previous
                est.set_params(warm_start=True)
            for k, params in enumerate(points):
                if not warm_start and k:
                    est = clone(estimator)
                est.set_params(**params)
                spent, done = 0.0, 0
                for j, count in enumerate(counts):
                    if count is None:
                        spent = _timed(est.fit, Xtr, y_np[tr])
                    while count is not None and done < count:
                        spent += _timed(est.partial_fit, Xtr, y_np[tr])
                        done += 1
                    secs[k, j] += spent
                    iters[k, j, f] = int(getattr(est, "n_iter_", 0))
                    aucs[k, j, f] = _fold_auc(y_np[te], est, Xte, error_score)
                    point = {**params, **({} if count is None else {"n_epochs": count})}
                    if f == n_folds - 1:  # a point done on every fold: the choice's terms
                        mean = float(aucs[k, j].mean())
                        if np.isfinite(mean) and (best_mean is None or mean > best_mean[1]):
                            best_mean = (f"{_point_text(point)}, mean of {n_folds} folds",
                                         mean)
                    # the line's AUC is this fold's; the best is what the choice is made on
                    search.record(f"{_point_text(point)} fold {f + 1}/{n_folds}",
                                  aucs[k, j, f], best=best_mean)
    table = _table(points, counts, aucs, iters, secs)
    mean = np.array([row["mean_auc"] for row in table])
    best = int(np.argmax(np.where(np.isnan(mean), -np.inf, mean)))  # first maximum on ties
    return {k: v for k, v in table[best].items() if k not in _RECORDS}, table


def cv_select_C(estimator, X, y, Cs, cv=3, random_state=None):
    """Choose C by stratified k-fold cross-validated AUC, warm-starting along increasing C.

    Parameters
    ----------
    estimator : RankSVM, or any estimator with a ``C`` parameter (the NBAUC presets)
        Cloned per fold; its other parameters are kept. With a ``warm_start`` parameter
        (RankSVM) each fit starts from the previous C's solution; the presets refit cold (and
        refit their feature map in every fold, as cross-validation of the whole method must).
    X, y : training rows and labels (numpy, dask, zarr or a store path with ``y=None``).
    Cs : sequence of float
        The grid (e.g. ``2.0 ** np.arange(-15, 11)``); visited in increasing order, each fit
        starting from the previous C's solution.
    cv : int or splitter, default 3
        Number of stratified, shuffled folds, or a scikit-learn splitter (an object with
        ``split(X, y)`` and ``get_n_splits()``) used as is.
    random_state : None, int or Generator
        Seeds the fold shuffle when ``cv`` is an int.

    Returns
    -------
    best_C : float
        The C of highest mean validation AUC (the smallest such C on ties).
    table : list of dict
        One row per C: ``C``, ``mean_auc``, ``std_auc``, ``fold_auc`` (list), ``n_iter``
        (Newton steps per fold), ``seconds`` (fit time summed over folds).

    Notes
    -----
    :func:`cross_validate_auc` over ``{"C": sorted(Cs)}`` with ``warm_start=True``.
    """
    Cs = np.asarray(sorted(float(c) for c in Cs))
    if Cs.size == 0 or not np.all(Cs > 0) or not np.all(np.isfinite(Cs)):
        raise ValueError(f"Cs must be a non-empty sequence of positive finite values; got {Cs}")
    best, table = cross_validate_auc(estimator, X, y, {"C": [float(C) for C in Cs]},
                                     cv=check_cv(cv, random_state), warm_start=True)
    return float(best["C"]), table
