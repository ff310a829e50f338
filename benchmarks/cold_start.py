"""Cold start: the first fit in a new process against a warm one, and what numba compiles.

Every numba kernel of daskauc is compiled with ``cache=True``: the machine code goes to
numba's on-disk cache (``__pycache__/*.nbi`` / ``*.nbc`` beside the kernel's source file, or
``NUMBA_CACHE_DIR``) and a later process loads it instead of compiling. This benchmark
measures what a new process pays, on spambase (``_harness.load_dataset("spambase")``,
standardized with the training rows' mean and deviation in numpy, before any timing), for
each default estimator (``random_state=0`` where there is one; ``KernelAUC()`` on the first
150 rows, where its default search takes about 10 s):

* **first ever**: a new process with an empty cache (``NUMBA_CACHE_DIR`` a new directory, as
  after ``pip install`` or an edit of a kernel file): its first fit compiles;
* **fresh**: a new process once the cache is populated (the same directory again): its first
  fit loads the kernels from disk;
* **warm**: the second fit in that same process (the kernels in memory).

Each process also counts numba's compilations (its ``numba:compile`` events: a kernel loaded
from the cache raises none) during each fit, and on a 2-worker ``LocalCluster``
(``--mode cluster``: ``daskauc.cluster.get_client(n_workers=2)``, one thread per worker,
which loads daskauc on the workers as it starts them; the training rows written to a dataset
store before the timing and fitted from it) the compilations of the workers too.
``daskauc demo`` (a LocalCluster of its own) is run the same way, first ever then fresh.
``fresh / warm`` is the issue 27 target (at most 1.5); the best of ``--repeats`` fresh
processes is taken (on a shared machine a run can only come out slower).

``python -m benchmarks.cold_start [--only NSAUC,...] [--mode threaded,cluster]
[--warmup]`` writes docs/benchmarks/cold_start.{json,md}. ``--warmup``: the first-ever
process is preceded by ``daskauc warmup`` (which populates the cache), so its row shows what a
user who ran it after installing pays. Run it alone on the machine: it reports times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks._harness import ROOT, Parser, command, load_dataset, md_table, write_results

#: name -> (constructor source, rows of spambase's training set used; None: all)
ESTIMATORS = {
    "NSAUC": ("dk.NSAUC(random_state=0)", None),
    "NBAUC": ("dk.NBAUC(random_state=0)", None),
    "NSOLAM": ("dk.NSOLAM(random_state=0)", None),
    "NOAM": ("dk.NOAM(random_state=0)", None),
    "RankSVM": ("dk.RankSVM(random_state=0)", None),
    "SPAM": ("dk.SPAM(random_state=0)", None),
    "KMeansNystroem": ("dk.KMeansNystroem(random_state=0)", None),
    "KernelAUC": ("dk.KernelAUC(random_state=0)", 150),
}
#: not run on the cluster: KernelAUC's default search is dozens of small fits, each compute
#: a round trip to the workers (minutes on 150 rows); its fixed-gamma fit takes the same route
THREADED_ONLY = {"KernelAUC"}
MODES = ("threaded", "cluster")


# ------------------------------------------------------------------ one new process


def _listen():
    """Count numba's compilations in this process (top-level ``numba:compile`` events: a
    kernel loaded from the on-disk cache raises none); returns the list they go to."""
    from numba.core import event

    seen: list = []

    class Count(event.Listener):
        depth = 0

        def on_start(self, ev):
            if self.depth == 0:
                self.t = time.perf_counter()
            self.depth += 1

        def on_end(self, ev):
            self.depth -= 1
            if self.depth == 0:
                d = ev.data.get("dispatcher")
                name = getattr(getattr(d, "py_func", None), "__module__", "?") + "." + getattr(
                    getattr(d, "py_func", None), "__qualname__", "?")
                seen.append((name, time.perf_counter() - self.t))

    event.register("numba:compile", Count())
    return seen


def _worker_listen(dask_worker=None):  # run on every worker
    dask_worker._daskauc_compiles = _listen()


def _worker_count(dask_worker=None):
    seen = dask_worker._daskauc_compiles
    out = [len(seen), sum(t for _, t in seen)]
    seen.clear()
    return out


def child(name: str, mode: str, fits: int) -> dict:
    """Run in a new process: import, fit ``fits`` times, count compilations; one JSON line."""
    tic = time.perf_counter()
    seen = _listen()
    import daskauc as dk  # noqa: F401  (the constructors below name it)

    t_import = time.perf_counter() - tic
    source, rows = ESTIMATORS[name]
    Xtr, ytr, _, _, _ = load_dataset("spambase")
    if rows:
        Xtr, ytr = Xtr[:rows], ytr[:rows]
    X = (Xtr - Xtr.mean(0)) / np.where(Xtr.std(0) > 0, Xtr.std(0), 1.0)
    if "Nystroem" not in name and not name.startswith(("RankSVM", "SPAM", "KernelAUC")):
        X = Xtr  # the presets standardize themselves
    out = {"estimator": name, "mode": mode, "import_s": t_import, "fits": []}
    client, y, tmp = None, ytr, None
    if mode == "cluster":
        import dask.array as da

        tmp = tempfile.TemporaryDirectory(prefix="daskauc-cold-")
        path = os.path.join(tmp.name, "train.zarr")
        dk.write_dataset(da.from_array(X, chunks=(1000, -1)), da.from_array(ytr, chunks=1000),
                         path)
        X, y = path, None
        tic = time.perf_counter()
        from daskauc.cluster import get_client

        client = get_client(n_workers=2, dashboard=False, quiet=True)
        client.run(_worker_listen)
        out["cluster_start_s"] = time.perf_counter() - tic
    try:
        for _ in range(fits):
            model = eval(source)
            n0 = len(seen)
            tic = time.perf_counter()
            model.fit(X) if "Nystroem" in name else model.fit(X, y)
            fit = {"seconds": time.perf_counter() - tic, "compiles": len(seen) - n0,
                   "compile_s": sum(t for _, t in seen[n0:]),
                   "compiled": sorted({k for k, _ in seen[n0:]})}
            if client is not None:
                counts = client.run(_worker_count)
                fit["worker_compiles"] = [c[0] for c in counts.values()]
                fit["worker_compile_s"] = [c[1] for c in counts.values()]
            out["fits"].append(fit)
    finally:
        if client is not None:
            from daskauc.cluster import close_local_cluster

            close_local_cluster(client)
        if tmp is not None:
            tmp.cleanup()
    return out


def _run_child(name: str, mode: str, fits: int, cache_dir: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir,
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.cold_start", "--child", name, "--mode", mode,
         "--fits", str(fits)],
        env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"{name} ({mode}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run_demo(cache_dir: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    tic = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "daskauc.cli", "demo", "--json"], env=env,
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"demo failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"process_s": time.perf_counter() - tic, **out["timings"]}


def _warmup(cache_dir: str) -> float:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    tic = time.perf_counter()
    subprocess.run([sys.executable, "-m", "daskauc.cli", "warmup"], env=env, cwd=ROOT,
                   check=True, capture_output=True)
    return time.perf_counter() - tic


# ------------------------------------------------------------------ the protocol


def measure(name: str, mode: str, repeats: int, warmup: bool) -> dict:
    """First ever, then ``repeats`` fresh processes, on a cache directory of their own."""
    with tempfile.TemporaryDirectory(prefix="daskauc-numba-") as cache:
        row = {"estimator": name, "mode": mode, "load_before": os.getloadavg()[0]}
        if warmup:
            row["warmup_s"] = _warmup(cache)
        first = _run_child(name, mode, 2, cache)
        fresh = [_run_child(name, mode, 2, cache) for _ in range(repeats)]
    f0 = first["fits"][0]
    best = min(fresh, key=lambda r: r["fits"][0]["seconds"])
    warm = min(r["fits"][1]["seconds"] for r in fresh)
    row.update({
        "first ever s": f0["seconds"], "first ever compiles": f0["compiles"],
        "first ever compile s": f0["compile_s"],
        "fresh s": best["fits"][0]["seconds"],
        "fresh compiles": max(r["fits"][0]["compiles"] for r in fresh),
        "warm s": warm,
        "fresh / warm": best["fits"][0]["seconds"] / warm,
        "first ever / warm": f0["seconds"] / warm,
        "import s": min(r["import_s"] for r in fresh),
        "missed in fresh": sorted({k for r in fresh for k in r["fits"][0]["compiled"]}),
        "load_after": os.getloadavg()[0],
        "raw": {"first": first, "fresh": fresh},
    })
    if mode == "cluster":
        row["first ever worker compiles"] = f0["worker_compiles"]
        row["first ever worker compile s"] = [round(s, 2) for s in f0["worker_compile_s"]]
        row["fresh worker compiles"] = [max(c) for c in zip(
            *(r["fits"][0]["worker_compiles"] for r in fresh), strict=True)]
        row["cluster start s"] = min(r["cluster_start_s"] for r in fresh)
    return row


def demo(repeats: int, warmup: bool) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="daskauc-numba-") as cache:
        warm_s = _warmup(cache) if warmup else None
        rows = [{"run": "first ever" + (" (after daskauc warmup)" if warmup else ""),
                 **_run_demo(cache)}]
        rows += [{"run": f"fresh {i + 1}", **_run_demo(cache)} for i in range(repeats)]
    if warm_s is not None:
        rows[0]["warmup s"] = warm_s
    return rows


def main(argv=None) -> int:
    ap = Parser(__doc__, quick={"only": "NSAUC,SPAM", "repeats": 1}, seed=None)
    ap.add_argument("--only", default=",".join(ESTIMATORS), help="comma-separated estimators")
    ap.add_argument("--mode", default=",".join(MODES), help="threaded, cluster or both")
    ap.add_argument("--repeats", type=int, default=2, help="fresh processes per estimator")
    ap.add_argument("--no-demo", action="store_true", help="leave out daskauc demo")
    ap.add_argument("--warmup", action="store_true",
                    help="run `daskauc warmup` on the empty cache first")
    ap.add_argument("--name", default="cold_start", help="page name (default: cold_start)")
    ap.add_argument("--before", default=None, metavar="JSON",
                    help="the JSON of an earlier run (another version), shown beside this one")
    ap.add_argument("--child", default=None, help=argparse_hidden())
    ap.add_argument("--fits", type=int, default=2, help=argparse_hidden())
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.mode, args.fits), default=float))
        return 0
    names = [n for n in ESTIMATORS if n in args.only.split(",")]
    rows = [measure(n, m, args.repeats, args.warmup) for m in args.mode.split(",")
            for n in names if m == "threaded" or n not in THREADED_ONLY]
    demo_rows = [] if args.no_demo else demo(args.repeats, args.warmup)
    cols = ["estimator", "mode", *(["warmup s"] if args.warmup else []), "first ever s",
            "first ever compiles", "fresh s", "fresh compiles", "warm s", "fresh / warm",
            "first ever / warm", "import s"]
    ccols = ["estimator", "first ever worker compiles", "first ever worker compile s",
             "fresh worker compiles", "cluster start s"]
    loads = [r["load_before"] for r in rows] + [r["load_after"] for r in rows]
    md = ["# Cold start: the first fit in a new process", "",
          f"`{command('benchmarks.cold_start', argv)}`, at {time.strftime('%Y-%m-%d %H:%M')}; "
          f"load average (1 min) between {min(loads, default=0):.2f} and "
          f"{max(loads, default=0):.2f} on a shared 2-core machine"
          + (" (after `daskauc warmup` on the empty cache)" if args.warmup else "") + ".", "",
          "**first ever**: a new process, numba's on-disk cache empty (its first fit "
          "compiles); **fresh**: a new process, the cache populated (best of "
          f"{args.repeats}); **warm**: the second fit in the same process. Compiles: numba "
          "compilations during the first fit (a kernel loaded from the cache compiles "
          "nothing). Spambase, 3,680 x 57 training rows (KernelAUC(): its first 150, threaded "
          "only), standardized; the presets standardize themselves.", "",
          md_table([{c: r[c] for c in cols} for r in rows], cols), ""]
    if any(r["mode"] == "cluster" for r in rows):
        md += ["## The workers of the 2-worker LocalCluster", "",
               "Compilations in each worker process during the first fit.", "",
               md_table([{c: r[c] for c in ccols} for r in rows if r["mode"] == "cluster"],
                        ccols), ""]
    if args.before:
        md += _comparison(args.before, rows)
    missed = sorted({k for r in rows for k in r["missed in fresh"]})
    md += ["Kernels compiled again in a fresh process (a miss of the populated cache): "
           + (", ".join(f"`{k}`" for k in missed) if missed else "none") + ".", "",
           NOTES, ""]
    if demo_rows:
        dcols = list(demo_rows[0])
        md += ["## `daskauc demo` (2-worker LocalCluster)", "", "Seconds per step.", "",
               md_table(demo_rows, dcols), ""]
    write_results(args.name, {"estimators": rows, "demo": demo_rows}, "\n".join(md),
                  out=args.out)
    return 0


NOTES = """## What a new process pays

