"""Khalid, Ray & Chitsaz, Tables 2 and 4: the batch and stochastic nonlinear AUC methods.

Rows (dataset, method): RankSVM, RFAUC, NBAUC and the exact-kernel RankSVM (Table 2, at most
80,000 training rows), NSAUC, NSOLAM, NOAM and NBAUC on all rows (Table 4), and NSVMSGD2
(their Fig. 1), on ijcnn1, spambase, usps and covtype.

    python -m benchmarks.reproduce.khalid                    # every row not cached yet
    python -m benchmarks.reproduce.khalid --datasets ijcnn1,spambase --methods NBAUC,RankSVM
    python -m benchmarks.reproduce.khalid --list             # the rows it knows

Protocol: official split when there is one, else a stratified 80/20 split (seed 0); features
standardized on the training part; a k-means Nystroem map with 1600 landmarks and the default
gamma rule (``KMeansNystroem``), written once per dataset as a float32 embedding store
(``write_embedding``) under ``--workdir`` and reused; 3-fold stratified CV folds cut from the
training embedding (as ``benchmarks/ijcnn1_nsauc.py``); one final fit on the whole training
part, timed (wall seconds) and scored on the test part. Table 2 (batch methods) trains on at
most 80,000 rows: covtype's batch rows use an 80k stratified subsample (seed 0) of the
training rows. What the rows share with the other paper's, and the command line, are
:mod:`benchmarks.reproduce._shared`'s.
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from benchmarks._harness import stratified_folds
from benchmarks.reproduce._shared import (
    BATCH_ROWS,
    FOLDS,
    LANDMARKS,
    SEED,
    auc,
    embedding,
    load_row,
    logger,
    main,
    standardized,
    subsample_mask,
    timed_fit,
)

#: the issue's targets (test AUC at least this)

TARGETS = {("ijcnn1", "NBAUC"): .9957, ("ijcnn1", "RankSVM"): .9156,
           ("ijcnn1", "NSAUC"): .9969, ("ijcnn1", "NSOLAM"): .9886, ("ijcnn1", "NOAM"): .9816,
           ("spambase", "NBAUC"): .9804, ("spambase", "RankSVM"): .9747}

# ---------------------------------------------------------------------------- paper figures
# Khalid, Ray & Chitsaz: Table 2 (test AUC, batch methods, <= 80k training rows) with the
# training seconds of Table 3, and Table 4 (full training data) with its training seconds.
KHALID_T2 = {
    "spambase": {"KernelRankSVM": (.9800, 3.08), "KernelRankSVM-1/5": (.9602, .10),
                 "RankSVM": (.9747, .13),
                 "RFAUC": (.9775, 3.59), "NBAUC": (.9804, 7.71)},
    "usps": {"KernelRankSVM": (.9908, 492.30), "KernelRankSVM-1/5": (.9854, .83),
             "RankSVM": (.9027, 1.42),
             "RFAUC": (.9742, 6.77), "NBAUC": (.9924, 27.68)},
    "ijcnn1": {"KernelRankSVM": (.9968, 15434.0), "KernelRankSVM-1/5": (.9935, 282.0),
               "RankSVM": (.9156, .57),
               "RFAUC": (.9886, 80.17), "NBAUC": (.9957, 88.87)},
    "covtype": {"KernelRankSVM": (.9394, 133270.0), "KernelRankSVM-1/5": (.9405, 11670.0),
                "RankSVM-80k": (.8775, 2.54),
                "RFAUC-80k": (.9599, 273.67), "NBAUC-80k": (.9603, 220.90)},
}
KHALID_T4 = {
    "ijcnn1": {"NOAM": (.9816, 6.24), "NSOLAM": (.9886, 6.88), "NSAUC": (.9969, 4.80),
               "NBAUC": (.9957, 40.70)},
    "covtype": {"NOAM": (.9129, 61.75), "NSOLAM": (.9225, 63.59), "NSAUC": (.9600, 49.17),
                "NBAUC": (.9660, 1110.44)},
}

# ---------------------------------------------------------------------------- grids
C_GRID = [float(c) for c in 2.0 ** np.arange(-15, 11)]           # PRSVM+ (paper)
KERNEL_C_GRID = [float(c) for c in 2.0 ** np.arange(-5, 6)]      # RBF-RankSVM (paper)
KERNEL_GAMMA_GRID = [float(g) for g in 2.0 ** np.arange(-6, 0)]  # RBF-RankSVM (paper)
LAMBDA_GRID = [1e-10, 1e-9, 1e-8, 1e-7]                          # NSAUC (paper)
# NSAUC / NSVMSGD2: the paper gives no epoch count for Table 4 and says (Sec. 5.5, Fig. 1) that
# "choosing the best number of epochs would be easy"; we choose it by the same 3-fold CV as
# lambda, from one partial_fit run per (lambda, fold) read at these epoch counts (a k-epoch
# partial_fit run equals fit(n_epochs=k) exactly, tests/test_stream.py).
SGD_EPOCH_GRID = [1, 2, 3, 5, 10, 20, 50]  # the convergence study's grid (Fig. 1 up to 50)
# NSOLAM: the paper's grids are zeta in {1:9:100} (12 values) and R in 10^[-1:5] (7 values),
# 15 epochs; we use the subset below (every third zeta, every R).
SOLAM_ZETA = [1.0, 28.0, 55.0, 100.0]
SOLAM_R = [0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5]
SOLAM_EPOCHS = 15
# NOAM: Zhao et al.'s C grid 2^[-10:10] (coarse: every 4th power), both updates, the last
# iterate and the averaged iterate, 1 epoch (the online protocol) and more.
OAM_C = [float(c) for c in 2.0 ** np.arange(-10, 11, 4)]
OAM_UPDATES = ["seq", "gra"]
OAM_AVERAGE = [False, True]
OAM_EPOCHS = [1]

SUBSAMPLE_SUFFIX = "-1/5"
KERNEL_MAX_ROWS = 10_000  # exact kernel map: n x n float64 (0.8 GB) and its eigendecomposition
METHODS = ("RankSVM", "RFAUC", "NBAUC", "KernelRankSVM", "KernelRankSVM-1/5", "NSAUC",
           "NSVMSGD2", "NSOLAM", "NOAM", "RankSVM-80k", "RFAUC-80k", "NBAUC-80k")
ROWS = {
    "ijcnn1": ["RankSVM", "RFAUC", "NBAUC", "KernelRankSVM-1/5", "NSAUC", "NSVMSGD2", "NSOLAM",
               "NOAM"],
    "spambase": ["RankSVM", "RFAUC", "NBAUC", "KernelRankSVM", "KernelRankSVM-1/5"],
    "usps": ["RankSVM", "RFAUC", "NBAUC", "KernelRankSVM", "KernelRankSVM-1/5"],
    "covtype": ["RankSVM-80k", "RFAUC-80k", "NBAUC-80k", "NBAUC", "NSAUC", "NSVMSGD2",
                "NSOLAM", "NOAM"],
}


# ============================================================================ folds
def cv_folds(y: np.ndarray) -> np.ndarray:
    """The stratified fold index of every row (3 folds, seed 0)."""
    return stratified_folds(y, FOLDS, SEED)



class FoldSplitter:
    """A scikit-learn-style splitter over a precomputed fold index (for ``cv_select_C``)."""

    def __init__(self, fold: np.ndarray):
        self.fold = fold

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return int(self.fold.max()) + 1

    def split(self, X=None, y=None, groups=None):
        for k in range(self.get_n_splits()):
            yield np.flatnonzero(self.fold != k), np.flatnonzero(self.fold == k)


# ============================================================================ rows
def batch_select_and_fit(Xtr, ytr, Xte, yte, Cs, fold, scores=None):
    """cv_select_C on the paper's grid (warm starts along increasing C), then one final fit.

    ``scores(coef)`` gives the test scores when ``Xte`` is not the test design matrix itself
    (the exact kernel rows, scored in the dual form).
    """
    from daskauc import RankSVM, cv_select_C

    tic = time.perf_counter()
    best_C, table = cv_select_C(RankSVM(tol=1e-3), Xtr, ytr, Cs, cv=FoldSplitter(fold))
    cv_s = time.perf_counter() - tic
    est = RankSVM(C=best_C, tol=1e-3)
    fit_s = timed_fit(est, Xtr, ytr)
    cv_table = [{"C": r["C"], "cv_auc": r["mean_auc"], "newton_iters": r["n_iter"],
                 "seconds": r["seconds"]} for r in table]
    s = est.decision_function(Xte) if scores is None else scores(est.coef_)
    return {"test_auc": auc(yte, s), "fit_seconds": fit_s,
            "cv_seconds": cv_s, "params": {"C": best_C}, "n_iter": int(est.n_iter_),
            "cv_table": cv_table}


def _kernel_scores(fmap, X, rows: int = 8192):
    """Test scores of a linear model on the exact kernel map, without the n_test x n map.

    The map is Z = K(X, U) M (U the training rows, M = fmap.projection_), so Z w = K(X, U)
    (M w): one kernel block of ``rows`` test rows at a time against the n_train landmarks.
    """
    from daskauc.embed.nystroem import gaussian_kernel

    def score(coef):
        alpha = fmap.projection_ @ np.asarray(coef, dtype=np.float64)
        return np.concatenate([gaussian_kernel(X[i:i + rows], fmap.landmarks_, fmap.gamma_)
                               @ alpha for i in range(0, len(X), rows)])
    return score


def _grid_cv(make, grid: list[dict], Ztr, ytr, fold):
    """Mean validation AUC of every grid point (fits on numpy slices of the embedding;
    ``daskauc.model_selection.cross_validate_auc`` over the fold index)."""
    from daskauc.model_selection import cross_validate_auc

    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params, table = cross_validate_auc(make(**grid[0]), Ztr, ytr, grid,
                                           cv=FoldSplitter(fold), error_score=np.nan)
    rows = [{**{k: r[k] for k in grid[0]}, "cv_auc": r["mean_auc"], "fit_s": r["seconds"]}
            for r in table]
    for r in rows:
        logger.info("  cv %s -> %.4f (%.1f s)", {k: r[k] for k in grid[0]}, r["cv_auc"],
                    r["fit_s"])
    return params, rows, time.perf_counter() - tic


def _stochastic_row(make, grid, Ztr, ytr, Zte, yte, cv_rows=None):
    """Grid CV (on a stratified ``cv_rows`` subsample when there are more rows), final fit."""
    m = subsample_mask(ytr, cv_rows) if cv_rows else np.ones(len(ytr), dtype=bool)
    cv = _grid_cv(make, grid, Ztr[m], ytr[m], cv_folds(ytr[m]))
    out = _final_fit(make, *cv, Ztr, ytr, Zte, yte)
    if not m.all():
        out["cv_note"] = f"CV on a {int(m.sum())}-row stratified subsample"
    return out


def _final_fit(make, params, table, cv_s, Ztr, ytr, Zte, yte):
    """Fit the chosen parameters on the whole training part and score the test part."""
    est = make(**params)
    fit_s = timed_fit(est, Ztr, ytr)
    return {"test_auc": auc(yte, est.decision_function(Zte)), "fit_seconds": fit_s,
            "cv_seconds": cv_s, "params": params, "cv_table": table,
            "epoch_seconds": [h.get("seconds") for h in getattr(est, "history_", [])]}


def sgd_maker(average: bool):
    from daskauc import PairwiseHingeSGD

    def make(lam, n_epochs=1):
        return PairwiseHingeSGD(lam=lam, n_epochs=n_epochs, average=average,
                                random_state=SEED)
    return make


def _epoch_path_cv(make, lams, epochs, Ztr, ytr, fold):
    """CV over (lambda, epochs): one partial_fit run per (lambda, fold), scored at ``epochs``
    (``cross_validate_auc`` along an epoch path)."""
    from daskauc.model_selection import cross_validate_auc

    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params, table = cross_validate_auc(make(lams[0]), Ztr, ytr, {"lam": list(lams)},
                                           cv=FoldSplitter(fold), epochs=list(epochs),
                                           error_score=np.nan)
    rows = [{"lam": r["lam"], "n_epochs": r["n_epochs"], "cv_auc": r["mean_auc"],
             "fit_s": r["seconds"]} for r in table]
    for r in rows:
        logger.info("  cv lam=%g epochs=%d -> %.4f", r["lam"], r["n_epochs"], r["cv_auc"])
    return {"lam": params["lam"], "n_epochs": params["n_epochs"]}, rows, \
        time.perf_counter() - tic


def _solam_make(zeta, R):
    from daskauc import SOLAM

    return SOLAM(zeta=zeta, R=R, n_epochs=SOLAM_EPOCHS, random_state=SEED)


def oam_make(C, update, average, n_epochs):
    from daskauc import OAM

    return OAM(C=C, update=update, average=average, n_epochs=n_epochs, buffer_size=100,
               random_state=SEED)


def load_embedding_np(name, workdir, opts):
    tr, te, info = embedding(name, workdir, train_store=opts.get("train_store"),
                             test_store=opts.get("test_store"))
    Ztr = np.ascontiguousarray(tr.X.compute())
    ytr = np.asarray(tr.y.compute())
    Zte = np.ascontiguousarray(te.X.compute())
    yte = np.asarray(te.y.compute())
    return Ztr, ytr, Zte, yte, info


def run(name: str, method: str, workdir: str, opts: dict) -> dict:
    """One (dataset, method) row of Khalid et al. Tables 2 / 4."""
    from daskauc import KMeansNystroem, RandomFourierFeatures

    base = method.removesuffix("-80k").removesuffix(SUBSAMPLE_SUFFIX)
    sub = method.endswith("-80k")
    extra: dict = {}
    if base == "RankSVM":
        Xtr, ytr, Xte, yte, note, _ = standardized(name, workdir)
        m = subsample_mask(ytr) if sub else np.ones(len(ytr), bool)
        Xtr, ytr = Xtr[m], ytr[m]
        out = batch_select_and_fit(Xtr, ytr, Xte, yte, C_GRID, cv_folds(ytr))
        extra["features"] = "standardized raw features"
    elif base == "RFAUC":
        Xtr, ytr, Xte, yte, note, _ = standardized(name, workdir)
        m = subsample_mask(ytr) if sub else np.ones(len(ytr), bool)
        Xtr, ytr = Xtr[m], ytr[m]
        tic = time.perf_counter()
        rff = RandomFourierFeatures(n_components=LANDMARKS, dtype="float32",
                                    random_state=SEED).fit(Xtr)
        Ftr, Fte = np.asarray(rff.transform(Xtr)), np.asarray(rff.transform(Xte))
        extra["embed_seconds"] = time.perf_counter() - tic
        out = batch_select_and_fit(Ftr, ytr, Fte, yte, C_GRID, cv_folds(ytr))
        extra["features"] = f"{LANDMARKS} random Fourier features, gamma={rff.gamma_:.4g}"
    elif base == "KernelRankSVM":
        Xtr, ytr, Xte, yte, note, _ = standardized(name, workdir)
        if method.endswith(SUBSAMPLE_SUFFIX):  # Table 2's RBF-RankSVM(subsample): 1/5 of rows
            m = subsample_mask(ytr, len(ytr) // 5)
            Xtr, ytr = Xtr[m], ytr[m]
            extra["subsample"] = f"stratified 1/5 of the training rows (seed {SEED})"
        if len(ytr) > KERNEL_MAX_ROWS:
            raise ValueError(f"KernelRankSVM is for n_train <= {KERNEL_MAX_ROWS:,} "
                             f"({name}: {len(ytr):,})")
        fold = cv_folds(ytr)
        best = None
        per_gamma = []
        t_all = time.perf_counter()
        for gamma in KERNEL_GAMMA_GRID:
            tic = time.perf_counter()
            fmap = KMeansNystroem(n_components=len(ytr), landmarks="all", gamma=gamma,
                                  dtype="float64", random_state=SEED).fit(Xtr)
            Ktr = np.asarray(fmap.transform(Xtr))
            t_map = time.perf_counter() - tic
            res = batch_select_and_fit(Ktr, ytr, None, yte, KERNEL_C_GRID, fold,
                                        scores=_kernel_scores(fmap, Xte))
            del Ktr
            cv_auc = max(r["cv_auc"] for r in res["cv_table"])
            per_gamma.append({"gamma": gamma, "C": res["params"]["C"], "cv_auc": cv_auc,
                              "test_auc": res["test_auc"], "r": int(fmap.n_components_),
                              "map_s": t_map})
            logger.info("  gamma %.4g: C %.4g cv %.4f test %.4f", gamma, res["params"]["C"],
                        cv_auc, res["test_auc"])
            if best is None or cv_auc > best[0]:
                best = (cv_auc, gamma, res)
        _, gamma, out = best
        out["params"] = {"gamma": gamma, **out["params"]}
        out["cv_seconds"] = time.perf_counter() - t_all  # includes the maps of every gamma
        extra["per_gamma"] = per_gamma
        extra["features"] = "exact Gaussian kernel map (every training row a landmark)"
    else:
        Ztr, ytr, Zte, yte, info = load_embedding_np(name, workdir, opts)
        note = info.get("note", "")
        extra["embedding"] = info
        extra["features"] = f"k-means Nystroem, {info.get('r')} of {LANDMARKS} eigenpairs"
        # NSOLAM / NOAM grids (28 and 24 points x 3 folds): CV on a subsample beyond 80k rows
        cv_rows = opts.get("cv_rows") if len(ytr) > BATCH_ROWS else None
        if base == "NBAUC":
            if sub:
                m = subsample_mask(ytr)
                out = batch_select_and_fit(Ztr[m], ytr[m], Zte, yte, C_GRID, cv_folds(ytr[m]))
            elif len(ytr) > BATCH_ROWS:
                # full covtype: ~1 min per Newton solve; C from the 80k-subsample CV
                sub_row = load_row(name, "NBAUC-80k")
                if sub_row is None:
                    raise RuntimeError(f"run {name} NBAUC-80k first (its CV chooses C)")
                from daskauc import RankSVM

                C = sub_row["params"]["C"]
                est = RankSVM(C=C, tol=1e-3)
                fit_s = timed_fit(est, Ztr, ytr)
                out = {"test_auc": auc(yte, est.decision_function(Zte)), "fit_seconds": fit_s,
                       "cv_seconds": 0.0, "params": {"C": C}, "n_iter": int(est.n_iter_),
                       "cv_note": "C chosen by 3-fold CV on the 80k subsample (NBAUC-80k)"}
            else:
                out = batch_select_and_fit(Ztr, ytr, Zte, yte, C_GRID, cv_folds(ytr))
        elif base in ("NSAUC", "NSVMSGD2"):
            make = sgd_maker(base == "NSAUC")
            cv = _epoch_path_cv(make, LAMBDA_GRID, SGD_EPOCH_GRID, Ztr, ytr, cv_folds(ytr))
            out = _final_fit(make, *cv, Ztr, ytr, Zte, yte)
        elif base == "NSOLAM":
            grid = [{"zeta": z, "R": R} for z in SOLAM_ZETA for R in SOLAM_R]
            out = _stochastic_row(_solam_make, grid, Ztr, ytr, Zte, yte, cv_rows)
            out["params"]["n_epochs"] = SOLAM_EPOCHS
        elif base == "NOAM":
            grid = [{"C": C, "update": u, "average": a, "n_epochs": e} for u in OAM_UPDATES
                    for a in OAM_AVERAGE for e in OAM_EPOCHS for C in OAM_C]
            out = _stochastic_row(oam_make, grid, Ztr, ytr, Zte, yte, cv_rows)
            extra["buffers"] = "100 + 100"
        else:
            raise ValueError(f"unknown method {method!r}")
    paper = {**KHALID_T2.get(name, {}), **KHALID_T4.get(name, {})}.get(method)
    table = ("Khalid T4" if method in KHALID_T4.get(name, {}) and method not in
             KHALID_T2.get(name, {}) else "Khalid T2" if paper else "Khalid (Fig. 1)")
    if name == "ijcnn1" and method == "NBAUC":
        table = "Khalid T2+T4"
    return {"dataset": name, "method": method, "table": table, "protocol": "khalid",
            "paper": paper[0] if paper else None, "paper_seconds": paper[1] if paper else None,
            "data_note": note, "n_train": int(len(ytr)) if not sub else int(BATCH_ROWS),
            **out, **extra}

# ============================================================================ tables
def compact_cv(r) -> str:
    """One line per run of C giving the same CV AUC (to 4 digits) and Newton iterations."""
    out, prev = [], None
    for c in r["cv_table"]:
        it = "/".join(str(i) for i in c["newton_iters"])
        key = (round(c["cv_auc"], 4), it)
        if prev is not None and prev[0] == key:
            prev[2] = c["C"]
            continue
        prev = [key, c["C"], c["C"]]
        out.append(prev)
    cells = []
    for (mean_auc, it), lo, hi in out:
        cs = f"2^{np.log2(lo):.0f}" + ("" if lo == hi else f"..2^{np.log2(hi):.0f}")
        cells.append(f"{cs}: {mean_auc:.4f} ({it})")
    return "; ".join(cells)




def tables(rows: list[dict]) -> dict[str, str]:
    """The CV tables of the PRSVM+ rows (by C) and of the NSAUC / NSVMSGD2 rows (by lambda
    and epochs, the chosen cell in bold)."""
    batch = [r for r in rows if r.get("cv_table") and "newton_iters" in r["cv_table"][0]]
    prsvm = [f"- **{r['dataset']} {r['method']}**: {compact_cv(r)}" for r in batch]
    sgd = [r for r in rows if r.get("cv_table") and "n_epochs" in r["cv_table"][0]
           and "lam" in r["cv_table"][0]]
    lines = []
    for r in sgd:
        eps = sorted({c["n_epochs"] for c in r["cv_table"]})
        lams = sorted({c["lam"] for c in r["cv_table"]})
        cell = {(c["lam"], c["n_epochs"]): c["cv_auc"] for c in r["cv_table"]}
        lines += [f"**{r['dataset']} {r['method']}**", "",
                  "| lambda | " + " | ".join(f"{e} ep" for e in eps) + " |",
                  "|---|" + "---|" * len(eps)]
        for lam in lams:
            vals = []
            for e in eps:
                v = f"{cell[(lam, e)]:.4f}"
                chosen = (lam, e) == (r["params"]["lam"], r["params"]["n_epochs"])
                vals.append(f"**{v}**" if chosen else v)
            lines.append(f"| {lam:g} | " + " | ".join(vals) + " |")
        lines.append("")
    return {"khalid_prsvm_cv": "\n".join(prsvm), "khalid_sgd_cv": "\n".join(lines)}


if __name__ == "__main__":
    sys.exit(main(("khalid",), doc=__doc__, quick={"datasets": "spambase", "methods": "RankSVM"}))
