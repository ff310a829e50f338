"""Click log: one epoch of every daskauc linear estimator that reads sparse rows, on a synthetic
click log of hashed features (2**22 columns, about 30 non-zeros a row, power-law column
frequencies, 1 % positives) stored sparse, on memory-limited workers, beside scikit-learn's
SGDClassifier and Vowpal Wabbit on the same rows.

Steps, in one run:

1. Stores. ``--rows`` training rows (seed ``--seed``) and ``--test-rows`` test rows (seed
   ``--seed`` + 1) of ``benchmarks._clicklog`` written as sparse dataset stores
   (``daskauc.write_dataset`` of a dask array of CSR chunks, generated on the workers) in
   ``--workdir``; kept and reused when a complete store of the same rows is there.
2. Epochs. On a LocalCluster of ``--workers`` workers x 1 thread x ``--memory-limit`` (2 GiB:
   less than the training rows decoded, 2.2 GiB at 10,000,000 rows; zstd keeps them in about
   0.8 GiB on disk), each estimator of the registry that reads sparse rows (``_sparse_rows``)
   and is linear, with the settings of ``SETTINGS`` (one epoch where it has epochs), fits the
   training store path after a warm-up fit on a store of 4,000 rows (modules imported,
   numba's caches loaded). Per fit: seconds; the passes over the store (bytes the workers
   and the client read from files, over those of a pass that only reads every chunk);
   seconds, rows/s and non-zeros/s per pass; a pass against its floor (the store's bytes on
   disk over the cached-file read rate of ``_harness.floors()``, with the share of the store
   in the page cache before the fit) and against that read-only pass (zstd, checksums and
   structure checks of every chunk); each worker's peak RSS; test AUC of
   ``decision_function`` on the test store path (``daskauc.metrics.roc_auc``). A fit that
   raises is a row with the error.
3. Anchors, in this process: ``SGDClassifier(loss="log_loss").partial_fit`` over the
   training store's CSR chunks (one pass, ``--sgd-rows``); Vowpal Wabbit (``vowpalwabbit``
   has no ``vw`` command; its ``Workspace("-d FILE ...")`` runs VW's C++ parser and learner
   over a file as ``vw`` does), ``--loss_function logistic -b 22`` on the rows as VW text
   (``--vw-rows``), and through ``Workspace.learn`` a line formatted in Python per row
   (``--vw-python-rows``). Test AUC of every anchor on the test rows.
4. Memory. For each width of ``--memory-widths`` (2**20, 2**24) and each chunk size of
   ``--memory-chunks``, a store of ``--memory-rows`` rows and one fit of ``--memory-method``
   on a new cluster of workers of ``--memory-table-limit`` (4 GiB: the fit reaches its
   peak): the largest worker's RSS before the fit and its peak, against the chunk's bytes,
   the width's d-vector and ``--memory-goal`` (1 GiB: a 2**24-wide store should fit it).

    python -m benchmarks.click_log                       # the whole benchmark (1-2 hours)
    python -m benchmarks.click_log --quick --out /tmp/clicklog-quick
    python -m benchmarks.click_log --methods SPAM,RankSVM --anchors sgd --memory-rows 0

Writes docs/benchmarks/click_log.{json,md}. Run it alone on the machine: it measures time.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import os
import time

import numpy as np

from benchmarks import _clicklog
from benchmarks._harness import (
    CACHE_DIR,
    MemorySampler,
    Parser,
    WorkerMemory,
    command,
    floors,
    md_table,
    rounded,
    timed,
    write_results,
)

#: per-class settings of the epoch fits (``random_state`` is the benchmark's seed wherever a
#: class has one, ``n_epochs=1`` wherever it has epochs); RankSVM's C is set in ``settings``
SETTINGS: dict[str, dict] = {
    # the default rank 50 keeps 2 x 2**22 x 50 float64 sketches (3.2 GiB); a worker's peak
    # at 2**22 was 0.8 / 1.0 / 1.4 GiB at rank 1 / 2 / 4
    "OPAUC": {"cov": "low-rank", "rank": 2},
    # the exact route needs d x d; lam 1e-2 needed 36 CG passes on 200,000 rows (1e-3: 136)
    "LSAUC": {"solver": "cg", "lam": 1e-2},
}
QUICK = {"rows": 200_000, "test_rows": 50_000, "chunk_rows": 20_000,
         "methods": "UnivariateAUC,RankSVM", "vw_python_rows": 20_000, "memory_rows": 100_000,
         "memory_chunks": "10000,50000", "ranksvm_c_pairs": 100.0}


def linear_sparse_classes() -> dict:
    """Every registered linear estimator that reads sparse rows, by name."""
    from daskauc._registry import MODEL_CLASSES
    from daskauc.estimators._base import LinearAUCModel

    return {name: cls for name, cls in sorted(MODEL_CLASSES.items())
            if getattr(cls, "_sparse_rows", False) and issubclass(cls, LinearAUCModel)}


def settings(name: str, cls, seed: int, n_pos: int, n_neg: int, c_pairs: float) -> dict:
    """The parameters of class ``name`` in this benchmark."""
    params = cls().get_params()
    out = dict(SETTINGS.get(name, {}))
    if "n_epochs" in params:
        out["n_epochs"] = 1
    if "random_state" in params:
        out["random_state"] = seed
    if name == "RankSVM":  # C times the pairs: the weight of the mean pair loss
        out["C"] = c_pairs / (n_pos * n_neg)
    return out


# ----------------------------------------------------------------------------- stores


def store_bytes(path: str) -> int:
    """Bytes of every file of a store."""
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(path) for f in files)


def cached_fraction(path: str) -> float:
    """The share of a store's file pages in the page cache (``mincore`` on each file)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    p, n, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    libc.mmap.argtypes = [p, n, i, i, i, ctypes.c_long]
    libc.mincore.argtypes, libc.munmap.argtypes = [p, n, p], [p, n]
    page, total, cached = mmap.PAGESIZE, 0, 0
    for root, _, files in os.walk(path):
        for f in files:
            size = os.path.getsize(os.path.join(root, f))
            if not size:
                continue
            pages = -(-size // page)
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            try:
                addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
                if addr in (None, ctypes.c_void_p(-1).value):
                    continue
                vec = np.zeros(pages, np.uint8)
                if libc.mincore(addr, size, vec.ctypes.data) == 0:
                    cached += int(np.count_nonzero(vec & 1))
                    total += pages
                libc.munmap(addr, size)
            finally:
                os.close(fd)
    return cached / total if total else 0.0


def _provenance(seed: int) -> dict:
    return {"generator": "benchmarks._clicklog", "seed": seed, "block": _clicklog.BLOCK,
            "sigma": _clicklog.SIGMA, "bias": _clicklog.BIAS}


def ensure_store(path: str, seed: int, n: int, d: int, chunk_rows: int):
    """``(dataset, seconds)``: the store of the first ``n`` rows of the log of ``seed``,
    written (seconds) unless a complete store of the same rows is there (seconds None)."""
    from daskauc.data import open_dataset, write_dataset

    try:
        ds = open_dataset(path)
        a = ds.attrs
        if (a.get("n_samples"), a.get("n_features"), a.get("chunk_rows"),
                a.get("clicklog")) == (n, d, chunk_rows, _provenance(seed)):
            return ds, None
    except (FileNotFoundError, ValueError, KeyError):
        pass
    X, y = _clicklog.dask_rows(seed, n, n_features=d, chunk_rows=chunk_rows)
    ds, seconds = timed(write_dataset, X, y, path, attrs={"clicklog": _provenance(seed)},
                        overwrite=True)
    return ds, seconds


def store_row(name: str, ds, seconds) -> dict:
    a = ds.attrs
    n, nnz = int(a["n_samples"]), int(a["n_nonzero"])
    disk = store_bytes(ds.path)
    decoded = nnz * (4 + 4) + 8 * (n + len(a["chunk_nonzeros"])) + n
    return {"store": name, "rows": n, "features": int(a["n_features"]), "non_zeros": nnz,
            "nnz/row": nnz / n, "positives": int(a["n_positive"]),
            "chunk_rows": int(a["chunk_rows"]), "chunks": len(a["chunk_nonzeros"]),
            "disk_MiB": disk / 2**20, "decoded_MiB": decoded / 2**20,
            "write_s": "reused" if seconds is None else seconds, "path": ds.path,
            "_disk": disk}


def read_pass(client, path: str) -> tuple[float, int]:
    """``(seconds, bytes read from files)`` of one pass that reads (and checks) every chunk
    of a store on the cluster."""
    import operator

    import dask

    from daskauc.data import open_dataset

    nnz = operator.attrgetter("nnz")
    with ReadBytes(client) as io:
        parts = [dask.delayed(nnz)(b) for b in open_dataset(path).X.to_delayed().ravel()]
        seconds = timed(dask.compute, *parts)[1]
    return seconds, io.bytes


class ReadBytes:
    """Bytes read from files (``read_chars``) by the Dask workers and this process while the
    ``with`` block runs."""

    def __init__(self, client):
        self.client = client

    def _total(self) -> int:
        import psutil

        def chars(pid: int) -> int:
            try:
                return psutil.Process(pid).io_counters().read_chars
            except psutil.Error:  # a worker lost
                return 0

        return sum(map(chars, self.pids))

    def __enter__(self):
        self.pids = [*self.client.run(os.getpid).values(), os.getpid()]
        self.start = self._total()
        return self

    def __exit__(self, *exc):
        self.bytes = self._total() - self.start


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def warm_up(cls, params: dict, path: str) -> None:
    """A fit on the small store ``path`` and its scores: the modules the fit imports and
    numba's compiled kernels loaded in every process before the fit is measured."""
    np.asarray(cls(**params).fit(path).decision_function(path))


def fit_row(client, name: str, cls, params: dict, train: dict, test_path: str,
            warm_path: str, floor_s: float, read_s: float, update_s: float) -> dict:
    """One fit of ``cls(**params)`` on the training store path, measured (see the module)."""
    from daskauc.data import open_dataset
    from daskauc.metrics import roc_auc

    row = {"method": name, "settings": ", ".join(f"{k}={v:.3g}" if isinstance(v, float)
                                                 else f"{k}={v}" for k, v in params.items()
                                                 if k != "random_state")}
    try:
        warm_up(cls, params, warm_path)
    except Exception as exc:  # noqa: BLE001 - a row that says why, the run goes on
        return row | {"error": "warm-up: " + _error(exc)}
    gc.collect()
    row["cached"] = cached_fraction(train["path"])
    model, error = cls(**params), None
    with ReadBytes(client) as io, WorkerMemory(client, interval=0.1) as mem, \
            MemorySampler(interval=0.1) as here:
        t = time.perf_counter()
        try:
            model.fit(train["path"])
        except Exception as exc:  # noqa: BLE001
            error = _error(exc)
        seconds = time.perf_counter() - t
    row |= {"fit_s": seconds, "worker_MiB": max(mem.peak.values(), default=0) / 2**20,
            "client_MiB": here.peak_client / 2**20, "restarted": len(mem.restarted)}
    if error is not None:
        return row | {"error": error}
    passes = io.bytes / train["pass_bytes"]
    per_pass = seconds / max(passes, 1e-9)
    row |= {"passes": passes, "s/pass": per_pass, "rows/s": train["rows"] / per_pass,
            "nnz/s": train["non_zeros"] / per_pass, "pass/floor": per_pass / floor_s,
            "pass/read": per_pass / read_s, "pass/update": per_pass / update_s}
    try:
        test = open_dataset(test_path)
        auc, row["score_s"] = timed(lambda: float(roc_auc(test.y,
                                                          model.decision_function(test_path))))
        row["test_auc"] = auc
        row["n_iter"] = int(getattr(model, "n_iter_", 0))
    except Exception as exc:  # noqa: BLE001
        row["error"] = "scoring: " + _error(exc)
    return row


# ----------------------------------------------------------------------------- anchors


def _chunks(path: str, limit: int):
    """``(X chunk, y chunk)`` of a store, read in this process, up to ``limit`` rows."""
    import dask

    from daskauc.data import open_dataset

    ds = open_dataset(path)
    seen = 0
    for xb, yb in zip(ds.X.to_delayed().ravel(), ds.y.to_delayed().ravel(), strict=True):
        if seen >= limit:
            return
        X, y = dask.compute(xb, yb, scheduler="sync")
        take = min(limit - seen, X.shape[0])
        seen += take
        yield X[:take], y[:take]


def first_chunk(path: str):
    """The first X chunk of a store, read in this process."""
    X, _ = next(_chunks(path, 2**62))
    return X


def sgd_anchor(train: dict, test_path: str, rows: int, seed: int) -> dict:
    """``SGDClassifier(loss="log_loss").partial_fit`` over the training store's chunks."""
    from sklearn.linear_model import SGDClassifier

    from daskauc.metrics import roc_auc

    model = SGDClassifier(loss="log_loss", random_state=seed)
    read = learn = 0.0
    n = nnz = 0  # rows and non-zeros seen
    with MemorySampler(interval=0.1) as here:
        t = time.perf_counter()
        it = _chunks(train["path"], rows)
        while True:
            (chunk, r) = timed(next, it, None)
            read += r
            if chunk is None:
                break
            _, s = timed(model.partial_fit, chunk[0], chunk[1], classes=[-1, 1])
            learn += s
            n, nnz = n + chunk[0].shape[0], nnz + chunk[0].nnz
        total = time.perf_counter() - t
    scores, labels = [], []
    for X, y in _chunks(test_path, 2**62):
        scores.append(model.decision_function(X))
        labels.append(y)
    return {"method": "sklearn SGDClassifier(loss='log_loss').partial_fit", "rows": n,
            "total_s": total, "read_s": read, "learn_s": learn, "rows/s": n / total,
            "learn rows/s": n / learn, "nnz/s": nnz / total, "memory_MiB": here.peak_client / 2**20,
            "test_auc": float(roc_auc(np.concatenate(labels), np.concatenate(scores))),
            "note": "one pass, chunks read from the store in this process; 1 thread"}


def _vw_auc(model: str, test_vw: str, test_y: np.ndarray, work: str) -> float:
    import vowpalwabbit

    from daskauc.metrics import roc_auc

    pred = os.path.join(work, "vw-test.pred")
    vowpalwabbit.Workspace(f"-d {test_vw} -t -i {model} -p {pred} --quiet").finish()
    return float(roc_auc(test_y, np.loadtxt(pred, usecols=0)))


def vw_anchor(args, work: str, train_path: str, test_y: np.ndarray,
              bits: int) -> list[dict]:
    """VW's one pass over the text file (C++), and through the Python API on a prefix."""
    import vowpalwabbit

    seed, d = args.seed, 2**bits
    rows, out = min(args.vw_rows, args.rows), []
    train_vw = os.path.join(work, f"train-{seed}-{rows}-{bits}.vw")
    test_vw = os.path.join(work, f"test-{seed + 1}-{args.test_rows}-{bits}.vw")
    written, text_s = timed(_clicklog.write_text, train_vw, seed, 0, rows, n_features=d)
    text = f"written in {text_s:.0f} s" if written else "kept from an earlier run"
    timed(_clicklog.write_text, test_vw, seed + 1, 0, args.test_rows, n_features=d)
    opts = f"--loss_function logistic -b {bits} --quiet"
    model = os.path.join(work, "vw.model")
    with MemorySampler(interval=0.1) as here:
        _, seconds = timed(lambda: vowpalwabbit.Workspace(
            f"-d {train_vw} {opts} -f {model}").finish())
    out.append({"method": f"Vowpal Wabbit {vowpalwabbit.__version__} (-d file: VW's parser)",
                "rows": rows, "total_s": seconds, "rows/s": rows / seconds,
                "memory_MiB": here.peak_client / 2**20,
                "test_auc": _vw_auc(model, test_vw, test_y, work),
                "note": f"{opts}, one pass over {os.path.getsize(train_vw) / 2**30:.2f} GiB of "
                        f"text ({text}, not counted); a parser thread and a learner "
                        "thread"})
    rows = min(args.vw_python_rows, args.rows)
    if rows <= 0:
        return out
    ws = vowpalwabbit.Workspace(opts)
    fmt = learn = 0.0
    with MemorySampler(interval=0.1) as here:
        t = time.perf_counter()
        for X, y in _chunks(train_path, rows):
            t0 = time.perf_counter()
            lines = [f"{int(y[i])} |f " + " ".join(
                f"{j}" if v == 1.0 else f"{j}:{v:.6g}"
                for j, v in zip(X.indices[X.indptr[i]:X.indptr[i + 1]].tolist(),
                                X.data[X.indptr[i]:X.indptr[i + 1]].tolist(), strict=True))
                for i in range(X.shape[0])]
            t1 = time.perf_counter()
            for line in lines:
                ws.learn(line)
            fmt, learn = fmt + t1 - t0, learn + time.perf_counter() - t1
        total = time.perf_counter() - t
    pymodel = os.path.join(work, "vw-python.model")
    ws.save(pymodel)
    ws.finish()
    out.append({"method": "Vowpal Wabbit (Python: a line formatted and learn()-ed per row)",
                "rows": rows, "total_s": total, "rows/s": rows / total,
                "learn rows/s": rows / learn, "memory_MiB": here.peak_client / 2**20,
                "test_auc": _vw_auc(pymodel, test_vw, test_y, work),
                "note": f"a prefix of {rows:,} rows: formatting {fmt:.1f} s, learn() "
                        f"{learn:.1f} s (chunks read from the store, not counted apart)"})
    return out


# ----------------------------------------------------------------------------- memory


def memory_rows(args, work: str) -> list[dict]:
    """Peak worker RSS of one fit against the chunk size, at each width."""
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    cls = linear_sparse_classes()[args.memory_method]
    limit, goal = parse_bytes(args.memory_table_limit), parse_bytes(args.memory_goal)
    out = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for bits in (int(b) for b in args.memory_widths.split(",")):
            for cr in (int(c) for c in args.memory_chunks.split(",")):
                d = 2**bits
                path = os.path.join(work, f"memory-{args.seed}-{args.memory_rows}-{bits}-{cr}"
                                          ".zarr")
                row = {"features": f"2^{bits}", "chunk_rows": cr}
                try:
                    ds, _ = ensure_store(path, args.seed, args.memory_rows, d, cr)
                    chunk_nnz = max(ds.attrs["chunk_nonzeros"])
                    params = settings(args.memory_method, cls, args.seed, 1, 1, 1.0)
                    client.run(gc.collect)
                    idle = max(client.run(lambda: __import__("psutil").Process()
                                          .memory_info().rss).values())
                    with WorkerMemory(client, interval=0.05) as mem:
                        try:
                            _, seconds = timed(cls(**params).fit, path)
                        except Exception as exc:  # noqa: BLE001
                            row["error"], seconds = _error(exc), None
                    peak = max(mem.peak.values(), default=0)
                    row |= {"chunk_MiB": (chunk_nnz * 8 + 8 * (cr + 1)) / 2**20,
                            "d-vector_MiB": 8 * d / 2**20, "idle_worker_MiB": idle / 2**20,
                            "peak_worker_MiB": peak / 2**20, "limit_MiB": limit / 2**20,
                            "peak/goal": peak / goal, "restarted": len(mem.restarted),
                            "fit_s": seconds}
                except Exception as exc:  # noqa: BLE001
                    row["error"] = _error(exc)
                print(row, flush=True)
                out.append(row)
    return out


# ----------------------------------------------------------------------------- main


def main(argv=None) -> None:
    ap = Parser(__doc__, quick=QUICK)
    ap.add_argument("--rows", type=int, default=10_000_000, help="training rows")
    ap.add_argument("--test-rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=22, help="log2 of the width (22)")
    ap.add_argument("--chunk-rows", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="2GiB", help="per worker, for the epochs")
    ap.add_argument("--workdir", default=os.path.join(CACHE_DIR, "click_log"))
    ap.add_argument("--methods", default="all",
                    help="comma-separated class names (default: every linear sparse reader)")
    ap.add_argument("--ranksvm-c-pairs", type=float, default=1000.0,
                    help="RankSVM's C times the training pairs n+ n- (default 1000)")
    ap.add_argument("--anchors", default="sgd,vw", help="sgd, vw, both or none")
    ap.add_argument("--sgd-rows", type=int, default=2**62, help="(default: every row)")
    ap.add_argument("--vw-rows", type=int, default=2**62, help="(default: every row)")
    ap.add_argument("--vw-python-rows", type=int, default=1_000_000)
    ap.add_argument("--memory-rows", type=int, default=1_000_000, help="0: no memory table")
    ap.add_argument("--memory-widths", default="20,24", help="log2 of the widths")
    ap.add_argument("--memory-chunks", default="50000,200000", help="chunk rows")
    ap.add_argument("--memory-method", default="UnivariateAUC")
    ap.add_argument("--memory-table-limit", default="4GiB",
                    help="per worker of the memory table's cluster (high: the peak is seen)")
    ap.add_argument("--memory-goal", default="1GiB", help="the worker limit to compare with")
    args = ap.parse_args(argv)

    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    work = args.workdir
    os.makedirs(work, exist_ok=True)
    bits, seed = args.features, args.seed
    d = 2**bits
    classes = linear_sparse_classes()
    chosen = list(classes) if args.methods == "all" else args.methods.split(",")
    unknown = sorted(set(chosen) - set(classes))
    if unknown:
        ap.error(f"--methods: {unknown} are not linear estimators that read sparse rows; "
                 f"the choices: {', '.join(classes)}")
    fl = floors(repeat=2 if args.quick else 5, file_bytes=2**28 if args.quick else 2**30,
                directory=work)
    train_name = f"train-{seed}-{args.rows}-{bits}-{args.chunk_rows}.zarr"
    test_name = f"test-{seed + 1}-{args.test_rows}-{bits}-{args.chunk_rows}.zarr"
    limit = parse_bytes(args.memory_limit)
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=limit,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        with WorkerMemory(client, interval=0.25) as mem:
            stores = [store_row("train", *ensure_store(os.path.join(work, train_name),
                                                      seed, args.rows, d, args.chunk_rows)),
                      store_row("test", *ensure_store(os.path.join(work, test_name), seed + 1,
                                                      args.test_rows, d, args.chunk_rows))]
        stores[0]["write_worker_MiB"] = max(mem.peak.values(), default=0) / 2**20
        warm_path = os.path.join(work, f"warm-up-{bits}.zarr")
        ensure_store(warm_path, seed + 7, 4_000, d, 2_000)
        train, test_path = stores[0], stores[1]["path"]
        print(stores, flush=True)
        floor_s = train["_disk"] / fl["file_read_cached"]
        read_pass(client, train["path"])  # the pass below finds the store in the page cache
        read_s, train["pass_bytes"] = read_pass(client, train["path"])
        update_s = _clicklog.update_floor(first_chunk(train["path"])) * train["non_zeros"]
        n_pos = train["positives"]
        n_neg = train["rows"] - n_pos
        fits = []
        for name in chosen:
            params = settings(name, classes[name], seed, n_pos, n_neg, args.ranksvm_c_pairs)
            row = fit_row(client, name, classes[name], params, train, test_path, warm_path,
                          floor_s, read_s, update_s)
            print(row, flush=True)
            fits.append(row)
    finally:
        client.close()
        cluster.close()

    anchors, test_y = [], None
    if args.anchors != "none":
        from daskauc.data import open_dataset

        test_y = np.asarray(open_dataset(test_path).y.compute(scheduler="sync"))
    if "sgd" in args.anchors:
        try:
            anchors.append(sgd_anchor(train, test_path, args.sgd_rows, seed))
        except Exception as exc:  # noqa: BLE001
            anchors.append({"method": "sklearn SGDClassifier", "error": _error(exc)})
        print(anchors[-1], flush=True)
    if "vw" in args.anchors:
        try:
            anchors.extend(vw_anchor(args, work, train["path"], test_y, bits))
        except Exception as exc:  # noqa: BLE001
            anchors.append({"method": "Vowpal Wabbit", "error": _error(exc)})
        print(anchors[-1], flush=True)

    memory = memory_rows(args, work) if args.memory_rows > 0 else []

    for s in stores:
        s.pop("_disk")
        s.pop("pass_bytes", None)
    results = {"args": vars(args), "stores": stores, "floors": fl, "floor_s": floor_s,
               "read_pass_s": read_s, "update_floor_s": update_s, "fits": fits,
               "anchors": anchors, "memory": memory,
               "settings": {n: settings(n, classes[n], seed, n_pos, n_neg,
                                        args.ranksvm_c_pairs) for n in chosen}}
    write_results("click_log", results, markdown(args, argv, results),
                  out=args.out)


def _size(mib: float) -> str:
    return f"{mib:.3g} MiB" if mib < 1024 else f"{mib / 1024:.3g} GiB"


def markdown(args, argv, r: dict) -> str:
    train = r["stores"][0]
    fl = r["floors"]
    gib = 2**30
    md = ["# Click log: sparse AUC solvers out of core, beside SGDClassifier and Vowpal Wabbit",
          "", f"`{command('benchmarks.click_log', argv)}`", "",
          f"Synthetic click log (`benchmarks/_clicklog.py`): {_clicklog.N_FIELDS} hashed "
          f"categorical fields, a bag of 0-{_clicklog.MAX_BAG} hashed tokens and "
          f"{_clicklog.N_NUMERIC} numeric counts a row, Zipf-like frequencies, 2^{args.features}"
          " columns; labels from a logistic model over the features, about 1 % positive "
          "(ranking by the true score gives a test AUC of about 0.86). Stores written by "
          "`daskauc.write_dataset` from dask arrays of CSR chunks generated on the workers.", "",
          md_table(rounded([{k: v for k, v in s.items() if k != "path"}
                            for s in r["stores"]], 3)), "",
          f"Floors measured in the run (`_harness.floors()`): cached-file read "
          f"{fl['file_read_cached'] / gib:.2f} GiB/s, memory read "
          f"{fl['read_bandwidth_1t'] / gib:.1f} GiB/s (1 thread); reading the training store's "
          f"{_size(train['disk_MiB'])} on disk at the cached-file rate takes "
          f"{r['floor_s']:.3g} s (the pass floor). A daskauc pass that only reads and checks "
          f"every chunk (zstd, CRC32C, structure) on the cluster takes "
          f"{r['read_pass_s']:.3g} s. The update floor: one chain's least work on every row, "
          "a read and a write of the d-vector at each non-zero (`_clicklog.update_floor`, "
          "one thread, measured on the first chunk), "
          f"{r['update_floor_s']:.3g} s for the training rows.", "",
          f"## One epoch on {args.workers} workers x 1 thread x {args.memory_limit} (training "
          f"store {_size(train['disk_MiB'])} on disk, {_size(train['decoded_MiB'])} decoded)",
          "",
          "`passes`: bytes the workers and the client read from files during the fit over "
          "those of the read-only pass; `s/pass`, `rows/s`, `nnz/s` per pass; `pass/floor`: "
          "a pass against the pass floor, `pass/read` against the read-only pass, `pass/update` "
          "against the update floor; `cached`: "
          "the share of the store in the page cache before the fit; `worker_MiB` the largest "
          "worker's peak RSS, `client_MiB` this process's.", "",
          md_table(rounded(r["fits"], 4), ["method", "settings", "fit_s", "passes", "s/pass",
                                           "rows/s", "nnz/s", "pass/floor", "pass/read",
                                           "pass/update",
                                           "cached", "worker_MiB", "client_MiB", "restarted",
                                           "n_iter", "test_auc", "error"]), ""]
    if r["anchors"]:
        md += ["## Single-machine anchors on the same rows", "",
               md_table(rounded(r["anchors"], 4), ["method", "rows", "total_s", "rows/s",
                                                   "learn rows/s", "nnz/s", "memory_MiB",
                                                   "test_auc", "note", "error"]), ""]
    if r["memory"]:
        md += [f"## Worker memory against the chunk size ({args.memory_method}, "
               f"{args.memory_rows:,} rows a store)", "",
               f"One fit a store on {args.workers} workers x 1 thread x "
               f"{args.memory_table_limit}; `idle_worker_MiB` the largest worker's RSS just "
               "before the fit, `chunk_MiB` the largest chunk decoded (values, columns, row "
               f"pointers), `peak/goal` the largest worker's peak over {args.memory_goal}.", "",
               md_table(rounded(r["memory"], 3),
                        ["features", "chunk_rows", "chunk_MiB", "d-vector_MiB",
                         "idle_worker_MiB", "peak_worker_MiB", "peak/goal", "restarted",
                         "fit_s", "error"]), ""]
    return "\n".join(md)


if __name__ == "__main__":
    main()
