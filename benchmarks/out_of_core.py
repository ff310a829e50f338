"""Out-of-core check: embed covtype, run an NSAUC epoch and an NBAUC Newton solve on workers
with less memory than the embedding.

A LocalCluster of 2 workers x 1 GiB (2 GiB in all) writes the 464,809 x 1600 float32 training
embedding of covtype (2.98 GB) to Zarr, then runs one NSAUC epoch, the PRSVM+ Newton solve
(RankSVM, ``persist="auto"``, which must choose to stream) and the exact test AUCs, all
streaming that store. Worker memory is sampled every 0.25 s; worker restarts are detected by
comparing worker process ids before and after.

    python -m benchmarks.out_of_core [--memory-limit 1GiB] [--landmarks 1600] [--workdir DIR]
                                  [--reuse] [--C 1.0] [--newton-max-iter 50]

``--reuse`` keeps complete embedding stores already in ``--workdir`` (the embedding step is
then not re-measured).

Writes docs/benchmarks/out_of_core.{json,md}.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time

from benchmarks._harness import (
    SHARED_DATA,
    Parser,
    WorkerMemory,
    embed_stores,
    machine_info,
    md_table,
    write_results,
)


def _complete(path) -> bool:
    from daskauc.data import open_dataset

    try:
        open_dataset(path)
    except (FileNotFoundError, ValueError):
        return False
    return True


def main(argv=None) -> None:
    ap = Parser(__doc__)  # no --quick: a smaller embedding would fit in memory
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--landmarks", type=int, default=1600)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--reuse", action="store_true", help="keep embeddings found in --workdir")
    ap.add_argument("--C", type=float, default=1.0, help="RankSVM's C for the Newton solve")
    ap.add_argument("--newton-max-iter", type=int, default=50)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger("daskauc").setLevel(logging.INFO)  # one line per Newton step

    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    from daskauc.data import ingest, open_dataset, split_store
    from daskauc.engine.placement import should_persist
    from daskauc.estimators.pairwise_sgd import PairwiseHingeSGD
    from daskauc.estimators.ranksvm import RankSVM
    from daskauc.metrics import roc_auc

    work = args.workdir or tempfile.mkdtemp(prefix="daskauc-ooc-")
    p = lambda name: os.path.join(work, name)  # noqa: E731
    times = {}

    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                           memory_limit=args.memory_limit, dashboard_address=":0")
    client = Client(cluster)
    print("dashboard:", client.dashboard_link, flush=True)
    with WorkerMemory(client, interval=0.25) as mem:  # each worker's peak, and restarts
        tic = time.perf_counter()
        if not os.path.exists(p("train.zarr")):
            ingest(os.path.join(SHARED_DATA, "covtype", "covtype.libsvm.binary.xz"),
                   p("covtype.zarr"), n_features=54, shuffle=True, random_state=args.seed,
                   chunk_rows=50_000, overwrite=True)
            split_store(p("covtype.zarr"), p("train.zarr"), p("test.zarr"), test_size=0.2,
                        random_state=args.seed, overwrite=True)
        times["ingest+split"] = time.perf_counter() - tic

        reuse = args.reuse and all(_complete(p(s)) for s in ("train-emb.zarr", "test-emb.zarr"))
        if reuse:
            emb, emb_te = open_dataset(p("train-emb.zarr")), open_dataset(p("test-emb.zarr"))
        else:
            emb, emb_te, _, secs = embed_stores(p("train.zarr"), p("test.zarr"),
                                                p("train-emb.zarr"), p("test-emb.zarr"),
                                                args.landmarks, random_state=args.seed)
            times["scale+kmeans"] = secs["map"]
            times["embed+write train"] = secs["train"]
            times["embed+write test"] = secs["test"]
        emb_bytes = emb.X.nbytes

        tic = time.perf_counter()
        model = PairwiseHingeSGD(lam=1e-8, n_epochs=1, random_state=args.seed)
        model.fit(emb.X, emb.y)  # not persisted: streamed from the store
        times["nsauc epoch (streamed)"] = time.perf_counter() - tic
        tic = time.perf_counter()
        auc = float(roc_auc(emb_te.y, model.decision_function(emb_te.X)))
        times["test AUC (streamed)"] = time.perf_counter() - tic

        streamed = not should_persist(emb.X, "auto", client)
        tic = time.perf_counter()
        svm = RankSVM(C=args.C, max_iter=args.newton_max_iter).fit(emb.X, emb.y)
        times["nbauc newton solve (streamed)"] = time.perf_counter() - tic
        newton = {"C": args.C, "streamed": streamed, "newton_steps": svm.n_iter_,
                  "hessian_products": int(sum(h.get("cg_iter", 0) for h in svm.history_)),
                  "converged": bool(svm.converged_),
                  "rel_grad_norm": svm.history_[-1]["rel_grad_norm"],
                  "test_auc": float(roc_auc(emb_te.y, svm.decision_function(emb_te.X)))}
    limit = parse_bytes(args.memory_limit)
    rows = [{"worker": w, "peak_rss_mib": round(v / 2**20), "limit_mib": round(limit / 2**20),
             "peak/limit": round(v / limit, 2)} for w, v in sorted(mem.peak.items())]
    summary = {
        "embedding_gb": round(emb_bytes / 1e9, 2),
        "cluster_memory_gb": round(limit * args.workers / 1e9, 2),
        "workers_restarted": len(mem.restarted),
        "test_auc_after_1_epoch": auc,
        "newton": newton,
        "embedding_reused": reuse,
        "times_s": {k: round(v, 2) for k, v in times.items()},
        "chunk_rows": int(emb.X.chunks[0][0]),
        "machine": machine_info(),
    }
    md = ["# Out-of-core: embedding larger than the cluster's memory", "",
          f"LocalCluster {args.workers} workers x {args.memory_limit}, 1 thread each "
          f"({summary['cluster_memory_gb']} GB in all) against a "
          f"{summary['embedding_gb']} GB float32 embedding (covtype 80% train, "
          f"{args.landmarks} landmarks). Command: `python -m benchmarks.out_of_core`", "",
          md_table(rows), "",
          f"- workers restarted or killed: {summary['workers_restarted']}",
          f"- NSAUC test AUC after one streamed epoch: {auc:.4f}",
          f"- NBAUC Newton solve (RankSVM C={args.C}, persist='auto' chose "
          f"{'to stream' if streamed else 'to persist'}): {newton['newton_steps']} Newton "
          f"steps, {newton['hessian_products']} Hessian products, converged "
          f"{newton['converged']} (relative gradient {newton['rel_grad_norm']:.2g}), "
          f"test AUC {newton['test_auc']:.4f}",
          f"- embedding stores reused from an earlier run: {reuse}",
          f"- embedding chunks: {summary['chunk_rows']} rows "
          f"({summary['chunk_rows'] * args.landmarks * 4 / 2**20:.0f} MiB)", "",
          md_table([summary["times_s"]])]
    write_results("out_of_core", summary | {"workers": rows}, "\n".join(md), out=args.out)
    client.close()
    cluster.close()
    if mem.restarted:
        sys.exit("a worker was restarted")


if __name__ == "__main__":
    main()
