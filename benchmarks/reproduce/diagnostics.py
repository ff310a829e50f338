"""The measurements behind the explanations of the rows below the papers' figures.

docs/reproduction.md explains each row more than 0.5 AUC points below its paper; these
diagnostics measure what the explanations rest on (other splits, fewer training rows, a
tighter Newton tolerance, other bandwidths, other groupings of a dataset's classes ...).
Each is cached like the rows, as ``diag__<name>.json`` in ``<--out>/reproduce/``, and listed
in ``diagnostics.md`` there:

    python -m benchmarks.reproduce --diagnostics            # all but the slow ones
    python -m benchmarks.reproduce.khalid --diagnostics     # the Khalid rows' only
    python -m benchmarks.reproduce --diagnostics noam-ijcnn1,newton_tol-ijcnn1

A diagnostic reads the cached row it explains: run the rows first.
"""

from __future__ import annotations

import json
import os
import time
import warnings

import numpy as np

from benchmarks import least_squares_tables as lst
from benchmarks._harness import read_svmlight, split_80_20
from benchmarks.reproduce import _shared
from benchmarks.reproduce._shared import (
    BATCH_ROWS,
    LANDMARKS,
    SEED,
    auc,
    load_raw,
    load_row,
    logger,
    standardized,
    subsample_mask,
    timed_fit,
)
from benchmarks.reproduce.khalid import (
    C_GRID,
    OAM_AVERAGE,
    OAM_UPDATES,
    FoldSplitter,
    cv_folds,
    load_embedding_np,
    oam_make,
    sgd_maker,
)


def _features(kind: str, Xtr_raw, ytr, Xte_raw):
    """Standardize on train, then the raw features, the 1600-landmark map or the RFF map."""
    from daskauc import KMeansNystroem, RandomFourierFeatures, StandardScaler

    sc = StandardScaler().fit(Xtr_raw)
    Xtr, Xte = np.asarray(sc.transform(Xtr_raw)), np.asarray(sc.transform(Xte_raw))
    if kind == "RankSVM":
        return Xtr, Xte
    if kind == "RFAUC":
        fmap = RandomFourierFeatures(n_components=LANDMARKS, dtype="float32", random_state=SEED)
    else:
        fmap = KMeansNystroem(n_components=min(LANDMARKS, len(ytr)), dtype="float32",
                              random_state=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fmap.fit(Xtr.astype(np.float32))
    return (np.asarray(fmap.transform(Xtr.astype(np.float32))),
            np.asarray(fmap.transform(Xte.astype(np.float32))))


def diag_split_spread(name: str, method: str, workdir: str, seeds=range(1, 20)) -> dict:
    """Test AUC of a PRSVM+ row on other stratified 80/20 splits, at the chosen C."""
    from daskauc import RankSVM

    row = load_row(name, method)
    Xa, ya, Xb, yb, _ = load_raw(name, workdir)
    X, y = np.r_[Xa, Xb], np.r_[ya, yb]
    from daskauc.data import train_test_split

    out = []
    for seed in seeds:
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed)
        Ftr, Fte = _features(method, Xtr, ytr, Xte)
        est = RankSVM(C=row["params"]["C"], tol=1e-3)
        timed_fit(est, Ftr, ytr)
        out.append({"split_seed": seed, "test_auc": auc(yte, est.decision_function(Fte))})
    aucs = [o["test_auc"] for o in out] + [row["test_auc"]]
    return {"kind": "split_spread", "dataset": name, "method": method, "C": row["params"]["C"],
            "splits": out, "seed0": row["test_auc"], "mean": float(np.mean(aucs)),
            "min": float(np.min(aucs)), "max": float(np.max(aucs))}