- **Compilation, on an empty cache only.** The cache holds every kernel a default fit uses
  (`tests/test_cold_start.py` fails otherwise): a new process compiles nothing, in the client
  or in the workers. It is empty after an installation, in a new container, with a new
  `NUMBA_CACHE_DIR`, and for the kernels of a file that changed (numba keys a file's entries
  on its modification time and size): then the first fit compiles its kernels, 0.1-3 s each.
  `daskauc warmup` compiles them all beforehand (page `cold_start_warmup`).
- **What every new process pays once, compiled or not**: numba loads its typing and lowering
  registries at the first kernel call (0.1-0.15 s), then about 3 ms for each kernel
  signature it loads from the cache; Python's first full garbage collection after the
  imports walks their objects (about 0.1 s) during the first fit. Over a fit of half a
  second or more this stays within 1.5x; RankSVM's 0.25 s and SPAM's 0.03 s on spambase
  cannot absorb it (measured with cProfile on the synchronous scheduler: a fresh RankSVM
  fit's extra 0.3 s were numba's start 0.15 s, its 7 cache loads 0.03 s, a collection
  inside dask's graph ordering 0.12 s).
- **Not in these fit times**: importing daskauc (1.5-2 s: scikit-learn and scipy.stats 1.3 s,
  dask.array 0.8 s, zarr 0.5 s), loading the data. A LocalCluster started otherwise than by
  `daskauc.cluster.get_client` (which loads daskauc on the workers as it starts them) pays
  the workers' import of daskauc in its first fit.
"""


def _comparison(path: str, rows: list[dict]) -> list[str]:
    """Markdown: this run's first-ever and fresh / warm beside those of an earlier run."""
    with open(path) as f:
        before = {(r["estimator"], r["mode"]): r for r in json.load(f)["results"]["estimators"]}
    out = []
    for r in rows:
        b = before.get((r["estimator"], r["mode"]))
        if b is None:
            continue
        out.append({"estimator": r["estimator"], "mode": r["mode"],
                    "first ever s (before)": b["first ever s"],
                    "first ever s": r["first ever s"],
                    "fresh / warm (before)": b["fresh / warm"],
                    "fresh / warm": r["fresh / warm"],
                    "fresh s (before)": b["fresh s"], "fresh s": r["fresh s"],
                    "warm s (before)": b["warm s"], "warm s": r["warm s"]})
    if not out:
        return []
    return ["## Before and after", "", f"Before: `{path}` (its machine and load in its JSON).",
            "", md_table(out), ""]


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
