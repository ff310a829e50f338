"""``C="auto"`` for the PRSVM+ Newton solver (RankSVM, NBAUC, RFAUC, KernelRankSVM).

The paper chooses C on ``{2^-15, ..., 2^10}`` by 3-fold cross-validation on the whole
training set, ~80 Newton solves. :func:`select_C` does it in a small multiple of one fit:

1. a stratified subsample of at most ``SELECTION_ROWS`` training rows (one compute; all rows
   when there are fewer), split once into a stratified training part (2/3) and a validation
   part (1/3);
2. the path of C over ``C_GRID`` from the smallest, each solve warm-started from the
   previous one, solved to ``SELECTION_TOL`` and preconditioned by the pairs' second moment
   (given by the caller, the final fit's own:
   :func:`daskauc.solvers.newton.auto_pair_moments`), the validation AUC recorded at each
   point; the path stops once ``PATIENCE`` points in a row fall below the
   best (the larger C cost the most Newton steps and overfit);
3. the C of highest validation AUC (the smaller on ties), rescaled to the ``n`` training rows
   as ``C (n_tr / n) ** C_EXPONENT``.

The rescaling: C weighs a *sum* over the ``n+ n-`` pairs, so the mean-loss regularization is
``lam = 1 / (C n+ n-)``; with ``lam ~ n^-1/2`` (the exponent :class:`~daskauc.KernelAUC` uses,
after Falkon's analysis) C scales as ``n^-3/2``. Measured on ijcnn1's 1,600-landmark
embedding: the best C (against the test set) at 3,000, 6,000, 12,000, 24,000 and 49,990
training rows was 2^-5, 2^-7, 2^-10, 2^-10 and 2^-11, a slope of about -1.5 in log-log; the
test AUC within 0.0005 of its best over two powers of 2 around it at 50,000 rows.

Fewer than ``MIN_ROWS_PER_CLASS`` rows of a class leave nothing to fit or nothing to
validate on: that is an error naming the counts and suggesting a numeric C, raised before
any work (:func:`check_selectable`; the presets check before fitting their feature map),
not a fallback to a fixed C. A fallback would be a C nobody chose, on exactly the data where
nothing can check it, and no fixed C suits every data set (C = 1, the former default, lost
0.009 test AUC on ijcnn1); two rows of each class are enough for the path to run.
"""

from __future__ import annotations

import time
import warnings

import dask
import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._arrays import class_counts as pm1_counts
from .._arrays import sample_rows, stratified_split, stratified_subsample
from .._compute import compute
from ..engine.progress import search_progress
from ..metrics import roc_auc
from ..solvers.newton import prsvm_newton

#: the paper's grid, in steps of 2x
C_GRID = tuple(2.0**k for k in range(-15, 11))
#: rows of the selection subsample
SELECTION_ROWS = 20_000
#: points in a row below the best that end the path. Past its best the validation AUC of
#: the warm-started path falls steadily (ijcnn1, a9a, w8a, spambase), and each point there
#: costs more Newton steps than those before it: on ijcnn1's embedding the 3 points past the
#: best took 52 of the path's 89 Newton steps (Jacobi-preconditioned).
PATIENCE = 2
#: the Newton tolerance of the path's solves (the caller's, if looser). The validation AUC
#: needs no tighter solve: against 1e-3 (the fit's default) the chosen C was the same on the
#: 1,600-landmark embeddings of ijcnn1, a9a, w8a and spambase, the mean test AUC of 8 seeds
#: the same to 0.0009 (within one seed-to-seed deviation) on seven small sets, and the path
#: took 25% fewer Hessian products (ijcnn1: 8.3 s -> 6.2 s of an 18 s NBAUC fit).
SELECTION_TOL = 1e-2
#: C chosen on n_tr rows is used on n rows as C (n_tr / n) ** C_EXPONENT (module docstring)
C_EXPONENT = 1.5
#: share of the subsample used to fit (the rest validates)
TRAIN_SHARE = 2 / 3
#: rows of each class C="auto" needs: one to fit and one to validate
MIN_ROWS_PER_CLASS = 2


def check_selectable(n_positive: int, n_negative: int) -> None:
    """Refuse ``C="auto"`` on labels with fewer than ``MIN_ROWS_PER_CLASS`` rows of a class
    (module docstring), naming the counts and what to do instead."""
    if min(n_positive, n_negative) < MIN_ROWS_PER_CLASS:
        raise ValueError(
            f'C="auto" chooses C by the validation AUC of a held-out part of each class and '
            f"needs at least {MIN_ROWS_PER_CLASS} of each (one to fit, one to validate); y has "
            f"{n_positive} positive and {n_negative} negative rows: pass a number, e.g. C=1.0")


