"""OAM: online AUC maximization with reservoir buffers, streaming chunks (Zhao et al. 2011).

Objective and update: docs/algorithms.md, "Online pairwise hinge: OAM".

Zhao, Hoi, Jin & Yang (2011) write the pairwise hinge objective
``(1/2)||w||^2 + C sum_{i in P, j in N} max(0, 1 - w.(x_i - x_j))`` as a sum over arriving
rows: row ``t`` pays the hinge against every earlier row of the other class. Keeping every
row is impossible, so each class keeps a reservoir sample (Vitter's algorithm R) of at most
``K`` rows, and the hinge against the opposite buffer is reweighted by
``c_t = C max(1, N_t / K)`` (``N_t`` rows of the other class seen so far) so that it stands
for the sum over all of them. The update against the buffer is either sequential
passive-aggressive steps (OAMseq) or one gradient step (OAMgra); see
:func:`daskauc.solvers._online_kernels._oam_chunk` for the exact formulas.

Streaming: one epoch is one Dask graph (``daskauc-oam-epoch-...``) threading the state
``(w, B+, B-, counts)`` through the chunks in a shuffled order; inside a chunk the rows are
visited in a random permutation. Every random number (the chunk order, the row order, the
reservoir acceptance uniforms and replacement slots) is drawn by the Python step from the
visit's ``SeedSequence`` and handed to the numba kernel as arrays (:func:`oam_draws`), so the
run is reproducible bit for bit for a given seed and chunking, on any scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import dask.array as da
import numpy as np

from .._params import POSITIVE, Options
from .._registry import solver
from .._validation import as_row_chunked
from ..engine.chain_plan import resolve_chains
from ..engine.chains import merge_reservoirs, merge_running_average, mix_iterates
from ..engine.stream import run_epochs, seed_root
from ._linear import validation_score
from ._online_kernels import _oam_chunk, _offer_own_rows
from ._result import SolverResult

UPDATES = ("seq", "gra")


@dataclass(frozen=True)
class OAMState:
    """State carried from chunk to chunk and between ``partial_fit`` calls.

    ``buf_pos`` / ``buf_neg`` are ``(K, d)`` float64; only their first ``min(n, K)`` rows are
    in use, ``n`` the count of that class in ``counts = [negatives seen, positives seen]``.
    ``epoch`` counts finished epochs; ``seed_entropy`` / ``seed_key`` name the root
    ``SeedSequence`` so that later epochs continue the same random stream. ``own`` is only set
    inside a parallel chain: ``(own_neg, own_pos, own_counts)``, reservoirs of that chain's
    own rows, which the end-of-epoch merge needs (:func:`merge_chains`).
    """

    w: np.ndarray
    wbar: np.ndarray
    buf_pos: np.ndarray
    buf_neg: np.ndarray
    counts: np.ndarray
    epoch: int
    seed_entropy: int
    seed_key: tuple
    own: tuple | None = None


def oam_draws(seed: np.random.SeedSequence, m: int, buffer_size: int, shuffle: bool):
    """The random arrays of one visit of an ``m``-row chunk: ``(order, u, slot)``.

    ``order`` is the row permutation (``arange(m)`` without shuffling); ``u[s]`` and
    ``slot[s]`` decide whether, and where, the ``s``-th visited row enters its full reservoir.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(m).astype(np.int64) if shuffle else np.arange(m, dtype=np.int64)
    u = rng.random(m)
    slot = rng.integers(0, buffer_size, size=m, dtype=np.int64)
    return order, u, slot


