"""NSAUC on ijcnn1 (official split, standardized, 1600 k-means landmarks): test AUC and times.

Also measures how pair sampling inside chunks compares with exact global sampling (the
whole embedding as one chunk) on the same embedding and seeds.

    python -m benchmarks.ijcnn1_nsauc [--landmarks 1600] [--epochs 5] [--workdir DIR]

Writes docs/benchmarks/ijcnn1_nsauc.{json,md}. The paper (Khalid et al. Table 4) reports
NSAUC 0.9969 with lambda chosen by 3-fold CV from {1e-10, ..., 1e-7}.
"""

from __future__ import annotations

import os
import tempfile
import time

import dask
import dask.array as da
import numpy as np

from benchmarks._harness import (
    SHARED_DATA,
    Parser,
    embed_stores,
    machine_info,
    md_table,
    stratified_folds,
    write_results,
)

LAMBDAS = (1e-10, 1e-9, 1e-8, 1e-7)


def main(argv=None) -> None:
    ap = Parser(__doc__, quick={"landmarks": 200, "epochs": 1})
    ap.add_argument("--landmarks", type=int, default=1600)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)

    from daskauc.data import ingest, open_dataset
    from daskauc.estimators.pairwise_sgd import PairwiseHingeSGD
    from daskauc.metrics import roc_auc

    work = args.workdir or tempfile.mkdtemp(prefix="daskauc-ijcnn1-")
    p = lambda name: os.path.join(work, name)  # noqa: E731
    t = {}
    tic = time.perf_counter()
    ingest(os.path.join(SHARED_DATA, "ijcnn1", "ijcnn1.trn.bz2"), p("train.zarr"),
           n_features=22, shuffle=True, random_state=args.seed, overwrite=True)
    ingest(os.path.join(SHARED_DATA, "ijcnn1", "ijcnn1.tst.bz2"), p("test.zarr"),
           n_features=22, overwrite=True)
    t["ingest"] = time.perf_counter() - tic
    train = open_dataset(p("train.zarr"))

    emb_tr, emb_te, fmap, secs = embed_stores(p("train.zarr"), p("test.zarr"),
                                              p("train-emb.zarr"), p("test-emb.zarr"),
                                              args.landmarks, random_state=args.seed)
    t["kmeans"], t["embed+write"] = secs["map"], secs["train"] + secs["test"]
    Z, y = dask.persist(emb_tr.X, emb_tr.y)
    Zt, yt = dask.persist(emb_te.X, emb_te.y)
    y_np = y.compute()

    # 3-fold CV over the paper's lambda grid on the training embedding (stratified folds)
    fold = stratified_folds(y_np, args.folds, args.seed)
    Z_np = Z.compute()
    cv_rows = []
    tic = time.perf_counter()
    for lam in LAMBDAS:
        aucs = []
        for k in range(args.folds):
            tr, va = fold != k, fold == k
            m = PairwiseHingeSGD(lam=lam, n_epochs=args.epochs, random_state=args.seed)
            m.fit(da.from_array(Z_np[tr], chunks=(10_000, -1)),
                  da.from_array(y_np[tr], chunks=10_000))
            aucs.append(roc_auc(y_np[va], Z_np[va] @ m.coef_))
        cv_rows.append({"lambda": lam, "cv_auc": float(np.mean(aucs))})
    t["cv"] = time.perf_counter() - tic
    best = max(cv_rows, key=lambda r: r["cv_auc"])["lambda"]

    results = []
    for lam in LAMBDAS:
        tic = time.perf_counter()
        m = PairwiseHingeSGD(lam=lam, n_epochs=args.epochs, random_state=args.seed).fit(Z, y)
        fit_s = time.perf_counter() - tic
        auc = float(roc_auc(yt, m.decision_function(Zt)))
        cv = next(r["cv_auc"] for r in cv_rows if r["lambda"] == lam)
        results.append({"lambda": lam, "cv_auc": cv, "test_auc": auc, "fit_s": fit_s,
                        "epoch_s": float(np.median([h["seconds"] for h in m.history_])),
                        "chosen": "yes" if lam == best else ""})

    # pair sampling: inside chunks (the stored chunking) vs global (one chunk), same seeds
    sampling = []
    one = da.from_array(Z_np, chunks=Z_np.shape)
    one_y = da.from_array(y_np, chunks=y_np.shape)
    for epochs in (1, 2, 5):
        for label, (Xs, ys) in ((f"chunks ({Z.numblocks[0]})", (Z, y)),
                                ("global (1 chunk)", (one, one_y))):
            aucs = []
            for seed in range(3):
                m = PairwiseHingeSGD(lam=best, n_epochs=epochs, random_state=seed).fit(Xs, ys)
                aucs.append(float(roc_auc(yt, m.decision_function(Zt))))
            sampling.append({"epochs": epochs, "sampling": label,
                             "test_auc_mean": float(np.mean(aucs)),
                             "test_auc_min": float(np.min(aucs))})

    md = ["# NSAUC on ijcnn1", "",
          f"Official split ({train.n_samples} train / {emb_te.n_samples} test rows), "
          f"standardized, {args.landmarks} k-means landmarks (r = {fmap.n_components_}), "
          f"float32 embedding, {args.epochs} epochs. lambda by {args.folds}-fold CV on the "
          "paper's grid. Paper (Khalid et al. Table 4): NSAUC 0.9969.", "",
          "Command: `python -m benchmarks.ijcnn1_nsauc`", "",
          md_table(results), "",
          "## Pair sampling inside chunks vs global sampling (lambda chosen above, 3 seeds)", "",
          md_table(sampling), "",
          "## Times (s)", "", md_table([{k: round(v, 2) for k, v in t.items()}])]
    write_results("ijcnn1_nsauc", {"results": results, "sampling": sampling, "times": t,
                                   "machine": machine_info()}, "\n".join(md), out=args.out)


if __name__ == "__main__":
    main()
