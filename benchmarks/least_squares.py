"""Benchmark of the least-squares AUC family on a covtype-sized embedding.

What is measured, all in one process so that the ratios are meaningful on a noisy machine:

* the LSAUC statistics pass (``class_statistics``: per class ``X_c^T X_c`` per chunk, a tree
  reduction) in its two precisions, against the float32 / float64 ``X^T X`` floor on the same
  in-memory array (BLAS syrk, chunk by chunk; the conventional GEMM count is 2 n r^2 flops,
  2.4 TFLOP at n = 464,809 and r = 1600, of which syrk does half), and the accuracy of the
  float32 ("mixed") pass against the float64 one;
* seconds per epoch of each O(r) stochastic method (TwoPassAUC, SPAM, SOLAM, SPDAM) through
  the streaming engine, against one sequential numba pass (one dot and one axpy per row) over
  the same array;
* OPAUC's O(r^2) per-row cost, timed on a subsample and extrapolated to a full epoch.

Input: ``--embedding STORE`` (a daskauc embedding/dataset store, e.g. covtype through the
k-means Nystroem map), read into memory once; without it a random float32 n x r array with
random labels. ``--quick`` uses a small array (the full run is for a quiet machine).
Writes ``docs/benchmarks/least_squares.{json,md}``.

    python -m benchmarks.least_squares --quick
    python -m benchmarks.least_squares --embedding /data/covtype_embedding.zarr
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks._harness import (
    Parser,
    best_of,
    command,
    machine_info,
    md_table,
    write_results,
)
from daskauc.engine.cost import gemm_rate


def syrk_floor(X: np.ndarray, chunk: int, dtype, repeat: int) -> float:
    """Seconds of sum over chunks of Z^T Z (Z = chunk as ``dtype``), BLAS threads as is."""
    def run():
        G = np.zeros((X.shape[1], X.shape[1]), dtype=np.float64)
        for s in range(0, X.shape[0], chunk):
            Z = X[s:s + chunk]
            if Z.dtype != dtype:
                Z = Z.astype(dtype)
            G += Z.T @ Z
        return G
    return best_of(run, repeat)[0]


def numba_floor(X: np.ndarray, chunk: int, repeat: int) -> float:
    """Seconds of one sequential dot+axpy numba pass over all rows (rows permuted per chunk)."""
    from daskauc.solvers._ls_kernels import _dot_axpy_pass

    rng = np.random.default_rng(0)
    orders = [rng.permutation(min(chunk, X.shape[0] - s)).astype(np.int64)
              for s in range(0, X.shape[0], chunk)]
    w = np.zeros(X.shape[1])
    _dot_axpy_pass(X[:10], orders[0][orders[0] < 10], w, 1e-6)  # compile

    def run():
        w[:] = 0.0
        for k, s in enumerate(range(0, X.shape[0], chunk)):
            _dot_axpy_pass(X[s:s + chunk], orders[k], w, 1e-6)
    return best_of(run, repeat)[0]


def main(argv=None):
    ap = Parser(__doc__, quick="a 40,000 x 400 random array in 10,000-row chunks")
    ap.add_argument("--embedding", help="daskauc embedding or dataset store (X, y)")
    ap.add_argument("--n", type=int, default=464_809)
    ap.add_argument("--r", type=int, default=1600)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--epochs", type=int, default=2, help="epochs timed per method")
    ap.add_argument("--opauc-rows", type=int, default=None)
    ap.add_argument("--name", default="least_squares", help="of the files written in --out")
    args = ap.parse_args(argv)

    import dask
    import dask.array as da

    from daskauc.solvers.opauc import opauc
    from daskauc.solvers.solam import solam
    from daskauc.solvers.spam import spam
    from daskauc.solvers.spdam import spdam
    from daskauc.solvers.stats import class_means, class_statistics, lsauc_from_stats
    from daskauc.solvers.twopass import twopass_auc

    if args.quick:
        args.n, args.r, args.chunk_rows = 40_000, 400, 10_000
    repeat = 3
    if args.embedding:
        from daskauc.store.dataset import open_dataset

        ds = open_dataset(args.embedding)
        X = np.ascontiguousarray(ds.X.compute())
        y = np.asarray(ds.y.compute())
        source = f"embedding {args.embedding}"
    else:
        rng = np.random.default_rng(args.seed)
        X = rng.standard_normal((args.n, args.r), dtype=np.float32)
        y = np.where(rng.random(args.n) < 0.49, 1, -1).astype(np.int8)
        X[y > 0] += 0.05  # some signal
        source = "random float32"
    n, r = X.shape
    chunk = min(args.chunk_rows, n)
    info = machine_info()
    print(f"{source}: n={n} r={r} dtype={X.dtype} chunk rows={chunk}; BLAS {info['blas']}")
    Xd = da.from_array(X, chunks=(chunk, r), name="bench-X")
    yd = da.from_array(y, chunks=(chunk,), name="bench-y")
    results: dict = {"source": source, "n": n, "r": r, "dtype": str(X.dtype),
                     "chunk_rows": chunk, "gemm_flops_2nr2": 2.0 * n * r * r}

    # -- the LSAUC pass against the X^T X floor --------------------------------------------
    rows = []
    syrk_floor(X[:chunk], chunk, np.float32, 1)  # wake the BLAS threads up
    f32 = syrk_floor(X, chunk, np.float32, repeat)
    f64 = syrk_floor(X, chunk, np.float64, repeat)
    rows.append({"what": "floor: float32 X^T X (syrk, in memory)", "seconds": f32,
                 "GFLOP/s (2nr^2)": 2.0 * n * r * r / f32 / 1e9})
    rows.append({"what": "floor: float64 X^T X (cast + syrk)", "seconds": f64,
                 "GFLOP/s (2nr^2)": 2.0 * n * r * r / f64 / 1e9})
    # the floor: 2 n r^2 flops at the float32 GEMM rate (syrk does half the flops, so
    # the syrk floor above is the stricter one)
    rate = gemm_rate(np.float32)
    gemm = 2.0 * n * r * r / rate
    results["gemm_rate_f32_gflops"] = rate / 1e9
    rows.append({"what": f"floor: 2nr^2 at the float32 GEMM rate ({rate / 1e9:.0f} GFLOP/s)",
                 "seconds": gemm, "GFLOP/s (2nr^2)": rate / 1e9})
    stats = {}
    with dask.config.set(scheduler="threads"):
        for prec in ("float64", "mixed"):
            if X.dtype != np.float32 and prec == "mixed":
                continue
            t, st = best_of(lambda p=prec: class_statistics(Xd, yd, precision=p), repeat)
            stats[prec] = st
            rows.append({"what": f"LSAUC statistics pass, precision={prec}", "seconds": t,
                         "GFLOP/s (2nr^2)": 2.0 * n * r * r / t / 1e9,
                         "x floor32": t / f32, "x GEMM floor": t / gemm})
        t_solve, w64 = best_of(lambda: lsauc_from_stats(stats["float64"], 1e-4), repeat)
        rows.append({"what": "LSAUC r x r solve (lam=1e-4)", "seconds": t_solve})
        if "mixed" in stats:
            a, b = stats["float64"], stats["mixed"]
            cov_err = float(np.abs(b.cov_pos - a.cov_pos).max() / np.abs(a.cov_pos).max())
            w32 = lsauc_from_stats(b, 1e-4)
            w_err = float(np.linalg.norm(w32 - w64) / np.linalg.norm(w64))
            results["mixed_vs_float64"] = {"cov_rel_err": cov_err, "w_rel_err_lam1e-4": w_err}
            print(f"mixed vs float64: covariance rel. err {cov_err:.2e}, w* rel. err {w_err:.2e}")
    results["lsauc"] = rows
    lcols = ["what", "seconds", "GFLOP/s (2nr^2)", "x floor32", "x GEMM floor"]
    print(md_table(rows, lcols))

    # -- stochastic methods against the numba floor ------------------------------------------
    floor = numba_floor(X, chunk, repeat)
    seed = args.seed
    means = class_means(Xd, yd)
    methods = {
        "TwoPassAUC": lambda e, s: twopass_auc(Xd, yd, lam=1e-4, eta=1e-3, n_epochs=e,
                                               means=means, random_state=seed, state=s),
        "SPAM-L2": lambda e, s: spam(Xd, yd, lam=1e-4, eta=0.1, n_epochs=e, means=means,
                                     random_state=seed, state=s),
        "SOLAM": lambda e, s: solam(Xd, yd, zeta=0.1, R=10.0, n_epochs=e, random_state=seed,
                                    state=s),
        "SPDAM (m=1)": lambda e, s: spdam(Xd, yd, lam=1e-4, batch_size=1, n_epochs=e,
                                          means=means, random_state=seed, state=s),
        "SPDAM (m=64)": lambda e, s: spdam(Xd, yd, lam=1e-4, batch_size=64, n_epochs=e,
                                           means=means, random_state=seed, state=s),
    }
    srows = [{"method": "floor: numba dot+axpy pass", "s/epoch": floor, "x floor": 1.0,
              "rows/s": n / floor}]
    with dask.config.set(scheduler="threads"):
        for name, run in methods.items():
            warm = run(1, None)  # compile, and first-touch of the state
            sec = best_of(lambda run=run, warm=warm: run(args.epochs, warm.state),
                        repeat)[0] / args.epochs
            srows.append({"method": name, "s/epoch": sec, "x floor": sec / floor,
                          "rows/s": n / sec})
            print(srows[-1])
        # OPAUC on a subsample, extrapolated
        n_sub = args.opauc_rows or (2000 if args.quick else max(200, int(2e9 / r**2)))
        n_sub = min(n_sub, n)
        Xs = da.from_array(X[:n_sub], chunks=(n_sub, r))
        ys = da.from_array(y[:n_sub], chunks=(n_sub,))
        warm = opauc(X[:50], y[:50], lam=1e-4, eta=1e-3, random_state=0)  # compile
        t0 = time.perf_counter()
        opauc(Xs, ys, lam=1e-4, eta=1e-3, random_state=seed)
        per_row = (time.perf_counter() - t0) / n_sub
        srows.append({"method": f"OPAUC (timed on {n_sub} rows, extrapolated)",
                      "s/epoch": per_row * n, "x floor": per_row * n / floor,
                      "rows/s": 1.0 / per_row})
    results["stochastic"] = srows
    results["machine"] = info
    md = [
        "# Least-squares AUC family: benchmark",
        "",
        f"Data: {source}, n = {n:,}, r = {r}, {X.dtype}, chunks of {chunk:,} rows, in memory "
        f"(dask threaded scheduler). {'QUICK run (small array).' if args.quick else ''}",
        f"Machine: {info['cpus']} CPUs, {info['memory_gib']} GiB, BLAS {info['blas']}, "
        f"OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE']}, {info['date']}.",
        f"Command: `{command('benchmarks.least_squares', argv)}`",
        "",
        "## LSAUC statistics pass against the X^T X floor",
        "",
        md_table(rows, lcols),
        "",
    ]
    if "mixed_vs_float64" in results:
        mv = results["mixed_vs_float64"]
        md += [f"float32 ('mixed') pass against float64: max relative covariance error "
               f"{mv['cov_rel_err']:.2e}, relative error of w* (lam = 1e-4) "
               f"{mv['w_rel_err_lam1e-4']:.2e}.", ""]
    md += ["## Seconds per epoch against one sequential numba pass", "", md_table(srows), ""]
    write_results(args.name, results, "\n".join(md), out=args.out)


if __name__ == "__main__":
    main()
