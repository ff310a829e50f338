"""Online Uni-Exp / Uni-Squ: SGD on a class-weighted univariate loss (Kotlowski et al. 2011).

Objective and update: docs/algorithms.md, "Univariate baselines".

Kotlowski, Dembczynski & Huellermeier (2011) show that minimizing a univariate exponential
(or logistic) loss whose positive and negative rows are weighted by ``1/p`` and ``1/(1-p)``
also minimizes a bound on the rank (1 - AUC) risk. With an unpenalized offset ``b`` the link
is exact for the exponential loss: minimizing
``(1/n+) sum_P exp(-(w.x + b)) + (1/n-) sum_N exp(w.x + b)`` over ``b`` leaves
``2 sqrt((1/n+ n-) sum_{P x N} exp(-w.(x_i - x_j)))``, the pairwise (RankBoost) exponential
loss; for the squared loss the minimizing ``w`` is parallel to the least-squares AUC
optimum (``(S+ + S- + lam/2 I)^(-1) D``, see docs/algorithms.md, "Least-squares AUC"). So
the solver learns ``b`` alongside ``w`` (unpenalized) and returns ``w`` only: AUC does not
depend on ``b``.

Streaming exactly as :mod:`daskauc.solvers.oam`: one graph per epoch
(``daskauc-uni-exp-epoch-...`` / ``daskauc-uni-squ-epoch-...``), a random chunk order and a
random row order per chunk drawn by the Python step from the visit's ``SeedSequence``.

Parallel chains (``n_chains``, :mod:`daskauc.engine.chains`), for both losses: each chain
stands for the sequential run ("Chains that stand for the sequential run": ``eta0 /
sqrt(clock)``, scaled by its stride in its first round, then the sequential step and the
other chains' move of the last round added to ``(w, b)``; Uni-Exp on standardized covtype,
2 chains: -0.0012 test AUC when mixed alone, +0.0001 so); ``w`` and the offset ``b`` are
mixed by the steps each chain took; the uniform averages ``wbar`` and ``bbar`` are merged
exactly (the average of every chain's iterates and the start's); the step counter ``t``
and the positives seen are the start's plus every chain's increment, so ``p_t`` continues
from the totals.

Sparse rows (CSR chunks, :mod:`daskauc._sparse`):
:func:`daskauc.solvers._online_sparse_kernels._univariate_sparse_chunk` keeps ``w`` as
``a v + c drift`` (the L2 decay ``1 - eta lam`` and a chain's drift on the scalars ``a``,
``c``; ``v`` touched at the row's non-zeros) and the average lazily, folded in O(d) once
per chunk (or when ``|a|`` falls below 1e-9, 1e-3 while averaging): a step costs
O(nnz(x)). The same steps as on the dense rows of the same data, exact algebra: equal to
rounding. The step size ``eta0 / sqrt(t)`` and the penalty are Kotlowski et al.'s, which
assume nothing about density.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._params import NON_NEGATIVE, POSITIVE, Options
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
from ._linear import validation_score
from ._online_kernels import LOSS_EXP, LOSS_SQUARE, _univariate_chunk
from ._online_sparse_kernels import (
    _average_of_sum,
    _lazy_fold,
    _sum_of_average,
    _univariate_sparse_chunk,
)
from ._result import SolverResult
from .oam import as_stream_input

LOSSES = {"exp": LOSS_EXP, "square": LOSS_SQUARE}
SCHEDULES = ("invsqrt", "constant")


@dataclass(frozen=True)
class UnivariateState:
    """State carried from chunk to chunk and between ``partial_fit`` calls.

    ``offset = [b, bbar]``; ``counts = [t steps done, positives seen]`` (so ``p_t`` is
    estimated from every row seen, over all epochs); ``epoch`` counts finished epochs and
    ``seed_entropy`` / ``seed_key`` name the root ``SeedSequence``; ``clock`` (None: ``t``)
    and ``velocity`` (of ``(w, b)``) as in :class:`daskauc.solvers.nsauc.PairwiseSGDState`.
    """

    w: np.ndarray
    wbar: np.ndarray
    offset: np.ndarray
    counts: np.ndarray
    epoch: int
    seed_entropy: int
    seed_key: tuple
    clock: float | None = None
    velocity: np.ndarray | None = None


def univariate_draws(seed: np.random.SeedSequence, m: int, shuffle: bool) -> np.ndarray:
    """The row visiting order of one visit of an ``m``-row chunk."""
    if not shuffle:
        return np.arange(m, dtype=np.int64)
    return np.random.default_rng(seed).permutation(m).astype(np.int64)


def _univariate_step(X_block, y_block, state: UnivariateState, seed, extra, *, loss, eta0,
                     constant, lam, average, shuffle, stride=1.0):
    if is_sparse(X_block):
        return _univariate_sparse_step(X_block, y_block, state, seed, loss=loss, eta0=eta0,
                                       constant=constant, lam=lam, average=average,
                                       shuffle=shuffle, stride=stride)
    X_block = np.ascontiguousarray(X_block)
    y_block = np.ascontiguousarray(y_block, dtype=np.int8)
    order = univariate_draws(seed, X_block.shape[0], shuffle)
    w = state.w.copy()
    wbar = state.wbar.copy()
    offset = state.offset.copy()
    counts = state.counts.copy()
    clock = np.array([_clock(state)], dtype=np.float64)
    gain, drift = chain_frame(stride, state.velocity, DRIFT_EVERY)
    _univariate_chunk(X_block, y_block, order, np.zeros(0) if drift is None else drift, w,
                      wbar, offset, counts, clock, float(eta0), bool(constant), float(lam),
                      int(loss), bool(average), float(stride), gain, DRIFT_EVERY)
    return replace(state, w=w, wbar=wbar, offset=offset, counts=counts,
                   clock=None if state.clock is None and stride == 1 else float(clock[0]))


def _univariate_sparse_step(X_block, y_block, state: UnivariateState, seed, *, loss, eta0,
                            constant, lam, average, shuffle, stride):
    """:func:`_univariate_step` on a CSR chunk (module docstring, "Sparse rows")."""
    indptr, indices, data = csr_parts(X_block)
    y_block = np.ascontiguousarray(y_block, dtype=np.int8)
    order = univariate_draws(seed, X_block.shape[0], shuffle)
    v = state.w.copy()
    # the chunk's sum of iterates is added to q0 wbar: one new d-vector for both
    acc = _sum_of_average(state.wbar, int(state.counts[0])) if average else np.zeros(0)
    scal = np.array([1.0, 0.0, 0.0, 0.0])
    offset = state.offset.copy()
    counts = state.counts.copy()
    clock = np.array([_clock(state)], dtype=np.float64)
    gain, drift = chain_frame(stride, state.velocity, DRIFT_EVERY)
    drift = np.zeros(0) if drift is None else drift
    _univariate_sparse_chunk(indptr, indices, data, y_block, order, drift, v, acc, scal,
                             offset, counts, clock, float(eta0), bool(constant), float(lam),
                             int(loss), bool(average), float(stride), gain, DRIFT_EVERY)
    _lazy_fold(v, acc, drift, scal)  # v is w, acc q0 wbar + the sum of the chunk's iterates
    wbar = (_average_of_sum(acc, int(counts[0])) if average and counts[0] > state.counts[0]
            else state.wbar)  # shared, never written: states are not mutated
    return replace(state, w=v, wbar=wbar, offset=offset, counts=counts,
                   clock=None if state.clock is None and stride == 1 else float(clock[0]))


def _clock(state: UnivariateState) -> float:
    return float(state.counts[0] if state.clock is None else state.clock)


def merge_chains(start: UnivariateState, finals: list[UnivariateState],
                 seed) -> UnivariateState:
    """Parallel chains (:mod:`daskauc.engine.chains`, "Chains that stand for the sequential
    run"): ``w`` and ``b`` mixed by steps, with the clock and the velocity; ``wbar`` and
    ``bbar`` exact averages over every chain's steps, the counters summed."""
    t0 = int(start.counts[0])
    ts = [int(f.counts[0]) for f in finals]
    steps = [t - t0 for t in ts]
    point, clock, velocity = merge_moving(
        np.append(start.w, start.offset[0]), _clock(start),
        [np.append(f.w, f.offset[0]) for f in finals], [_clock(f) for f in finals], steps,
        start.velocity)
    offset = np.array([
        point[-1],
        merge_running_average(start.offset[1:], t0, [f.offset[1:] for f in finals], ts)[0]])
    return replace(start, w=point[:-1],
                   wbar=merge_running_average(start.wbar, t0, [f.wbar for f in finals], ts),
                   offset=offset, counts=add_increments(start.counts, [f.counts for f in finals]),
                   clock=clock, velocity=velocity)


@solver(kind="stochastic", states=(UnivariateState,), tags=("linear", "univariate"),
        sparse=True, params={
    "loss": Options(*LOSSES), "lam": NON_NEGATIVE, "eta0": POSITIVE,
    "schedule": Options(*SCHEDULES), "average": bool, "shuffle": bool})
def univariate_sgd(
    X,
    y,
    *,
    loss: str = "exp",
    lam: float = 0.0,
    eta0: float = 0.01,
    schedule: str = "invsqrt",
    average: bool = True,
    n_epochs: int = 5,
    shuffle: bool = True,
    random_state=None,
    state: UnivariateState | None = None,
    chunk_rows: int | None = None,
    validation=None,
    callback=None,
    n_chains: int | str = 1,
    sync_every: int | None = None,
) -> SolverResult:
    """Online Uni-Exp (``loss="exp"``) or Uni-Squ (``loss="square"``) over row chunks.

    Parameters
    ----------
    X : array (n, d), numpy or dask, chunked along rows; or sparse rows (a scipy sparse
        matrix, a dask array of CSR blocks): O(non-zeros) per step (module docstring).
    y : array (n,) of int8 labels in {-1, +1}.
    loss : ``"exp"`` (``exp(-y s)``) or ``"square"`` (``(1 - y s)^2``).
    lam : L2 penalty ``(lam/2)||w||^2`` (>= 0; the offset is not penalized).
    eta0 : step size; ``eta_t = eta0 / sqrt(t)`` or ``eta0`` by ``schedule``.
    schedule : ``"invsqrt"`` or ``"constant"``.
    average : return the uniform average of the iterates (else the last iterate).
    n_epochs : passes over the data; ``t`` and ``p_t`` carry over between epochs.
    shuffle : random chunk order and random row order inside each chunk, every epoch.
    random_state : None, int, SeedSequence or Generator; ignored when ``state`` is given.
    state : continue from a previous result's ``state`` (``partial_fit``).
    chunk_rows : rows per chunk for numpy input (or to rechunk dask input).
    validation : optional ``(X_val, y_val)`` (y in {-1, +1}); its AUC goes in the history.
    callback : called as ``callback(epoch, history_row)`` after every epoch.
    n_chains : parallel chains per epoch (:mod:`daskauc.engine.chains`: each stands for the
        sequential run, ``w`` and ``b`` mixed by steps, the averages exact, the counters
        summed; the first epoch one chain); 1 (default) is the sequential algorithm, "auto"
        the cost model's count (:func:`daskauc.engine.chain_plan.resolve_chains`).
    sync_every : with several chains, combine them after every ``sync_every`` chunks of each.

    Returns
    -------
    SolverResult
        ``coef`` = ``wbar`` or ``w``; ``state`` a :class:`UnivariateState` (its ``offset``
        holds ``b`` and its average).

    Notes
    -----
    Objective, with ``s = w.x + b`` and ``p`` the fraction of positives:
    ``(1/n) sum_i [1(y_i = 1) / p + 1(y_i = -1) / (1 - p)] l(y_i s_i) + (lam/2)||w||^2``,
    ``l(z) = exp(-z)`` (Uni-Exp) or ``(1 - z)^2`` (Uni-Squ). Step ``t`` (1-based over all
    epochs) uses ``p_t`` = positives among the ``t`` rows seen so far (this one included),
    weight ``c = 1/p_t`` or ``1/(1 - p_t)``, ``g = c l'(y s) y``:
    ``w <- w - eta_t (g x + lam w)``, ``b <- b - eta_t g``, ``wbar <- wbar + (w - wbar)/t``.
    ``w`` and ``b`` start at 0.

    References
    ----------
    Kotlowski, Dembczynski & Huellermeier, "Bipartite Ranking through Minimization of
    Univariate Loss", ICML 2011.
    Zinkevich, Weimer, Smola & Li, "Parallelized stochastic gradient descent", NIPS 2010
    (parameter mixing of parallel chains).
    """
    X, y = as_stream_input(X, y, chunk_rows)
    d = int(X.shape[1])
    if state is None:
        entropy, key = seed_root(random_state)
        state = UnivariateState(w=np.zeros(d), wbar=np.zeros(d), offset=np.zeros(2),
                                counts=np.zeros(2, dtype=np.int64), epoch=0,
                                seed_entropy=entropy, seed_key=key)
    elif state.w.shape[0] != d:
        raise ValueError(f"X has {d} features but the previous fit had {state.w.shape[0]}")
    solver = "uni-exp" if loss == "exp" else "uni-squ"
    params = dict(loss=LOSSES[loss], eta0=float(eta0), constant=schedule == "constant",
                  lam=float(lam), average=bool(average), shuffle=bool(shuffle))
    state, history = run_epochs(
        _univariate_step, X, y, state, solver=solver, n_epochs=n_epochs, params=params,
        shuffle=shuffle, n_chains=resolve_chains(n_chains, X), merge=merge_chains,
        sync_every=sync_every, strides=True, one_chain_first=True,
        record=lambda s, seconds: {"steps": int(s.counts[0]), "seconds": seconds},
        finite=lambda s: (s.w, s.offset),
        diverged="{solver} diverged in epoch {epoch} (non-finite coefficients); lower eta0, "
                 "raise lam or standardize the features",
        score=validation_score(validation, average),
        callback=callback)
    coef = state.wbar if average else state.w
    return SolverResult(coef=coef.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)
