"""Least-squares AUC in the Gaussian kernel basis (conjugate gradient, one pass per step).

Objective, with ``f = K_nm alpha``, ``K~ = K_mm + jitter I`` and ``lam > 0``::

    LS(alpha) = lam/2 alpha^T K~ alpha + 1/(n+ n-) sum_{i in P, j in N} (1 - f_i + f_j)^2

a quadratic: ``H alpha = 2 D`` with ``H = lam K~ + 2 K^T W K - 2 mu+ mu+^T - 2 mu- mu-^T
+ 2 D D^T`` (``W`` = 1/n+ on positives and 1/n- on negatives, ``mu`` the class means of the
kernel rows, ``D = mu+ - mu-``). One pass gives ``mu``; each conjugate-gradient step is one
fused pass ``K^T (W K v)`` that computes every kernel block once. The preconditioner is
Falkon's, ``2 K^T W K ~ (4 / m) K_mm^2`` (the class weights sum to 2).

With r = m this is LSAUC on the Nystroem embedding (tested).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .._compute import distributed_client
from .._gaussian import gaussian_centres
from .._labels import validation_set
from .._params import AUTO_OR_BOOL, NON_NEGATIVE, Interval
from .._registry import solver
from ..engine.progress import solver_log_level
from ._graphs import threads_limit
from ._result import SolverResult
from .kernel_basis import (
    KERNEL_PARAMS,
    _check_alpha,
    _check_problem,
    _pass_graph,
    _prepare_rows,
    _share,
    build_preconditioner,
    kernel_gram_matvec_block,
    kernel_matvec_block,
    kernel_rmatvec_block,
)
from .pairwise import class_indices
from .preconditioner import NystroemPreconditioner

logger = logging.getLogger(__name__)


@solver(kind="least-squares", tags=("kernel", "least-squares loss"), params={
    **KERNEL_PARAMS, "tol": NON_NEGATIVE, "max_iter": Interval(int, 0), "precondition": bool,
    "persist": AUTO_OR_BOOL})
def kernel_lsauc(
    X,
    y,
    centres,
    *,
    gamma: float,
    lam: float,
    tol: float = 1e-6,
    max_iter: int = 200,
    precondition: bool = True,
    alpha0: np.ndarray | None = None,
    preconditioner: NystroemPreconditioner | None = None,
    jitter: float | None = None,
    persist: str | bool = "auto",
    dtype=None,
    X_val=None,
    y_val=None,
    check_input: bool = True,
) -> SolverResult:
    """Minimize the least-squares AUC loss in the Gaussian kernel basis of ``centres``.

    ``LS(alpha) = lam/2 alpha^T K~ alpha + mean over pairs of (1 - f_i + f_j)^2``: one pass for
    the class means of the kernel rows, then preconditioned conjugate gradient on
    ``H alpha = 2 D`` with one fused pass per iteration, until ``||H alpha - 2 D|| <= tol
    ||2 D||`` (norms ``||T^{-T} v||``, those of the r = m embedding) or ``max_iter``
    iterations. Parameters as for :func:`kernel_pairwise_newton`.

    Returns
    -------
    SolverResult
        ``coef`` = alpha; ``n_iter`` CG iterations; ``history`` one record per iteration
        (``iter``, ``objective`` = LS from the CG residual, ``rel_residual``, ``seconds``,
        ``val_auc``); ``state`` as for :func:`kernel_pairwise_newton` plus ``D``.
    """
    Xd, y_np, C, gamma, lam = _check_problem(X, y, centres, gamma, lam, check_input)
    m = C.shape[0]
    alpha = _check_alpha(alpha0, m)
    Xv, yv = validation_set(X_val, y_val, Xd.shape[1])
    pos, neg = class_indices(y_np)
    npos, nneg = pos.size, neg.size

    client = distributed_client()
    gc = gaussian_centres(C, gamma, np.dtype(dtype) if dtype is not None else Xd.dtype)
    t0 = time.perf_counter()
    if preconditioner is None:
        preconditioner = build_preconditioner(C, gamma, jitter=jitter)
    elif preconditioner.m != m:
        raise ValueError(f"the preconditioner has {preconditioner.m} centres, not {m}")
    if precondition and (preconditioner.ridge, preconditioner.scale) != (lam, 4.0 / m):
        preconditioner.factor(lam, 4.0 / m)  # 2 K^T W K ~ (4 / m) K_mm^2
    seconds_pc = time.perf_counter() - t0
    Xd, persisted = _prepare_rows(Xd, m, persist, client)
    if Xv is not None:
        Xv, _ = _prepare_rows(Xv, m, persist, client, name="X_val")
    ref = _share(gc, client)
    bounds = np.concatenate([[0], np.cumsum(Xd.chunks[0])]).astype(int)
    weights = np.where(y_np > 0, 1.0 / npos, 1.0 / nneg)
    U = np.column_stack([np.where(y_np > 0, 1.0 / npos, 0.0), np.where(y_np > 0, 0.0, 1.0 / nneg)])
    passes = 0
    start = time.perf_counter()

    def rows(arr):
        return lambda c: (arr[bounds[c] : bounds[c + 1]],)

    with threads_limit(client):
        mu = _pass_graph(Xd, ref, kernel_rmatvec_block, rows(U), "daskauc-kernel-ls-means",
                         reduce=True)
        passes += 1
        mu_p, mu_n = mu[0], mu[1]
        D = mu_p - mu_n
        b = 2.0 * D
        reg = preconditioner.regularizer_matvec

        def hess(v):
            nonlocal passes
            kwk = _pass_graph(Xd, ref, kernel_gram_matvec_block,
                              lambda c: (v, weights[bounds[c] : bounds[c + 1]]),
                              "daskauc-kernel-ls-hvp", reduce=True)
            passes += 1
            return (lam * reg(v) + 2.0 * kwk - 2.0 * (mu_p @ v) * mu_p - 2.0 * (mu_n @ v) * mu_n
                    + 2.0 * (D @ v) * D)

        apply = preconditioner.apply if precondition else np.copy

        def norm(v):  # the embedding's Euclidean norm (see KernelBasis.norm)
            return float(np.linalg.norm(preconditioner.whiten(v)))

        res = b - hess(alpha) if np.any(alpha) else b.copy()
        z = apply(res)
        p = z.copy()
        rz = float(res @ z)
        bnorm = norm(b)
        history: list[dict] = []
        n_iter = 0
        converged = False
        while True:
            rel = norm(res) / bnorm if bnorm > 0 else 0.0
            record = {"iter": n_iter, "objective": 1.0 - 0.5 * float(alpha @ (b + res)),
                      "rel_residual": rel, "seconds": time.perf_counter() - start}
            if Xv is not None:
                from ..metrics import roc_auc

                sv = _pass_graph(Xv, ref, kernel_matvec_block, lambda c, a=alpha: (a,),
                                 "daskauc-kernel-ls-val", reduce=False)
                record["val_auc"] = float(roc_auc(yv, sv))
            history.append(record)
            logger.log(solver_log_level(), "kernel LS %d: LS=%.10g |r|/|b|=%.3g (%.2f s)%s",
                       n_iter, record["objective"], rel, record["seconds"],
                       f" val AUC={record['val_auc']:.5f}" if "val_auc" in record else "")
            if rel <= tol:
                converged = True
                break
            if n_iter >= max_iter:
                break
            Hp = hess(p)
            a = rz / float(p @ Hp)
            alpha = alpha + a * p
            res = res - a * Hp
            z = apply(res)
            rz_new = float(res @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
            n_iter += 1
    state = {"preconditioner": preconditioner, "jitter": preconditioner.jitter,
             "persisted": persisted, "passes": passes, "D": D,
             "seconds": {**preconditioner.seconds, "preconditioner_total": seconds_pc},
             "n_factorizations": preconditioner.n_factorizations,
             "placement": preconditioner.placement}
    return SolverResult(coef=alpha, n_iter=n_iter, converged=converged, history=history,
                        state=state)


