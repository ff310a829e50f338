"""The kernel route's cost model checked on this machine, and the plan to 10^5 centres.

Three steps, each cached in bench-data/kernel_plan/ (``--force`` recomputes):

* ``factor``: the preconditioner's stages measured at m = 4,096 .. 16,384 centres (random
  centres in 54 dimensions, gamma = 0.15): on the client (LAPACK on 2 threads) and as tiles on
  LocalClusters of 1 and 2 single-threaded worker processes whose memory limits are below the
  m x m matrix (so that it must be spread): the factor of K_mm, one factorization of A ("mean"),
  one application (best of 3), peak RSS of the client and of the workers;
* ``check``: :func:`daskauc.engine.cost.kernel_plan`'s prediction of every measured stage:
  those of ``factor``, the passes of benchmarks/covtype_capacity's kernel rows (its cache),
  and the stages of its 32,768-centre fit with the factor on the workers; error per stage;
* ``plan``: the table a user needs: m in {32k, 64k, 128k} centres x n in {10^6, 10^7, 10^8}
  rows (d = 54), the nodes (32 threads, 128 GiB each, this machine's per-thread rates) the
  factor needs in memory and the hours predicted with them, beside Falkon's published figures.

    python -m benchmarks.kernel_plan                    # everything
    python -m benchmarks.kernel_plan --steps plan       # the table only (no measurement)

Writes docs/benchmarks/kernel_plan.{json,md}.
"""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np

from benchmarks._harness import (
    CACHE_DIR,
    MemorySampler,
    Parser,
    machine_info,
    md_table,
    write_results,
)
from daskauc.engine.cost import kernel_plan, machine_rates, sweep_seconds

OUT = os.path.join(CACHE_DIR, "kernel_plan")
CAPACITY = os.path.join(CACHE_DIR, "covtype_capacity")
MS = (4096, 8192, 16384)
D, GAMMA, SEED = 54, 0.15, 0
GIB = 2.0**30
#: the plan's node: threads and memory (a common cloud or HPC node), the share of its memory
#: the factor and the rows may take (the rest: Python, the libraries, the tiles in flight)
NODE_THREADS, NODE_GIB, NODE_SHARE = 32, 128, 0.6
PLAN_MS = (32768, 65536, 131072)
PLAN_NS = (10**6, 10**7, 10**8)
#: Falkon's figures as its authors report them (Meanti et al., "Kernel methods through the
#: roof", NeurIPS 2020, and the Falkon documentation): HIGGS, 1.1e7 rows x 28, 1.2e5 centres
FALKON = [
    {"source": "Falkon (Meanti et al. 2020), HIGGS", "rows": "1.1e7", "centres": "120,000",
     "hardware": "2 GPUs, one node", "time": "443 s", "AUC": "0.8196"},
    {"source": "Falkon maintainers", "rows": "-", "centres": "100,000",
     "hardware": "one node", "time": "-", "AUC": "40 GB for the preconditioner"},
    {"source": "Falkon maintainers", "rows": "-", "centres": "512,000",
     "hardware": "one node", "time": "-", "AUC": "about 1 TB"},
]