def diag_train_size(name: str, method: str, workdir: str,
                    fractions=(0.25, 0.5, 1.0)) -> dict:
    """Test AUC of a PRSVM+ row trained on stratified fractions of our training part."""
    from daskauc import RankSVM

    row = load_row(name, method)
    Xtr_all, ytr_all, Xte, yte, _ = load_raw(name, workdir)
    out = []
    for f in fractions:
        m = subsample_mask(ytr_all, int(round(f * len(ytr_all)))) if f < 1 else \
            np.ones(len(ytr_all), bool)
        Ftr, Fte = _features(method, Xtr_all[m], ytr_all[m], Xte)
        est = RankSVM(C=row["params"]["C"], tol=1e-3)
        timed_fit(est, Ftr, ytr_all[m])
        out.append({"fraction": f, "n_train": int(m.sum()),
                    "test_auc": auc(yte, est.decision_function(Fte))})
    return {"kind": "train_size", "dataset": name, "method": method, "C": row["params"]["C"],
            "points": out}


def diag_newton_tol(name: str, workdir: str, opts: dict) -> dict:
    """NBAUC's C selection and test AUC with the default tol=1e-3 and with tol=1e-6."""
    from daskauc import RankSVM, cv_select_C

    Ztr, ytr, Zte, yte, _ = load_embedding_np(name, workdir, opts)
    if len(ytr) > BATCH_ROWS:
        m = subsample_mask(ytr)
        Ztr, ytr = Ztr[m], ytr[m]
    fold = cv_folds(ytr)
    out = []
    for tol in (1e-3, 1e-6):
        tic = time.perf_counter()
        C, table = cv_select_C(RankSVM(tol=tol, max_iter=200), Ztr, ytr, C_GRID,
                               cv=FoldSplitter(fold))
        cv_s = time.perf_counter() - tic
        est = RankSVM(C=C, tol=tol, max_iter=200)
        timed_fit(est, Ztr, ytr)
        out.append({"tol": tol, "C": C, "cv_seconds": cv_s,
                    "cv_auc": max(r["mean_auc"] for r in table),
                    "test_auc": auc(yte, est.decision_function(Zte)),
                    "cv_auc_at_largest_C": table[-1]["mean_auc"],
                    "newton_iters_total": int(sum(sum(r["n_iter"]) for r in table))})
    return {"kind": "newton_tol", "dataset": name, "method": "NBAUC", "runs": out}


def diag_cold_path(name: str, method: str, workdir: str) -> dict:
    """Test AUC of cold-start, tightly converged (tol=1e-6) PRSVM+ fits along the C grid."""
    from daskauc import RankSVM

    Xtr, ytr, Xte, yte, _ = load_raw(name, workdir)
    Ftr, Fte = _features(method, Xtr, ytr, Xte)
    out = []
    for C in C_GRID[::2]:
        est = RankSVM(C=C, tol=1e-6, max_iter=200)
        timed_fit(est, Ftr, ytr)
        out.append({"C": C, "n_iter": int(est.n_iter_),
                    "test_auc": auc(yte, est.decision_function(Fte))})
    return {"kind": "cold_path", "dataset": name, "method": method, "points": out}


def diag_rff(name: str, workdir: str, factors=(0.25, 0.5, 1.0, 2.0, 4.0)) -> dict:
    """RFAUC at the chosen C for gamma = factor x the default, and both maps' kernel error."""
    from daskauc import KMeansNystroem, RandomFourierFeatures, RankSVM
    from daskauc.embed.nystroem import gaussian_kernel

    row = load_row(name, "RFAUC")
    Xtr, ytr, Xte, yte, _, _ = standardized(name, workdir)
    Xtr32, Xte32 = Xtr.astype(np.float32), Xte.astype(np.float32)
    ny = KMeansNystroem(n_components=LANDMARKS, dtype="float32", random_state=SEED).fit(Xtr32)
    g0 = float(ny.gamma_)
    H = Xte[:2000]
    out = []
    for f in factors:
        rff = RandomFourierFeatures(n_components=LANDMARKS, gamma=f * g0, dtype="float32",
                                    random_state=SEED).fit(Xtr32)
        est = RankSVM(C=row["params"]["C"], tol=1e-3)
        timed_fit(est, np.asarray(rff.transform(Xtr32)), ytr)
        K = gaussian_kernel(H, H, f * g0)
        Zh = np.asarray(rff.transform(H.astype(np.float32)), dtype=np.float64)
        out.append({"gamma_factor": f, "gamma": f * g0,
                    "test_auc": auc(yte, est.decision_function(rff.transform(Xte32))),
                    "kernel_rel_error": float(np.linalg.norm(K - Zh @ Zh.T) / np.linalg.norm(K))})
    K = gaussian_kernel(H, H, g0)
    Zh = np.asarray(ny.transform(H.astype(np.float32)), dtype=np.float64)
    return {"kind": "rff", "dataset": name, "C": row["params"]["C"], "points": out,
            "nystroem_kernel_rel_error": float(np.linalg.norm(K - Zh @ Zh.T) / np.linalg.norm(K))}


