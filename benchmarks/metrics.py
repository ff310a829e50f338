"""Benchmark the exact AUC: daskauc on dask (threaded), daskauc on numpy, scikit-learn.

n random float32 scores (10^7; 10^6 with ``--quick``) in 20 chunks, labels with 30 %
positives. Scores are persisted in memory first so the dask time is the AUC alone. Each
timing is the median of ``--repeats`` runs; every result is checked against scikit-learn's.
Writes ``docs/benchmarks/metrics.md``.

    python -m benchmarks.metrics --quick
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from sklearn.metrics import roc_auc_score

from benchmarks._harness import Parser, machine_info, median_of, write_markdown
from daskauc.metrics import roc_auc, roc_curve


def main(argv=None) -> None:
    ap = Parser(__doc__, quick="10^6 scores instead of 10^7", seed=12345)
    ap.add_argument("--n", type=int, default=None, help="number of scores")
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    n = args.n or (10**6 if args.quick else 10**7)

    rng = np.random.default_rng(args.seed)
    y = rng.random(n) < 0.3
    s = (rng.random(n, dtype=np.float32) + 0.3 * y).astype(np.float32)
    ds = da.from_array(s, chunks=-(-n // args.chunks)).persist()
    dy = da.from_array(y, chunks=ds.chunks).persist()

    roc_auc(y[:1000], s[:1000])  # compile / load the numba kernels outside the timings
    rows = []
    with dask.config.set(scheduler="threads"):
        t_sk, a_sk = median_of(lambda: roc_auc_score(y, s), args.repeats)
        t_np, a_np = median_of(lambda: roc_auc(y, s), args.repeats)
        t_da, a_da = median_of(lambda: roc_auc(dy, ds), args.repeats)
        t_roc, curve = median_of(lambda: roc_curve(dy, ds), args.repeats)
    rows.append(("scikit-learn roc_auc_score (numpy)", t_sk, a_sk))
    rows.append(("daskauc roc_auc (numpy)", t_np, a_np))
    rows.append((f"daskauc roc_auc (dask, {args.chunks} chunks, threads)", t_da, a_da))
    rows.append((f"daskauc roc_curve (dask, {curve[0].size} points)", t_roc, float("nan")))

    mi = machine_info()
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} {b.get('architecture', '')} "
                     f"x{b.get('num_threads')}" for b in mi["blas"])
    lines = [
        "# Exact AUC benchmark",
        "",
        f"`python -m benchmarks.metrics{' --quick' if args.quick else ''}` — n = {n:,} "
        f"float32 scores, 30 % positives, {args.chunks} chunks (persisted), median of "
        f"{args.repeats} runs.",
        "",
        f"Machine: {mi['processor']}, {mi['cpus']} CPUs, Python {mi['python']}, numpy "
        f"{mi['versions']['numpy']}, dask {mi['versions']['dask']}; BLAS: "
        f"{blas or 'none loaded'}; OPENBLAS_CORETYPE={mi['OPENBLAS_CORETYPE'] or '(unset)'}.",
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
    write_markdown(args.out, "metrics", text)
    print(f"wrote {args.out}/metrics.md")


if __name__ == "__main__":
    main()
