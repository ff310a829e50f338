"""OPAUC: one-pass AUC optimization with running class statistics (Gao et al. 2013).

Objective and update: docs/algorithms.md, "OPAUC".

Gao et al. minimize ``(lam_o/2) ||w||^2 + (1/(2 n+ n-)) sum_{i in P, j in N}
(1 - w.(x_i - x_j))^2`` one row at a time: for a positive ``x_t`` (once a negative has been
seen), the loss against every negative seen so far has the gradient

    lam_o w - x_t + c- + (x_t - c-)(x_t - c-)^T w + S- w,

with ``c-`` and ``S-`` the running mean and covariance (``1/n-`` normalized) of the negatives;
and for a negative ``x_t`` (the pairs are ``x_i - x_t``, so the linear term changes sign)

    lam_o w + (x_t - c+) + (x_t - c+)(x_t - c+)^T w + S+ w. Averaged over the rows (with the final
statistics) this is ``(1/2) grad LS_0(w) + lam_o w``, so ``lam_o = lam / 2`` makes OPAUC target
the minimizer of LS with penalty ``lam`` (the family's common scale); this module takes
``lam`` on that scale. Steps are ``w <- w - eta * gradient`` with a constant ``eta``; the output
is the last iterate.

Each class keeps its running sum and its scatter ``sum x x^T`` (lower triangle, float64):
O(r^2) memory and O(r^2) time per row (a rank-one update and a symmetric matrix-vector
product), which is what makes OPAUC impractical at large r (see
``benchmarks/least_squares.py``). The state (two r x r matrices) travels with the chunks.

Parallel chains (``n_chains``, :mod:`daskauc.engine.chains`): the running statistics are sums
over the rows seen, so they merge exactly: each class's sum, scatter and count is the start's
plus every chain's increment, equal (float64 rounding aside) to what one chain accumulates over
the same rows. Within the epoch a chain's statistics hold the start's rows and its own. The
iterate ``w`` is mixed by the steps each chain took (parameter mixing, Zinkevich et al. 2010)
and the step counter summed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._params import NON_NEGATIVE, POSITIVE, Interval
from .._registry import solver
from ..engine.chain_plan import resolve_chains
from ..engine.chains import add_increments, mix_iterates
from ..engine.stream import run_epochs, seed_root
from ._ls_epochs import LOG, as_block, objective_record, row_order
from ._ls_kernels import _opauc_chunk
from ._result import SolverResult
from .stats import ClassStats, _as_xy
from .twopass import _check_dim


@dataclass(frozen=True)
class OPAUCState:
    """Model and running statistics (``counts = [negatives, positives]`` seen)."""

    w: np.ndarray
    sum_pos: np.ndarray
    sum_neg: np.ndarray
    G_pos: np.ndarray
    G_neg: np.ndarray
    counts: np.ndarray
    steps: int
    epoch: int
    seed_entropy: int
    seed_key: tuple


def _opauc_step(Xb, yb, state: OPAUCState, seed, extra, *, eta, lam):
    X = as_block(Xb)
    yv = np.asarray(yb, dtype=np.int8)
    order = row_order(seed, yv.shape[0])
    w = state.w.copy()
    sp, sn = state.sum_pos.copy(), state.sum_neg.copy()
    Gp, Gn = state.G_pos.copy(), state.G_neg.copy()
    counts = state.counts.copy()
    steps = _opauc_chunk(X, yv, order, w, sp, sn, Gp, Gn, counts, float(eta), 0.5 * float(lam))
    return replace(state, w=w, sum_pos=sp, sum_neg=sn, G_pos=Gp, G_neg=Gn, counts=counts,
                   steps=state.steps + int(steps))


def merge_chains(start: OPAUCState, finals: list[OPAUCState], seed) -> OPAUCState:
    """Parallel chains (:mod:`daskauc.engine.chains`): the class sums, scatters and counts
    are the start's plus the chains' increments (exact), ``w`` is mixed by steps, the step
    counter summed."""
    def total(name):
        return add_increments(getattr(start, name), [getattr(f, name) for f in finals])

    return replace(start, w=mix_iterates(start.w, [f.w for f in finals],
                                         [f.steps - start.steps for f in finals]),
                   sum_pos=total("sum_pos"), sum_neg=total("sum_neg"), G_pos=total("G_pos"),
                   G_neg=total("G_neg"), counts=total("counts"), steps=total("steps"))


@solver(kind="stochastic", states=(OPAUCState,), tags=("linear", "least-squares loss"),
        params={"lam": NON_NEGATIVE, "eta": POSITIVE, "n_epochs": Interval(int, 0)})
def opauc(X, y, *, lam: float = 1e-3, eta: float = 2.0**-6, n_epochs: int = 1,
          shuffle: bool = True, random_state=None, stats: ClassStats | None = None,
          state: OPAUCState | None = None, n_chains: int | str = 1,
          sync_every: int | None = None) -> SolverResult:
    """OPAUC over streamed chunks (one pass by default, as in the paper).

    Parameters
    ----------
    X, y : data
    lam : float >= 0
        L2 penalty on the LS scale (the paper's ``lambda = lam / 2``).
    eta : float > 0
        Constant step size.
    n_epochs : int
        Passes; later passes keep accumulating the statistics (each row counts once per pass,
        which leaves the means and covariances unchanged).
    shuffle, random_state : see :func:`daskauc.solvers.twopass.twopass_auc`
    stats : ClassStats, optional
        If given, history records ``objective`` = LS(w).
    state : OPAUCState, optional
        Continue a previous run (``partial_fit``: the stream goes on).
    n_chains : int or "auto"
        Parallel chains per epoch (:mod:`daskauc.engine.chains`: the class statistics
        summed exactly, ``w`` mixed by steps); 1 is the sequential solver.
    sync_every : int, optional
        With several chains, combine them after every ``sync_every`` chunks of each chain.

    Returns
    -------
    SolverResult
        ``coef`` the last iterate; ``state`` an :class:`OPAUCState`.

    Notes
    -----
    Per-row gradient for a positive ``x_t``:
    ``(lam/2) w - x_t + c- + (x_t - c-)(x_t - c-)^T w + S- w`` (module docstring); it averages
    to half the gradient of LS, whose minimizer is the target.

    References
    ----------
    Gao, Jin, Zhu & Zhou, "One-pass AUC optimization", ICML 2013.
    Zinkevich, Weimer, Smola & Li, "Parallelized stochastic gradient descent", NIPS 2010
    (parameter mixing of parallel chains).
    """
    Xd, yd = _as_xy(X, y)
    if state is None:
        r = Xd.shape[1]
        entropy, key = seed_root(random_state)
        state = OPAUCState(np.zeros(r), np.zeros(r), np.zeros(r), np.zeros((r, r)),
                           np.zeros((r, r)), np.zeros(2, dtype=np.int64), 0, 0, entropy, key)
    _check_dim(state.w, Xd)
    state, history = run_epochs(
        _opauc_step, Xd, yd, state, solver="opauc", n_epochs=n_epochs, shuffle=shuffle,
        params={"eta": float(eta), "lam": float(lam)},
        n_chains=resolve_chains(n_chains, Xd), merge=merge_chains, sync_every=sync_every,
        record=objective_record(stats, lam, objective="w"), log=LOG,
    )
    return SolverResult(coef=state.w.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)
