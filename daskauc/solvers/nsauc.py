"""NSAUC and NSVMSGD2: stochastic pairwise hinge SGD streaming chunks (SPEC §4.3).

Objective: ``(lam/2) ||w||^2 + mean over positive-negative pairs of max(0, 1 - w.(x_i - x_j))``.

Pair sampling over chunks
-------------------------
Algorithm 3 of Khalid et al. draws a positive and a negative uniformly from the whole data at
every step. Row chunks streamed one at a time cannot give that exactly without random access
to every chunk; drawing both rows inside one chunk (daskauc before 0.2) never pairs rows of
different chunks, which on data in file order (ijcnn1 is ordered in time) lost 0.003 test
AUC. So every step pairs a positive of the chunk being visited with a negative drawn from the
*whole* data, in two parts:

* an epoch's ``n`` steps are split over the chunks in proportion to their positives
  (largest-remainder rounding), and each step draws its positive uniformly from the chunk:
  over an epoch every positive is equally likely;
* the negative is drawn, with probability ``m-_c / n-`` (the chunk's share of the negatives),
  uniformly among the chunk's own negatives, and otherwise uniformly from a *partner pool*
  carried in the state: the last ``_config.PAIR_PARTNERS`` negatives sampled from the chunks
  visited before, each chunk adding a number in proportion to its negatives (so that the pool
  spans about the last ``_config.PAIR_CHUNKS`` chunks; the first chunk visited uses its own).
  The chunks are visited in a new random order every epoch, so the chunks before are random
  other chunks, and since every chunk adds in proportion to its negatives, every negative has
  the same expected number of copies in the pool: the partner is uniform over all negatives
  in expectation. (Sampling one partner chunk per chunk instead made the negatives of chunks
  with few negatives far more likely: found by the test of the pair law.)

Every positive-negative pair of the data is therefore equally likely (in expectation over
the visiting order), as in Algorithm 3, whatever the row order of the data; one chunk is
Algorithm 3 exactly. The effect on ijcnn1 in file order is measured in
``scripts/defaults.py``. With ``shuffle=False`` the chunk before is the previous one in file
order, and pairs across distant chunks are again missing.

Step size and t0
----------------
``eta_t = 1 / (lam (t + t0))``; ``t0 = 1 / (lam eta0)`` with ``eta0`` from SVMSGD2's search:
on a sample of pairs, start at eta0 = 1 and double or halve while the regularized cost after
one constant-step pass over the sample decreases (Bottou's ``determineEta0``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

import dask
import dask.array as da
import numpy as np

from .._config import PAIR_CHUNKS, PAIR_PARTNERS
from .._validation import seed_sequence, without_finite_check
from ._linear import linear_scores
from ._result import SolverResult
from ._sgd_kernels import _constant_eta_cost, _pairwise_hinge_steps
from .chains import merge_by_steps, merge_running_average
from .stream import block_class_counts, epoch_graph, epoch_plan, resolve_chains

logger = logging.getLogger("daskauc")


@dataclass(frozen=True)
class PairwiseSGDState:
    """State carried from chunk to chunk (and between ``partial_fit`` calls).

    ``partners``: the pool of negatives sampled from the chunks visited before, partners of
    the next chunk's positives (module docstring); None before the first visit."""

    w: np.ndarray
    wbar: np.ndarray
    t: int
    q: int
    t0: float
    epoch: int = 0
    seed_entropy: int = 0
    seed_key: tuple = ()
    partners: np.ndarray | None = None


