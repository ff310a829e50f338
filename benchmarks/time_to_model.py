"""Time to a good model: every daskauc classifier with its default arguments beside xgboost,
LightGBM and scikit-learn's HistGradientBoosting, in the same run, on the same rows.

Issue 27's yardstick. For each dataset (the harness's splits; ``covtype-100k`` is a
stratified 100,000-row subsample of covtype's training rows with covtype's test set), the
features are standardized on the training rows for everyone, then every method is fitted
once on them:

* each public daskauc classifier constructed with its defaults, only ``random_state`` set;
* xgboost ``XGBClassifier(n_estimators=500, max_depth=8, tree_method="hist")``, LightGBM
  ``LGBMClassifier()`` and ``HistGradientBoostingClassifier()`` (only ``random_state`` set,
  and LightGBM's ``verbose=-1``), on labels 0 / 1.

Recorded per (dataset, method): the exact test AUC (:func:`daskauc.roc_auc` of the decision
function, the trees' raw margins), the fit's wall time, the hyper-parameter selection's time
and candidates where the estimator records one (``selection_``, the presets' under
``solver_``), the final fit's time (fit minus selection), the fit time over the fastest
boosted trees' and over xgboost's, and the process's resident memory: its peak during the fit
(the harness's sampler) and the rise over the fit's start; the process's CPU seconds during
the fit (over the wall time: the cores it had; other processes on the machine take theirs,
whatever its niceness). Every method is first fitted once,
untimed, on 300 rows of the first dataset, so that no time includes numba's compilation (a
new process's first fit is issue 27's item 4, measured apart). A fit shorter than 10 s is
repeated, three fits in all, and the fastest kept (the harness's best-of rule: on a shared
machine a run can only come out slower; the trees' OpenMP barriers suffer most from another
process on the cores); every time is recorded. OpenMP's idle threads sleep
(``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it; daskauc uses no OpenMP): with
other processes on the 2 cores (load average 5.4) spinning threads made xgboost's fit on
ijcnn1 take 9.7-16.3 s, against 3.5-3.8 s with them sleeping and 2.7 s on one thread.

The budget: datasets run from the fewest training rows to the most; a method is skipped on a
dataset (and recorded as skipped, with the reason) when its last measured fit on a smaller
one predicts more than ``--budget`` seconds or more memory than is available. The prediction
scales the final fit by the ratio of training rows to the power ``GROWTH`` (1, or the
method's own), and the selection by the ratio of rows when it used every row, else not at all
(it ran on a subsample of bounded size); the prediction is recorded beside every time
measured, so the rule's error is on the page (the features, the class ratio and the load
differ between datasets too). Datasets of earlier runs in ``--out``'s JSON are kept on the
page (each with its date and load) and serve as the budget's smaller datasets.

    python -m benchmarks.time_to_model [--datasets ijcnn1,spambase] [--methods NSAUC,xgboost]
        [--budget 1800]

Run it alone on the machine (``flock /tmp/daskauc-bench.lock ...``): it reports fit times.
Writes docs/benchmarks/time_to_model.{json,md,png}.
"""

from __future__ import annotations

import ast
import gc
import inspect
import json
import os
import sys
import time
import warnings

import numpy as np

from benchmarks._harness import (
    CACHE_DIR,
    MemorySampler,
    Parser,
    command,
    load_dataset,
    machine_info,
    md_table,
    stratified_rows,
    timed,
    write_results,
)

NAME = "time_to_model"
#: the datasets, from the fewest training rows to the most (the budget's order)
DATASETS = ("spambase", "a9a", "w8a", "ijcnn1", "covtype-100k", "covtype")
#: training rows of the covtype subsample
SUBSAMPLE = {"covtype-100k": ("covtype", 100_000)}
TREES = ("xgboost", "LightGBM", "HistGradientBoosting")
#: (time, memory) exponents of the training rows where not (1, 1): KernelRankSVM makes every
#: row a landmark, an n x n eigendecomposition and an n x n embedding
GROWTH = {"KernelRankSVM": (3, 2)}
#: seconds a fit may be predicted to take (--budget's default): half an hour, twice issue 27's
#: 15 minutes for KernelAUC on covtype, as the prediction is off by up to 4x either way (the
#: rows are not the only thing that differs between datasets)
BUDGET = 1800.0
#: share of the available memory a fit may be predicted to add
MEMORY_SHARE = 0.8
#: rows of the untimed first fit of every method (--warm-up-rows)
WARMUP_ROWS = 300
#: a fit shorter than this (seconds) is repeated (--repeat fits in all) and the fastest kept
REPEAT_UNDER = 10.0
#: test AUC below the best shown on the figure's axis (lower ones are listed beneath it)
WINDOW = 0.03
#: how close to the best boosted trees' test AUC counts as "as good"
TIE = 0.001


