"""PRSVM+ truncated Newton for the pairwise squared hinge (NBAUC / linear RankSVM / RFAUC).

Objective (Chapelle & Keerthi 2010; docs/algorithms.md, "Pairwise squared hinge: PRSVM+
truncated Newton")::

    F(w) = 1/2 ||w||^2 + C sum_{i in P} sum_{j in N} max(0, 1 - o_i + o_j)^2,   o = X w.

One Newton iteration over a row-chunked dask array ``X`` (n x r):

* one compute (``daskauc-newton-scores`` + ``daskauc-newton-grad``): scores ``o = X w`` per
  chunk, one task gathering the n-vector and sorting it (:mod:`daskauc.solvers.pairwise`),
  then ``X^T g`` per chunk and a tree sum. Two passes over ``X`` in one graph; the
  coefficients are persisted where they were computed and copied to the client;
* truncated conjugate gradient on ``H s = -grad F``; each product
  ``H p = p + 2C X^T L (X p)`` is one compute (``daskauc-newton-hvp``) whose graph holds both
  passes: ``q = X p`` per chunk, ``L q`` in one task (O(n) from the sort), ``X^T (L q)`` per
  chunk and a tree sum. Only r-vectors and n-vectors (``q``) come back to the client;
* an exact line search on the piecewise quadratic ``phi(t) = F(w + t s)`` (Chapelle's 1-D
  Newton, safeguarded by bisection; :mod:`daskauc.solvers.linesearch`). Scores along the
  line are ``o + t X s`` and ``X s`` is accumulated from the CG products, so the line search
  reads no data: each of its steps is one O(n log n) sort on the client (nearly linear, since
  the previous order is the hint).

The graphs are :class:`daskauc.solvers.pairwise.PairwiseOperator`'s; this module is the loop
(:func:`newton_loop`), also run in a kernel basis by :mod:`daskauc.solvers.kernel_newton`.

Sparse rows (CSR blocks) take the same steps: the products above are O(nnz) per chunk plus
one r-vector, the Jacobi diagonal comes from the squared non-zeros and the pairs' second
moment (r <= ``PAIR_MOMENT_COLUMNS``) from the sparse sample's Gram matrices; no n x r array
is ever formed, and the iterates are those of the same rows held dense (docs/sparse.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import numpy as np

from .._arrays import sample_rows, stratified_subsample
from .._compute import compute, distributed_client
from .._labels import check_X_y, validation_set
from .._params import AUTO_OR_BOOL, NON_NEGATIVE, POSITIVE, ArrayLike, Interval, Options
from .._registry import solver
from .._sparse import is_sparse_dask
from .._validation import as_row_chunked
from ..engine.chain_plan import is_materialized
from ..engine.placement import place_rows
from ..engine.progress import report as report_progress
from ..engine.progress import solver_log_level
from ._graphs import threads_limit
from ._result import SolverResult
from .linesearch import LINE_SEARCHES, line_search_armijo, line_search_exact
from .pairwise import PairMoments, PairwiseOperator, as_vector
from .stats import class_statistics, pair_second_moment

logger = logging.getLogger(__name__)

#: the pairs' second moment preconditions CG (``pair_moments="auto"``) up to this many
#: columns: its eigendecomposition, once per fit (about 3 r^3 flops: 2e11 at 4,096, a few
#: seconds), and two r x r products per CG step (next to the Hessian product's 4 n r)
PAIR_MOMENT_COLUMNS = 4096
#: rows of the stratified sample the second moment is estimated from, per column of X (at
#: least PAIR_MOMENT_ROWS[0], at most PAIR_MOMENT_ROWS[1]). Measured on ijcnn1's 1,600-column
#: embedding (49,990 rows, C = 2.7e-4): Hessian products of the whole fit 152 with Jacobi,
#: and with the second moment of 2,500 / 5,000 / 13,000 / 49,990 rows 150 / 104 / 86 / 80
#: (estimated in 0.2 / 0.6 / 1.0 / 4.6 s)
PAIR_MOMENT_ROWS_PER_COLUMN = 8
PAIR_MOMENT_ROWS = (2000, 20_000)

#: the Newton loop's parameters (:func:`newton_loop`), for every solver that runs it
NEWTON_PARAMS = {
    "tol": NON_NEGATIVE,
    "max_iter": Interval(int, 0),
    "cg_tol": Interval(float, 0.0, 1.0, closed="right"),
    "max_cg": Interval(int, 1),
    "precondition": bool,
    "line_search": Options(*LINE_SEARCHES),
    "persist": AUTO_OR_BOOL,
}


def auto_pair_moments(X: da.Array, y) -> PairMoments | None:
    """``pair_moments="auto"`` of :func:`prsvm_newton`: :func:`sampled_pair_moments` when
    ``X`` has at most ``PAIR_MOMENT_COLUMNS`` columns, else None (Jacobi)."""
    if int(X.shape[1]) > PAIR_MOMENT_COLUMNS:
        return None
    return PairMoments(sampled_pair_moments(
        X, np.asarray(compute(y)[0] if isinstance(y, da.Array) else y)))


def sampled_pair_moments(X: da.Array, y: np.ndarray, rows: int | None = None,
                         seed: int = 0) -> np.ndarray:
    """The pairs' second moment (:func:`daskauc.solvers.stats.pair_second_moment`) of a
    stratified sample of ``rows`` rows of ``X`` (default: ``PAIR_MOMENT_ROWS_PER_COLUMN``
    per column, within ``PAIR_MOMENT_ROWS``; all rows when there are no more): one compute,
    the same sample for the same labels and ``seed``."""
    if rows is None:
        low, high = PAIR_MOMENT_ROWS
        rows = min(max(PAIR_MOMENT_ROWS_PER_COLUMN * int(X.shape[1]), low), high)
    y = np.asarray(y)
    idx = stratified_subsample(y, int(rows), np.random.default_rng(seed))
    if idx.size < y.size:
        sparse = is_sparse_dask(X)
        (Xs,) = compute(sample_rows(X, idx))
        # the sample is here: its statistics are computed here, not sent back to a cluster
        with dask.config.set(scheduler="sync"):
            return pair_second_moment(class_statistics(Xs if sparse else np.asarray(Xs),
                                                       y[idx]))
    return pair_second_moment(class_statistics(X, y))


def _validation_auc(op: PairwiseOperator, Xv, yv, w) -> float:
    from ..metrics import roc_auc

    return float(roc_auc(yv, op.scores(Xv, w)))


@solver(kind="newton", tags=("linear", "pairwise"), sparse=True, params={
    "C": POSITIVE, **NEWTON_PARAMS, "decrement_tol": [NON_NEGATIVE, None],
    "pair_moments": [Options("auto"), ArrayLike("None or an array (r, r)")]})
def prsvm_newton(
    X,
    y,
    *,
    C: float = 1.0,
    tol: float = 1e-3,
    max_iter: int = 50,
    cg_tol: float = 0.1,
    max_cg: int = 50,
    precondition: bool = True,
    w0: np.ndarray | None = None,
    line_search: str = "exact",
    decrement_tol: float | None = None,
    persist: str | bool = "auto",
    callback: Callable[[np.ndarray, dict], Any] | None = None,
    X_val=None,
    y_val=None,
    check_input: bool = True,
    resume: dict | None = None,
    on_step: Callable[[dict], Any] | None = None,
    pair_moments: np.ndarray | str | None = "auto",
) -> SolverResult:
    """Minimize the pairwise squared hinge with the PRSVM+ truncated Newton method.

    Parameters
    ----------
    X : array-like or dask array, shape (n, r)
        Rows (raw standardized features or an embedding); numpy, a row-chunked dask array,
        a zarr array or a store path; or sparse rows (a scipy sparse matrix, a dask array of
        CSR blocks, a sparse store), whose products cost their non-zeros. float32 stays
        float32 (products accumulate in float64).
    y : array-like or dask array, shape (n,)
        Binary labels (any two-valued convention; see ``daskauc._labels.as_labels``).
    C : float, default 1.0
        Weight of the pairwise loss (> 0). Larger C = less regularization.
    tol : float, default 1e-3
        Stop when ``||grad F(w)|| <= tol * max(||w||, ||2C X^T g(w)||)``: the gradient
        ``w + 2C X^T g(w)`` is small next to its two terms, which cancel at the optimum. At
        ``w = 0`` the reference is ``||grad F(0)||`` (liblinear's), but it does not stay
        there: ``||grad F(0)||`` grows with C while ``||w*||`` does not, so against it a
        solve at large C stopped with a poor ``w``, and a warm start (a C path) at once:
        every C >= 2^-6 of a path gave the same model. This reference is the same for any C
        and any start; equal class means (``grad F(0) = 0``, ``w = 0`` optimal) stop at once.
    max_iter : int, default 50
        Maximum Newton steps.
    cg_tol : float, default 0.1
        Relative residual ``||H s + grad|| <= cg_tol ||grad||`` ending conjugate gradient
        (liblinear's TRON uses 0.1 as well). On covtype (1600 landmarks, C = 1e-3) 0.1 reached
        tol = 1e-3 with 111 Hessian products against 221 for 1e-2, same test AUC.
    max_cg : int, default 50
        Maximum CG steps (Hessian products) per Newton step.
    precondition : bool, default True
        Precondition CG: by ``I + 2C rho n+ n- E`` with the pairs' second moment ``E``
        (``pair_moments``; ``rho`` the share of active pairs), else by the diagonal
        ``1 + 2C sum_i d_i x_ik^2`` (``d_i`` the active pairs of row ``i``), gathered in the
        gradient pass at no extra read of ``X``. False is plain CG (Chapelle's).
        Jacobi cuts the CG steps by about 10x on Nystroem embeddings, whose columns have
        scales spread like the kernel's eigenvalues; the second moment by 1.8-4x more on ijcnn1's
        embedding (:class:`daskauc.solvers.pairwise.LinearBasis`).
    w0 : ndarray of shape (r,), optional
        Starting point (zeros by default).
    line_search : {"exact", "armijo"}, default "exact"
        Chapelle's exact 1-D Newton on the piecewise quadratic, or backtracking from t = 1.
        Neither reads the data.
    decrement_tol : float, optional
        Also stop (after the step) when the Newton decrement ``-grad.s`` is below
        ``decrement_tol * F(w)`` (Chapelle's ``prec``, 1e-4 in his code). Off by default.
    persist : {"auto", True, False}, default "auto"
        Persist ``X`` in (cluster) memory once and reuse it, or stream it from its source
        (Zarr) at every pass; "auto" persists when ``X.nbytes`` is at most
        ``PERSIST_MEMORY_FRACTION`` (:mod:`daskauc.engine.placement`) of the workers' memory
        limits (or of available RAM without a distributed client), and otherwise keeps the
        leading chunks that fit in that budget in memory and streams only the rest
        (:class:`~daskauc.engine.placement.RowChunks`). The result is the same either way.
    callback : callable, optional
        ``callback(w, record)`` after each gradient evaluation; returning True stops.
    X_val, y_val : optional
        Validation data; its AUC is recorded in the history at every iteration.
    check_input : bool, default True
        Validate ``X`` and ``y``. Estimators that already ran ``check_X_y`` pass False (then
        ``X`` must be a row-chunked float32/float64 dask array and ``y`` {-1,+1} labels).
    on_step : callable, optional
        ``on_step(snapshot)`` after every Newton step: a dict (iterate ``w``, ``n_iter``, the
        gradient references, ``history``, the last step's record) to checkpoint.
    resume : dict, optional
        A snapshot given to ``on_step``: continue from it (``w0`` is then ignored); the
        steps taken are those of the uninterrupted run, bit for bit.
    pair_moments : "auto", ndarray (r, r), PairMoments or None, default "auto"
        ``E[(x_i - x_j)(x_i - x_j)^T]`` over the (positive, negative) pairs, of these rows or
        of a sample (:func:`daskauc.solvers.stats.pair_second_moment`): the preconditioner
        (decomposed once, :class:`daskauc.solvers.pairwise.PairMoments`: pass one to solves
        that share it, a path of C).
        "auto" computes it from a stratified sample of the rows (one compute, the same rows
        for the same data: :func:`sampled_pair_moments`) when ``X`` has at most
        ``PAIR_MOMENT_COLUMNS`` columns, and otherwise preconditions by Jacobi, as does None.

    Returns
    -------
    SolverResult
        ``coef`` (r,), ``n_iter`` Newton steps taken, ``converged`` (relative gradient norm
        reached ``tol`` or the decrement test passed), ``history`` with one record per gradient
        evaluation (``iter``, ``objective``, ``loss``, ``grad_norm``, ``rel_grad_norm``,
        ``n_active_pairs``, ``cg_iter``, ``cg_rel_residual``, ``step``, ``ls_steps``,
        ``decrement``, ``seconds`` since the start, ``val_auc``), and ``state`` with
        ``grad_norm0``, ``persisted`` and ``cached_fraction`` (the rows kept in memory).

    Notes
    -----
    Objective::

        F(w) = 1/2 ||w||^2 + C sum_{i in P} sum_{j in N} max(0, 1 - w.x_i + w.x_j)^2

    with gradient ``w + 2C X^T g`` and generalized Hessian ``I + 2C X^T L X``, ``g`` and ``L``
    from one sort of the scores (:func:`daskauc.solvers.pairwise.pairwise_coefficients`).
    Cost per Newton step: two passes over ``X`` for the gradient plus two per CG step, each
    Hessian product being one Dask compute; the line search reads no data. On sparse rows
    each pass costs the chunk's non-zeros plus one r-vector per chunk (the objective assumes
    nothing about the rows: Chapelle & Keerthi's method as it is).

    References
    ----------
    Chapelle, O. and Keerthi, S. S. (2010). Efficient algorithms for ranking with SVMs.
    Information Retrieval 13(3), 201-215.
    Chapelle, O. (2007). Training a support vector machine in the primal. Neural Computation
    19(5), 1155-1178.
    Khalid, M., Ray, I. and Chitsaz, H. Scalable nonlinear AUC maximization methods
    (Algorithm 2, NBAUC).
    """
    C = float(C)

    if check_input:
        X, y, _ = check_X_y(X, y)
    elif not isinstance(X, da.Array):
        X = as_row_chunked(X, sparse=True)
    if len(X.chunks[1]) != 1:
        raise ValueError("X must be chunked along rows only (one chunk of columns)")
    y_np = np.asarray(compute(y)[0] if isinstance(y, da.Array) else y)
    if y_np.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y_np.shape[0]} labels")
    r = int(X.shape[1])

    if w0 is None:
        w = np.zeros(r)
    else:
        w = as_vector(w0, r, "w0")

    Xv, yv = validation_set(X_val, y_val, r)

    if isinstance(pair_moments, str):
        pair_moments = auto_pair_moments(X, y_np) if precondition else None
    if pair_moments is not None and not isinstance(pair_moments, PairMoments):
        pair_moments = np.asarray(pair_moments, dtype=np.float64)
        if pair_moments.shape != (r, r) or not np.isfinite(pair_moments).all():
            raise ValueError(f"pair_moments must be a finite ({r}, {r}) matrix to match X's "
                             f"{r} columns; got shape {pair_moments.shape}")
        pair_moments = PairMoments(pair_moments)
    if pair_moments is not None and pair_moments.shape != (r, r):
        raise ValueError(f"pair_moments must be a finite ({r}, {r}) matrix to match X's {r} "
                         f"columns; got shape {pair_moments.shape}")

    client = distributed_client()
    X, cached = place_rows(X, persist, client)
    persisted = cached is None and is_materialized(X)

    with threads_limit(client):
        return newton_loop(
            PairwiseOperator(X, y_np, C, precondition, cached=cached,
                             pair_moments=pair_moments), w, tol=tol,
            max_iter=max_iter,
            cg_tol=cg_tol, max_cg=max_cg, line_search=line_search, decrement_tol=decrement_tol,
            callback=callback, Xv=Xv, yv=yv, persisted=persisted, resume=resume,
            on_step=on_step,
        )


def newton_loop(op: PairwiseOperator, w, *, tol, max_iter, cg_tol, max_cg, line_search,
                 decrement_tol, callback, Xv, yv, persisted, resume=None,
                 on_step=None) -> SolverResult:
    """The truncated Newton iterations. ``on_step(snapshot)`` is called after every step
    with everything the next iteration depends on (the iterate, the step count, the
    gradient reference, the history and the last step's record); ``resume=snapshot``
    continues from one, taking exactly the steps the uninterrupted run takes."""
    C = op.C
    start = time.perf_counter()
    hint = (op.pos, op.neg)
    history: list[dict] = []
    grad_norm0 = None
    grad_ref = start_ref = None
    converged = False
    n_iter = 0
    last: dict = {}
    if resume is not None:
        w = np.array(resume["w"], dtype=np.float64, copy=True)
        n_iter, grad_norm0, grad_ref = int(resume["n_iter"]), resume["grad_norm0"], \
            resume["grad_ref"]
        start_ref = resume.get("start_ref")
        history, last = [dict(h) for h in resume["history"]], dict(resume["last"])
    reg = op.basis.regularize
    norm = op.basis.norm  # of gradients and residuals: ||R^{-1/2} v||, basis-independent
    while True:
        coef, coef_handle, sums = op.scores_and_gradient(w, hint, with_g0=grad_norm0 is None)
        hint = (coef.pos_idx, coef.neg_idx)
        Rw = reg(w)
        grad = Rw + 2.0 * C * sums[0]
        gnorm = norm(grad)
        if grad_norm0 is None:
            grad_norm0 = norm(2.0 * C * sums[-1])
            extra_rows = sums[1:-1]
            # equal class means make grad F(0) = 0 (w = 0 is then optimal, and the two terms
            # below vanish with w): measure against the gradient at the start instead
            start_ref = None if grad_norm0 > 0 else gnorm
        else:
            extra_rows = sums[1:]
        # the gradient against the two terms that cancel at the optimum (``tol`` above)
        grad_ref = start_ref if start_ref is not None else max(norm(Rw), norm(2.0 * C * sums[0]))
        ww = float(w @ Rw)
        F = 0.5 * ww + C * coef.loss
        rel = gnorm / grad_ref if grad_ref > 0 else 0.0
        record = {"iter": n_iter, "objective": F, "loss": coef.loss, "grad_norm": gnorm,
                  "rel_grad_norm": rel, "n_active_pairs": coef.n_active_pairs, **last,
                  "seconds": time.perf_counter() - start}
        if Xv is not None:
            record["val_auc"] = _validation_auc(op, Xv, yv, w)
        history.append(record)
        report_progress(n_iter, None, "Newton step")
        logger.log(
            solver_log_level(),
            "newton %d: F=%.10g |grad|/|grad0|=%.3g active pairs=%d cg=%s step=%s (%.2f s)%s",
            n_iter, F, rel, record["n_active_pairs"], last.get("cg_iter", "-"),
            f"{last['step']:.4g}" if "step" in last else "-", record["seconds"],
            f" val AUC={record['val_auc']:.5f}" if "val_auc" in record else "",
        )
        stop = False
        if callback is not None:
            stop = bool(callback(w.copy(), dict(record)))
        small_decrement = (decrement_tol is not None and len(history) > 1
                           and last["decrement"] <= decrement_tol * history[-2]["objective"])
        if rel <= tol or small_decrement:
            converged = True
            break
        if stop or n_iter >= max_iter:
            break

        # truncated preconditioned conjugate gradient on H s = -grad, H = R + 2C X^T L X
        precondition = op.basis.preconditioner(w, coef, extra_rows, C)
        s = np.zeros_like(w)
        Rs = np.zeros_like(w)
        d = np.zeros(op.X.shape[0])  # X s, accumulated from the products
        res = -grad
        z = precondition(res)
        p = z.copy()
        rz = float(res @ z)
        cg_iter = 0
        target = cg_tol * gnorm
        while cg_iter < max_cg:
            xtlq, q = op.hessian_product(coef_handle, p)
            Rp = reg(p)
            Hp = Rp + 2.0 * C * xtlq
            cg_iter += 1
            a = rz / float(p @ Hp)
            s += a * p
            Rs += a * Rp
            d += a * q
            res -= a * Hp
            if norm(res) <= target:
                break
            z = precondition(res)
            rz_new = float(res @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        rel_residual = norm(res) / gnorm
        ws = float(w @ Rs)
        ss = float(s @ Rs)
        gs = float(grad @ s)  # phi'(0) = grad . s
        sHs = -gs - float(s @ res)  # s^T H s = s . (-grad - res)
        if gs >= 0:  # cannot happen with exact arithmetic (H is positive definite)
            logger.warning("newton %d: CG direction is not a descent direction; stopping",
                           n_iter)
            break
        if line_search == "exact":
            t, ls_coef, phi_t, ls_steps = line_search_exact(
                coef.o, d, *hint, C=C, ww=ww, ws=ws, ss=ss, dphi0=gs, t0=-gs / sHs)
        else:
            t, ls_coef, phi_t, ls_steps = line_search_armijo(
                coef.o, d, *hint, C=C, ww=ww, ws=ws, ss=ss, dphi0=gs, phi0=F)
        if not phi_t <= F + 1e-10 * abs(F):  # allow rounding noise near the optimum
            logger.warning("newton %d: the line search found no decrease (F=%.17g); stopping "
                           "at the precision limit", n_iter, F)
            break
        hint = (ls_coef.pos_idx, ls_coef.neg_idx)
        w = w + t * s
        n_iter += 1
        last = {"cg_iter": cg_iter, "cg_rel_residual": rel_residual, "step": t,
                "ls_steps": ls_steps, "decrement": -gs}
        if on_step is not None:
            on_step({"w": w.copy(), "n_iter": n_iter, "grad_norm0": grad_norm0,
                     "grad_ref": grad_ref, "start_ref": start_ref,
                     "history": [dict(h) for h in history],
                     "last": dict(last)})
    return SolverResult(coef=w, n_iter=n_iter, converged=converged, history=history,
                        state={"grad_norm0": grad_norm0, "persisted": persisted,
                               "cached_fraction": op.rows.cached_rows / max(1, op.y.shape[0])
                               if not persisted else 1.0})
