"""predict and predict_proba of daskauc's models against scikit-learn's LogisticRegression.

daskauc's models maximize AUC, a ranking; their ``predict`` and ``predict_proba`` come from a
calibration fitted at the end of ``fit`` (Platt scaling of the training scores: see
docs/user_guide.md). This script measures what that gives where a user would otherwise fit a
logistic regression: on ijcnn1 (official split), spambase and covtype (stratified 80/20
splits), NSAUC with its default arguments, and scikit-learn's ``LogisticRegression``
(defaults, ``max_iter=1000``) on the *same* embedding (the NSAUC model's standardized
1,600-landmark k-means Nystroem map). For each: test accuracy, balanced accuracy, log loss,
Brier score and AUC, and fit time; and both again with ``class_weight="balanced"`` (it
moves the threshold and the probabilities, not NSAUC's ranking).

``python -m benchmarks.predict_proba [--only ijcnn1,spambase]`` writes
docs/benchmarks/predict_proba.{json,md}. Run it alone on the machine: it reports fit times.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from benchmarks._harness import Parser, load_dataset, md_table, write_results

DATASETS = ("ijcnn1", "spambase", "covtype")


def _metrics(y01, proba, pred) -> dict:
    from sklearn.metrics import (
        accuracy_score,
        balanced_accuracy_score,
        brier_score_loss,
        log_loss,
        roc_auc_score,
    )

    return {"accuracy": accuracy_score(y01, pred),
            "balanced accuracy": balanced_accuracy_score(y01, pred),
            "log loss": log_loss(y01, np.clip(proba, 1e-15, 1 - 1e-15)),
            "Brier": brier_score_loss(y01, proba), "AUC": roc_auc_score(y01, proba)}


def run(name: str, seed: int = 0) -> list[dict]:
    from sklearn.linear_model import LogisticRegression

    from daskauc import NSAUC

    Xtr, ytr, Xte, yte, note = load_dataset(name)
    y01_tr, y01_te = (ytr > 0).astype(int), (yte > 0).astype(int)
    rows = []
    t = time.perf_counter()
    model = NSAUC(random_state=seed).fit(Xtr, y01_tr)
    fit_s = time.perf_counter() - t
    proba = model.predict_proba(Xte)[:, 1]
    rows.append({"dataset": name, "model": "daskauc NSAUC (defaults)", "fit s": fit_s,
                 **_metrics(y01_te, proba, model.predict(Xte))})
    Ztr = np.asarray(model.transform(Xtr))
    Zte = np.asarray(model.transform(Xte))
    t = time.perf_counter()
    lr = LogisticRegression(max_iter=1000).fit(Ztr, y01_tr)
    lr_s = time.perf_counter() - t
    rows.append({"dataset": name, "model": "scikit-learn LogisticRegression, same embedding",
                 "fit s": lr_s + model.timings_.get("scale", 0) + model.timings_.get(
                     "landmarks", 0) + model.timings_.get("embed", 0),
                 **_metrics(y01_te, lr.predict_proba(Zte)[:, 1], lr.predict(Zte))})
    # class_weight="balanced" for both: the threshold moves to the balanced operating point
    t = time.perf_counter()
    balanced = NSAUC(random_state=seed, class_weight="balanced").fit(Xtr, y01_tr)
    rows.append({"dataset": name, "model": 'daskauc NSAUC, class_weight="balanced"',
                 "fit s": time.perf_counter() - t,
                 **_metrics(y01_te, balanced.predict_proba(Xte)[:, 1], balanced.predict(Xte))})
    t = time.perf_counter()
    lr = LogisticRegression(max_iter=1000, class_weight="balanced").fit(Ztr, y01_tr)
    rows.append({"dataset": name, "model": 'LogisticRegression, class_weight="balanced", '
                 "same embedding", "fit s": time.perf_counter() - t
                 + model.timings_.get("scale", 0) + model.timings_.get("landmarks", 0)
                 + model.timings_.get("embed", 0),
                 **_metrics(y01_te, lr.predict_proba(Zte)[:, 1], lr.predict(Zte))})
    for r in rows:
        r["data"] = note
        r["positives (test)"] = float(y01_te.mean())
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()},
              flush=True)
    return rows


def main(argv=None) -> int:
    ap = Parser(__doc__, quick={"only": "spambase"})
    ap.add_argument("--only", default=",".join(DATASETS), help="comma-separated datasets")
    args = ap.parse_args(argv)
    rows = [r for name in args.only.split(",") for r in run(name, args.seed)]
    cols = ["dataset", "model", "accuracy", "balanced accuracy", "log loss", "Brier", "AUC",
            "fit s"]
    md = ["# predict and predict_proba against LogisticRegression", "",
          "`python -m benchmarks.predict_proba`: NSAUC with its default arguments (its "
          "`predict_proba` a Platt calibration of its training scores, its `predict` the "
          "more probable class under it) and scikit-learn's `LogisticRegression` "
          "(`max_iter=1000`) fitted on the same standardized 1,600-landmark embedding, each "
          'also with `class_weight="balanced"` (NSAUC: in its calibration only, so the same '
          "AUC). "
          "Test sets: ijcnn1's official one, 20% stratified splits of spambase and covtype. "
          "The logistic regression's time includes the embedding (scaler, landmarks, map), "
          f"as NSAUC's does. Load average at the end: {os.getloadavg()[0]:.2f}.", "",
          md_table([{c: (round(r[c], 4) if isinstance(r[c], float) else r[c]) for c in cols}
                    for r in rows], cols), ""]
    write_results("predict_proba", rows, "\n".join(md), out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
