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

import math
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


def best_seconds(f, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timed calls of ``f()``, after one untimed warm-up (on a
    shared machine a run can only come out slower)."""
    f()
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def gemm_rate(dtype=np.float32, n: int = 20000, k: int = 1600, m: int = 1600,
              repeat: int = 3) -> float:
    """FLOP/s of an ``n x k`` by ``k x m`` matrix product of ``dtype`` with the BLAS threads
    in effect (wrap in ``_config.blas_limit(1)`` for one)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, k)).astype(dtype)
    B = rng.standard_normal((k, m)).astype(dtype)
    return 2.0 * n * k * m / best_seconds(lambda: A @ B, repeat)


def kernel_tile_rate(d: int, threads: int = 1, rows: int = 256, cols: int = 1024, *,
                     tiles: int = 16, seconds: float | None = 1.0, repeat: int = 3) -> float:
    """FLOP/s of float32 GEMMs of one kernel tile's shape (``rows x (d + 2)`` by
    ``(d + 2) x cols``), ``tiles`` per round on each of ``threads`` concurrent threads with
    one BLAS thread each, as single-threaded Dask workers run the kernel-basis passes (the
    total over the threads; the best round within about ``seconds``, or of ``repeat``
    rounds when ``seconds`` is None)."""
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(0)
    A = rng.standard_normal((rows, d + 2), dtype=np.float32)
    B = rng.standard_normal((d + 2, cols), dtype=np.float32)
    outs = [np.empty((rows, cols), np.float32) for _ in range(threads)]

    def work(i):
        for _ in range(tiles):
            np.matmul(A, B, out=outs[i])

    flops = threads * tiles * 2.0 * rows * (d + 2) * cols
    pool_context = ThreadPoolExecutor(threads) if threads > 1 else contextlib.nullcontext()
    with _config.blas_limit(1), pool_context as pool:
        def one_round():
            if pool is None:
                work(0)
            else:
                list(pool.map(work, range(threads)))

        if seconds is None:
            return flops / best_seconds(one_round, repeat)
        one_round()
        best, end = np.inf, time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            one_round()
            best = min(best, time.perf_counter() - t)
    return flops / best


