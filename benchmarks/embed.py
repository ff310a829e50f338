"""Benchmark of daskauc.embed on covtype: mini-batch k-means, the Nystroem map and its Zarr write.

Measures, in one process and against floors measured in the same process:

* k-means landmarks: daskauc's mini-batch k-means (greedy k-means++ on a sample + 3 epochs,
  streamed from the Zarr store, threaded scheduler) against scikit-learn's MiniBatchKMeans in
  memory, both on the machine's 2 threads: at the same settings (batch size, max_iter = epochs,
  n_init=1, no final labelling pass), the same with scikit-learn's early stopping off (every
  epoch run), and scikit-learn's defaults; best of ``--repeats`` rounds (random_state 0, 1,
  ...) run side by side, each after the 1-minute load average fell below ``--wait-load``;
  quality is the exact float64 inertia over all training rows (and that of the 99% nearest
  rows: covtype's inertia is dominated by a few rows with rare binary columns);
* the k-means Nystroem embedding of the training rows written to a Zarr store (threaded
  scheduler, one BLAS thread per task), the map alone, and scikit-learn's Nystroem transform
  on the SAME landmarks (in memory);
* the floor: flops of the map (2 n d v + 2 n v r) over the float32 GEMM rate measured here
  (20000 x 1600 @ 1600 x 1600, best of 3), plus the measured cost of the exp kernel;
* the codec choice: zstd vs no compression on a sample of the embedding (ratio, write, read);
* quality: relative Frobenius error of the kernel approximation on held-out rows, k-means
  landmarks vs uniformly sampled ones (same count).

Writes docs/benchmarks/embed.{json,md}. Usage::

    python -m benchmarks.embed --quick            # 50k training rows, 400 landmarks
    python -m benchmarks.embed                    # full covtype train (464,810 rows), 1600
    python -m benchmarks.embed --kmeans-only      # only the k-means comparison (merged
                                                     # into the existing embed.json / .md)
    python -m benchmarks.embed --rows 200000 --landmarks 800 --store-dir /fast/disk

Data: ``_harness.load_dataset("covtype")`` (stratified 80/20 split, seed 0, training rows
shuffled), standardized on the training rows, float32.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from benchmarks._harness import (
    ROOT,
    Parser,
    best_of,
    load_dataset,
    machine_info,
    md_table,
    timed,
    write_json,
    write_markdown,
)
from daskauc.engine.cost import gemm_rate


def gemm_rate_parallel(dtype=np.float32, n=10000, k=1600, m=1600, repeat=3) -> float:
    """FLOP/s of two single-threaded GEMMs running at once (how the map's tasks run)."""
    from concurrent.futures import ThreadPoolExecutor

    from daskauc import _config

    rng = np.random.default_rng(1)
    A = [rng.standard_normal((n, k)).astype(dtype) for _ in range(2)]
    B = rng.standard_normal((k, m)).astype(dtype)
    with _config.blas_limit(1), ThreadPoolExecutor(2) as pool:
        best, _ = best_of(lambda: list(pool.map(lambda a: a @ B, A)), repeat)
    return 2 * 2.0 * n * k * m / best


def exp_rate(v: int) -> float:
    """Elements/s of the float32 Gaussian kernel step on one thread (best of 3)."""
    from daskauc._gaussian_kernels import _gauss_from_gram

    rng = np.random.default_rng(0)
    K0 = rng.standard_normal((20000, v)).astype(np.float32)
    xsq = np.full(20000, 50.0, np.float32)
    usq = np.full(v, 50.0, np.float32)
    best = np.inf
    for _ in range(3):
        K = K0.copy()
        t = time.perf_counter()
        _gauss_from_gram(xsq, usq, np.empty(v, np.int32), K, 0.01)
        best = min(best, time.perf_counter() - t)
    return K0.size / best


def rel_kernel_error(Z, K) -> float:
    return float(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))


def nearest_sq_distances(X, C, rows: int = 32768) -> np.ndarray:
    """Squared distance of every row of X to its nearest centre, in float64 (exact to
    rounding: ``||x||^2 + min_j (||c_j||^2 - 2 x . c_j)`` on float64 copies)."""
    C = np.asarray(C, dtype=np.float64)
    csq = np.einsum("ij,ij->i", C, C)
    out = np.empty(len(X))
    for s in range(0, len(X), rows):
        B = np.asarray(X[s : s + rows], dtype=np.float64)
        G = B @ C.T
        G *= -2.0
        G += csq
        out[s : s + rows] = np.maximum(np.einsum("ij,ij->i", B, B) + G.min(axis=1), 0.0)
    return out


