"""Benchmark the PRSVM+ truncated Newton solver (NBAUC's solver).

Measures, in one run on one machine:

* the floor: one pass over the embedding at the memory bandwidth measured here (``np.sum``)
  and numpy's own ``X @ v`` and ``X.T @ u`` in one process (a Hessian product is two passes);
* seconds per Hessian-vector product with ``X`` persisted on a LocalCluster and streamed from
  an uncompressed Zarr store;
* full training (persisted and streamed): Newton steps, CG steps, seconds, final objective;
* variants: exact vs Armijo line search x CG tolerance (persisted);
* per-chunk product kernels for float32 data: float64-accumulating numba kernels vs BLAS
  ``sgemv`` (speed and relative error);
* scipy's L-BFGS-B with the same exact objective and gradient in one process (numpy), to the
  same relative gradient norm, as a time ratio;
* optionally (``--ijcnn1``) a sanity run of linear RankSVM on standardized ijcnn1.

Writes ``docs/benchmarks/newton.json`` and ``newton.md``. Run ``--quick`` on a shared machine
(50,000 x 200 random float32); the full default is covtype-sized (464,809 x 1600) or the
embedding store given with ``--embedding``.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import time
import uuid

import numpy as np

from benchmarks._harness import (
    Parser,
    command,
    machine_info,
    median_of,
    read_svmlight,
    write_json,
    write_markdown,
)

DEFAULT_RUN = "persisted exact cg_tol=0.1 (defaults)"
IN_PROCESS_RUN = "in-process threaded (numpy X), defaults"


def _median_time(f, repeat=5):
    f()  # warm up
    return median_of(f, repeat)[0]


def _synthetic(n, r, seed=0):
    rng = np.random.default_rng(seed)
    X = np.empty((n, r), dtype=np.float32)
    step = 50_000
    for a in range(0, n, step):
        X[a : a + step] = rng.standard_normal((min(step, n - a), r), dtype=np.float32)
    w = rng.standard_normal(r) / np.sqrt(r)
    s = X @ w.astype(np.float32) + 0.8 * rng.standard_normal(n).astype(np.float32)
    y = np.where(s > np.quantile(s, 0.9), 1, -1).astype(np.int8)  # 10% positives
    return X, y


def _floors(X):
    from threadpoolctl import threadpool_limits

    v = np.random.default_rng(1).standard_normal(X.shape[1]).astype(X.dtype)
    u = np.random.default_rng(2).standard_normal(X.shape[0]).astype(X.dtype)
    out = {"nbytes": int(X.nbytes)}
    for threads in (1, 2):
        with threadpool_limits(threads, "blas"):
            t_mv = _median_time(lambda: X @ v)
            t_rmv = _median_time(lambda: X.T @ u)
        out[f"numpy_Xv_s_{threads}thr"] = t_mv
        out[f"numpy_XTu_s_{threads}thr"] = t_rmv
        out[f"numpy_two_passes_s_{threads}thr"] = t_mv + t_rmv
    t_sum = _median_time(lambda: X.sum())
    out["np_sum_s"] = t_sum
    out["bandwidth_GBps_np_sum"] = X.nbytes / t_sum / 1e9
    # the floor of one Hessian product: two passes over X, as fast as numpy does them here
    out["floor_hvp_s"] = min(out["numpy_two_passes_s_1thr"], out["numpy_two_passes_s_2thr"])
    out["bandwidth_GBps_two_passes"] = 2 * X.nbytes / out["floor_hvp_s"] / 1e9
    return out


def _kernels(X, rows=50_000):
    from threadpoolctl import threadpool_limits

    from daskauc.solvers._pairwise_kernels import _matvec_f64, _rmatvec_f64

    B = np.ascontiguousarray(X[:rows]).astype(np.float32)
    B64 = B.astype(np.float64)
    rng = np.random.default_rng(3)
    v = rng.standard_normal(B.shape[1])
    u = rng.standard_normal(B.shape[0])
    out = np.empty(B.shape[0])
    acc = np.zeros(B.shape[1])
    ref_mv, ref_rmv = B64 @ v, B64.T @ u

    def rel(a, b):
        return float(np.abs(a - b).max() / np.abs(b).max())

    res = {}
    with threadpool_limits(1, "blas"):
        res["numba_f64acc_Xv_s"] = _median_time(lambda: _matvec_f64(B, v, out))
        res["numba_f64acc_XTu_s"] = _median_time(lambda: (acc.fill(0), _rmatvec_f64(B, u, acc)))
        v32, u32 = v.astype(np.float32), u.astype(np.float32)
        res["blas_sgemv_Xv_s"] = _median_time(lambda: B @ v32)
        res["blas_sgemv_XTu_s"] = _median_time(lambda: B.T @ u32)
        res["cast_then_dgemv_XTu_s"] = _median_time(lambda: B.astype(np.float64).T @ u)
    _matvec_f64(B, v, out)
    acc.fill(0)
    _rmatvec_f64(B, u, acc)
    res["numba_f64acc_Xv_relerr"] = rel(out, ref_mv)
    res["numba_f64acc_XTu_relerr"] = rel(acc, ref_rmv)
    res["blas_sgemv_Xv_relerr"] = rel(B @ v.astype(np.float32), ref_mv)
    res["blas_sgemv_XTu_relerr"] = rel(B.T @ u.astype(np.float32), ref_rmv)
    res["block_shape"] = list(B.shape)
    return res


def _hvp_seconds(Xd, y, C, repeat):
    from daskauc.solvers.pairwise import PairwiseOperator

    op = PairwiseOperator(Xd, y, C)
    rng = np.random.default_rng(4)
    w = rng.standard_normal(Xd.shape[1]) * 0.05
    _, handle, _ = op.scores_and_gradient(w, (op.pos, op.neg), with_g0=False)
    p = rng.standard_normal(Xd.shape[1])
    op.hessian_product(handle, p)  # warm up (numba caches on the workers)
    ts = []
    for i in range(repeat):
        t0 = time.perf_counter()
        op.hessian_product(handle, p * (1.0 + 1e-3 * (i + 1)))
        ts.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    op.scores_and_gradient(w, (op.pos, op.neg), with_g0=False)
    t_grad = time.perf_counter() - t0
    return {"hvp_s_median": float(np.median(ts)), "hvp_s_all": ts, "grad_s": t_grad}


def _train(Xd, y, C, tol, **kw):
    from daskauc.solvers.newton import prsvm_newton

    t0 = time.perf_counter()
    res = prsvm_newton(Xd, y, C=C, tol=tol, **kw)
    t = time.perf_counter() - t0
    h = res.history
    print(f"  trained in {t:.1f} s: {res.n_iter} Newton, "
          f"{sum(r.get('cg_iter', 0) for r in h)} CG", flush=True)
    return {"seconds": t, "newton_iter": res.n_iter, "converged": res.converged,
            "cg_iter": int(sum(r.get("cg_iter", 0) for r in h)),
            "ls_steps": int(sum(r.get("ls_steps", 0) for r in h)),
            "passes_over_X": 2 * len(h) + 2 * int(sum(r.get("cg_iter", 0) for r in h)),
            "objective": h[-1]["objective"], "rel_grad_norm": h[-1]["rel_grad_norm"],
            "coef": res.coef}


def _lbfgs(X, y, C, tol, max_seconds):
    from scipy.optimize import minimize

    from daskauc.solvers.pairwise import (
        block_matvec,
        block_rmatvec,
        class_indices,
        pairwise_coefficients,
    )

    pos, neg = class_indices(y)
    hint = [pos, neg]
    n_eval = [0]

    def fg(w):
        n_eval[0] += 1
        c = pairwise_coefficients(block_matvec(X, w), *hint)
        hint[:] = [c.pos_idx, c.neg_idx]
        return 0.5 * w @ w + C * c.loss, w + 2 * C * block_rmatvec(X, c.g)

    g0 = np.linalg.norm(fg(np.zeros(X.shape[1]))[1])
    last = {}

    def cb(intermediate_result):
        g = fg(intermediate_result.x)[1]
        n_eval[0] -= 1
        last["rel"] = float(np.linalg.norm(g) / g0)
        last["timed_out"] = time.perf_counter() - t0 > max_seconds
        if last["rel"] <= tol or last["timed_out"]:
            raise StopIteration

    t0 = time.perf_counter()
    res = minimize(fg, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B", callback=cb,
                   options={"maxiter": 10_000, "gtol": 0.0, "ftol": 0.0, "maxcor": 20})
    t = time.perf_counter() - t0
    return {"seconds": t, "iterations": int(res.nit), "function_evals": n_eval[0],
            "objective": float(res.fun), "rel_grad_norm": last.get("rel"),
            "reached_tol": bool(last.get("rel", 1.0) <= tol), "time_limit_s": max_seconds,
            "passes_over_X": 2 * n_eval[0]}


def _ijcnn1(Cs):
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler

    from daskauc import RankSVM, cv_select_C

    Xtr, ytr = read_svmlight("ijcnn1/ijcnn1.trn.bz2", 22)
    Xte, yte = read_svmlight("ijcnn1/ijcnn1.tst.bz2", 22)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    out = {"n_train": int(Xtr.shape[0]), "n_test": int(Xte.shape[0])}
    t0 = time.perf_counter()
    m = RankSVM(C=1.0).fit(Xtr, ytr)
    out["C1_fit_s"] = time.perf_counter() - t0
    out["C1_newton_iter"] = m.n_iter_
    out["C1_test_auc"] = float(roc_auc_score(yte, m.decision_function(Xte)))
    t0 = time.perf_counter()
    best, table = cv_select_C(RankSVM(), Xtr, ytr, Cs, cv=3, random_state=0)
    out["cv_s"] = time.perf_counter() - t0
    out["cv_grid"] = [float(c) for c in Cs]
    out["cv_table"] = [{k: row[k] for k in ("C", "mean_auc", "n_iter", "seconds")}
                       for row in table]
    t0 = time.perf_counter()
    m = RankSVM(C=best).fit(Xtr, ytr)
    out["best_C"] = best
    out["best_fit_s"] = time.perf_counter() - t0
    out["best_test_auc"] = float(roc_auc_score(yte, m.decision_function(Xte)))
    out["paper_test_auc"] = 0.9156
    # below the paper's grid: with ~2e8 pairs the loss dominates for every C >= 2^-15
    out["below_grid_test_auc"] = {
        f"2^{e}": float(roc_auc_score(yte, RankSVM(C=2.0**e).fit(Xtr, ytr).decision_function(Xte)))
        for e in (-30, -25, -20)
    }
    return out


def _markdown(res) -> str:
    L = [f"# PRSVM+ truncated Newton benchmark ({res['mode']})", "",
         f"Machine: {res['machine']['platform']}, {res['machine']['cpus']} CPUs, "
         f"{res['machine']['workers']} dask workers x 1 thread. Data: {res['data']}.", "",
         "Command: `" + res["command"] + "`", "", "## Floors (one process)", "",
         "| quantity | seconds |", "|---|---|"]
    f = res["floors"]
    for k in ("np_sum_s", "numpy_Xv_s_1thr", "numpy_XTu_s_1thr", "numpy_two_passes_s_1thr",
              "numpy_two_passes_s_2thr", "floor_hvp_s"):
        L.append(f"| {k} | {f[k]:.4f} |")
    L.append(f"| effective bandwidth of the floor | {f['bandwidth_GBps_two_passes']:.1f} GB/s |")
    L += ["", "## Hessian-vector product (LocalCluster)", "", "| X | s per Hv | s per gradient "
          "| Hv / floor |", "|---|---|---|---|"]
    for k in ("persisted", "zarr_streamed"):
        h = res["hvp"][k]
        L.append(f"| {k} | {h['hvp_s_median']:.4f} | {h['grad_s']:.4f} | "
                 f"{h['hvp_s_median'] / f['floor_hvp_s']:.1f} |")
    d = res["train"][DEFAULT_RUN]
    L += ["", "## Summary", "",
          f"- C = {res['C']:g}, tol = {res['tol']:g} (relative gradient norm).",
          f"- Default solver, X persisted on the LocalCluster: **{d['seconds']:.1f} s**, "
          f"{d['newton_iter']} Newton steps, {d['cg_iter']} Hessian products "
          "(the paper's PRSVM+ C code: 1110 s on its covtype).",
          f"- Seconds per Hessian product: {res['hvp']['persisted']['hvp_s_median']:.3f} "
          f"persisted = {res['hvp']['persisted']['hvp_s_median'] / f['floor_hvp_s']:.2f}x the "
          f"floor ({f['floor_hvp_s']:.3f} s: numpy's X v then X^T u, 2 threads, one process); "
          f"streamed from Zarr {res['hvp']['zarr_streamed']['hvp_s_median']:.3f} s.",
          f"- Persisted and streamed solutions agree to "
          f"{res.get('persisted_vs_streamed_max_rel_diff', float('nan')):.1e} (max relative).",
          ]
    if "test_auc" in res:
        L.append(f"- Test AUC of the default solution: {res['test_auc']:.4f}.")
    L += ["", "## Training", "", "| run | seconds | Newton | CG (Hv) | line-search steps | "
          "passes over X | objective | rel. grad |", "|---|---|---|---|---|---|---|---|"]
    for k, t in res["train"].items():
        L.append(f"| {k} | {t['seconds']:.2f} | {t['newton_iter']} | {t['cg_iter']} | "
                 f"{t['ls_steps']} | {t['passes_over_X']} | {t['objective']:.10g} | "
                 f"{t['rel_grad_norm']:.2e} |")
    lb = res["lbfgs"]
    reached = ("reached the same relative gradient norm" if lb["reached_tol"] else
               f"stopped by its {lb['time_limit_s']:g} s limit at relative gradient norm "
               f"{lb['rel_grad_norm']:.2e}, so the ratios below are upper bounds")
    L += ["", f"scipy L-BFGS-B, exact gradient, one process: {lb['seconds']:.2f} s, "
          f"{lb['iterations']} iterations, {lb['function_evals']} evaluations "
          f"({lb['passes_over_X']} passes), objective {lb['objective']:.10g}; it {reached}. "
          f"Time ratio Newton / L-BFGS: {res['ratio_newton_over_lbfgs']:.2f} (persisted on the "
          f"LocalCluster), {res['ratio_newton_threaded_over_lbfgs']:.2f} (in-process, threaded "
          "scheduler).",
          "", "## Per-chunk products on float32 (one thread)", "", "| kernel | seconds | "
          "relative error |", "|---|---|---|"]
    k = res["kernels"]
    for name in ("numba_f64acc_Xv", "numba_f64acc_XTu", "blas_sgemv_Xv", "blas_sgemv_XTu"):
        L.append(f"| {name} | {k[name + '_s']:.4f} | {k[name + '_relerr']:.1e} |")
    L.append(f"| cast_then_dgemv_XTu | {k['cast_then_dgemv_XTu_s']:.4f} | - |")
    if "ijcnn1" in res:
        ij = res["ijcnn1"]
        L += ["", "## ijcnn1 sanity run (linear RankSVM, standardized, official test file)", "",
              f"C=1: test AUC {ij['C1_test_auc']:.4f}, fit {ij['C1_fit_s']:.2f} s, "
              f"{ij['C1_newton_iter']} Newton steps. 3-fold CV over {len(ij['cv_grid'])} values "
              f"of C ({ij['cv_s']:.1f} s): best C={ij['best_C']:g}, test AUC "
              f"{ij['best_test_auc']:.4f} (paper: {ij['paper_test_auc']}). Below the paper's "
              "grid (cold fits): " + ", ".join(f"C={k}: {v:.4f}"
                                               for k, v in ij["below_grid_test_auc"].items())
              + ".", ""]
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = Parser(__doc__, quick="50,000 x 200 random float32")
    ap.add_argument("--embedding", help="a daskauc embedding (or dataset) store to train on")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--r", type=int, default=None)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--test-embedding", help="a test store: report the test AUC of the model")
    ap.add_argument("--lbfgs-seconds", type=float, default=900.0,
                    help="time limit of the L-BFGS comparison")
    ap.add_argument("--chunk-rows", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ijcnn1", action="store_true", help="also the ijcnn1 sanity run")
    args = ap.parse_args(argv)

    import dask
    import dask.array as da
    import zarr
    from distributed import Client, LocalCluster

    from daskauc import _config

    tmp = tempfile.mkdtemp(prefix="daskauc-bench-newton-")
    try:
        if args.embedding:
            from daskauc.store.dataset import open_dataset

            ds = open_dataset(args.embedding)
            zpath = args.embedding
            Xs, ys = ds.X, ds.y
            X, y = Xs.compute(), ys.compute()
            data = f"embedding store {args.embedding}: {X.shape[0]} x {X.shape[1]} {X.dtype}"
        else:
            n = args.n or (50_000 if args.quick else 464_809)
            r = args.r or (200 if args.quick else 1600)
            X, y = _synthetic(n, r, args.seed)
            data = f"random float32 {n} x {r}, {int((y > 0).sum())} positives"
            rows = args.chunk_rows or _config.chunk_rows_for(r, 4, n)
            zpath = os.path.join(tmp, "X.zarr")
            z = zarr.create_array(zpath, shape=X.shape, chunks=(rows, r), dtype=X.dtype,
                                  compressors=None)
            z[:] = X
            Xs = da.from_zarr(zpath)
        print(data, flush=True)
        blas = machine_info()["blas"]
        print("BLAS:", blas, flush=True)
        res = {"mode": "quick" if args.quick else "full", "data": data,
               "command": command("benchmarks.newton", argv),
               "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                           "workers": args.workers, "python": platform.python_version(),
                           "blas": blas},
               "C": args.C, "tol": args.tol}
        res["floors"] = _floors(X)
        print("floors", res["floors"], flush=True)
        res["kernels"] = _kernels(X)
        print("kernels", res["kernels"], flush=True)

        with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                          dashboard_address=None, processes=True) as cluster, \
                Client(cluster):
            Xp = dask.persist(Xs)[0]
            # the streamed runs need keys of their own: with Xs's keys the scheduler would
            # hand back the persisted chunks instead of reading the store
            Xs = da.from_zarr(zpath, component="X" if args.embedding else None,
                              chunks=Xs.chunks, name=f"bench-stream-{uuid.uuid4().hex}")
            res["hvp"] = {"persisted": _hvp_seconds(Xp, y, args.C, args.repeat),
                          "zarr_streamed": _hvp_seconds(Xs, y, args.C, args.repeat)}
            print("hvp", res["hvp"], flush=True)
            train = {}
            _train(Xp, y, args.C, args.tol, max_iter=1)  # warm-up (caches, first persist)
            variants = {  # name -> (X, keyword arguments); the first is the default solver
                DEFAULT_RUN: (Xp, {}),
                "zarr streamed exact cg_tol=0.1": (Xs, {"persist": False}),
                "persisted armijo cg_tol=0.1": (Xp, {"line_search": "armijo"}),
                "persisted exact cg_tol=0.01": (Xp, {"cg_tol": 1e-2}),
                "persisted exact cg_tol=0.1, no preconditioner": (Xp, {"precondition": False}),
            }
            if args.quick:
                variants["persisted exact cg_tol=0.001"] = (Xp, {"cg_tol": 1e-3})
            for key, (Xv, kw) in variants.items():
                print("training:", key, flush=True)
                train[key] = _train(Xv, y, args.C, args.tol, **kw)
            for k, t in train.items():
                print(k, {a: b for a, b in t.items() if a != "coef"}, flush=True)
            w_p = train[DEFAULT_RUN]["coef"]
            w_s = train["zarr streamed exact cg_tol=0.1"]["coef"]
            if args.test_embedding:
                from daskauc.metrics import roc_auc
                from daskauc.store.dataset import open_dataset

                te = open_dataset(args.test_embedding)
                res["test_auc"] = float(roc_auc(te.y, te.X @ w_p.astype(te.X.dtype)))
                print("test AUC", res["test_auc"], flush=True)
            res["persisted_vs_streamed_max_rel_diff"] = float(
                np.abs(w_p - w_s).max() / np.abs(w_p).max())
            for t in train.values():
                t.pop("coef")
            res["train"] = train
        with dask.config.set(scheduler="threads"):
            print("training: in-process", flush=True)
            t = _train(X, y, args.C, args.tol)
            t.pop("coef")
            res["train"][IN_PROCESS_RUN] = t
        print("L-BFGS", flush=True)
        res["lbfgs"] = _lbfgs(X, y, args.C, args.tol, args.lbfgs_seconds)
        print("lbfgs", res["lbfgs"], flush=True)
        res["ratio_newton_over_lbfgs"] = (res["train"][DEFAULT_RUN]["seconds"]
                                          / res["lbfgs"]["seconds"])
        res["ratio_newton_threaded_over_lbfgs"] = (res["train"][IN_PROCESS_RUN]["seconds"]
                                                   / res["lbfgs"]["seconds"])
        if args.ijcnn1:
            with dask.config.set(scheduler="threads"):
                res["ijcnn1"] = _ijcnn1(2.0 ** np.arange(-15, 11, 5 if args.quick else 1))
            print("ijcnn1", res["ijcnn1"], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    write_json(args.out, "newton", res, indent=1)
    write_markdown(args.out, "newton", _markdown(res))
    print(_markdown(res))


if __name__ == "__main__":
    main()
