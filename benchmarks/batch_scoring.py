"""Batch scoring (``daskauc.write_scores`` / ``daskauc predict``) on covtype's test rows and on
a store larger than the workers' memory: rows/s against the model's own ``decision_function``
on an in-memory array, peak worker memory, and the written scores against it.

Protocol:

* covtype (``_harness.load_dataset``: stratified 80/20 split, seed 0), the 116,203 test rows
  as float32, written once as a dataset store (``--chunk-rows`` rows a chunk) and as a Parquet
  file (row groups of the same size);
* two models, cached in ``bench-data/batch_scoring/``: NSAUC with its defaults fitted on a
  stratified ``--train-rows`` subsample of the training rows (the 1,600-landmark map inside
  the model: scoring is compute-bound), and a linear ``PairwiseHingeSGD`` (2 epochs) on
  the raw features of the same rows (scoring is read- and write-bound);
* the in-memory floor: ``model.decision_function(X_test)`` on the numpy array in this process
  (BLAS on every core), best of ``--repeat``; then ``write_scores`` on a LocalCluster of
  ``--workers`` single-threaded workers (store -> Zarr, store -> Parquet, Parquet ->
  Parquet), best of ``--repeat``, each worker's peak resident memory sampled every 0.1 s;
  the written scores read back with zarr / pyarrow and compared with the in-memory
  ``decision_function`` and ``predict_proba``;
* out of core: a synthetic store of ``--large-rows`` x 54 float32 (a dask array written by
  ``daskauc.ingest_array``; 4.3 GB for 20 million rows) scored by the linear model on a
  LocalCluster of ``--workers`` workers x ``--large-memory-limit`` (1 GiB: the store is twice
  the cluster's memory; a worker holds about 0.35 GiB with daskauc loaded, so 400 MiB workers
  are paused by distributed before any data, which ``check_worker_memory`` refuses), to
  Parquet, with the workers' peak memory (and at rest, daskauc loaded) and restarts.

Run it alone on the machine, under the shared lock (the machine has 2 cores)::

    flock /tmp/daskauc-bench.lock python -m benchmarks.batch_scoring [--quick]

Writes docs/benchmarks/batch_scoring.{json,md}.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile

import numpy as np

from benchmarks._harness import (
    CACHE_DIR,
    Parser,
    WorkerMemory,
    best_of,
    command,
    load_dataset,
    md_table,
    stratified_rows,
    timed,
    write_results,
)

CACHE = os.path.join(CACHE_DIR, "batch_scoring")


def _model(name: str, Xtr, ytr, train_rows: int, seed: int):
    """The cached model ``name`` (fitted and saved on first use), and its fit seconds."""
    from daskauc import NSAUC, PairwiseHingeSGD, load_model, save_model

    path = os.path.join(CACHE, f"{name}-{train_rows}-seed{seed}")
    if os.path.exists(path):
        return load_model(path), path, None
    idx = stratified_rows(ytr, train_rows, seed)
    est = NSAUC(random_state=seed) if name == "nsauc" else \
        PairwiseHingeSGD(n_epochs=2, random_state=seed)
    _, seconds = timed(est.fit, Xtr[idx], ytr[idx])
    save_model(est, path)
    return est, path, seconds


def _inputs(Xte, yte, rows: int) -> tuple[str, str]:
    """The test rows as a dataset store and as a Parquet file (cached)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from daskauc import ingest_array

    store = os.path.join(CACHE, f"covtype-test-{rows}.zarr")
    parquet = os.path.join(CACHE, f"covtype-test-{rows}.parquet")
    if not os.path.exists(store):
        ingest_array(Xte, yte, store, chunk_rows=rows)
    if not os.path.exists(parquet):
        table = pa.table({f"f{j}": Xte[:, j] for j in range(Xte.shape[1])})
        pq.write_table(table, parquet + ".tmp", row_group_size=rows)
        os.replace(parquet + ".tmp", parquet)
    return store, parquet


