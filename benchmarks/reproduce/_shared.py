"""What the reproductions of the papers share: the protocols' seed, folds and sizes, the data
(raw splits, standardized rows, the 1,600-landmark embedding stores), the row cache, the
tables and the command line.

A row is one (dataset, method) of a paper's table, computed once and cached as one JSON file
(with its full CV table) in ``<--out>/reproduce/``, docs/benchmarks/reproduce/ by default; a
rerun skips the cached rows (``--force`` recomputes them). After every run the tables are
rebuilt there from every cached row, of every paper: ``results.md``, ``targets.md``,
``data.md``, ``diagnostics.md`` and each paper's own (``khalid_prsvm_cv.md`` ...). They
hold tables only: the text around them is docs/reproduction.md, which includes them.

A paper is a module of this package with ``ROWS`` (dataset -> methods), ``run(dataset,
method, workdir, opts) -> row``, and optionally ``TARGETS`` and ``tables(rows)``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import tempfile
import time
import warnings

import numpy as np

from benchmarks._harness import BENCH_DIR, Parser, load_dataset, machine_info

#: the papers, in the order of their rows within a dataset
PAPERS = ("khalid", "natole")
#: the datasets, in the order of the tables
DATASETS = ("ijcnn1", "ijcnn1-80/20", "spambase", "usps", "covtype", "a9a", "diabetes",
            "german", "splice")
#: where the rows are cached and the tables written (``--out``/reproduce)
CACHE_DIR = os.path.join(BENCH_DIR, "reproduce")
DEFAULT_WORKDIR = os.path.join(tempfile.gettempdir(), "daskauc-reproduce")
SEED = 0
FOLDS = 3
LANDMARKS = 1600
BATCH_ROWS = 80_000  # Khalid et al. Table 2: at most 80k training rows

logger = logging.getLogger("reproduce")


# ============================================================================ data
def load_raw(name: str, workdir: str):
    """(X_train, y_train, X_test, y_test, note): raw features, labels in {-1, +1} (int8).

    The harness's :func:`load_dataset` (stratified 80/20 split with seed 0 where the data
    has no split, training rows shuffled once), cached in ``workdir``.
    """
    return load_dataset(name, cache_dir=workdir)


def standardized(name: str, workdir: str):
    """Standardized raw features (scaler fitted on train) and the scaler."""
    from daskauc.data import StandardScaler

    Xtr, ytr, Xte, yte, note = load_raw(name, workdir)
    sc = StandardScaler().fit(Xtr)
    return (np.asarray(sc.transform(Xtr)), ytr, np.asarray(sc.transform(Xte)), yte, note, sc)


def embedding(name: str, workdir: str, *, train_store: str | None = None,
              test_store: str | None = None):
    """Open (building them once) the float32 1600-landmark train and test embedding stores.

    Returns ``(train Dataset, test Dataset, info)``; ``info`` has the build times, gamma and r.
    """
    from daskauc import KMeansNystroem, open_dataset

    tr_path = train_store or os.path.join(workdir, f"{name}-train-emb.zarr")
    te_path = test_store or os.path.join(workdir, f"{name}-test-emb.zarr")
    info_path = os.path.join(workdir, f"{name}-embedding.json")
    try:
        tr, te = open_dataset(tr_path), open_dataset(te_path)
        info = {}
        if os.path.exists(info_path):
            with open(info_path) as fh:
                info = json.load(fh)
        info.setdefault("r", int(tr.X.shape[1]))
        return tr, te, info
    except (FileNotFoundError, ValueError, KeyError):
        pass
    Xtr, ytr, Xte, yte, note, sc = standardized(name, workdir)
    Xtr_raw, _, Xte_raw, _, _ = load_raw(name, workdir)
    tic = time.perf_counter()
    fmap = KMeansNystroem(n_components=min(LANDMARKS, Xtr.shape[0]), dtype="float32",
                          random_state=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # n_components capped at n (usps)
        fmap.fit(Xtr.astype(np.float32))
    t_fit = time.perf_counter() - tic
    tic = time.perf_counter()
    tr = fmap.write_embedding(Xtr_raw.astype(np.float32), tr_path, y=ytr, scaler=sc,
                              overwrite=True)
    te = fmap.write_embedding(Xte_raw.astype(np.float32), te_path, y=yte, scaler=sc,
                              overwrite=True)
    info = {"landmarks_s": t_fit, "write_s": time.perf_counter() - tic,
            "gamma": float(fmap.gamma_), "r": int(fmap.n_components_),
            "landmarks": int(fmap.landmarks_.shape[0]), "note": note}
    with open(info_path, "w") as fh:
        json.dump(info, fh, indent=1)
    return tr, te, info


def subsample_mask(y: np.ndarray, rows: int = BATCH_ROWS) -> np.ndarray:
    """Stratified choice of ``rows`` training rows (seed 0); all rows when there are fewer."""
    from daskauc.data.split import split_mask

    if len(y) <= rows:
        return np.ones(len(y), dtype=bool)
    return split_mask(y, test_size=rows / len(y), stratify=True, random_state=SEED)


def auc(y, s) -> float:
    """The exact AUC of the scores ``s``; NaN where a diverged fit left them not finite."""
    from daskauc import roc_auc

    s = np.asarray(s)
    return float(roc_auc(y, s)) if np.all(np.isfinite(s)) else float("nan")


def timed_fit(est, X, y) -> float:
    """Seconds of ``est.fit(X, y)`` (its warnings silenced)."""
    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return time.perf_counter() - tic


# ============================================================================ row cache
def cache_path(dataset: str, method: str) -> str:
    safe = f"{dataset}__{method}".replace("/", "_")
    return os.path.join(CACHE_DIR, f"{safe}.json")


def load_row(dataset: str, method: str) -> dict | None:
    p = cache_path(dataset, method)
    if not os.path.exists(p):
        return None
    with open(p) as fh:
        return json.load(fh)


def save_row(row: dict) -> None:
    os.makedirs(CACHE_DIR, exist_ok=True)
    p = cache_path(row["dataset"], row["method"])
    with open(p + ".tmp", "w") as fh:
        json.dump(row, fh, indent=1, default=float)
    os.replace(p + ".tmp", p)


def papers(names=PAPERS) -> list:
    """The paper modules of ``names`` (imported here, as they import this module)."""
    return [importlib.import_module(f"{__package__}.{n}") for n in names]


def known_rows(mods) -> dict[str, list[str]]:
    """dataset -> methods of the papers ``mods``, in the tables' order."""
    out = {}
    for d in DATASETS:
        methods = [m for p in mods for m in p.ROWS.get(d, ())]
        if methods:
            out[d] = methods
    return out


