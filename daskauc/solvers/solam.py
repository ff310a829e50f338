"""SOLAM and regSOLAM: saddle-point SGD for least-squares AUC (Ying, Wen & Lyu 2016).

Objective and update: docs/algorithms.md, "SOLAM and regSOLAM".

SOLAM solves

    min_{||w|| <= R, a, b} max_alpha  E[F(w, a, b, alpha; z)],
    F = (1-p)(w.x - a)^2 1[y=1] + p (w.x - b)^2 1[y=-1]
        + 2 (1 + alpha)(p w.x 1[y=-1] - (1-p) w.x 1[y=1]) - p (1-p) alpha^2,

whose value in ``w`` (after optimizing ``a, b, alpha``) is ``p (1-p) (LS_0(w) - 1)``, LS_0 the
unpenalized least-squares AUC objective. With ``p`` estimated online
(``p_t = (#positives among the first t rows) / t``) and ``gamma_t = zeta / sqrt(t)``, each row
makes a descent step in ``(w, a, b)`` and an ascent step in ``alpha`` with the stochastic
gradients (``y = +1``):

    dF/dw = 2 (1-p)(w.x - a - 1 - alpha) x,   dF/da = -2 (1-p)(w.x - a),   dF/db = 0,
    dF/dalpha = -2 (1-p) w.x - 2 p (1-p) alpha,

and for ``y = -1``: ``dF/dw = 2 p (w.x - b + 1 + alpha) x``, ``dF/da = 0``,
``dF/db = -2 p (w.x - b)``, ``dF/dalpha = 2 p w.x - 2 p (1-p) alpha``; then projects, and
outputs the gamma-weighted average of the iterates ``sum gamma_t v_t / sum gamma_t``
(``v_t`` the iterate the step at ``t`` started from).

Variants (``variant``):

* ``"paper"`` (default): ``w = 0, a = b = alpha = 0`` initially; projection onto
  ``||w|| <= R``, ``|a|, |b| <= R kappa``, ``|alpha| <= 2 R kappa``, ``kappa = max ||x||``.
* ``"authors"``: as the authors' MATLAB code: ``w = (R/sqrt(r)) 1`` (norm R),
  ``a = b = R``, ``alpha = 2 R``; ``a`` and ``b`` clipped from above only (at R),
  ``|alpha| <= 2 R``.

regSOLAM (``penalty="l2"``, Natole et al. 2019): no projection; an L2 penalty
``p_t (1 - p_t) (lam/2) ||w||^2`` is added to F, so that the saddle point is the minimizer of
LS with penalty ``lam`` (the family's common scale).

``kappa=None`` uses the largest row norm seen so far, updated chunk by chunk before the chunk's
rows are visited (SOLAM is a one-pass method; an exact kappa would cost a pass of its own).

Sparse rows (CSR chunks): the same steps in O(nnz) a row, exactly (the lazy form of
:func:`daskauc.solvers._opauc_solam_sparse_kernels._solam_sparse_chunk`). The iterate is kept as
``s v + e d`` (``d`` the chains' drift, ``s``, ``e`` scalars): the shrink of regSOLAM, the
projection onto the ball (a change of ``s``; ``||w||^2`` from ``v.v`` and ``v.d``, kept up to
date per non-zero) and the drift are scalar updates; the gamma-weighted average of the
iterates is the scaled sum of averaged SGD (Xu 2011): ``sum_t g_t w_t = A v - U + E d`` with
scalars ``A = sum g_t s_t``, ``E = sum g_t e_t`` and ``U_k`` the sum of ``v_k``'s changes times
``A`` at each change. Both are folded back into dense vectors once a chunk (O(r)), or when
``s`` leaves [2^-20, 2^20]. ``kappa`` (the largest row norm) comes from the non-zeros. The step
sizes and the ball are the paper's, which assumes nothing about the rows' density.

Parallel chains (``n_chains``, :mod:`daskauc.engine.chains`). Each chain stands for the
sequential run ("Chains that stand for the sequential run": ``gamma = zeta / sqrt(clock)``,
scaled by the chain's stride in its first round, then the sequential step and the other
chains' move of the last round added to all of ``(w, a, b, alpha)``; NSOLAM's defaults on
ijcnn1's embedding, 2 chains: -0.0008 test AUC when mixed alone, +0.0001 so). The
saddle-point iterate ``(w, a, b, alpha)`` is mixed as a whole, weighted by the steps each
chain took: the primal
``w, a, b`` and the dual ``alpha`` alike, as CoDA (Guo et al. 2020) averages the primal and
dual variables of local primal-dual SGD on this min-max form of AUC. A convex combination stays
in the projection sets (ball of ``w``, boxes of ``a, b, alpha``), and since at the saddle point
``a``, ``b``, ``alpha`` are linear in ``w`` (``w.c+``, ``w.c-``, ``w.(c- - c+)``), mixing them
with ``w``'s weights keeps each next to the ``w`` it tracks; keeping the start's values would
discard the epoch's progress in them. (Measured on the synthetic problem of
``tests/test_chains.py``, zeta 1 and 3, 2 and 4 chains, 4 seeds: keeping them, or adding the
chains' increments instead, moved the test AUC by less than 0.0015.) The gamma-weighted
averages ``wbar``, ``abar``, ``bbar``, ``alphabar`` are merged exactly, weighted by the sums of
the gammas (every iterate of every chain counts with the sequential run's gamma at its
clock); ``t``, the positives seen (hence ``p_t``) and the sum of the gammas are the start's
plus the chains' increments; the clock is the chains' mixed by steps; ``kappa`` is the
largest of the chains'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .._params import NON_NEGATIVE, POSITIVE, Interval, Options
from .._registry import solver
from .._sparse import csr_parts, is_sparse
from ..engine.chain_plan import resolve_chains
from ..engine.chains import (
    DRIFT_EVERY,
    add_increments,
    chain_frame,
    merge_moving,
    merge_running_average,
)
from ..engine.stream import run_epochs, seed_root
from ._ls_epochs import LOG, as_block, objective_record, row_order
from ._ls_kernels import _solam_chunk
from ._opauc_solam_sparse_kernels import _row_sq_max, _solam_sparse_chunk
from ._result import SolverResult
from .stats import ClassStats, _as_xy
from .twopass import _check_dim

PENALTIES = ("projection", "l2")
VARIANTS = ("paper", "authors")


@dataclass(frozen=True)
class SOLAMState:
    """``scal`` holds a, b, alpha, their averages, the sum of the gammas, positives seen;
    ``clock`` (None: ``t``) and ``velocity`` (of ``(w, a, b, alpha)``) as in
    :class:`daskauc.solvers.nsauc.PairwiseSGDState`."""

    w: np.ndarray
    wbar: np.ndarray
    scal: np.ndarray
    t: int
    kappa: float
    epoch: int
    seed_entropy: int
    seed_key: tuple
    clock: float | None = None
    velocity: np.ndarray | None = None


def initial_state(r: int, *, R: float, variant: str, penalty: str, random_state) -> SOLAMState:
    entropy, key = seed_root(random_state)
    scal = np.zeros(8)
    w = np.zeros(r)
    if variant == "authors" and penalty == "projection":
        w[:] = R / math.sqrt(r)
        scal[0] = scal[1] = R
        scal[2] = 2.0 * R
    return SOLAMState(w, np.zeros(r), scal, 0, 0.0, 0, entropy, key)


def _solam_step(Xb, yb, state: SOLAMState, seed, extra, *, zeta, R, kappa, mode, lam,
                stride=1.0):
    X = as_block(Xb)
    sparse = is_sparse(X)
    yv = np.asarray(yb, dtype=np.int8)
    order = row_order(seed, yv.shape[0])
    if kappa is None:
        if sparse:
            block_max = math.sqrt(_row_sq_max(X.indptr, X.data))
        else:
            block_max = math.sqrt(float(np.max(np.einsum("ij,ij->i", X, X, dtype=np.float64),
                                               initial=0.0)))
        kap = max(state.kappa, block_max)
    else:
        kap = float(kappa)
    w = state.w.copy()
    wbar = state.wbar.copy()
    scal = state.scal.copy()
    clock = np.array([state.t if state.clock is None else state.clock], dtype=np.float64)
    gain, drift = chain_frame(stride, state.velocity, DRIFT_EVERY)
    drift = np.zeros(0) if drift is None else drift
    scalars = (state.t, float(zeta), float(R), kap, mode, float(lam), float(stride), gain,
               DRIFT_EVERY)
    if sparse:
        t = _solam_sparse_chunk(*csr_parts(X), yv, order, drift, w, wbar,
                                np.empty((w.shape[0], 2)), scal, clock, *scalars)
    else:
        t = _solam_chunk(X, yv, order, drift, w, wbar, scal, clock, *scalars)
    return replace(state, w=w, wbar=wbar, scal=scal, t=int(t), kappa=kap,
                   clock=None if state.clock is None and stride == 1 else float(clock[0]))


def merge_chains(start: SOLAMState, finals: list[SOLAMState], seed) -> SOLAMState:
    """Parallel chains (:mod:`daskauc.engine.chains`, "Chains that stand for the sequential
    run"): ``(w, a, b, alpha)`` mixed by steps, with the clock and the velocity; the
    gamma-weighted averages exact (weighted by the sums of the gammas), ``t``, the positives
    seen and the sum of the gammas summed, ``kappa`` the largest."""
    steps = [f.t - start.t for f in finals]
    g0, gs = float(start.scal[6]), [float(f.scal[6]) for f in finals]
    point, clock, velocity = merge_moving(
        np.concatenate([start.w, start.scal[:3]]), _clock(start),
        [np.concatenate([f.w, f.scal[:3]]) for f in finals], [_clock(f) for f in finals],
        steps, start.velocity)
    r = start.w.shape[0]
    scal = np.empty_like(start.scal)
    scal[:3] = point[r:]
    scal[3:6] = merge_running_average(start.scal[3:6], g0, [f.scal[3:6] for f in finals], gs)
    scal[6:] = add_increments(start.scal[6:], [f.scal[6:] for f in finals])
    return replace(start, w=point[:r],
                   wbar=merge_running_average(start.wbar, g0, [f.wbar for f in finals], gs),
                   scal=scal, t=start.t + sum(steps),
                   kappa=max([start.kappa, *(f.kappa for f in finals)]), clock=clock,
                   velocity=velocity)


def _clock(state: SOLAMState) -> float:
    return float(state.t if state.clock is None else state.clock)


@solver(kind="stochastic", states=(SOLAMState,), tags=("linear", "least-squares loss"),
        sparse=True, params={
    "zeta": POSITIVE, "R": POSITIVE, "penalty": Options(*PENALTIES), "lam": NON_NEGATIVE,
    "variant": Options(*VARIANTS), "kappa": [POSITIVE, None], "n_epochs": Interval(int, 0)})
def solam(X, y, *, zeta: float = 100.0, R: float = 10.0, penalty: str = "projection",
          lam: float = 0.0, variant: str = "paper", kappa: float | None = None,
          n_epochs: int = 15, shuffle: bool = True, random_state=None,
          stats: ClassStats | None = None, state: SOLAMState | None = None,
          n_chains: int | str = 1, sync_every: int | None = None) -> SolverResult:
    """SOLAM (projection) or regSOLAM (L2 penalty) over streamed chunks; dense or sparse rows.

    Parameters
    ----------
    X, y : data
        Dense rows, or sparse rows (a scipy sparse matrix, or a dask array of CSR chunks:
        O(nnz) a row, module docstring).
    zeta : float > 0
        Step constant: ``gamma_t = zeta / sqrt(t)`` (demo default 100).
    R : float > 0
        Radius of the ball of ``w`` (projection only; demo default 10).
    penalty : {"projection", "l2"}
        SOLAM or regSOLAM.
    lam : float >= 0
        regSOLAM's L2 penalty on the LS scale (ignored with ``"projection"``).
    variant : {"paper", "authors"}
        Initialization and projection of ``a, b, alpha`` (module docstring).
    kappa : float, optional
        Bound on ``||x||``; default the running maximum.
    n_epochs : int
        Passes (the demo makes 15).
    shuffle, random_state : see :func:`daskauc.solvers.twopass.twopass_auc`
    stats : ClassStats, optional
        If given, history records ``objective`` = LS(wbar) (with ``lam``).
    state : SOLAMState, optional
        Continue a previous run.
    n_chains : int or "auto"
        Parallel chains per epoch (:mod:`daskauc.engine.chains`: each stands for the
        sequential run, ``(w, a, b, alpha)`` mixed by steps, the gamma-weighted averages
        exact, the counters summed; the first epoch one chain); 1 is the sequential solver.
    sync_every : int, optional
        With several chains, combine them after every ``sync_every`` chunks of each chain.

    Returns
    -------
    SolverResult
        ``coef`` the gamma-weighted average ``wbar``; ``state`` a :class:`SOLAMState`.

    Notes
    -----
    Saddle point of ``E[F(w, a, b, alpha; z)]`` (module docstring); the ``w``-part is the
    minimizer of LS (with penalty ``lam`` for regSOLAM, constrained to ``||w|| <= R`` for
    SOLAM).

    References
    ----------
    Ying, Wen & Lyu, "Stochastic online AUC maximization", NIPS 2016.
    Natole, Ying & Lyu, "Stochastic AUC optimization algorithms with linear convergence",
    Frontiers in Applied Mathematics and Statistics 5:30, 2019 (regSOLAM).
    Xu, "Towards optimal one pass large scale learning with averaged stochastic gradient
    descent", arXiv:1107.2490, 2011 (the lazy average on sparse rows).
    Guo, Liu, Yuan, Shen, Liu & Yang, "Communication-efficient distributed stochastic AUC
    maximization with deep neural networks", ICML 2020 (CoDA: primal and dual variables of
    parallel chains averaged).
    """
    Xd, yd = _as_xy(X, y)
    if state is None:
        state = initial_state(Xd.shape[1], R=float(R), variant=variant, penalty=penalty,
                              random_state=random_state)
    _check_dim(state.w, Xd)
    mode = 2 if penalty == "l2" else (0 if variant == "paper" else 1)
    lam_eff = float(lam) if penalty == "l2" else 0.0
    state, history = run_epochs(
        _solam_step, Xd, yd, state, solver="solam", n_epochs=n_epochs, shuffle=shuffle,
        params={"zeta": float(zeta), "R": float(R), "kappa": kappa, "mode": mode,
                "lam": lam_eff},
        n_chains=resolve_chains(n_chains, Xd), merge=merge_chains, sync_every=sync_every,
        strides=True, one_chain_first=True,
        record=objective_record(stats, lam_eff, objective="wbar"), log=LOG,
    )
    return SolverResult(coef=state.wbar.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)