def _cached(key: str, force: bool, fn):
    path = os.path.join(OUT, f"{key}.json")
    if os.path.exists(path) and not force:
        with open(path) as fh:
            return json.load(fh)
    row = fn()
    os.makedirs(OUT, exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        json.dump(row, fh, indent=1, default=float)
    os.replace(path + ".tmp", path)
    return row


def _centres(m: int) -> np.ndarray:
    return np.random.default_rng(SEED).standard_normal((m, D))


def _time_stages(pc_factory, m: int) -> dict:
    """Seconds of the factor of K_mm, one factorization of A and one application."""
    with MemorySampler() as mem:
        t0 = time.perf_counter()
        pc = pc_factory()
        t1 = time.perf_counter()
        pc.factor(1.0, 1e3)
        t2 = time.perf_counter()
        v = np.random.default_rng(1).standard_normal(m)
        applies = []
        for _ in range(3):
            t = time.perf_counter()
            pc.apply(v)
            applies.append(time.perf_counter() - t)
    return {"factor_T": t1 - t0, "factor_A": t2 - t1, "apply": min(applies),
            "peak_client_gib": mem.peak_client / GIB, "peak_worker_gib": mem.peak_workers / GIB,
            "factor_gib": 8.0 * m * m / GIB}


def step_factor(m: int, workers: int) -> dict:
    """One m on the client (``workers=0``) or on a LocalCluster of ``workers`` processes."""
    from daskauc.engine.cost import factor_block
    from daskauc.solvers.blocked_preconditioner import BlockedNystroemPreconditioner
    from daskauc.solvers.kernel_basis import build_preconditioner

    C = _centres(m)
    if workers == 0:
        row = _time_stages(lambda: build_preconditioner(C, GAMMA, placement="client"), m)
        return {"m": m, "workers": 0, "placement": "client", **row}
    from distributed import Client, LocalCluster

    # each worker may hold at most 0.75 of the m x m matrix (plus its Python): it has to be
    # spread over two; one worker holds the two triangles, 8 m (m + b) bytes, whole
    b = factor_block(m)
    limit = (0.75 * 8.0 * m * m if workers > 1 else 1.3 * 8.0 * m * (m + b)) + 1.0 * GIB
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      memory_limit=int(limit), dashboard_address=None) as cluster, \
            Client(cluster):
        row = _time_stages(lambda: BlockedNystroemPreconditioner(C, GAMMA, block=b), m)
    return {"m": m, "workers": workers, "placement": "workers", "block": b,
            "memory_limit_gib": limit / GIB, **row}


def _error(pred: float, meas: float) -> float:
    return (pred - meas) / meas if meas else float("nan")


def capacity_rates(rates: dict) -> dict:
    """``rates`` with the kernel-tile and float64 GEMM rates per thread of the covtype_capacity
    run (measured in the run whose passes the check compares with, over 2 s each, where
    :func:`machine_rates`' 0.2 s measurement reads 1.5x higher on this machine)."""
    path = os.path.join(CAPACITY, "rates.json")
    if not os.path.exists(path):
        return rates
    with open(path) as fh:
        cap = json.load(fh)
    return {**rates, "tile_flops": cap["tile_1thread"], "gemm64_flops": cap["gemm64_2threads"] / 2}


def step_check(factor_rows: list, rates: dict) -> list:
    """Predicted against measured, stage by stage: the factor rows with this run's rates,
    the covtype rows with their run's (:func:`capacity_rates`)."""
    out = []
    for r in factor_rows:
        threads = max(1, r["workers"]) if r["workers"] else 2
        p = kernel_plan(1, D, r["m"], workers=threads, placement=r["placement"],
                        factorizations=1, rates=rates)
        per_apply = 4.0 * sweep_seconds(r["m"], p["block"], threads, rates, r["placement"])
        for stage, meas, pred in (("factor of K_mm", r["factor_T"], p["seconds"]["factor_T"]),
                                  ("factor of A", r["factor_A"], p["seconds"]["factor_A"]),
                                  ("one application", r["apply"], per_apply)):
            out.append({"what": stage, "m": r["m"], "where": r["placement"],
                        "workers": r["workers"] or "-", "measured s": meas,
                        "predicted s": pred, "error": _error(pred, meas)})
    for name in sorted(os.listdir(CAPACITY)) if os.path.isdir(CAPACITY) else ():
        if not (name.startswith("kernel-m") and name.endswith(".json")):
            continue
        with open(os.path.join(CAPACITY, name)) as fh:
            k = json.load(fh)
        n = 464_810
        cg = int(k.get("cg_total", 0))
        place = k.get("factor_placement") or "client"
        p = kernel_plan(n, D, k["m"], workers=2, newton_steps=int(k["newton_steps"]),
                        cg_steps=cg, weighting=k.get("weighting", "pairs"),
                        placement="workers" if place == "workers" else "client",
                        rates=capacity_rates(rates))
        label = name[len("kernel-"):-len(".json")]
        out.append({"what": f"seconds per pass (covtype {label})", "m": k["m"],
                    "where": place, "workers": 2, "measured s": k["seconds_per_pass"],
                    "predicted s": p["seconds_per_pass"],
                    "error": _error(p["seconds_per_pass"], k["seconds_per_pass"])})
        if place == "workers":  # the whole fit, stage by stage
            pc = k["preconditioner"]
            for stage, meas, pred in (
                    ("factor of K_mm (covtype)", pc.get("cholesky_T", 0.0),
                     p["seconds"]["factor_T"]),
                    ("factors of A (covtype)", pc.get("lauum", 0.0), p["seconds"]["factor_A"]),
                    ("Newton/CG iterations (covtype)", k["iteration_seconds"] - pc.get(
                        "lauum", 0.0), p["seconds"]["passes"] + p["seconds"]["applies"])):
                out.append({"what": stage, "m": k["m"], "where": place, "workers": 2,
                            "measured s": meas, "predicted s": pred,
                            "error": _error(pred, meas)})
            peak = k.get("memory", {}).get("peak_worker_gib")
            if peak:  # a GiB row in the seconds columns: the unit is in its name
                pred = p["memory_per_worker"] / GIB
                out.append({"what": "peak worker memory, GiB (covtype)", "m": k["m"],
                            "where": place, "workers": 2, "measured s": peak,
                            "predicted s": pred, "error": _error(pred, peak)})
    return out


