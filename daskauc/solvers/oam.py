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

Sparse rows (CSR chunks, :mod:`daskauc._sparse`): the reservoirs hold their rows sparse
(:class:`SparseRows`, ``K`` rows each; never ``K x d``), and a chunk runs
:func:`daskauc.solvers._online_sparse_kernels._oam_sparse_chunk`: ``w.(x_t - x)`` and
``||x_t - x||^2`` over the merge of the two rows' sorted indices, the step at their union,
so a row costs O(K (nnz(x_t) + nnz(x))), and the average ``wbar`` is kept lazily (exact
algebra; the O(d) finish once per chunk). The same draws as the dense kernel, the same
arithmetic at every feature where a row is non-zero: a sparse fit equals the dense fit of
the same rows to rounding (the average to the rounding of its lazy sum).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import dask.array as da
import numpy as np

from .._params import POSITIVE, Options
from .._registry import solver
from .._sparse import csr_parts, is_sparse, is_sparse_dask
from .._validation import as_row_chunked
from ..engine.chain_plan import resolve_chains
from ..engine.chains import merge_reservoirs, merge_running_average, mix_iterates
from ..engine.stream import run_epochs, seed_root
from ._linear import validation_score
from ._online_kernels import _oam_chunk, _offer_own_rows
from ._online_sparse_kernels import (
    _add_scaled,
    _average_of_sum,
    _compact_slots,
    _oam_sparse_chunk,
    _offer_own_sparse,
    _sum_of_average,
)
from ._result import SolverResult

UPDATES = ("seq", "gra")