def diag_noam(name: str, workdir: str, opts: dict) -> dict:
    """NOAM test AUC by update, averaging and epochs, at the CV-chosen C and at C = 1."""
    row = load_row(name, "NOAM")
    Ztr, ytr, Zte, yte, _ = load_embedding_np(name, workdir, opts)
    out = []
    for C in sorted({row["params"]["C"], 1.0}):
        for update in OAM_UPDATES:
            for average in OAM_AVERAGE:
                for epochs in (1, 3):
                    est = oam_make(C, update, average, epochs)
                    fit_s = timed_fit(est, Ztr, ytr)
                    out.append({"C": C, "update": update, "average": average,
                                "n_epochs": epochs, "fit_s": fit_s,
                                "test_auc": auc(yte, est.decision_function(Zte))})
    return {"kind": "noam", "dataset": name, "points": out}




def diag_ls_splits(name: str, method: str, n_splits: int = 20,
                   fractions=(0.25, 0.5, 1.0)) -> dict:
    """A SPAM-table row at its chosen parameters on 20 random stratified 80/20 splits (the
    papers' protocol: mean of 20 splits) and on stratified parts of the seed-0 training rows.
    """
    from sklearn.model_selection import train_test_split as sk_split
    from sklearn.preprocessing import MinMaxScaler

    row = load_row(name, method)
    key, fixed, _ = lst.GRIDS[method]
    X, y = lst.read_libsvm(lst.FILES[name])
    grid_params = {k: v for k, v in row["params"].items() if k not in fixed}

    def fit_score(Xtr, ytr, Xte, yte):
        sc = MinMaxScaler((-1, 1)).fit(Xtr)
        aucs, _ = lst.final_fits(key, fixed, grid_params, sc.transform(Xtr), ytr,
                                 sc.transform(Xte), yte, seeds=(0,))
        return aucs[0]

    splits = []
    for seed in range(n_splits):
        Xtr, Xte, ytr, yte = sk_split(X, y, test_size=0.2, stratify=y, random_state=seed)
        splits.append(fit_score(Xtr, ytr, Xte, yte))
    Xtr, Xte, ytr, yte = sk_split(X, y, test_size=0.2, stratify=y, random_state=0)
    sizes = []
    for f in fractions:
        m = subsample_mask(ytr, int(round(f * len(ytr)))) if f < 1 else np.ones(len(ytr), bool)
        sizes.append({"n_train": int(m.sum()), "test_auc": fit_score(Xtr[m], ytr[m], Xte, yte)})
    return {"kind": "ls_splits", "dataset": name, "method": method, "params": row["params"],
            "split_aucs": splits, "mean": float(np.mean(splits)), "std": float(np.std(splits)),
            "seed0": splits[0], "train_size": sizes}


