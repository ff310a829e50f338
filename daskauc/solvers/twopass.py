"""TwoPassAUC (Luan & Gao 2018): class means in a first pass, then SGD on LS.

Objective and update: docs/algorithms.md, "TwoPassAUC".

Derivation of the per-row gradient. Write LS with the class means ``c+``, ``c-`` and
``D = c+ - c-``:

    LS(w) = 1 - 2 w.D + (w.D)^2 + (1/n+) sum_{i in P} (w.(x_i - c+))^2
            + (1/n-) sum_{j in N} (w.(x_j - c-))^2 + (lam/2) ||w||^2.

To write it as a mean over all ``n`` rows, ``LS(w) = (1/n) sum_t L_t(w)``, each positive row
must carry its class term with weight ``n/n+`` (and each negative with ``n/n-``), because
``(1/n) sum_{i in P} (n/n+) (w.(x_i - c+))^2 = (1/n+) sum_{i in P} (w.(x_i - c+))^2``:

    L_t(w) = (n/n+) (w.(x_t - c+))^2 + 1 - 2 w.D + (w.D)^2 + (lam/2) ||w||^2   (y_t = +1)

and symmetrically with ``n/n-`` and ``c-`` for ``y_t = -1``. Its gradient,

    g_t(w) = 2 (n/n+) (w.(x_t - c+)) (x_t - c+) + 2 (w.D - 1) D + lam w,

averages to the gradient of LS exactly over the n rows, so a row drawn uniformly gives an
unbiased gradient. (The paper prints a factor ``1/T+``, which would not average to the
gradient; ``tests/test_least_squares.py`` checks the identity against a brute-force sum
over pairs.)

Streaming: pass 1 is :func:`daskauc.solvers.stats.class_means`; each epoch of pass 2 is one
Dask graph ``daskauc-twopass-epoch-...`` threading ``w`` through the chunks in a shuffled
order, rows inside a chunk in a random permutation (numba kernel
``_ls_kernels._twopass_sgd_chunk``, two O(r) loops per row).

Sparse rows (CSR chunks): ``_ls_sparse_kernels._twopass_sgd_chunk_csr``, the same steps in
O(nnz) a row and O(r) a chunk, exact (the dense kernel's iterates up to float64 rounding):
``w`` is kept as ``alpha v + beta+ c+ + beta- c- + gamma f`` (the decay a scale, the dense
``c+ - c-`` and ``x - c_y`` terms and the chains' drift ``f`` coefficients), so a row moves
``v`` on its non-zeros only.

Parallel chains (``n_chains``, :mod:`daskauc.engine.chains`): pass 2 is plain SGD on ``w``;
each chain stands for the sequential run ("Chains that stand for the sequential run": the
step on the clock, scaled by its stride in its first round, then the sequential step and the
other chains' move of the last round), the chains' iterates are mixed by the steps each
took, the step counter is the start's plus every chain's steps, and the first pass's means
stay the start's (they are fixed within an epoch).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import dask.array as da
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
from ._ls_kernels import _twopass_sgd_chunk
from ._ls_sparse_kernels import _twopass_sgd_chunk_csr
from ._result import SolverResult
from .stats import (
    ClassMeans,
    ClassStats,
    _as_xy,
    class_means,
)

SCHEDULES = ("constant", "invsqrt")


@dataclass(frozen=True)
class TwoPassState:
    """Model, step counter and first-pass statistics carried between chunks and calls;
    ``clock`` (None: ``t``) and ``velocity`` as in
    :class:`daskauc.solvers.nsauc.PairwiseSGDState`."""

    w: np.ndarray
    t: int
    means: ClassMeans
    epoch: int
    seed_entropy: int
    seed_key: tuple
    clock: float | None = None
    velocity: np.ndarray | None = None


def _twopass_step(Xb, yb, state: TwoPassState, seed, extra, *, lam, eta, schedule,
                  stride=1.0):
    X = as_block(Xb)
    yv = np.asarray(yb, dtype=np.int8)
    order = row_order(seed, yv.shape[0])
    m = state.means
    w = state.w.copy()
    clock = chain_clock(state)
    gain, drift = chain_frame(stride, state.velocity, DRIFT_EVERY)
    kernel, rows = ((_twopass_sgd_chunk_csr, csr_parts(X)) if is_sparse(X)
                    else (_twopass_sgd_chunk, (X,)))
    t = kernel(*rows, yv, order, m.mean_pos, m.mean_neg,
               np.zeros(0) if drift is None else drift, w, clock, state.t, float(eta),
               schedule == "invsqrt", float(lam), 2.0 * m.n / m.n_pos, 2.0 * m.n / m.n_neg,
               float(stride), gain, DRIFT_EVERY)
    return replace(state, w=w, t=int(t), clock=next_clock(state, stride, clock))


def merge_chains(start: TwoPassState, finals: list[TwoPassState], seed) -> TwoPassState:
    """Parallel chains (:mod:`daskauc.engine.chains`, "Chains that stand for the sequential
    run"): ``w`` and the clock mixed by steps, with the velocity; ``t`` summed, the means
    fixed (the start's)."""
    return merge_by_steps(start, finals, counter="t")


def twopass_gradient(w: np.ndarray, X: np.ndarray, y: np.ndarray, means: ClassMeans,
                     lam: float) -> np.ndarray:
    """Per-row gradients ``g_t(w)`` of TwoPassAUC, shape (n, r) (small data, for checks)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    w = np.asarray(w, dtype=np.float64)
    D = means.D
    c = np.where((y > 0)[:, None], means.mean_pos, means.mean_neg)
    weight = np.where(y > 0, means.n / means.n_pos, means.n / means.n_neg)
    Z = X - c
    return (2.0 * weight * (Z @ w))[:, None] * Z + 2.0 * (w @ D - 1.0) * D + lam * w


@solver(kind="stochastic", states=(TwoPassState, ClassMeans), tags=("linear", "least-squares loss"),
        params={"lam": NON_NEGATIVE, "eta": POSITIVE, "schedule": Options(*SCHEDULES),
                "n_epochs": Interval(int, 0)}, sparse=True)
def twopass_auc(X, y, *, lam: float = 1e-3, eta: float = 2.0**-6, schedule: str = "constant",
                n_epochs: int = 5, shuffle: bool = True, random_state=None,
                means: ClassMeans | None = None, stats: ClassStats | None = None,
                state: TwoPassState | None = None, update_means: bool = False,
                n_chains: int | str = 1, sync_every: int | None = None) -> SolverResult:
    """TwoPassAUC: first pass class means, then SGD with the unbiased gradient of LS.

    Parameters
    ----------
    X, y : data (numpy, dask, or a store path for X with ``y=None``)
    lam : float >= 0
        L2 penalty of LS (the paper's lambda).
    eta : float > 0
        Step size (``schedule="constant"``, the paper) or its constant in ``eta/sqrt(t)``.
    schedule : {"constant", "invsqrt"}
    n_epochs : int >= 1
        Passes of SGD (the paper makes one).
    shuffle : bool
        Visit the chunks in a random order each epoch (rows inside a chunk are always
        permuted).
    random_state : None, int or Generator
    means : ClassMeans, optional
        The first pass, if already computed (skips it).
    stats : ClassStats, optional
        If given, each epoch's history records ``objective`` = LS(w) (O(r^2), no data pass).
    state : TwoPassState, optional
        Continue a previous run (``partial_fit``); ``means`` are then taken from it.
    update_means : bool
        With ``state``: first merge the class statistics of this ``X`` into the state's
        (a pass over X), as ``partial_fit`` on a new batch of a stream does.
    n_chains : int or "auto"
        Parallel chains per epoch of pass 2 (:mod:`daskauc.engine.chains`: each stands for
        the sequential run, ``w`` mixed by steps, the step counter summed, the means fixed;
        the first epoch one chain); 1 is the sequential solver.
    sync_every : int, optional
        With several chains, combine them after every ``sync_every`` chunks of each chain.

    Returns
    -------
    SolverResult
        ``coef`` the last iterate; ``state`` a :class:`TwoPassState`.

    Notes
    -----
    Minimizes LS(w) (docs/algorithms.md, "Least-squares AUC") by SGD with the per-row
    gradient (derived in the module docstring)

        g_t(w) = 2 (n/n+) (w.(x_t - c+)) (x_t - c+) + 2 (w.D - 1) D + lam w   (y_t = +1),

    symmetric for ``y_t = -1``, whose mean over the n rows is the gradient of LS.

    References
    ----------
    Luan & Gao, "Two-pass AUC optimization", CAAI Transactions on Intelligent Systems 13(3),
    2018 (there called TPAUC; not LibAUC's two-way partial AUC).
    Zinkevich, Weimer, Smola & Li, "Parallelized stochastic gradient descent", NIPS 2010
    (parameter mixing of parallel chains).
    """
    Xd, yd = _as_xy(X, y)
    fresh = state is None
    if fresh:
        if means is None:
            means = class_means(Xd, yd)
        entropy, key = seed_root(random_state)
        state = TwoPassState(np.zeros(Xd.shape[1]), 0, means, 0, entropy, key)
    _check_dim(state.w, Xd)
    if update_means and not fresh:
        state = replace(state, means=state.means.combine(means or class_means(Xd, yd)))
    state, history = run_epochs(
        _twopass_step, Xd, yd, state, solver="twopass", n_epochs=n_epochs, shuffle=shuffle,
        params={"lam": float(lam), "eta": float(eta), "schedule": schedule},
        n_chains=resolve_chains(n_chains, Xd), merge=merge_chains, sync_every=sync_every,
        strides=True, one_chain_first=True,
        record=objective_record(stats, lam, objective="w"), log=LOG,
    )
    return SolverResult(coef=state.w.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)


def _check_dim(w: np.ndarray, Xd: da.Array) -> None:
    if w.shape[0] != Xd.shape[1]:
        raise ValueError(
            f"X has {Xd.shape[1]} features but the state to continue from has {w.shape[0]}"
        )
