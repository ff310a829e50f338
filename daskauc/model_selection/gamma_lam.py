"""Choosing the kernel width and the regularization by validation AUC on a subsample.

:class:`daskauc.KernelAUC` with ``gamma="auto"`` or ``lam="auto"`` calls
:func:`select_gamma_lam`:

1. a stratified subsample of at most ``rows`` training rows (one compute), split into ``cv``
   stratified folds;
2. for each fold and each ``gamma`` of the grid (multiples of the bandwidth rule
   ``gamma0 = 1/b``): ``m`` centres drawn uniformly among the fold's training rows, the
   Cholesky Nystroem features ``Phi = K T^{-1}`` (``T^T T = K_mm + jitter I``) of the fold's
   training and validation rows, on which a linear model is exactly the kernel-basis model;
3. the path of ``lam`` from the largest to the smallest, each solve warm-started from the
   previous one (PRSVM+ Newton for the squared hinge, preconditioned by the pairs' second
   moment of the fold's features, decomposed once per path; the exact solve for least
   squares), the validation AUC recorded at each point, stopped ``PATIENCE`` points past its
   best; every width on the first fold, the other folds only for the ``KEEP_WIDTHS`` best
   widths on it (successive halving);
4. while the best width is at an end of the grid, one more width a factor of 2 past it (at
   most ``EDGE_STEPS``);
5. the ``(gamma, lam)`` of highest mean validation AUC over the folds (ties: the gamma closest
   to the rule, then the larger lam), and ``lam`` rescaled to the full training set by
   ``(n_fold_train / n) ** LAM_EXPONENT``.

On the default grid the widths are first screened (``screen=True``: least squares' exact
path at every lam from one eigendecomposition per fold and width, :func:`ls_screen_path`, on
``SCREEN_ROWS`` rows and ``SCREEN_CENTRES`` centres), and the search keeps three widths around
the screen's best (a factor of 2 higher per factor of 4 more centres), and the lams from
``LAM_CEILING`` times the screen's down to ``1 / LAM_FLOOR`` times it
(:func:`choose_gamma_lam`).

The best width grows with the number of centres (and rows), so a subsample with 2,048 centres
cannot see the width of a model with 8,192 or more: :func:`choose_gamma_lam` then walks the
width at the final model's scale (:mod:`.width_walk`).

Everything runs in this process: the subsample is small by design (20,000 rows and 4,096
centres at most by default: features of 330 MB in float32), and the (fold, gamma) paths run
one per core, each on the synchronous scheduler with one BLAS thread.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import dask
import numpy as np
import scipy.linalg
from sklearn.model_selection import StratifiedKFold

from .. import _config
from .._arrays import class_counts, sample_rows, stratified_subsample
from .._compute import compute
from .._gaussian import gaussian_centres, kernel_block
from .._params import child_seed
from ..composite.kernel_model import KernelSettings
from ..embed.nystroem import default_gamma
from ..engine.progress import search_progress
from ..metrics import roc_auc
from ..solvers.kernel_basis import build_preconditioner
from ..solvers.newton import prsvm_newton
from ..solvers.pairwise import PairMoments
from ..solvers.stats import class_statistics, lsauc_from_stats, pair_second_moment
from .width_walk import walk_width

logger = logging.getLogger("daskauc")

#: multiples of the bandwidth rule 1/b tried by ``gamma="auto"``. On covtype the best width
#: grows with the number of centres (1/b at 1,600, 4/b at 4,096, 8/b at 8,192 centres on
#: 100,000 rows), so the grid reaches 16/b.
GAMMA_MULTIPLIERS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)

#: the lam path of ``lam="auto"`` (mean-over-pairs scale), largest first, half a decade
#: apart. NBAUC's cross-validated C on the reproduction's folds corresponds to 1e-5 (ijcnn1),
#: 2e-4 (spambase) and 1.5e-6 (covtype, 53,000 rows).
LAMBDAS = tuple(10.0 ** -(k / 2) for k in range(2, 19))

#: lam chosen on a fold of n_tr rows is used on n rows as ``lam (n_tr / n) ** LAM_EXPONENT``:
#: Falkon's analysis takes lam ~ 1/sqrt(n) (Rudi et al. 2017); a mean loss whose C stays
#: fixed (NBAUC's cross-validation) amounts to 1/n^2.
LAM_EXPONENT = 0.5

#: widths tried past an end of the grid when the best one sits there (factors of 2).
EDGE_STEPS = 3

#: widths whose validation AUC on the first fold is among the KEEP_WIDTHS best are scored on
#: the other folds too; the others are left at one fold (their mean is not taken)
KEEP_WIDTHS = 2

#: a lam path stops after PATIENCE points in a row DROP below its best validation AUC. Two
#: points below by any amount cost half as much on spambase, but lost 0.0009 test AUC on
#: breast-cancer, whose validation AUC is flat near 1 (the larger lam of a tie won).
PATIENCE = 3
DROP = 0.002

#: default size of the subsample and cap on its centres.
SELECTION_ROWS = 20_000
SELECTION_CENTRES = 2048

#: the width screen of ``gamma="auto"`` on the default grid: size of its subsample and cap on
#: its centres. Least squares' validation AUC at every lam of the grid comes from one
#: eigendecomposition per (fold, width) (:func:`ls_screen_path`), so the screen sees every
#: width and lam for about the price of one solve per width; the search proper then runs on
#: the screen's best width's neighbourhood, moved up when the search has more centres than
#: the screen (the best width grows with the centres; :func:`choose_gamma_lam`), widened past
#: an end as ever, from LAM_CEILING times the screen's lam down to 1 / LAM_FLOOR times it.
SCREEN_ROWS = 6000
SCREEN_CENTRES = 512
LAM_CEILING = 10.0
#: the squared hinge's chosen lam against least squares' (the screen's, at full scale):
#: spambase 1x, a9a 1/5.5, ijcnn1 1/5.5, w8a 5.8x. Below, the solves cost the most (ijcnn1,
#: 2,048 centres: 8, 14 and 23 Newton steps from 1e-7 down, 26 s of a 38 s path) and the
#: path went as far as 1/30,000 of the screen's lam before its stop.
LAM_FLOOR = 100.0



@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`select_gamma_lam` (recorded in ``KernelAUC.selection_``)."""

    gamma: float
    lam: float
    gamma_multiplier: float
    lam_subsample: float
    n_rows: int
    n_centres: int
    cv: int
    seconds: float
    table: list = field(default_factory=list)

    @property
    def mean_auc(self) -> float:
        """The mean validation AUC over the folds at the chosen width and lam (what the
        choice was made on); NaN if the table does not hold it."""
        for row in self.table:
            if (row["gamma_multiplier"] == self.gamma_multiplier
                    and row["lam"] == self.lam_subsample and row["mean_auc"] is not None):
                return float(row["mean_auc"])
        return float("nan")

    def as_dict(self) -> dict:
        return {"gamma": self.gamma, "lam": self.lam, "gamma_multiplier": self.gamma_multiplier,
                "lam_subsample": self.lam_subsample, "n_rows": self.n_rows,
                "n_centres": self.n_centres, "cv": self.cv, "seconds": self.seconds,
                "rule": ("validation AUC, stratified subsample, cv folds; gamma in multiples "
                         "of 1/b (past an end of the grid where the best sits), lam path "
                         "warm-started; lam rescaled by "
                         f"(n_fold_train / n) ** {LAM_EXPONENT}"),
                "table": self.table}


