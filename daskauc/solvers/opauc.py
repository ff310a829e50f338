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

Sparse rows (CSR chunks, ``cov="full"``): the same steps, with the rank-one scatter update
over the row's non-zero pairs; the matrix-vector product ``S w`` keeps it O(r^2) a row, so the
exact route is refused (a ``ValueError`` naming the size and ``cov="low-rank"``) when one r x r
float64 matrix exceeds :data:`FULL_COV_BYTES` (256 MiB, r > 5,792).

Low-rank covariances (``cov="low-rank"``; the paper's variant for high dimensions, OPAUCr):
every row ``x_i`` gets a Gaussian vector ``r_i ~ N(0, I_tau / tau)`` (drawn from its visit's
seed) and each class keeps, besides its count ``T`` and sum ``s``, the d x tau sketch
``Z = sum_i x_i r_i^T`` and ``h = sum_i r_i``. The covariance is replaced by

    S^ = Zc Zc^T / T,    Zc = Z - c h^T = sum_i (x_i - c) r_i^T,

the sketch of the centred rows: ``E[r_i . r_j] = [i = j]``, so ``E[S^] = S``, and ``S^`` is
positive semi-definite of rank <= tau. In the gradient, ``S^ w = (Z u - s (h.u) / T) / T``
with ``u = Zc^T w = Z^T w - h (c.w)``. (The authors' MATLAB code subtracts instead
``(w.c) ||h/T||^2 c``, whose expectation is ``(w.c) c / T``, not ``(w.c) c``: it estimates the
uncentred second moment ``E[x x^T]``, which weighs the class means into the penalty. daskauc
centres the sketch exactly; the paper's text was not at hand to say which it prints.)
``rank`` (tau) defaults to 50.

Its cost: memory 2 d tau floats for the sketches. Written as in the paper the step is O(d tau)
a row (``Z^T w`` and ``Z u`` are dense). daskauc keeps the iterate in the lazy form
``a v + Z_- P_- + Z_+ P_+ + B_- s_- + B_+ s_+`` (``P`` tau-vectors, ``a``, ``B`` scalars), so that
the gradient's dense terms are updates of ``P`` and ``B``, and keeps the dot products a step
needs (``Z_k^T v``, ``s_k.v``, and the Gram blocks ``Z_k^T Z_l``, ``Z_k^T s_l``, ``s_k.s_l`` of the
statistics) up to date when a row joins its class: **O(nnz tau + tau^2) a row**, exact
algebra; O(d tau) a chunk (folding the lazy form back into ``v``, the dot products of the
chunk's first ``v``, and the copy of the state a step makes). Dense rows take the same kernel
(nnz = d). Parallel chains recompute the Gram blocks of the merged statistics (O(d tau^2) a
merge).

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

from .._params import NON_NEGATIVE, POSITIVE, Interval, Options, child_seed
from .._registry import solver
from .._sparse import csr_parts, is_sparse
from ..engine.chain_plan import resolve_chains
from ..engine.chains import add_increments, mix_iterates
from ..engine.stream import run_epochs, seed_root
from ._ls_epochs import LOG, as_block, objective_record, row_order
from ._ls_kernels import _opauc_chunk
from ._opauc_solam_sparse_kernels import (
    _opauc_full_sparse_chunk,
    _opauc_sketch_chunk,
)
from ._result import SolverResult
from .stats import ClassStats, _as_xy
from .twopass import _check_dim

#: the exact route's limit on one r x r float64 covariance matrix (it keeps two)
FULL_COV_BYTES = 256 * 2**20
#: ``cov``: the covariances kept
COVS = ("auto", "full", "low-rank")
#: the spawn key of a visit's sketch draws under the visit's seed (its own stream)
_SKETCH_KEY = 1 << 29


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


@dataclass(frozen=True)
class OPAUCSketchState:
    """The low-rank route's model and statistics, class ``k`` = 0 the negatives and 1 the
    positives: ``sums[:, k]`` (r, 2), ``sketch[:, k]`` (r, 2, tau) ``Z_k = sum x r^T``,
    ``draws_sum[k]`` (2, tau) ``h_k = sum r``, ``counts`` (2,) (a feature's statistics side by
    side: a row's non-zeros read few cache lines); and the Gram blocks of the statistics the
    kernel keeps up to date, ``gram[k, l] = Z_k^T Z_l``, ``sketch_sums[k, l] = Z_k^T s_l``,
    ``sums_dots[k, l] = s_k . s_l`` (:func:`sketch_grams`)."""

    w: np.ndarray
    sums: np.ndarray
    sketch: np.ndarray
    draws_sum: np.ndarray
    counts: np.ndarray
    gram: np.ndarray
    sketch_sums: np.ndarray
    sums_dots: np.ndarray
    steps: int
    epoch: int
    seed_entropy: int
    seed_key: tuple


def resolve_cov(cov: str, r: int) -> str:
    """``"full"`` or ``"low-rank"`` for ``cov`` at ``r`` features: "auto" is "full" while one
    r x r float64 matrix fits :data:`FULL_COV_BYTES`; "full" beyond it is a ValueError."""
    nbytes = 8 * r * r
    if cov == "auto":
        return "full" if nbytes <= FULL_COV_BYTES else "low-rank"
    if cov == "full" and nbytes > FULL_COV_BYTES:
        raise ValueError(
            f"OPAUC cov='full' keeps two {r} x {r} float64 covariance matrices "
            f"({nbytes / 2**20:,.0f} MiB each, over the {FULL_COV_BYTES // 2**20} MiB limit) and "
            f"costs O(r^2) a row; use cov='low-rank' (the paper's sketch: 2 x {r} x rank "
            "floats, O(nnz rank) a row) or cov='auto'")
    return cov


def sketch_grams(sums: np.ndarray, sketch: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(gram, sketch_sums, sums_dots)`` of the statistics, from scratch (O(r tau^2))."""
    gram = np.einsum("mkp,mlq->klpq", sketch, sketch, optimize=True)
    sketch_sums = np.einsum("mkp,ml->klp", sketch, sums, optimize=True)
    return gram, sketch_sums, sums.T @ sums


def sketch_draws(seed: np.random.SeedSequence, n_rows: int, tau: int) -> np.ndarray:
    """Row ``i``'s Gaussian vector ``r_i ~ N(0, I_tau / tau)`` of a visit, ``(n_rows, tau)``,
    from the visit's seed (a child stream: the row order's is unchanged)."""
    rng = np.random.default_rng(child_seed(seed, _SKETCH_KEY))
    return rng.standard_normal((n_rows, tau)) / np.sqrt(tau)


def initial_state(r: int, *, cov: str = "auto", rank: int = 50, random_state=None
                  ) -> OPAUCState | OPAUCSketchState:
    """The state before any row: the exact route's or the sketch's (``resolve_cov``)."""
    entropy, key = seed_root(random_state)
    if resolve_cov(cov, r) == "full":
        return OPAUCState(np.zeros(r), np.zeros(r), np.zeros(r), np.zeros((r, r)),
                          np.zeros((r, r)), np.zeros(2, dtype=np.int64), 0, 0, entropy, key)
    tau = int(rank)
    return OPAUCSketchState(np.zeros(r), np.zeros((r, 2)), np.zeros((r, 2, tau)),
                            np.zeros((2, tau)), np.zeros(2, dtype=np.int64),
                            np.zeros((2, 2, tau, tau)), np.zeros((2, 2, tau)), np.zeros((2, 2)),
                            0, 0, entropy, key)


def _opauc_step(Xb, yb, state: OPAUCState, seed, extra, *, eta, lam):
    X = as_block(Xb)
    yv = np.asarray(yb, dtype=np.int8)
    order = row_order(seed, yv.shape[0])
    w = state.w.copy()
    sp, sn = state.sum_pos.copy(), state.sum_neg.copy()
    Gp, Gn = state.G_pos.copy(), state.G_neg.copy()
    counts = state.counts.copy()
    if is_sparse(X):
        steps = _opauc_full_sparse_chunk(*csr_parts(X), yv, order, w, sp, sn, Gp, Gn, counts,
                                         np.zeros(w.shape[0]), float(eta), 0.5 * float(lam))
    else:
        steps = _opauc_chunk(X, yv, order, w, sp, sn, Gp, Gn, counts, float(eta),
                             0.5 * float(lam))
    return replace(state, w=w, sum_pos=sp, sum_neg=sn, G_pos=Gp, G_neg=Gn, counts=counts,
                   steps=state.steps + int(steps))


def _opauc_sketch_step(Xb, yb, state: OPAUCSketchState, seed, extra, *, eta, lam):
    import scipy.sparse

    X = as_block(Xb)
    if not is_sparse(X):  # dense rows through the same kernel (nnz = r)
        X = scipy.sparse.csr_matrix(X)
    yv = np.asarray(yb, dtype=np.int8)
    n = yv.shape[0]
    if seed is None:  # a call outside the epoch driver: a stream of its own per chunk
        seed = np.random.SeedSequence(state.seed_entropy,
                                      spawn_key=(*state.seed_key, int(state.counts.sum())))
    order = row_order(seed, n)
    draws = sketch_draws(seed, n, state.draws_sum.shape[1])
    w = state.w.copy()
    sums, sketch, hsum = state.sums.copy(), state.sketch.copy(), state.draws_sum.copy()
    counts = state.counts.copy()
    gram, zs, ss = state.gram.copy(), state.sketch_sums.copy(), state.sums_dots.copy()
    steps = _opauc_sketch_chunk(*csr_parts(X), yv, order, draws, w, sums, sketch, hsum, counts,
                                gram, zs, ss, float(eta), 0.5 * float(lam))
    return replace(state, w=w, sums=sums, sketch=sketch, draws_sum=hsum, counts=counts,
                   gram=gram, sketch_sums=zs, sums_dots=ss, steps=state.steps + int(steps))


def merge_chains(start, finals: list, seed):
    """Parallel chains (:mod:`daskauc.engine.chains`): the class sums, scatters (or
    sketches) and counts are the start's plus the chains' increments (exact), ``w`` is mixed
    by steps, the step counter summed; the sketch's Gram blocks are those of the merged
    statistics."""
    def total(name):
        return add_increments(getattr(start, name), [getattr(f, name) for f in finals])

    w = mix_iterates(start.w, [f.w for f in finals], [f.steps - start.steps for f in finals])
    if isinstance(start, OPAUCSketchState):
        sums, sketch = total("sums"), total("sketch")
        gram, zs, ss = sketch_grams(sums, sketch)
        return replace(start, w=w, sums=sums, sketch=sketch, draws_sum=total("draws_sum"),
                       counts=total("counts"), gram=gram, sketch_sums=zs, sums_dots=ss,
                       steps=total("steps"))
    return replace(start, w=w, sum_pos=total("sum_pos"), sum_neg=total("sum_neg"),
                   G_pos=total("G_pos"), G_neg=total("G_neg"), counts=total("counts"),
                   steps=total("steps"))


@solver(kind="stochastic", states=(OPAUCState, OPAUCSketchState),
        tags=("linear", "least-squares loss"), sparse=True,
        params={"lam": NON_NEGATIVE, "eta": POSITIVE, "n_epochs": Interval(int, 0),
                "cov": Options(*COVS), "rank": Interval(int, 1)})
def opauc(X, y, *, lam: float = 1e-3, eta: float = 2.0**-6, n_epochs: int = 1,
          cov: str = "auto", rank: int = 50, shuffle: bool = True, random_state=None,
          stats: ClassStats | None = None, state: OPAUCState | OPAUCSketchState | None = None,
          n_chains: int | str = 1, sync_every: int | None = None) -> SolverResult:
    """OPAUC over streamed chunks (one pass by default, as in the paper); dense or sparse rows.

    Parameters
    ----------
    X, y : data
        Dense rows, or sparse rows (a scipy sparse matrix, or a dask array of CSR chunks).
    lam : float >= 0
        L2 penalty on the LS scale (the paper's ``lambda = lam / 2``).
    eta : float > 0
        Constant step size.
    n_epochs : int
        Passes; later passes keep accumulating the statistics (each row counts once per pass,
        which leaves the means and covariances unchanged).
    cov : {"auto", "full", "low-rank"}
        The class covariances kept: "full" (two r x r matrices, O(r^2) a row, refused when one
        exceeds :data:`FULL_COV_BYTES`), "low-rank" (the paper's Gaussian sketch of rank
        ``rank``: two r x rank matrices, O(nnz rank + rank^2) a row), or "auto": "full" while
        it fits the limit (r <= 5,792), else "low-rank". Module docstring.
    rank : int >= 1
        The sketch's rank tau (``cov="low-rank"``).
    shuffle, random_state : see :func:`daskauc.solvers.twopass.twopass_auc`
    stats : ClassStats, optional
        If given, history records ``objective`` = LS(w).
    state : OPAUCState or OPAUCSketchState, optional
        Continue a previous run (``partial_fit``: the stream goes on); its route wins over
        ``cov`` = "auto".
    n_chains : int or "auto"
        Parallel chains per epoch (:mod:`daskauc.engine.chains`: the class statistics
        summed exactly, ``w`` mixed by steps); 1 is the sequential solver.
    sync_every : int, optional
        With several chains, combine them after every ``sync_every`` chunks of each chain.

    Returns
    -------
    SolverResult
        ``coef`` the last iterate; ``state`` an :class:`OPAUCState` (``cov="full"``) or an
        :class:`OPAUCSketchState`.

    Notes
    -----
    Per-row gradient for a positive ``x_t``:
    ``(lam/2) w - x_t + c- + (x_t - c-)(x_t - c-)^T w + S- w`` (module docstring); it averages
    to half the gradient of LS, whose minimizer is the target. The low-rank route replaces
    ``S-`` by the centred Gaussian sketch ``S^-``, equal to it in expectation.

    References
    ----------
    Gao, Jin, Zhu & Zhou, "One-pass AUC optimization", ICML 2013.
    Zinkevich, Weimer, Smola & Li, "Parallelized stochastic gradient descent", NIPS 2010
    (parameter mixing of parallel chains).
    """
    Xd, yd = _as_xy(X, y)
    if state is None:
        state = initial_state(Xd.shape[1], cov=cov, rank=rank, random_state=random_state)
    else:
        _check_route(state, cov, rank)
    _check_dim(state.w, Xd)
    sketch = isinstance(state, OPAUCSketchState)
    state, history = run_epochs(
        _opauc_sketch_step if sketch else _opauc_step, Xd, yd, state, solver="opauc",
        n_epochs=n_epochs, shuffle=shuffle, params={"eta": float(eta), "lam": float(lam)},
        n_chains=resolve_chains(n_chains, Xd), merge=merge_chains, sync_every=sync_every,
        record=objective_record(stats, lam, objective="w"), log=LOG,
    )
    return SolverResult(coef=state.w.copy(), n_iter=state.epoch, converged=True,
                        history=history, state=state)


def _check_route(state, cov: str, rank: int) -> None:
    """A state to continue from keeps its route: another ``cov`` (but "auto"), or another
    ``rank`` for a sketch, is a ValueError."""
    sketch = isinstance(state, OPAUCSketchState)
    if cov != "auto" and (cov == "low-rank") != sketch:
        raise ValueError(f"cov={cov!r}, but the state to continue from keeps "
                         f"{'a low-rank sketch' if sketch else 'full covariances'}")
    if sketch and state.draws_sum.shape[1] != int(rank):
        raise ValueError(f"rank={rank}, but the state to continue from has a sketch of rank "
                         f"{state.draws_sum.shape[1]}")