def daskauc_methods() -> list[str]:
    """Every public daskauc classifier, in the order of ``daskauc.__all__``."""
    from sklearn.base import ClassifierMixin

    import daskauc

    return [n for n in daskauc.__all__ if isinstance(getattr(daskauc, n), type)
            and issubclass(getattr(daskauc, n), ClassifierMixin)]


def make(method: str, seed: int):
    """The estimator ``method`` with its defaults, only ``random_state`` set; a daskauc
    method may set one more argument as ``Name(arg=value)``, e.g. ``KernelAUC(n_centres=16384)``
    (the value a Python literal)."""
    if method == "xgboost":
        from xgboost import XGBClassifier

        return XGBClassifier(n_estimators=500, max_depth=8, tree_method="hist",
                             random_state=seed)
    if method == "LightGBM":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(random_state=seed, verbose=-1)
    if method == "HistGradientBoosting":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(random_state=seed)
    import daskauc

    name, _, arg = method.partition("(")
    cls, kwargs = getattr(daskauc, name), {}
    if arg:
        key, _, value = arg.rstrip(")").partition("=")
        kwargs[key.strip()] = ast.literal_eval(value.strip())
    if "random_state" in inspect.signature(cls).parameters:
        kwargs["random_state"] = seed
    return cls(**kwargs)


def scores(method: str, est, X) -> np.ndarray:
    """The ranking scores: the trees' raw margins (probabilities would tie where the logistic
    saturates), daskauc's decision function."""
    if method == "xgboost":
        return est.predict(X, output_margin=True)
    if method == "LightGBM":
        return est.predict(X, raw_score=True)
    return est.decision_function(X)


# ----------------------------------------------------------------------------- data


def prepare(name: str, rows: int | None, test_rows: int | None, seed: int) -> dict:
    """Standardized training and test rows of ``name`` (scaler fitted on the training rows),
    at most ``rows`` / ``test_rows`` of them (stratified subsamples)."""
    from daskauc import StandardScaler

    base, cap = SUBSAMPLE.get(name, (name, None))
    Xtr, ytr, Xte, yte, note = load_dataset(base)
    cap = min(c for c in (cap, rows, len(ytr)) if c is not None)
    if cap < len(ytr):
        idx = stratified_rows(ytr, cap, seed)
        Xtr, ytr = Xtr[idx], ytr[idx]
        note += f"; a stratified {cap:,}-row subsample of the training rows (seed {seed})"
    if test_rows is not None and test_rows < len(yte):
        idx = stratified_rows(yte, test_rows, seed)
        Xte, yte = Xte[idx], yte[idx]
        note += f"; a stratified {test_rows:,}-row subsample of the test rows"
    scaler = StandardScaler().fit(Xtr)
    return {"name": name, "Xtr": np.ascontiguousarray(scaler.transform(Xtr)), "ytr": ytr,
            "Xte": np.ascontiguousarray(scaler.transform(Xte)), "yte": yte, "note": note}


def _labels(method: str, y: np.ndarray) -> np.ndarray:
    return (y > 0).astype(np.int64) if method in TREES else y


# ----------------------------------------------------------------------------- one fit


