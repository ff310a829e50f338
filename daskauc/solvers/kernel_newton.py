"""PRSVM+ truncated Newton for the pairwise squared hinge in the Gaussian kernel basis.

Objective, with ``f = K_nm alpha`` (rows against the m centres), ``K~ = K_mm + jitter I`` (the
jitter of the factor of K_mm, 1e-10 of the diagonal or less unless K_mm is numerically
singular) and ``lam > 0``::

    F(alpha) = lam/2 alpha^T K~ alpha + 1/(n+ n-) sum_{i in P, j in N} max(0, 1 - f_i + f_j)^2

solved by the Newton loop of :mod:`daskauc.solvers.newton` in this basis:
``grad = lam K~ alpha + 2/(n+ n-) K^T g`` and Hessian products
``lam K~ v + 2/(n+ n-) K^T L K v`` (two passes each; ``g`` and ``L`` from one sort of f), the
conjugate gradient preconditioned by :class:`daskauc.solvers.preconditioner.NystroemPreconditioner`.

With r = m this is NBAUC's problem on the Nystroem embedding: ``phi(x) = k(x, U) M`` with
``M = V diag(lam)^{-1/2}`` and ``alpha = M w`` give ``f = phi(X) w`` and
``alpha^T K_mm alpha = ||w||^2``, so NBAUC with ``C = 1 / (lam n+ n-)`` is the same model (tested).

References
----------
A. Rudi, L. Carratino and L. Rosasco, "FALKON: an optimal large scale kernel method",
NeurIPS 2017. G. Meanti et al., "Kernel methods through the roof", NeurIPS 2020.
O. Chapelle and S. S. Keerthi, "Efficient algorithms for ranking with SVMs", 2010.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._compute import distributed_client
from .._gaussian import gaussian_centres
from .._labels import as_labels, validation_set
from .._params import AUTO_OR_BOOL, Options, checks
from .._registry import solver
from ._graphs import threads_limit
from ._result import SolverResult
from .kernel_basis import (
    KERNEL_PARAMS,
    _check_alpha,
    _check_problem,
    _prepare_rows,
    _share,
    build_preconditioner,
    kernel_matvec_block,
    kernel_rmatvec_block,
)
from .kernel_basis import store_kernel as store_kernel_blocks
from .newton import NEWTON_PARAMS, newton_loop
from .pairwise import (
    PairwiseOperator,
    block_matvec,
    block_rmatvec,
    class_indices,
    pairwise_coefficients,
)
from .preconditioner import NystroemPreconditioner

logger = logging.getLogger(__name__)

#: refactor the preconditioner ("mean" weighting) when the active-pair scale moved by more
#: than this factor since the last factorization.
REFACTOR_RATIO = 4.0
#: refactor it ("pairs" weighting, m^3 flops) when the fraction of active pairs among the
#: centres moved by more than this relative change since the last factorization. Measured
#: (a quiet machine, float32): ijcnn1, 49,990 rows, 4,096 centres, 0.5 against 0.2 made 4
#: factorizations instead of 6 and 276 passes instead of 290, 15.6 s against 21.3 s; covtype,
#: 60,000 rows, 2,048 centres, 3 instead of 4 and 3,676 passes instead of 4,842; the same test
#: AUC both. 1.0 made 2 and tripled the CG steps on ijcnn1.
REFACTOR_CHANGE = 0.5

WEIGHTINGS = ("mean", "pairs")


# ------------------------------------------------------------------------ the kernel basis


class KernelBasis:
    """The Gaussian kernel basis for the pairwise Newton solver (see ``pairwise.LinearBasis``).

    ``matvec`` gives the scores ``K_b alpha``, ``gradient`` and ``rmatvec`` the products with
    ``K_b^T``; the regularizer is ``K~ = T^T T`` and the preconditioner ``B B^T`` of
    :class:`NystroemPreconditioner`. In the loop's form ``F = 1/2 a^T K~ a + C loss`` the data
    term of the Hessian is ``2C K^T L K`` (L: Laplacian of the active pairs), approximated by

    * ``weighting="mean"``: ``2C (2 n_active / m) K_mm^2``, every row given the mean degree of
      the active-pair graph (Falkon's approximation); refactored when that scale moved by
      more than ``REFACTOR_RATIO``;
    * ``weighting="pairs"``: ``2C (n+ n- / m+ m-) K_mm L_c K_mm`` with ``L_c`` the Laplacian of
      the pairs active among the centres themselves (their labels given, their scores
      ``K_mm alpha``): the pairs of a uniform sample of rows estimate the pairs of all rows.
      It costs m^3 flops (against m^3 / 3 for "mean"), so it is refactored only when the
      fraction of active centre pairs moved by ``REFACTOR_CHANGE``; at alpha = 0 (every pair
      active) the mean factor is used. Measured on covtype (20,000 rows, 1,024
      centres, a late Newton step): condition number of the preconditioned Hessian 36
      against 1,633 for "mean" at lam = 1e-4, 3,960 against 12,915 at lam = 1e-6.
    """

    def __init__(self, centres_ref, m: int, preconditioner: NystroemPreconditioner,
                 precondition: bool = True, weighting: str = "mean", centre_labels=None,
                 n_pairs: float = 1.0):
        self.const = (centres_ref,)
        self.m = int(m)
        self.pc = preconditioner
        self.precondition = precondition
        self.weighting = weighting
        self.n_pairs = float(n_pairs)
        self._factored_active = None
        self._factored_alpha = None
        if weighting == "pairs":
            yc = np.asarray(centre_labels)
            self.centre_pos, self.centre_neg = class_indices(yc)

    @staticmethod
    def matvec(block, gc, v):
        return kernel_matvec_block(block, gc, v)

    row_matvec = matvec

    @staticmethod
    def gradient(block, gc, coef, start, stop, g0):
        u = coef.g[start:stop]
        return kernel_rmatvec_block(block, gc, u if g0 is None else np.column_stack([u, g0]))

    @staticmethod
    def rmatvec(block, gc, u):
        return kernel_rmatvec_block(block, gc, u)[0]

    def regularize(self, v: np.ndarray) -> np.ndarray:
        return self.pc.regularizer_matvec(v)

    def norm(self, v: np.ndarray) -> float:
        """``||T^{-T} v|| = sqrt(v^T K~^{-1} v)``: with r = m, the Euclidean norm of the same
        vector in the coordinates of the Nystroem embedding, so ``tol`` and ``cg_tol`` mean
        what they mean for NBAUC (in alpha's own coordinates the gradient is shrunk by the
        small eigenvalues of K_mm and a relative 1e-3 stops far from the optimum)."""
        return float(np.linalg.norm(self.pc.whiten(v)))

    def preconditioner(self, alpha, coef, extra_rows, C: float):
        if not self.precondition:
            return np.copy
        t0 = time.perf_counter()
        if self.weighting == "pairs" and np.any(alpha):
            cc, laplacian = self._centre_pairs(alpha)
            pairs_c = float(self.centre_pos.size) * float(self.centre_neg.size)
            active = cc.n_active_pairs / pairs_c
            last = self._factored_active
            if last is not None and abs(active - last) <= REFACTOR_CHANGE * last:
                return self.pc.apply
            self.pc.factor(1.0, 2.0 * C * self.n_pairs / pairs_c, operator=laplacian)
            self._factored_active = active
            self._factored_alpha = np.array(alpha, dtype=np.float64, copy=True)
            label = f"pairs, {active:.3f} of the centre pairs active"
        else:
            # "mean", and "pairs" at alpha = 0, where every pair is active and the mean
            # degree describes the Laplacian up to rank two (at half the cost)
            scale = 4.0 * C * coef.n_active_pairs / self.m
            old = self.pc.scale if self.pc.operator is None else None
            if old is not None and old / REFACTOR_RATIO <= scale <= old * REFACTOR_RATIO:
                return self.pc.apply
            self.pc.factor(1.0, scale)
            self._factored_active = self._factored_alpha = None
            label = "mean degree"
        logger.info("preconditioner factored (%s) in %.2f s", label, time.perf_counter() - t0)
        return self.pc.apply

    def _centre_pairs(self, alpha):
        """The pairs active among the centres at scores ``K_mm alpha``, and their Laplacian
        as the operator ``W`` of :meth:`NystroemPreconditioner.factor`."""
        cc = pairwise_coefficients(self.pc.regularizer_matvec(alpha), self.centre_pos,
                                   self.centre_neg)

        def laplacian(B):
            for k in range(B.shape[1]):
                B[:, k] = cc.laplacian_matvec(B[:, k])
            return B

        return cc, laplacian

    def factor_state(self) -> dict | None:
        """What the current factor of A was built from (for a checkpoint): its ridge and
        scale and, for a "pairs" factor, the coefficients whose centre scores gave its
        Laplacian; None before the first factorization."""
        if self.pc.scale is None:
            return None
        return {"ridge": self.pc.ridge, "scale": self.pc.scale,
                "pairs_alpha": self._factored_alpha, "active": self._factored_active}

    def restore_factor(self, state: dict | None) -> None:
        """Rebuild the factor of A that :meth:`factor_state` describes, bit for bit (the
        factorizations are deterministic), so that a resumed solve refactors when and as
        the uninterrupted one does."""
        if state is None:
            return
        operator = None
        if state.get("pairs_alpha") is not None:
            alpha = np.asarray(state["pairs_alpha"], dtype=np.float64)
            _, operator = self._centre_pairs(alpha)
            self._factored_alpha = alpha.copy()
        self.pc.factor(float(state["ridge"]), float(state["scale"]), operator=operator)
        self._factored_active = state.get("active")


class StoredKernelBasis(KernelBasis):
    """:class:`KernelBasis` over the stored kernel blocks ``K_b`` of the rows
    (:func:`daskauc.solvers.kernel_basis.store_kernel`): the operator's chunks are the blocks,
    whose products are those of a linear basis (float64 accumulation); other rows (validation
    rows) are raw rows, scored through the kernel as before."""

    @staticmethod
    def matvec(block, gc, v):
        return block_matvec(block, v)

    @staticmethod
    def gradient(block, gc, coef, start, stop, g0):
        u = coef.g[start:stop]
        rows = [block_rmatvec(block, u)]
        if g0 is not None:
            rows.append(block_rmatvec(block, g0))
        return np.vstack(rows)

    @staticmethod
    def rmatvec(block, gc, u):
        return block_rmatvec(block, u)

    row_matvec = staticmethod(kernel_matvec_block)


@solver(kind="newton", tags=("kernel", "pairwise"), params={
    **KERNEL_PARAMS, **NEWTON_PARAMS, "weighting": Options(*WEIGHTINGS),
    "store_kernel": AUTO_OR_BOOL})
def kernel_pairwise_newton(
    X,
    y,
    centres,
    *,
    gamma: float,
    lam: float,
    tol: float = 1e-3,
    max_iter: int = 50,
    cg_tol: float = 0.1,
    max_cg: int = 50,
    precondition: bool = True,
    weighting: str = "mean",
    centre_labels=None,
    alpha0: np.ndarray | None = None,
    line_search: str = "exact",
    preconditioner: NystroemPreconditioner | None = None,
    jitter: float | None = None,
    persist: str | bool = "auto",
    store_kernel: str | bool = "auto",
    dtype=None,
    callback: Callable[[np.ndarray, dict], Any] | None = None,
    X_val=None,
    y_val=None,
    check_input: bool = True,
    on_step: Callable[[dict, list], Any] | None = None,
    resume: dict | None = None,
) -> SolverResult:
    """Minimize the pairwise squared hinge in the Gaussian kernel basis of ``centres``.

    Parameters
    ----------
    X : array-like or dask array (n, d)
        Raw rows (numpy, dask, zarr or a store path); float32 rows give float32 kernel tiles
        with float64 accumulation.
    y : array-like (n,)
        Binary labels.
    centres : ndarray (m, d)
        The centres ``c_j`` of the basis.
    gamma : float
        Kernel width, ``k(x, c) = exp(-gamma ||x - c||^2)``.
    lam : float
        Regularization (> 0) of ``F(alpha) = lam/2 alpha^T K~ alpha + mean over pairs of
        max(0, 1 - f_i + f_j)^2``; NBAUC's C on an r = m embedding is ``1 / (lam n+ n-)``.
    tol, max_iter, cg_tol, max_cg, line_search
        As for :func:`daskauc.solvers.newton.prsvm_newton` (``tol`` is relative to
        ``||grad F(0)||``).
    precondition : bool, default True
        Nystroem preconditioner for conjugate gradient (False: plain CG; the Cholesky factor
        of K_mm is still computed, for the regularizer).
    weighting : {"mean", "pairs"}, default "mean"
        How the preconditioner sees the active pairs (:class:`KernelBasis`): "pairs" uses the
        pairs among the centres and needs ``centre_labels``; it halved the passes on covtype.
    centre_labels : array-like (m,), optional
        Labels of the centres (when they are training rows), for ``weighting="pairs"``.
    alpha0 : ndarray (m,), optional
        Starting coefficients (a warm start along a path of lam or of growing m).
    preconditioner : NystroemPreconditioner, optional
        The factor of these centres' K_mm from an earlier solve (same centres and gamma), to
        reuse; by default one is built (its ``seconds`` say what it cost).
    jitter : float, optional
        Jitter of the factor of K_mm (see :class:`NystroemPreconditioner`).
    persist : {"auto", True, False}
        Keep the raw rows in (cluster) memory or stream them at every pass.
    store_kernel : {"auto", True, False}
        Keep the n x m kernel block of the rows in (cluster) memory, computed once, so that
        every pass reads it instead of computing ``2 n m (d + 2)`` flops and ``n m``
        exponentials: "auto" when it fits the memory budget and ``persist`` is not False
        (:func:`daskauc.solvers.kernel_basis.store_kernel`).
    dtype : None, float32 or float64
        Working dtype of the kernel tiles (default: X's).
    callback, X_val, y_val, check_input
        As for :func:`daskauc.solvers.newton.prsvm_newton`.
    on_step : callable, optional
        ``on_step(snapshot, history)`` after every Newton step: ``snapshot`` (the Newton
        loop's, plus ``factor``, what the preconditioner's current factor of A was built
        from) is what ``resume`` takes; ``history`` the records so far in the scale above.
    resume : dict, optional
        A snapshot given to ``on_step``: continue from it (``alpha0`` is then ignored). With
        the same centres, gamma and rows the factor of K_mm is computed again and the factor
        of A rebuilt from the snapshot, so the steps are those of the uninterrupted solve,
        bit for bit.

    Returns
    -------
    SolverResult
        ``coef`` = alpha (m,); ``history`` records as for ``prsvm_newton`` with ``objective``
        and ``grad_norm`` in the ``lam`` scale above and ``loss`` the mean over pairs; ``state``
        with ``preconditioner`` (the factor, for reuse), ``jitter``, ``persisted``,
        ``stored_kernel``, ``seconds`` (preconditioner stages) and ``passes`` (passes over
        the rows).
    """
    Xd, y_np, C, gamma, lam = _check_problem(X, y, centres, gamma, lam, check_input)
    m = C.shape[0]
    alpha = _check_alpha(alpha0, m)
    Xv, yv = validation_set(X_val, y_val, Xd.shape[1])
    pos, neg = class_indices(y_np)
    n_pairs = float(pos.size) * float(neg.size)
    C_loop = 1.0 / (lam * n_pairs)

    client = distributed_client()
    work_dtype = np.dtype(dtype) if dtype is not None else Xd.dtype
    gc = gaussian_centres(C, gamma, work_dtype)
    t0 = time.perf_counter()
    if preconditioner is None:
        preconditioner = build_preconditioner(C, gamma, jitter=jitter)
    elif preconditioner.m != m:
        raise ValueError(f"the preconditioner has {preconditioner.m} centres, not {m}")
    seconds_pc = time.perf_counter() - t0
    Xd, persisted = _prepare_rows(Xd, m, persist, client)
    if Xv is not None:
        Xv, _ = _prepare_rows(Xv, m, persist, client, name="X_val")
    centres_ref = _share(gc, client)
    if weighting == "pairs":
        if centre_labels is None:
            raise ValueError('weighting="pairs" needs centre_labels (the labels of the centres, '
                             'e.g. centres sampled from the training rows)')
        centre_labels, _ = as_labels(centre_labels, name="centre_labels")
        centre_labels = np.asarray(centre_labels)
        if centre_labels.shape != (m,):
            raise ValueError(f"centre_labels must have {m} labels; got {centre_labels.shape}")
    K_rows, stored = store_kernel_blocks(
        Xd, gc, centres_ref, False if persist is False and store_kernel == "auto"
        else store_kernel, client)
    basis = (StoredKernelBasis if stored else KernelBasis)(
        centres_ref, m, preconditioner, precondition, weighting, centre_labels, n_pairs)
    op = PairwiseOperator(K_rows if stored else Xd, y_np, C_loop, basis=basis)

    def scaled(record: dict) -> dict:
        out = dict(record)
        out["objective"] = lam * record["objective"]
        out["grad_norm"] = lam * record["grad_norm"]
        out["loss"] = record["loss"] / n_pairs
        return out

    cb = None if callback is None else (lambda a, rec: callback(a, scaled(rec)))
    step = None
    if on_step is not None:
        def step(snapshot):
            on_step({**snapshot, "factor": basis.factor_state()},
                    [scaled(r) for r in snapshot["history"]])

    with threads_limit(client):
        if resume is not None and precondition:  # under the loop's BLAS threads, as it was
            basis.restore_factor(resume.get("factor"))
        result = newton_loop(
            op, alpha, tol=tol, max_iter=max_iter, cg_tol=cg_tol, max_cg=max_cg,
            line_search=line_search, decrement_tol=None, callback=cb, Xv=Xv, yv=yv,
            persisted=persisted, resume=resume, on_step=step,
        )
    history = [scaled(r) for r in result.history]
    passes = 2 * len(history) + 2 * sum(r.get("cg_iter", 0) for r in history)
    state = {"preconditioner": preconditioner, "jitter": preconditioner.jitter,
             "persisted": persisted, "stored_kernel": stored, "passes": passes,
             "seconds": {**preconditioner.seconds, "preconditioner_total": seconds_pc},
             "n_factorizations": preconditioner.n_factorizations,
             "placement": preconditioner.placement,
             "grad_norm0": lam * result.state["grad_norm0"]}
    return SolverResult(coef=result.coef, n_iter=result.n_iter, converged=result.converged,
                        history=history, state=state)


def _operator(X, y, centres, gamma, lam, jitter, dtype):
    Xd, y_np, C, gamma, lam = _check_problem(X, y, centres, gamma, lam, True)
    pos, neg = class_indices(y_np)
    n_pairs = float(pos.size) * float(neg.size)
    client = distributed_client()
    gc = gaussian_centres(C, gamma, np.dtype(dtype) if dtype is not None else Xd.dtype)
    pc = build_preconditioner(C, gamma, jitter=jitter)
    Xd, _ = _prepare_rows(Xd, C.shape[0], True, client)
    basis = KernelBasis(_share(gc, client), C.shape[0], pc, precondition=False)
    return PairwiseOperator(Xd, y_np, 1.0 / (lam * n_pairs), basis=basis), lam, n_pairs, client


@checks(KERNEL_PARAMS)
def kernel_objective_gradient(X, y, centres, alpha, *, gamma: float, lam: float,
                              jitter: float | None = None, dtype=None):
    """``F(alpha)`` and its gradient through the solver's own graphs (one compute).

    ``F(alpha) = lam/2 alpha^T K~ alpha + 1/(n+ n-) sum_{i in P, j in N} max(0, 1 - f_i +
    f_j)^2``, ``grad = lam K~ alpha + 2/(n+ n-) K^T g``. Returns ``(F, grad, jitter)``:
    ``K~ = K_mm + jitter I``.
    """
    op, lam, n_pairs, client = _operator(X, y, centres, gamma, lam, jitter, dtype)
    a = _check_alpha(alpha, op.basis.m)
    with threads_limit(client):
        coef, _, sums = op.scores_and_gradient(a, (op.pos, op.neg), with_g0=False)
    Ka = op.basis.regularize(a)
    F = 0.5 * lam * float(a @ Ka) + coef.loss / n_pairs
    return F, lam * Ka + (2.0 / n_pairs) * sums[0], op.basis.pc.jitter


@checks(KERNEL_PARAMS)
def kernel_hessian_product(X, y, centres, alpha, v, *, gamma: float, lam: float,
                           jitter: float | None = None, dtype=None) -> np.ndarray:
    """Generalized Hessian of ``F`` at ``alpha`` times ``v``: ``lam K~ v + 2/(n+ n-) K^T L K v``
    (``L``: Laplacian of the pairs active at ``alpha``), through the solver's graphs."""
    op, lam, n_pairs, client = _operator(X, y, centres, gamma, lam, jitter, dtype)
    a = _check_alpha(alpha, op.basis.m)
    v = _check_alpha(v, op.basis.m)
    with threads_limit(client):
        _, handle, _ = op.scores_and_gradient(a, (op.pos, op.neg), with_g0=False)
        xtlq, _ = op.hessian_product(handle, v)
    return lam * op.basis.regularize(v) + (2.0 / n_pairs) * xtlq


