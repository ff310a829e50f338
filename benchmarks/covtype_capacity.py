"""Model capacity on covtype.binary: kernel-basis NBAUC with m = 4,096 .. 32,768 centres.

The full training part (464,810 rows x 54, stratified 80 / 20 split, seed 0), standardized;
gamma and lam chosen by ``KernelAUC(gamma="auto", lam="auto")`` (validation AUC on a 20,000-row
stratified subsample), then the kernel-basis squared hinge (NBAUC's loss) at each m with
uniform centres, on a LocalCluster of 2 single-threaded worker processes. Beside it in the same
run: xgboost (200 rounds depth 8, 1,000 rounds depth 10) and the 1,600-landmark NBAUC preset.

For each m: test AUC, seconds per stage (centres, K_mm and its factorizations, the Newton /
CG iterations, scoring), passes over the rows and seconds per pass against the flop floor
``2 n m (d + 2)`` at the GEMM rate measured in this run, peak memory of the client and the
workers against the n x m x 4 bytes that are never allocated.

    python -m benchmarks.covtype_capacity                  # everything (restartable)
    python -m benchmarks.covtype_capacity --m 4096,8192    # some m only
    python -m benchmarks.covtype_capacity --steps select,kernel --force
    python -m benchmarks.covtype_capacity --report         # rewrite the tables from the cache

Rows are cached in bench-data/covtype_capacity/ (one JSON per step); --force recomputes.
Writes docs/benchmarks/covtype_capacity.{json,md,png}.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import time
import warnings

import numpy as np

from benchmarks._harness import (
    CACHE_DIR,
    MemorySampler,
    Parser,
    load_dataset,
    machine_info,
    md_table,
    to_cluster,
    write_results,
)
from daskauc.engine.cost import gemm_rate, kernel_tile_rate

OUT = os.path.join(CACHE_DIR, "covtype_capacity")
MS = (4096, 8192, 16384, 32768)
STEPS = ("select", "auto", "kernel", "floor", "cg", "lowrank", "gamma", "xgboost",
         "nbauc1600", "progress")
#: centres of the default-arguments fit (its width walked at this scale)
AUTO_M = 8192
#: the bandwidth against m on a subsample: training rows, validation rows, sizes, multipliers
GAMMA_ROWS, GAMMA_VAL, GAMMA_MS, GAMMA_MULTS = 100_000, 50_000, (4096, 8192), (2, 4, 8)
#: ranks of the low-rank preconditioner compared with the full factor at m = 4,096
LOWRANK_RANKS = (256, 1024)
SEED = 0
GIB = 2.0**30


def _save(key: str, row: dict) -> dict:
    path = os.path.join(OUT, f"{key}.json")
    os.makedirs(OUT, exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        json.dump(row, fh, indent=1, default=float)
    os.replace(path + ".tmp", path)
    return row


def _cached(key: str, force: bool, fn):
    row = None if force else _load(key)
    return row if row is not None else _save(key, fn())


def _kernel_key(m: int, mult: float | None, weighting: str = "auto",
                placement: str = "auto") -> str:
    """Cache key of a kernel row: the selection's width, or ``-x{mult}`` for a given one, then
    ``-{weighting}`` and ``-{placement}`` when they are not "auto"."""
    return (f"kernel-m{m}" + ("" if mult is None else f"-x{mult:g}")
            + "".join(f"-{v}" for v in (weighting, placement) if v != "auto"))


def _model_path(key: str) -> str:
    """The fitted KernelAUC of a kernel row: the next size of the path starts from it."""
    return os.path.join(OUT, key.replace("kernel-", "model-") + ".pkl")


def _warm_model(m: int, gamma: float):
    """``(model, key)`` of the largest kept model with fewer than m centres (of those, the
    width nearest ``gamma``), or (None, None): a later session resumes the path from it."""
    kept = []
    for name in os.listdir(OUT) if os.path.isdir(OUT) else ():
        if name.startswith("model-m") and name.endswith(".pkl"):
            size = int(name[len("model-m"):-len(".pkl")].split("-")[0])
            if size < m:
                with open(os.path.join(OUT, name), "rb") as fh:
                    model = pickle.load(fh)
                kept.append((size, -abs(np.log(model.gamma_ / gamma)), name, model))
    if not kept:
        return None, None
    _, _, name, model = max(kept, key=lambda t: t[:2])
    return model, name[len("model-"):-len(".pkl")]


def _standardized(X: np.ndarray) -> np.ndarray:
    """Rows scaled as KernelAUC's default StandardScaler scales them (float32)."""
    mean = X.mean(axis=0, dtype=np.float64)
    std = X.std(axis=0, dtype=np.float64)
    return ((X - mean) / np.where(std > 0, std, 1.0)).astype(np.float32)


def _keep_model(key: str, est) -> None:
    with open(_model_path(key) + ".tmp", "wb") as fh:
        pickle.dump(est, fh)
    os.replace(_model_path(key) + ".tmp", _model_path(key))


