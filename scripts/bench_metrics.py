"""Benchmark the exact AUC: daskauc on dask (threaded), daskauc on numpy, scikit-learn.

n random float32 scores (10^7; 10^6 with ``--quick``) in 20 chunks, labels with 30 %
positives. Scores are persisted in memory first so the dask time is the AUC alone. Each
timing is the median of ``--repeats`` runs; every result is checked against scikit-learn's.
Writes ``docs/benchmarks/metrics.md``.

    python scripts/bench_metrics.py --quick
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import time

import dask
import dask.array as da
import numpy as np
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_info

from daskauc.metrics import roc_auc, roc_curve

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "metrics.md"


def _time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^6 scores instead of 10^7")
    ap.add_argument("--n", type=int, default=None, help="number of scores")
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args(argv)
    n = args.n or (10**6 if args.quick else 10**7)

    rng = np.random.default_rng(12345)
    y = rng.random(n) < 0.3
    s = (rng.random(n, dtype=np.float32) + 0.3 * y).astype(np.float32)
    ds = da.from_array(s, chunks=-(-n // args.chunks)).persist()
    dy = da.from_array(y, chunks=ds.chunks).persist()

    roc_auc(y[:1000], s[:1000])  # compile / load the numba kernels outside the timings
    rows = []
    with dask.config.set(scheduler="threads"):
        t_sk, a_sk = _time(lambda: roc_auc_score(y, s), args.repeats)
        t_np, a_np = _time(lambda: roc_auc(y, s), args.repeats)
        t_da, a_da = _time(lambda: roc_auc(dy, ds), args.repeats)
        t_roc, curve = _time(lambda: roc_curve(dy, ds), args.repeats)
    rows.append(("scikit-learn roc_auc_score (numpy)", t_sk, a_sk))
    rows.append(("daskauc roc_auc (numpy)", t_np, a_np))
    rows.append((f"daskauc roc_auc (dask, {args.chunks} chunks, threads)", t_da, a_da))
    rows.append((f"daskauc roc_curve (dask, {curve[0].size} points)", t_roc, float("nan")))

    blas = ", ".join(
        f"{i.get('internal_api')} {i.get('version')} {i.get('threading_layer', '')} "
        f"{i.get('architecture', '')} x{i.get('num_threads')}"
        for i in threadpool_info()
    )
    lines = [
        "# Exact AUC benchmark",
        "",
        f"`python scripts/bench_metrics.py{' --quick' if args.quick else ''}` — n = {n:,} "
        f"float32 scores, 30 % positives, {args.chunks} chunks (persisted), median of "
        f"{args.repeats} runs.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, numpy {np.__version__}, dask {dask.__version__}; "
        f"BLAS: {blas or 'none loaded'}; OPENBLAS_CORETYPE="
        f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}.",
        "",
        "| method | time (s) | vs scikit-learn | AUC | abs diff to scikit-learn |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, t, a in rows:
        diff = "" if np.isnan(a) else f"{abs(a - a_sk):.1e}"
        auc = "" if np.isnan(a) else f"{a:.12f}"
        lines.append(f"| {name} | {t:.3f} | {t_sk / t:.1f}x faster | {auc} | {diff} |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    for name, _, a in rows:
        if not np.isnan(a) and abs(a - a_sk) > 1e-12:
            raise SystemExit(f"{name}: AUC differs from scikit-learn by {abs(a - a_sk):.2e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