def inertia(X, C) -> float:
    return float(nearest_sq_distances(X, C).sum())


def inertia_and_bulk(X, C) -> tuple[float, float]:
    """The inertia and the mean squared distance of the 99% nearest rows."""
    d2 = nearest_sq_distances(X, C)
    return float(d2.sum()), float(np.sort(d2)[: int(0.99 * len(d2))].mean())


def wait_for_load(below: float, max_wait: float) -> float:
    """Sleep until the 1-minute load average is below ``below`` (at most ``max_wait``
    seconds); return the load average then."""
    end = time.monotonic() + max_wait
    while os.getloadavg()[0] >= below and time.monotonic() < end:
        time.sleep(10)
    return os.getloadavg()[0]


def kmeans_worker(spec: dict) -> None:
    """One timed k-means fit in a fresh process; prints its seconds as the last JSON line and
    saves the centres to ``spec["out"]``.

    Each run gets its own interpreter: after daskauc has limited BLAS from a Dask thread, that
    thread stays threadpoolctl's controlling thread, scikit-learn's own one-thread BLAS limit
    from the main thread is then ignored (threadpoolctl 3.8) and its OpenMP threads each run
    multithreaded BLAS: 8x slower here (50,000 rows, 400 centres: 3.4 s instead of 0.4 s).
    """
    X = np.load(spec["npy"])
    if spec["lib"] == "daskauc":
        import dask

        from daskauc.embed.kmeans import minibatch_kmeans

        dask.config.set(scheduler="threads")
        minibatch_kmeans(X[:20000], 50, n_epochs=1, random_state=0)  # numba cache, pools
        t = time.perf_counter()
        C, _, hist = minibatch_kmeans(spec["store"], spec["k"], random_state=spec["seed"],
                                      **spec["kw"])
        seconds = time.perf_counter() - t
        extra = {"seeding_s": hist[0]["seconds"], "init": hist[0]["init"],
                 "init_size": hist[0]["init_size"],
                 "epoch_s": [h["seconds"] for h in hist[1:]]}
    else:
        from sklearn.cluster import MiniBatchKMeans as SkMiniBatchKMeans

        SkMiniBatchKMeans(50, n_init=1, random_state=0).fit(X[:20000])  # OpenMP, BLAS pools
        t = time.perf_counter()
        est = SkMiniBatchKMeans(spec["k"], random_state=spec["seed"], **spec["kw"]).fit(X)
        seconds = time.perf_counter() - t
        C, extra = est.cluster_centers_, {"n_steps": int(est.n_steps_)}
    np.save(spec["out"], np.asarray(C, dtype=np.float64))
    print(json.dumps({"seconds": seconds, "extra": extra}))


