"""SPDAM: stochastic primal-dual AUC maximization with linear convergence (Natole, Ying & Lyu 2019).

Objective and update: docs/algorithms.md, "SPDAM".

Natole, Ying & Lyu (2019) minimize out ``a, b, alpha`` of SOLAM's saddle problem and obtain an
empirical risk with per-row quadratic losses, solved by Zhang & Xiao's stochastic primal-dual
coordinate method (SPDC). This module uses the following normalization, equivalent to the
paper's up to a constant factor. With ``p = n+/n``, ``m+``, ``m-`` the class means,
``b = m- - m+`` and

    xbar_i = (x_i - m+) / sqrt(p)  (y_i = +1),    xbar_i = (x_i - m-) / sqrt(1-p)  (y_i = -1),

one has ``(1/n) sum_i (w.xbar_i)^2 = w^T (S+ + S-) w``, hence

    P(w) = (1/n) sum_i phi(w.xbar_i) + g(w),   phi(s) = s^2 / 2,
    g(w) = (1/2) (b.w)^2 + b.w + (mu/2) ||w||^2,

equals ``(LS(w) - 1) / 2`` when ``mu = lam / 2``: SPDAM's minimizer is LSAUC's ``w*``. Its
saddle form is ``min_w max_beta (1/n) sum_i (beta_i w.xbar_i - beta_i^2 / 2) + g(w)``, with one
dual variable per row.

SPDC iteration with a mini-batch ``K`` of ``m`` rows (``u = (1/n) sum_i beta_i xbar_i``):

* dual, closed form, for ``k in K``:
  ``beta_k <- argmax_v v (wbar.xbar_k) - v^2/2 - (v - beta_k)^2 / (2 sigma)
  = (sigma wbar.xbar_k + beta_k) / (1 + sigma)``;
* ``u' = u + (1/n) sum_K (beta_k' - beta_k) xbar_k``, ``ubar = u + (n/m)(u' - u)``;
* primal: ``w' = argmin_v ubar.v + g(v) + ||v - w||^2 / (2 tau)``, i.e.
  ``(b b^T + c I) w' = w/tau - ubar - b`` with ``c = mu + 1/tau``, solved by Sherman-Morrison:
  ``w' = q/c - b (b.q) / (c (c + b.b))``, ``q`` the right-hand side;
* extrapolation ``wbar = w' + theta (w' - w)``.

Parameters from SPDC's theorem for mini-batches (phi is 1-smooth, g is mu-strongly convex,
``R >= max ||xbar_i||``):

    tau = sqrt(m / (n mu)) / (2 R),   sigma = sqrt(n mu / m) / (2 R),
    theta = 1 - 1 / (n/m + R sqrt(n / (m mu))),

which give ``E ||w_t - w*||^2 = O(theta^t)``: a contraction of about
``theta^(n/m)`` per epoch. ``R`` is bounded from the first pass by
``max_c (max ||x||_c + ||m_c||) / sqrt(p_c)``. Rows are visited epoch by epoch in shuffled
chunks and permuted rows (sampling without replacement, as practical SPDC codes do) instead of
the theorem's independent uniform batches; the measured convergence is geometric (tests).

The duals are an n-vector kept in the state, split like the row chunks; each chunk's task
updates its own slice. One epoch is one graph ``daskauc-spdam-epoch-...``.

Sparse rows (CSR chunks): ``_ls_sparse_kernels._spdam_chunk_csr``, the same iterations in
O(nnz) a row and O(r) a chunk, exact (the dense kernel's iterates up to float64 rounding):
``u``, ``w`` and ``wbar`` are kept as combinations of two vectors that a batch changes on its
non-zeros only, the last batch's sparse increment and the dense means ``m+``, ``m-``, with
scalar coefficients; ``xbar_i``'s dense ``- m_y`` part and the Sherman-Morrison step act on
the coefficients. ``R``'s default (from the first pass) is the same as for dense rows.

Parallel chains (``n_chains``, :mod:`daskauc.engine.chains`). The chains of a round visit
disjoint chunks, so the duals merge exactly: each chunk's duals are those of the chain that
visited it (the start's if none did), and ``u = (1/n) sum_i beta_i xbar_i``, linear in the
duals, is the start's plus every chain's increment, which is ``u`` of the merged duals (the
"adding" rule of distributed dual coordinate methods, Ma et al. 2015, exact for disjoint
blocks). Within the epoch a chain's ``u`` sees the start's duals and its own updates only.
The primal ``w`` and the extrapolated ``wbar`` are mixed with the same weights, the
iterations each chain made (parameter mixing, Zinkevich et al. 2010), so that
``wbar = w + theta (w - w_prev)`` holds for the mixed previous iterates; the iteration counter
is summed; the class means and sigma, tau, theta (fixed for the run) stay the start's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import dask.array as da
import numpy as np

from .._params import POSITIVE, Interval
from .._registry import solver
from .._sparse import csr_parts, is_sparse
from ..engine.chain_plan import resolve_chains
from ..engine.chains import add_increments, mix_iterates
from ..engine.stream import run_epochs, seed_root
from ._ls_epochs import LOG, as_block, objective_record, row_order
from ._ls_kernels import _spdam_chunk
from ._ls_sparse_kernels import _spdam_chunk_csr
from ._result import SolverResult
from .stats import (
    ClassMeans,
    ClassStats,
    _as_xy,
    class_means,
)
from .twopass import _check_dim


@dataclass(frozen=True)
class SPDAMState:
    """Primal ``w``, extrapolation ``wbar``, ``u = (1/n) sum beta_i xbar_i``, per-chunk duals."""

    w: np.ndarray
    wbar: np.ndarray
    u: np.ndarray
    duals: tuple
    means: ClassMeans
    params: dict
    iters: int
    epoch: int
    seed_entropy: int
    seed_key: tuple


def spdc_parameters(means: ClassMeans, lam: float, batch_size: int,
                    R: float | None = None) -> dict:
    """sigma, tau, theta of SPDC (Zhang & Xiao 2017, mini-batch theorem) for this problem."""
    n = means.n
    m = min(int(batch_size), n)
    mu = 0.5 * lam
    p = means.p
    if R is None:
        R = max((means.max_norm_pos + np.linalg.norm(means.mean_pos)) / math.sqrt(p),
                (means.max_norm_neg + np.linalg.norm(means.mean_neg)) / math.sqrt(1.0 - p))
    R = max(float(R), 1e-300)
    tau = math.sqrt(m / (n * mu)) / (2.0 * R)
    sigma = math.sqrt(n * mu / m) / (2.0 * R)
    theta = 1.0 - 1.0 / (n / m + R * math.sqrt(n / (m * mu)))
    return {"sigma": sigma, "tau": tau, "theta": theta, "mu": mu, "R": R, "m": m,
            "epoch_rate": theta ** (n / m)}


def _spdam_step(Xb, yb, state: SPDAMState, seed, chunk, **_):
    X = as_block(Xb)
    yv = np.asarray(yb, dtype=np.int8)
    order = row_order(seed, yv.shape[0])
    mn = state.means
    pr = state.params
    w, wbar, u = state.w.copy(), state.wbar.copy(), state.u.copy()
    duals = list(state.duals)
    d = duals[chunk].copy()
    r = w.shape[0]
    if is_sparse(X):
        kernel, rows, scratch = _spdam_chunk_csr, csr_parts(X), ()
    else:
        kernel, rows, scratch = _spdam_chunk, (X,), (np.empty(r), np.empty(r))
    iters = kernel(*rows, yv, order, mn.mean_pos, mn.mean_neg, mn.mean_neg - mn.mean_pos, d,
                   u, w, wbar, *scratch, 1.0 / math.sqrt(mn.p), 1.0 / math.sqrt(1.0 - mn.p),
                   float(mn.n), int(pr["m"]), pr["sigma"], pr["tau"], pr["theta"], pr["mu"])
    duals[chunk] = d
    return replace(state, w=w, wbar=wbar, u=u, duals=tuple(duals),
                   iters=state.iters + int(iters))


def merge_chains(start: SPDAMState, finals: list[SPDAMState], seed) -> SPDAMState:
    """Parallel chains (:mod:`daskauc.engine.chains`): each chunk's duals from the chain that
    visited it, ``u`` the start's plus the chains' increments (exact), ``w`` and ``wbar``
    mixed by iterations, ``iters`` summed."""
    duals = []
    for c, d0 in enumerate(start.duals):
        changed = [f.duals[c] for f in finals if not np.array_equal(f.duals[c], d0)]
        # one chain visits a chunk per round (the visits of a round are a permutation); the
        # sum of increments covers an order that repeats a chunk in two chains
        duals.append(changed[0] if len(changed) == 1 else add_increments(d0, changed))
    steps = [f.iters - start.iters for f in finals]
    return replace(start, w=mix_iterates(start.w, [f.w for f in finals], steps),
                   wbar=mix_iterates(start.wbar, [f.wbar for f in finals], steps),
                   u=add_increments(start.u, [f.u for f in finals]), duals=tuple(duals),
                   iters=start.iters + sum(steps))


@solver(kind="stochastic", states=(SPDAMState, ClassMeans), tags=("linear", "least-squares loss"),
        params={"lam": POSITIVE, "batch_size": Interval(int, 1), "n_epochs": Interval(int, 0),
                "R": [POSITIVE, None]}, sparse=True)
def spdam(X, y, *, lam: float = 1e-3, batch_size: int = 1, n_epochs: int = 10,
          shuffle: bool = True, random_state=None, R: float | None = None,
          means: ClassMeans | None = None, stats: ClassStats | None = None,
          state: SPDAMState | None = None, n_chains: int | str = 1,
          sync_every: int | None = None) -> SolverResult:
    """SPDAM over streamed chunks: linear convergence to the least-squares AUC optimum.

    Parameters
    ----------
    X, y : data
    lam : float > 0
        L2 penalty of LS (``g`` is ``lam/2``-strongly convex; must be positive).
    batch_size : int >= 1
        Mini-batch size ``m`` (batches never straddle chunks; the last one of a chunk may be
        smaller).
    n_epochs : int
    shuffle, random_state : see :func:`daskauc.solvers.twopass.twopass_auc`
    R : float, optional
        Bound on ``max ||xbar_i||``; default from the first pass (module docstring).
    means : ClassMeans, optional
        First pass, if already computed.
    stats : ClassStats, optional
        If given, history records ``objective`` = LS(w).
    state : SPDAMState, optional
        Continue a previous run on the same rows (the duals belong to them).
    n_chains : int or "auto"
        Parallel chains per epoch (:mod:`daskauc.engine.chains`: each chunk's duals from the
        chain that visited it and ``u`` summed, both exact; ``w`` and ``wbar`` mixed by
        iterations); 1 is the sequential solver.
    sync_every : int, optional
        With several chains, combine them after every ``sync_every`` chunks of each chain.

    Returns
    -------
    SolverResult
        ``coef`` the primal iterate ``w``; ``state`` an :class:`SPDAMState` whose ``params``
        hold sigma, tau, theta, R and the per-epoch contraction ``theta^(n/m)``.

    Notes
    -----
    Minimizes ``P(w) = (1/n) sum_i (w.xbar_i)^2 / 2 + g(w) = (LS(w) - 1) / 2`` (module
    docstring) by SPDC with closed-form dual steps and a Sherman-Morrison primal step.

    References
    ----------
    Natole, Ying & Lyu, "Stochastic AUC optimization algorithms with linear convergence",
    Frontiers in Applied Mathematics and Statistics 5:30, 2019.
    Zhang & Xiao, "Stochastic primal-dual coordinate method for regularized empirical risk
    minimization", JMLR 18(84), 2017.
    Ma, Smith, Jaggi, Jordan, Richtarik & Takac, "Adding vs. averaging in distributed
    primal-dual optimization", ICML 2015 (dual blocks of parallel chains added).
    """
    Xd, yd = _as_xy(X, y)
    chunks = tuple(int(c) for c in Xd.chunks[0])
    if state is None:
        if means is None:
            means = class_means(Xd, yd)
        entropy, key = seed_root(random_state)
        r = Xd.shape[1]
        params = spdc_parameters(means, float(lam), batch_size, R)
        state = SPDAMState(np.zeros(r), np.zeros(r), np.zeros(r),
                           tuple(np.zeros(c) for c in chunks), means, params, 0, 0, entropy, key)
    else:
        state = _align_duals(state, Xd)
    _check_dim(state.w, Xd)
    state, history = run_epochs(
        _spdam_step, Xd, yd, state, solver="spdam", n_epochs=n_epochs, shuffle=shuffle,
        per_chunk=list(range(len(chunks))), params={},
        n_chains=resolve_chains(n_chains, Xd), merge=merge_chains, sync_every=sync_every,
        record=objective_record(stats, lam, objective="w"), log=LOG,
    )
    return SolverResult(coef=state.w.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)


def _align_duals(state: SPDAMState, Xd: da.Array) -> SPDAMState:
    """Re-split the duals if the same rows come chunked differently."""
    chunks = tuple(int(c) for c in Xd.chunks[0])
    have = tuple(d.shape[0] for d in state.duals)
    if sum(have) != sum(chunks):
        raise ValueError(
            f"SPDAM keeps one dual variable per training row: the state was built on "
            f"{sum(have)} rows but X has {sum(chunks)}; continue on the same rows, or fit anew"
        )
    if have == chunks:
        return state
    flat = np.concatenate(state.duals)
    bounds = np.cumsum((0,) + chunks)
    return replace(state, duals=tuple(flat[bounds[i]:bounds[i + 1]].copy()
                                      for i in range(len(chunks))))
