"""The kernel width walked at the final model's scale.

The best width grows with the number of centres (and rows), so a subsample with 2,048 centres
cannot see the width of a model with 8,192 or more: :class:`~daskauc.KernelAUC` then walks the
width at the final model's scale (:func:`walk_width`, by the rule of :func:`walk_widths`): the
final model's route (:mod:`daskauc.composite.kernel_model`) with up to ``WIDTH_CENTRES``
centres on a stratified subsample of up to ``WIDTH_ROWS`` rows (two thirds to train, one third to
validate), doubling gamma from the chosen one while the validation AUC rises by more than
``WIDTH_GAIN`` (halving instead when the first doubling does not help), each fit warm-started
from the previous width's function.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from .._arrays import sample_rows, stratified_subsample
from .._compute import compute
from .._labels import check_X_y
from .._params import child_seed, seed_sequence
from .._validation import as_row_chunked
from ..composite.calibration import calibrated_intercept
from ..composite.kernel_model import KernelFunction, KernelSettings, choose_route, fit_kernel_model
from ..embed.centres import select_centres
from ..engine.progress import search_progress
from ..metrics import roc_auc
from ..solvers.kernel_basis import kernel_scores

#: the width walk at the final model's scale: rows of its subsample (2/3 train, 1/3
#: validation), cap on its centres, most doublings (or halvings), least gain to go on. It runs
#: when its centres are at least WIDTH_RATIO times the selection's, where it pays: on covtype
#: (100,000 training rows) the best width was 4/b at 4,096 centres and >= 8/b at 8,192, where
#: the 20,000-row, 2,048-centre selection chose 2/b: 0.954 against 0.939 test AUC; at twice
#: the selection's centres it did not (ijcnn1 at 4,096: the walk's 2/b 0.9974, 1/b 0.9975,
#: for 40% of the fit's time).
WIDTH_ROWS = 150_000
WIDTH_CENTRES = 8192
WIDTH_RATIO = 4
WIDTH_STEPS = 4
WIDTH_GAIN = 5e-4


def walk_widths(score, mult0: float, *, steps: int = WIDTH_STEPS, gain: float = WIDTH_GAIN):
    """Walk the width from ``mult0`` by factors of 2 while ``score`` rises.

    ``score(mult)`` is the validation AUC at gamma = ``mult``/b (called once per width, in
    the order of the walk, so each fit can start from the one before). Doubling goes on
    while a width beats the one before it by more than ``gain``, at most ``steps`` times;
    when the first doubling does not, halving is tried the same way instead.

    Returns ``(best multiplier, [(multiplier, score), ...] in the order tried)``; the best is
    the highest score (ties: the closest to ``mult0``).
    """
    tried = [(float(mult0), float(score(mult0)))]
    for factor in (2.0, 0.5):
        mult, auc = tried[0]
        for _ in range(steps):
            nxt = mult * factor
            nxt_auc = float(score(nxt))
            tried.append((nxt, nxt_auc))
            if nxt_auc <= auc + gain:
                break
            mult, auc = nxt, nxt_auc
        if mult != tried[0][0]:  # the width moved up: no need to look down
            break
    best = max(tried, key=lambda t: (t[1], -abs(np.log(t[0] / mult0))))
    return best[0], tried


def walk_width(X, y: np.ndarray, *, gamma0: float, selection: dict, n_centres: int,
               rows: int, max_centres: int, solver: str, settings: KernelSettings,
               lam_exponent: float, random_state) -> dict | None:
    """Walk the width at the final model's scale (module docstring), or None when the walk's
    centres would not be at least ``WIDTH_RATIO`` times the selection's.

    Parameters
    ----------
    X, y, gamma0 : as :func:`~daskauc.model_selection.gamma_lam.select_gamma_lam`.
    selection : dict
        ``Selection.as_dict()`` of the width and lam search: the walk starts from its
        ``gamma_multiplier``, at its ``lam`` rescaled to the walk's rows, and needs at least
        ``WIDTH_RATIO`` times its ``n_centres``.
    n_centres : int
        Centres of the final model; the walk uses ``min(n_centres, max_centres, rows of its
        training part)``, drawn uniformly among those rows.
    rows : int
        Size of the stratified subsample (two thirds train, one third validate).
    solver : {"auto", "kernel", "embedding"}
        The route, as the final model takes it
        (:func:`daskauc.composite.kernel_model.choose_route`).
    settings : KernelSettings
        The final model's solve.
    lam_exponent : float
        The selection's lam is rescaled to the walk's training rows as
        ``lam (n / n_walk) ** lam_exponent``, as the search rescales it.
    random_state : SeedSequence

    Returns
    -------
    dict
        ``gamma``, ``gamma_multiplier``, ``rows``, ``validation_rows``, ``centres``, ``lam``,
        ``table`` (per width: ``gamma_multiplier``, ``gamma``, ``val_auc``, ``n_iter``,
        ``passes``, ``route``, ``seconds``), ``seconds``, ``rule``.
    """
    rng = np.random.default_rng(random_state)
    idx = stratified_subsample(y, int(rows), rng)
    if len(idx) < 6:
        return None
    tr, va = train_test_split(idx, test_size=1 / 3, stratify=y[idx],
                              random_state=int(rng.integers(2**31)))
    tr, va = np.sort(tr), np.sort(va)
    m = int(min(n_centres, max_centres, len(tr)))
    if m < WIDTH_RATIO * selection["n_centres"]:
        return None
    t0 = time.perf_counter()
    n = int(X.shape[0])
    lam = selection["lam"] * (n / len(tr)) ** lam_exponent  # as the selection moves it
    X_tr, yd, _ = check_X_y(sample_rows(X, tr) if len(tr) < n else X, y[tr],
                            dtype=settings.dtype)
    X_va = as_row_chunked(sample_rows(X, va), dtype=settings.dtype)
    y_tr = np.asarray(compute(yd)[0])
    seed = seed_sequence(int(rng.integers(2**31)))
    # the same rows and centres at every width (uniform centres: their labels enable the
    # "pairs" weighting)
    sel = select_centres(X_tr, m, method="uniform", y=y_tr, random_state=child_seed(seed, 2))
    centres = np.asarray(sel.centres, dtype=np.float64)
    index = np.asarray(sel.index, dtype=np.int64)
    fitted: list[KernelFunction] = []  # the previous width's function: the next one's start
    table = []

    def score(mult):
        tic = time.perf_counter()
        gamma = float(gamma0 * mult)
        route, _ = choose_route(int(X_tr.shape[0]), int(X_tr.shape[1]), m, loss=settings.loss,
                                solver=solver, persist=settings.persist)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            alpha, result = fit_kernel_model(route, X_tr, y_tr, centres, sel.labels, sel.index,
                                             gamma, float(lam), settings,
                                             previous=fitted[-1] if fitted else None)
        f = KernelFunction(centres=centres, index=index, gamma=gamma,
                           alpha=np.asarray(alpha, dtype=np.float64))
        fitted.append(f)

        def raw(rows):
            return kernel_scores(rows, f.centres, f.gamma, f.alpha, dtype=np.dtype(settings.dtype))

        b = calibrated_intercept(X_tr, yd, raw)
        auc = float(roc_auc(y[va], np.asarray(compute(raw(X_va))[0], dtype=np.float64) + b))
        state = result.state or {}
        table.append({"gamma_multiplier": mult, "gamma": gamma0 * mult, "val_auc": auc,
                      "n_iter": int(result.n_iter), "passes": int(state.get("passes", 0)),
                      "route": route, "seconds": time.perf_counter() - tic})
        search.record(f"gamma={mult:g}/b", auc, f"({m} centres, {len(tr)} rows)")
        return auc

    with search_progress("KernelAUC width walk", WIDTH_STEPS + 2, unit="width") as search:
        best, _ = walk_widths(score, selection["gamma_multiplier"])
    return {"gamma": gamma0 * best, "gamma_multiplier": best, "rows": len(tr),
            "validation_rows": len(va), "centres": m, "lam": lam, "table": table,
            "seconds": time.perf_counter() - t0,
            "rule": "gamma doubled (or halved) from the selection's while the validation "
                    "AUC rises, kernel route at the final model's scale, lam fixed"}