def step_plan(rates: dict) -> list:
    """Nodes the factor needs, and hours predicted with them and with 4x as many."""
    rows = []
    for m in PLAN_MS:
        for n in PLAN_NS:
            per_node = NODE_SHARE * NODE_GIB * GIB
            one = kernel_plan(n, D, m, workers=1, threads_per_worker=NODE_THREADS, rates=rates)
            need = max(1, math.ceil(one["memory_per_worker"] / per_node))
            row = {"m": m, "n": n}
            for label, nodes in (("", need), (" (4x nodes)", 4 * need)):
                p = kernel_plan(n, D, m, workers=nodes, threads_per_worker=NODE_THREADS,
                                rates=rates)
                row[f"nodes{label}"] = nodes
                row[f"GiB per node{label}"] = p["memory_per_worker"] / GIB
                row[f"hours{label}"] = p["total_seconds"] / 3600
                row[f"passes share{label}"] = p["seconds"]["passes"] / p["total_seconds"]
            row["factor GB"] = 8.0 * m * m / 1e9
            rows.append(row)
    return rows


#: this machine for the largest m: its memory, what the client process and the system keep
#: (the client holds m-vectors; 0.75 GB at m = 32,768), and the worker memory fraction at
#: which dask pauses a worker (``distributed.worker.memory.pause``)
MACHINE_GIB, CLIENT_RESERVE_GIB, PAUSE_FRACTION = 24.0, 2.0, 0.8


def step_machine(rates: dict, n: int = 464_810, workers: int = 2) -> list:
    """The largest m (a multiple of 1,024) whose factor fits this machine spread over
    ``workers`` single-threaded workers, by :func:`kernel_plan`'s memory per worker against
    ``PAUSE_FRACTION`` of an equal share of the memory the client leaves; with the predicted
    hours of a covtype fit (n rows) at that m."""
    limit = (MACHINE_GIB - CLIENT_RESERVE_GIB) / workers * GIB
    rows, m = [], 32768
    while True:
        p = kernel_plan(n, D, m, workers=workers, rates=rates)
        if p["memory_per_worker"] > PAUSE_FRACTION * limit:
            break
        rows.append({"m": m, "workers": workers, "worker limit GiB": limit / GIB,
                     "predicted GiB per worker": p["memory_per_worker"] / GIB,
                     "factor GB (m x m)": 8.0 * m * m / 1e9,
                     "predicted hours (covtype)": p["total_seconds"] / 3600})
        m += 1024
    return [r for r in rows if r["m"] % 4096 == 0 or r is rows[-1]]


