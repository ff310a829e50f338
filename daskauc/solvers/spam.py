"""SPAM: stochastic proximal AUC maximization (Natole, Ying & Lyu 2018).

Objective and update: docs/algorithms.md, "SPAM".

SOLAM's saddle-point function (Ying, Wen & Lyu 2016), with ``p = n+/n``,

    F(w, a, b, alpha; z) = (1-p) (w.x - a)^2 1[y=1] + p (w.x - b)^2 1[y=-1]
                           + 2 (1 + alpha) (p w.x 1[y=-1] - (1-p) w.x 1[y=1])
                           - p (1-p) alpha^2,

is minimized in ``a, b`` and maximized in ``alpha`` at ``a(w) = w.c+``, ``b(w) = w.c-`` and
``alpha(w) = w.(c- - c+)`` (the paper's sign; a widely copied port uses ``w.(c+ - c-)``,
which turns the step into an ascent direction for the ``(w.D)^2`` term). With the class means
from a first pass (as in the authors' code), the gradient in ``w`` at those values is

    y = +1:  2 (1-p) (w.x - a(w) - 1 - alpha(w)) x
    y = -1:  2 p     (w.x - b(w) + 1 + alpha(w)) x,

whose mean over the rows is ``p (1-p)`` times the gradient of the unpenalized LS. So SPAM
with penalty ``Omega(w) = (beta/2) ||w||^2 + beta1 ||w||_1`` minimizes
``p (1-p) [LS_lam(w) - 1 + l1 ||w||_1]`` when ``beta = p (1-p) lam`` and
``beta1 = p (1-p) l1``: that is how this module maps ``lam`` / ``l1`` (on the LS scale, shared
by the whole family) to the paper's ``beta`` / ``beta1``.

Each step: ``u = w - eta_t * grad``; then the proximal map of ``eta_t Omega``:
soft-threshold by ``eta_t beta1`` (SPAM-NET; skipped for SPAM-L2), then shrink by
``1 / (1 + eta_t beta)``. Output: the uniform average of the iterates (this function's
default), or with ``average=False`` the last iterate (the one SPAM's convergence theorems
bound; the default of the :class:`daskauc.SPAM` estimator).
Steps: ``eta_t = eta / sqrt(t)`` (``schedule="invsqrt"``, the authors' code, ``eta`` = their
C) or ``eta_t = eta / (t + 1)`` (``schedule="inverse"``, the O(log T / T) theorem's
``1 / (C~ (t+1))`` with ``eta = 1/C~``).

Sparse rows (CSR chunks; :mod:`daskauc.solvers._spam_sparse_kernels`): the same steps in
O(nnz) a row (O(nnz log b) with ``l1 > 0``) and O(r) a chunk. Exact (the dense kernel's
iterates up to float64 rounding): the L2 shrink (a lazy scale of ``w``), the soft-threshold
of every coordinate at every step (applied per coordinate when a row touches it, the
cumulative penalty of Tsuruoka, Tsujii & Ananiadou 2009 with the scale; ``w.c+-``, which
needs every coordinate, from sums over the coordinates still above their thresholds), the
uniform average of the iterates (prefix sums over the chunk's steps) and, without L1, the
chains' drift. With ``l1 > 0`` the drift is a dense vector between soft-thresholds, which no
lazy form composes: it is added to every coordinate (O(r)) every
:func:`sparse_drift_every` steps instead of every ``DRIFT_EVERY``, the same expected move
per step (the dense schedule exactly while ``r <= DRIFT_EVERY`` non-zeros a row). Rows are
never centred (``x - mean`` would be dense): the paper's steps on the rows as given.
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
    chain_clock,
    chain_frame,
    merge_by_steps,
    next_clock,
)
from ..engine.stream import run_epochs, seed_root
from ._ls_epochs import LOG, as_block, objective_record, row_order
from ._ls_kernels import _spam_chunk
from ._result import SolverResult
from ._spam_sparse_kernels import _spam_chunk_csr
from .stats import (
    ClassMeans,
    ClassStats,
    _as_xy,
    class_means,
)
from .twopass import _check_dim

SCHEDULES = ("invsqrt", "inverse")


@dataclass(frozen=True)
class SPAMState:
    """``clock`` (None: ``t``) and ``velocity`` as in
    :class:`daskauc.solvers.nsauc.PairwiseSGDState`."""

    w: np.ndarray
    wbar: np.ndarray
    t: int
    means: ClassMeans
    epoch: int
    seed_entropy: int
    seed_key: tuple
    clock: float | None = None
    velocity: np.ndarray | None = None


def _spam_step(Xb, yb, state: SPAMState, seed, extra, *, lam, l1, eta, schedule,
               stride=1.0):
    X = as_block(Xb)
    yv = np.asarray(yb, dtype=np.int8)
    order = row_order(seed, yv.shape[0])
    m = state.means
    p = m.p
    w = state.w.copy()
    wbar = state.wbar.copy()
    clock = chain_clock(state)
    gain, drift = chain_frame(stride, state.velocity, DRIFT_EVERY)
    every = DRIFT_EVERY
    kernel, rows = _spam_chunk, (X,)
    if is_sparse(X):
        kernel, rows = _spam_chunk_csr, csr_parts(X)
        if l1 > 0 and drift is not None:  # each drift then costs O(r): O(nnz) a row
            every = sparse_drift_every(X.shape[1], X.nnz, X.shape[0])
            drift = drift * (every / DRIFT_EVERY)
    t = kernel(*rows, yv, order, m.mean_pos, m.mean_neg,
               np.zeros(0) if drift is None else drift, w, wbar, clock, state.t, float(eta),
               schedule == "invsqrt", p, p * (1.0 - p) * lam, p * (1.0 - p) * l1,
               float(stride), gain, every)
    return replace(state, w=w, wbar=wbar, t=int(t), clock=next_clock(state, stride, clock))


def sparse_drift_every(n_features: int, nnz: int, n_rows: int) -> int:
    """Steps between the chains' drifts of SPAM-NET on sparse rows: ``DRIFT_EVERY`` times
    the smallest whole number that makes the O(r) drift cost at most the rows' non-zeros
    (``DRIFT_EVERY`` itself, the dense kernel's, for ``r <= DRIFT_EVERY`` nnz a row)."""
    per_row = max(1.0, nnz / max(1, n_rows))
    return DRIFT_EVERY * max(1, math.ceil(n_features / (DRIFT_EVERY * per_row)))


def merge_chains(start: SPAMState, finals: list[SPAMState], seed) -> SPAMState:
    """Parallel chains (:mod:`daskauc.engine.chains`, "Chains that stand for the sequential
    run"): ``w`` and the clock mixed by steps, with the velocity; the uniform average
    ``wbar`` over all chains' iterates (exact), ``t`` summed, the means fixed."""
    return merge_by_steps(start, finals, counter="t", average="wbar")


@solver(kind="stochastic", states=(SPAMState,), tags=("linear", "least-squares loss"), params={
    "lam": NON_NEGATIVE, "l1": NON_NEGATIVE, "eta": POSITIVE, "schedule": Options(*SCHEDULES),
    "average": bool, "n_epochs": Interval(int, 0)}, sparse=True)
def spam(X, y, *, lam: float = 1e-3, l1: float = 0.0, eta: float = 1.0,
         schedule: str = "invsqrt", average: bool = True, n_epochs: int = 5,
         shuffle: bool = True, random_state=None, means: ClassMeans | None = None,
         stats: ClassStats | None = None, state: SPAMState | None = None,
         update_means: bool = False, n_chains: int | str = 1,
         sync_every: int | None = None) -> SolverResult:
    """SPAM-L2 (``l1 = 0``) or SPAM-NET (``l1 > 0``) over streamed chunks.

    Parameters
    ----------
    X, y : data
    lam : float >= 0
        L2 penalty on the LS scale (the paper's ``beta = p (1-p) lam``).
    l1 : float >= 0
        L1 penalty on the LS scale (the paper's ``beta1 = p (1-p) l1``); > 0 gives SPAM-NET.
    eta : float > 0
        Step constant: ``eta/sqrt(t)`` or ``eta/(t+1)`` by ``schedule``.
    schedule : {"invsqrt", "inverse"}
    average : bool
        Return the uniform average of the iterates (default) or the last iterate
        (the iterate the paper's convergence theorems bound).
    n_epochs : int
    shuffle : bool
    random_state : None, int or Generator
    means : ClassMeans, optional
        First pass, if already computed.
    stats : ClassStats, optional
        If given, history records ``objective`` = LS(wbar) and ``objective_last`` = LS(w).
    state : SPAMState, optional
        Continue a previous run.
    update_means : bool
        With ``state``: merge this X's class statistics into the state's first.
    n_chains : int or "auto"
        Parallel chains per epoch (:mod:`daskauc.engine.chains`: each stands for the
        sequential run, ``w`` mixed by steps, the average exact, the class means fixed; the
        first epoch one chain); 1 is the sequential solver.
    sync_every : int, optional
        With several chains, combine them after every ``sync_every`` chunks of each chain.

    Returns
    -------
    SolverResult
        ``coef`` the averaged (or last) iterate; ``state`` a :class:`SPAMState` (holding
        both).

    Notes
    -----
    Minimizes ``E[F(w, a(w), b(w), alpha(w); z)] + Omega(w)``, equivalently
    ``LS(w) + l1 ||w||_1`` with LS's penalty ``lam`` (module docstring).

    References
    ----------
    Natole, Ying & Lyu, "Stochastic proximal algorithms for AUC maximization", ICML 2018.
    Ying, Wen & Lyu, "Stochastic online AUC maximization", NIPS 2016.
    """
    Xd, yd = _as_xy(X, y)
    fresh = state is None
    if fresh:
        if means is None:
            means = class_means(Xd, yd)
        entropy, key = seed_root(random_state)
        r = Xd.shape[1]
        state = SPAMState(np.zeros(r), np.zeros(r), 0, means, 0, entropy, key)
    _check_dim(state.w, Xd)
    if update_means and not fresh:
        state = replace(state, means=state.means.combine(means or class_means(Xd, yd)))
    state, history = run_epochs(
        _spam_step, Xd, yd, state, solver="spam", n_epochs=n_epochs, shuffle=shuffle,
        params={"lam": float(lam), "l1": float(l1), "eta": float(eta), "schedule": schedule},
        n_chains=resolve_chains(n_chains, Xd), merge=merge_chains, sync_every=sync_every,
        strides=True, one_chain_first=True,
        record=objective_record(stats, lam, objective="wbar", objective_last="w"), log=LOG,
    )
    return SolverResult(coef=(state.wbar if average else state.w).copy(), n_iter=state.epoch,
                        converged=True, history=history, state=state)