def _plain(obj):
    """``obj`` with numpy arrays and scalars as lists and Python numbers (for JSON)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _tried(table) -> int:
    """Candidates of a selection table that were evaluated (an AUC recorded)."""
    return sum(1 for r in table or () if isinstance(r, dict)
               and any(k.endswith("auc") and v is not None for k, v in r.items()))


def selection(est) -> dict | None:
    """What the estimator records of its hyper-parameter selection: seconds (its
    ``timings_["selection"]``, else the selection's own ``seconds``), candidates tried (a
    ``candidates`` count where it gives one, else the rows of its tables with an AUC), why it
    stopped where it says, and the record itself."""
    holder = est if getattr(est, "selection_", None) else getattr(est, "solver_", None)
    sel = getattr(holder, "selection_", None)
    if not sel:
        return None
    seconds = getattr(est, "timings_", {}).get("selection", sel.get("seconds"))
    if isinstance(sel.get("candidates"), (int, np.integer)):
        tried = int(sel["candidates"])
    else:
        tried = _tried(sel.get("table")) + _tried((sel.get("width_walk") or {}).get("table"))
    stopped = next((sel[k] for k in ("stopped", "stop", "reason") if k in sel), None)
    return {"seconds": None if seconds is None else float(seconds), "candidates": tried,
            "stopped": stopped, "record": _plain(sel)}


def fit_one(method: str, data: dict, seed: int, repeat: int) -> dict:
    """Fit ``method`` on ``data``'s training rows and measure it (module docstring); a fit
    shorter than ``REPEAT_UNDER`` seconds is repeated, ``repeat`` fits in all, and the
    fastest kept."""
    import psutil

    from daskauc import roc_auc

    y = _labels(method, data["ytr"])
    gc.collect()
    me = psutil.Process()
    rss0 = me.memory_info().rss
    load0 = os.getloadavg()[0]
    times, cpu = [], []
    with warnings.catch_warnings(record=True) as caught, MemorySampler(0.05) as mem:
        warnings.simplefilter("always")
        while not times or (len(times) < repeat and max(times) < REPEAT_UNDER):
            est = make(method, seed)
            c0 = me.cpu_times()
            times.append(timed(est.fit, data["Xtr"], y)[1])
            c1 = me.cpu_times()
            cpu.append(c1.user + c1.system - c0.user - c0.system)
    fit_s = min(times)
    auc = float(roc_auc(data["yte"], scores(method, est, data["Xte"])))
    sel = selection(est)
    sel_s = sel["seconds"] if sel else None
    gib = 2.0**30
    return {"method": method, "kind": "trees" if method in TREES else "daskauc",
            "status": "ran", "test_auc": auc, "fit_s": fit_s, "fit_s_all": times,
            "cpu_s": cpu[times.index(fit_s)],
            "selection_s": sel_s, "final_fit_s": fit_s - sel_s if sel_s is not None else fit_s,
            "candidates": sel["candidates"] if sel else None,
            "selection_stopped": sel["stopped"] if sel else None,
            "peak_gib": mem.peak_client / gib, "rise_gib": max(mem.peak_client - rss0, 0) / gib,
            "timings": _plain(getattr(est, "timings_", None)),
            "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:160]}"
                                for w in caught}),
            "load_before": load0, "load_after": os.getloadavg()[0],
            "selection": sel["record"] if sel else None}


def warm_up(methods, data: dict, rows: int, seed: int) -> None:
    """One untimed fit of every method on ``rows`` stratified rows of ``data``: numba
    compiles (or loads from its cache) the kernels the fits use."""
    idx = stratified_rows(data["ytr"], rows, seed)
    X = data["Xtr"][idx]
    for method in methods:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make(method, seed).fit(X, _labels(method, data["ytr"][idx]))
        except Exception as exc:  # the timed fit will fail and say why
            print(f"warm-up of {method} failed: {exc!r}", flush=True)


# ----------------------------------------------------------------------------- budget


def predict(method: str, earlier: list[dict], n: int) -> dict | None:
    """What ``method``'s last measured fit on as many rows or fewer predicts on ``n``
    training rows: ``{"fit_s", "rise_gib", "from", "n_from"}``, or None without one. The
    fit without its selection scales as the rows to the power ``GROWTH`` (1 unless the
    method says otherwise), the selection as the rows when it used every row of the smaller
    dataset and not at all when it used a subsample (its size is bounded); the memory the
    fit added as the rows to ``GROWTH``'s second power."""
    ran = [(d["n_train"], d["name"], r) for d in earlier for r in d["rows"]
           if r["method"] == method and r["status"] == "ran" and d["n_train"] <= n]
    if not ran:
        return None
    n0, name, r = max(ran, key=lambda t: t[0])
    p, q = GROWTH.get(method, (1, 1))
    sel = r["selection_s"] or 0.0
    sel_rows = (r.get("selection") or {}).get("n_rows")
    grown = sel if sel_rows is not None and sel_rows < n0 else sel * n / n0
    return {"fit_s": grown + (r["fit_s"] - sel) * (n / n0) ** p,
            "rise_gib": r["rise_gib"] * (n / n0) ** q, "from": name, "n_from": n0}