def _oam_step(X_block, y_block, state: OAMState, seed, extra, *, C, eta, update, average,
              shuffle, chains=False):
    X_block = np.ascontiguousarray(X_block)
    y_block = np.ascontiguousarray(y_block, dtype=np.int8)
    order, u, slot = oam_draws(seed, X_block.shape[0], state.buf_pos.shape[0], shuffle)
    w = state.w.copy()
    wbar = state.wbar.copy()
    buf_pos = state.buf_pos.copy()
    buf_neg = state.buf_neg.copy()
    counts = state.counts.copy()
    _oam_chunk(X_block, y_block, order, u, slot, w, wbar, buf_pos, buf_neg, counts,
               float(C), float(eta), update == "gra", bool(average))
    own = None
    if chains:  # a parallel chain also keeps reservoirs of its own rows for the merge
        own_neg, own_pos, own_counts = (
            (a.copy() for a in state.own) if state.own is not None
            else (np.zeros_like(buf_neg), np.zeros_like(buf_pos), np.zeros(2, np.int64)))
        _offer_own_rows(X_block, y_block, order, u, slot, own_neg, own_pos, own_counts)
        own = (own_neg, own_pos, own_counts)
    return replace(state, w=w, wbar=wbar, buf_pos=buf_pos, buf_neg=buf_neg, counts=counts,
                   own=own)


def merge_chains(start: OAMState, finals: list[OAMState], seed) -> OAMState:
    """Parallel chains (:mod:`daskauc.engine.chains`): ``w`` mixed by the rows each chain saw,
    ``wbar`` (the average over rows) exact, the counts summed, each class's reservoir merged
    into a uniform sample of every row of that class seen."""
    rng = np.random.default_rng(seed)
    n0 = int(start.counts.sum())
    seen = [int(f.counts.sum()) for f in finals]
    bufs = {}
    for c, name in ((0, "buf_neg"), (1, "buf_pos")):
        bufs[name] = merge_reservoirs(
            getattr(start, name), int(start.counts[c]),
            [f.own[c] if f.own is not None else getattr(start, name)[:0] for f in finals],
            [int(f.own[2][c]) if f.own is not None else 0 for f in finals], rng)
    return replace(
        start, w=mix_iterates(start.w, [f.w for f in finals], [s - n0 for s in seen]),
        wbar=merge_running_average(start.wbar, n0, [f.wbar for f in finals], seen),
        counts=start.counts + sum(f.counts - start.counts for f in finals), own=None, **bufs)


def as_stream_input(X, y, chunk_rows: int | None):
    """Numpy or dask ``X`` / ``y`` -> row-chunked dask arrays with the same chunks.

    ``y`` must already hold int8 labels in {-1, +1} (estimators map labels first).
    """
    if not isinstance(X, da.Array):
        X = as_row_chunked(X, chunk_rows=chunk_rows)
    elif chunk_rows is not None:
        X = X.rechunk({0: int(chunk_rows), 1: -1})
    elif len(X.chunks[1]) != 1:
        X = X.rechunk({1: -1})
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if isinstance(y, da.Array):
        y = y.astype(np.int8).rechunk((X.chunks[0],))
    else:
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},); got {y.shape}")
        if not np.isin(y, (-1, 1)).all():
            raise ValueError("y must hold labels in {-1, +1}; map them with as_labels first")
        y = da.from_array(y.astype(np.int8), chunks=(X.chunks[0],), name=False)
    return X, y


@solver(kind="stochastic", states=(OAMState,), tags=("linear", "pairwise"), params={
    "C": POSITIVE, "update": Options(*UPDATES), "eta": POSITIVE, "average": bool,
    "shuffle": bool})
