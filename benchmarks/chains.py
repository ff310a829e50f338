"""Data-parallel stochastic epochs: what the default chains cost in test AUC, and what they buy
on two workers and on a laptop's threads.

1. **Defaults**: every stochastic estimator with its default ``n_chains="auto"`` against
   ``n_chains=1``, random_state 0 and 1, on ijcnn1 and covtype.binary: the presets' solvers
   (NSAUC, NSVMSGD2, NSOLAM, NOAM: the preset's solver with the preset's settings) on the
   1,600-landmark embedding, the linear estimators on the standardized raw features; on a
   LocalCluster of 2 workers x 1 thread, the rows persisted in daskauc's default chunks.
2. **Fixed settings with 1, 2 and 4 chains** (the curves): NSAUC, SPAM and OAM on the
   embeddings, test AUC after every epoch.
3. **Speed on 2 workers**: ``PairwiseHingeSGD()`` (NSAUC's solver, default arguments) on a
   persisted 240,000 x 512 float32 array and on covtype's embedding (persisted and streamed
   from its store), LocalClusters of 1 and 2 workers x 1 thread, the cores shared or one per
   worker: seconds per parallel epoch (the first epoch of a fit is one chain) and per fit.
4. **Threads** (a laptop, no cluster): the same estimator on the 240,000 x 512 array and
   NSAUC's solver on covtype's embedding, default against one chain, time and test AUC.

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
    command,
    embed_stores,
    load_dataset,
    md_table,
    rounded,
    timed,
    to_cluster,
    write_results,
)

OUT = os.path.join(CACHE_DIR, "chains")
DATASETS = ("ijcnn1", "covtype")
#: (chains, sync_every): one chain, 2 and 4 chains merged once per epoch, 4 chains merged after
#: every 2 chunks of each chain
CHAINS = ((1, None), (2, None), (4, None), (4, 2))
#: the curves' solvers and their settings on the 1,600-landmark embedding
SOLVERS = {
    "NSAUC": ("nsauc", {"lam": 1e-8}, 5),
    "SPAM": ("spam", {"lam": 1e-6, "eta": 1.0}, 5),
    "OAM": ("oam", {"C": 2.0**-6, "average": True}, 1),
}
#: the presets whose solvers run on the embedding, and the linear estimators on raw features
PRESETS = ("NSAUC", "NSVMSGD2", "NSOLAM", "NOAM")
LINEAR = (("PairwiseHingeSGD", {}), ("SPAM", {}), ("SPDAM", {}), ("SOLAM", {}), ("OPAUC", {}),
          ("TwoPassAUC", {}), ("OAM", {}), ("UnivariateAUC", {"loss": "exp"}),
          ("UnivariateAUC", {"loss": "square"}))
SEEDS = (0, 1)
#: the speed benchmark's array
SPEED_ROWS, SPEED_FEATURES = 240_000, 512


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


def preset_solver(name: str):
    """``(estimator class, its settings)``: the solver a default preset fits on its embedding."""
    import daskauc

    preset = getattr(daskauc, name)()
    params = {p: getattr(preset, p) for p in preset._solver_params}
    return preset._solver, {**params, **preset._solver_fixed}


def _standardized(name: str):
    Xtr, ytr, Xte, yte, _ = load_dataset(name)
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, ytr, (Xte - mu) / sd, yte


def _on_cluster(client, X: np.ndarray, y: np.ndarray):
    """``(X, y)`` persisted on the workers in the row chunks daskauc cuts numpy input into."""
    from distributed import wait

    from daskauc import _config

    rows = _config.chunk_rows_for(X.shape[1], X.dtype.itemsize, X.shape[0])
    Xd, yd = client.persist([to_cluster(client, X, rows), to_cluster(client, y, rows)])
    wait([Xd, yd])
    return Xd, yd


def defaults(client) -> list[dict]:
    """Test AUC and seconds of every stochastic estimator's default fit against one chain,
    on the cluster (rows persisted) and on the threaded scheduler (numpy rows)."""
    import dask

    import daskauc
    from daskauc._validation import as_row_chunked
    from daskauc.data import open_dataset
    from daskauc.engine.chain_plan import resolve_chains
    from daskauc.metrics import roc_auc

    rows = []
    for name in DATASETS:
        train, test = embeddings(name)
        tr, te = open_dataset(train), open_dataset(test)
        cases = [(p, "embedding", *preset_solver(p)) for p in PRESETS]
        cases += [(f"{est}({', '.join(f'{k}={v!r}' for k, v in kw.items())})", "raw",
                   getattr(daskauc, est), kw) for est, kw in LINEAR]
        data = {"embedding": (tr.X.compute(), tr.y.compute(), te.X.compute(), te.y.compute()),
                "raw": _standardized(name)}
        for kind in ("embedding", "raw"):
            Xn, yn, Xte, yte = data[kind]
            on_cluster = _on_cluster(client, Xn, yn)
            for scheduler in ("cluster", "threads"):
                with dask.config.set(scheduler="threads" if scheduler == "threads"
                                     else client):
                    X, y = on_cluster if scheduler == "cluster" else (Xn, yn)
                    auto = resolve_chains("auto", as_row_chunked(
                        X, check_finite_values=False))
                    for label, k, cls, kw in cases:
                        if k != kind:
                            continue
                        default_chains = cls().get_params()["n_chains"]
                        for seed in SEEDS:
                            row = {"dataset": name, "estimator": label, "features": kind,
                                   "scheduler": scheduler,
                                   "chunks": as_row_chunked(X, check_finite_values=False)
                                   .numblocks[0],
                                   "default chains": auto if default_chains == "auto" else 1,
                                   "seed": seed}
                            for tag, chains in (("1 chain", 1), ("default", default_chains)):
                                model, seconds = timed(cls(**kw, random_state=seed,
                                                           n_chains=chains).fit, X, y)
                                row[f"AUC {tag}"] = float(roc_auc(yte, Xte @ model.coef_))
                                row[f"s {tag}"] = seconds
                            row["difference"] = row["AUC default"] - row["AUC 1 chain"]
                            rows.append(row)
                            print(rounded([row], 5)[0], flush=True)
            del on_cluster
    return rows


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
    for name in DATASETS:
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


def speed_data(seed: int = 0):
    """The speed benchmark's rows: ``SPEED_ROWS`` training and 60,000 test rows of
    ``SPEED_FEATURES`` standard normal float32 features, labels of a linear score plus noise
    (test AUC about 0.9)."""
    rng = np.random.default_rng(seed)
    n = SPEED_ROWS + 60_000
    X = rng.standard_normal((n, SPEED_FEATURES), dtype=np.float32)
    beta = rng.standard_normal(SPEED_FEATURES) / np.sqrt(SPEED_FEATURES)
    y = np.where(X @ beta + 0.75 * rng.standard_normal(n) > 0.5, 1, -1).astype(np.int8)
    return X[:SPEED_ROWS], y[:SPEED_ROWS], X[SPEED_ROWS:], y[SPEED_ROWS:]


def _fit_record(model, seconds: float, Xte, yte) -> dict:
    from daskauc.metrics import roc_auc

    secs = [h["seconds"] for h in model.history_]
    return {"first epoch s": secs[0], "s/epoch": float(np.median(secs[1:])), "fit s": seconds,
            "test AUC": float(roc_auc(yte, Xte @ model.coef_)), "epochs": secs}


def speed(repeat: int = 5) -> list[dict]:
    """``PairwiseHingeSGD()`` (default arguments) on 1 and 2 single-threaded workers.

    Both clusters run side by side and their fits alternate, ``repeat`` rounds, so that the
    machine's other load (it is shared) falls on both alike; each configuration's best round
    (the lowest median seconds per parallel epoch: on a shared machine a run can only come
    out slower) is kept, with the median over the rounds beside it."""
    from contextlib import ExitStack

    from distributed import Client, LocalCluster

    from daskauc import PairwiseHingeSGD
    from daskauc.data import open_dataset
    from daskauc.engine.chain_plan import resolve_chains

    X, y, Xte, yte = speed_data()
    emb, emb_te = embeddings("covtype")
    te = open_dataset(emb_te)
    Xte_emb, yte_emb = te.X.compute(), te.y.compute()
    rows = []
    for pinned in (False, True):
        with ExitStack() as stack:
            clients = {}
            for workers in (1, 2):
                cluster = stack.enter_context(LocalCluster(
                    n_workers=workers, threads_per_worker=1, memory_limit="8GiB",
                    dashboard_address=None))
                client = clients[workers] = stack.enter_context(Client(cluster,
                                                                       set_as_default=False))
                if pinned:  # worker i (all its threads, read-ahead included) on core i only
                    for i, addr in enumerate(sorted(client.scheduler_info()["workers"])):
                        client.run(_pin_process, i, workers=[addr])
            cases = {}
            for workers, client in clients.items():
                with client.as_current():
                    cases[workers] = [("240,000 x 512", "persisted",
                                       *_on_cluster(client, X, y), Xte, yte)]
                    if not pinned:
                        ds = open_dataset(emb)
                        cases[workers].append(("covtype embedding", "persisted",
                                               *client.persist([ds.X, ds.y]), Xte_emb,
                                               yte_emb))
                        cases[workers].append(("covtype embedding", "streamed", ds.X, ds.y,
                                               Xte_emb, yte_emb))
                    # the workers load the compiled kernels and warm their caches
                    PairwiseHingeSGD(n_epochs=2, random_state=0).fit(*cases[workers][0][2:4])
            runs: dict = {}
            for _ in range(repeat):
                for workers, client in clients.items():
                    settings = ["default"] + (["1"] if workers == 2 and not pinned else [])
                    with client.as_current():
                        for data, mode, Xd, yd, Xt, yt in cases[workers]:
                            for chains in settings:
                                n_chains = "auto" if chains == "default" else int(chains)
                                model, seconds = timed(PairwiseHingeSGD(
                                    random_state=0, n_chains=n_chains).fit, Xd, yd)
                                key = (data, mode, workers, chains)
                                runs.setdefault(key, []).append({
                                    "data": data, "mode": mode,
                                    "cores": "one per worker" if pinned else "2 shared",
                                    "workers": workers, "n_chains": chains,
                                    "chains": resolve_chains(n_chains, Xd),
                                    **_fit_record(model, seconds, Xt, yt),
                                    "load": os.getloadavg()[0]})
                                print(rounded([runs[key][-1]], 4)[0], flush=True)
            for rs in runs.values():
                best = min(rs, key=lambda r: r["s/epoch"])
                rows.append({**best, "median s/epoch of rounds":
                             float(np.median([r["s/epoch"] for r in rs])),
                             "rounds": len(rs)})
    for r in rows:
        base = next(b for b in rows if b["workers"] == 1 and b["data"] == r["data"]
                    and b["mode"] == r["mode"] and b["cores"] == r["cores"])
        r["speedup s/epoch"] = base["s/epoch"] / r["s/epoch"]
        r["speedup fit"] = base["fit s"] / r["fit s"]
    return rows


def threads() -> list[dict]:
    """The threaded scheduler (no cluster): default chains against one chain."""
    import dask

    from daskauc import PairwiseHingeSGD
    from daskauc.data import open_dataset
    from daskauc.engine.chain_plan import resolve_chains

    X, y, Xte, yte = speed_data()
    train, test = embeddings("covtype")
    tr, te = open_dataset(train), open_dataset(test)
    cls, kw = preset_solver("NSAUC")
    cases = [("240,000 x 512", "PairwiseHingeSGD()", PairwiseHingeSGD, {}, X, y, Xte, yte),
             ("covtype embedding", "NSAUC's solver", cls, kw, tr.X.compute(), tr.y.compute(),
              te.X.compute(), te.y.compute())]
    rows = []
    with dask.config.set(scheduler="threads"):
        PairwiseHingeSGD(n_epochs=2, random_state=0, n_chains=2).fit(X[:50_000], y[:50_000])
        for data, label, est, params, Xn, yn, Xt, yt in cases:
            from daskauc._validation import as_row_chunked

            auto = resolve_chains("auto", as_row_chunked(Xn, check_finite_values=False))
            for chains in ("default", "1"):
                n_chains = "auto" if chains == "default" else 1
                model, seconds = timed(est(**params, random_state=0, n_chains=n_chains).fit,
                                       Xn, yn)
                rows.append({"data": data, "estimator": label, "n_chains": chains,
                             "chains": auto if chains == "default" else 1,
                             **_fit_record(model, seconds, Xt, yt),
                             "load": os.getloadavg()[0]})
                print(rounded([rows[-1]], 4)[0], flush=True)
    return rows


def _table(rows: list[dict], columns: list[str] | None = None) -> str:
    return md_table(rows, columns) if rows else "(not run)"


def _pin_process(core: int) -> None:
    """Pin every thread of this process (and so the threads it starts) to ``core``."""
    for tid in os.listdir(f"/proc/{os.getpid()}/task"):
        os.sched_setaffinity(int(tid), {core})


def report(dflt: list[dict], acc: list[dict], spd: list[dict], thr: list[dict],
           out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = []
    for name, label, scheduler in dict.fromkeys((r["dataset"], r["estimator"], r["scheduler"])
                                                for r in dflt):
        runs = [r for r in dflt if (r["dataset"], r["estimator"], r["scheduler"])
                == (name, label, scheduler)]
        diffs = [r["difference"] for r in runs]
        summary.append({
            "dataset": name, "estimator": label, "features": runs[0]["features"],
            "scheduler": scheduler, "chunks": runs[0]["chunks"],
            "default chains": runs[0]["default chains"],
            **{f"AUC 1 chain (seed {r['seed']})": f"{r['AUC 1 chain']:.5f}" for r in runs},
            **{f"default - 1 chain (seed {r['seed']})": f"{r['difference']:+.5f}"
               for r in runs},
            "mean difference": f"{np.mean(diffs):+.5f}",
            "s 1 chain": round(float(np.mean([r["s 1 chain"] for r in runs])), 1),
            "s default": round(float(np.mean([r["s default"] for r in runs])), 1)})
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
    for i, name in enumerate(DATASETS):
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
    cols = ["data", "mode", "cores", "workers", "n_chains", "chains", "first epoch s",
            "s/epoch", "median s/epoch of rounds", "fit s", "speedup s/epoch", "speedup fit",
            "test AUC", "load"]
    tcols = ["data", "estimator", "n_chains", "chains", "first epoch s", "s/epoch", "fit s",
             "test AUC", "load"]
    md = ["# Data-parallel stochastic epochs", "",
          f"`{command('benchmarks.chains')}`. How parallel chains are combined: "
          "`daskauc.engine.chains` (each chain stands for the sequential run: its steps scaled "
          "to its share of the round in its first round, then the sequential steps plus the "
          "other chains' move of the last round; iterates mixed; the first epoch of a fit is "
          "one chain). Load average (1 min) at the end: "
          f"{os.getloadavg()[0]:.2f}; each row records the load at its end.", "",
          "## Default estimators: `n_chains=\"auto\"` against one chain", "",
          "Every stochastic estimator with its defaults, random_state 0 and 1: the presets' "
          "solvers with the presets' settings on the 1,600-landmark k-means Nystroem "
          "embedding (standardized features, gamma = 1/b), the linear estimators on the "
          "standardized raw features; on a LocalCluster of 2 workers x 1 thread, the rows "
          "persisted in daskauc's default chunks (about 64 MiB), and on the threaded "
          "scheduler (2 threads, numpy rows, the same chunks). \"default chains\" is what "
          "`n_chains=\"auto\"` resolves to there (the cost model: 1 for one chunk, or where a "
          "round's merge costs more than the chains save; SPDAM's default is 1).", "",
          _table(summary), "",
          "## Fixed settings with 1, 2 and 4 chains", "",
          "NSAUC lam = 1e-8, SPAM lam = 1e-6 eta = 1, OAM C = 2^-6 averaged (NOAM's setting) "
          "on the embeddings, random_state 0; chains combined at the end of every epoch or "
          "after every 2 chunks of each chain (sync_every=2); each epoch a call continuing "
          "the state (the first epoch of a fit is one chain).", "",
          _table(table), "", "![convergence](chains.png)", "",
          "## Speed on 2 workers: `PairwiseHingeSGD()`, default arguments", "",
          f"A persisted {SPEED_ROWS:,} x {SPEED_FEATURES} float32 array (standard normal "
          "features, labels of a linear score and noise; 8 chunks of 32,768 rows) and "
          "covtype's embedding (464,810 x 1,593 float32, 47 chunks), persisted or streamed "
          "from its store. LocalCluster of 1 or 2 workers x 1 thread; the machine's 2 cores "
          "shared by all processes, or each worker pinned to a core of its own. s/epoch: "
          "median of epochs 2-5 (the parallel ones; the first epoch of a fit is one chain); "
          "fit s: the whole fit (eta0 search, 5 epochs, calibration). The clusters of 1 and 2 "
          "workers run side by side and their fits alternate, 5 rounds, so "
          "that other load on the machine falls on both alike; the row is the best round "
          "(lowest s/epoch), the median over the rounds beside it.", "",
          _table(rounded(spd, 3, drop=("epochs",)), cols), "",
          "## Threads (no cluster): default against one chain", "",
          "The threaded scheduler on this machine's 2 cores, numpy input.", "",
          _table(rounded(thr, 4, drop=("epochs",)), tcols), ""]
    write_results("chains", {"defaults": dflt, "accuracy": acc, "speed": spd, "threads": thr},
                  "\n".join(md), figure=fig, out=out)


def main(argv=None) -> int:
    ap = Parser(__doc__, seed=None)  # random_state 0 throughout, as the cached embeddings
    for part in ("defaults", "accuracy", "speed", "threads"):
        ap.add_argument(f"--skip-{part}", action="store_true",
                        help=f"keep the {part} rows of the last run (in --out)")
    args = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    os.makedirs(OUT, exist_ok=True)
    results = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="10GiB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for name in DATASETS:
            embeddings(name)
        results["defaults"] = None if args.skip_defaults else defaults(client)
        results["accuracy"] = None if args.skip_accuracy else accuracy(client)
    results["speed"] = None if args.skip_speed else speed()
    results["threads"] = None if args.skip_threads else threads()
    if any(v is None for v in results.values()):  # keep the rows of the last run
        with open(os.path.join(args.out, "chains.json")) as f:
            last = json.load(f)["results"]
        results = {k: last.get(k, []) if v is None else v for k, v in results.items()}
    report(results["defaults"], results["accuracy"], results["speed"], results["threads"],
           args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
