"""The benchmark harness shared by every benchmark: datasets, machine info, floors measured in
the run, memory samplers, timers, the command-line options every benchmark has (``Parser``:
``--out``, ``--quick``, ``--seed``) and the JSON / Markdown / PNG writers.

A benchmark module is then its protocol and nothing else.
"""

from __future__ import annotations

import argparse
import bz2
import io
import json
import lzma
import os
import platform
import sys
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
DOCS_DIR = os.path.join(ROOT, "docs")
#: where the benchmarks write their pages unless ``--out`` says otherwise
BENCH_DIR = os.path.join(DOCS_DIR, "benchmarks")
#: where parsed datasets are cached (ignored by git)
CACHE_DIR = os.path.join(ROOT, "bench-data")
SEED = 0

#: every dataset of ../shared/data, in the order of its README
DATASETS = ("covtype", "ijcnn1", "a9a", "w8a", "usps", "spambase", "mushrooms", "diabetes",
            "german", "splice", "fourclass", "svmguide3", "breast-cancer")


# ----------------------------------------------------------------------------- datasets


def read_svmlight(rel: str, n_features: int | None = None):
    from sklearn.datasets import load_svmlight_file

    path = os.path.join(SHARED_DATA, rel)
    opener = lzma.open if path.endswith(".xz") else bz2.open
    with opener(path, "rb") as fh:
        X, y = load_svmlight_file(io.BytesIO(fh.read()), n_features=n_features)
    return np.asarray(X.toarray(), dtype=np.float64), np.asarray(y)


def _read_text(rel: str, delimiter=None, skiprows: int = 0):
    with lzma.open(os.path.join(SHARED_DATA, rel), "rt") as fh:
        return np.loadtxt(fh, delimiter=delimiter, skiprows=skiprows)


def split_80_20(X, y):
    """The stratified 80 / 20 split (seed 0) of the datasets shipped as one file."""
    from daskauc.data import train_test_split

    return train_test_split(X, y, test_size=0.2, stratify=True, random_state=SEED)