def _load(key: str):
    path = os.path.join(OUT, f"{key}.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


# --------------------------------------------------------------------------------- steps


def step_select(Xd, ytr, Xte, yte):
    """gamma and lam by KernelAUC's automatic choice (its fit at m = 4096 is kept too)."""
    from daskauc import KernelAUC

    t0 = time.perf_counter()
    est = KernelAUC(n_centres=4096, random_state=SEED).fit(Xd, ytr)
    sel = est.selection_
    return {"gamma": est.gamma_, "lam": est.lam_, "gamma_multiplier": sel["gamma_multiplier"],
            "lam_subsample": sel["lam_subsample"], "selection_seconds": sel["seconds"],
            "fit_seconds": time.perf_counter() - t0, "test_auc_m4096": est.score(Xte, yte),
            "table": sel["table"], "rule": sel["rule"]}


def _sessions(history: list) -> list:
    """The seconds of each session of a fit resumed from checkpoints: a record's ``seconds``
    count from its session's start, so they fall back where a session began."""
    out, last = [], None
    for rec in history:
        s = float(rec.get("seconds", 0.0))
        if last is None or s < last:
            out.append({"first_step": int(rec["iter"]), "seconds": 0.0})
        out[-1]["seconds"], out[-1]["last_step"], last = s, int(rec["iter"]), s
    return out


def step_progress(Xte, yte) -> list:
    """The fits still in progress: each checkpoint in the cache, loaded, its iterate scored
    on the test rows (the AUC of the raw scores: a checkpoint has no calibration), with its
    Newton steps so far; recomputed at every call (a checkpoint moves on). The AUC of the
    iterates scored by earlier calls is kept (``auc_by_step``): a checkpoint holds only its
    last iterate."""
    from daskauc.io import load_model
    from daskauc.metrics import roc_auc

    before = {r["key"]: r for r in (_load("progress") or {}).get("checkpoints", [])}
    rows = []
    for name in sorted(os.listdir(OUT)) if os.path.isdir(OUT) else ():
        if not name.endswith("-checkpoint.zarr"):
            continue
        est = load_model(os.path.join(OUT, name))
        hist = est.history_  # the record of the last iterate comes with the next gradient
        key = name[: -len("-checkpoint.zarr")]
        auc = float(roc_auc(yte, np.asarray(est._raw_scores(Xte))))
        prev = before.get(key, {})
        by_step = {**({str(prev["newton_steps"]): prev["test_auc"]} if prev else {}),
                   **prev.get("auc_by_step", {}), str(int(est.n_iter_)): auc}
        rows.append({"key": key, "m": est.centres_.shape[0],
                     "gamma": est.gamma_, "lam": est.lam_,
                     "newton_steps": int(est.n_iter_), "test_auc": auc,
                     "auc_by_step": dict(sorted(by_step.items(), key=lambda kv: int(kv[0]))),
                     "objective_before_last_step": hist[-1]["objective"],
                     "rel_grad_norm_before_last_step": hist[-1]["rel_grad_norm"],
                     "cg_per_newton": [h.get("cg_iter", 0) for h in hist[1:]],
                     "sessions": _sessions(hist), "factor_placement": est.factor_placement})
    return rows


def step_kernel(est, Xd, ytr, Xte, yte, m, rates, checkpoint=None):
    """One size of the path: ``est`` (warm_start=True) refitted with n_centres = m starts
    from the previous size's model (nested uniform centres: exactly the same function).
    With ``checkpoint`` (a path) the fit saves every Newton step there and continues from
    it when it exists: a fit longer than a session goes on in the next one."""
    n, d = Xd.shape
    kwargs = {}
    if checkpoint is not None:
        kwargs = {"checkpoint": checkpoint, "resume": os.path.exists(checkpoint)}
        if kwargs["resume"]:
            logging.info("resuming the fit saved at %s", checkpoint)
    with MemorySampler() as mem:
        t0 = time.perf_counter()
        est.set_params(n_centres=m).fit(Xd, ytr, **kwargs)
        fit_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        auc = est.score(Xte, yte)
        score_s = time.perf_counter() - t1
    pc = est.preconditioner_seconds_
    build = pc.get("kernel", 0.0) + pc.get("cholesky_T", 0.0)  # K_mm and T, once
    refactor = pc.get("lauum", 0.0) + pc.get("cholesky_A", 0.0)  # A, at every refactorization
    solve_iter_s = est.timings_["solve"] - build  # the Newton / CG iterations
    cg = [h.get("cg_iter", 0) for h in est.history_[1:]]
    floor = 2.0 * n * m * (d + 2) / rates["tile_2workers"]
    per_pass = (solve_iter_s - refactor) / max(est.passes_, 1)
    return {"m": m, "gamma": est.gamma_, "lam": est.lam_, "test_auc": auc,
            "fit_seconds": fit_s, "score_seconds": score_s,
            "timings": est.timings_, "preconditioner": pc, "newton_steps": est.n_iter_,
            "converged": est.converged_, "cg_per_newton": cg, "cg_total": int(sum(cg)),
            "passes": est.passes_, "iteration_seconds": solve_iter_s,
            "weighting": est.weighting, "factor_placement": est.factor_placement_,
            "factor_bytes": 8.0 * m * m,
            "seconds_per_pass": per_pass, "pass_floor_seconds": floor,
            "pass_floor_ratio": per_pass / floor, "jitter": est.jitter_,
            "n_x_m_x_4_gib": n * m * 4 / GIB,
            "memory": mem.as_dict(), "history": est.history_,
            "sessions": _sessions(est.history_)}


def step_floor(Xd, m, gamma, rates):
    """One pass alone: ``K alpha`` over every training row at m centres, timed on the cluster,
    against ``2 n m (d + 2)`` flops at the measured GEMM rates."""
    import dask

    from daskauc.solvers.kernel_basis import kernel_row_chunks, kernel_scores

    n, d = Xd.shape
    rng = np.random.default_rng(SEED)
    C = np.asarray(Xd[np.sort(rng.choice(n, m, replace=False))].compute(), dtype=np.float64)
    alpha = rng.standard_normal(m)
    X = Xd.rechunk({0: kernel_row_chunks(n, m, d, 2)}).persist()
    dask.compute(X.sum())
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        kernel_scores(X, C, gamma, alpha).compute()
        times.append(time.perf_counter() - t0)
    best = min(times)
    flops = 2.0 * n * m * (d + 2)
    return {"m": m, "gamma": gamma, "seconds": best, "all_seconds": times, "flops": flops,
            "floor_tile_seconds": flops / rates["tile_2workers"],
            "floor_gemm_seconds": flops / rates["gemm32_2threads"],
            "ratio_tile": best * rates["tile_2workers"] / flops,
            "ratio_gemm": best * rates["gemm32_2threads"] / flops}


class LowRankPreconditioner:
    """A rank-k Nystroem preconditioner of the kernel-basis Hessian, O(m k) memory, for the
    comparison with the full factor (issue 28): ``K_mm`` is approximated from k of its
    columns (a uniform sample of the centres) as ``V diag(lmb) V^T`` (V: m x k orthonormal),
    and ``H ~ ridge K + scale K^2`` (the "mean" weighting) is preconditioned by

        P = V diag(ridge lmb + scale lmb^2) V^T + tau (I - V V^T),

    ``tau`` the value at the smallest kept eigenvalue (Frangella, Tropp & Udell, "Randomized
    Nystroem preconditioning", 2023, put the complement at the k-th eigenvalue). ``P^{-1}``
    costs 4 m k flops. The problem itself (regularizer ``K~``, the whitened norm of the
    stopping rule) stays that of ``full``, the client-side factor, so that CG steps of the two
    are counted on the same systems."""

    placement = "client"

    def __init__(self, full, centres, gamma: float, k: int, seed: int = SEED):
        from scipy.linalg import eigh

        from daskauc._gaussian import gaussian_centres, kernel_block

        self.full, self.m, self.k, self.jitter = full, full.m, int(k), full.jitter
        self.seconds = {"kernel_mk": 0.0, "eig": 0.0}
        self.n_factorizations = 0
        self.ridge = self.scale = self.operator = None
        t0 = time.perf_counter()
        C = np.asarray(centres, dtype=np.float64)
        idx = np.sort(np.random.default_rng(seed).choice(self.m, self.k, replace=False))
        K_mk = kernel_block(C, gaussian_centres(C[idx], gamma, np.float64))
        t1 = time.perf_counter()
        # K_mm ~ K_mk K_kk^+ K_km = U U^T with U = K_mk Q D^{-1/2} (eigenvalues of K_kk below
        # its round-off dropped), then V, lmb from the thin SVD of U
        D, Q = eigh(K_mk[idx])
        keep = D > D.max() * self.k * np.finfo(np.float64).eps
        U = K_mk @ (Q[:, keep] / np.sqrt(D[keep]))
        V, s, _ = np.linalg.svd(U, full_matrices=False)
        self.V, self.lmb = np.ascontiguousarray(V), s**2
        self.seconds["kernel_mk"] += t1 - t0
        self.seconds["eig"] += time.perf_counter() - t1

    def factor(self, ridge: float, scale: float, operator=None, block: int = 512) -> None:
        if operator is not None:
            raise NotImplementedError("the low-rank preconditioner has the 'mean' weighting")
        self.d = ridge * self.lmb + scale * self.lmb**2
        self.tau = float(self.d.min())
        self.ridge, self.scale, self.operator = float(ridge), float(scale), None
        self.n_factorizations += 1

    def apply(self, r) -> np.ndarray:
        r = np.asarray(r, dtype=np.float64)
        c = self.V.T @ r
        return self.V @ (c / self.d) + (r - self.V @ c) / self.tau

    def __getattr__(self, name):  # the problem's own operators: the full factor's
        return getattr(self.__dict__["full"], name)

    @property
    def nbytes(self) -> int:
        return int(self.V.nbytes)


def step_cg(Xtr, ytr, m, gamma, lam, rows=50_000, max_iter=4):
    """CG steps per Newton step on a random 50,000-row subsample at the full data's lam (the
    conditioning of the full problem; a lam moved to 50,000 rows is 3x larger and easy):
    pairs / mean preconditioner / none, KernelAUC's tolerances (tol 1e-3, cg_tol 0.1, at most
    100 CG steps), at most ``max_iter`` Newton steps from zero."""
    X, y, cidx = _cg_problem(Xtr, ytr, m, rows)
    out = {"m": m, "rows": rows, "gamma": gamma}
    for name, kw in (("pairs", {"weighting": "pairs"}), ("mean", {"weighting": "mean"}),
                     ("none", {"precondition": False})):
        out[name] = _cg_run(X, y, cidx, gamma, lam, max_iter, **kw)
    return out


def _cg_problem(Xtr, ytr, m, rows):
    """The CG comparison's subsample and centres (the same for every preconditioner)."""
    rng = np.random.default_rng(SEED)
    idx = np.sort(rng.choice(len(ytr), rows, replace=False))
    return Xtr[idx], ytr[idx], np.sort(rng.choice(rows, m, replace=False))


def _cg_run(X, y, cidx, gamma, lam, max_iter, **kw) -> dict:
    from daskauc.solvers.kernel_newton import kernel_pairwise_newton

    t0 = time.perf_counter()
    res = kernel_pairwise_newton(X, y, X[cidx], gamma=gamma, lam=lam, max_iter=max_iter,
                                 max_cg=100, centre_labels=y[cidx], **kw)
    return {"cg_per_newton": [h.get("cg_iter", 0) for h in res.history[1:]],
            "cg_residual": [h.get("cg_rel_residual") for h in res.history[1:]],
            "rel_grad_norm": res.history[-1]["rel_grad_norm"],
            "converged": res.converged, "passes": res.state["passes"],
            "seconds": time.perf_counter() - t0}


def _apply_seconds(pc, m: int, repeat: int = 20) -> float:
    r = np.random.default_rng(SEED).standard_normal(m)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        pc.apply(r)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def step_lowrank(Xtr, ytr, m, gamma, lam, ranks, rows=50_000, max_iter=4):
    """The rank-k preconditioner (:class:`LowRankPreconditioner`) against the full
    client-side factor ("mean" weighting both) on :func:`step_cg`'s problem: CG steps per
    Newton step, seconds to build and to apply, memory."""
    from daskauc.solvers.kernel_basis import build_preconditioner

    X, y, cidx = _cg_problem(Xtr, ytr, m, rows)
    t0 = time.perf_counter()
    full = build_preconditioner(X[cidx], gamma, placement="client")
    full.factor(1.0, 1.0)
    out = {"m": m, "rows": rows, "gamma": gamma, "lam": lam,
           "load_average_before": os.getloadavg()[0],
           "full": {"build_seconds": time.perf_counter() - t0,
                    "apply_seconds": _apply_seconds(full, m), "bytes": full.nbytes,
                    **_cg_run(X, y, cidx, gamma, lam, max_iter, weighting="mean")}}
    for k in ranks:
        t0 = time.perf_counter()
        pc = LowRankPreconditioner(full, X[cidx], gamma, k)
        pc.factor(1.0, 1.0)
        build = time.perf_counter() - t0
        out[f"rank {k}"] = {"k": k, "build_seconds": build, "bytes": pc.nbytes,
                            "apply_seconds": _apply_seconds(pc, m),
                            **_cg_run(X, y, cidx, gamma, lam, max_iter, weighting="mean",
                                      preconditioner=pc)}
    out["load_average_after"] = os.getloadavg()[0]
    return out


def step_gamma(client, Xtr, ytr, Xte, yte, m, mult, sel):
    """Validation AUC of the kernel route at ``m`` centres and gamma = ``mult``/b on the first
    GAMMA_ROWS training rows (shuffled once by the loader), validated on the next GAMMA_VAL:
    does the best width grow with m (and n) beyond what the 20,000-row selection sees?"""
    from daskauc import KernelAUC
    from daskauc.metrics import roc_auc

    X, y = Xtr[:GAMMA_ROWS], ytr[:GAMMA_ROWS]
    Xv, yv = Xtr[GAMMA_ROWS : GAMMA_ROWS + GAMMA_VAL], ytr[GAMMA_ROWS : GAMMA_ROWS + GAMMA_VAL]
    inv_b = sel["gamma"] / sel["gamma_multiplier"]
    # the selection's lam, moved from its folds' rows to GAMMA_ROWS as KernelAUC moves it
    lam = sel["lam"] * (len(ytr) / GAMMA_ROWS) ** 0.5
    t0 = time.perf_counter()
    est = KernelAUC(n_centres=m, gamma=mult * inv_b, lam=lam, solver="kernel",
                    random_state=SEED).fit(to_cluster(client, X, 25_000), y)
    fit_s = time.perf_counter() - t0
    return {"m": m, "gamma_multiplier": mult, "gamma": mult * inv_b, "lam": lam,
            "rows": GAMMA_ROWS, "val_auc": float(roc_auc(yv, est.decision_function(Xv))),
            "test_auc": est.score(Xte, yte), "fit_seconds": fit_s, "newton_steps": est.n_iter_,
            "passes": est.passes_}


def step_xgboost(Xtr, ytr, Xte, yte, rounds, depth):
    import xgboost as xgb

    from daskauc.metrics import roc_auc

    t0 = time.perf_counter()
    clf = xgb.XGBClassifier(n_estimators=rounds, max_depth=depth,  # default eta 0.3
                            tree_method="hist", n_jobs=2, random_state=SEED)
    clf.fit(Xtr, (ytr > 0).astype(int))
    fit_s = time.perf_counter() - t0
    auc = float(roc_auc(yte, clf.predict_proba(Xte)[:, 1]))
    return {"method": f"xgboost {rounds} rounds depth {depth}", "test_auc": auc,
            "fit_seconds": fit_s}


def step_nbauc1600(Xtr, ytr, Xte, yte):
    """The NBAUC preset as in the reproduction: 1,600 k-means landmarks, gamma = 1/b,
    C = 2^-10 (chosen there by 3-fold CV on the 80,000-row subsample); numpy rows, threaded
    scheduler (2 threads)."""
    from daskauc import NBAUC

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = NBAUC(C=2.0**-10, random_state=SEED).fit(Xtr, ytr)
    return {"method": "NBAUC, 1,600 k-means landmarks (materialized)",
            "test_auc": est.score(Xte, yte), "fit_seconds": time.perf_counter() - t0,
            "timings": est.timings_}


# -------------------------------------------------------------------------------- report


def _power_law(rows):
    """Fit 1 - AUC = a m^-b on the kernel rows; returns (a, b)."""
    ms = np.array([r["m"] for r in rows], float)
    err = np.array([1.0 - r["test_auc"] for r in rows])
    b, log_a = np.polyfit(np.log(ms), np.log(err), 1)
    return float(np.exp(log_a)), float(-b)


def report(ms, out: str):
    sel = _load("select")
    keys = sorted((k[:-5] for k in os.listdir(OUT)
                   if k.startswith("kernel-m") and k.endswith(".json")),
                  key=lambda k: (int(k.split("-")[1][1:]), k)) if os.path.isdir(OUT) else []
    kern = [{**_load(k), "key": k} for k in keys]
    kern = [r for r in kern if r["m"] in ms]
    auto = _load(f"kernel-m{AUTO_M}-auto")
    floors = [r for r in (_load(f"floor-m{m}") for m in (16384,)) if r]
    cgs = [r for r in (_load(f"cg-m{m}") for m in (4096, 8192)) if r]
    base = [r for r in (_load(k) for k in ("xgboost-200-8", "xgboost-1000-10", "nbauc1600"))
            if r]
    rates = _load("rates") or {}
    md = ["# covtype.binary: kernel-basis NBAUC with many centres",
          "",
          "Command: `python -m benchmarks.covtype_capacity` (restartable; `--m`, `--steps`, "
          "`--force`, `--report`). Full training part (464,810 rows x 54, stratified 80/20 "
          "split, seed 0), standardized; test part 116,202 rows. LocalCluster: 2 worker "
          "processes x 1 thread; the preconditioner's factor is held by the client, or as tiles "
          "by the workers where `factor on` says so (their memory limit in `worker limit`). "
          f"Machine: {rates.get('machine', '')}.", ""]
    if sel:
        md += [f"gamma and lam: `KernelAUC(gamma=\"auto\", lam=\"auto\")` chose gamma = "
               f"{sel['gamma_multiplier']:g}/b ({sel['gamma']:.4g}) and lam = {sel['lam']:.3g} "
               f"(lam = {sel['lam_subsample']:.3g} on the subsample's folds) in "
               f"{sel['selection_seconds']:.0f} s ({sel['rule']}).", ""]
    if kern:
        rows = []
        for r in kern:
            pc = r["preconditioner"]
            rows.append({
                "m": r["m"], "gamma": f"{r.get('gamma_multiplier', sel['gamma_multiplier']):g}/b",
                "start": ("default arguments" if r["key"].endswith("-auto") else
                          (r.get("warm_start_from") or "cold").replace("kernel-", "")),
                "weighting": r.get("weighting", "pairs"),
                "factor on": r.get("factor_placement") or "client",
                "worker limit": r.get("memory_limit", "6GiB"),
                "test AUC": round(r["test_auc"], 4),
                "fit s": round(r["fit_seconds"], 1),
                "centres s": round(r["timings"]["centres"], 1),
                "K_mm s": round(pc.get("kernel", 0), 1),
                "chol(T) s": round(pc.get("cholesky_T", 0), 1),
                "lauum/T W T' s": round(pc.get("lauum", 0), 1),
                "chol(A) s": round(pc.get("cholesky_A", 0), 1),
                "Newton": r["newton_steps"], "CG": r["cg_total"], "passes": r["passes"],
                "s/pass": round(r["seconds_per_pass"], 2),
                "floor s/pass": round(r["pass_floor_seconds"], 2),
                "ratio": round(r["pass_floor_ratio"], 2),
                "score s": round(r["score_seconds"], 1),
                "peak client GiB": round(r["memory"]["peak_client_gib"], 2),
                "peak worker GiB": round(r["memory"]["peak_worker_gib"], 2),
                "8 m^2 GiB": round(8.0 * r["m"] ** 2 / GIB, 2),
                "n x m x 4 GiB": round(r["n_x_m_x_4_gib"], 1),
            })
        md += ["## Kernel basis (uniform centres)", "",
               "`start`: the model the fit was warm-started from (same width: its "
               "coefficients; another width: its function interpolated at the centres); "
               "`default arguments`: `KernelAUC(n_centres=m)` with everything chosen "
               "(selection and width walk included in `fit s`; its peak worker memory is the "
               "walk's 100,000 x 8,192 embedding, which the cost switch chose for the walk's "
               "fits).",
               "", md_table(rows), ""]
        md += ["`s/pass` is the time of the Newton and CG iterations, less the refactorizations "
               "of A, over the passes they made (the client's triangular solves and the sorts "
               "included); `floor` is 2 n m (d + 2) flops at "
               "the kernel-tile GEMM rate measured in this run (2 threads of one BLAS thread "
               "each, as the workers); `lauum/T W T'` "
               "includes every refactorization of A. CG steps per Newton step: "
               + "; ".join(f"m = {r['m']}: {r['cg_per_newton']}" for r in kern) + ".", ""]
        for width in sorted({r.get("gamma_multiplier", sel["gamma_multiplier"]) for r in kern}):
            part = {r["m"]: r for r in kern
                    if r.get("gamma_multiplier", sel["gamma_multiplier"]) == width}
            if len(part) < 2:
                continue
            a, b = _power_law(list(part.values()))
            md += [f"Power law through the {len(part)} sizes at {width:g}/b: 1 - AUC = "
                   f"{a:.3g} m^-{b:.3f}; it predicts {1 - a * 32768.0**-b:.4f} at m = 32,768, "
                   f"{1 - a * 65536.0**-b:.4f} at 65,536 and {1 - a * 131072.0**-b:.4f} at "
                   f"131,072 (and 0.98 at m = {(a / 0.02) ** (1 / b):,.0f}).", ""]
    if auto and "width_walk" in auto["selection"]:
        w = auto["selection"]["width_walk"]
        md += ["## The width walk of the default-arguments fit", "",
               f"`KernelAUC(n_centres={AUTO_M})`: the selection chose "
               f"{w['table'][0]['gamma_multiplier']:g}/b on its 20,000-row subsample with "
               f"{auto['selection']['n_centres']:,} centres; the walk "
               f"({w['centres']:,} centres, {w['rows']:,} training and "
               f"{w['validation_rows']:,} validation rows, lam = {w['lam']:.3g}) took "
               f"{w['seconds']:.0f} s and chose {auto['selection']['gamma_multiplier']:g}/b.", "",
               md_table([{"gamma": f"{t['gamma_multiplier']:g}/b",
                          "validation AUC": round(t["val_auc"], 4), "route": t["route"],
                          "Newton": t["n_iter"], "passes": t["passes"],
                          "seconds": round(t["seconds"], 1)} for t in w["table"]]), ""]
    if floors:
        f = floors[0]
        md += ["## One pass at m = 16,384", "",
               f"`K alpha` over all 464,810 rows (one compute, best of 5): {f['seconds']:.2f} s; "
               f"2 n m (d + 2) = {f['flops']:.3g} flops take {f['floor_tile_seconds']:.2f} s at "
               f"the kernel-tile GEMM rate ({rates.get('tile_2workers', 0) / 1e9:.0f} GFLOP/s "
               f"on 2 single-threaded workers) and {f['floor_gemm_seconds']:.2f} s at the "
               "large-GEMM rate "
               f"({rates.get('gemm32_2threads', 0) / 1e9:.0f} GFLOP/s): ratios "
               f"**{f['ratio_tile']:.2f}** and {f['ratio_gemm']:.2f}.", ""]
    if cgs:
        rows = []
        for c in cgs:
            for name in ("pairs", "mean", "none"):
                rows.append({"m": c["m"], "preconditioner": name,
                             "CG per Newton step": c[name]["cg_per_newton"],
                             "passes": c[name].get("passes"),
                             "|grad| / |grad0| reached": f"{c[name].get('rel_grad_norm', 0):.1e}",
                             "converged": c[name].get("converged"),
                             "seconds": round(c[name]["seconds"], 1)})
        md += ["## CG steps with and without the preconditioner", "",
               f"A random {cgs[0]['rows']:,}-row subsample at the full data's lam (the "
               "conditioning of the full problem), gamma = "
               f"{cgs[0].get('gamma', sel['gamma']) * sel['gamma_multiplier'] / sel['gamma']:g}/b, "
               "KernelAUC's tolerances "
               "(tol = 1e-3, cg_tol = 0.1, at most 100 CG steps per Newton step), at most 4 "
               "Newton steps from zero. `none` still measures residuals in the whitened norm.",
               "", md_table(rows), ""]
    prog = [r for r in (_load("progress") or {}).get("checkpoints", []) if r["m"] in ms]
    if prog:
        md += ["## Fits in progress (checkpoints)", "",
               "A fit longer than a session checkpoints every Newton step (`--checkpoint`) and "
               "goes on in the next session; its iterate so far, scored on the test part "
               "(`--steps progress`). The gradient is that of the iterate before the last "
               "step (the last one's comes with the next step).", "",
               md_table([{"fit": r["key"], "factor on": r["factor_placement"],
                          "Newton steps": r["newton_steps"],
                          "test AUC so far": round(r["test_auc"], 4),
                          "test AUC by Newton step": ", ".join(
                              f"{k}: {v:.4f}" for k, v in r.get("auc_by_step", {}).items()),
                          "CG per Newton step": r["cg_per_newton"],
                          "|grad| / |grad0| before the last step":
                              f"{r['rel_grad_norm_before_last_step']:.2f}"}
                         for r in prog]), ""]
    low = _load("lowrank-m4096")
    if low:
        rows = [{"preconditioner": "full factor (client)" if name == "full" else name,
                 "memory (MB)": round(r["bytes"] / 1e6, 1),
                 "build (s)": round(r["build_seconds"], 2),
                 "one application (ms)": round(1e3 * r["apply_seconds"], 2),
                 "CG per Newton step": r["cg_per_newton"], "passes": r["passes"],
                 "|grad| / |grad0| reached": f"{r['rel_grad_norm']:.1e}",
                 "seconds": round(r["seconds"], 1)}
                for name, r in low.items() if isinstance(r, dict)]
        md += ["## The rank-k preconditioner against the full factor", "",
               f"The problem of the CG table ({low['rows']:,} rows, m = {low['m']:,}, the full "
               "data's lam, \"mean\" weighting, at most 100 CG steps, 4 Newton steps); the "
               "rank-k preconditioner (`LowRankPreconditioner` in this script: K_mm from k "
               "uniformly sampled columns, the complement of its range at the k-th "
               "eigenvalue) holds m k numbers instead of m^2. The kernel-basis Hessian "
               "`K~ + 2C K^T L K` has no identity term: in the directions where K_mm's "
               "eigenvalues fall from the k-th to the jitter it spans as many orders of "
               "magnitude, which only the full factor undoes.", "", md_table(rows), ""]
        if "load_average_before" in low:
            md += [f"Load average {low['load_average_before']:.1f} before the run and "
                   f"{low['load_average_after']:.1f} after it (2 cores): above 2, the seconds "
                   "are those of a shared machine; the CG steps do not depend on it.", ""]
        else:  # the first run, 2026-11-26, shared the machine with the 32,768-centre fit
            md += ["This run shared the 2 cores with another fit (load average 6-8): its "
                   "seconds are not comparable with each other or with the tables above; "
                   "the CG steps and passes do not depend on the load.", ""]
    gam = [r for r in (_load(f"gamma-m{m}-x{g}") for m in GAMMA_MS for g in GAMMA_MULTS) if r]
    if gam:
        md += ["## The width against m on a subsample", "",
               f"Kernel route on the first {GAMMA_ROWS:,} (shuffled) training rows, validation "
               f"AUC on the next {GAMMA_VAL:,}, lam = the chosen lam moved to "
               f"{GAMMA_ROWS:,} rows; test AUC for reference.", "",
               md_table([{"m": r["m"], "gamma": f"{r['gamma_multiplier']}/b",
                          "validation AUC": round(r["val_auc"], 4),
                          "test AUC": round(r["test_auc"], 4), "Newton": r["newton_steps"],
                          "passes": r["passes"], "fit s": round(r["fit_seconds"], 1)}
                         for r in gam]), ""]
    if base:
        md += ["## What a user would pick instead (same run)", "",
               md_table([{"method": r["method"], "test AUC": round(r["test_auc"], 4),
                          "fit s": round(r["fit_seconds"], 1)} for r in base]), ""]
    fig = None
    if kern:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        ms_ = [r["m"] for r in kern]
        for width in sorted({r.get("gamma_multiplier", sel["gamma_multiplier"]) for r in kern}):
            part = [r for r in kern if r.get("gamma_multiplier", sel["gamma_multiplier"])
                    == width]
            ax1.plot([r["m"] for r in part], [r["test_auc"] for r in part], "o-",
                     label=f"kernel basis, NBAUC loss, gamma = {width:g}/b")
        for r in base:
            ax1.axhline(r["test_auc"], ls="--", lw=1, label=r["method"], color=None)
        ax1.set_xscale("log", base=2)
        ax1.set_xlabel("centres m")
        ax1.set_ylabel("test AUC")
        ax1.legend(fontsize=7)
        ax2.plot(ms_, [r["fit_seconds"] for r in kern], "o", label="fit")
        ax2.plot(ms_, [r["iteration_seconds"] for r in kern], "s", label="Newton/CG iterations")
        ax2.plot(ms_, [sum(r["preconditioner"].get(k, 0) for k in
                           ("kernel", "cholesky_T", "lauum", "cholesky_A")) for r in kern],
                 "^", label="preconditioner")
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        ax2.set_xlabel("centres m")
        ax2.set_ylabel("seconds")
        ax2.legend(fontsize=7)
        fig.suptitle("covtype.binary, 464,810 training rows, 2 cores")
    write_results("covtype_capacity", {"select": sel, "kernel": kern, "floor": floors,
                                       "cg": cgs, "lowrank": low, "progress": prog,
                                       "gamma": gam,
                                       "baselines": base,
                                       "rates": rates},
                  "\n".join(md), figure=fig, out=out)


# ---------------------------------------------------------------------------------- main


def main(argv=None):
    # no --quick (every step is covtype-sized) and no --seed (its steps are cached, SEED's)
    ap = Parser(__doc__, seed=None)
    ap.add_argument("--m", default=",".join(map(str, MS)))
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--report", action="store_true", help="only rewrite the report")
    ap.add_argument("--memory-limit", default="6GiB", help="per worker")
    ap.add_argument("--weighting", default="auto", choices=("auto", "mean", "pairs"),
                    help="kernel step: KernelAUC's preconditioner weighting")
    ap.add_argument("--factor-placement", default="auto", choices=("auto", "client", "workers"),
                    help="kernel step: where KernelAUC keeps the preconditioner's factor")
    ap.add_argument("--checkpoint", action="store_true",
                    help="kernel step: checkpoint every Newton step in the cache and resume "
                         "from it (a fit longer than a session goes on in the next)")
    ap.add_argument("--gamma-multiplier", type=float, default=None,
                    help="kernel step: gamma = this / b instead of the selection's (the width "
                         "measured at the final scale, e.g. by the gamma step)")
    args = ap.parse_args(argv)
    ms = [int(v) for v in args.m.split(",")]
    steps = set(args.steps.split(","))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("distributed", "bokeh", "tornado"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.report:
        report(MS, args.out)
        return
    from distributed import Client, LocalCluster

    Xtr, ytr, Xte, yte, note = load_dataset("covtype")
    Xtr, Xte = Xtr.astype(np.float32), Xte.astype(np.float32)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=args.memory_limit, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        logging.info("dashboard %s", client.dashboard_link)
        Xd = to_cluster(client, Xtr, 50_000)
        if args.checkpoint:
            # a checkpoint records its data by the dask array's name: scattered blocks get
            # another name in every process (the resume was refused: "fitted on other data"),
            # so the rows are named by a hash of their values (0.1 s for 100 MB)
            from dask.base import tokenize

            Xd = Xd.map_blocks(lambda b: b, name=f"covtype-train-rows-{tokenize(Xtr)}")
        Xd = Xd.persist()
        rates = _cached("rates", args.force, lambda: {
            "tile_1thread": kernel_tile_rate(54, 1), "tile_2workers": kernel_tile_rate(54, 2),
            "gemm32_2threads": gemm_rate(np.float32), "gemm64_2threads": gemm_rate(np.float64),
            "machine": (lambda mi: f"{mi['processor']}, {mi['cpus']} cores, "
                        f"{mi['memory_gib']} GiB, load {mi['load_average'][0]:.2f}")(
                            machine_info())})
        sel = None
        if steps & {"select", "kernel", "cg", "lowrank", "gamma"}:
            sel = _cached("select", args.force and "select" in steps,
                          lambda: step_select(Xd, ytr, Xte, yte))
            logging.info("chosen gamma %.4g (%g/b), lam %.3g", sel["gamma"],
                         sel["gamma_multiplier"], sel["lam"])
        if "auto" in steps and (args.force or _load(f"kernel-m{AUTO_M}-auto") is None):
            # KernelAUC with default arguments at AUTO_M centres: the selection, then the
            # width walked at AUTO_M centres on 100,000 rows, then the full fit
            from daskauc import KernelAUC

            est = KernelAUC(random_state=SEED)
            row = step_kernel(est, Xd, ytr, Xte, yte, AUTO_M, rates)
            _save(f"kernel-m{AUTO_M}-auto", {**row, "selection": est.selection_,
                                            "gamma_multiplier": est.selection_[
                                                "gamma_multiplier"]})
            _keep_model(f"kernel-m{AUTO_M}-auto", est)
        if "kernel" in steps:
            from daskauc import KernelAUC

            gamma = sel["gamma"]
            if args.gamma_multiplier is not None:
                gamma = args.gamma_multiplier * sel["gamma"] / sel["gamma_multiplier"]
            # the path warm-starts each size from the one before (kept on disk)
            est, prev = _warm_model(min(ms), gamma)
            if est is not None and abs(est.gamma_ / gamma - 1.0) < 1e-9:
                gamma = est.gamma_  # the same width, to the bit: its coefficients carry over
            if est is None:
                est = KernelAUC(lam=sel["lam"], solver="kernel", warm_start=True,
                                random_state=SEED)
            for m in sorted(ms):
                key = _kernel_key(m, args.gamma_multiplier, args.weighting,
                                  args.factor_placement)
                if _load(key) is not None and not args.force:
                    if os.path.exists(_model_path(key)):
                        with open(_model_path(key), "rb") as fh:
                            est = pickle.load(fh)
                        prev = key
                    continue
                # at a new width the previous size's function is interpolated at the centres
                row = step_kernel(est.set_params(gamma=gamma, lam=sel["lam"], solver="kernel",
                                                 warm_start=True, weighting=args.weighting,
                                                 factor_placement=args.factor_placement),
                                  Xd, ytr, Xte, yte, m, rates,
                                  checkpoint=os.path.join(OUT, key + "-checkpoint.zarr")
                                  if args.checkpoint else None)
                _save(key, {**row, "gamma_multiplier": gamma * sel["gamma_multiplier"]
                            / sel["gamma"], "warm_start_from": prev,
                            "memory_limit": args.memory_limit})
                _keep_model(key, est)
                prev = key
        if steps & {"floor", "cg", "lowrank"}:
            # the solvers below take rows as KernelAUC sees them: standardized (the loader's
            # rows are raw, where every kernel value between two rows underflows to 0)
            Xtr_s = _standardized(Xtr)
        if "floor" in steps:
            # at the width the default arguments chose (the selection's before that run)
            width = _load(f"kernel-m{AUTO_M}-auto") or sel or _load("select")
            _cached("floor-m16384", args.force,
                    lambda: step_floor(to_cluster(client, Xtr_s, 50_000), 16384,
                                       width["gamma"], rates))
        if "cg" in steps:  # at the chosen width too
            width = _load(f"kernel-m{AUTO_M}-auto") or sel
            for m in (4096, 8192):
                _cached(f"cg-m{m}", args.force,
                        lambda m=m: step_cg(Xtr_s, ytr, m, width["gamma"], sel["lam"]))
        if "lowrank" in steps:
            width = _load(f"kernel-m{AUTO_M}-auto") or sel
            _cached("lowrank-m4096", args.force,
                    lambda: step_lowrank(Xtr_s, ytr, 4096, width["gamma"], sel["lam"],
                                         LOWRANK_RANKS))
        if "progress" in steps:
            _save("progress", {"checkpoints": step_progress(Xte, yte)})
        if "gamma" in steps:
            for m in GAMMA_MS:
                for mult in GAMMA_MULTS:
                    _cached(f"gamma-m{m}-x{mult}", args.force,
                            lambda m=m, g=mult: step_gamma(client, Xtr, ytr, Xte, yte, m, g,
                                                           sel or _load("select")))
    if "nbauc1600" in steps:  # threaded, like xgboost: the k-means epochs stream their chunks
        # with a local scheduler, which cannot see rows persisted on a cluster (issue 14)
        import dask

        with dask.config.set(scheduler="threads"):
            _cached("nbauc1600", args.force, lambda: step_nbauc1600(Xtr, ytr, Xte, yte))
    if "xgboost" in steps:
        for rounds, depth in ((200, 8), (1000, 10)):
            _cached(f"xgboost-{rounds}-{depth}", args.force,
                    lambda r=rounds, dd=depth: step_xgboost(Xtr, ytr, Xte, yte, r, dd))
    report(MS, args.out)


if __name__ == "__main__":
    main()
