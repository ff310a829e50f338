"""NSAUC and NSVMSGD2: stochastic pairwise hinge SGD streaming chunks.

Khalid, Ray & Chitsaz, Algorithm 3. Objective and update: docs/algorithms.md, "Pairwise hinge
SGD: NSAUC and NSVMSGD2".

Objective: ``(lam/2) ||w||^2 + mean over positive-negative pairs of max(0, 1 - w.(x_i - x_j))``.

Pair sampling over chunks
-------------------------
Algorithm 3 of Khalid et al. draws a positive and a negative uniformly from the whole data at
every step. Row chunks streamed one at a time cannot give that without random access to every
chunk; drawing both rows inside one chunk (daskauc before 0.2) never pairs rows of different
chunks. On ijcnn1 in file order (ordered in time; 1,600-landmark embedding in 5 chunks) that
gave 0.9922-0.9948 test AUC against 0.9962-0.9964 with one chunk (global sampling). So each
visit pairs rows of the chunk with rows of a *window* of the chunks visited just before:

* the chunk with itself: ``rate * m+_c * m-_c`` steps, a uniform positive and a uniform
  negative of the chunk;
* the chunk with each of the ``k`` chunks ``c'`` of the window (at most
  ``_config.PAIR_CHUNKS``, each kept in the state as a uniform sample of its positives and of
  its negatives, ``_config.PAIR_PARTNERS`` rows in all; the chunk's own entry, left from the
  epoch before, is skipped): ``rate * (C - 1) / (2 k) * m+_c * m-_c'`` steps pairing a
  positive of ``c`` with a sampled negative of ``c'``, and as many with ``m+_c' * m-_c`` the
  other way round,

with ``C`` chunks, ``rate = n / (n+ n-)``, stochastic rounding, and the steps of a visit in a
random order. The chunks are visited in a new random order every epoch, so the window is a
uniformly random subset of the other chunks, each in it with probability ``k / (C - 1)``, and
a pair of chunks is met from both sides: every positive-negative pair of the data is drawn
``rate`` times per epoch in expectation, as in Algorithm 3, whatever the row order, and an
epoch makes ``n`` steps in expectation (tested against the uniform law by replaying the
draws). One chunk is Algorithm 3 exactly. With the window, ijcnn1 in file order reaches
0.9959-0.9961 (``benchmarks/defaults.py``). Two earlier designs that were measured and dropped:
the negatives of the one chunk visited before as partners (uniform pairs, but each epoch
paired a chunk's positives with one other chunk's negatives only: 0.9931-0.9946), and a small
first-in-first-out pool of negatives (each pooled row served ~16 steps of a visit: 0.001 AUC
lost even on shuffled rows). With ``shuffle=False`` the window is always the chunks before in
file order, and pairs of distant chunks are missing again.

Sparse rows
-----------
On CSR chunks (:mod:`daskauc._sparse`) the same pairs, steps, shrinks and averages run in
:func:`daskauc.solvers._sgd_sparse_kernels._pairwise_hinge_sparse_steps`: ``w`` is kept as
``a v`` (plus ``c`` times a chain's drift), so the shrink ``w *= 1 - rskip/(t + t0)`` is a
scalar product and a step costs the non-zeros of its two rows; the scheduled average is a
lazy sum (exact algebra), folded in O(d) once per visit. The window's samples are
:class:`daskauc.solvers.oam.SparseRows`, and the eta0 search runs on CSR pair differences
(the same pairs). A sparse fit equals the dense fit of the same rows to rounding. Khalid et
al.'s step ``1 / (lam (t + t0))`` and SVMSGD2's search assume nothing about density.

Step size and t0
----------------
``eta_t = 1 / (lam (t + t0))``; ``t0 = 1 / (lam eta0)`` with ``eta0`` from SVMSGD2's search:
on a sample of pairs, start at eta0 = 1 and double or halve while the regularized cost after
one constant-step pass over the sample decreases (Bottou's ``determineEta0``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import dask.array as da
import numpy as np

from .._compute import compute
from .._config import PAIR_CHUNKS, PAIR_PARTNERS
from .._params import POSITIVE, Interval, seed_sequence
from .._registry import solver
from .._sparse import csr_parts, is_sparse
from ..engine.chain_plan import resolve_chains
from ..engine.chains import chain_frame, merge_moving, merge_running_average
from ..engine.stream import block_class_counts, run_epochs
from ._linear import validation_score
from ._online_sparse_kernels import _average_of_sum, _lazy_fold, _sum_of_average
from ._result import SolverResult
from ._sgd_kernels import _constant_eta_cost, _pairwise_hinge_steps
from ._sgd_sparse_kernels import _constant_eta_cost_sparse, _pairwise_hinge_sparse_steps
from .oam import SparseRows, as_dense_rows, as_sparse_rows

logger = logging.getLogger("daskauc")


@dataclass(frozen=True)
class PairwiseSGDState:
    """State carried from chunk to chunk (and between ``partial_fit`` calls).

    The partner window (module docstring): ``partners`` holds, for each of the last chunks
    visited (most recent last; their indices ``partners_chunk``, their numbers of positives
    and negatives ``partners_of``, the ``clock`` at which they joined ``partners_at``), a
    sample of their positives and of their negatives; empty before the first visit.

    ``clock`` (None: ``t``) counts the steps of the sequential run the steps taken stand for
    and ``velocity`` is the move of ``w`` per step of that run over the last round of
    parallel chains (None before one): :mod:`daskauc.engine.chains`, "Chains that stand for
    the sequential run"."""

    w: np.ndarray
    wbar: np.ndarray
    t: int
    q: int
    t0: float
    epoch: int = 0
    seed_entropy: int = 0
    seed_key: tuple = ()
    partners: tuple = ()
    partners_chunk: tuple = ()
    partners_of: tuple = ()
    partners_at: tuple = ()
    clock: float | None = None
    velocity: np.ndarray | None = None


