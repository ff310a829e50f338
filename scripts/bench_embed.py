"""Benchmark of daskauc.embed on covtype: mini-batch k-means, the Nystroem map and its Zarr write.

Measures, in one process and against floors measured in the same process:

* k-means landmarks (k-means++ on a sample + 3 epochs) with daskauc vs scikit-learn's
  MiniBatchKMeans(max_iter=3) at the same batch size, with the inertia of both;
* the k-means Nystroem embedding of the training rows written to a Zarr store (threaded
  scheduler, one BLAS thread per task), the map alone, and scikit-learn's Nystroem transform
  on the SAME landmarks (in memory);
* the floor: flops of the map (2 n d v + 2 n v r) over the float32 GEMM rate measured here
  (20000 x 1600 @ 1600 x 1600, best of 3), plus the measured cost of the exp kernel;
* the codec choice: zstd vs no compression on a sample of the embedding (ratio, write, read);
* quality: relative Frobenius error of the kernel approximation on held-out rows, k-means
  landmarks vs uniformly sampled ones (same count).

Writes docs/benchmarks/embed.{json,md}. Usage::

    python scripts/bench_embed.py --quick            # 50k training rows, 400 landmarks
    python scripts/bench_embed.py                    # full covtype train (464,809 rows), 1600
    python scripts/bench_embed.py --rows 200000 --landmarks 800 --store-dir /fast/disk
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import lzma
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import BENCH_DIR as OUT  # noqa: E402
from _common import SHARED_DATA, gemm_rate, machine_info  # noqa: E402

COVTYPE = os.path.join(SHARED_DATA, "covtype",
                       "covtype.libsvm.binary.xz")


def load_covtype(n_lines: int | None):
    from sklearn.datasets import load_svmlight_file

    with lzma.open(COVTYPE, "rb") as f:
        text = f.read() if n_lines is None else b"".join(itertools.islice(f, n_lines))
    X, y = load_svmlight_file(io.BytesIO(text), n_features=54)
    return X.toarray(), np.where(y == 2, 1, -1).astype(np.int8)


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def gemm_rate_parallel(dtype=np.float32, n=10000, k=1600, m=1600, repeat=3) -> float:
    """FLOP/s of two single-threaded GEMMs running at once (how the map's tasks run)."""
    from concurrent.futures import ThreadPoolExecutor

    from daskauc import _config

    rng = np.random.default_rng(1)
    A = [rng.standard_normal((n, k)).astype(dtype) for _ in range(2)]
    B = rng.standard_normal((k, m)).astype(dtype)
    best = np.inf
    with _config.blas_limit(1), ThreadPoolExecutor(2) as pool:
        for _ in range(repeat):
            t = time.perf_counter()
            list(pool.map(lambda a: a @ B, A))
            best = min(best, time.perf_counter() - t)
    return 2 * 2.0 * n * k * m / best


def exp_rate(v: int) -> float:
    """Elements/s of the float32 Gaussian kernel step on one thread (best of 3)."""
    from daskauc.embed._kernels import _gauss_from_gram_f32

    rng = np.random.default_rng(0)
    K0 = rng.standard_normal((20000, v)).astype(np.float32)
    xsq = np.full(20000, 50.0, np.float32)
    usq = np.full(v, 50.0, np.float32)
    best = np.inf
    for _ in range(3):
        K = K0.copy()
        t = time.perf_counter()
        _gauss_from_gram_f32(xsq, usq, np.empty(v, np.int32), K, 0.01)
        best = min(best, time.perf_counter() - t)
    return K0.size / best


def rel_kernel_error(Z, K) -> float:
    return float(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))