def kmeans_comparison(train_store: str, Xtr: np.ndarray, v: int, *, batch_size: int,
                      epochs: int, repeats: int, wait_load: float, max_wait: float,
                      work_dir: str) -> dict:
    """daskauc's mini-batch k-means against scikit-learn's on the same rows, side by side.

    Round r runs every configuration once with ``random_state=r``, each in a fresh process
    (:func:`kmeans_worker`: daskauc from the Zarr store on the threaded scheduler,
    scikit-learn in memory) started once the load average is below ``wait_load``. Returns per
    configuration the seconds, inertia and bulk inertia of every round and the load average
    when each run started.
    """
    import subprocess

    from threadpoolctl import threadpool_info

    from daskauc.embed.assign import default_threads

    same = dict(batch_size=batch_size, max_iter=epochs, n_init=1, compute_labels=False)
    configs = {
        **{f"daskauc-{e}-epoch{'s' if e > 1 else ''}": ("daskauc",
                                                        dict(batch_size=batch_size, n_epochs=e))
           for e in sorted({1, epochs})},
        "sklearn-same-settings": ("sklearn", same),
        "sklearn-every-epoch": ("sklearn", dict(same, max_no_improvement=None)),
        "sklearn-defaults": ("sklearn", {}),
    }
    npy = os.path.join(work_dir, "kmeans-X.npy")
    np.save(npy, Xtr)
    runs: dict = {name: {"seconds": [], "inertia": [], "bulk": [], "load_before": [],
                         "extra": []} for name in configs}
    for r in range(repeats):
        for name, (lib, kw) in configs.items():
            out = os.path.join(work_dir, f"kmeans-{name}-{r}.npy")
            spec = {"lib": lib, "kw": kw, "k": v, "seed": r, "npy": npy, "store": train_store,
                    "out": out}
            load = wait_for_load(wait_load, max_wait)
            proc = subprocess.run([sys.executable, "-m", "benchmarks.embed", "--kmeans-worker",
                                   json.dumps(spec)], capture_output=True, text=True, check=True,
                                  cwd=ROOT)
            done = json.loads(proc.stdout.strip().splitlines()[-1])
            total, bulk = inertia_and_bulk(Xtr, np.load(out))
            rec = runs[name]
            rec["seconds"].append(done["seconds"])
            rec["inertia"].append(total)
            rec["bulk"].append(bulk)
            rec["load_before"].append(load)
            rec["extra"].append(done["extra"])
            print(f"  round {r} {name}: {done['seconds']:.2f} s, inertia {total:.4g}, "
                  f"bulk {bulk:.4f}, load {load:.2f}", flush=True)
    from daskauc.embed.nystroem import KMeansNystroem

    out = {"n": int(Xtr.shape[0]), "d": int(Xtr.shape[1]), "k": v, "batch_size": batch_size,
           "epochs": epochs, "repeats": repeats, "wait_load": wait_load,
           "kmeans_nystroem_default_epochs": KMeansNystroem().kmeans_epochs,
           "daskauc_threads": default_threads(), "scheduler": "threads",
           "settings": {n: {"library": lib, **kw} for n, (lib, kw) in configs.items()},
           "threadpools": [{k: d.get(k) for k in ("user_api", "internal_api", "num_threads")}
                           for d in threadpool_info()],
           "runs": runs}
    for rec in runs.values():
        rec["best_s"] = float(min(rec["seconds"]))
        rec["median_s"] = float(np.median(rec["seconds"]))
        rec["mean_inertia"] = float(np.mean(rec["inertia"]))
        rec["mean_bulk"] = float(np.mean(rec["bulk"]))
    out["load_average_end"] = os.getloadavg()
    return out


def codec_sample(Z: np.ndarray, store_dir: str) -> list[dict]:
    """Write and read a sample of the embedding with and without zstd."""
    import dask.array as da
    import zarr
    from zarr.codecs import ZstdCodec

    rows = []
    chunk = max(1, min(len(Z), 10_000))
    for name, codecs in (("none", None), ("zstd", ZstdCodec())):
        path = os.path.join(store_dir, f"codec-{name}.zarr")
        shutil.rmtree(path, ignore_errors=True)
        z = zarr.create_array(path, shape=Z.shape, chunks=(chunk, Z.shape[1]), dtype=Z.dtype,
                              compressors=codecs)
        _, tw = timed(da.store, da.from_array(Z, chunks=(chunk, Z.shape[1])), z, lock=False)
        nbytes = sum(os.path.getsize(os.path.join(dp, f))
                     for dp, _, fs in os.walk(path) for f in fs)
        _, tr = timed(lambda p=path: da.from_zarr(p).sum().compute())
        rows.append({"codec": name, "ratio": Z.nbytes / nbytes, "write_GBps": Z.nbytes / tw / 1e9,
                     "read_GBps": Z.nbytes / tr / 1e9})
        shutil.rmtree(path, ignore_errors=True)
    return rows


