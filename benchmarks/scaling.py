"""The scaling benchmark suite: weak scaling in rows, strong scaling in workers, a cost model,
and the single-machine baselines, all on one covtype-like synthetic job (``_synthetic.py``).

The job is what a user runs: ingest a CSV into a Zarr store, fit the scaler, fit 512 k-means
landmarks, map and write the embedding (and, to measure the write, the same map with the
writes left out), then one NSAUC epoch (streamed, one chain per worker
thread), one LSAUC statistics pass, one Newton Hessian product (``persist="auto"``: what fits
in half the workers' memory is kept, the rest streamed) and the exact AUC of a linear score.
Each stage is timed, with the peak resident memory of every worker process sampled every
0.1 s and a check that no worker was restarted. Sizes are reported as a fraction of the
cluster's memory, as the coiled benchmarks do.

Steps (each appends to ``bench-data/scaling/results.json``, so a long run can be resumed)::

    python -m benchmarks.scaling weak       # 0.5M 1M 2M 4M 8M rows on 2 workers x 1.75 GiB
    python -m benchmarks.scaling strong     # 1M rows: 1 worker, 2 workers, 1 worker x 2 threads
    python -m benchmarks.scaling baselines  # scikit-learn, xgboost and xgboost.dask, same data
    python -m benchmarks.scaling report     # cost model, tables and plots -> docs/benchmarks/

Run it alone on the machine: it measures time.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

import numpy as np

from benchmarks import _synthetic
from benchmarks._harness import (
    CACHE_DIR,
    Parser,
    WorkerMemory,
    floors,
    md_table,
    rounded,
    write_results,
)

OUT = os.path.join(CACHE_DIR, "scaling")
RESULTS = os.path.join(OUT, "results.json")
SIZES = (500_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000)
LANDMARKS = 512
TEST_ROWS = 200_000
TRAIN_SEED, TEST_SEED = 0, 1
STAGES = ("ingest", "scaler", "kmeans", "map", "embed", "nsauc_epoch", "lsauc_pass",
          "newton_hv", "exact_auc")
#: bytes each stage reads or writes per row (float32; d = 54 raw features, r <= LANDMARKS)
#: and flops per row, for the rates and the cost model
D = _synthetic.N_FEATURES


def _load() -> dict:
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            return json.load(f)
    return {"runs": [], "baselines": [], "floors": []}


def _save(res: dict) -> None:
    os.makedirs(OUT, exist_ok=True)
    with open(RESULTS + ".tmp", "w") as f:
        json.dump(res, f, indent=1, default=float)
    os.replace(RESULTS + ".tmp", RESULTS)


def _cluster(workers: int, threads: int, memory: str):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, memory_limit=memory,
                           dashboard_address=None, processes=True)
    return cluster, Client(cluster)


def _stage(client, record: dict, name: str, fn):
    """Run ``fn()`` as stage ``name``: seconds, peak worker memory, restarts."""
    with WorkerMemory(client) as mem:
        t = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t
    record["stages"][name] = {"seconds": seconds, "peak_worker_gib": mem.peak_gib,
                              "restarted": mem.restarted}
    print(f"  {name:12s} {seconds:8.2f} s  peak worker {mem.peak_gib:5.2f} GiB"
          f"{'  RESTARTED ' + str(mem.restarted) if mem.restarted else ''}", flush=True)
    return out


def run_job(n: int, workers: int, threads: int, memory: str, label: str) -> dict:
    """One job of ``n`` training rows on a fresh LocalCluster; returns its record."""
    import dask

    from daskauc import KMeansNystroem, StandardScaler, ingest, open_dataset, roc_auc
    from daskauc.solvers.nsauc import pairwise_hinge_sgd
    from daskauc.solvers.stats import class_statistics

    work = os.path.join(OUT, f"{label}-{n}")
    os.makedirs(work, exist_ok=True)
    csv = _synthetic.write_csv(os.path.join(OUT, f"train-{n}.csv"), TRAIN_SEED, n)
    test_csv = _synthetic.write_csv(os.path.join(OUT, f"test-{TEST_ROWS}.csv"), TEST_SEED,
                                    TEST_ROWS)
    cluster, client = _cluster(workers, threads, memory)
    info = client.scheduler_info(n_workers=-1)["workers"]
    total_mem = sum(w["memory_limit"] for w in info.values())
    record = {"label": label, "n": n, "workers": workers, "threads": threads,
              "memory_per_worker": memory, "cluster_memory_gib": total_mem / 2**30,
              "embedding_gib": n * LANDMARKS * 4 / 2**30, "stages": {},
              "load_average_start": os.getloadavg(), "csv_bytes": os.path.getsize(csv)}
    record["embedding_fraction_of_memory"] = record["embedding_gib"] * 2**30 / total_mem
    pids = client.run(os.getpid)  # a worker restarted anywhere in the job changes its pid
    print(f"{label}: {n:,} rows, {workers} worker(s) x {threads} thread(s) x {memory}, "
          f"embedding {record['embedding_gib']:.1f} GiB = "
          f"{record['embedding_fraction_of_memory']:.2f} x cluster memory", flush=True)
    try:
        train = os.path.join(work, "train.zarr")
        test = os.path.join(work, "test.zarr")
        emb, emb_test = os.path.join(work, "emb.zarr"), os.path.join(work, "emb-test.zarr")
        _stage(client, record, "ingest",
               lambda: ingest(csv, train, format="csv", label_column=0, overwrite=True))
        ingest(test_csv, test, format="csv", label_column=0, overwrite=True)
        ds = open_dataset(train)
        scaler = _stage(client, record, "scaler", lambda: StandardScaler().fit(ds.X))
        fmap = _stage(client, record, "kmeans", lambda: KMeansNystroem(
            LANDMARKS, random_state=0).fit(scaler.transform(ds.X)))
        record["r"] = int(fmap.n_components_)
        _stage(client, record, "map", lambda: _map_only(fmap, scaler, train))
        _stage(client, record, "embed",
               lambda: fmap.write_embedding(train, emb, scaler=scaler, overwrite=True))
        fmap.write_embedding(test, emb_test, scaler=scaler, overwrite=True)
        E, Et = open_dataset(emb), open_dataset(emb_test)

        state = {}

        def nsauc_epoch():
            res = pairwise_hinge_sgd(E.X, E.y, lam=1e-8, n_epochs=1, n_chains="auto",
                                     random_state=0, state=state.get("s"))
            state["s"], state["coef"] = res.state, res.coef
            return res

        nsauc_epoch()  # the first epoch (eta0 search, caches) is not timed
        _stage(client, record, "nsauc_epoch", nsauc_epoch)
        Xte, yte = Et.X.compute(), Et.y.compute()
        record["nsauc_test_auc_2_epochs"] = float(roc_auc(yte, Xte @ state["coef"]))
        _stage(client, record, "lsauc_pass", lambda: class_statistics(E.X, E.y))
        w = state["coef"]
        _newton_product(client, record, E, w)
        scores = E.X @ w
        _stage(client, record, "exact_auc", lambda: roc_auc(E.y, scores))
        record["load_average_end"] = os.getloadavg()
        now = client.run(os.getpid)
        record["workers_restarted_in_job"] = sorted(w for w in pids if now.get(w) != pids[w])
        record["scheduler_overhead_s"] = _task_overhead(client)
    finally:
        client.close()
        cluster.close()
        dask.config.refresh()
        shutil.rmtree(work, ignore_errors=True)
    return record


def _map_discard(Xb, *, args, rows):
    from daskauc.embed.nystroem import _nystroem_block

    for s in range(0, Xb.shape[0], rows):
        _nystroem_block(Xb[s : s + rows], *args)
    return np.zeros(1)


def _map_only(fmap, scaler, train: str) -> None:
    """The embedding's map alone: the same tasks as ``write_embedding`` (one per input chunk,
    output chunks mapped one at a time) with the writes left out, results discarded."""
    import dask.array as da

    from daskauc import _config, open_dataset
    from daskauc.embed.embedding_store import _scaler_stats, _write_chunking

    Xd = open_dataset(train).X.astype(np.float32)
    rows = _config.chunk_rows_for(fmap.n_components_, 4, Xd.shape[0])
    rows, Xd = _write_chunking(Xd, rows, exact=False)
    args = fmap._block_args(Xd.dtype, *_scaler_stats(scaler, Xd.shape[1]))
    out = da.map_blocks(_map_discard, Xd, args=args, rows=rows, chunks=((1,) * Xd.numblocks[0],),
                        drop_axis=1, dtype=float, token="daskauc-nystroem-map-only")
    out.sum().compute()


def _newton_product(client, record: dict, E, w: np.ndarray) -> None:
    """Time one Hessian product of NBAUC's Newton solver at ``w`` (``persist="auto"``: the
    rows that fit in half the workers' memory kept there, the rest streamed); the cached rows
    are released afterwards."""
    from daskauc.engine.placement import place_rows
    from daskauc.solvers.pairwise import PairwiseOperator

    Xp, cached = place_rows(E.X, "auto")
    op = PairwiseOperator(Xp, E.y.compute(), 1e-3, cached=cached)
    record["newton_cached_fraction"] = op.rows.cached_rows / record["n"]
    _, handle, _ = op.scores_and_gradient(w, (op.pos, op.neg), False)
    p = np.random.default_rng(0).standard_normal(w.shape[0])
    op.hessian_product(handle, p)  # warm: the cached rows are in memory by now
    _stage(client, record, "newton_hv", lambda: op.hessian_product(handle, p))


def _noop(i):
    return i


def _task_overhead(client, n: int = 2000) -> float:
    """Seconds of scheduler time per task: n trivial tasks on the cluster, best of 3."""
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        client.gather(client.map(_noop, range(n), pure=False))
        best = min(best, time.perf_counter() - t)
    return best / n


# --------------------------------------------------------------------------- the steps


def weak(args) -> None:
    res = _load()
    res["floors"].append(floors(directory=OUT))
    _save(res)
    for n in args.sizes:
        rec = run_job(n, 2, 1, args.memory, "weak")
        res = _load()
        res["runs"] = [r for r in res["runs"] if not (r["label"] == "weak" and r["n"] == n)]
        res["runs"].append(rec)
        _save(res)


def strong(args) -> None:
    n = args.rows
    total = _bytes(args.memory) * 2
    for workers, threads, label in ((1, 1, "strong-1x1"), (2, 1, "strong-2x1"),
                                    (1, 2, "strong-1x2")):
        rec = run_job(n, workers, threads, f"{total // workers}B", label)
        res = _load()
        res["runs"] = [r for r in res["runs"] if not (r["label"] == label and r["n"] == n)]
        res["runs"].append(rec)
        _save(res)


def _bytes(s: str) -> int:
    from dask.utils import parse_bytes

    return int(parse_bytes(s))


def baselines(args) -> None:
    """scikit-learn's HistGradientBoostingClassifier and xgboost (2 threads, one process) on
    the raw rows in memory, xgboost.dask on a 2-worker LocalCluster reading the same CSV
    through daskauc's store, each with its test AUC on the same 200,000 test rows."""
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    Xte, yte = _synthetic.rows(TEST_SEED, TEST_ROWS)
    for n in args.sizes:
        X, y = _synthetic.rows(TRAIN_SEED, n)
        y01 = (y > 0).astype(np.int8)
        rows = []
        t = time.perf_counter()
        hgb = HistGradientBoostingClassifier(max_iter=200, early_stopping=False,
                                             random_state=0).fit(X, y01)
        rows.append({"method": "scikit-learn HistGradientBoosting (200 iter)", "n": n,
                     "seconds": time.perf_counter() - t,
                     "test_auc": roc_auc_score(yte, hgb.decision_function(Xte))})
        t = time.perf_counter()
        booster = xgb.XGBClassifier(n_estimators=200, max_depth=8, tree_method="hist",
                                    n_jobs=2).fit(X, y01)
        rows.append({"method": "xgboost hist (200 rounds, depth 8, 2 threads)", "n": n,
                     "seconds": time.perf_counter() - t,
                     "test_auc": roc_auc_score(yte, booster.predict_proba(Xte)[:, 1])})
        del X, y, y01, hgb, booster
        try:
            rows.append(_xgboost_dask(n, args.memory, Xte, yte))
        except ImportError as exc:  # xgboost.dask needs dask.dataframe (pandas, pyarrow)
            rows.append({"method": "xgboost.dask", "n": n, "seconds": None,
                         "test_auc": None, "error": f"not installed: {exc}"})
        except Exception as exc:  # noqa: BLE001 - a baseline that fails is a result too
            # (xgboost.dask holds its whole training matrix in the workers' memory: at 8M
            # rows two 1.75 GiB workers were killed and xgboost cannot resume)
            rows.append({"method": f"xgboost.dask hist (2 workers x 1 thread x {args.memory})",
                         "n": n, "seconds": None, "test_auc": None,
                         "error": f"{type(exc).__name__}: {str(exc)[:160]}"})
        for r in rows:
            r["load_average"] = os.getloadavg()
            print(r, flush=True)
        res = _load()
        res["baselines"] = [b for b in res["baselines"] if b["n"] != n] + rows
        _save(res)