def _read_back(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if path.endswith(".zarr"):
        import zarr

        g = zarr.open_group(path, mode="r")
        return g["id"][:], g["decision_function"][:], g["probability"][:]
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    return (t.column("id").to_numpy(), t.column("decision_function").to_numpy(),
            t.column("probability").to_numpy())


def _by_blocks(est, X, model: str, source: str, work: str) -> tuple[np.ndarray, int]:
    """``est.decision_function`` in memory in the blocks of rows the tasks of
    ``write_scores(model, source, ...)`` score (each chunk in blocks of the scorer's rows),
    on one BLAS thread as the workers: BLAS sums a product in an order that depends on the
    block's shape and on its threads, so only these are the tasks' scores bit for bit.
    Also the rows of a chunk."""
    from threadpoolctl import threadpool_limits

    from daskauc.scoring import plan_scores

    plan = plan_scores(model, source, os.path.join(work, "plan.zarr"))
    block = plan.scorer.block_rows
    with threadpool_limits(1):
        return np.concatenate([est.decision_function(X[b:min(stop, b + block)])
                               for a, stop in plan.input.bounds
                               for b in range(a, stop, block)]), plan.input.rows


def _cluster(workers: int, memory_limit):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, memory_limit=memory_limit,
                           dashboard_address=None)
    return cluster, Client(cluster)


def covtype_rows(args, work: str) -> list[dict]:
    """Every (model, route) on covtype's test rows: rows/s, memory, equality. The routes
    take turns, round after round (a burst of load on the shared machine then slows one
    round of each, not every run of one), and each keeps its fastest round."""
    from daskauc import roc_auc, write_scores

    Xtr, ytr, Xte, yte, _ = load_dataset("covtype")
    Xte = np.ascontiguousarray(Xte, dtype=np.float32)
    store, parquet = _inputs(Xte, yte, args.chunk_rows)
    routes = ((store, "zarr"), (store, "parquet"), (parquet, "parquet"))
    rows = []
    cluster, client = _cluster(args.workers, args.memory_limit)
    try:
        client.run(lambda: __import__("daskauc"))  # imports outside the timings
        for name in args.models.split(","):
            est, path, fit_s = _model(name, Xtr, ytr, args.train_rows, args.seed)
            best = {route: np.inf for route in (None, *routes)}
            peak = dict.fromkeys(routes, 0)
            for _ in range(args.repeat):
                t_mem, d_ref = best_of(lambda est=est: est.decision_function(Xte), 1)
                best[None] = min(best[None], t_mem)
                for src, fmt in routes:
                    out = os.path.join(work, f"{name}-{os.path.basename(src)}.{fmt}")
                    with WorkerMemory(client, interval=0.1) as mem:
                        done = write_scores(path, src, out, overwrite=True)
                    best[src, fmt] = min(best[src, fmt], done.seconds)
                    peak[src, fmt] = max(peak[src, fmt], max(mem.peak.values(), default=0))
            p_ref = est.predict_proba(Xte)[:, 1]
            auc = float(roc_auc(yte, d_ref))
            common = {"model": name, "rows": len(Xte), "test AUC": auc, "fit s": fit_s,
                      "load": os.getloadavg()[0]}
            rows.append({**common, "route": "decision_function, numpy in memory",
                         "seconds": best[None], "rows/s": len(Xte) / best[None],
                         "max diff decision": 0.0, "max diff probability": 0.0,
                         "max diff decision, same blocks": float(np.abs(
                             _by_blocks(est, Xte, path, store, work)[0] - d_ref).max())})
            print(rows[-1], flush=True)
            for src, fmt in routes:
                ids, d, p = _read_back(os.path.join(work, f"{name}-{os.path.basename(src)}"
                                                          f".{fmt}"))
                assert (ids == np.arange(len(Xte))).all()
                d_blocks, chunk_rows = _by_blocks(est, Xte, path, src, work)
                rows.append({
                    **common,
                    "route": f"write_scores {'store' if src == store else 'Parquet'} -> {fmt}",
                    "seconds": best[src, fmt], "rows/s": len(Xte) / best[src, fmt],
                    "chunk rows": chunk_rows, "peak worker MiB": peak[src, fmt] / 2**20,
                    "max diff decision": float(np.abs(d - d_ref).max()),
                    "max diff probability": float(np.abs(p - p_ref).max()),
                    "max diff decision, same blocks": float(np.abs(d - d_blocks).max())})
                print(rows[-1], flush=True)
    finally:
        client.close()
        cluster.close()
    return rows