def all_rows() -> list[dict]:
    if not os.path.isdir(CACHE_DIR):
        return []
    rows = []
    for f in sorted(os.listdir(CACHE_DIR)):
        if f.endswith(".json") and "__" in f and not f.startswith("diag__"):
            with open(os.path.join(CACHE_DIR, f)) as fh:
                rows.append(json.load(fh))
    known = known_rows(papers())
    order = {d: i for i, d in enumerate(known)}

    def rank(r):
        ms = known.get(r["dataset"], [])
        return (order.get(r["dataset"], 99), ms.index(r["method"]) if r["method"] in ms else 99)

    rows.sort(key=rank)
    return rows


def all_diagnostics() -> dict:
    out = {}
    if os.path.isdir(CACHE_DIR):
        for f in sorted(os.listdir(CACHE_DIR)):
            if f.startswith("diag__") and f.endswith(".json"):
                with open(os.path.join(CACHE_DIR, f)) as fh:
                    out[f[len("diag__"):-len(".json")]] = json.load(fh)
    return out


# ============================================================================ tables
def fmt(v) -> str:
    if isinstance(v, bool) or isinstance(v, str):
        return str(v)
    if isinstance(v, (int, float)):
        return f"{v:.3g}"
    return str(v)


def fmt_params(p: dict) -> str:
    return ", ".join(f"{k}={fmt(v)}" for k, v in p.items())


def diff_points(r) -> float | None:
    if r.get("paper") is None or r.get("test_auc") is None:
        return None
    return 100.0 * (r["test_auc"] - r["paper"])