def _features(pc, X, C, gamma) -> np.ndarray:
    return pc.features(kernel_block(X, gaussian_centres(C, gamma, np.float64))).astype(np.float32)


def _fold_path(Phi_tr, y_tr, Phi_va, y_va, *, loss, lams, solver_params,
               label: str = "") -> list[dict]:
    """Validation AUC along the lam path (largest first), warm-started.

    The path stops once ``PATIENCE`` points in a row are ``DROP`` below its best (smaller lam
    only overfits more), leaving the rest of the grid out; and when a solve needs no Newton
    step (the warm start already meets ``tol``, which is relative to ``||grad F(0)||`` and so
    loosens as lam shrinks), every smaller lam gives that same model: its AUC is carried to
    the rest of the grid without solving (ties go to the larger lam, so those points never
    win). ``label`` names the path in its DEBUG lines."""
    out = []
    behind = 0
    pos, neg = class_counts(y_tr)
    n_pairs = float(pos) * float(neg)
    stats = class_statistics(Phi_tr, y_tr)  # LS's solves, the hinge's preconditioner
    moments = PairMoments(pair_second_moment(stats))
    w = None
    for lam in lams:
        t0 = time.perf_counter()
        if loss == "least_squares":
            w, n_iter = lsauc_from_stats(stats, float(lam)), 1
        else:
            # no catch_warnings here: the folds run in threads, and warnings.catch_warnings
            # saves and restores the process-wide filters, so two threads interleaving left
            # an "ignore ConvergenceWarning" filter behind, silencing the caller's warnings
            # after the fit (prsvm_newton itself does not warn)
            # y_tr is {-1, +1} numpy, checked once per fit: no check (and no compute of
            # the labels back to the client) per solve of the path
            res = prsvm_newton(Phi_tr, y_tr, C=1.0 / (lam * n_pairs), w0=w,
                               pair_moments=moments, check_input=False, **solver_params)
            w, n_iter = res.coef, res.n_iter
        auc = float(roc_auc(y_va, Phi_va @ w.astype(np.float32)))
        out.append({"lam": float(lam), "auc": auc, "n_iter": int(n_iter),
                    "seconds": time.perf_counter() - t0})
        logger.debug("path %s: lam=%.3g -> validation AUC %.5f (%d Newton steps)", label,
                     lam, auc, n_iter)
        behind = behind + 1 if auc < max(r["auc"] for r in out) - DROP else 0
        if behind >= PATIENCE:
            break
        if n_iter == 0 and loss != "least_squares" and len(out) > 1:
            out += [{"lam": float(v), "auc": auc, "n_iter": 0, "seconds": 0.0}
                    for v in lams[len(out):]]
            break
    return out