def _power_of_2(C: float) -> str:
    """``2^-5`` for a power of 2, else ``0.03``."""
    k = np.log2(C)
    return f"2^{int(k)}" if k == int(k) else f"{C:.3g}"


def class_counts(y, yd: da.Array, classes) -> tuple[int, int]:
    """``(positives, negatives)`` of the labels ``y`` as given to ``fit`` (counted in memory
    when they are there; else one pass over ``yd``, their {-1, +1} dask form)."""
    if isinstance(y, (np.ndarray, list, tuple)) and len(classes) == 2:
        yy = np.asarray(y).ravel()
        pos = int(np.count_nonzero(yy == np.asarray(classes)[1]))
        return pos, int(yy.size - pos)
    return pm1_counts(yd)


def select_C(X: da.Array, y: da.Array, *, solver_params: dict, random_state=None,
             grid=C_GRID, rows: int = SELECTION_ROWS, pair_moments=None) -> dict:
    """Choose C for a pairwise squared hinge fit on rows ``X`` (row-chunked dask) and labels
    ``y`` ({-1, +1} dask), by validation AUC along a warm-started path (module docstring).

    Each C of the path is a :func:`daskauc.solvers.newton.prsvm_newton` solve with
    ``solver_params`` (``tol``, ``max_iter``, ``cg_tol`` ...) and ``pair_moments`` (its
    preconditioner; None: Jacobi) warm-started from the previous C's solution;
    ``random_state`` seeds the subsample and the split. Returns ``{"C", "C_subsample",
    "n_rows", "n_train", "seconds", "table", "stopped", "rule"}``; each row of ``table`` is
    one C: its validation AUC, Newton steps, Hessian products and seconds.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(random_state)
    y_np = np.asarray(compute(y)[0] if isinstance(y, da.Array) else y)
    n = y_np.size
    check_selectable(*pm1_counts(y_np))
    idx = stratified_subsample(y_np, rows, rng)
    (Xs,) = compute(X if idx.size == n else sample_rows(X, idx))
    # sparse rows (CSR) stay sparse: the path's solves and scores read their non-zeros
    Xs, ys = (Xs if hasattr(Xs, "tocsr") else np.ascontiguousarray(Xs)), y_np[idx]
    tr, va = stratified_split(ys, TRAIN_SHARE, rng)
    X_tr, y_tr = Xs[tr], ys[tr]
    solver_params = {**solver_params, "tol": max(solver_params.get("tol", SELECTION_TOL),
                                                 SELECTION_TOL)}
    table, best, below, coef = [], None, 0, None
    stopped = "the end of the grid"

    def chosen():
        return (f"C={_power_of_2(best['C_subsample'])} on {tr.size} rows, "
                f"{best['C_subsample'] * (tr.size / n) ** C_EXPONENT:.3g} on {n}")

    # the subsample is in this process: its solves run here, on threads. On a cluster every
    # Newton pass shipped it again in its graph (42 MiB for 10,000 rows of 552 features:
    # distributed's "Sending large graph" 30-48 times in one fit)
    with dask.config.set(scheduler="threads"), \
            search_progress("C path", len(grid), unit="C", chosen=chosen) as search:
        for C in sorted(grid):
            tic = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                # y_tr is {-1, +1} numpy: checked once by the caller, not again per C
                res = prsvm_newton(X_tr, y_tr, C=float(C), w0=coef, pair_moments=pair_moments,
                                   check_input=False, **solver_params)
            coef = res.coef
            auc = float(roc_auc(ys[va], Xs[va] @ coef))
            table.append({"C_subsample": float(C), "val_auc": auc, "newton_steps": int(res.n_iter),
                          "hessian_products": int(sum(h.get("cg_iter", 0) for h in res.history)),
                          "seconds": time.perf_counter() - tic})
            search.record(f"C={_power_of_2(C)}", auc, f"({res.n_iter} Newton steps)")
            if best is None or auc > best["val_auc"]:
                best, below = table[-1], 0
            else:
                below += 1
                if below >= PATIENCE:
                    stopped = f"{PATIENCE} points in a row below the best validation AUC"
                    break
    C = best["C_subsample"] * (tr.size / n) ** C_EXPONENT
    return {"C": float(C), "C_subsample": best["C_subsample"], "n_rows": int(idx.size),
            "n_train": int(tr.size), "seconds": time.perf_counter() - t0, "table": table,
            "stopped": stopped,
            "rule": ("validation AUC on a stratified subsample (2/3 fit, 1/3 validate), C "
                     f"path warm-started from the smallest, solved to tol {SELECTION_TOL:g}, "
                     "stopped "
                     f"{PATIENCE} points past the best; C rescaled by "
                     f"(n_train / n) ** {C_EXPONENT}")}