@dataclass(frozen=True, eq=False)
class SparseRows:
    """Rows kept sparse in a solver state (OAM's reservoirs, the pairwise hinge SGD's
    partner samples): CSR arrays, int64 ``indptr`` (n + 1) and ``indices``, float64 ``data``
    (float32 rows widened exactly), canonical (sorted indices); ``n_features`` columns.
    Model files hold it as its arrays (:mod:`daskauc.io`)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    n_features: int

    @classmethod
    def empty(cls, n_rows: int, n_features: int) -> SparseRows:
        """``n_rows`` rows with no non-zero."""
        return cls(np.zeros(n_rows + 1, np.int64), np.zeros(0, np.int64), np.zeros(0),
                   int(n_features))

    @classmethod
    def from_csr(cls, X) -> SparseRows:
        """The rows of a canonical CSR matrix."""
        return cls(np.asarray(X.indptr, np.int64), np.asarray(X.indices, np.int64),
                   np.asarray(X.data, np.float64), int(X.shape[1]))

    @classmethod
    def from_dense(cls, X: np.ndarray) -> SparseRows:
        """The rows of a dense array (a state of dense rows continued on sparse ones)."""
        import scipy.sparse

        return cls.from_csr(scipy.sparse.csr_matrix(np.asarray(X, np.float64)))

    @classmethod
    def concat(cls, parts: list[SparseRows], n_features: int) -> SparseRows:
        """The rows of ``parts``, one after the other."""
        if not parts:
            return cls.empty(0, n_features)
        ends = np.cumsum([0] + [int(p.indptr[-1]) for p in parts[:-1]])
        indptr = np.concatenate([[0]] + [p.indptr[1:] + e for p, e in zip(parts, ends,
                                                                        strict=True)])
        return cls(indptr.astype(np.int64), np.concatenate([p.indices for p in parts]),
                   np.concatenate([p.data for p in parts]), int(n_features))

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.indptr) - 1, self.n_features)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def to_csr(self):
        """The rows as a ``scipy.sparse.csr_matrix`` (sharing the arrays)."""
        import scipy.sparse

        return scipy.sparse.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def to_dense(self) -> np.ndarray:
        """The rows as a dense float64 array (a state continued on dense rows: ``K x d`` is
        what the dense solver keeps anyway)."""
        out = np.zeros(self.shape)
        for i in range(len(self)):
            lo, hi = self.indptr[i], self.indptr[i + 1]
            out[i, self.indices[lo:hi]] = self.data[lo:hi]
        return out

    def __getitem__(self, rows) -> SparseRows:
        """The rows ``rows`` (a slice or an array of row numbers), in that order."""
        rows = np.arange(len(self))[rows]
        lo, hi = self.indptr[rows], self.indptr[rows + 1]
        take = (np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)])
                if rows.size else np.zeros(0, np.int64)).astype(np.int64)
        indptr = np.concatenate([[0], np.cumsum(hi - lo)]).astype(np.int64)
        return SparseRows(indptr, self.indices[take], self.data[take], self.n_features)


def as_sparse_rows(rows) -> SparseRows:
    """``rows`` (dense rows or :class:`SparseRows`) as :class:`SparseRows`."""
    return rows if isinstance(rows, SparseRows) else SparseRows.from_dense(rows)


def as_dense_rows(rows) -> np.ndarray:
    """``rows`` (dense rows or :class:`SparseRows`) as a dense float64 array."""
    return rows.to_dense() if isinstance(rows, SparseRows) else rows


@dataclass(frozen=True)
class OAMState:
    """State carried from chunk to chunk and between ``partial_fit`` calls.

    ``buf_pos`` / ``buf_neg`` are ``(K, d)`` float64, or :class:`SparseRows` of ``K`` rows
    for a fit on sparse rows; only their first ``min(n, K)`` rows are in use, ``n`` the
    count of that class in ``counts = [negatives seen, positives seen]``.
    ``epoch`` counts finished epochs; ``seed_entropy`` / ``seed_key`` name the root
    ``SeedSequence`` so that later epochs continue the same random stream. ``own`` is only set
    inside a parallel chain: ``(own_neg, own_pos, own_counts)``, reservoirs of that chain's
    own rows, which the end-of-epoch merge needs (:func:`merge_chains`).
    """

    w: np.ndarray
    wbar: np.ndarray
    buf_pos: np.ndarray | SparseRows
    buf_neg: np.ndarray | SparseRows
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
    if is_sparse(X_block):
        return _oam_sparse_step(X_block, y_block, state, seed, C=C, eta=eta, update=update,
                                average=average, shuffle=shuffle, chains=chains)
    state = _buffers_as(state, as_dense_rows)
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


def _buffers_as(state: OAMState, kind) -> OAMState:
    """``state`` with its reservoirs (and a chain's own ones) as ``kind`` gives them: a state
    of dense rows continued on sparse ones, or the other way round."""
    if isinstance(state.buf_pos, SparseRows) == (kind is as_sparse_rows):
        return state
    own = state.own
    if own is not None:
        own = (kind(own[0]), kind(own[1]), own[2])
    return replace(state, buf_pos=kind(state.buf_pos), buf_neg=kind(state.buf_neg), own=own)


def _pool(bufs: tuple[SparseRows, SparseRows], extra: np.ndarray):
    """The two reservoirs ``(negatives, positives)`` as the slots and pools of
    :func:`_oam_sparse_chunk`, with room for ``extra[c]`` more non-zeros of class ``c``."""
    live = np.array([int(b.indptr[-1]) for b in bufs], dtype=np.int64)
    size = max(1, int((live + extra).max()))
    pool_idx = np.zeros((2, size), np.int64)
    pool_val = np.zeros((2, size))
    for c, b in enumerate(bufs):
        pool_idx[c, :live[c]] = b.indices
        pool_val[c, :live[c]] = b.data
    starts = np.stack([b.indptr[:-1] for b in bufs]).astype(np.int64)
    lens = np.stack([np.diff(b.indptr) for b in bufs]).astype(np.int64)
    return starts, lens, pool_idx, pool_val, live.copy()


def _pool_rows(starts, lens, pool_idx, pool_val, n_features: int
               ) -> tuple[SparseRows, SparseRows]:
    """The slots of :func:`_pool` back as two compact :class:`SparseRows`."""
    out = []
    for c in range(2):
        nnz = int(lens[c].sum())
        indptr, indices, data = (np.zeros(starts.shape[1] + 1, np.int64),
                                 np.zeros(nnz, np.int64), np.zeros(nnz))
        _compact_slots(starts[c], lens[c], pool_idx[c], pool_val[c], indptr, indices, data)
        out.append(SparseRows(indptr, indices, data, int(n_features)))
    return out[0], out[1]


def _entering_nnz(indptr: np.ndarray, y: np.ndarray, order: np.ndarray, u: np.ndarray,
                  counts: np.ndarray, K: int, own: bool = False) -> np.ndarray:
    """Non-zeros of the chunk's ``[negative, positive]`` rows that will enter their
    reservoir (the draws decide it: the ``k``-th row of a class while ``k <= K``, later when
    ``u < K / k``; ``u k < K`` as :func:`_offer_own_sparse` writes it): the room the pools
    need, so a chunk's pools stay near the reservoirs' size, not the chunk's."""
    per_row = np.diff(np.asarray(indptr, np.int64))[order]
    positive = y[order] > 0
    out = np.zeros(2, np.int64)
    for c, rows in ((0, ~positive), (1, positive)):
        k = np.maximum(counts[c] + np.cumsum(rows), 1)  # >= 1 at the class's own rows
        enter = (k <= K) | ((u * k < K) if own else (u < K / k))
        out[c] = int(per_row[rows & enter].sum())
    return out


def _oam_sparse_step(X_block, y_block, state: OAMState, seed, *, C, eta, update, average,
                     shuffle, chains):
    """:func:`_oam_step` on a CSR chunk (module docstring, "Sparse rows")."""
    state = _buffers_as(state, as_sparse_rows)
    indptr, indices, data = csr_parts(X_block)
    y_block = np.ascontiguousarray(y_block, dtype=np.int8)
    m, d = X_block.shape
    K = len(state.buf_pos)
    order, u, slot = oam_draws(seed, m, K, shuffle)
    extra = _entering_nnz(indptr, y_block, order, u, state.counts, K)
    starts, lens, pool_idx, pool_val, ends = _pool((state.buf_neg, state.buf_pos), extra)
    w = state.w.copy()
    counts = state.counts.copy()
    q0 = int(state.counts.sum())
    # the chunk's sum of iterates is added to q0 wbar: one new d-vector for both
    acc = _sum_of_average(state.wbar, q0) if average else np.zeros(0)
    alpha = np.zeros(1)
    gradient = update == "gra"
    row_nnz = int(np.diff(indptr).max()) if m else 0
    scratch = min(d, row_nnz + pool_idx.shape[1]) if gradient else 0
    _oam_sparse_chunk(indptr, indices, data, y_block, order, u, slot, w, acc, alpha, starts,
                      lens, pool_idx, pool_val, ends, counts,
                      np.zeros(d if gradient else 0), np.zeros(d if gradient else 0, np.int8),
                      np.zeros(scratch, np.int64), float(C), float(eta), gradient,
                      bool(average))
    wbar = state.wbar  # shared, never written: states are not mutated
    if average and int(counts.sum()) > q0:
        wbar = _average_of_sum(_add_scaled(acc, alpha[0], w), int(counts.sum()))
    buf_neg, buf_pos = _pool_rows(starts, lens, pool_idx, pool_val, d)
    own = None
    if chains:  # a parallel chain also keeps reservoirs of its own rows for the merge
        if state.own is not None:
            own_bufs, own_counts = (state.own[0], state.own[1]), state.own[2].copy()
        else:
            own_bufs = (SparseRows.empty(K, d), SparseRows.empty(K, d))
            own_counts = np.zeros(2, np.int64)
        o_starts, o_lens, o_idx, o_val, o_ends = _pool(
            own_bufs, _entering_nnz(indptr, y_block, order, u, own_counts, K, own=True))
        _offer_own_sparse(indptr, indices, data, y_block, order, u, slot, o_starts, o_lens,
                          o_idx, o_val, o_ends, own_counts)
        own_neg, own_pos = _pool_rows(o_starts, o_lens, o_idx, o_val, d)
        own = (own_neg, own_pos, own_counts)
    return replace(state, w=w, wbar=wbar, buf_pos=buf_pos, buf_neg=buf_neg, counts=counts,
                   own=own)


def merge_sparse_reservoirs(start_buf: SparseRows, start_n: int, own_bufs: list[SparseRows],
                            own_ns: list[int], rng: np.random.Generator) -> SparseRows:
    """:func:`daskauc.engine.chains.merge_reservoirs` of reservoirs of sparse rows: the same
    draws, so the same rows as for the dense rows of the same data. Exact."""
    K = len(start_buf)
    sizes = np.array([start_n, *own_ns], dtype=np.int64)
    keep = int(min(K, sizes.sum()))
    reps = [start_buf[: min(K, start_n)],
            *[b[: min(K, n)] for b, n in zip(own_bufs, own_ns, strict=True)]]
    take = rng.multivariate_hypergeometric(sizes, keep) if keep else np.zeros_like(sizes)
    parts = [r[np.sort(rng.choice(len(r), size=int(t), replace=False))]
             for r, t in zip(reps, take, strict=True) if t]
    parts.append(SparseRows.empty(K - sum(len(p) for p in parts), start_buf.n_features))
    return SparseRows.concat(parts, start_buf.n_features)


def merge_chains(start: OAMState, finals: list[OAMState], seed) -> OAMState:
    """Parallel chains (:mod:`daskauc.engine.chains`): ``w`` mixed by the rows each chain saw,
    ``wbar`` (the average over rows) exact, the counts summed, each class's reservoir merged
    into a uniform sample of every row of that class seen."""
    rng = np.random.default_rng(seed)
    n0 = int(start.counts.sum())
    seen = [int(f.counts.sum()) for f in finals]
    bufs = {}
    sparse = isinstance(start.buf_pos, SparseRows)
    finals = [_buffers_as(f, as_sparse_rows if sparse else as_dense_rows) for f in finals]
    for c, name in ((0, "buf_neg"), (1, "buf_pos")):
        bufs[name] = (merge_sparse_reservoirs if sparse else merge_reservoirs)(
            getattr(start, name), int(start.counts[c]),
            [f.own[c] if f.own is not None else getattr(start, name)[:0] for f in finals],
            [int(f.own[2][c]) if f.own is not None else 0 for f in finals], rng)
    return replace(
        start, w=mix_iterates(start.w, [f.w for f in finals], [s - n0 for s in seen]),
        wbar=merge_running_average(start.wbar, n0, [f.wbar for f in finals], seen),
        counts=start.counts + sum(f.counts - start.counts for f in finals), own=None, **bufs)


def as_stream_input(X, y, chunk_rows: int | None):
    """Numpy or dask ``X`` / ``y`` -> row-chunked dask arrays with the same chunks (sparse
    rows, in memory or as a dask array, give CSR chunks: :mod:`daskauc._sparse`).

    ``y`` must already hold int8 labels in {-1, +1} (estimators map labels first).
    """
    if not isinstance(X, da.Array):
        X = as_row_chunked(X, chunk_rows=chunk_rows, sparse=True)
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


def _first_state(X: da.Array, buffer_size: int, random_state) -> OAMState:
    """``w = 0`` and empty reservoirs of ``buffer_size`` rows (sparse for sparse ``X``)."""
    if int(buffer_size) < 1:
        raise ValueError(f"buffer_size must be >= 1; got {buffer_size}")
    entropy, key = seed_root(random_state)
    K, d = int(buffer_size), int(X.shape[1])
    empty = (lambda: SparseRows.empty(K, d)) if is_sparse_dask(X) else (lambda: np.zeros((K, d)))
    return OAMState(w=np.zeros(d), wbar=np.zeros(d), buf_pos=empty(), buf_neg=empty(),
                    counts=np.zeros(2, dtype=np.int64), epoch=0, seed_entropy=entropy,
                    seed_key=key)


@solver(kind="stochastic", states=(OAMState, SparseRows), tags=("linear", "pairwise"),
        sparse=True, params={
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
    X : array (n, d), numpy or dask, chunked along rows; or sparse rows (a scipy sparse
        matrix, a dask array of CSR blocks): reservoirs of sparse rows, O(non-zeros) per pair.
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

    On sparse rows the algorithm is the same (module docstring, "Sparse rows"): Zhao et al.'s
    steps (``tau`` with the pair's squared distance, ``c_t``) assume nothing about density,
    and the iterate stays dense (d floats).

    References
    ----------
    Zhao, Hoi, Jin & Yang, "Online AUC Maximization", ICML 2011.
    Vitter, "Random sampling with a reservoir", ACM TOMS 1985.
    Khalid, Ray & Chitsaz, "Scalable Nonlinear AUC Maximization Methods" (NOAM, K = 100).
    """
    X, y = as_stream_input(X, y, chunk_rows)
    d = int(X.shape[1])
    if state is None:
        state = _first_state(X, buffer_size, random_state)
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