def stratified_folds(y: np.ndarray, k: int, seed: int = SEED) -> np.ndarray:
    """The fold (0 .. k - 1) of every row: each class's rows dealt round-robin in a random
    order (``seed``), so that every fold has the class ratio of ``y``."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), dtype=np.int64)
    for cls in (-1, 1):
        idx = np.flatnonzero(y == cls)
        fold[rng.permutation(idx)] = np.arange(idx.size) % k
    return fold


def stratified_rows(y: np.ndarray, rows: int, seed: int = SEED) -> np.ndarray:
    """The sorted indices of a random subsample of ``rows`` rows of ``y`` (all of them when
    there are fewer) with ``y``'s class ratio: ``round(rows * n_c / n)`` rows of each class
    ``c``, drawn without replacement (``seed``)."""
    y = np.asarray(y)
    if rows >= y.size:
        return np.arange(y.size)
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(y, return_counts=True)
    take = np.round(rows * counts / y.size).astype(np.int64)
    take[np.argmax(counts)] += rows - take.sum()  # the rounding's remainder to the largest
    idx = [rng.choice(np.flatnonzero(y == c), k, replace=False)
           for c, k in zip(classes, take, strict=True)]
    return np.sort(np.concatenate(idx))


def load_dataset(name: str, cache_dir: str | None = None, *, shuffle: bool = True):
    """``(X_train, y_train, X_test, y_test, note)``: raw features, labels in {-1, +1} (int8).

    The conventions of ../shared/data/README.md: the shipped train / test files where there
    are two (ijcnn1, a9a), else a stratified 80 / 20 split with seed 0; the positive class is
    the minority or the one the papers use (covtype type 2, spam, diabetic, mushrooms label 2,
    usps digits 5-9). Training rows are shuffled once (seed 0): several files are ordered;
    ``shuffle=False`` keeps them in the file's order (the 80 / 20 splits keep the file's order
    within each part). Cached as ``<cache_dir>/<name>-raw-shuffled.npz`` (``-raw-file-order``).
    """
    cache_dir = cache_dir or CACHE_DIR
    cache = os.path.join(cache_dir,
                         f"{name}-raw-{'shuffled' if shuffle else 'file-order'}.npz")
    if os.path.exists(cache):
        with np.load(cache, allow_pickle=False) as f:
            return f["Xtr"], f["ytr"], f["Xte"], f["yte"], str(f["note"])
    pm = lambda v: np.where(v, 1, -1)  # noqa: E731
    split = "stratified 80/20 split, seed 0"
    if name in ("ijcnn1", "a9a"):
        files = {"ijcnn1": ("ijcnn1/ijcnn1.trn.bz2", "ijcnn1/ijcnn1.tst.bz2", 22),
                 "a9a": ("a9a/a9a.xz", "a9a/a9a.t.xz", 123)}[name]
        Xtr, ytr = read_svmlight(files[0], files[2])
        Xte, yte = read_svmlight(files[1], files[2])
        ytr, yte = pm(ytr > 0), pm(yte > 0)
        note = "the shipped train / test files"
    else:
        if name == "covtype":
            X, lab = read_svmlight("covtype/covtype.libsvm.binary.xz", 54)
            y, note = pm(lab == 2), "LIBSVM covtype.binary, type 2 positive (ratio 1.05)"
        elif name == "spambase":
            A = _read_text("spambase/spam.data.xz")
            X, y, note = A[:, :-1], pm(A[:, -1] > 0), "positive = spam"
        elif name == "usps":
            X, lab = read_svmlight("usps/usps.t.bz2", 256)
            y, note = pm(lab >= 6), "usps.t (2,007 rows), digits 5-9 positive"
        elif name == "diabetes":
            A = _read_text("diabetes/pima-indians-diabetes.csv.xz", delimiter=",")
            X, y, note = A[:, :-1], pm(A[:, -1] > 0), "positive = diabetic"
        elif name == "mushrooms":
            X, lab = read_svmlight("mushrooms/mushrooms.libsvm.xz", 112)
            y, note = pm(lab == 2), "positive = label 2"
        elif name == "svmguide3":
            A = _read_text("svmguide3/svmguide3.csv.xz", delimiter=",", skiprows=1)
            X, y = A[:, 1:], pm(A[:, 0] > 0)
            note = "the 1,243-row training file (the 41-row test file has one class)"
        else:
            rel = {"w8a": ("w8a/w8a.xz", 300),
                   "german": ("german.numer/german.numer.libsvm.xz", 24),
                   "splice": ("splice/splice.libsvm.xz", 60),
                   "fourclass": ("fourclass/fourclass_scale.xz", 2),
                   "breast-cancer": ("breast-cancer/breast-cancer_scale.xz", 10)}[name]
            X, lab = read_svmlight(*rel)
            y, note = pm(lab > 0), "positive = +1"
        Xtr, Xte, ytr, yte = split_80_20(X, y)
        note = f"{note}; {split}"
    if shuffle:
        perm = np.random.default_rng(SEED).permutation(len(ytr))
        Xtr, ytr = Xtr[perm], ytr[perm]
        note += "; training rows shuffled once (seed 0)"
    else:
        note += "; training rows in file order"
    out = (np.ascontiguousarray(Xtr, dtype=np.float64), np.asarray(ytr, dtype=np.int8),
           np.ascontiguousarray(Xte, dtype=np.float64), np.asarray(yte, dtype=np.int8), note)
    os.makedirs(cache_dir, exist_ok=True)
    np.savez(cache + ".tmp.npz", Xtr=out[0], ytr=out[1], Xte=out[2], yte=out[3], note=note)
    os.replace(cache + ".tmp.npz", cache)
    return out


#: 20 Newsgroups binary tasks: name -> (positive groups (a prefix ends with "."), what)
NEWS20_TASKS = {
    "comp": ("comp.", "comp.* (5 groups) against the other 15: about 26 % positive"),
    "sci.space": ("sci.space", "sci.space against the other 19 groups: about 5 % positive"),
    "first10": (tuple(sorted(["alt.atheism", "comp.graphics", "comp.os.ms-windows.misc",
                              "comp.sys.ibm.pc.hardware", "comp.sys.mac.hardware",
                              "comp.windows.x", "misc.forsale", "rec.autos",
                              "rec.motorcycles", "rec.sport.baseball"])),
                "the first 10 groups in alphabetical order (LIBSVM's news20 labels 1-10) "
                "against the last 10: about 50 % positive"),
}


def load_news20(task: str, cache_dir: str | None = None):
    """``(X_train, y_train, X_test, y_test, note)`` of a 20 Newsgroups binary task:
    ``sklearn``'s ``TfidfVectorizer`` with its defaults (lowercase, token pattern
    ``(?u)\\b\\w\\w+\\b``, l2-normalized rows, smooth idf) fitted on the by-date training
    posts (read as latin-1, headers kept, as ``fetch_20newsgroups`` reads them): 11,314 x
    130,107 CSR (float64), the 7,532 test posts in the same vocabulary; labels {-1, +1}
    (int8) by :data:`NEWS20_TASKS`. Cached as ``<cache_dir>/news20-tfidf.npz``."""
    import scipy.sparse

    cache_dir = cache_dir or CACHE_DIR
    cache = os.path.join(cache_dir, "news20-tfidf.npz")
    if not os.path.exists(cache):
        import tarfile

        from sklearn.feature_extraction.text import TfidfVectorizer

        docs = {"train": ([], []), "test": ([], [])}
        with tarfile.open(os.path.join(SHARED_DATA, "20news", "20news-bydate.tar.xz")) as tar:
            for member in tar:
                parts = member.name.split("/")
                if not member.isfile() or len(parts) != 4:
                    continue
                part = "train" if parts[1].endswith("train") else "test"
                docs[part][0].append(tar.extractfile(member).read().decode("latin-1"))
                docs[part][1].append(parts[2])
        vec = TfidfVectorizer()
        Xtr = vec.fit_transform(docs["train"][0]).tocsr()
        Xte = vec.transform(docs["test"][0]).tocsr()
        os.makedirs(cache_dir, exist_ok=True)
        np.savez(cache + ".tmp.npz", **{f"{k}_{a}": getattr(X, a) for k, X in
                                        (("tr", Xtr), ("te", Xte))
                                        for a in ("data", "indices", "indptr")},
                 shape_tr=Xtr.shape, shape_te=Xte.shape,
                 groups_tr=np.array(docs["train"][1]), groups_te=np.array(docs["test"][1]))
        os.replace(cache + ".tmp.npz", cache)
    with np.load(cache, allow_pickle=False) as f:
        X = {k: scipy.sparse.csr_matrix((f[f"{k}_data"], f[f"{k}_indices"], f[f"{k}_indptr"]),
                                        shape=tuple(f[f"shape_{k}"])) for k in ("tr", "te")}
        groups = {k: f[f"groups_{k}"] for k in ("tr", "te")}
    positive, what = NEWS20_TASKS[task]
    def positives(g):
        if isinstance(positive, tuple):
            return np.isin(g, positive)
        return np.char.startswith(g, positive) if positive.endswith(".") else g == positive

    y = {k: np.where(positives(g), 1, -1).astype(np.int8) for k, g in groups.items()}
    note = (f"20 Newsgroups by-date, TF-IDF (sklearn defaults, fitted on train), {what}: "
            f"{X['tr'].shape[0]:,} x {X['tr'].shape[1]:,} train ({X['tr'].nnz:,} non-zeros), "
            f"{X['te'].shape[0]:,} test")
    return X["tr"], y["tr"], X["te"], y["te"], note


def machine_info() -> dict:
    import psutil
    from threadpoolctl import threadpool_info

    blas = [
        {k: d.get(k) for k in ("user_api", "internal_api", "version", "num_threads",
                               "architecture")}
        for d in threadpool_info()
        if d.get("user_api") == "blas"
    ]
    return {
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "blas": blas,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "versions": versions(),
    }


def versions() -> dict:
    """Versions of the packages a benchmark's numbers depend on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("daskauc", "numpy", "scipy", "dask", "distributed", "zarr", "numba",
                "scikit-learn", "xgboost", "lightgbm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