def diag_usps_groupings(workdir: str) -> dict:
    """Exact linear LS optimum (LSAUC, [-1, 1] scaling) for several binary groupings of usps."""
    from sklearn.preprocessing import MinMaxScaler

    from daskauc import LSAUC

    X, lab = read_svmlight("usps/usps.t.bz2", 256)
    digit = lab.astype(int) - 1
    groups = {f"digit {d} vs rest": digit == d for d in range(10)}
    groups["digits 5-9 vs 0-4 (ours)"] = digit >= 5
    out = []
    for label, pos in groups.items():
        y = np.where(pos, 1, -1)
        Xtr, Xte, ytr, yte = split_80_20(X, y)
        sc = MinMaxScaler((-1, 1)).fit(Xtr)
        aucs = {}
        for lam in (1e-3, 1e-2, 1e-1, 1.0):
            est = LSAUC(lam=lam).fit(sc.transform(Xtr), ytr)
            aucs[lam] = auc(yte, est.decision_function(sc.transform(Xte)))
        out.append({"grouping": label, "positives": int(pos.sum()),
                    "best_test_auc": max(aucs.values()), "by_lam": aucs})
    return {"kind": "usps_groupings", "dataset": "usps", "points": out}


ORDER_EPOCHS = 5


def diag_order(workdir: str) -> dict:
    """NSAUC on ijcnn1's training rows in file order against shuffled, one map, same lambda."""
    from daskauc import KMeansNystroem, StandardScaler

    row = load_row("ijcnn1", "NSAUC")
    Xtr, ytr = read_svmlight("ijcnn1/ijcnn1.trn.bz2", 22)
    Xte, yte = read_svmlight("ijcnn1/ijcnn1.tst.bz2", 22)
    ytr, yte = np.where(ytr > 0, 1, -1), np.where(yte > 0, 1, -1)
    sc = StandardScaler().fit(Xtr)
    A = np.asarray(sc.transform(Xtr), dtype=np.float32)
    fmap = KMeansNystroem(n_components=LANDMARKS, dtype="float32", random_state=SEED).fit(A)
    Z = np.asarray(fmap.transform(A))
    Zt = np.asarray(fmap.transform(np.asarray(sc.transform(Xte), dtype=np.float32)))
    out = {}
    orders = {"file order": np.arange(len(ytr)),
              "shuffled": np.random.default_rng(SEED).permutation(len(ytr))}
    for label, perm in orders.items():
        aucs = []
        for seed in range(3):
            est = sgd_maker(True)(row["params"]["lam"], ORDER_EPOCHS)
            est.set_params(random_state=seed)
            timed_fit(est, Z[perm], ytr[perm])
            aucs.append(auc(yte, Zt @ est.coef_.astype(np.float32)))
        out[label] = aucs
    return {"kind": "order", "dataset": "ijcnn1", "method": "NSAUC",
            "lam": row["params"]["lam"], "n_epochs": ORDER_EPOCHS, "test_auc": out}


def diag_nbauc_cold(name: str, workdir: str, opts: dict,
                    Cs=(2.0**-10, 2.0**-4, 2.0**0)) -> dict:
    """NBAUC (80k subsample where larger) fitted from zero, tol=1e-6, at most 30 steps."""
    from daskauc import RankSVM

    Ztr, ytr, Zte, yte, _ = load_embedding_np(name, workdir, opts)
    m = subsample_mask(ytr)
    Ztr, ytr = Ztr[m], ytr[m]
    out = []
    for C in Cs:
        est = RankSVM(C=C, tol=1e-6, max_iter=30)
        fit_s = timed_fit(est, Ztr, ytr)
        out.append({"C": C, "n_iter": int(est.n_iter_), "converged": bool(est.converged_),
                    "fit_s": fit_s, "test_auc": auc(yte, est.decision_function(Zte))})
    return {"kind": "nbauc_cold", "dataset": name, "points": out}