def ls_screen_path(Phi_tr, y_tr, Phi_va, y_va, *, lams) -> list[dict]:
    """Validation AUC of the least-squares AUC solution at every lam of ``lams``, from one
    eigendecomposition ``E = V diag(ev) V^T`` of the pairs' second moment: ``w(lam) = V
    (ev + lam/2)^-1 V^T D`` (:func:`daskauc.solvers.stats.lsauc_from_stats`'s solution),
    records as :func:`_fold_path`'s."""
    t0 = time.perf_counter()
    stats = class_statistics(Phi_tr, y_tr)
    ev, V = scipy.linalg.eigh(pair_second_moment(stats), check_finite=False)
    b = V.T @ stats.D
    P = np.asarray(Phi_va, dtype=np.float64) @ V
    out = [{"lam": float(lam), "auc": float(roc_auc(y_va, P @ (b / (ev + 0.5 * lam)))),
            "n_iter": 0, "seconds": 0.0} for lam in lams]
    out[0]["seconds"] = time.perf_counter() - t0
    return out


def _auc_array(paths: dict, mults, lams, everything: bool = False):
    """Validation AUCs (gamma, lam, fold) of the paths (NaN past a path's end); with
    ``everything`` also the Newton steps and the seconds."""
    n_folds = max(len(p) for p in paths.values())
    aucs = np.full((len(mults), len(lams), n_folds), np.nan)
    iters = np.zeros(aucs.shape, dtype=int)
    secs = np.zeros(aucs.shape[:2])
    for g, mult in enumerate(mults):
        for f, path in paths[mult].items():
            for k, rec in enumerate(path):
                aucs[g, k, f] = rec["auc"]
                iters[g, k, f] = rec["n_iter"]
                secs[g, k] += rec["seconds"]
    return (aucs, iters, secs) if everything else aucs


def _choose(aucs: np.ndarray, mults) -> tuple[int, int]:
    """``(g, k)`` of the best mean validation AUC; ties: closest to the rule (|log
    multiplier|), then the larger lam (earlier in the path)."""
    mean = aucs.mean(axis=2)
    score = np.where(np.isnan(mean), -np.inf, mean)
    order = sorted((-score[g, k], abs(np.log(mults[g])), k, g)
                   for g in range(len(mults)) for k in range(aucs.shape[1]))
    return order[0][3], order[0][2]