# ----------------------------------------------------------------------------- timers


def timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds)``: one run."""
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def best_of(fn, repeat: int) -> tuple[float, object]:
    """``(seconds, result)``: the fastest of ``repeat`` runs of ``fn()`` and its last result
    (the fastest, because on a shared machine a run can only come out slower)."""
    best, out = np.inf, None
    for _ in range(repeat):
        out, seconds = timed(fn)
        best = min(best, seconds)
    return best, out


def median_of(fn, repeat: int) -> tuple[float, object]:
    """``(seconds, result)``: the median of ``repeat`` runs of ``fn()`` and its last result."""
    times, out = [], None
    for _ in range(repeat):
        out, seconds = timed(fn)
        times.append(seconds)
    return float(np.median(times)), out


# ----------------------------------------------------------------------------- machine


def floors(repeat: int = 5, file_bytes: int = 2**30, directory: str | None = None) -> dict:
    """The machine's rates measured now, each the best of ``repeat`` runs, with one and with
    two threads: float32 GEMM (FLOP/s), memory read bandwidth (bytes/s), reading a cached file
    into a preallocated array and writing a new file (bytes/s), and the load average around
    them. Best-of-N, because a single run on a shared machine can come out slower than the
    work it is meant to bound."""
    from threadpoolctl import threadpool_limits

    from daskauc.engine.cost import gemm_rate, read_bandwidth

    out = {"load_average_before": os.getloadavg()}
    for threads in (1, 2):
        with threadpool_limits(threads):
            out[f"gemm_f32_flops_{threads}t"] = gemm_rate(np.float32, n=8000, repeat=repeat)
            out[f"read_bandwidth_{threads}t"] = read_bandwidth(2**30, repeat=repeat)
    directory = directory or CACHE_DIR
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f".floor-{os.getpid()}.bin")
    data = np.ones(file_bytes // 4, np.float32)
    best_w = best_r = np.inf
    try:
        for _ in range(repeat):
            if os.path.exists(path):
                os.remove(path)
            t = time.perf_counter()
            with open(path, "wb", buffering=0) as f:
                f.write(memoryview(data).cast("B"))
            best_w = min(best_w, time.perf_counter() - t)
            buf = np.empty_like(data)
            t = time.perf_counter()
            with open(path, "rb", buffering=0) as f:
                f.readinto(memoryview(buf).cast("B"))
            best_r = min(best_r, time.perf_counter() - t)
    finally:
        if os.path.exists(path):
            os.remove(path)
    out["file_read_cached"] = file_bytes / best_r
    out["file_write_new"] = file_bytes / best_w
    out["load_average_after"] = os.getloadavg()
    return out


def to_cluster(client, X: np.ndarray, rows: int):
    """A dask array of ``X`` whose row blocks were scattered to the workers (nothing large
    travels inside a graph)."""
    import dask.array as da

    blocks = [X[s : s + rows] for s in range(0, X.shape[0], rows)]
    futures = client.scatter(blocks)
    parts = [da.from_delayed(f, shape=b.shape, dtype=b.dtype)
             for f, b in zip(futures, blocks, strict=True)]
    return da.concatenate(parts, axis=0)


def fit_map(X, landmarks: int, **kwargs):
    """``(scaler, fmap)``: a StandardScaler fitted on ``X`` and a KMeansNystroem of
    ``landmarks`` landmarks (``kwargs`` passed on) fitted on the scaled rows: the papers'
    embedding, as ``daskauc embed`` builds it."""
    from daskauc.data.scale import StandardScaler
    from daskauc.embed.nystroem import KMeansNystroem

    scaler = StandardScaler().fit(X)
    return scaler, KMeansNystroem(landmarks, **kwargs).fit(scaler.transform(X))


def embed_stores(train: str, test: str, train_out: str, test_out: str, landmarks: int,
                 **kwargs):
    """The papers' embedding of a train and a test dataset store: :func:`fit_map` on the
    training rows (``kwargs`` passed on), then both embeddings written. Returns
    ``(train embedding, test embedding, fmap, seconds)``, the seconds of the ``"map"`` (scaler
    and landmarks) and of each write (``"train"``, ``"test"``)."""
    from daskauc.data import open_dataset

    (scaler, fmap), t_map = timed(fit_map, open_dataset(train).X, landmarks, **kwargs)
    emb, t_train = timed(fmap.write_embedding, train, train_out, scaler=scaler, overwrite=True)
    emb_te, t_test = timed(fmap.write_embedding, test, test_out, scaler=scaler, overwrite=True)
    return emb, emb_te, fmap, {"map": t_map, "train": t_train, "test": t_test}


class _Sampler:
    """A background thread calling ``_sample_once`` every ``interval`` seconds while the
    ``with`` block runs (``_begin`` before it starts, ``_end`` after it stops)."""

    def __init__(self, interval: float):
        self.interval = interval
        self._stop = threading.Event()

    def _begin(self) -> None:
        pass

    def _end(self) -> None:
        pass

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample_once()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._begin()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._end()


class WorkerMemory(_Sampler):
    """Peak resident memory of each Dask worker process of ``client`` (by pid, on this
    machine), sampled every ``interval`` seconds while the block runs; also notes whether a
    worker was restarted (its pid changed) during the block."""

    def __init__(self, client, interval: float = 0.1):
        super().__init__(interval)
        self.client = client
        self.peak: dict[str, int] = {}

    def _begin(self) -> None:
        import psutil

        self.pids = self.client.run(os.getpid)
        self._procs = {w: psutil.Process(pid) for w, pid in self.pids.items()}

    def _sample_once(self) -> None:
        import psutil

        for w, p in self._procs.items():
            try:
                self.peak[w] = max(self.peak.get(w, 0), p.memory_info().rss)
            except psutil.Error:
                pass

    def _end(self) -> None:
        try:
            after = self.client.run(os.getpid)
        except Exception:  # a lost worker
            after = {}
        self.restarted = sorted(w for w in self.pids if after.get(w) != self.pids[w])

    @property
    def peak_gib(self) -> float:
        return max(self.peak.values(), default=0) / 2.0**30


class MemorySampler(_Sampler):
    """Peak resident memory of this process and of its children (Dask workers), sampled
    every ``interval`` seconds in a background thread.

    ``peak_client`` and ``peak_workers`` (the largest single worker) are in bytes;
    ``peak_total`` is the largest sum over all of them at one sampling instant.
    """

    def __init__(self, interval: float = 0.2):
        super().__init__(interval)
        self.peak_client = self.peak_workers = self.peak_total = 0

    def _sample_once(self) -> None:
        import psutil

        me = psutil.Process()
        try:
            client = me.memory_info().rss
            workers = [c.memory_info().rss for c in me.children(recursive=True)]
        except psutil.Error:
            client, workers = 0, []
        self.peak_client = max(self.peak_client, client)
        self.peak_workers = max([self.peak_workers, *workers])
        self.peak_total = max(self.peak_total, client + sum(workers))

    def as_dict(self) -> dict:
        gib = 2.0**30
        return {"peak_client_gib": self.peak_client / gib,
                "peak_worker_gib": self.peak_workers / gib,
                "peak_total_gib": self.peak_total / gib}


# ----------------------------------------------------------------------------- options


class Parser(argparse.ArgumentParser):
    """The command line of a benchmark: the options every benchmark has, then its own.

    ``--out DIR`` where the results are written (``out``: docs/benchmarks unless the pages
    live elsewhere); ``--quick`` a small smoke configuration, given as ``quick``: a dict of
    option values that ``--quick`` sets where the command line leaves them at their
    defaults, or a sentence when the benchmark reads ``args.quick`` itself (``None``: the
    benchmark has no smaller configuration); ``--seed`` the seed of the benchmark's random
    draws (``seed`` its default; ``None``: its random draws are fixed, for example by the
    caches it shares with earlier runs). The description is the first paragraph of
    ``doc``.
    """

    def __init__(self, doc: str, *, out: str = BENCH_DIR, quick: dict | str | None = None,
                 seed: int | None = 0, **kwargs):
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None:  # run as python -m benchmarks.NAME
            kwargs.setdefault("prog", f"python -m {spec.name}")
        first = doc.strip().split("\n\n")[0]  # the docstring's first paragraph
        super().__init__(description=" ".join(first.split()), **kwargs)
        self.add_argument("--out", default=out, metavar="DIR",
                          help=f"where the results are written (default: "
                               f"{os.path.relpath(out, ROOT)})")
        self.quick = quick if isinstance(quick, dict) else {}
        if quick is not None:
            said = quick if isinstance(quick, str) else " ".join(
                f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
                for k, v in quick.items())
            self.add_argument("--quick", action="store_true",
                              help=f"a small smoke configuration: {said}")
        if seed is not None:
            self.add_argument("--seed", type=int, default=seed,
                              help=f"seed of the random draws (default: {seed})")

    def parse_args(self, args=None, namespace=None):
        out = super().parse_args(args, namespace)
        if getattr(out, "quick", False):
            for name, value in self.quick.items():
                if getattr(out, name) == self.get_default(name):
                    setattr(out, name, value)
        return out


def command(module: str, argv: list[str] | None = None) -> str:
    """The command line that reruns ``module`` (``__spec__.name`` of a benchmark)."""
    return " ".join(["python -m", module, *(sys.argv[1:] if argv is None else argv)])


# ----------------------------------------------------------------------------- writers


def write_json(out: str, name: str, obj, indent: int = 2) -> None:
    """``<out>/<name>.json`` (floats as floats, numpy scalars included)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(obj, f, indent=indent, default=float)


def write_markdown(out: str, name: str, markdown: str) -> None:
    """``<out>/<name>.md``, ending in one newline."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(markdown.rstrip() + "\n")


def write_results(name: str, rows: list[dict] | dict, markdown: str, figure=None, *,
                  out: str = BENCH_DIR) -> None:
    """``<out>/<name>.json`` (results + machine), ``.md`` and, given a matplotlib figure,
    ``.png``."""
    os.makedirs(out, exist_ok=True)
    if figure is not None:
        figure.savefig(os.path.join(out, f"{name}.png"), dpi=120, bbox_inches="tight")
    write_json(out, name, {"machine": machine_info(), "results": rows})
    write_markdown(out, name, markdown)
    print(markdown)


def md_table(rows: list[dict], columns: list[str] | None = None) -> str:
    columns = columns or list(rows[0])
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c, "")
            cells.append(f"{v:.4g}" if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def rounded(rows: list[dict], digits: int, drop=()) -> list[dict]:
    """``rows`` with floats rounded to ``digits`` and the keys in ``drop`` left out."""
    return [{k: (round(v, digits) if isinstance(v, float) else v) for k, v in r.items()
             if k not in drop} for r in rows]