#: name -> (the paper whose rows it explains, the measurement(workdir, opts))
DIAGNOSTICS = {
    "nbauc_cold-covtype": ("khalid", lambda w, o: diag_nbauc_cold("covtype", w, o)),
    "order-ijcnn1-NSAUC": ("khalid", lambda w, o: diag_order(w)),
    "usps_groupings": ("natole", lambda w, o: diag_usps_groupings(w)),
    "ls_splits-splice-LSAUC": ("natole", lambda w, o: diag_ls_splits("splice", "LSAUC")),
    "ls_splits-splice-SPAM-L2": ("natole", lambda w, o: diag_ls_splits("splice", "SPAM-L2")),
    "ls_splits-german-OPAUC": ("natole", lambda w, o: diag_ls_splits("german", "OPAUC")),
    "ls_splits-german-LSAUC": ("natole", lambda w, o: diag_ls_splits("german", "LSAUC")),
    "noam-ijcnn1": ("khalid", lambda w, o: diag_noam("ijcnn1", w, o)),
    "rff-ijcnn1": ("khalid", lambda w, o: diag_rff("ijcnn1", w)),
    "cold_path-spambase-RankSVM": ("khalid",
                                   lambda w, o: diag_cold_path("spambase", "RankSVM", w)),
    "newton_tol-spambase": ("khalid", lambda w, o: diag_newton_tol("spambase", w, o)),
    "newton_tol-usps": ("khalid", lambda w, o: diag_newton_tol("usps", w, o)),
    "split_spread-spambase-RankSVM": ("khalid",
                                      lambda w, o: diag_split_spread("spambase", "RankSVM", w)),
    "split_spread-spambase-NBAUC": ("khalid",
                                    lambda w, o: diag_split_spread("spambase", "NBAUC", w)),
    "split_spread-usps-NBAUC": ("khalid", lambda w, o: diag_split_spread("usps", "NBAUC", w)),
    "train_size-usps-NBAUC": ("khalid", lambda w, o: diag_train_size("usps", "NBAUC", w)),
    "newton_tol-ijcnn1": ("khalid", lambda w, o: diag_newton_tol("ijcnn1", w, o)),
}


#: left out of ``--diagnostics all`` (about 10 minutes of both cores); name it to run it.
SLOW_DIAGNOSTICS = ("newton_tol-ijcnn1",)