def oam(
    X,
    y,
    *,
    C: float = 1.0,
    buffer_size: int = 100,
    update: str = "seq",
    eta: float = 0.5,
    average: bool = False,
    n_epochs: int = 1,
    shuffle: bool = True,
    random_state=None,
    state: OAMState | None = None,
    chunk_rows: int | None = None,
    validation=None,
    callback=None,
    n_chains: int | str = 1,
    sync_every: int | None = None,
) -> SolverResult:
    """OAMseq / OAMgra over row-chunked data (numpy or dask), one Dask graph per epoch.

    Parameters
    ----------
    X : array (n, d), numpy or dask, chunked along rows.
    y : array (n,) of int8 labels in {-1, +1}.
    C : penalty C of the pairwise hinge (> 0).
    buffer_size : reservoir size K of each class (100 in Khalid et al.).
    update : ``"seq"`` (passive-aggressive step per buffered row, OAMseq) or ``"gra"``
        (one gradient step over the violating buffered rows, OAMgra).
    eta : step size of OAMgra (unused by OAMseq). ``0.5`` makes the largest per-pair step
        ``c_t / 2``, the cap of OAMseq's ``tau``.
    average : return the uniform average of the iterates (one per row, over all epochs)
        instead of the last iterate of Zhao et al.
    n_epochs : passes over the data (the paper makes one).
    shuffle : visit chunks, and rows inside a chunk, in a random order every epoch.
    random_state : None, int, SeedSequence or Generator; ignored when ``state`` is given
        (the state carries its own seed so epochs continue one random stream).
    state : continue from a previous result's ``state`` (``partial_fit``).
    chunk_rows : rows per chunk for numpy input (or to rechunk dask input).
    validation : optional ``(X_val, y_val)`` (y in {-1, +1}); its AUC goes in the history.
    callback : called as ``callback(epoch, history_row)`` after every epoch.
    n_chains : parallel chains per epoch (:mod:`daskauc.engine.chains`: ``w`` mixed by rows,
        the average exact, the reservoirs merged into uniform samples of all rows seen); 1 is
        Zhao et al.'s sequential algorithm.
    sync_every : with several chains, combine them after every ``sync_every`` chunks of each.

    Returns
    -------
    SolverResult
        ``coef`` the last iterate ``w`` or the average ``wbar`` (float64), ``state`` an
        :class:`OAMState`.

    Notes
    -----
    Row ``t`` (label ``y_t``, ``N_t`` rows of the other class seen, opposite buffer ``B``)
    minimizes ``c_t sum_{x in B} max(0, 1 - y_t w.(x_t - x))``, ``c_t = C max(1, N_t / K)``.
    OAMseq: for each ``x`` in ``B`` in turn, ``tau = min(c_t / 2, hinge / ||x_t - x||^2)`` and
    ``w <- w + tau y_t (x_t - x)`` (pairs with ``x_t = x`` are skipped). OAMgra:
    ``w <- w + eta c_t y_t sum_{x in B, hinge > 0} (x_t - x)``, the hinges taken at the ``w``
    before the row. Then ``x_t`` is offered to its own class's reservoir: the ``k``-th row
    of a class is kept with probability ``min(1, K / k)``, replacing a uniformly chosen row.
    The buffers start empty and ``w = 0``. Zhao et al. return the last iterate; with
    ``average`` the mean of the iterates after every row is returned instead (measured on
    ijcnn1, see the estimator's Notes).

    References
    ----------
    Zhao, Hoi, Jin & Yang, "Online AUC Maximization", ICML 2011.
    Vitter, "Random sampling with a reservoir", ACM TOMS 1985.
    Khalid, Ray & Chitsaz, "Scalable Nonlinear AUC Maximization Methods" (NOAM, K = 100).
    """
    X, y = as_stream_input(X, y, chunk_rows)
    d = int(X.shape[1])
    if state is None:
        if int(buffer_size) < 1:
            raise ValueError(f"buffer_size must be >= 1; got {buffer_size}")
        entropy, key = seed_root(random_state)
        K = int(buffer_size)
        state = OAMState(w=np.zeros(d), wbar=np.zeros(d), buf_pos=np.zeros((K, d)),
                         buf_neg=np.zeros((K, d)), counts=np.zeros(2, dtype=np.int64), epoch=0,
                         seed_entropy=entropy, seed_key=key)
    elif state.w.shape[0] != d:
        raise ValueError(f"X has {d} features but the previous fit had {state.w.shape[0]}")
    chains = resolve_chains(n_chains, X)
    params = dict(C=float(C), eta=float(eta), update=update, average=bool(average),
                  shuffle=bool(shuffle))
    if chains > 1:
        params["chains"] = True
    state, history = run_epochs(
        _oam_step, X, y, state, solver="oam", n_epochs=n_epochs, params=params,
        shuffle=shuffle, n_chains=chains, merge=merge_chains, sync_every=sync_every,
        record=lambda s, seconds: {"rows": int(s.counts.sum()), "seconds": seconds},
        finite=lambda s: (s.w,),
        diverged="OAM diverged in epoch {epoch} (non-finite coefficients); lower C or eta, "
                 "or standardize the features",
        score=validation_score(validation, average),
        callback=callback)
    coef = state.wbar if average else state.w
    return SolverResult(coef=coef.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)