def main(argv=None):
    ap = Parser(__doc__, quick="50k training rows, 400 landmarks", seed=None)
    ap.add_argument("--rows", type=int, default=None, help="training rows (default: all)")
    ap.add_argument("--landmarks", type=int, default=None, help="landmarks (default 1600)")
    ap.add_argument("--store-dir", default=None, help="where Zarr stores go (default: a tmp dir)")
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lam", type=float, default=1e-8, help="NSAUC lambda")
    ap.add_argument("--sgd-epochs", type=int, default=5, help="NSAUC epochs")
    ap.add_argument("--kmeans-only", action="store_true",
                    help="only the k-means comparison, merged into the existing embed.json/.md")
    ap.add_argument("--repeats", type=int, default=3, help="k-means rounds (best of)")
    ap.add_argument("--wait-load", type=float, default=0.5,
                    help="start each k-means run once the 1-minute load average is below this")
    ap.add_argument("--max-wait", type=float, default=300.0,
                    help="seconds to wait for that at most, per run")
    ap.add_argument("--kmeans-worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.kmeans_worker is not None:
        return kmeans_worker(json.loads(args.kmeans_worker))
    rows = args.rows or (50_000 if args.quick else None)
    v = args.landmarks or (400 if args.quick else 1600)

    import dask
    import dask.array as da
    from sklearn.kernel_approximation import Nystroem
    from sklearn.preprocessing import StandardScaler

    from daskauc import _config
    from daskauc.embed.nystroem import KMeansNystroem, gaussian_kernel
    from daskauc.store.write import create_array, writing_store

    dask.config.set(scheduler="threads")
    store_dir = args.store_dir or tempfile.mkdtemp(prefix="bench-embed-")
    os.makedirs(store_dir, exist_ok=True)
    res: dict = {"params": {"rows": rows, "landmarks": v, "batch_size": args.batch_size,
                            "epochs": args.epochs, "quick": args.quick, "dtype": "float32"}}

    # ---- data: the harness's covtype split, standardized on train, float32
    (Xtr, ytr, Xte, yte, note), t_load = timed(load_dataset, "covtype")
    if rows is not None:
        Xtr, ytr = Xtr[:rows], ytr[:rows]
    scaler = StandardScaler().fit(Xtr)
    Xtr = scaler.transform(Xtr).astype(np.float32)
    Xte = scaler.transform(Xte).astype(np.float32)
    n, d = Xtr.shape
    res["data"] = {"n_train": n, "n_test": len(Xte), "d": d, "load_s": t_load, "note": note}
    print(f"covtype: {n} x {d} train, loaded in {t_load:.1f} s; {v} landmarks; "
          f"stores in {store_dir}")

    train_store = os.path.join(store_dir, "covtype-train.zarr")
    chunk = _config.chunk_rows_for(d, 4, n)
    with writing_store(train_store, kind="dataset", overwrite=True,
                       attrs={"source": "covtype bench"}) as g:
        create_array(g, "X", data=Xtr, chunks=(chunk, d), compressors=None)
        create_array(g, "y", data=ytr, chunks=(chunk,), compressors=None)

    # ---- k-means landmarks: daskauc (from the Zarr store) vs scikit-learn (in memory)
    res["kmeans"] = kmeans_comparison(train_store, Xtr, v, batch_size=args.batch_size,
                                      epochs=args.epochs, repeats=args.repeats,
                                      wait_load=args.wait_load, max_wait=args.max_wait,
                                      work_dir=store_dir)
    res["kmeans"]["machine"] = machine_info()
    print(markdown_kmeans(res["kmeans"]))
    if args.kmeans_only:
        path = os.path.join(args.out, "embed.json")
        if os.path.exists(path):  # keep the other sections of the last full run
            with open(path) as f:
                res = {**json.load(f), "kmeans": res["kmeans"]}
        write_json(args.out, "embed", res)
        write_markdown(args.out, "embed", markdown(res))
        if args.store_dir is None:
            shutil.rmtree(store_dir, ignore_errors=True)
        return

    # ---- floors measured here
    rate = gemm_rate()
    rate_par = gemm_rate_parallel()
    e_rate = exp_rate(v)
    res["floor"] = {"gemm_f32_GFLOPs": rate / 1e9, "gemm_f32_2x1thread_GFLOPs": rate_par / 1e9,
                    "exp_kernel_Gelem_s_1thread": e_rate / 1e9}
    print(f"float32 GEMM {rate / 1e9:.0f} GFLOP/s; Gaussian kernel step "
          f"{e_rate / 1e9:.2f} G elements/s per thread")

    # ---- the map's landmarks (k-means as compared above, random_state=0)
    model = KMeansNystroem(v, batch_size=args.batch_size, kmeans_epochs=args.epochs,
                           random_state=0)
    _, t_fit = timed(model.fit, train_store)
    hist = model.kmeans_history_
    res["landmarks"] = {"fit_s": t_fit, "kmeans_s": sum(h["seconds"] for h in hist),
                        "inertia": inertia(Xtr, model.landmarks_),
                        "n_empty": hist[-1]["n_empty"], "r_kept": model.n_components_}
    print(json.dumps(res["landmarks"], indent=1))

    # ---- the embedding: map alone, map + Zarr write, sklearn transform on the same landmarks
    r = model.n_components_
    flops = 2.0 * n * d * v + 2.0 * n * v * r
    floor = flops / rate
    floor_exp = floor + n * v / (2 * e_rate)  # the exp step on both cores
    floor_best = flops / max(rate, rate_par)
    Xd = da.from_zarr(os.path.join(train_store, "X"))
    model.transform(da.from_array(Xtr[:4000], chunks=2000)).sum().compute()  # warm-up
    with _config.blas_limit(1):
        _, t_map = timed(lambda: model.transform(Xd).sum(axis=0).compute())
    emb_store = os.path.join(store_dir, "covtype-train-embedding.zarr")
    _, t_write = timed(model.write_embedding, train_store, emb_store, overwrite=True)
    sk_ny = Nystroem(kernel="rbf", gamma=model.gamma_, n_components=v)
    sk_ny.fit(model.landmarks_.astype(np.float32))  # the same landmarks, kept float32
    _, t_sk = timed(sk_ny.transform, Xtr)
    res["embedding"] = {
        "n": n, "v": v, "r": r, "GFLOP": flops / 1e9, "floor_s": floor,
        "floor_with_exp_s": floor_exp, "map_only_s": t_map, "map_and_write_s": t_write,
        "sklearn_transform_same_landmarks_s": t_sk,
        "ratio_write_to_floor": t_write / floor,
        "ratio_write_to_floor_with_exp": t_write / floor_exp,
        "ratio_map_to_floor": t_map / floor,
        "floor_best_rate_s": floor_best, "ratio_write_to_best_rate_floor": t_write / floor_best,
    }
    print(json.dumps(res["embedding"], indent=1))

    # ---- NSAUC: one epoch over the persisted embedding, and the test AUC after 5 epochs
    from daskauc.estimators.pairwise_sgd import PairwiseHingeSGD
    from daskauc.metrics import roc_auc
    from daskauc.store.dataset import open_dataset

    test_store = os.path.join(store_dir, "covtype-test.zarr")
    with writing_store(test_store, kind="dataset", overwrite=True,
                       attrs={"source": "covtype bench"}) as g:
        create_array(g, "X", data=Xte, chunks=(chunk, d), compressors=None)
        create_array(g, "y", data=yte, chunks=(chunk,), compressors=None)
    emb_te = model.write_embedding(test_store, os.path.join(store_dir, "covtype-test-emb.zarr"),
                                   overwrite=True)
    emb_tr = open_dataset(emb_store)
    Zp, yp = dask.persist(emb_tr.X, emb_tr.y)
    PairwiseHingeSGD(lam=1e-8, n_epochs=1, random_state=0).fit(Zp[:20000], yp[:20000])  # jit
    sgd = PairwiseHingeSGD(lam=args.lam, n_epochs=args.sgd_epochs, random_state=0)
    _, t_sgd = timed(sgd.fit, Zp, yp)
    epoch_s = [h["seconds"] for h in sgd.history_]
    auc, t_auc = timed(lambda: float(roc_auc(emb_te.y, sgd.decision_function(emb_te.X))))
    touched = 2 * n * r * 4  # two rows read per step, n steps
    res["nsauc"] = {"lam": args.lam, "epochs": args.sgd_epochs, "epoch_s": epoch_s,
                    "first_epoch_s": epoch_s[0], "median_epoch_s": float(np.median(epoch_s)),
                    "steps_per_s": n / float(np.median(epoch_s)),
                    "GB_read_per_epoch": touched / 1e9, "fit_s": t_sgd, "test_auc": auc,
                    "auc_s": t_auc, "t0": sgd.t0_}
    del Zp, yp
    print(json.dumps(res["nsauc"], indent=1))

    # ---- codec: zstd vs none on a sample of the written embedding
    import zarr

    zX = zarr.open_array(os.path.join(emb_store, "X"), mode="r")
    sample = np.ascontiguousarray(zX[: min(n, 50_000)])
    res["codec"] = codec_sample(sample, store_dir)
    print(json.dumps(res["codec"], indent=1))

    # ---- quality: kernel approximation on held-out rows, k-means vs random landmarks
    m = min(2000, len(Xte))
    Xq = Xte[:m].astype(np.float64)
    K = gaussian_kernel(Xq, Xq, model.gamma_)
    err_km = rel_kernel_error(model.transform(Xq), K)
    err_rand = float(np.mean([rel_kernel_error(
        KMeansNystroem(v, landmarks="random", gamma=model.gamma_, random_state=s)
        .fit(Xtr).transform(Xq), K) for s in range(3)]))
    res["quality"] = {"heldout_rows": m, "rel_frobenius_kmeans": err_km,
                      "rel_frobenius_random_mean3": err_rand}
    print(json.dumps(res["quality"], indent=1))

    res["machine"] = machine_info()
    write_json(args.out, "embed", res)
    write_markdown(args.out, "embed", markdown(res))
    if args.store_dir is None:
        shutil.rmtree(store_dir, ignore_errors=True)
    print(markdown(res))


def markdown(res: dict) -> str:
    lines = ["# Embedding benchmark (covtype, float32)", "", markdown_kmeans(res["kmeans"])]
    if "embedding" in res:
        lines.append(markdown_embedding(res))
    return "\n".join(lines)


def _blas(machine: dict) -> str:
    return "; ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')}, "
                     f"{b.get('num_threads')} threads)" for b in machine["blas"]
                     if b.get("user_api") == "blas")