def skip_reason(guess: dict | None, budget: float) -> str | None:
    import psutil

    if guess is None:
        return None
    free = MEMORY_SHARE * psutil.virtual_memory().available / 2.0**30
    said = f"from {guess['from']} ({guess['n_from']:,} rows)"
    if budget > 0 and guess["fit_s"] > budget:
        return f"predicted {guess['fit_s']:,.0f} s {said} > budget {budget:g} s"
    if guess["rise_gib"] > free:
        return (f"predicted +{guess['rise_gib']:.1f} GiB {said} > {MEMORY_SHARE:.0%} of the "
                f"available memory ({free:.1f} GiB)")
    return None


# ----------------------------------------------------------------------------- run


def run_dataset(name: str, methods, args, earlier: list[dict], warm: set) -> dict:
    data = prepare(name, args.rows, args.test_rows, args.seed)
    n, d = data["Xtr"].shape
    todo = [m for m in methods if m not in warm]
    if todo and args.warm_up_rows > 0:
        warm_up(todo, data, args.warm_up_rows, args.seed)
        warm.update(todo)
    out = {"name": name, "n_train": int(n), "n_test": int(len(data["yte"])), "d": int(d),
           "positive_share": float(np.mean(data["ytr"] > 0)), "note": data["note"],
           "date": time.strftime("%Y-%m-%d %H:%M"), "load_before": os.getloadavg(),
           "command": command(__spec__.name if __spec__ else "benchmarks.time_to_model"),
           "budget": args.budget, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
           "repeat": args.repeat, "warm_up_rows": args.warm_up_rows,
           "rows": []}
    for method in methods:
        guess = predict(method, earlier, n)
        reason = skip_reason(guess, args.budget)
        if reason is not None:
            row = {"method": method, "status": "skipped", "reason": reason}
        else:
            try:
                row = fit_one(method, data, args.seed, args.repeat)
            except Exception as exc:
                row = {"method": method, "status": "failed",
                       "reason": f"{type(exc).__name__}: {exc}"[:300]}
        row["kind"] = "trees" if method in TREES else "daskauc"
        row["predicted_fit_s"] = guess["fit_s"] if guess else None
        out["rows"].append(row)
        said = (f"AUC {row['test_auc']:.4f} in {row['fit_s']:.2f} s" if row["status"] == "ran"
                else f"{row['status']}: {row['reason']}")
        print(f"{name:13s} {method:22s} {said}", flush=True)
    out["load_after"] = os.getloadavg()
    ratios(out["rows"])
    return out


def ratios(rows: list[dict]) -> None:
    """Each fit time over the fastest boosted trees' and over xgboost's (same dataset)."""
    ran = {r["method"]: r for r in rows if r["status"] == "ran"}
    trees = [ran[m]["fit_s"] for m in TREES if m in ran]
    for r in ran.values():
        r["x_fastest_trees"] = r["fit_s"] / min(trees) if trees else None
        r["x_xgboost"] = r["fit_s"] / ran["xgboost"]["fit_s"] if "xgboost" in ran else None


def pareto(rows: list[dict]) -> set[str]:
    """Methods no other beats on both test AUC and fit time (ties kept)."""
    ran = [r for r in rows if r["status"] == "ran"]
    return {r["method"] for r in ran
            if not any(o["fit_s"] <= r["fit_s"] and o["test_auc"] >= r["test_auc"]
                       and (o["fit_s"] < r["fit_s"] or o["test_auc"] > r["test_auc"])
                       for o in ran)}


# ----------------------------------------------------------------------------- report


def _s(v, fmt=".2f"):
    return "" if v is None else format(v, fmt)