def report(out: str, factor_rows, check_rows, plan_rows, rates, machine_rows=()):
    mi = machine_info()
    md = ["# The kernel route's cost model, checked, and the plan to 10^5 centres", "",
          "Command: `python -m benchmarks.kernel_plan` (steps `factor`, `check`, `plan`, "
          "cached in bench-data/kernel_plan/). Machine: "
          f"{mi['processor']}, {mi['cpus']} cores, {mi['memory_gib']} GiB, load "
          f"{mi['load_average'][0]:.2f}. Rates (one thread): kernel tile "
          f"{rates['tile_flops'] / 1e9:.0f} GFLOP/s, float64 GEMM "
          f"{rates['gemm64_flops'] / 1e9:.0f} GFLOP/s, read "
          f"{rates['read_bytes'] / 1e9:.0f} GB/s.", ""]
    if factor_rows:
        md += ["## The preconditioner's stages, client and workers", "",
               f"Random centres in {D} dimensions, gamma = {GAMMA}; workers are single-threaded "
               "processes whose memory limit is below the m x m matrix when there are two.", "",
               md_table([{"m": r["m"], "where": r["placement"], "workers": r["workers"] or "-",
                          "memory limit GiB": round(r.get("memory_limit_gib", 0), 1) or "-",
                          "K_mm + Cholesky s": round(r["factor_T"], 1),
                          "factor of A s": round(r["factor_A"], 1),
                          "one application s": round(r["apply"], 3),
                          "m x m GiB": round(r["factor_gib"], 2),
                          "peak client GiB": round(r["peak_client_gib"], 2),
                          "peak worker GiB": round(r["peak_worker_gib"], 2)}
                         for r in factor_rows]), ""]
    if check_rows:
        md += ["## Predicted against measured", "",
               "`daskauc.engine.cost.kernel_plan` with the rates above; error = (predicted - "
               "measured) / measured.", "",
               md_table([{**r, "measured s": round(r["measured s"], 3),
                          "predicted s": round(r["predicted s"], 3),
                          "error": f"{100 * r['error']:+.0f}%"} for r in check_rows]), ""]
    if plan_rows:
        md += ["## The plan: m centres, n rows", "",
               f"d = {D}; nodes of {NODE_THREADS} threads and {NODE_GIB} GiB, of which "
               f"{NODE_SHARE:.0%} may hold the factor's tiles and the rows; each thread at "
               "this machine's single-thread rates as the covtype_capacity run measured them "
               "(kernel tile and float64 GEMM); 5 Newton steps and 100 CG steps "
               "(covtype's cold fits), \"mean\" weighting, 2 factorizations of A. `nodes`: "
               "the fewest whose memory holds the factor; then 4x as many. `passes share`: "
               "the fraction of the time in passes over the rows.", "",
               md_table([{k: (round(v, 2) if isinstance(v, float) else v)
                          for k, v in r.items()} for r in plan_rows]), "",
               "Beside Falkon's published figures (GPUs, one node):", "",
               md_table(FALKON), ""]
    if machine_rows:
        last = machine_rows[-1]
        md += ["## The largest m on this machine", "",
               f"{MACHINE_GIB:g} GiB, {CLIENT_RESERVE_GIB:g} GiB kept for the client and the "
               f"system, the rest shared by {last['workers']} single-threaded workers; the "
               f"factor fits while the predicted memory per worker stays below "
               f"{PAUSE_FRACTION:.0%} of a worker's limit (where dask pauses it). The last row "
               f"is the largest m: **{last['m']:,} centres** (its m x m matrix "
               f"{last['factor GB (m x m)']:.1f} GB; the client keeps m-vectors). Predicted, "
               "not run: at that m a cold covtype fit is predicted to take "
               f"{last['predicted hours (covtype)']:.1f} hours on these 2 cores.", "",
               md_table([{k: (round(v, 2) if isinstance(v, float) else v)
                          for k, v in r.items()} for r in machine_rows]), ""]
    write_results("kernel_plan", {"factor": factor_rows, "check": check_rows,
                                  "plan": plan_rows, "machine": list(machine_rows),
                                  "rates": rates}, "\n".join(md), out=out)


def main(argv=None):
    ap = Parser(__doc__, seed=None)
    ap.add_argument("--steps", default="factor,check,plan")
    ap.add_argument("--m", default=",".join(map(str, MS)))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    steps = set(args.steps.split(","))
    rates = _cached("rates", args.force and "factor" in steps, lambda: dict(machine_rates()))
    factor_rows = []
    if steps & {"factor", "check"}:
        for m in (int(v) for v in args.m.split(",")):
            for workers in (0, 1, 2):
                key = f"factor-m{m}-w{workers}"
                if "factor" in steps:
                    factor_rows.append(_cached(key, args.force,
                                               lambda m=m, w=workers: step_factor(m, w)))
                elif os.path.exists(os.path.join(OUT, f"{key}.json")):
                    factor_rows.append(_cached(key, False, lambda: None))
    check_rows = step_check(factor_rows, rates) if "check" in steps else []
    plan_rows = step_plan(capacity_rates(rates)) if "plan" in steps else []
    machine_rows = step_machine(capacity_rates(rates)) if "plan" in steps else []
    report(args.out, factor_rows, check_rows, plan_rows, rates, machine_rows)


if __name__ == "__main__":
    main()