def _xgboost_dask(n: int, memory: str, Xte, yte) -> dict:
    import xgboost as xgb
    import xgboost.dask  # noqa: F401  (not imported by ``import xgboost``)
    from sklearn.metrics import roc_auc_score

    from daskauc import ingest, open_dataset

    csv = _synthetic.write_csv(os.path.join(OUT, f"train-{n}.csv"), TRAIN_SEED, n)
    store = os.path.join(OUT, f"xgb-{n}.zarr")
    ingest(csv, store, format="csv", label_column=0, overwrite=True)
    cluster, client = _cluster(2, 1, memory)
    try:
        ds = open_dataset(store)
        t = time.perf_counter()
        dtrain = xgb.dask.DaskQuantileDMatrix(client, ds.X, (ds.y > 0).astype(np.int8))
        out = xgb.dask.train(client, {"tree_method": "hist", "max_depth": 8,
                                      "objective": "binary:logistic", "nthread": 1},
                             dtrain, num_boost_round=200)
        seconds = time.perf_counter() - t
        pred = out["booster"].inplace_predict(Xte.astype(np.float32))
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(store, ignore_errors=True)
    return {"method": "xgboost.dask hist (200 rounds, depth 8, 2 workers x 1 thread)",
            "n": n, "seconds": seconds, "test_auc": roc_auc_score(yte, pred)}