def markdown_kmeans(km: dict) -> str:
    runs, mach, settings = km["runs"], km["machine"], km["settings"]
    ours = [n for n in runs if settings[n]["library"] == "daskauc"]
    loads = [x for r in runs.values() for x in r["load_before"]]
    omp = sorted({t["num_threads"] for t in km["threadpools"] if t["user_api"] == "openmp"})

    def describe(name: str) -> str:
        kw = {k: v for k, v in settings[name].items() if k != "library"}
        extra = runs[name]["extra"]
        if name in ours:
            e = kw["n_epochs"]
            return (f"{extra[0]['init']} on a {extra[0]['init_size']}-row sample, {e} "
                    f"epoch{'s' if e > 1 else ''} of {kw['batch_size']}-row batches, from Zarr")
        steps = "/".join(str(x["n_steps"]) for x in extra)
        args = ", ".join(f"{k}={v}" for k, v in kw.items()) or (
            "defaults: batch_size=1024, max_iter=100, early stopping, compute_labels=True")
        return f"{args} ({steps} steps)"

    def ratio(a: dict, b: dict) -> str:
        return f"{a['best_s'] / b['best_s']:.2f}; {a['median_s'] / b['median_s']:.2f}"

    rows = []
    for name, r in runs.items():
        row = {"run": name, "settings": describe(name), "best s": f"{r['best_s']:.2f}",
               "median s": f"{r['median_s']:.2f}", "inertia": f"{r['mean_inertia']:.4g}",
               "99% bulk": f"{r['mean_bulk']:.4f}"}
        for o in ours:
            row[f"{o} / this (best; median)"] = "" if name in ours else ratio(runs[o], r)
        row["load before"] = f"{min(r['load_before']):.2f}-{max(r['load_before']):.2f}"
        rows.append(row)
    notes = []
    for o in ours:
        seed_s = [e["seeding_s"] for e in runs[o]["extra"]]
        epoch_s = [x for e in runs[o]["extra"] for x in e["epoch_s"]]
        notes.append(f"{o}: seeding {min(seed_s):.2f}-{max(seed_s):.2f} s, epochs "
                     f"{min(epoch_s):.2f}-{max(epoch_s):.2f} s")
    default = km.get("kmeans_nystroem_default_epochs")
    return "\n".join([
        "## k-means landmarks: daskauc vs scikit-learn",
        "",
        f"`python -m benchmarks.embed --kmeans-only` — {km['n']} x {km['d']} standardized "
        f"float32 training rows, k = {km['k']}; best and median of {km['repeats']} rounds "
        f"(random_state 0-{km['repeats'] - 1}, every configuration once per round, each in a "
        f"fresh process started once the 1-minute load average was below {km['wait_load']} "
        f"or the wait limit passed: load averages {min(loads):.2f}-{max(loads):.2f} at the "
        f"starts); inertia is the exact float64 sum over all rows, mean of the rounds, and "
        f"\"99% bulk\" the mean squared distance of the 99% nearest rows (covtype's inertia is "
        f"dominated by a few rows with rare binary columns). daskauc: threaded scheduler, "
        f"{km['daskauc_threads']} assignment threads; scikit-learn: in memory, OpenMP "
        f"{'/'.join(map(str, omp))} threads. {mach['cpus']} CPUs, BLAS: {_blas(mach)}; "
        f"{mach['date']}.",
        "",
        md_table(rows),
        "",
        "Ratios: daskauc's time over scikit-learn's, of the best and of the median runs; the "
        "target is at most 1.0 at equal or better inertia. "
        + (f"`KMeansNystroem` runs {default} epoch{'s' if default != 1 else ''} by default. "
           if default is not None else "") + "; ".join(notes) + ".",
        "",
    ])