def line(d: dict) -> str:
    if d["kind"] == "split_spread":
        vals = ", ".join(f"{o['test_auc']:.4f}" for o in d["splits"])
        return (f"{d['dataset']} {d['method']} at C={d['C']:.3g} on {len(d['splits'])} other "
                f"stratified 80/20 splits (seeds 1-{len(d['splits'])}): {vals}; with seed 0 "
                f"({d['seed0']:.4f}): mean {d['mean']:.4f}, range {d['min']:.4f}-{d['max']:.4f}")
    if d["kind"] == "train_size":
        vals = ", ".join(f"{p['n_train']} rows: {p['test_auc']:.4f}" for p in d["points"])
        return (f"{d['dataset']} {d['method']} at C={d['C']:.3g} trained on stratified parts "
                f"of our training rows (same test rows): {vals}")
    if d["kind"] == "nbauc_cold":
        vals = ", ".join(f"2^{np.log2(p['C']):.0f}: {p['test_auc']:.4f} ({p['n_iter']} it"
                         f"{'' if p['converged'] else ', not converged'}, {p['fit_s']:.0f} s)"
                         for p in d["points"])
        return (f"{d['dataset']} NBAUC on the 80k training subsample, cold start, tol=1e-6, "
                f"by C: {vals}")
    if d["kind"] == "order":
        vals = "; ".join(f"{k}: " + ", ".join(f"{a:.4f}" for a in v)
                         for k, v in d["test_auc"].items())
        return (f"ijcnn1 NSAUC (lambda {d['lam']:g}, {d.get('n_epochs', 5)} epochs, seeds 0-2) "
                f"on one k-means map fitted on the file-ordered rows, training rows {vals}")
    if d["kind"] == "usps_groupings":
        vals = ", ".join(f"{p['grouping']}: {p['best_test_auc']:.4f}" for p in d["points"])
        return ("usps, exact linear LS optimum (LSAUC, best test AUC over lam in "
                f"{{1e-3, 1e-2, 1e-1, 1}}) by binary grouping: {vals}")
    if d["kind"] == "ls_splits":
        sizes = ", ".join(f"{p['n_train']} rows: {p['test_auc']:.4f}" for p in d["train_size"])
        return (f"{d['dataset']} {d['method']} at its chosen parameters on 20 random stratified "
                f"80/20 splits (seeds 0-19, one fit each): mean {d['mean']:.4f} +- "
                f"{d['std']:.4f} (range {min(d['split_aucs']):.4f}-{max(d['split_aucs']):.4f}); "
                f"trained on parts of the seed-0 training rows: {sizes}")
    if d["kind"] == "noam":
        vals = "; ".join(f"C={p['C']:.3g} {p['update']} {'avg' if p['average'] else 'last'} "
                         f"{p['n_epochs']} ep: {p['test_auc']:.4f}" for p in d["points"])
        return f"{d['dataset']} NOAM (OAM on the embedding, buffers 100 + 100), test AUC: {vals}"
    if d["kind"] == "rff":
        vals = ", ".join(f"{p['gamma_factor']:g}x: {p['test_auc']:.4f} (kernel error "
                         f"{p['kernel_rel_error']:.3f})" for p in d["points"])
        return (f"{d['dataset']} RFAUC at C={d['C']:.3g}, gamma = factor x the default rule, "
                f"test AUC and ||K - Z Z^T||_F / ||K||_F on 2,000 test rows: {vals}; the "
                f"k-means Nystroem map at the default gamma: kernel error "
                f"{d['nystroem_kernel_rel_error']:.4f}")
    if d["kind"] == "cold_path":
        aucs = [p["test_auc"] for p in d["points"]]
        return (f"{d['dataset']} {d['method']}, cold starts with tol=1e-6 at C = 2^-15, "
                f"2^-13, ..., 2^9: test AUC {min(aucs):.4f}-{max(aucs):.4f} "
                f"({', '.join(f'{a:.4f}' for a in aucs)})")
    if d["kind"] == "newton_tol":
        vals = "; ".join(f"tol={r['tol']:g}: C=2^{np.log2(r['C']):.0f}, CV AUC "
                         f"{r['cv_auc']:.4f}, test {r['test_auc']:.4f}, CV AUC at C=2^10 "
                         f"{r['cv_auc_at_largest_C']:.4f}, {r['newton_iters_total']} Newton "
                         f"iterations over the grid, {r['cv_seconds']:.0f} s"
                         for r in d["runs"])
        return f"{d['dataset']} NBAUC cv_select_C: {vals}"
    return json.dumps(d)



def run(which: str, papers, workdir: str, force: bool = False, wait_for: str | None = None):
    """Run the diagnostics ``which`` (comma-separated names, or ``all`` of the ``papers``' but
    the slow ones) not cached yet, each after the lock file ``wait_for`` is gone."""
    import dask

    names = ([n for n, (paper, _) in DIAGNOSTICS.items()
              if paper in papers and n not in SLOW_DIAGNOSTICS]
             if which == "all" else which.split(","))
    with dask.config.set(scheduler="threads"):
        for name in names:
            p = os.path.join(_shared.CACHE_DIR, f"diag__{name}.json")
            if os.path.exists(p) and not force:
                logger.info("diagnostic %s: cached", name)
                continue
            _shared._wait_for(wait_for)
            logger.info("diagnostic %s: running", name)
            tic = time.perf_counter()
            try:
                d = DIAGNOSTICS[name][1](workdir, {})
            except (TypeError, KeyError, FileNotFoundError) as exc:
                # a row it reads is not cached yet (load_row gave None), or no data
                logger.warning("diagnostic %s skipped: %r", name, exc)
                continue
            d["seconds"] = time.perf_counter() - tic
            os.makedirs(_shared.CACHE_DIR, exist_ok=True)
            with open(p, "w") as fh:
                json.dump(d, fh, indent=1, default=float)
            logger.info("%s", line(d))
