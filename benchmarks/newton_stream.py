"""NBAUC's Newton solve out of core: persisted, half cached, fully streamed.

covtype's 1,600-landmark embedding (464,810 x 1,593 float32, 2.96 GB; the store of
``benchmarks/chains.py``), C = 1e-3, tol = 1e-3 (docs/benchmarks/newton.md's setting), on a
LocalCluster of 2 workers x 1 thread:

* persisted: ``persist=True`` (the whole embedding in the workers' memory);
* half cached: ``persist="auto"`` with the memory budget set to half of the embedding, so the
  solver keeps the first half of the rows in memory and streams the rest at every pass;
* streamed: ``persist=False`` (every pass reads every chunk from the store).

Each run reports its time, Newton steps, Hessian products, passes over X and test AUC. The
floor of a streamed run is the raw read time of its passes: every chunk file read with
``readinto`` into a preallocated buffer by the two workers in parallel, best of 3, times the
passes. ``python -m benchmarks.newton_stream`` writes docs/benchmarks/newton_stream.*.
"""

from __future__ import annotations

import os
import sys
import time

from benchmarks._harness import MemorySampler, Parser, best_of, md_table, rounded, write_results
from benchmarks.chains import embeddings

C, TOL = 1e-3, 1e-3


def _read_files(files: list[str]) -> int:
    buf = bytearray(os.path.getsize(files[0])) if files else bytearray()
    total = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            total += fh.readinto(buf)
    return total


def raw_pass_seconds(client, store: str, repeat: int = 3) -> float:
    """Seconds for the workers to read every chunk file of X once, in parallel (cached)."""
    files = sorted(os.path.join(root, f) for root, _, names in os.walk(os.path.join(store, "X"))
                   for f in names if not f.startswith(".") and f != "zarr.json")
    workers = sorted(client.scheduler_info()["workers"])
    shares = [files[k :: len(workers)] for k in range(len(workers))]

    def read_once():
        client.gather([client.submit(_read_files, s, workers=[w], pure=False)
                       for s, w in zip(shares, workers, strict=True)])

    return best_of(read_once, repeat)[0]


def main(argv=None) -> int:
    args = Parser(__doc__, seed=None).parse_args(argv)  # no random draws
    from distributed import Client, LocalCluster

    import daskauc.engine.placement as placement
    import daskauc.solvers.newton as newton
    from daskauc import open_dataset, roc_auc

    train, test = embeddings("covtype")
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="9GiB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        ds, te = open_dataset(train), open_dataset(test)
        y = ds.y.compute()
        Xte, yte = te.X.compute(), te.y.compute()
        raw = raw_pass_seconds(client, train)
        print(f"raw read of one pass (2 workers): {raw:.3f} s", flush=True)
        real_budget = placement.memory_budget
        for mode, persist in (("persisted", True), ("half cached", "auto"),
                              ("streamed", False)):
            if mode == "half cached":
                placement.memory_budget = lambda client=None, working_bytes=0: ds.X.nbytes // 2
            with MemorySampler() as mem:
                t = time.perf_counter()
                res = newton.prsvm_newton(ds.X, y, C=C, tol=TOL, persist=persist)
                seconds = time.perf_counter() - t
            placement.memory_budget = real_budget
            n_hv = sum(h.get("cg_iter", 0) for h in res.history)
            passes = 2 * len(res.history) + 2 * n_hv
            rows.append({"mode": mode, "seconds": seconds, "newton": res.n_iter,
                         "hessian_products": n_hv, "passes": passes,
                         "cached_fraction": res.state["cached_fraction"],
                         "s_per_pass": seconds / passes, "rel_grad": res.history[-1][
                             "rel_grad_norm"], "objective": res.history[-1]["objective"],
                         "test_auc": float(roc_auc(yte, Xte @ res.coef)),
                         "peak_worker_gib": mem.peak_workers / 2**30,
                         "load_average": os.getloadavg()})
            print(rows[-1], flush=True)
            client.cancel(list(client.futures))  # drop what this run persisted
    base = rows[0]["seconds"]
    for r in rows:
        r["vs_persisted"] = r["seconds"] / base
        streamed_passes = r["passes"] * (1 - r["cached_fraction"])
        r["raw_read_s"] = streamed_passes * raw
        r["vs_raw_read"] = r["seconds"] / r["raw_read_s"] if r["raw_read_s"] else None
        floor = r["passes"] * (rows[0]["s_per_pass"] + (1 - r["cached_fraction"]) * raw)
        r["vs_read_plus_compute"] = r["seconds"] / floor
    md = ["# NBAUC's Newton solve out of core", "",
          "`python -m benchmarks.newton_stream`: covtype's 1,600-landmark embedding "
          "(464,810 x 1,593 float32, 2.96 GB), RankSVM C = 1e-3, tol = 1e-3, LocalCluster 2 "
          "workers x 1 thread (9 GiB each). Half cached: `persist=\"auto\"` with the memory "
          "budget set to half of the embedding. Raw read: every chunk file read once by the "
          f"two workers in parallel with `readinto` (best of 3): {raw:.3f} s per pass; a "
          "streamed run's floor is that times its streamed passes; on 2 cores reading from the "
          "page cache is CPU work that cannot overlap with the other worker's compute, so "
          "the floor that this machine allows is the raw read plus the persisted run's "
          "compute per pass (column `vs_read_plus_compute`). Before: streamed reads inside "
          "each task (docs/benchmarks/newton.md): persisted 48.7 s, streamed 241 s (a "
          "Hessian product 1.88 s against 0.48 s); then raw chunk reads and partial caching, "
          "with the streamed tasks placed by the scheduler (most on one worker) and every "
          "read checksummed: persisted 46.1 s, half cached 175.9 s, streamed 163.1 s. Now "
          "streamed chunks are shared out among the workers by work, read ahead in order, "
          "and checksummed once per process until their file changes.", "",
          md_table(rounded(rows, 4, drop=("load_average",))), ""]
    write_results("newton_stream", rows, "\n".join(md), out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
