"""20 Newsgroups (TF-IDF, 130,107 sparse features): every daskauc estimator that reads sparse
rows beside scikit-learn's LogisticRegression, LinearSVC, SGDClassifier and LightGBM, on the
same CSR matrix in the same run.

Tasks (``benchmarks._harness.NEWS20_TASKS``): comp.* against the rest (about 26 % positive)
and sci.space against the rest (about 5 %). The vectorization is scikit-learn's
``TfidfVectorizer`` with its defaults fitted on the by-date training posts
(``benchmarks._harness.load_news20``). Every model with its default parameters (daskauc's
sparse estimators: ``_sparse_rows``; LogisticRegression with ``max_iter=1000``), fitted on
the in-memory CSR matrix with dask's threaded scheduler; test AUC from the decision function,
fit seconds (after an unmeasured fit on the first 2,000 rows: modules imported, numba's
kernels compiled or loaded, for every model alike), and the peak resident memory of the
process during the fit above what it held before. LightGBM is skipped (and said) when it is
not installed (``pip install lightgbm``).

    python -m benchmarks.news20            # every task, every model
    python -m benchmarks.news20 --tasks comp,sci.space
    python -m benchmarks.news20 --quick    # comp.* only, daskauc and LogisticRegression
"""

from __future__ import annotations

import gc
import time

import numpy as np

from benchmarks._harness import (
    NEWS20_TASKS,
    MemorySampler,
    Parser,
    command,
    load_news20,
    md_table,
    rounded,
    write_results,
)


def daskauc_models() -> dict:
    """Every registered daskauc estimator that reads sparse rows, with its defaults."""
    from daskauc._registry import MODEL_CLASSES

    return {name: cls for name, cls in sorted(MODEL_CLASSES.items())
            if getattr(cls, "_sparse_rows", False) and hasattr(cls, "decision_function")}


def anchors(quick: bool) -> dict:
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.svm import LinearSVC

    out = {"sklearn LogisticRegression": lambda: LogisticRegression(max_iter=1000)}
    if quick:
        return out
    out["sklearn LinearSVC"] = LinearSVC
    out["sklearn SGDClassifier"] = lambda: SGDClassifier(random_state=0)
    try:
        import lightgbm
    except ImportError:
        print("lightgbm is not installed: its rows are left out (pip install lightgbm)")
    else:
        out["LightGBM"] = lambda: lightgbm.LGBMClassifier(verbose=-1, random_state=0)
    return out


#: rows of the unmeasured fit before each measured one
WARM_UP_ROWS = 2_000


def run_one(name: str, make, Xtr, ytr, Xte, yte) -> dict:
    import psutil
    from sklearn.metrics import roc_auc_score

    try:  # modules imported, numba's kernels compiled or loaded: not in the measured fit
        make().fit(Xtr[:WARM_UP_ROWS], ytr[:WARM_UP_ROWS])
    except Exception:  # noqa: BLE001 - the measured fit says what fails
        pass
    gc.collect()
    before = psutil.Process().memory_info().rss
    model = make()
    with MemorySampler(interval=0.05) as mem:
        t = time.perf_counter()
        try:
            model.fit(Xtr, ytr)
        except Exception as exc:  # noqa: BLE001 - a row that says why, the run goes on
            return {"model": name, "test_auc": None, "fit_s": None, "peak_mib": None,
                    "note": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
        seconds = time.perf_counter() - t
    scores = (model.decision_function(Xte) if hasattr(model, "decision_function")
              else model.predict_proba(Xte)[:, 1])
    return {"model": name, "test_auc": float(roc_auc_score(yte, np.asarray(scores))),
            "fit_s": seconds, "peak_mib": max(0, mem.peak_client - before) / 2**20,
            "note": ""}


def main(argv=None) -> None:
    parser = Parser(__doc__, quick="comp.* only; daskauc and LogisticRegression", seed=None)
    parser.add_argument("--tasks", default=",".join(NEWS20_TASKS),
                        help=f"comma-separated tasks of {', '.join(NEWS20_TASKS)}")
    args = parser.parse_args(argv)
    import dask

    dask.config.set(scheduler="threads")
    tasks = ["comp"] if args.quick else args.tasks.split(",")
    models = {**daskauc_models(), **anchors(args.quick)}
    rows, notes = [], {}
    for task in tasks:
        Xtr, ytr, Xte, yte, note = load_news20(task)
        notes[task] = note
        for name, make in models.items():
            row = {"task": task, **run_one(name, make, Xtr, ytr, Xte, yte)}
            print(row, flush=True)
            rows.append(row)
    md = ["# 20 Newsgroups: sparse AUC solvers beside scikit-learn and LightGBM", "",
          f"`{command('benchmarks.news20', argv)}`", ""]
    for task in tasks:
        md += [f"## {task}", "", notes[task], "",
               md_table(rounded([r for r in rows if r["task"] == task], 4, drop=("task",))),
               ""]
    write_results("news20", rows, "\n".join(md), out=args.out)


if __name__ == "__main__":
    main()