def out_of_core(args, work: str, linear_path: str) -> dict:
    """The linear model over a synthetic store larger than the cluster's memory."""
    import dask
    import dask.array as da
    from dask.utils import parse_bytes

    from daskauc import ingest_array, load_model, write_scores

    n = args.large_rows
    store = os.path.join(CACHE, f"synthetic-{n}x54.zarr")
    if not os.path.exists(store):
        rng = da.random.default_rng(args.seed)
        X = rng.standard_normal((n, 54), chunks=(args.large_chunk_rows, 54), dtype=np.float32)
        y = (rng.random(n, chunks=args.large_chunk_rows) < 0.5).astype(np.int8)
        with dask.config.set(scheduler="threads"):
            _, seconds = timed(ingest_array, X, y, store, chunk_rows=args.large_chunk_rows)
        print(f"wrote {store} in {seconds:.0f} s", flush=True)
    from daskauc import open_dataset

    ds = open_dataset(store)
    est = load_model(linear_path)
    limit = parse_bytes(args.large_memory_limit)
    out = os.path.join(work, "synthetic-scores.parquet")
    from daskauc.engine.cluster import check_worker_memory

    cluster, client = _cluster(args.workers, args.large_memory_limit)
    try:
        check_worker_memory(client, args.large_memory_limit)  # loads daskauc on the workers
        idle = max(client.run(lambda: __import__("psutil").Process().memory_info().rss
                              ).values())
        with WorkerMemory(client, interval=0.1) as mem:
            done = write_scores(linear_path, store, out)
    finally:
        client.close()
        cluster.close()
    ids, d, _ = _read_back(out)
    cr = args.large_chunk_rows  # the first two chunks, against the model in memory
    check = slice(0, min(n, 2 * cr))
    d_ref = np.concatenate([est.decision_function(ds.X[a:min(n, a + cr)].compute())
                            for a in range(0, check.stop, cr)])
    return {"rows": n, "store GB": ds.X.nbytes / 1e9, "chunk rows": args.large_chunk_rows,
            "workers": args.workers, "memory limit MiB": limit / 2**20,
            "cluster memory GB": args.workers * limit / 1e9, "seconds": done.seconds,
            "rows/s": done.rows_per_second,
            "idle worker MiB": idle / 2**20,
            "peak worker MiB": max(mem.peak.values()) / 2**20,
            "workers restarted": len(mem.restarted),
            "ids in order": bool((ids == np.arange(n)).all()),
            "max diff decision (first 2 chunks)": float(np.abs(d[check] - d_ref).max()),
            "load": os.getloadavg()[0]}


def limit_bytes(args) -> int:
    from dask.utils import parse_bytes

    return parse_bytes(args.large_memory_limit)


