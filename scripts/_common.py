"""Helpers shared by the benchmark scripts: machine info, floors, result tables."""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
BENCH_DIR = os.path.join(ROOT, "docs", "benchmarks")


def machine_info() -> dict:
    import psutil
    from threadpoolctl import threadpool_info

    blas = [
        {k: d.get(k) for k in ("user_api", "internal_api", "version", "num_threads",
                               "architecture")}
        for d in threadpool_info()
        if d.get("user_api") == "blas"
    ]
    return {
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "blas": blas,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def gemm_rate(dtype=np.float32, n: int = 20000, k: int = 1600, m: int = 1600, repeat: int = 3):
    """Measured matrix-multiply rate (FLOP/s) in this process: best of ``repeat``."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, k), dtype=np.float64).astype(dtype)
    B = rng.standard_normal((k, m), dtype=np.float64).astype(dtype)
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        A @ B
        best = min(best, time.perf_counter() - t)
    return 2.0 * n * k * m / best


def read_bandwidth(n_bytes: int = 2 * 2**30, repeat: int = 3) -> float:
    """Measured memory read bandwidth (bytes/s) of a two-threaded dot over a large array."""
    x = np.ones(n_bytes // 4, dtype=np.float32)
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        x.reshape(-1, 4096) @ np.ones(4096, np.float32)
        best = min(best, time.perf_counter() - t)
    return n_bytes / best


def write_results(name: str, rows: list[dict] | dict, markdown: str) -> None:
    os.makedirs(BENCH_DIR, exist_ok=True)
    with open(os.path.join(BENCH_DIR, f"{name}.json"), "w") as f:
        json.dump({"machine": machine_info(), "results": rows}, f, indent=2, default=float)
    with open(os.path.join(BENCH_DIR, f"{name}.md"), "w") as f:
        f.write(markdown.rstrip() + "\n")
    print(markdown)


def md_table(rows: list[dict], columns: list[str] | None = None) -> str:
    columns = columns or list(rows[0])
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c, "")
            cells.append(f"{v:.4g}" if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
