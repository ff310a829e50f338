"""Natole, Ying & Lyu's SPAM (2018) and SPDAM (2019) tables: the least-squares AUC family.

Rows (dataset, method) for LSAUC, TwoPassAUC, OPAUC, SOLAM, regSOLAM, SPAM-L2, SPAM-NET and
SPDAM on a9a, ijcnn1 (the official split, and "ijcnn1-80/20", the papers' random split of all
rows), usps, covtype, diabetes, german and splice.

    python -m benchmarks.reproduce.natole                   # every row not cached yet
    python -m benchmarks.reproduce.natole --datasets a9a --methods LSAUC,OPAUC

Protocol, grids and CV: those of ``benchmarks/least_squares_tables.py`` (imported, not
copied): features scaled to [-1, 1] on the training part, hyper-parameters by 3-fold
stratified CV on it, mean test AUC of 5 seeds for the final fit. usps and covtype, which that
table leaves out, are the harness's splits (as Khalid et al.'s rows use them), scaled the same
way. The command line is :mod:`benchmarks.reproduce._shared`'s.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from benchmarks import least_squares_tables as lst
from benchmarks.reproduce._shared import load_raw, main

# Natole et al. (thesis defence slides) figures for the two datasets that
# least_squares_tables.PAPER lacks.
LS_PAPER_EXTRA = {
    "usps": {"SPAM-L2": .9868, "SPAM-NET": .9855, "SOLAM": .9822, "OPAUC": .9620,
             "LSAUC": .9634, "SPDAM": .9854, "regSOLAM": .9848},
    "covtype": {"SPAM-L2": .9504, "SPAM-NET": .9508, "SOLAM": .9503, "OPAUC": .8244,
                "LSAUC": .8222, "SPDAM": .9409, "regSOLAM": .9332},
}
METHODS = tuple(lst.GRIDS)
ROWS = {d: list(METHODS) for d in ("ijcnn1", "ijcnn1-80/20", "usps", "covtype", "a9a",
                                   "diabetes", "german", "splice")}


def _load_minmax_extra(name: str, workdir: str):
    """usps / covtype for the least-squares rows: [-1, 1] on train, as least_squares_tables."""
    from sklearn.preprocessing import MinMaxScaler

    Xtr, ytr, Xte, yte, note = load_raw(name, workdir)
    sc = MinMaxScaler((-1, 1)).fit(Xtr)
    return (np.ascontiguousarray(sc.transform(Xtr)), ytr,
            np.ascontiguousarray(sc.transform(Xte)), yte, note)


def run(name: str, method: str, workdir: str, opts: dict | None = None) -> dict:
    """One SPAM / SPDAM table row with least_squares_tables' protocol, grid and CV."""
    if name in ("usps", "covtype"):
        Xtr, ytr, Xte, yte, note = _load_minmax_extra(name, workdir)
        paper = LS_PAPER_EXTRA[name].get(method)
    else:
        Xtr, ytr, Xte, yte = lst.load(name)
        note = {"ijcnn1": "official split", "ijcnn1-80/20": "all 141,691 rows, stratified "
                "80/20 (the papers' protocol)", "a9a": "official split"}.get(
                    name, "stratified 80/20 split, seed 0")
        paper = lst.PAPER.get(name, {}).get(method)
    spec = lst.GRIDS[method]
    tic = time.perf_counter()
    params, cv_auc = lst.cross_validate(method, Xtr, ytr, spec, lst.cv_folds(Xtr, ytr))
    cv_s = time.perf_counter() - tic
    key, fixed, _ = spec
    aucs, times = lst.final_fits(key, fixed, params, Xtr, ytr, Xte, yte)
    return {"dataset": name, "method": method, "table": "SPAM/SPDAM", "protocol": "natole",
            "paper": paper, "paper_seconds": None, "data_note": note + "; [-1, 1] scaling",
            "n_train": int(len(ytr)), "test_auc": float(np.mean(aucs)),
            "test_auc_seeds": aucs, "fit_seconds": float(np.median(times)),
            "cv_seconds": cv_s, "cv_auc": cv_auc,
            "params": {**{k: v for k, v in fixed.items()}, **params}}


if __name__ == "__main__":
    sys.exit(main(("natole",), doc=__doc__, quick={"datasets": "diabetes", "methods": "LSAUC"}))