def main(argv=None) -> int:
    ap = Parser(__doc__, quick={"models": "linear", "large_rows": 2_000_000, "repeat": 1})
    ap.add_argument("--models", default="nsauc,linear", help="nsauc, linear")
    ap.add_argument("--train-rows", type=int, default=100_000,
                    help="training rows of the models (a stratified subsample)")
    ap.add_argument("--chunk-rows", type=int, default=16_384,
                    help="rows per chunk of the test store and row group of the Parquet file")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="2GiB", help="per worker, covtype runs")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    ap.add_argument("--large-rows", type=int, default=20_000_000,
                    help="rows of the synthetic store (0: skip the out-of-core run)")
    ap.add_argument("--large-chunk-rows", type=int, default=131_072)
    ap.add_argument("--large-memory-limit", default="1GiB", help="per worker")
    ap.add_argument("--workdir", default=None, help="where the scores are written")
    args = ap.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    os.makedirs(CACHE, exist_ok=True)
    work = args.workdir or tempfile.mkdtemp(prefix="daskauc-batch-scoring-")
    load_before = os.getloadavg()
    try:
        rows = covtype_rows(args, work)
        large = None
        if args.large_rows:
            linear = os.path.join(CACHE, f"linear-{args.train_rows}-seed{args.seed}")
            if not os.path.exists(linear):
                _model("linear", *load_dataset("covtype")[:2], args.train_rows, args.seed)
            large = out_of_core(args, work, linear)
            print(large, flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    cols = ["model", "route", "chunk rows", "rows/s", "seconds", "peak worker MiB",
            "max diff decision",
            "max diff probability", "max diff decision, same blocks", "test AUC", "load"]
    md = ["# Batch scoring", "",
          f"`{command('benchmarks.batch_scoring')}`: covtype's {rows[0]['rows']:,} test rows "
          f"(float32) scored by `daskauc.write_scores` on a LocalCluster of {args.workers} "
          f"single-threaded workers ({args.memory_limit} each), from a dataset store "
          f"({args.chunk_rows:,} rows a chunk) or a Parquet file (row groups as large), to "
          "Zarr or Parquet, against the model's own `decision_function` on the numpy array "
          "in this process (BLAS on every core). Best of "
          f"{args.repeat} rounds, the routes taking turns in each; the peak is the largest "
          "worker's resident memory over the runs "
          "(sampled every 0.1 s); the max diff columns compare the written "
          "`decision_function` and `probability` with the in-memory `decision_function` and "
          "`predict_proba(X)[:, 1]` of the whole array (absolute differences), and with "
          "`decision_function` applied in memory to the same blocks of rows as the tasks, on "
          "one BLAS thread as the workers (on the in-memory line: how far the whole array's "
          "differs from that). "
          "NSAUC: defaults, fitted on a stratified "
          f"{args.train_rows:,}-row subsample of the training rows (1,600 landmarks: the map "
          "is inside the model); linear: `PairwiseHingeSGD(n_epochs=2)` on the raw features "
          "of the same rows. The load column is the 1-minute load average at the end of the "
          f"model's rounds (before the run: {load_before[0]:.2f}; the machine is shared, 2 "
          "cores).", "",
          md_table([{c: (int(r[c]) if c == "rows/s" else "-" if r.get(c) is None else r[c])
                     for c in cols} for r in rows], cols), ""]
    for name in args.models.split(","):
        mine = [r for r in rows if r["model"] == name]
        fastest = max(mine[1:], key=lambda r: r["rows/s"])
        md.append(f"- {name}: the fastest route ({fastest['route']}) at "
                  f"{fastest['rows/s'] / mine[0]['rows/s']:.2g} x the rate of "
                  "`decision_function` in memory; the written scores equal to those of the "
                  "same blocks in memory to "
                  f"{max(r['max diff decision, same blocks'] for r in mine[1:]):.2g}.")
    md.append("")
    if large is not None:
        held = large["peak worker MiB"] - large["idle worker MiB"]
        md += ["## Larger than the workers' memory", "",
               f"A synthetic store of {large['rows']:,} x 54 float32 rows "
               f"({large['store GB']:.2f} GB, {large['chunk rows']:,} rows a chunk, written "
               "once by `daskauc.ingest_array` from a dask array) scored by the linear model "
               f"to Parquet on {large['workers']} workers x {args.large_memory_limit} "
               f"({large['cluster memory GB']:.2f} GB in all). `idle worker MiB`: a worker's "
               "resident memory with daskauc loaded, before the run.", "",
               md_table([{k: (int(v) if k == "rows/s" else v) for k, v in large.items()}]),
               "", f"The workers held at most {held:.0f} MiB beyond daskauc itself (a chunk "
               f"is {large['chunk rows'] * 54 * 4 / 2**20:.0f} MiB of float32), reading a "
               f"store {large['store GB'] * 1e9 / (large['workers'] * limit_bytes(args)):.1f}"
               f" times their memory; workers restarted: {large['workers restarted']}.", ""]
    write_results("batch_scoring", {"covtype": rows, "out_of_core": large,
                                    "load_before": load_before, "argv": sys.argv[1:]},
                  "\n".join(md), out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
