"""Data-parallel stochastic epochs: accuracy of 1, 2 and 4 chains and the 1 -> 2 worker speedup.

Accuracy: ijcnn1 and covtype, standardized, k-means Nystroem with 1,600 landmarks (the papers'
embedding), test AUC after every epoch for NSAUC, SPAM and OAM with 1, 2 and 4 chains (same
seed). Speed: NSAUC epochs over covtype's embedding on a LocalCluster with 1 worker (one chain)
and with 2 workers (two chains, and one chain for reference), the embedding persisted in the
workers' memory and streamed from its Zarr store.

``python -m benchmarks.chains`` (run alone; the embeddings are cached under bench-data/).
Writes docs/benchmarks/chains.{json,md,png}.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from benchmarks._harness import (
    CACHE_DIR,
    Parser,
    best_of,
    embed_stores,
    load_dataset,
    md_table,
    rounded,
    write_results,
)

OUT = os.path.join(CACHE_DIR, "chains")
#: (chains, sync_every): one chain, 2 and 4 chains merged once per epoch, 4 chains merged after
#: every 2 chunks of each chain
CHAINS = ((1, None), (2, None), (4, None), (4, 2))
#: the solvers and their settings on the 1,600-landmark embedding (the reproduction's kind)
SOLVERS = {
    "NSAUC": ("nsauc", {"lam": 1e-8}, 5),
    "SPAM": ("spam", {"lam": 1e-6, "eta": 1.0}, 5),
    "OAM": ("oam", {"C": 2.0**-6, "average": True}, 1),
}


def embeddings(name: str):
    """Train and test embedding stores of ``name`` (built once)."""
    from daskauc.data import ingest_array

    train, test = (os.path.join(OUT, f"{name}-{p}-emb.zarr") for p in ("train", "test"))
    if not (os.path.exists(train) and os.path.exists(test)):
        Xtr, ytr, Xte, yte, _ = load_dataset(name)
        src, src_te = (os.path.join(OUT, f"{name}-{p}.zarr") for p in ("train", "test"))
        ingest_array(Xtr.astype(np.float32), ytr, src, overwrite=True)
        ingest_array(Xte.astype(np.float32), yte, src_te, overwrite=True)
        embed_stores(src, src_te, train, test, 1600, random_state=0)
    return train, test


def run_epochs(solver: str, params: dict, n_epochs: int, X, y, n_chains: int, Xte, yte,
               sync_every: int | None = None):
    """Test AUC and seconds after every epoch (the solver's state carried epoch to epoch,
    as one multi-epoch fit does)."""
    from daskauc.metrics import roc_auc
    from daskauc.solvers.nsauc import pairwise_hinge_sgd
    from daskauc.solvers.oam import oam
    from daskauc.solvers.spam import spam

    fn = {"nsauc": pairwise_hinge_sgd, "spam": spam, "oam": oam}[solver]
    state, curve = None, []
    for _ in range(n_epochs):
        t = time.perf_counter()
        res = fn(X, y, n_epochs=1, state=state, n_chains=n_chains, sync_every=sync_every,
                 random_state=0, **params)
        seconds = time.perf_counter() - t
        state = res.state
        curve.append({"epoch": len(curve) + 1, "auc": float(roc_auc(yte, Xte @ res.coef)),
                      "seconds": seconds})
    return curve


def accuracy(client) -> list[dict]:
    from daskauc.data import open_dataset

    rows = []
    for name in ("ijcnn1", "covtype"):
        train, test = embeddings(name)
        tr, te = open_dataset(train), open_dataset(test)
        X, y = client.persist([tr.X, tr.y])
        Xte, yte = te.X.compute(), te.y.compute()
        for label, (solver, params, n_epochs) in SOLVERS.items():
            for k, sync in CHAINS:
                curve = run_epochs(solver, params, n_epochs, X, y, k, Xte, yte, sync)
                rows.append({"dataset": name, "solver": label, "chains": k,
                             "sync_every": sync, "curve": curve,
                             "auc": curve[-1]["auc"], "epochs": n_epochs,
                             "s_per_epoch": float(np.median([c["seconds"] for c in curve]))})
                print(rows[-1]["dataset"], label, k, sync, round(rows[-1]["auc"], 5), flush=True)
        del X, y
    return rows


def speed() -> list[dict]:
    from distributed import Client, LocalCluster

    from daskauc.data import open_dataset
    from daskauc.solvers.nsauc import pairwise_hinge_sgd

    train, _ = embeddings("covtype")
    rows = []
    for pinned, workers, chains in ((False, 1, 1), (False, 2, 1), (False, 2, 2),
                                    (True, 1, 1), (True, 2, 2)):
        with LocalCluster(n_workers=workers, threads_per_worker=1, memory_limit="9GiB",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            if pinned:  # worker i (all its threads, read-ahead included) on core i only
                for i, addr in enumerate(sorted(client.scheduler_info()["workers"])):
                    client.run(_pin_process, i, workers=[addr])
            ds = open_dataset(train)
            for mode in ("persisted", "streamed"):
                X, y = (client.persist([ds.X, ds.y]) if mode == "persisted" else (ds.X, ds.y))
                res = pairwise_hinge_sgd(X, y, lam=1e-8, n_epochs=4, n_chains=chains,
                                         random_state=0)
                secs = [h["seconds"] for h in res.history[1:]]  # the first warms the caches
                rows.append({"cores": "one per worker" if pinned else "2 shared",
                             "workers": workers, "chains": chains, "mode": mode,
                             "s_per_epoch": float(np.median(secs)), "epochs": secs})
                print(rows[-1], flush=True)
    for r in rows:
        base = next(b for b in rows if b["workers"] == 1 and b["mode"] == r["mode"]
                    and b["cores"] == r["cores"])
        r["speedup"] = base["s_per_epoch"] / r["s_per_epoch"]
    return rows


def _pin_process(core: int) -> None:
    """Pin every thread of this process (and so the threads it starts) to ``core``."""
    for tid in os.listdir(f"/proc/{os.getpid()}/task"):
        os.sched_setaffinity(int(tid), {core})


def read_times(store: str, repeat: int = 3) -> dict:
    """Seconds to read every chunk of the store's X once, in one process (cached files): the
    raw floor (``readinto`` a preallocated buffer), daskauc's reader (a new array per chunk,
    CRC32C checked) and Zarr's own read path; best of ``repeat``."""
    import zarr

    from daskauc._dataset import CheckedZarrArray

    z = zarr.open_group(store, mode="r")["X"]
    cr, n = z.chunks[0], z.shape[0]
    files = [os.path.join(store, "X", "c", str(i), "0") for i in range(-(-n // cr))]
    buf = bytearray(os.path.getsize(files[0]))
    checked = CheckedZarrArray(z, "X")

    def raw():
        for f in files:
            with open(f, "rb", buffering=0) as fh:
                fh.readinto(buf)

    out = {}
    for name, fn in (("raw_readinto", raw),
                     ("daskauc_reader", lambda: [checked[i:i + cr, :] for i in range(0, n, cr)]),
                     ("zarr", lambda: [z[i:i + cr] for i in range(0, n, cr)])):
        out[name] = best_of(fn, repeat)[0]
    return out


def report(acc: list[dict], spd: list[dict], reads: dict | None, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = []
    for r in acc:
        one = next(o for o in acc if o["dataset"] == r["dataset"] and o["solver"] == r["solver"]
                   and o["chains"] == 1)
        table.append({"dataset": r["dataset"], "solver": r["solver"], "chains": r["chains"],
                      "sync_every": r.get("sync_every") or "epoch",
                      "epochs": r["epochs"], "test AUC": round(r["auc"], 5),
                      "minus 1 chain": f"{r['auc'] - one['auc']:+.5f}",
                      "s/epoch": round(r["s_per_epoch"], 2)})
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for i, name in enumerate(("ijcnn1", "covtype")):
        for j, label in enumerate(SOLVERS):
            ax = axes[i, j]
            for r in acc:
                if r["dataset"] == name and r["solver"] == label:
                    sync = f", merged every {r['sync_every']}" if r.get("sync_every") else ""
                    ax.plot([c["epoch"] for c in r["curve"]], [c["auc"] for c in r["curve"]],
                            marker="o", label=f"{r['chains']} chain(s){sync}")
            ax.set_title(f"{label} on {name}")
            ax.set_xlabel("epoch")
            ax.set_ylabel("test AUC")
            ax.legend()
    fig.tight_layout()
    md = ["# Data-parallel stochastic epochs", "",
          "`python -m benchmarks.chains`: standardized features, k-means Nystroem with 1,600 "
          "landmarks, gamma = 1/b; NSAUC lam = 1e-8, SPAM lam = 1e-6 eta = 1, OAM C = 2^-6 "
          "averaged (NOAM's setting); random_state 0; chains combined at the end of every epoch "
          "or after every 2 chunks of each chain (sync_every=2) (docs: "
          "daskauc.engine.chains). Accuracy runs on a LocalCluster of 2 workers x 1 thread "
          "with the embedding persisted (chains placed where their chunks are). Load average "
          f"at the end: {os.getloadavg()[0]:.2f}.", "",
          "## Test AUC with 1, 2 and 4 chains", "", md_table(table), "",
          "![convergence](chains.png)", "",
          "## NSAUC epoch over covtype's embedding (464,810 x 1,600 float32), 1 and 2 workers",
          "", "Median of epochs 2-4 (the first warms caches and the eta0 search is outside the "
          "epochs). Cores: the machine's 2 cores shared by all processes, or each worker "
          "process pinned to a core of its own (its read-ahead thread included), so that one "
          "worker cannot borrow the second worker's core: the fair measure of adding a "
          "worker.", "",
          md_table(rounded(spd, 3, drop=("epochs",))), ""]
    if reads:
        md += ["Reading the embedding's chunks once in one process (cached files, best of 3): "
               + ", ".join(f"{k} {v:.2f} s" for k, v in reads.items()) + ".", ""]
        for r in spd:
            if r["mode"] == "streamed":
                base = next(b for b in spd if b["mode"] == "persisted"
                            and b["workers"] == r["workers"] and b["chains"] == r["chains"]
                            and b["cores"] == r["cores"])
                share = reads["raw_readinto"] / max(1, r["chains"])
                ratio = r["s_per_epoch"] / (base["s_per_epoch"] + share)
                md.append(f"- {r['workers']} worker(s), {r['chains']} chain(s), cores "
                          f"{r['cores']}: streamed "
                          f"{r['s_per_epoch']:.3f} s = {ratio:.2f} x (persisted "
                          f"{base['s_per_epoch']:.3f} s + raw read {share:.3f} s per chain)")
        md.append("")
    write_results("chains", {"accuracy": acc, "speed": spd, "reads": reads}, "\n".join(md),
                  figure=fig, out=out)


def main(argv=None) -> int:
    ap = Parser(__doc__, seed=None)  # random_state 0 throughout, as the cached embeddings
    ap.add_argument("--skip-speed", action="store_true",
                    help="keep the speed rows of the last run (in --out)")
    ap.add_argument("--skip-accuracy", action="store_true",
                    help="keep the accuracy rows of the last run (in --out)")
    args = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    os.makedirs(OUT, exist_ok=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="10GiB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for name in ("ijcnn1", "covtype"):
            embeddings(name)
        acc = [] if args.skip_accuracy else accuracy(client)
    spd = [] if args.skip_speed else speed()
    reads = None if args.skip_speed else read_times(embeddings("covtype")[0])
    if args.skip_accuracy or args.skip_speed:  # keep the rows of the last run of the other
        with open(os.path.join(args.out, "chains.json")) as f:
            last = json.load(f)["results"]
        if args.skip_accuracy:
            acc = last["accuracy"]
        if args.skip_speed:
            spd, reads = last["speed"], last["reads"]
    report(acc, spd, reads, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
