"""The Gaussian kernel-basis model at a given width and lam: its route and its solver calls.

``f(x) = sum_j alpha_j exp(-gamma ||x - c_j||^2)`` over m centres, fitted by the pairwise
squared hinge or least squares (:class:`daskauc.KernelAUC`), in one of two routes that give
the same model:

* "kernel": :func:`daskauc.solvers.kernel_newton.kernel_pairwise_newton` or
  :func:`daskauc.solvers.kernel_lsauc.kernel_lsauc` over the rows (nothing n x m stored),
  Nystroem-preconditioned; it can start from an earlier model (:func:`warm_alpha`);
* "embedding": the k-means Nystroem map with the centres as landmarks, materialized, then
  :func:`daskauc.solvers.newton.prsvm_newton` (``C = 1 / (lam n+ n-)``) or the exact
  least-squares solve (:func:`daskauc.solvers.stats.lsauc`) on it.

:func:`choose_route` picks the cheaper by the measured-cost model of
:mod:`daskauc.engine.cost`. KernelAUC fits the model once at its (gamma, lam); the width walk
(:func:`daskauc.model_selection.width_walk.walk_width`) fits it at every width it tries,
each from the one before. Both call :func:`fit_kernel_model`, so the walk's models are the
final model's at another width.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import dask
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._arrays import class_counts
from .._compute import distributed_client, persist
from .._gaussian import gaussian_centres, kernel_block
from .._labels import check_X_y
from ..embed.nystroem import KMeansNystroem, NystroemRankWarning
from ..engine.cost import route_costs
from ..engine.placement import memory_budget
from ..solvers._result import SolverResult
from ..solvers.kernel_basis import build_preconditioner, pass_threads
from ..solvers.kernel_lsauc import kernel_lsauc
from ..solvers.kernel_newton import kernel_pairwise_newton
from ..solvers.newton import prsvm_newton
from ..solvers.stats import class_statistics, lsauc


@dataclass(frozen=True)
class KernelSettings:
    """How the model is solved (KernelAUC's parameters of the solve)."""

    loss: str  # "squared_hinge" or "least_squares"
    weighting: str  # "auto", "mean" or "pairs" (the kernel route's squared hinge)
    persist: object  # "auto", True or False
    dtype: str  # working dtype of the kernel tiles or the embedding
    tol: float
    max_iter: int
    cg_tol: float
    max_cg: int
    factor_placement: str = "auto"  # the kernel route's factor: "auto", "client", "workers"

    @property
    def newton_params(self) -> dict:
        return {"tol": self.tol, "max_iter": self.max_iter, "cg_tol": self.cg_tol,
                "max_cg": self.max_cg}


@dataclass(frozen=True)
class KernelFunction:
    """A fitted ``f``, as a warm start sees it: centres (float64), the training rows they are
    (int64; empty when they are not rows), gamma and alpha (float64)."""

    centres: np.ndarray
    index: np.ndarray
    gamma: float
    alpha: np.ndarray


def choose_route(n: int, d: int, m: int, *, loss: str, solver: str, persist) -> tuple[str, dict]:
    """``(route, costs)``: ``solver`` when it names a route, else the cheaper of "kernel" and
    "embedding" by :func:`daskauc.engine.cost.route_costs` (with this cluster's threads and,
    unless ``persist`` is False, its memory budget)."""
    client = distributed_client()
    budget = memory_budget(client) if persist is not False else 0.0
    costs = route_costs(n, d, m, loss=loss, n_threads=pass_threads(client), memory_budget=budget)
    if solver != "auto":
        return solver, costs
    return ("embedding" if costs["embedding"] < costs["kernel"] else "kernel"), costs


def warm_alpha(previous: KernelFunction | None, centres, index, gamma: float, pc):
    """``previous``'s function in the basis of ``centres`` (``pc`` their preconditioner), or
    None without one: its coefficients carried over exactly when its centres are rows among
    the new ones (``index``) at the same gamma, else interpolated at the new centres."""
    if previous is None:
        return None
    old_index = previous.index
    if index is not None and len(old_index) and gamma == previous.gamma:
        pos = np.searchsorted(index, old_index)
        pos = np.minimum(pos, len(index) - 1)
        if np.array_equal(np.asarray(index)[pos], old_index):  # old centres among new
            alpha = np.zeros(len(index))
            alpha[pos] = previous.alpha
            return alpha
    old = gaussian_centres(previous.centres, previous.gamma)  # the previous model, as it was
    f_old = kernel_block(centres, old) @ previous.alpha
    return pc.regularizer_solve(f_old)  # interpolates the old function at the centres


def fit_kernel_model(route: str, X, y: np.ndarray, centres, labels, index, gamma: float,
                     lam: float, settings: KernelSettings, *,
                     previous: KernelFunction | None = None, X_val=None, y_val=None,
                     on_step=None, resume: dict | None = None):
    """``(alpha, SolverResult)`` of the model with these centres (``labels`` / ``index``: of
    uniform centres, else None), gamma and lam on rows ``X`` (row-chunked dask) and labels
    ``y`` ({-1, +1} numpy), by ``route``; the kernel route starts from ``previous``.

    The squared hinge's Newton steps can be checkpointed on either route:
    ``on_step(snapshot, alpha, history)`` after every step (``alpha`` the model's
    coefficients at that step, ``history`` its records), and ``resume=snapshot`` continues
    the same steps (the factor, or the embedding, is computed again from the centres)."""
    if (on_step is not None or resume is not None) and settings.loss != "squared_hinge":
        raise ValueError("only the squared hinge's Newton steps can be checkpointed")
    if route == "kernel":
        return _fit_kernel(X, y, centres, labels, index, gamma, lam, settings, previous,
                           X_val, y_val, on_step, resume)
    return _fit_embedding(X, y, centres, gamma, lam, settings, X_val, y_val, on_step, resume)


def _fit_kernel(X, y, centres, labels, index, gamma, lam, s: KernelSettings, previous,
                X_val, y_val, on_step=None, resume=None):
    pc = build_preconditioner(centres, gamma, placement=s.factor_placement)
    alpha0 = warm_alpha(previous, centres, index, gamma, pc)
    if s.loss == "least_squares":
        res = kernel_lsauc(X, y, centres, gamma=gamma, lam=lam, tol=float(s.tol) ** 2,
                           max_iter=max(int(s.max_iter), 1) * 4, persist=s.persist,
                           alpha0=alpha0, preconditioner=pc, X_val=X_val, y_val=y_val,
                           check_input=False)
        return res.coef, res
    weighting = s.weighting
    if weighting == "auto":
        weighting = "pairs" if labels is not None else "mean"
    step = None if on_step is None else (
        lambda snapshot, history: on_step(snapshot, snapshot["w"], history))
    res = kernel_pairwise_newton(X, y, centres, gamma=gamma, lam=lam, weighting=weighting,
                                 centre_labels=labels, persist=s.persist, alpha0=alpha0,
                                 preconditioner=pc, X_val=X_val, y_val=y_val,
                                 check_input=False, on_step=step, resume=resume,
                                 **s.newton_params)
    return res.coef, res


def _fit_embedding(X, y, centres, gamma, lam, s: KernelSettings, X_val, y_val, on_step=None,
                   resume=None):
    with warnings.catch_warnings():  # the cut is recorded (state "r"), the model is alpha
        warnings.simplefilter("ignore", NystroemRankWarning)
        emb = KMeansNystroem(n_components=centres.shape[0], landmarks=centres, gamma=gamma,
                             dtype=s.dtype).fit(X)
    Z = emb.transform(X)
    if s.persist is not False:
        with dask.config.set(**{"array.slicing.split_large_chunks": False}):
            Z = persist(Z)[0]
    Zv = emb.transform(X_val) if X_val is not None else None
    Zd, yd, _ = check_X_y(Z, y)
    if s.loss == "least_squares":
        res = lsauc(Zd, yd, lam=float(lam), stats=class_statistics(Zd, yd, precision="auto"))
    else:
        pos, neg = class_counts(y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            step = None if on_step is None else (
                lambda snapshot: on_step(snapshot, emb.projection_ @ snapshot["w"],
                                         snapshot["history"]))
            res = prsvm_newton(Zd, yd, C=float(1.0 / (lam * (float(pos) * float(neg)))),
                               **s.newton_params, persist=s.persist, X_val=Zv, y_val=y_val,
                               check_input=False, on_step=step, resume=resume)
    coef = np.asarray(res.coef, dtype=np.float64)
    result = SolverResult(coef=coef, n_iter=int(res.n_iter), converged=bool(res.converged),
                          history=list(res.history), state={"r": int(emb.n_components_)})
    return emb.projection_ @ coef, result