def inertia(X, C) -> float:
    from sklearn.metrics import pairwise_distances_argmin_min

    _, d = pairwise_distances_argmin_min(X, C.astype(X.dtype))
    return float(np.sum(d.astype(np.float64) ** 2))


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="50k training rows, 400 landmarks")
    ap.add_argument("--rows", type=int, default=None, help="training rows (default: all)")
    ap.add_argument("--landmarks", type=int, default=None, help="landmarks (default 1600)")
    ap.add_argument("--store-dir", default=None, help="where Zarr stores go (default: a tmp dir)")
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lam", type=float, default=1e-8, help="NSAUC lambda")
    ap.add_argument("--sgd-epochs", type=int, default=5, help="NSAUC epochs")
    args = ap.parse_args(argv)
    rows = args.rows or (50_000 if args.quick else None)
    v = args.landmarks or (400 if args.quick else 1600)

    import dask
    import dask.array as da
    from sklearn.cluster import MiniBatchKMeans as SkMiniBatchKMeans
    from sklearn.kernel_approximation import Nystroem
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from daskauc import _config
    from daskauc.data.store import create_array, writing_store
    from daskauc.embed.nystroem import KMeansNystroem, gaussian_kernel

    dask.config.set(scheduler="threads")
    store_dir = args.store_dir or tempfile.mkdtemp(prefix="bench-embed-")
    os.makedirs(store_dir, exist_ok=True)
    res: dict = {"params": {"rows": rows, "landmarks": v, "batch_size": args.batch_size,
                            "epochs": args.epochs, "quick": args.quick, "dtype": "float32"}}

    # ---- data: 80/20 stratified split, standardized on train, float32
    n_lines = None if rows is None else int(np.ceil(rows / 0.8)) + 10
    (X, y), t_load = timed(load_covtype, n_lines)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    if rows is not None:
        Xtr, ytr = Xtr[:rows], ytr[:rows]
    scaler = StandardScaler().fit(Xtr)
    Xtr = scaler.transform(Xtr).astype(np.float32)
    Xte = scaler.transform(Xte).astype(np.float32)
    n, d = Xtr.shape
    res["data"] = {"n_train": n, "n_test": len(Xte), "d": d, "load_s": t_load}
    print(f"covtype: {n} x {d} train, loaded in {t_load:.1f} s; {v} landmarks; "
          f"stores in {store_dir}")

    train_store = os.path.join(store_dir, "covtype-train.zarr")
    chunk = _config.chunk_rows_for(d, 4, n)
    with writing_store(train_store, kind="dataset", overwrite=True,
                       attrs={"source": "covtype bench"}) as g:
        create_array(g, "X", data=Xtr, chunks=(chunk, d), compressors=None)
        create_array(g, "y", data=ytr, chunks=(chunk,), compressors=None)

    # ---- floors measured here
    rate = gemm_rate()
    rate_par = gemm_rate_parallel()
    e_rate = exp_rate(v)
    res["floor"] = {"gemm_f32_GFLOPs": rate / 1e9, "gemm_f32_2x1thread_GFLOPs": rate_par / 1e9,
                    "exp_kernel_Gelem_s_1thread": e_rate / 1e9}
    print(f"float32 GEMM {rate / 1e9:.0f} GFLOP/s; Gaussian kernel step "
          f"{e_rate / 1e9:.2f} G elements/s per thread")

    # ---- k-means landmarks: daskauc (from the Zarr store) vs scikit-learn (in memory)
    model = KMeansNystroem(v, batch_size=args.batch_size, kmeans_epochs=args.epochs,
                           random_state=0)
    _, t_fit = timed(model.fit, train_store)
    hist = model.kmeans_history_
    t_kmeans = sum(h["seconds"] for h in hist)
    sk_km, t_sk_km = timed(SkMiniBatchKMeans(v, batch_size=args.batch_size, max_iter=args.epochs,
                                             n_init=1, random_state=0).fit, Xtr)
    res["kmeans"] = {
        "daskauc_s": t_kmeans, "daskauc_seed_s": hist[0]["seconds"],
        "daskauc_epochs_s": [h["seconds"] for h in hist[1:]],
        "daskauc_fit_total_s": t_fit, "sklearn_s": t_sk_km,
        "daskauc_inertia": inertia(Xtr, model.landmarks_),
        "sklearn_inertia": inertia(Xtr, sk_km.cluster_centers_),
        "n_empty": hist[-1]["n_empty"], "r_kept": model.n_components_,
    }
    print(json.dumps(res["kmeans"], indent=1))

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
    from daskauc.data.store import open_dataset
    from daskauc.estimators.pairwise_sgd import PairwiseHingeSGD
    from daskauc.metrics import roc_auc

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
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "embed.json"), "w") as f:
        json.dump(res, f, indent=2, default=float)
    with open(os.path.join(OUT, "embed.md"), "w") as f:
        f.write(markdown(res))
    if args.store_dir is None:
        shutil.rmtree(store_dir, ignore_errors=True)
    print(markdown(res))


def markdown(res: dict) -> str:
    p, km, em, q = res["params"], res["kmeans"], res["embedding"], res["quality"]
    blas = [f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')}, "
            f"{b.get('num_threads')} threads)" for b in res["machine"]["blas"]
            if b.get("user_api") == "blas"]
    lines = [
        "# Embedding benchmark (covtype, float32)",
        "",
        f"`python scripts/bench_embed.py{' --quick' if p['quick'] else ''}` — "
        f"{res['data']['n_train']} x {res['data']['d']} training rows, {p['landmarks']} "
        f"landmarks, batch {p['batch_size']}, {p['epochs']} epochs; "
        f"{res['machine']['cpus']} CPUs, BLAS: {'; '.join(blas)}; "
        f"load average at the end {tuple(round(x, 1) for x in res['machine']['load_average'])}; "
        f"{res['machine']['date']}.",
        "",
        "| step | daskauc | scikit-learn | note |",
        "|---|---|---|---|",
        f"| k-means landmarks | {km['daskauc_s']:.2f} s | {km['sklearn_s']:.2f} s | "
        f"inertia {km['daskauc_inertia']:.4g} vs {km['sklearn_inertia']:.4g}; "
        f"{km['n_empty']} empty |",
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
    ]
    lines += [
        "",
        f"Kernel approximation on {q['heldout_rows']} held-out rows, "
        f"||K - Z Z^T||_F / ||K||_F: k-means landmarks {q['rel_frobenius_kmeans']:.4f}, "
        f"uniform random landmarks {q['rel_frobenius_random_mean3']:.4f} (mean of 3 draws).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