def steps_per_chunk(counts: np.ndarray, n_steps: int) -> np.ndarray:
    """Split ``n_steps`` over chunks in proportion to their positives.

    ``counts`` is ``(n_chunks, 2)`` of (negatives, positives). Largest-remainder rounding, so
    the result sums to ``n_steps`` exactly (0 for chunks without positives).
    """
    positives = counts[:, 1].astype(np.float64)
    total = positives.sum()
    if total <= 0 or counts[:, 0].sum() <= 0:
        raise ValueError("the data must hold both positive and negative rows")
    share = positives / total * n_steps
    steps = np.floor(share).astype(np.int64)
    rest = int(n_steps - steps.sum())
    if rest > 0:
        steps[np.argsort(-(share - steps), kind="stable")[:rest]] += 1
    return steps


def draw_pairs(rng: np.random.Generator, n_steps: int, n_pos: int, n_neg: int, n_partners: int,
               negatives_total: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of one visit: positives ``ri`` (indices among the chunk's ``n_pos``) and
    negatives ``rj`` (``j >= 0``: the chunk's ``j``-th negative, taken with probability
    ``n_neg / negatives_total``; ``j < 0``: partner ``-1 - j``). Without partners the chunk's
    own negatives; without either, no steps."""
    if n_steps == 0 or n_pos == 0 or (n_neg == 0 and n_partners == 0):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ri = rng.integers(0, n_pos, size=n_steps)
    here = (rng.random(n_steps) < n_neg / negatives_total if n_partners
            else np.ones(n_steps, dtype=bool))
    own = rng.integers(0, max(n_neg, 1), size=n_steps)
    other = rng.integers(0, max(n_partners, 1), size=n_steps)
    return ri, np.where(here, own, -1 - other)


def _nsauc_step(X_block, y_block, state: PairwiseSGDState, seed, n_steps, *, lam, rskip,
                askip, average_start, n_neg, partner_rate):
    X_block = np.ascontiguousarray(X_block)
    y_block = np.asarray(y_block)
    pos = np.flatnonzero(y_block > 0)
    neg = np.flatnonzero(y_block < 0)
    rng = np.random.default_rng(seed)
    partners = state.partners
    if partners is None:
        partners = np.zeros((0, X_block.shape[1]), dtype=X_block.dtype)
    partners = np.ascontiguousarray(partners, dtype=X_block.dtype)
    ri, rj = draw_pairs(rng, int(n_steps), pos.size, neg.size, partners.shape[0], int(n_neg))
    w = state.w.copy()
    wbar = state.wbar.copy()
    counters = np.array([state.t, state.q], dtype=np.int64)
    if ri.size:
        _pairwise_hinge_steps(X_block, partners, pos, neg, ri, rj, w,
                              wbar, counters, float(lam), float(state.t0), int(rskip),
                              int(askip), int(average_start))
    partners = update_partners(state.partners, X_block, neg, rng, partner_rate)
    return replace(state, w=w, wbar=wbar, t=int(counters[0]), q=int(counters[1]),
                   partners=partners)


def update_partners(partners: np.ndarray | None, X_block: np.ndarray, neg: np.ndarray,
                    rng: np.random.Generator, rate: float) -> np.ndarray | None:
    """The partner pool after a visit: ``rate * m-`` of the chunk's negatives (stochastic
    rounding, drawn with replacement) appended, the oldest dropped beyond
    ``PAIR_PARTNERS`` rows. Every chunk adds in proportion to its negatives, so a negative's
    expected number of copies in the pool is the same whichever chunk holds it."""
    if neg.size == 0:
        return partners
    share = rate * neg.size
    count = int(share) + int(rng.random() < share - int(share))
    if count == 0:
        return partners
    new = X_block[neg[rng.integers(0, neg.size, size=count)]]
    if partners is not None and partners.shape[1] == new.shape[1]:
        new = np.concatenate([partners.astype(new.dtype, copy=False), new])
    return np.ascontiguousarray(new[-PAIR_PARTNERS:])


def partner_rate(n_chunks: int, n_neg: int) -> float:
    """Negatives added to the pool per negative visited: a chunk with the mean number of
    negatives adds ``PAIR_PARTNERS / PAIR_CHUNKS`` rows, so the pool spans about the last
    ``PAIR_CHUNKS`` chunks visited."""
    return PAIR_PARTNERS * max(1, n_chunks) / (PAIR_CHUNKS * max(1, n_neg))


def merge_chains(start: PairwiseSGDState, finals: list[PairwiseSGDState],
                 seed) -> PairwiseSGDState:
    """Parallel chains of an epoch (:mod:`daskauc.solvers.chains`).

    With ``eta_t = 1 / (lam (t + t0))`` and the shrinking every ``rskip`` steps, the iterate is
    a scaled sum of the hinge subgradients met: ``(t + t0) w_t = (t_s + t0) w_s + sum g``. The
    chains' sums are added (``(t + t0) w = (t_s + t0) w_s + sum_k [(t_k + t0) w_k - (t_s + t0)
    w_s]`` at ``t = t_s + sum_k (t_k - t_s)``), which is the sequential iterate up to where
    the subgradients were evaluated; averaging the chains' iterates instead (parameter mixing)
    counts each chain's new subgradients once over K (measured: covtype 2 chains -0.0045
    test AUC against -0.0008 summed). ``wbar`` is the exact average of every chain's averaged
    iterates; ``q`` summed."""
    t = start.t + sum(f.t - start.t for f in finals)
    s0 = start.t + start.t0
    v = s0 * start.w + sum((f.t + start.t0) * f.w - s0 * start.w for f in finals)
    wbar = merge_running_average(start.wbar, start.q, [f.wbar for f in finals],
                                 [f.q for f in finals])
    return replace(start, w=v / (t + start.t0), t=t, wbar=wbar,
                   q=start.q + sum(f.q - start.q for f in finals),
                   partners=_last_partners(start, finals))


def _last_partners(start: PairwiseSGDState, finals: list[PairwiseSGDState]):
    """The merged state's partner pool: the last chain's (negatives of the chunks it visited
    last, random chunks of the epoch, as one chain's pool is)."""
    for f in reversed(finals):
        if f.partners is not None:
            return f.partners
    return start.partners


def merge_last_iterates(start: PairwiseSGDState, finals: list[PairwiseSGDState],
                        seed) -> PairwiseSGDState:
    """Parallel chains of NSVMSGD2 (no averaging; its output is the last iterate): the
    chains' iterates mixed by steps (:func:`daskauc.solvers.chains.merge_by_steps`), ``t``
    summed. Adding their subgradient sums as :func:`merge_chains` does extrapolates when the
    step is nearly constant (the eta0 search gives ``t0`` far above an epoch's steps): each
    chain moves ``w`` about as far as one sequential epoch would, and K such moves from one
    start overshoot K-fold (measured: 2 chains -0.003 to -0.014 test AUC, 4 chains -0.06 to
    -0.25, against -0.001 to +0.003 mixed)."""
    return replace(merge_by_steps(start, finals, counter="t"),
                   partners=_last_partners(start, finals))


def sample_pair_differences(X: da.Array, y: da.Array, n_pairs: int, seed,
                            counts: np.ndarray | None = None) -> np.ndarray:
    """Differences ``x_i - x_j`` of ``n_pairs`` random pairs (float64).

    Reads only as many randomly chosen chunks as needed to hold at least ``n_pairs``
    positives and negatives (usually one), in one compute; the pairs are drawn from the
    positives and the negatives of all of them together.
    """
    rng = np.random.default_rng(seed)
    if counts is None:
        counts = block_class_counts(y)
    chosen, have_pos, have_neg = [], 0, 0
    for c in rng.permutation(len(counts)):
        if counts[c, 0] == 0 and counts[c, 1] == 0:
            continue
        chosen.append(int(c))
        have_neg += counts[c, 0]
        have_pos += counts[c, 1]
        if have_pos >= n_pairs and have_neg >= n_pairs:
            break
    if have_pos == 0 or have_neg == 0:
        raise ValueError("the data must hold both positive and negative rows")
    blocks = dask.compute(*[(X.blocks[c], y.blocks[c]) for c in chosen])

    def rows(sign):  # n_pairs rows drawn uniformly among the chosen chunks' rows of a class
        where = [(b, r) for b, (_, yb) in enumerate(blocks)
                 for r in np.flatnonzero(np.sign(np.asarray(yb)) == sign)]
        picks = rng.integers(0, len(where), n_pairs)
        return np.stack([np.asarray(blocks[where[k][0]][0][where[k][1]], dtype=np.float64)
                         for k in picks])

    return np.ascontiguousarray(rows(1) - rows(-1))


def search_eta0(D: np.ndarray, lam: float, *, factor: float = 2.0, max_steps: int = 60) -> float:
    """SVMSGD2's ``determineEta0`` on pair differences ``D``.

    Doubles or halves eta from 1 while the regularized cost after one constant-step pass
    decreases; like Bottou's code it returns the smaller step of the final bracket, so the
    grid's local minimum is at the returned eta0 or at 2 * eta0 (a deliberately cautious step).
    """
    lo_eta = 1.0
    lo_cost = _constant_eta_cost(D, lo_eta, lam)
    hi_eta = lo_eta * factor
    hi_cost = _constant_eta_cost(D, hi_eta, lam)
    steps = 0
    if lo_cost < hi_cost:
        while lo_cost < hi_cost and steps < max_steps:
            hi_eta, hi_cost = lo_eta, lo_cost
            lo_eta = hi_eta / factor
            lo_cost = _constant_eta_cost(D, lo_eta, lam)
            steps += 1
    elif hi_cost < lo_cost:
        while hi_cost < lo_cost and steps < max_steps:
            lo_eta, lo_cost = hi_eta, hi_cost
            hi_eta = lo_eta * factor
            hi_cost = _constant_eta_cost(D, hi_eta, lam)
            steps += 1
    return lo_eta


def pairwise_hinge_sgd(
    X: da.Array,
    y: da.Array,
    *,
    lam: float = 1e-8,
    n_epochs: int = 5,
    n_chains: int | str = 1,
    sync_every: int | None = None,
    average: bool = True,
    rskip: int = 16,
    askip: int = 16,
    average_start: int = 0,
    t0: float | None = None,
    eta0_pairs: int = 1000,
    shuffle: bool = True,
    random_state=None,
    state: PairwiseSGDState | None = None,
    validation=None,
    callback=None,
) -> SolverResult:
    """NSAUC (``average=True``) or NSVMSGD2 (``average=False``) over row-chunked dask arrays.

    Parameters
    ----------
    X : dask array (n, r), row-chunked; y : dask array (n,) of int8 in {-1, +1}, same chunks.
    lam : L2 regularization lambda (the paper's grid is {1e-10, ..., 1e-7}).
    n_epochs : epochs to run; one epoch is ``n`` pair steps, one Dask graph.
    n_chains : chains run in parallel over shares of the chunks each epoch, combined at its
        end (:mod:`daskauc.solvers.chains`); 1 (default) is the sequential solver, "auto" one
        per worker thread.
    sync_every : with several chains, combine them after every ``sync_every`` chunks of each
        chain instead of once per epoch.
    average : return the scheduled average ``wbar`` (NSAUC) or the last iterate (NSVMSGD2).
    rskip : the regularization shrink ``w -= rskip/(t+t0) w`` runs every ``rskip`` steps.
    askip : the average is updated every ``askip`` steps.
    average_start : steps before averaging starts (0 as in Algorithm 3).
    t0 : step offset; None runs the eta0 search on ``eta0_pairs`` pairs, ``t0 = 1/(lam eta0)``.
    random_state : seed for chunk orders, pair draws and the eta0 sample; ignored when
        ``state`` is given (the state carries its seed, so epochs continue one stream).
    state : continue from a previous result's ``state`` (``partial_fit``).
    validation : optional ``(X_val, y_val)``; its AUC is recorded in the history each epoch.
    callback : called as ``callback(epoch, history_row)`` after every epoch.

    Returns
    -------
    SolverResult with ``coef`` = wbar or w, ``state`` a :class:`PairwiseSGDState`.

    Notes
    -----
    Objective ``(lam/2)||w||^2 + (1/(n+ n-)) sum_{i in P, j in N} max(0, 1 - w.(x_i - x_j))``.
    Step: if ``w.(x_i - x_j) < 1`` then ``w += eta_t (x_i - x_j)``, ``eta_t = 1/(lam (t + t0))``;
    every rskip steps ``w -= rskip/(t + t0) w``; every askip steps
    ``wbar = (q wbar + w)/(q + 1)``. See the module docstring for how pairs are sampled.

    References
    ----------
    Khalid, Ray & Chitsaz, "Scalable Nonlinear AUC Maximization Methods", Alg. 3.
    Bordes, Bottou & Gallinari, "SGD-QN", JMLR 2009 (SVMSGD2).
    """
    if lam <= 0:
        raise ValueError(f"lam must be > 0; got {lam}")
    counts = block_class_counts(y)
    n = int(counts.sum())
    r = int(X.shape[1])
    if state is None:
        search_seed, run_seed = seed_sequence(random_state).spawn(2)
        if t0 is None:
            D = sample_pair_differences(X, y, eta0_pairs, search_seed, counts)
            eta0 = search_eta0(D, lam)
            t0 = 1.0 / (lam * eta0)
            logger.info("nsauc: eta0 search gave eta0=%g, t0=%g", eta0, t0)
        state = PairwiseSGDState(w=np.zeros(r), wbar=np.zeros(r), t=0, q=0, t0=float(t0),
                                 seed_entropy=int(run_seed.entropy),
                                 seed_key=tuple(run_seed.spawn_key))
    elif state.w.shape[0] != r:
        raise ValueError(f"X has {r} features but the previous fit had {state.w.shape[0]}")
    steps = steps_per_chunk(counts, n)
    params = dict(lam=float(lam), rskip=int(rskip), askip=int(askip) if average else 0,
                  average_start=int(average_start), n_neg=int(counts[:, 0].sum()),
                  partner_rate=partner_rate(int(np.count_nonzero(counts[:, 0])),
                                            int(counts[:, 0].sum())))
    history = []
    chains = resolve_chains(n_chains)
    X_unchecked = without_finite_check(X)  # the NaN check runs in the first epoch only
    for e in range(n_epochs):
        order, visit_seeds = epoch_plan(state.seed_entropy, state.seed_key, state.epoch,
                                        X.numblocks[0], shuffle)
        tic = time.perf_counter()
        graph = epoch_graph(_nsauc_step, X if e == 0 else X_unchecked, y, state, solver="nsauc",
                            order=order,
                            seeds=visit_seeds, per_chunk=steps, params=params,
                            n_chains=chains,
                            merge=merge_chains if average else merge_last_iterates,
                            sync_every=sync_every)
        (state,) = dask.compute(graph)
        state = replace(state, epoch=state.epoch + 1)
        row = {"epoch": state.epoch, "steps": state.t, "seconds": time.perf_counter() - tic}
        if validation is not None:
            from ..metrics import roc_auc

            coef = state.wbar if average else state.w
            Xv, yv = validation
            row["val_auc"] = float(roc_auc(yv, linear_scores(Xv, coef)))
        history.append(row)
        logger.info("nsauc epoch %d: %.2fs%s", state.epoch, row["seconds"],
                    f", val AUC {row['val_auc']:.4f}" if "val_auc" in row else "")
        if callback is not None:
            callback(state.epoch, row)
    coef = state.wbar if average and state.q > 0 else state.w
    return SolverResult(coef=coef.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)