def read_bandwidth(n_bytes: int = 2 * 2**30, repeat: int = 3, *, threads: bool = True) -> float:
    """Bytes/s read from memory: a sum over ``n_bytes`` of float32, as a matrix-vector product
    on BLAS's threads (``threads``) or numpy's one-threaded ``sum``."""
    x = np.ones(n_bytes // 4, dtype=np.float32)
    if threads:
        ones = np.ones(4096, np.float32)
        return n_bytes / best_seconds(lambda: x.reshape(-1, 4096) @ ones, repeat)
    return n_bytes / best_seconds(lambda: x.sum(), repeat)


@lru_cache(maxsize=1)
def machine_rates() -> dict:
    """Single-thread rates of this machine, measured once per process (about 0.2 s).

    ``tile_flops``: float32 GEMM of a kernel tile's shape (256 x 56 by 56 x 1024);
    ``gemm32_flops`` / ``gemm64_flops``: 512^3 float32 / float64 GEMM; ``read_bytes``: a
    sum over 64 MiB of float32.
    """
    with _config.blas_limit(1):
        return {
            "tile_flops": kernel_tile_rate(54, 1, 256, 1024, tiles=8, seconds=None),
            "gemm32_flops": gemm_rate(np.float32, 512, 512, 512),
            "gemm64_flops": gemm_rate(np.float64, 512, 512, 512),
            "read_bytes": read_bandwidth(2**26, threads=False),
        }


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



#: LAPACK's factorizations on the client run at this fraction of its threads' float64 GEMM rate
#: (m = 16,384 on 2 threads: Cholesky with K_mm 1.47e12 flops in 18.7 s, lauum + Cholesky
#: 2.9e12 in 24.3 s, against 88 GFLOP/s of GEMM)
CLIENT_LAPACK_EFFICIENCY = 0.9
#: the blocked factor's tile tasks (:mod:`daskauc.solvers.blocked_preconditioner`) run at this
#: fraction of the workers' float64 GEMM rate (2 single-threaded workers, m = 8,192 .. 16,384:
#: 68-72 GFLOP/s for the Cholesky and for ``L' L`` + Cholesky, tile moves included)
BLOCKED_EFFICIENCY = 0.8
#: seconds a task of the blocked triangular solves costs beyond its bytes (m = 16,384,
#: b = 2,048: four solves of 36 tile tasks each in 0.52 s against 0.15 s for the client's)
BLOCKED_TASK_SECONDS = 2.5e-3
#: fraction of the client's available memory its factor (8 m^2 bytes) may take
CLIENT_FACTOR_FRACTION = 0.5
#: a kernel pass against its flop floor ``2 n m (d + 2)`` at the kernel-tile rate: measured
#: 1.72-2.44 on covtype (464,810 rows, m = 4,096 .. 16,384, 2 workers), 1.96 for one pass alone
PASS_OVERHEAD = 1.9
#: bytes per second between two workers (their links in parallel): 10 GbE
NETWORK_BYTES_PER_SECOND = 1.25e9


#: a worker process's own memory: Python, numba and the libraries (0.31-0.32 GiB of RSS for an
#: idle worker here). With it and the Cholesky's panel copies, kernel_plan predicts 5.6 GiB per
#: worker for covtype at m = 32,768 on 2 workers; sampled every 5 s over a fit, the peaks were
#: 5.77 and 6.13 GiB (the two triangles alone: 4.5 GiB each).
WORKER_PROCESS_BYTES = 0.32 * 2**30
#: the largest tile side of the blocked factor: a 4,096 x 4,096 float64 tile is 128 MiB and its
#: update 1.4e11 flops (about 3 s on one core here), so the scheduler's ~1 ms per task is
#: negligible
FACTOR_BLOCK_MAX = 4096


def factor_block(m: int) -> int:
    """Tile side of the blocked factor of m centres: about m / 8 (a multiple of 256), between
    1,024 and ``FACTOR_BLOCK_MAX``: 8 x 8 tiles keep 2 workers busy with little per-task
    overhead (m = 8,192: b = 1,024 ran the applications in 0.30 s, 2,048 in 0.17 s, 4,096 in
    0.17 s; m = 16,384: 2,048 factored A in 41 s against 61 s for 4,096)."""
    return int(min(FACTOR_BLOCK_MAX, max(1024, 256 * math.ceil(m / 8 / 256))))


def _factor_flops(m: int, d: int, weighting: str) -> tuple[float, float]:
    """Flops of the factor of K_mm (with the kernel) and of one factorization of A."""
    chol = m * m * (d + 2) + m**3 / 3.0
    gram = m**3 if weighting == "pairs" else m**3 / 3.0
    return chol, gram + m**3 / 3.0


#: triangular sweeps (a product or solve reading one triangle of a factor) per CG step: the
#: preconditioner's four, the regularizer's two (``L L' v``) and the whitened norm's one; and
#: per Newton step (the gradient's regularizer and norm). Counting the preconditioner's four
#: only, the model gave 68-83 s for the 180 s of the iterations with the factor on two workers
#: in network namespaces (ijcnn1, m = 8,192, 8 Newton and 90 CG steps); with all seven,
#: 93-108 s; the rest went to a worker paused 140 times at its 800 MiB limit and to tasks
#: split 37/63 between the workers (docs/benchmarks/multihost.md).
SWEEPS_PER_CG_STEP, SWEEPS_PER_NEWTON_STEP = 7, 3


def sweep_seconds(m: int, block: int, threads: int, rates: dict, placement: str) -> float:
    """One triangular sweep over a factor: reading a triangle (and, on the workers, ~nb^2 / 2
    tile tasks)."""
    read = 8.0 * m * m / 2.0 / (rates["read_bytes"] * threads)
    if placement == "client":
        return read
    nb = -(-m // block)
    return read + nb * (nb + 1) / 2 * BLOCKED_TASK_SECONDS


def factor_costs(m: int, *, block: int, n_threads: int, client_threads: int | None = None,
                 client_memory: float = np.inf, worker_memory: float = np.inf,
                 passes: int = EXPECTED_PASSES["squared_hinge"], d: int = 54,
                 rates: dict | None = None) -> dict:
    """Estimated seconds of the Nystroem preconditioner on the client (``client``: one m x m
    float64 matrix, LAPACK on the client's threads) and on the workers (``workers``: two lower
    triangles of tiles, :class:`~daskauc.solvers.blocked_preconditioner.
    BlockedNystroemPreconditioner`), each inf when it does not fit (``client_memory`` /
    ``worker_memory``: bytes it may take there), for a fit of ``passes`` passes (a CG step,
    ``SWEEPS_PER_CG_STEP`` triangular sweeps, every two passes): the factor of K_mm, one of
    A, and the sweeps."""
    rates = machine_rates() if rates is None else rates
    T = client_threads or os.cpu_count() or 1
    W = max(1, int(n_threads))
    chol, refactor = _factor_flops(m, d, "mean")
    sweeps = passes / 2.0 * SWEEPS_PER_CG_STEP  # a CG step every two passes
    client = ((chol + refactor) / (rates["gemm64_flops"] * T * CLIENT_LAPACK_EFFICIENCY)
              + sweeps * sweep_seconds(m, block, T, rates, "client"))
    workers = ((chol + refactor) / (rates["gemm64_flops"] * W * BLOCKED_EFFICIENCY)
               + sweeps * sweep_seconds(m, block, W, rates, "workers"))
    client_bytes, worker_bytes = 8.0 * m * m, 8.0 * m * (m + block)
    return {"client": client if client_bytes <= client_memory else np.inf,
            "workers": workers if worker_bytes <= worker_memory else np.inf,
            "client_bytes": client_bytes, "worker_bytes": worker_bytes,
            "client_memory": float(client_memory), "worker_memory": float(worker_memory),
            "block": int(block)}


def kernel_plan(n: int, d: int, m: int, *, workers: int, threads_per_worker: int = 1,
                block: int | None = None, newton_steps: int = 5, cg_steps: int = 100,
                factorizations: int = 2, weighting: str = "mean", placement: str = "workers",
                network: float = NETWORK_BYTES_PER_SECOND, rates: dict | None = None) -> dict:
    """Predicted seconds per stage and memory per worker of a kernel-route fit (the squared
    hinge) of n rows x d features on m centres, ``workers`` x ``threads_per_worker`` threads
    of this machine's single-thread rates (``rates``, default :func:`machine_rates`).

    Stages: ``factor_T`` (K_mm and its blocked Cholesky), ``factor_A`` (``factorizations``
    factorizations of A), ``passes`` (``2 (newton_steps + 1) + 2 cg_steps`` passes at
    ``PASS_OVERHEAD`` times the kernel-tile floor), ``applies`` (the products and solves
    with the factors: ``SWEEPS_PER_CG_STEP`` triangular sweeps per CG step and
    ``SWEEPS_PER_NEWTON_STEP`` per Newton step), ``network`` (tiles moved by the
    factorizations: at most ``min(workers - 1, nb)`` copies of each triangle, over the
    workers' links in parallel).
    ``memory_per_worker``: the two triangles and the persisted rows, shared out, plus a
    pass's working tiles, the worker process itself (``WORKER_PROCESS_BYTES``) and the copies
    of a column panel of the factor that a Cholesky step sends to the workers updating with
    it (``(1 - 1 / workers) nb`` tiles). The defaults (5 Newton steps, 100 CG steps, 2
    factorizations) are those of covtype's cold fits at m = 4,096 .. 16,384 (82-108 CG
    steps)."""
    rates = machine_rates() if rates is None else rates
    threads = max(1, int(workers) * int(threads_per_worker))
    b = factor_block(m) if block is None else int(block)
    nb = -(-m // b)
    chol, refactor = _factor_flops(m, d, weighting)
    f64 = rates["gemm64_flops"] * threads * BLOCKED_EFFICIENCY
    if placement == "client":
        f64 = rates["gemm64_flops"] * threads * CLIENT_LAPACK_EFFICIENCY
    passes = 2 * (newton_steps + 1) + 2 * cg_steps
    pass_s = PASS_OVERHEAD * 2.0 * n * m * (d + 2) / (rates["tile_flops"] * threads)
    triangle = 8.0 * m * (m + b) / 2.0
    moved = triangle * min(max(int(workers) - 1, 0), nb) / max(int(workers), 1)
    stages = {
        "factor_T": chol / f64,
        "factor_A": factorizations * refactor / f64,
        "passes": passes * pass_s,
        "applies": (SWEEPS_PER_CG_STEP * cg_steps + SWEEPS_PER_NEWTON_STEP * newton_steps)
        * sweep_seconds(m, b, threads, rates, placement),
        "network": (1 + factorizations) * moved / network if placement == "workers" else 0.0,
    }
    factor_bytes = 2 * triangle if placement == "workers" else 8.0 * m * m
    rows = 4.0 * n * d
    working = 2 * 8.0 * b * b * threads_per_worker + 4.0 * 256 * 1024 * threads_per_worker
    if placement == "workers":
        working += WORKER_PROCESS_BYTES + (1.0 - 1.0 / max(int(workers), 1)) * nb * 8.0 * b * b
    return {"seconds": stages, "total_seconds": float(sum(stages.values())),
            "passes": passes, "seconds_per_pass": pass_s, "block": b,
            "memory_per_worker": (factor_bytes if placement == "workers" else 0.0) / workers
            + rows / workers + working,
            "client_bytes": 8.0 * m * m if placement == "client" else 0.0}


#: a stochastic solver's steps in one thread: seconds per row, plus seconds per byte of row
#: at STEP_BYTES_PER_SECOND (one dot product and one update per row). Measured with
#: ``python -m benchmarks.chains``: NSAUC over covtype's 1,600-landmark embedding, 3.0 GB in
#: 0.52 s per epoch, and over 240,000 x 512 float32 rows, 0.49 GB in 0.098 s; SPAM and NSAUC
#: over covtype's 54 standardized features (432 bytes a row), 42 ms per 155,000-row chunk
STEP_ROW_SECONDS = 2e-7
STEP_BYTES_PER_SECOND = 5e9

#: seconds a round of parallel chains costs beyond their steps: scheduling a round of chain
#: tasks and their merge, and the chains' states going to the merge and on (measured by
#: ``python -m benchmarks.chains``, "Speed": a 2-worker epoch less half a 1-worker epoch,
#: 0.025 s over the 240,000 x 512 array, 0.06 s over covtype's embedding where NSAUC's
#: partner window is 13 MB)
CHAIN_ROUND_SECONDS = {"threads": 0.002, "distributed": 0.03}

#: chains are used when an epoch is predicted to run at least this much faster with them
CHAIN_MIN_GAIN = 1.2


def chain_count(chunk_rows: list[int], row_bytes: float, max_chains: int, *,
                distributed: bool, state_bytes: int = 0) -> int:
    """Parallel chains for a stochastic epoch over row chunks of ``chunk_rows`` rows of
    ``row_bytes`` bytes each: up to ``max_chains`` (the worker threads), the count whose
    epoch is predicted fastest, if it beats one chain by ``CHAIN_MIN_GAIN``; else 1.

    An epoch of K chains takes the largest share of the chunks (``ceil(C / K)`` of the C
    chunks, as :func:`daskauc.engine.chain_plan.assign_visits` deals them) at
    ``STEP_ROW_SECONDS`` a row and ``STEP_BYTES_PER_SECOND``, plus ``CHAIN_ROUND_SECONDS`` for
    its merge; one chain takes all the chunks. So data in one chunk, or so small that the
    merge costs more than the chains save, runs one chain. ``state_bytes``: the dense state
    each chain hands to the merge (sparse rows: their work is small beside a weight vector
    of d floats), read at ``STEP_BYTES_PER_SECOND`` per chain.
    """
    C = len(chunk_rows)
    if max_chains <= 1 or C <= 1:
        return 1
    per_chunk = float(np.mean(chunk_rows)) * (STEP_ROW_SECONDS
                                              + row_bytes / STEP_BYTES_PER_SECOND)
    round_cost = CHAIN_ROUND_SECONDS["distributed" if distributed else "threads"]
    one = C * per_chunk
    best, best_time = 1, one
    for K in range(2, min(max_chains, C) + 1):
        seconds = -(-C // K) * per_chunk + round_cost + K * state_bytes / STEP_BYTES_PER_SECOND
        if seconds < best_time:
            best, best_time = K, seconds
    return best if one >= CHAIN_MIN_GAIN * best_time else 1