def results_table(rows: list[dict]) -> str:
    lines = [
        "| dataset | method | table | ours test AUC | paper | diff (points) | fit s | paper s "
        "| chosen hyper-parameters | CV s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = diff_points(r)
        lines.append(
            f"| {r['dataset']} | {r['method']} | {r['table']} | {r['test_auc']:.4f} | "
            + (f"{r['paper']:.4f}" if r.get("paper") is not None else "—") + " | "
            + (f"{d:+.2f}" if d is not None else "—") + " | "
            + f"{r['fit_seconds']:.2f} | "
            + (f"{r['paper_seconds']:g}" if r.get("paper_seconds") else "—") + " | "
            + f"{fmt_params(r['params'])} | {r['cv_seconds']:.1f} |")
    return "\n".join(lines)


def targets_table(rows: list[dict], targets: dict) -> str:
    by = {(r["dataset"], r["method"]): r["test_auc"] for r in rows}
    lines = ["| dataset | method | target | ours | met |", "|---|---|---|---|---|"]
    for (d, m), t in targets.items():
        if (d, m) in by:
            a = by[(d, m)]
            lines.append(f"| {d} | {m} | {t:.4f} | {a:.4f} | {'yes' if a >= t else 'no'} |")
    return "\n".join(lines)


def data_notes(rows: list[dict]) -> str:
    protocols = {"khalid": "Khalid rows", "natole": "SPAM/SPDAM rows"}
    notes = sorted({(r["dataset"], protocols.get(r["protocol"], r["protocol"]), r["data_note"])
                    for r in rows})
    return "\n".join(f"- {d} ({p}): {n}" for d, p, n in notes)


def write_tables() -> str:
    """Rebuild every table in CACHE_DIR from the cached rows and diagnostics; returns the
    results table."""
    from benchmarks.reproduce import diagnostics

    rows, mods = all_rows(), papers()
    targets = {k: v for p in mods for k, v in getattr(p, "TARGETS", {}).items()}
    tables = {"results": results_table(rows), "targets": targets_table(rows, targets),
              "data": data_notes(rows),
              "diagnostics": "\n".join(f"- `{k}`: {diagnostics.line(d)}"
                                       for k, d in all_diagnostics().items())}
    for p in mods:
        if hasattr(p, "tables"):
            tables.update(p.tables(rows))
    os.makedirs(CACHE_DIR, exist_ok=True)
    for name, text in tables.items():
        with open(os.path.join(CACHE_DIR, f"{name}.md"), "w") as fh:
            fh.write(text.rstrip() + "\n")
    return tables["results"]


# ============================================================================ command line
def _wait_for(lock: str | None) -> None:
    if not lock:
        return
    waited = False
    while os.path.exists(lock):
        if not waited:
            logger.info("waiting while %s exists", lock)
            waited = True
        time.sleep(2)


def main(names=PAPERS, argv=None, doc: str = __doc__, quick: dict | None = None) -> None:
    """Compute the rows (or ``--diagnostics``) of the papers ``names`` not cached yet, then
    rebuild every table."""
    global CACHE_DIR
    # no --seed: every row is cached with the protocols' seed 0
    ap = Parser(doc, quick=quick, seed=None)
    ap.add_argument("--datasets", default=None, help="comma-separated subset of the datasets")
    ap.add_argument("--methods", default=None, help="comma-separated subset of the methods")
    ap.add_argument("--force", action="store_true", help="recompute cached rows")
    ap.add_argument("--workdir", default=DEFAULT_WORKDIR,
                    help="where raw splits and embedding stores are cached and reused")
    ap.add_argument("--report", action="store_true", help="only rebuild the tables")
    ap.add_argument("--list", action="store_true", help="print the known rows and exit")
    ap.add_argument("--wait-for", default=None,
                    help="before each row, wait while this file exists (a benchmark lock)")
    ap.add_argument("--diagnostics", nargs="?", const="all", default=None,
                    help="run the measurements behind the explanations (comma-separated "
                         "names, or all) instead of rows")
    ap.add_argument("--cv-rows", type=int, default=30_000,
                    help="NSOLAM and NOAM: CV on a stratified subsample of this many rows when "
                         "the training part has more than 80,000 (covtype)")
    args = ap.parse_args(argv)
    CACHE_DIR = os.path.join(args.out, "reproduce")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)

    mods = papers(names)
    known = known_rows(mods)
    if args.list:
        for d, ms in known.items():
            print(f"{d}: {', '.join(ms)}")
        return
    datasets = args.datasets.split(",") if args.datasets else list(known)
    methods = args.methods.split(",") if args.methods else None
    for d in datasets:
        if d not in known:
            raise SystemExit(f"unknown dataset {d!r}; known: {', '.join(known)}")
    if args.diagnostics:
        from benchmarks.reproduce import diagnostics

        diagnostics.run(args.diagnostics, names, args.workdir, args.force, args.wait_for)
    elif not args.report:
        import dask

        os.makedirs(args.workdir, exist_ok=True)
        with dask.config.set(scheduler="threads"):
            for d in datasets:
                for paper in mods:
                    for m in paper.ROWS.get(d, ()):
                        if methods is not None and m not in methods:
                            continue
                        if load_row(d, m) is not None and not args.force:
                            logger.info("%s %s: cached", d, m)
                            continue
                        _wait_for(args.wait_for)
                        logger.info("%s %s: running", d, m)
                        tic = time.perf_counter()
                        row = paper.run(d, m, args.workdir, {"cv_rows": args.cv_rows})
                        row["total_seconds"] = time.perf_counter() - tic
                        row["machine"] = machine_info()
                        save_row(row)
                        logger.info("%s %s: test AUC %.4f (paper %s) fit %.2f s, %s, %.0f s "
                                    "total", d, m, row["test_auc"], row["paper"],
                                    row["fit_seconds"], fmt_params(row["params"]),
                                    row["total_seconds"])
    print(write_tables())