def dataset_table(ds: dict) -> str:
    front = pareto(ds["rows"])
    ran = sorted((r for r in ds["rows"] if r["status"] == "ran"), key=lambda r: r["fit_s"])
    table = [{"method": r["method"] + (" *" if r["method"] in front else ""),
              "test AUC": f"{r['test_auc']:.4f}", "fit s": _s(r["fit_s"]),
              "selection s": _s(r["selection_s"]),
              "final fit s": _s(r["final_fit_s"]) if r["selection_s"] is not None else "",
              "candidates": "" if r["candidates"] is None else str(r["candidates"]),
              "x fastest trees": _s(r.get("x_fastest_trees"), ".1f"),
              "x xgboost": _s(r.get("x_xgboost"), ".1f"),
              "cores used": _s(r["cpu_s"] / r["fit_s"] if r.get("cpu_s") is not None
                               and r["fit_s"] >= 0.1 else None, ".1f"),
              "peak GiB": _s(r["peak_gib"]), "rise GiB": _s(r["rise_gib"]),
              "predicted s": _s(r["predicted_fit_s"], ".0f")} for r in ran]
    out = [md_table(table)] if table else []
    other = [r for r in ds["rows"] if r["status"] != "ran"]
    if other:
        out += ["", *[f"- {r['method']}: {r['status']}, {r['reason']}" for r in other]]
    said: dict[str, list[str]] = {}
    for r in ran:
        for w in r["warnings"]:
            said.setdefault(w[:110] + ("..." if len(w) > 110 else ""), []).append(r["method"])
    if said:
        out += ["", "Warnings during the fits:", "",
                *[f"- {', '.join(ms)}: {w}" for w, ms in said.items()]]
    return "\n".join(out)


def _x(r: dict) -> str:
    """``r``'s fit time and its ratios to the fastest trees' and to xgboost's."""
    def g(v):
        return f"{v:.1f}x" if v < 10 else f"{v:,.0f}x"

    ratios = [f"{g(r[k])} {name}" for k, name in (("x_fastest_trees", "the fastest trees"),
                                                  ("x_xgboost", "xgboost")) if r.get(k)]
    return f"{r['fit_s']:,.1f} s" + (f" ({', '.join(ratios)})" if ratios else "")


def summary(datasets: list[dict]) -> list[dict]:
    """Per dataset: the best boosted trees, xgboost, daskauc's best model, and daskauc's
    fastest model within ``TIE`` of the best trees' test AUC."""
    out = []
    for ds in datasets:
        ran = [r for r in ds["rows"] if r["status"] == "ran"]
        trees = [r for r in ran if r["kind"] == "trees"]
        ours = [r for r in ran if r["kind"] == "daskauc"]
        row = {"dataset": ds["name"], "n train x d": f"{ds['n_train']:,} x {ds['d']}"}
        if trees:
            t = max(trees, key=lambda r: r["test_auc"])
            row["best trees"] = f"{t['method']} {t['test_auc']:.4f} in {t['fit_s']:.2f} s"
        xgb = next((r for r in trees if r["method"] == "xgboost"), None)
        if xgb:
            row["xgboost"] = f"{xgb['test_auc']:.4f} in {xgb['fit_s']:.2f} s"
        if ours:
            b = max(ours, key=lambda r: r["test_auc"])
            row["best daskauc"] = f"{b['method']} {b['test_auc']:.4f} in {_x(b)}"
            if trees:
                bar = max(r["test_auc"] for r in trees) - TIE
                good = [r for r in ours if r["test_auc"] >= bar]
                f = min(good, key=lambda r: r["fit_s"]) if good else None
                row[f"fastest daskauc within {TIE} of the best trees"] = (
                    f"{f['method']} {f['test_auc']:.4f} in {_x(f)}" if f else "none")
        out.append(row)
    return out


def targets(datasets: list[dict]) -> list[str]:
    """Issue 27's bars on ijcnn1: NBAUC() >= 0.9970 within 5x and KernelAUC() >= 0.9972
    within 15x of xgboost's fit time."""
    ds = next((d for d in datasets if d["name"] == "ijcnn1"), None)
    if ds is None:
        return []
    ran = {r["method"]: r for r in ds["rows"] if r["status"] == "ran"}
    if "xgboost" not in ran:
        return []
    lines = []
    for method, auc, factor in (("NBAUC", 0.9970, 5), ("KernelAUC", 0.9972, 15)):
        r = ran.get(method)
        if r is None:
            continue
        ok = r["test_auc"] >= auc and r["x_xgboost"] <= factor
        lines.append(f"- ijcnn1, `{method}()` >= {auc} within {factor}x of xgboost: "
                     f"{r['test_auc']:.4f} at {r['x_xgboost']:.1f}x "
                     f"({'met' if ok else 'not met'})")
    return lines


