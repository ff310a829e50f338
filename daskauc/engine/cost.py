"""Measured machine rates and the estimated cost of the two routes to a Gaussian-kernel model.

The same model (m centres, gamma, lam) can be fitted two ways:

* **kernel basis** (:mod:`daskauc.solvers.kernel_newton`, :mod:`daskauc.solvers.kernel_lsauc`):
  nothing n x m is stored, every pass recomputes the kernel blocks: about
  ``1.35 x 2 n m (d + 2)`` flops per pass (the exponential adds ~35% to the GEMM), plus the
  preconditioner's three m^3 / 3 flop factorizations;
* **materialized embedding** (:class:`daskauc.KMeansNystroem` then NBAUC's / LSAUC's solver):
  an eigendecomposition of K_mm (~9 m^3 flops), the map ``K_nm M`` written once
  (``2 n m (d + 2) + 2 n m^2`` flops) and kept in memory (``4 n m`` bytes), then passes
  that only read it (``4 n m`` bytes each, memory-bound).

For small m the embedding wins (its passes are ~d times cheaper); for large m its
``2 n m^2`` build and its memory lose. :func:`route_costs` estimates both from rates measured
once per process (:func:`machine_rates`, ~0.2 s) and the expected number of passes.
"""

from __future__ import annotations

import os
import time
from functools import lru_cache

import numpy as np

from .. import _config

#: passes a fit is expected to need (measured: covtype NBAUC 240 passes on the embedding,
#: kernel-basis Newton with pair weighting 190-370 on covtype subsamples; least squares:
#: 30-70 CG steps in the kernel basis, one statistics pass on the embedding).
EXPECTED_PASSES = {"squared_hinge": 250, "least_squares": 50}

#: the exponential and accumulation of a kernel tile cost this much on top of its GEMM
#: (measured 1.21-1.41x on one core; :mod:`daskauc.solvers._kernel_basis_kernels`).
KERNEL_OVERHEAD = 1.35


def _best_seconds(f, repeat: int = 3) -> float:
    f()
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


@lru_cache(maxsize=1)
def machine_rates() -> dict:
    """Single-thread rates of this machine, measured once per process.

    ``tile_flops``: float32 GEMM of a kernel tile's shape (256 x 56 by 56 x 1024);
    ``gemm32_flops`` / ``gemm64_flops``: 512^3 float32 / float64 GEMM; ``read_bytes``: a
    sum over 64 MiB of float32.
    """
    rng = np.random.default_rng(0)
    out = {}
    with _config.blas_limit(1):
        A = rng.standard_normal((256, 56), dtype=np.float32)
        B = rng.standard_normal((56, 1024), dtype=np.float32)
        G = np.empty((256, 1024), np.float32)

        def tiles():
            for _ in range(8):
                np.matmul(A, B, out=G)

        out["tile_flops"] = 8 * 2.0 * 256 * 56 * 1024 / _best_seconds(tiles)
        for dt, key in ((np.float32, "gemm32_flops"), (np.float64, "gemm64_flops")):
            M = rng.standard_normal((512, 512)).astype(dt)
            out[key] = 2.0 * 512**3 / _best_seconds(lambda M=M: M @ M)
        x = np.ones(2**24, np.float32)
        out["read_bytes"] = x.nbytes / _best_seconds(lambda: x.sum())
    return out


def route_costs(n: int, d: int, m: int, *, loss: str, n_threads: int,
                client_threads: int | None = None, memory_budget: float = np.inf,
                rates: dict | None = None) -> dict:
    """Estimated seconds of both routes (``kernel``, ``embedding``; inf when the embedding
    does not fit in ``memory_budget`` bytes), and the figures behind them."""
    rates = machine_rates() if rates is None else rates
    T = client_threads or os.cpu_count() or 1
    W = max(1, int(n_threads))
    passes = EXPECTED_PASSES[loss]
    f64_client = rates["gemm64_flops"] * T * 0.5  # LAPACK factorizations at ~half a GEMM
    kernel_pass = KERNEL_OVERHEAD * 2.0 * n * m * (d + 2) / (rates["tile_flops"] * W)
    factor = (2.0 * m * m * (d + 2) + 3.0 * m**3 / 3.0) / f64_client
    kernel = factor + passes * kernel_pass
    emb_bytes = 4.0 * n * m
    build = 9.0 * m**3 / f64_client + kernel_pass + 2.0 * n * m * m / (rates["gemm32_flops"] * W)
    if loss == "least_squares":  # one pass of class statistics (n m^2) and one m x m solve
        use = 2.0 * n * m * m / (rates["gemm32_flops"] * W) + m**3 / f64_client
    else:
        use = passes * emb_bytes / (rates["read_bytes"] * W)
    embedding = build + use if emb_bytes <= memory_budget else np.inf
    return {"kernel": kernel, "embedding": embedding, "kernel_pass": kernel_pass,
            "embedding_bytes": emb_bytes, "memory_budget": float(memory_budget),
            "expected_passes": passes, "rates": dict(rates)}