def select_gamma_lam(
    X,
    y: np.ndarray,
    *,
    gamma0: float,
    loss: str,
    n_centres: int,
    gamma_multipliers=GAMMA_MULTIPLIERS,
    lams=LAMBDAS,
    cv: int = 3,
    rows: int = SELECTION_ROWS,
    max_centres: int = SELECTION_CENTRES,
    n_full: int | None = None,
    lam_fixed: float | None = None,
    extend_grid: bool = True,
    random_state=None,
    solver_params: dict | None = None,
    screen: bool = False,
    lam_ceiling: float | None = None,
    lam_floor: float | None = None,
) -> Selection:
    """Choose ``gamma`` (among ``gamma0 * gamma_multipliers``) and ``lam`` by validation AUC.

    Parameters
    ----------
    X : dask array (n, d)
        The (scaled) training rows; only the subsample is read.
    y : ndarray (n,)
        Labels in {-1, +1}.
    gamma0 : float
        The bandwidth rule's width 1/b.
    loss : {"squared_hinge", "least_squares"}
    n_centres : int
        Centres of the final model; the subsample uses ``min(n_centres, max_centres, rows
        of a fold's training part)``.
    gamma_multipliers, lams : sequences
        The grid (lams are visited from the largest down).
    cv : int
        Stratified folds of the subsample.
    rows : int
        Size of the stratified subsample.
    n_full : int, optional
        Rows of the full training set (default: ``n``), for rescaling lam.
    lam_fixed : float, optional
        A given lam (full-data scale): only gamma is chosen, with lam rescaled to the
        subsample; the returned ``lam`` is ``lam_fixed``.
    extend_grid : bool
        When the best width is at an end of ``gamma_multipliers``, go on past that end by
        factors of 2 (at most ``EDGE_STEPS`` more widths) until it is inside the grid.
    random_state : SeedSequence
    solver_params : dict
        ``tol``, ``max_iter``, ``cg_tol``, ``max_cg`` of the Newton solves.
    screen : bool
        Score every (gamma, lam) by least squares' exact path (:func:`ls_screen_path`)
        whatever ``loss``: the width screen.
    lam_ceiling, lam_floor : float, optional
        Leave out the lams above / below them (full-data scale, rescaled to the subsample as
        lam is).

    Returns
    -------
    Selection
        ``table`` has one row per (gamma, lam): ``gamma_multiplier``, ``gamma``, ``lam``
        (subsample scale), ``mean_auc``, ``fold_auc``, ``n_iter``, ``seconds``.
    """
    t_start = time.perf_counter()
    y = np.asarray(y)
    n = int(X.shape[0])
    n_full = n if n_full is None else int(n_full)
    ss = random_state if isinstance(random_state, np.random.SeedSequence) else \
        np.random.SeedSequence(random_state)
    rng = np.random.default_rng(child_seed(ss, 7))
    idx = stratified_subsample(y, rows, rng)
    # read with the scheduler that holds X (rows persisted on a cluster are not visible to
    # a local scheduler: "missing dependency"); only the solves below run in-process
    Xs = np.asarray(compute(sample_rows(X, idx))[0] if len(idx) < n else compute(X)[0],
                    dtype=np.float64)
    ys = y[idx]
    folds = list(StratifiedKFold(n_splits=cv, shuffle=True,
                                 random_state=int(rng.integers(2**31))).split(Xs, ys))
    n_tr = float(np.mean([len(tr) for tr, _ in folds]))
    if lam_fixed is not None:
        lams = [float(lam_fixed) * (n_full / n_tr) ** LAM_EXPONENT]
    lams = sorted((float(v) for v in lams), reverse=True)
    if lam_ceiling is not None:
        top = float(lam_ceiling) * (n_full / n_tr) ** LAM_EXPONENT
        lams = [v for v in lams if v <= top * (1 + 1e-9)] or lams[-1:]
    if lam_floor is not None:
        bottom = float(lam_floor) * (n_full / n_tr) ** LAM_EXPONENT
        lams = [v for v in lams if v >= bottom * (1 - 1e-9)] or lams[:1]
    mults = [float(v) for v in gamma_multipliers]
    n_tr_min = min(len(tr) for tr, _ in folds)
    m = int(min(n_centres, max_centres, n_tr_min))
    solver_params = dict(solver_params or {})
    fold_centres = [Xs[tr[np.sort(rng.choice(len(tr), size=m, replace=False))]]
                    for tr, _ in folds]

    def job(f: int, mult: float):
        tr, va = folds[f]
        gamma = gamma0 * mult
        pc = build_preconditioner(fold_centres[f], gamma)
        Phi_tr = _features(pc, Xs[tr], fold_centres[f], gamma)
        Phi_va = _features(pc, Xs[va], fold_centres[f], gamma)
        del pc
        if screen:
            path = ls_screen_path(Phi_tr, ys[tr], Phi_va, ys[va], lams=lams)
        else:
            path = _fold_path(Phi_tr, ys[tr], Phi_va, ys[va], loss=loss, lams=lams,
                              solver_params=solver_params, label=f"fold {f}, gamma={mult:g}/b")
        return f, mult, path

    def best_complete():
        """The search's choice so far (``_choose``: the best mean over every fold) among the
        widths done on every fold, as ``(description, mean AUC)``; None before the first."""
        done = sorted(g for g in paths if len(paths[g]) == len(folds))
        if not done:
            return None
        aucs = _auc_array({g: paths[g] for g in done}, done, lams)
        g, k = _choose(aucs, done)
        mean = float(aucs[g, k].mean())
        return None if not np.isfinite(mean) else (
            f"gamma={done[g]:g}/b lam={lams[k]:.3g}, mean of {len(folds)} folds", mean)

    paths: dict = {}  # multiplier -> {fold: path}
    submitted = [0]

    def run_jobs(jobs):
        # every (fold, gamma) path is independent: one per core, each on the synchronous
        # scheduler with one BLAS thread (numba kernels and BLAS release the GIL)
        if not jobs:
            return
        submitted[0] += len(jobs)
        if submitted[0] > search.total:  # a width past an end of the grid
            search.expect(submitted[0] - search.total,
                          f"the best width is at an end of the grid, so {jobs[0][1]:g}/b too")
        with dask.config.set(scheduler="sync"), _config.blas_limit(1), \
                ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
            for f, mult, path in pool.map(lambda fg: job(*fg), jobs):
                paths.setdefault(mult, {})[f] = path
                top = max(path, key=lambda r: r["auc"])
                # the line's AUC is this fold's; the best is what the choice is made on
                search.record(f"gamma={mult:g}/b fold {f + 1}/{len(folds)}", top["auc"],
                              f"at lam={top['lam']:.3g} ({len(path)} of {len(lams)} lam, "
                              f"{sum(r['n_iter'] for r in path)} Newton steps)",
                              best=best_complete())

    def run(new_mults):
        # successive halving over the folds: every width on the first fold, the other folds
        # only for the KEEP_WIDTHS best widths on it (ties: the closest to the rule)
        run_jobs([(0, g) for g in new_mults])
        ranked = sorted(paths, key=lambda g: (-max(r["auc"] for r in paths[g][0]),
                                              abs(np.log(g))))
        run_jobs([(f, g) for g in ranked[:KEEP_WIDTHS] for f in range(1, len(folds))
                  if f not in paths[g]])

    widths = sorted({float(v) for v in gamma_multipliers})
    name = ("width screen (least squares)" if screen else "gamma/lam search"
            if lam_fixed is None else "gamma search")
    with search_progress(f"KernelAUC {name}", len(widths)
                         + min(KEEP_WIDTHS, len(widths)) * (len(folds) - 1),
                         unit="(width, fold) path") as search:
        run(widths)
        # a best width at an end of the grid was not chosen, only bounded: go on past that
        # end (a factor of 2 at a time, at most EDGE_STEPS times)
        for _ in range(EDGE_STEPS if extend_grid and len(paths) > 1 else 0):
            mults = sorted(paths)
            g_best = _choose(_auc_array(paths, mults, lams), mults)[0]
            if 0 < g_best < len(mults) - 1:
                break
            run([mults[0] / 2.0 if g_best == 0 else mults[-1] * 2.0])
    mults = sorted(paths)
    aucs, iters, secs = _auc_array(paths, mults, lams, everything=True)
    mean = aucs.mean(axis=2)  # NaN where some fold's path stopped before this lam
    table = [{"gamma_multiplier": mult, "gamma": gamma0 * mult, "lam": lam,
              "mean_auc": None if np.isnan(mean[g, k]) else float(mean[g, k]),
              "fold_auc": [None if np.isnan(a) else float(a) for a in aucs[g, k]],
              "n_iter": iters[g, k].tolist(), "seconds": float(secs[g, k])}
             for g, mult in enumerate(mults) for k, lam in enumerate(lams)]
    g_best, k_best = _choose(aucs, mults)
    lam_sub = lams[k_best]
    lam = float(lam_fixed) if lam_fixed is not None else lam_sub * (n_tr / n_full) ** LAM_EXPONENT
    return Selection(gamma=gamma0 * mults[g_best], lam=lam,
                     gamma_multiplier=mults[g_best], lam_subsample=lam_sub, n_rows=len(idx),
                     n_centres=m, cv=cv, seconds=time.perf_counter() - t_start, table=table)