def pair_rate(counts: np.ndarray) -> float:
    """Steps per positive-negative pair: ``n / (n+ n-)``, so that an epoch makes ``n`` steps
    in expectation. ``counts`` is ``(n_chunks, 2)`` of (negatives, positives)."""
    n_neg, n_pos = (int(v) for v in counts.sum(axis=0))
    if n_pos == 0 or n_neg == 0:
        raise ValueError("the data must hold both positive and negative rows")
    return (n_neg + n_pos) / (n_neg * n_pos)


def window_size(n_chunks: int) -> int:
    """Chunks in the partner window: ``PAIR_CHUNKS``, or every other chunk when fewer."""
    return max(1, min(PAIR_CHUNKS, n_chunks - 1))


def _stochastic_round(rng: np.random.Generator, x: float) -> int:
    whole = int(np.floor(x))
    return whole + int(rng.random() < x - whole)


def draw_pairs(rng: np.random.Generator, n_pos: int, n_neg: int, window: list[tuple],
               *, rate: float, n_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of one visit of a chunk with ``n_pos`` positives and ``n_neg`` negatives:
    positives ``ri`` and negatives ``rj``, in a random order. An index ``>= 0`` is the
    chunk's own positive (negative) of that rank; ``-1 - k`` is row ``k`` of the window's
    partners (each entry's sampled positives then negatives, entry after entry).

    ``window`` lists, per entry, ``(positives sampled, negatives sampled, positives in its
    chunk, negatives in its chunk)`` (an entry of this very chunk left out by the caller).
    ``rate * n_pos * n_neg`` steps pair the chunk with itself; with each of the ``k``
    entries' chunks, ``rate * (C - 1) / (2 k) * n_pos * m-`` steps pair this chunk's
    positives with its negatives and as many (with its ``m+`` and this ``n_neg``) the other
    way round; all rounded stochastically. The ``k`` entries are a uniformly random
    ``k``-subset of the other chunks, each in it with probability ``k / (C - 1)``, and a
    pair of two chunks is met from either side, so every pair is drawn ``rate`` times in
    expectation over the visiting order (module docstring)."""
    k = sum(1 for e in window if e[0] or e[1])
    cross = rate * (n_chunks - 1) / (2 * max(1, k))
    parts_i = [rng.integers(0, max(n_pos, 1), size=_stochastic_round(
        rng, rate * n_pos * n_neg) if n_pos and n_neg else 0)]
    parts_j = [rng.integers(0, max(n_neg, 1), size=parts_i[0].size)]
    offset = 0
    for rows_pos, rows_neg, of_pos, of_neg in window:
        if n_chunks > 1:
            a = _stochastic_round(rng, cross * n_pos * of_neg) if n_pos and rows_neg else 0
            b = _stochastic_round(rng, cross * of_pos * n_neg) if n_neg and rows_pos else 0
            parts_i += [rng.integers(0, max(n_pos, 1), size=a),
                        -1 - offset - rng.integers(0, max(rows_pos, 1), size=b)]
            parts_j += [-1 - offset - rows_pos - rng.integers(0, max(rows_neg, 1), size=a),
                        rng.integers(0, max(n_neg, 1), size=b)]
        offset += rows_pos + rows_neg
    ri, rj = np.concatenate(parts_i), np.concatenate(parts_j)
    order = rng.permutation(ri.size)
    return ri[order], rj[order]


def sample_partners(X_block: np.ndarray, rows: np.ndarray, rng: np.random.Generator,
                    n_chunks: int) -> np.ndarray:
    """A window entry's sample of one class: up to ``PAIR_PARTNERS / (2 L)`` of the chunk's
    ``rows``, without replacement (:class:`daskauc.solvers.oam.SparseRows` for a CSR
    chunk)."""
    keep = max(1, PAIR_PARTNERS // (2 * window_size(n_chunks)))
    if rows.size > keep:
        rows = np.sort(rng.choice(rows, keep, replace=False))
    if is_sparse(X_block):
        return SparseRows.from_csr(X_block[rows])
    return np.ascontiguousarray(X_block[rows])


def _nsauc_step(X_block, y_block, state: PairwiseSGDState, seed, chunk, *, lam, rskip,
                askip, average_start, rate, n_chunks, stride=1.0):
    if not is_sparse(X_block):
        X_block = np.ascontiguousarray(X_block)
    y_block = np.asarray(y_block)
    pos = np.flatnonzero(y_block > 0)
    neg = np.flatnonzero(y_block < 0)
    rng = np.random.default_rng(seed)
    # the window without this chunk's own entry (visited last in the epoch before)
    entries = [(p, of) for p, c, of in zip(state.partners, state.partners_chunk,
                                          state.partners_of, strict=True) if c != chunk]
    ri, rj = draw_pairs(rng, pos.size, neg.size,
                        [(len(pp), len(pn), op, on) for (pp, pn), (op, on) in entries],
                        rate=rate, n_chunks=n_chunks)
    w = state.w.copy()
    wbar = state.wbar  # shared, never written: a new one where the steps change it
    counters = np.array([state.t, state.q], dtype=np.int64)
    clock = np.array([state.t if state.clock is None else state.clock], dtype=np.float64)
    if ri.size:
        gain, drift = chain_frame(stride, state.velocity, rskip)
        drift = np.zeros(0) if drift is None else drift
        parts = [part for (pp, pn), _ in entries for part in (pp, pn)]
        if is_sparse(X_block):
            wbar = _sparse_steps(X_block, parts, pos, neg, ri, rj, drift, w, wbar, counters,
                                 clock, lam, state.t0, rskip, askip, average_start, stride,
                                 gain)
        else:
            wbar = wbar.copy()
            partners = np.concatenate([np.zeros((0, X_block.shape[1]), X_block.dtype)]
                                      + [as_dense_rows(p) for p in parts]
                                      ).astype(X_block.dtype, copy=False)
            _pairwise_hinge_steps(X_block, np.ascontiguousarray(partners), pos, neg, ri, rj,
                                  drift, w, wbar, counters, clock, float(lam),
                                  float(state.t0), int(rskip), int(askip),
                                  int(average_start), float(stride), gain)
    state = replace(state, w=w, wbar=wbar, t=int(counters[0]), q=int(counters[1]),
                    clock=None if state.clock is None and stride == 1 else float(clock[0]))
    # this chunk joins the window, replacing its older entry
    keep = [k for k, c in enumerate(state.partners_chunk) if c != chunk]
    keep = keep[max(0, len(keep) - window_size(n_chunks) + 1):]
    entry = (sample_partners(X_block, pos, rng, n_chunks),
             sample_partners(X_block, neg, rng, n_chunks))
    return replace(state,
                   partners=(*(state.partners[k] for k in keep), entry),
                   partners_chunk=(*(state.partners_chunk[k] for k in keep), int(chunk)),
                   partners_of=(*(state.partners_of[k] for k in keep),
                                (int(pos.size), int(neg.size))),
                   partners_at=(*(_at(state, k) for k in keep), float(clock[0])))


def _sparse_steps(X_block, parts, pos, neg, ri, rj, drift, w, wbar, counters, clock, lam, t0,
                  rskip, askip, average_start, stride, gain) -> None:
    """The steps of a visit of a CSR chunk (:func:`_pairwise_hinge_sparse_steps`, ``w`` and
    the average lazily, folded once at the end): ``w``, ``counters`` and ``clock`` updated in
    place as the dense kernel does; returns the new average (``wbar`` itself, not written,
    when no iterate was averaged)."""
    indptr, indices, data = csr_parts(X_block)
    partners = SparseRows.concat([as_sparse_rows(p) for p in parts], X_block.shape[1])
    q0 = int(counters[1])
    # the visit's sum of averaged iterates is added to q0 wbar: one new d-vector for both
    acc = _sum_of_average(wbar, q0) if askip > 0 else np.zeros(0)
    scal = np.array([1.0, 0.0, 0.0, 0.0])
    _pairwise_hinge_sparse_steps(indptr, indices, data, partners.indptr, partners.indices,
                                 partners.data, pos, neg, ri, rj, drift, w, acc, scal,
                                 counters, clock, float(lam), float(t0), int(rskip),
                                 int(askip), int(average_start), float(stride), gain)
    _lazy_fold(w, acc, drift, scal)  # w is w, acc q0 wbar + the sum of the iterates averaged
    if askip > 0 and counters[1] > q0:
        return _average_of_sum(acc, int(counters[1]))
    return wbar


def _at(state: PairwiseSGDState, k: int) -> float:
    """When window entry ``k`` joined (states of before 0.6 did not record it: in order)."""
    return state.partners_at[k] if state.partners_at else float(k - len(state.partners))


def merge_chains(start: PairwiseSGDState, finals: list[PairwiseSGDState],
                 seed) -> PairwiseSGDState:
    """Parallel chains of an epoch (:mod:`daskauc.engine.chains`, "Chains that stand for the
    sequential run"): ``w`` mixed by steps, ``wbar`` the exact average of every chain's
    averaged iterates, ``t`` and ``q`` summed, ``clock`` the chains' (mixed by steps), the
    velocity the merged move of ``w`` per step of the clock; the partner window the last
    chunks visited by any chain, by the clock at which they joined (the sequential run's
    order when the chains' strides are their shares of the round)."""
    steps = [f.t - start.t for f in finals]
    w, clock, velocity = merge_moving(start.w, _clock(start), [f.w for f in finals],
                                      [_clock(f) for f in finals], steps, start.velocity)
    wbar = merge_running_average(start.wbar, start.q, [f.wbar for f in finals],
                                 [f.q for f in finals])
    return replace(_merged_window(start, finals), w=w, wbar=wbar, t=start.t + sum(steps),
                   q=start.q + sum(f.q - start.q for f in finals), clock=clock,
                   velocity=velocity)


def _clock(state: PairwiseSGDState) -> float:
    return float(state.t if state.clock is None else state.clock)


def _merged_window(start: PairwiseSGDState, finals: list[PairwiseSGDState]
                   ) -> PairwiseSGDState:
    """``start`` with the partner window of the last chunks any chain visited: every
    chain's entries (the start's ones each chain kept count once), the latest of each chunk,
    the most recent by the clock at which they joined, as many as the longest window."""
    size = max(len(f.partners) for f in (start, *finals))
    latest: dict = {}
    for f in (start, *finals):
        for k, chunk in enumerate(f.partners_chunk):
            at = _at(f, k)
            if chunk not in latest or at > latest[chunk][0]:
                latest[chunk] = (at, f.partners[k], f.partners_of[k])
    window = sorted(latest.items(), key=lambda item: item[1][0])[len(latest) - size:]
    return replace(start, partners=tuple(e[1] for _, e in window),
                   partners_chunk=tuple(c for c, _ in window),
                   partners_of=tuple(e[2] for _, e in window),
                   partners_at=tuple(e[0] for _, e in window))


def sample_pair_differences(X: da.Array, y: da.Array, n_pairs: int, seed,
                            counts: np.ndarray | None = None) -> np.ndarray:
    """Differences ``x_i - x_j`` of ``n_pairs`` random pairs (float64; a CSR matrix for
    sparse rows, the same pairs as for their dense form).

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
    blocks = compute(*[(X.blocks[c], y.blocks[c]) for c in chosen])
    if is_sparse(blocks[0][0]):
        return _sparse_pair_differences(blocks, n_pairs, rng)

    def rows(sign):  # n_pairs rows drawn uniformly among the chosen chunks' rows of a class
        where = [(b, r) for b, (_, yb) in enumerate(blocks)
                 for r in np.flatnonzero(np.sign(np.asarray(yb)) == sign)]
        picks = rng.integers(0, len(where), n_pairs)
        return np.stack([np.asarray(blocks[where[k][0]][0][where[k][1]], dtype=np.float64)
                         for k in picks])

    return np.ascontiguousarray(rows(1) - rows(-1))


def _sparse_pair_differences(blocks, n_pairs: int, rng: np.random.Generator):
    """:func:`sample_pair_differences` of CSR blocks: the same draws (rows numbered block
    after block), a CSR matrix of ``n_pairs`` differences."""
    import scipy.sparse

    X = scipy.sparse.vstack([b for b, _ in blocks], format="csr").astype(np.float64)
    y = np.concatenate([np.sign(np.asarray(yb)) for _, yb in blocks])

    def rows(sign):
        where = np.flatnonzero(y == sign)
        return X[where[rng.integers(0, len(where), n_pairs)]]

    D = (rows(1) - rows(-1)).tocsr()
    D.sort_indices()
    return D


def _eta_cost(D, eta: float, lam: float) -> float:
    """SVMSGD2's ``evaluateEta`` on dense or CSR pair differences ``D``."""
    if is_sparse(D):
        return _constant_eta_cost_sparse(D.indptr, D.indices, D.data, D.shape[1], eta, lam)
    return _constant_eta_cost(D, eta, lam)


def search_eta0(D: np.ndarray, lam: float, *, factor: float = 2.0, max_steps: int = 60) -> float:
    """SVMSGD2's ``determineEta0`` on pair differences ``D`` (dense, or CSR for sparse rows).

    Doubles or halves eta from 1 while the regularized cost after one constant-step pass
    decreases; like Bottou's code it returns the smaller step of the final bracket, so the
    grid's local minimum is at the returned eta0 or at 2 * eta0 (a deliberately cautious step).
    """
    lo_eta = 1.0
    lo_cost = _eta_cost(D, lo_eta, lam)
    hi_eta = lo_eta * factor
    hi_cost = _eta_cost(D, hi_eta, lam)
    steps = 0
    if lo_cost < hi_cost:
        while lo_cost < hi_cost and steps < max_steps:
            hi_eta, hi_cost = lo_eta, lo_cost
            lo_eta = hi_eta / factor
            lo_cost = _eta_cost(D, lo_eta, lam)
            steps += 1
    elif hi_cost < lo_cost:
        while hi_cost < lo_cost and steps < max_steps:
            lo_eta, lo_cost = hi_eta, hi_cost
            hi_eta = lo_eta * factor
            hi_cost = _eta_cost(D, hi_eta, lam)
            steps += 1
    return lo_eta


@solver(kind="stochastic", states=(PairwiseSGDState, SparseRows), tags=("linear", "pairwise"),
        sparse=True, params={
    "lam": POSITIVE, "average": bool, "rskip": Interval(int, 1), "askip": Interval(int, 1),
    "average_start": Interval(int, 0), "t0": [POSITIVE, None], "eta0_pairs": Interval(int, 2),
    "shuffle": bool})
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
    X : dask array (n, r), row-chunked, of dense or CSR blocks (sparse rows: O(non-zeros)
        per step, module docstring); y : dask array (n,) of int8 in {-1, +1}, same chunks.
    lam : L2 regularization lambda (the paper's grid is {1e-10, ..., 1e-7}).
    n_epochs : epochs to run; one epoch is ``n`` pair steps, one Dask graph.
    n_chains : chains run in parallel over shares of the chunks each epoch, combined at its
        end (:mod:`daskauc.engine.chains`, "Chains that stand for the sequential run"; the
        first epoch one chain); 1 (default) is the sequential solver, "auto" the cost
        model's count (:func:`daskauc.engine.chain_plan.resolve_chains`).
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
    counts = block_class_counts(y)
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
    params = dict(lam=float(lam), rskip=int(rskip), askip=int(askip) if average else 0,
                  average_start=int(average_start), rate=pair_rate(counts),
                  n_chunks=int(X.numblocks[0]))
    state, history = run_epochs(
        _nsauc_step, X, y, state, solver="nsauc", n_epochs=n_epochs, params=params,
        per_chunk=list(range(X.numblocks[0])), shuffle=shuffle,
        n_chains=resolve_chains(n_chains, X),
        merge=merge_chains, sync_every=sync_every, strides=True, one_chain_first=True,
        remote=("partners",),
        record=lambda s, seconds: {"steps": s.t, "seconds": seconds},
        score=validation_score(validation, average),
        score_as=("val_auc", "val AUC"), callback=callback)
    coef = state.wbar if average and state.q > 0 else state.w
    return SolverResult(coef=coef.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)