def markdown_embedding(res: dict) -> str:
    p, em, q = res["params"], res["embedding"], res["quality"]
    lines = [
        "## Nystroem map, Zarr write, NSAUC",
        "",
        f"`python -m benchmarks.embed{' --quick' if p['quick'] else ''}` — "
        f"{res['data']['n_train']} x {res['data']['d']} training rows, {p['landmarks']} "
        f"landmarks, batch {p['batch_size']}, {p['epochs']} epochs; "
        f"{res['machine']['cpus']} CPUs, BLAS: {_blas(res['machine'])}; "
        f"load average at the end {tuple(round(x, 1) for x in res['machine']['load_average'])}; "
        f"{res['machine']['date']}.",
        "",
        "| step | daskauc | scikit-learn | note |",
        "|---|---|---|---|",
        f"| map only (dask, 1 BLAS thread/task) | {em['map_only_s']:.2f} s | "
        f"{em['sklearn_transform_same_landmarks_s']:.2f} s (in memory) | same landmarks |",
        f"| map + Zarr write | {em['map_and_write_s']:.2f} s | — | "
        f"ratio to GEMM floor {em['ratio_write_to_floor']:.2f} "
        f"(with exp {em['ratio_write_to_floor_with_exp']:.2f}) |",
        "",
        f"Floor: {em['GFLOP']:.0f} GFLOP at {res['floor']['gemm_f32_GFLOPs']:.0f} GFLOP/s "
        f"(float32 GEMM measured in this process) = {em['floor_s']:.2f} s; with the exp step "
        f"({res['floor']['exp_kernel_Gelem_s_1thread']:.2f} G elements/s per thread) "
        f"{em['floor_with_exp_s']:.2f} s. r = {em['r']} eigenpairs kept of {em['v']}. Two "
        f"single-threaded GEMMs at once (how the map's tasks run) reach "
        f"{res['floor']['gemm_f32_2x1thread_GFLOPs']:.0f} GFLOP/s; against that rate the floor "
        f"is {em['floor_best_rate_s']:.2f} s and map + write is "
        f"{em['ratio_write_to_best_rate_floor']:.2f}x of it.",
        "",
        "Codec on a sample of the embedding:",
        "",
        "| codec | ratio | write GB/s | read GB/s |",
        "|---|---|---|---|",
    ]
    for c in res["codec"]:
        lines.append(f"| {c['codec']} | {c['ratio']:.3f} | {c['write_GBps']:.2f} | "
                     f"{c['read_GBps']:.2f} |")
    ns = res["nsauc"]
    lines += [
        "",
        f"NSAUC (lambda {ns['lam']:g}, t0 {ns['t0']:.3g}) over the persisted {em['n']} x "
        f"{em['r']} float32 embedding: one epoch ({em['n']} pair steps, "
        f"{ns['GB_read_per_epoch']:.1f} GB of rows touched) {ns['median_epoch_s']:.2f} s median "
        f"(first {ns['first_epoch_s']:.2f} s), {ns['steps_per_s'] / 1e6:.2f} M steps/s; "
        f"test AUC after {ns['epochs']} epochs {ns['test_auc']:.4f} "
        f"({res['data']['n_test']} test rows).",
        "",
        f"Kernel approximation on {q['heldout_rows']} held-out rows, "
        f"||K - Z Z^T||_F / ||K||_F: k-means landmarks {q['rel_frobenius_kmeans']:.4f}, "
        f"uniform random landmarks {q['rel_frobenius_random_mean3']:.4f} (mean of 3 draws).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