def choose_gamma_lam(X, y: np.ndarray, *, gamma, lam, n_centres: int, gamma_grid, lam_grid,
                     cv: int, rows: int, max_centres: int, width_rows: int, width_centres: int,
                     solver: str, settings: KernelSettings, random_state):
    """:class:`~daskauc.KernelAUC`'s ``(gamma, lam, selection)``: each given as a number, or
    "rule" (gamma only: the bandwidth rule 1/b), or "auto": chosen by
    :func:`select_gamma_lam` (on ``gamma_grid`` times 1/b, widened past an end; ``lam_grid``,
    default ``LAMBDAS``). An automatic width on the default grid (``GAMMA_MULTIPLIERS``) is
    first screened by least squares' exact path on a smaller subsample (``SCREEN_ROWS``,
    ``SCREEN_CENTRES``), which leaves the search three widths around its best (moved up a
    factor of 2 per factor of 4 more centres in the search) and, for an automatic lam, the
    lams from ``LAM_CEILING`` times its best down to ``1 / LAM_FLOOR`` times it; the chosen width
    is then walked at the final model's scale (:func:`walk_width`). ``selection`` is
    :meth:`Selection.as_dict` with the screen under ``"screen"`` and the walk under
    ``"width_walk"``, or None when nothing was "auto". ``random_state`` is the fit's
    SeedSequence (its children 1, 3 and 5)."""
    if gamma != "auto" and lam != "auto":
        return (default_gamma(X) if gamma == "rule" else float(gamma)), float(lam), None
    gamma0 = default_gamma(X)
    if gamma == "auto":
        mults = gamma_grid if gamma_grid is not None else GAMMA_MULTIPLIERS
    else:
        mults = [(gamma0 if gamma == "rule" else float(gamma)) / gamma0]
    common = dict(gamma0=gamma0, n_centres=n_centres,
                  lams=lam_grid if lam_grid is not None else LAMBDAS,
                  lam_fixed=None if lam == "auto" else float(lam), cv=cv,
                  n_full=int(X.shape[0]), solver_params=settings.newton_params)
    default_grid = gamma == "auto" and gamma_grid is None
    screened, lam_ceiling, lam_floor = None, None, None
    if default_grid and SCREEN_ROWS > 0:
        screened = select_gamma_lam(
            X, y, loss="least_squares", gamma_multipliers=mults, rows=min(rows, SCREEN_ROWS),
            max_centres=min(max_centres, SCREEN_CENTRES), extend_grid=True, screen=True,
            random_state=child_seed(random_state, 5), **common)
        # the best width grows with the centres (module docstring): the search's three widths
        # are centred a factor of 2 above the screen's best per factor of 4 more centres
        # (spambase: the screen's 512 centres chose 1/4 b, the search's 2,048 1/b), on it
        # where the rows leave both the same centres (breast-cancer)
        n_search = min(rows, int(X.shape[0])) * (cv - 1) / cv
        ratio = min(n_centres, max_centres, n_search) / screened.n_centres
        centre = screened.gamma_multiplier * 2.0 ** round(0.5 * np.log2(max(ratio, 1.0)))
        mults = [centre / 2.0, centre, centre * 2.0]
        if lam == "auto":
            lam_ceiling, lam_floor = LAM_CEILING * screened.lam, screened.lam / LAM_FLOOR
        logger.info("KernelAUC: the width screen chose %g/b; the search tries %s (%.1f s)",
                    screened.gamma_multiplier, mults, screened.seconds)
    chosen = select_gamma_lam(
        X, y, loss=settings.loss, gamma_multipliers=mults, rows=rows, max_centres=max_centres,
        extend_grid=default_grid, lam_ceiling=lam_ceiling, lam_floor=lam_floor,
        random_state=child_seed(random_state, 1), **common)
    logger.info("KernelAUC: chose gamma = %.4g (%g/b) and lam = %.3g (mean validation AUC "
                "%.5f over %d folds) in %.1f s", chosen.gamma, chosen.gamma_multiplier,
                chosen.lam, chosen.mean_auc, chosen.cv, chosen.seconds)
    selection = chosen.as_dict()
    if screened is not None:
        selection["screen"] = screened.as_dict()
        selection["seconds"] += screened.seconds
    if default_grid:
        walk = walk_width(X, y, gamma0=gamma0, selection=selection, n_centres=n_centres,
                          rows=width_rows, max_centres=width_centres, solver=solver,
                          settings=settings, lam_exponent=LAM_EXPONENT,
                          random_state=child_seed(random_state, 3))
        if walk is not None:
            selection.update(gamma=walk["gamma"], gamma_multiplier=walk["gamma_multiplier"],
                             width_walk=walk)
            return walk["gamma"], chosen.lam, selection
    return chosen.gamma, chosen.lam, selection