# --------------------------------------------------------------------------- cost model


def _stage_work(stage: str, rec: dict) -> float:
    """Rows the stage processes (its work, in rows; epochs and passes counted)."""
    return float(rec["n"]) * {"newton_hv": 2.0}.get(stage, 1.0)


def fit_cost_model(runs: list[dict]) -> dict:
    """Per stage, ``T = a + o * tasks + c * rows / workers`` by least squares over every run
    (weak and strong), with ``o`` the scheduler's per-task time measured in the runs (the
    scheduler is one process: tasks do not divide by workers) and ``tasks`` the stage's tasks
    (row chunks of 64 MiB). ``a`` is the stage's fixed cost (graph building, client work),
    ``c`` seconds per row per worker. Leave-one-out: each run predicted from the others."""
    model = {}
    for stage in STAGES:
        pts = [(r, r["stages"][stage]["seconds"]) for r in runs if stage in r["stages"]]
        if len(pts) < 3:
            continue
        o = float(np.median([r.get("scheduler_overhead_s", 0.0) for r, _ in pts]))
        A = np.array([[1.0, _stage_work(stage, r) / (r["workers"] * r["threads"])]
                      for r, _ in pts])
        tasks = np.array([_tasks(stage, r) for r, _ in pts])
        b = np.array([t for _, t in pts]) - o * tasks
        coef, *_ = np.linalg.lstsq(A, b, rcond=None)
        loo = []
        for i in range(len(pts)):
            keep = [j for j in range(len(pts)) if j != i]
            ci, *_ = np.linalg.lstsq(A[keep], b[keep], rcond=None)
            pred = float(A[i] @ ci + o * tasks[i])
            loo.append({"n": pts[i][0]["n"], "label": pts[i][0]["label"],
                        "measured": pts[i][1], "predicted": pred,
                        "rel_error": (pred - pts[i][1]) / pts[i][1]})
        model[stage] = {"a_seconds": float(coef[0]), "c_seconds_per_row_per_worker":
                        float(coef[1]), "o_seconds_per_task": o, "loo": loo,
                        "loo_median_abs_rel_error":
                            float(np.median([abs(x["rel_error"]) for x in loo]))}
    return model