def figure(datasets: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(datasets)
    cols = min(k, 3)
    nrows = -(-k // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4.6 * nrows), squeeze=False)
    for ax, ds in zip(axes.ravel(), datasets, strict=False):
        ran = [r for r in ds["rows"] if r["status"] == "ran"]
        if not ran:
            continue
        best = max(r["test_auc"] for r in ran)
        floor = max(min(r["test_auc"] for r in ran), best - WINDOW)
        pad = 0.05 * (best - floor) + 1e-4
        shown = sorted((r for r in ran if r["test_auc"] >= floor), key=lambda r: r["fit_s"])
        for i, r in enumerate(shown):
            tree = r["kind"] == "trees"
            ax.scatter(r["fit_s"], r["test_auc"], marker="s" if tree else "o",
                       color="C1" if tree else "C0", zorder=3)
            ax.annotate(r["method"], (r["fit_s"], r["test_auc"]), fontsize=6,
                        xytext=(4, 3 if i % 2 == 0 else -8), textcoords="offset points")
        below = sorted((r for r in ran if r["test_auc"] < floor), key=lambda r: -r["test_auc"])
        for r in below:
            ax.scatter(r["fit_s"], floor, marker="v", color="C1" if r["kind"] == "trees"
                       else "C0", zorder=3)
        if below:
            names = [f"{r['method']} {r['test_auc']:.3f}" for r in below]
            lines = [", ".join(names[i:i + 3]) for i in range(0, len(names), 3)]
            ax.text(0.01, 0.06, "below the axis (v): " + "\n".join(lines), fontsize=6,
                    transform=ax.transAxes, va="bottom")
        front = sorted((r for r in ran if r["method"] in pareto(ran)), key=lambda r: r["fit_s"])
        ax.step([r["fit_s"] for r in front], [max(r["test_auc"], floor) for r in front],
                where="post", color="C2", lw=1)
        ax.set_xscale("log")
        ax.set_ylim(floor - pad, best + pad)
        ax.set_xlabel("fit time (s, log scale)")
        ax.set_ylabel("test AUC")
        ax.set_title(f"{ds['name']} ({ds['n_train']:,} x {ds['d']})")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    marks = [plt.Line2D([], [], ls="", marker="s", color="C1", label="boosted trees"),
             plt.Line2D([], [], ls="", marker="o", color="C0", label="daskauc, defaults"),
             plt.Line2D([], [], color="C2", lw=1, label="Pareto front")]
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.legend(handles=marks, loc="upper center", ncol=3, fontsize=8)
    return fig


def report(datasets: list[dict], args) -> None:
    mi = machine_info()
    ran = [d["name"] for d in datasets]
    missing = [n for n in DATASETS if n not in ran]
    md = ["# Time to a good model", "",
          "Every daskauc classifier with its default arguments (only `random_state` set) beside "
          "xgboost (500 trees, depth 8, hist), LightGBM (defaults) and scikit-learn's "
          "HistGradientBoosting (defaults), in the same run on the same standardized rows "
          "(scaler fitted on the training rows): the exact test AUC, the fit's wall time, the "
          "hyper-parameter selection's time and candidates where the estimator records them "
          "(the final fit is the rest), the fit time over the fastest boosted trees' and over "
          "xgboost's, and this process's resident memory (peak during the fit, and its rise "
          "over the fit's start; the datasets in memory count in the peak). `cores used`: the "
          "process's CPU seconds during the fit over its wall time (2 at most; other sessions' "
          "processes on the machine take their share; blank under 0.1 s, the clock's "
          "resolution). Every method was "
          "fitted once, untimed, on a few hundred rows first, so no time includes numba's "
          "compilation; a fit shorter than 10 s was repeated (three fits in all unless a "
          "dataset's line says otherwise) and the fastest kept. Every library uses the "
          "machine's cores (daskauc its threaded scheduler, the trees their own OpenMP "
          "threads, which sleep when idle: `OMP_WAIT_POLICY=PASSIVE`, as spinning ones wait "
          "for a core another process holds). "
          "`*`: on the Pareto front (no method both faster and better). `predicted s`: the "
          "budget rule's prediction from the last smaller dataset (module docstring of "
          "`benchmarks/time_to_model.py`), beside the measured time. One seed.", "",
          f"Machine: {mi['processor']}, {mi['cpus']} cores, {mi['memory_gib']} GiB; "
          f"load average when this page was written: "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}.", "",
          f"![test AUC against fit time]({args.name}.png)", "",
          "## Summary", "", md_table(summary(datasets)), ""]
    if targets(datasets):
        md += ["Issue 27's bars:", "", *targets(datasets), ""]
    if missing:
        md += [f"Not measured yet: {', '.join(missing)}. Run them with", "",
               f"    flock /tmp/daskauc-bench.lock python -m benchmarks.time_to_model "
               f"--datasets {','.join(missing)}", "",
               "which keeps the datasets above and predicts the budget from them (`--budget "
               "SECONDS` to change it, 0 for none).", ""]
    for ds in datasets:
        md += [f"## {ds['name']}", "",
               f"{ds['n_train']:,} training rows x {ds['d']} features "
               f"({ds['positive_share']:.1%} positive), {ds['n_test']:,} test rows: "
               f"{ds['note']}. Run {ds['date']}, load average "
               f"{ds['load_before'][0]:.2f} before and {ds['load_after'][0]:.2f} after, "
               f"budget {ds['budget']:g} s"
               + ("" if ds["repeat"] == 3 else f", every fit {ds['repeat']} time(s) at most")
               + ("" if ds["warm_up_rows"] else ", no warm-up fits")
               + f"; `{ds['command']}`.", "", dataset_table(ds), ""]
    write_results(args.name, {"datasets": datasets}, "\n".join(md), figure(datasets),
                  out=args.out)


def earlier_runs(out: str, name: str = NAME) -> list[dict]:
    """The datasets of the page's JSON from earlier runs (empty when there is none)."""
    path = os.path.join(out, f"{name}.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)["results"]["datasets"]


def main(argv=None) -> int:
    ap = Parser(__doc__, quick={"datasets": "spambase,ijcnn1", "rows": 1000,
                                "test_rows": 5000, "repeat": 1, "warm_up_rows": 0,
                                "budget": 30,
                                "out": os.path.join(CACHE_DIR, f"{NAME}-quick")})
    ap.add_argument("--datasets", default=",".join(DATASETS),
                    help=f"comma-separated, of {', '.join(DATASETS)} (default: all)")
    ap.add_argument("--methods", default=None,
                    help="comma-separated (default: the boosted trees and every public daskauc "
                         "classifier); Name(arg=value) sets one argument, e.g. "
                         "'KernelAUC(n_centres=16384)'")
    ap.add_argument("--name", default=NAME,
                    help=f"page name: <out>/<name>.{{json,md,png}} (default: {NAME})")
    ap.add_argument("--budget", type=float, default=BUDGET,
                    help=f"seconds a fit may be predicted to take (default {BUDGET:g}; 0: no "
                         "limit)")
    ap.add_argument("--repeat", type=int, default=3,
                    help=f"fits of a method shorter than {REPEAT_UNDER:g} s, the fastest kept "
                         "(default 3)")
    ap.add_argument("--warm-up-rows", type=int, default=WARMUP_ROWS,
                    help="rows of every method's untimed first fit (default "
                         f"{WARMUP_ROWS}; 0: none)")
    ap.add_argument("--report", action="store_true",
                    help="only write the page again from the JSON in --out (no fits)")
    ap.add_argument("--rows", type=int, default=None,
                    help="at most this many training rows per dataset (stratified)")
    ap.add_argument("--test-rows", type=int, default=None,
                    help="at most this many test rows per dataset (stratified)")
    args = ap.parse_args(argv)
    # before any OpenMP runtime loads (daskauc uses none): idle OpenMP threads sleep instead
    # of spinning, else the trees' barriers wait for a core another process holds
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    names = args.datasets.split(",")
    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        ap.error(f"unknown datasets {unknown}; choose from {', '.join(DATASETS)}")
    names = [n for n in DATASETS if n in names]
    methods = (args.methods.split(",") if args.methods else [*TREES, *daskauc_methods()])
    if args.report:
        report(earlier_runs(args.out, args.name), args)
        return 0
    kept = [d for d in earlier_runs(args.out, args.name) if d["name"] not in names]
    done: list[dict] = []
    warm: set = set()
    for name in names:
        done.append(run_dataset(name, methods, args, kept + done, warm))
        gc.collect()
    datasets = sorted(kept + done, key=lambda d: DATASETS.index(d["name"]))
    report(datasets, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
