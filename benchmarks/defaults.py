"""Every method with its default arguments, on the papers' protocols, against the papers.

Issue 15 holds daskauc's defaults to the papers' figures, which the papers reached with tuned
parameters: a user who does not tune should not lose what the paper shows. Each row is one
estimator constructed with its defaults (only ``random_state`` set, over ``--seeds``), fitted
on the training rows **in the file's order** (ijcnn1 is ordered in time, spambase by class;
a9a's order is the file's as well), scored by the exact test AUC:

* ijcnn1, Khalid et al. Table 4 (official split, raw features; the presets standardize):
  NSAUC 0.9969, NSOLAM 0.9886, NOAM 0.9816, NBAUC 0.9957;
* a9a, Natole et al. (official split, features scaled to [-1, 1] on the training rows):
  SPAM-L2 0.8998, OPAUC 0.9002;
* spambase, Khalid et al. Table 2 (stratified 80 / 20 split, standardized features):
  linear RankSVM 0.9747.

``python -m benchmarks.defaults [--only NSAUC,...] [--seeds 3]`` writes docs/benchmarks/
defaults.{json,md}. Run it alone on the machine: it reports fit times.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from benchmarks._harness import Parser, load_dataset, md_table, write_results


def _estimator(method: str, seed: int):
    import daskauc as dk

    return {"NSAUC": lambda: dk.NSAUC(random_state=seed),
            "NSOLAM": lambda: dk.NSOLAM(random_state=seed),
            "NOAM": lambda: dk.NOAM(random_state=seed),
            "NBAUC": lambda: dk.NBAUC(random_state=seed),
            "SPAM-L2": lambda: dk.SPAM(random_state=seed),
            "OPAUC": lambda: dk.OPAUC(random_state=seed),
            "RankSVM": lambda: dk.RankSVM()}[method]()


#: method -> (dataset, features given to the estimator, the paper's test AUC, its source)
CASES = {
    "NSAUC": ("ijcnn1", "raw", 0.9969, "Khalid et al. Table 4"),
    "NSOLAM": ("ijcnn1", "raw", 0.9886, "Khalid et al. Table 4"),
    "NOAM": ("ijcnn1", "raw", 0.9816, "Khalid et al. Table 4"),
    "NBAUC": ("ijcnn1", "raw", 0.9957, "Khalid et al. Table 4"),
    "SPAM-L2": ("a9a", "minmax", 0.8998, "Natole et al. 2018, Table 2"),
    "OPAUC": ("a9a", "minmax", 0.9002, "Natole et al. 2018, Table 2"),
    "RankSVM": ("spambase", "standard", 0.9747, "Khalid et al. Table 2"),
}


def _features(kind: str, Xtr, Xte):
    from daskauc import MinMaxScaler, StandardScaler

    if kind == "raw":
        return Xtr, Xte
    scaler = (MinMaxScaler() if kind == "minmax" else StandardScaler()).fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte)


def run(method: str, seeds: int, first: int = 0) -> dict:
    from daskauc import roc_auc

    dataset, kind, paper, source = CASES[method]
    Xtr, ytr, Xte, yte, note = load_dataset(dataset, shuffle=False)
    Xtr, Xte = _features(kind, Xtr, Xte)
    aucs, times, params = [], [], None
    stochastic = method != "RankSVM"
    for seed in range(first, first + (seeds if stochastic else 1)):
        est = _estimator(method, seed)
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        times.append(time.perf_counter() - t)
        aucs.append(float(roc_auc(yte, est.decision_function(Xte))))
        params = {k: v for k, v in est.get_params(deep=False).items()
                  if not isinstance(v, (np.ndarray,)) and k != "random_state"}
        print(f"{method} seed {seed}: AUC {aucs[-1]:.4f} in {times[-1]:.1f} s", flush=True)
    return {"method": method, "dataset": dataset, "features": kind, "data": note,
            "paper": paper, "source": source, "auc_mean": float(np.mean(aucs)),
            "auc_min": float(np.min(aucs)), "auc_seeds": aucs,
            "reaches_paper": bool(np.mean(aucs) >= paper), "fit_s_median": float(
                np.median(times)), "defaults": params, "load_average": os.getloadavg()}


def reasons() -> list[str]:
    """Measured context for the rows short of the paper: the least-squares ceiling on a9a
    (OPAUC and SPAM minimize LS: the exact LS model, best over a lam grid, against the test
    set), and linear RankSVM over other random 80/20 splits of spambase."""
    from daskauc import LSAUC, MinMaxScaler, RankSVM, StandardScaler, roc_auc
    from daskauc.data import train_test_split

    lines = []
    Xtr, ytr, Xte, yte, _ = load_dataset("a9a", shuffle=False)
    sc = MinMaxScaler().fit(Xtr)
    ls = {lam: float(roc_auc(yte, LSAUC(lam=lam).fit(sc.transform(Xtr), ytr)
                             .decision_function(sc.transform(Xte))))
          for lam in (1e-4, 1e-3, 1e-2, 1e-1, 1.0)}
    best = max(ls, key=ls.get)
    lines.append(f"- a9a, the least-squares ceiling: the exact LS minimizer (LSAUC) reaches "
                 f"{ls[best]:.4f} test AUC at its best lam ({best:g}; "
                 + ", ".join(f"{k:g}: {v:.4f}" for k, v in ls.items())
                 + "), lam chosen against the test set. OPAUC and SPAM are stochastic methods "
                 f"for that objective; at their default lam (1e-3) its exact minimizer gives "
                 f"{ls[1e-3]:.4f}, where their rows above land. The paper's 0.9002 for OPAUC "
                 "is this ceiling at the best lam, 0.0002 above the defaults' (the seeds "
                 "spread 0.0003).")
    Xs, ys, Xs_te, ys_te, _ = load_dataset("spambase", shuffle=False)
    X = np.concatenate([Xs, Xs_te])
    y = np.concatenate([ys, ys_te])
    aucs = []
    for seed in range(20):
        Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.2, stratify=True, random_state=seed)
        st = StandardScaler().fit(Xa)
        m = RankSVM(random_state=0).fit(st.transform(Xa), ya)
        aucs.append(float(roc_auc(yb, m.decision_function(st.transform(Xb)))))
    aucs = np.array(aucs)
    lines.append(f"- spambase, linear RankSVM with defaults over 20 random stratified 80/20 "
                 f"splits (seeds 0-19): test AUC {aucs.min():.4f}-{aucs.max():.4f}, mean "
                 f"{aucs.mean():.4f}, {int(np.sum(aucs >= 0.9747))} of 20 at or above the "
                 "paper's 0.9747. The split moves the test AUC by 0.015, C by less than 0.004 "
                 "(docs/benchmarks/reproduce: every C of 2^-15 ... 2^9 gives 0.9647-0.9683 on "
                 "split 0): the paper's figure is one split's, and the protocol does not say "
                 "which.")
    return lines


def main(argv=None) -> int:
    ap = Parser(__doc__, quick={"only": "RankSVM", "seeds": 1, "no_reasons": True})
    ap.add_argument("--only", default=",".join(CASES),
                    help="comma-separated methods (default: all)")
    ap.add_argument("--seeds", type=int, default=3,
                    help="random_state seed..seed+seeds-1 for the stochastic methods")
    ap.add_argument("--no-reasons", action="store_true",
                    help="skip the measurements behind the rows short of the paper")
    args = ap.parse_args(argv)
    rows = [run(m, args.seeds, args.seed) for m in args.only.split(",")]
    table = [{"dataset": r["dataset"], "method": r["method"],
              "our AUC (mean of seeds)": round(r["auc_mean"], 4),
              "min": round(r["auc_min"], 4), "paper": r["paper"],
              "reached": "yes" if r["reaches_paper"] else "no",
              "fit s (median)": round(r["fit_s_median"], 2)} for r in rows]
    md = ["# Default arguments against the papers", "",
          "`python -m benchmarks.defaults`: each estimator with its default arguments (only "
          f"`random_state` set, {args.seeds} seeds for the stochastic ones), fitted on the "
          "training rows in the file's order (ijcnn1 is ordered in time, spambase by class), "
          "exact test AUC. Protocols: ijcnn1 official split, raw features (the presets "
          "standardize, 1,600 k-means landmarks); a9a official split, features scaled to "
          "[-1, 1]; spambase stratified 80/20 split (seed 0), standardized features. "
          f"Load average at the end: {os.getloadavg()[0]:.2f}.", "", md_table(table), ""]
    for r in rows:
        md.append(f"- {r['method']}: {r['data']}; defaults {r['defaults']}")
    if not args.no_reasons:
        md += ["", "## Where the paper's figure is not reached", "", *reasons()]
    write_results("defaults", rows, "\n".join(md), out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