def _tasks(stage: str, rec: dict) -> float:
    width = {"ingest": D, "scaler": D, "kmeans": D, "map": D, "embed": D}.get(
        stage, rec.get("r", LANDMARKS))
    rows_per_chunk = max(1_000, min(200_000, 64 * 2**20 // (width * 4)))
    per_pass = -(-rec["n"] // rows_per_chunk)
    return float(per_pass * {"newton_hv": 2, "kmeans": 3}.get(stage, 1))


def predict(model: dict, n: int, workers: int, r: int = LANDMARKS) -> dict:
    rec = {"n": n, "r": r}
    out = {}
    for stage, m in model.items():
        t = (m["a_seconds"] + m["o_seconds_per_task"] * _tasks(stage, rec)
             + m["c_seconds_per_row_per_worker"] * _stage_work(stage, rec) / workers)
        out[stage] = max(t, 0.0)
    out["total"] = sum(out.values())
    return out


# --------------------------------------------------------------------------- report


def report(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = _load()
    runs = res["runs"]
    weak_runs = sorted((r for r in runs if r["label"] == "weak"), key=lambda r: r["n"])
    strong_runs = [r for r in runs if r["label"].startswith("strong")]
    model = fit_cost_model(runs)
    lines = ["# Scaling: weak in rows, strong in workers, a cost model, and the baselines", "",
             "`python -m benchmarks.scaling weak|strong|baselines|report` (benchmarks/scaling.py; "
             "data: benchmarks/_synthetic.py, covtype-like, 54 integer features, 10% positives, "
             f"a nonlinear boundary). {LANDMARKS} k-means landmarks; NSAUC one chain per "
             "worker thread, streamed; Newton `persist=\"auto\"`. LocalCluster worker "
             "processes on this machine (2 cores); memory is each worker's peak resident "
             "memory sampled every 0.1 s.", ""]
    if res["floors"]:
        f = res["floors"][-1]
        lines += ["## Floors measured in the run (best of 5)", "",
                  md_table([{"quantity": k, "value": (f"{v / 1e9:.2f} G" if isinstance(
                      v, float) else str(v))} for k, v in f.items()]), ""]
    table = []
    for r in weak_runs:
        for s in STAGES:
            st = r["stages"].get(s)
            if st is None:
                continue
            rows_s = _stage_work(s, r) / st["seconds"] / (r["workers"] * r["threads"])
            table.append({"rows": f"{r['n']:,}", "embedding / memory":
                          f"{r['embedding_fraction_of_memory']:.2f}", "stage": s,
                          "seconds": round(st["seconds"], 2),
                          "rows/s/worker": f"{rows_s:,.0f}",
                          "peak worker GiB": round(st["peak_worker_gib"], 2),
                          "restarted": ",".join(st["restarted"]) or "none"})
    if table:
        lines += ["## Weak scaling in rows (2 workers x 1 thread)", "", md_table(table), ""]
        lines += ["- Workers restarted anywhere in the job (between stages too): " + ", ".join(
            f"{r['n']:,} rows {len(r.get('workers_restarted_in_job', [])) or 'none'}"
            for r in weak_runs)]
        lines += ["- NSAUC test AUC after 2 epochs: " + ", ".join(
            f"{r['n']:,} rows {r['nsauc_test_auc_2_epochs']:.4f}" for r in weak_runs)]
        lines += ["- Newton's rows kept in memory (`persist=\"auto\"`, the rest streamed): "
                  + ", ".join(f"{r['n']:,} rows {100 * r.get('newton_cached_fraction', 0):.1f}%"
                              for r in weak_runs), ""]
        write_floor = (res["floors"][-1].get("file_write_new") if res["floors"] else None)
        wrows = []
        for r in weak_runs:
            st = r["stages"]
            if "map" not in st or "embed" not in st:
                continue
            written = r["n"] * r.get("r", LANDMARKS) * 4
            extra = st["embed"]["seconds"] - st["map"]["seconds"]
            wrows.append({"rows": f"{r['n']:,}", "map s": round(st["map"]["seconds"], 2),
                          "embed (map + write) s": round(st["embed"]["seconds"], 2),
                          "embed / map": round(st["embed"]["seconds"] / st["map"]["seconds"],
                                               2),
                          "GB written": round(written / 1e9, 2),
                          "write GB/s (embed - map)": round(written / extra / 1e9, 2)
                          if extra > 0 else "-",
                          "peak worker GiB (embed)": round(st["embed"]["peak_worker_gib"], 2)})
        if wrows:
            lines += ["### The embedding write against the map alone", "",
                      "`map` runs the same tasks as `embed` with the writes left out. The "
                      "write's own rate is the bytes written over the time it adds; the "
                      "page-cache floor measured in the run (1 GiB file) is "
                      + (f"{write_floor / 1e9:.2f} GB/s" if write_floor else "not measured")
                      + "; beyond the machine's dirty-page limits the disk's own rate applies.",
                      "", md_table(wrows), ""]
    if strong_runs:
        n = strong_runs[0]["n"]
        base = next((r for r in strong_runs if r["label"] == "strong-1x1"), None)
        rows = []
        for r in sorted(strong_runs, key=lambda r: r["label"]):
            for s in STAGES:
                if base is None or s not in r["stages"]:
                    continue
                k = r["workers"] * r["threads"]
                sp = base["stages"][s]["seconds"] / r["stages"][s]["seconds"]
                rows.append({"config": r["label"].replace("strong-", ""), "stage": s,
                             "seconds": round(r["stages"][s]["seconds"], 2),
                             "speedup": round(sp, 2), "efficiency": round(sp / k, 2),
                             "peak worker GiB": round(r["stages"][s]["peak_worker_gib"], 2)})
        lines += [f"## Strong scaling ({n:,} rows): 1 worker, 2 workers (processes), "
                  "1 worker x 2 threads", "", md_table(rows), ""]
    if model:
        lines += ["## Cost model", "",
                  "Per stage `T = a + o * tasks + c * rows / workers`: `o` the scheduler's "
                  "time per task measured in each run (one scheduler: tasks do not divide by "
                  "workers), `a` and `c` fitted by least squares over every run. Assumptions: "
                  "workers like these (one core, local disk or page cache at the measured "
                  "rates, a shared filesystem as fast as the local one), data that scales "
                  "linearly with rows, no network bottleneck (the reductions move r-vectors; "
                  "NSAUC merges one r-vector per chain), one scheduler process, and the "
                  "client-side work (sorting n scores for Newton and the AUC) in `a` and "
                  "`c` as measured here; it is linear in n and does not divide by workers, "
                  "so the predictions for many workers are optimistic for those stages.", "",
                  md_table([{"stage": s, "a (s)": round(m["a_seconds"], 3),
                             "c (us/row/worker)": round(1e6 * m["c_seconds_per_row_per_worker"],
                                                        3),
                             "o (ms/task)": round(1e3 * m["o_seconds_per_task"], 3),
                             "leave-one-out median |error|":
                                 f"{100 * m['loo_median_abs_rel_error']:.0f}%"}
                            for s, m in model.items()]), ""]
        preds = []
        for n in (8_000_000, 100_000_000):
            for w in (2, 8, 32, 128):
                p = predict(model, n, w)
                preds.append({"rows": f"{n:,}", "workers": w,
                              **{s: round(p[s], 1) for s in model},
                              "total (s)": round(p["total"], 1)})
        lines += ["### Predictions", "", md_table(preds), ""]
    if res["baselines"]:
        lines += ["## Single-machine baselines (same data, same 200,000 test rows)", "",
                  md_table(rounded(sorted(res["baselines"], key=lambda b: b["n"]), 4,
                                   drop=("load_average",)),
                           ["method", "n", "seconds", "test_auc", "error"]), ""]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for s in STAGES:
        pts = [(r["n"], r["stages"][s]["seconds"]) for r in weak_runs if s in r["stages"]]
        if pts:
            axes[0].loglog(*zip(*pts, strict=True), marker="o", label=s)
            axes[1].semilogx([n for n, _ in pts],
                             [n * (2.0 if s == "newton_hv" else 1.0) / t / 2
                              for n, t in pts], marker="o", label=s)
    axes[0].set(title="weak scaling: seconds per stage", xlabel="training rows",
                ylabel="seconds")
    axes[1].set(title="rows / s / worker", xlabel="training rows", yscale="log")
    axes[0].legend(fontsize=8)
    peaks = [(r["n"], max(st["peak_worker_gib"] for st in r["stages"].values()))
             for r in weak_runs]
    if peaks:
        axes[2].semilogx(*zip(*peaks, strict=True), marker="o", label="peak worker RSS (any stage)")
        mem = weak_runs[0]["cluster_memory_gib"] / weak_runs[0]["workers"]
        axes[2].axhline(mem, color="grey", linestyle="--", label="memory limit of each worker")
        axes[2].axhline(weak_runs[0]["cluster_memory_gib"], color="black", linestyle=":",
                        label="cluster memory (2 workers)")
        axes[2].semilogx([r["n"] for r in weak_runs],
                         [r["embedding_gib"] for r in weak_runs], marker="s",
                         label="embedding size")
        axes[2].set(title="memory (GiB)", xlabel="training rows", yscale="log")
        axes[2].legend(fontsize=8)
    sizes = [r["n"] for r in weak_runs]
    for ax in axes:
        ax.set_xticks(sizes, [f"{n / 1e6:g}M" for n in sizes])
        ax.minorticks_off()
    fig.tight_layout()
    write_results("scaling", {"runs": runs, "baselines": res["baselines"],
                              "floors": res["floors"], "cost_model": model},
                  "\n".join(lines), figure=fig, out=args.out)


def main(argv=None) -> int:
    # no --quick and no --seed: every run appends to one results.json that the report reads
    ap = Parser(__doc__, seed=None)
    ap.add_argument("step", choices=("weak", "strong", "baselines", "report"))
    ap.add_argument("--sizes", type=lambda s: [int(float(x)) for x in s.split(",")],
                    default=list(SIZES))
    ap.add_argument("--rows", type=int, default=1_000_000, help="strong scaling size")
    ap.add_argument("--memory", default="1.75GiB",
                    help="memory limit of each worker (8M rows: embedding 4.4x the cluster's)")
    args = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    {"weak": weak, "strong": strong, "baselines": baselines, "report": report}[args.step](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
