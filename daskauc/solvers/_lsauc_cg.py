"""Least-squares AUC by conjugate gradient on the implicit operator: wide and sparse rows.

The minimizer of LS (docs/algorithms.md, "Least-squares AUC") solves ``A w = D``
(:func:`daskauc.solvers.stats.ls_system`) with

    A v = S+ v + S- v + D (D.v) + (lam/2) v,   S+- v = (1/n+-) X+-^T (X+- v) - c+- (c+-.v),

``c+-`` the class means and ``D = c+ - c-``. So ``A v`` is one pass over the row chunks,
``X^T (W (X v))`` with ``W`` = 1/n+ on the positives and 1/n- on the negatives, plus three
r-vector corrections: no r x r matrix, memory O(r) per task, time O(nnz) per pass on sparse
chunks (O(n r) on dense ones). This is the route of :func:`daskauc.solvers.stats.lsauc`
(``solver="cg"``) where the exact one's r x r scatter matrices do not fit or cost too much.

A first pass gathers the class sums and the class sums of squares of every column (the means,
``D`` and the Jacobi diagonal of ``A``); conjugate gradient then starts from ``w = 0`` and
ends when ``||A w - D|| <= tol ||D||`` or after ``max_iter`` products, each one compute
(graph layer ``daskauc-lsauc-cg``). Where the rows live between passes (persisted, cached or
streamed) is :class:`daskauc.engine.placement.RowChunks`, as for the Newton solvers.

``S+-`` act uncentred (``X^T X v / n - c (c.v)``: centred sparse rows would be dense):
where a class mean's norm dwarfs the spread around it, the products lose about
``eps ||c||^2 / lambda_min(A)`` in relative accuracy.
"""

from __future__ import annotations

import logging
import time

import dask
import numpy as np
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from scipy.linalg.blas import daxpy

from .._compute import compute, distributed_client, share
from .._sparse import is_sparse
from ..engine.placement import RowChunks, place_rows
from ..engine.progress import solver_log_level
from ._graphs import fresh_token, threads_limit, tree_sum
from ._pairwise_kernels import _rmatvec_sq_f64
from ._sparse_products import squared
from .pairwise import block_matvec, block_rmatvec

logger = logging.getLogger(__name__)

#: the routes of :func:`lsauc` (``solver=``)
LS_SOLVERS = ("auto", "exact", "cg")
#: the largest r x r float64 scatter matrix the exact route of :func:`~daskauc.solvers.stats.
#: lsauc` builds (2 GiB: r <= 16,384); a chunk task holds two, a combine task up to 18. Here
#: (re-exported by ``stats``), not in ``_config``, while the sparse rows land (issue 42)
EXACT_MAX_BYTES = 2 * 2**30
#: ``solver="auto"`` takes the exact route on sparse rows up to this many columns (the
#: scatter of a chunk costs r^2 beside its non-zeros: 128 MiB here), conjugate gradient above
EXACT_SPARSE_COLUMNS = 4096


def check_exact_size(r: int) -> None:
    """The exact route's r x r float64 matrices over ``EXACT_MAX_BYTES`` are a ``ValueError``
    naming their size and the conjugate-gradient route."""
    size = 8 * r * r
    if size > EXACT_MAX_BYTES:
        raise ValueError(
            f"the exact least-squares AUC route builds {r:,} x {r:,} float64 scatter matrices "
            f"({size / 2**30:.1f} GiB each, more than EXACT_MAX_BYTES = "
            f"{EXACT_MAX_BYTES / 2**30:g} GiB); use solver='cg' (conjugate gradient on the "
            "implicit operator, memory O(r))")


def ls_route(X, solver: str = "auto") -> str:
    """``"exact"`` or ``"cg"``: the route of :func:`lsauc` for ``X``'s columns (``"auto"``:
    exact up to ``EXACT_SPARSE_COLUMNS`` columns for sparse rows and up to
    ``EXACT_MAX_BYTES`` per r x r matrix for dense ones, conjugate gradient above)."""
    if solver != "auto":
        return solver
    r = int(X.shape[1])
    sparse = is_sparse(X) or is_sparse(getattr(X, "_meta", None))
    small = r <= EXACT_SPARSE_COLUMNS if sparse else 8 * r * r <= EXACT_MAX_BYTES
    return "exact" if small else "cg"


def refuse_merge(state, r: int) -> None:
    """A state to continue from (``partial_fit``) is a ``ValueError``: the route keeps no
    class statistics to merge a batch into."""
    if state is not None:
        raise ValueError(
            f"LSAUC's conjugate-gradient route (solver='cg', or 'auto' on {r:,} columns) keeps "
            "no class statistics to merge a batch into; fit it on all the data (a dask array "
            "or a store streams it), or use a stochastic model of the family (SPAM, OPAUC, "
            "TwoPassAUC) for a stream")


def _labels(labels, start: int, stop: int) -> np.ndarray:
    return labels[start:stop]


def _moments_block(block, labels) -> np.ndarray:
    """Rows ``[sum over P of x, over N of x, over P of x*x, over N of x*x]`` (4, r) float64."""
    pos = (labels > 0).astype(np.float64)
    neg = 1.0 - pos
    out = np.zeros((4, block.shape[1]))
    if is_sparse(block):
        sq = squared(block)
        out[0], out[1] = block.T @ pos, block.T @ neg
        out[2], out[3] = sq.T @ pos, sq.T @ neg
    else:
        Xb = np.ascontiguousarray(block)
        _rmatvec_sq_f64(Xb, pos, pos, out[0], out[2])
        _rmatvec_sq_f64(Xb, neg, neg, out[1], out[3])
    return out


def _product_block(block, labels, v, w_pos: float, w_neg: float) -> np.ndarray:
    """``X^T W X v`` of one chunk (``W`` the class weights of its rows)."""
    u = block_matvec(block, v)
    u *= np.where(labels > 0, w_pos, w_neg)
    return block_rmatvec(block, u)


class _Passes:
    """The two graphs of the route over the row chunks of ``X``: one per call, one compute."""

    def __init__(self, X, y: np.ndarray, persist, client):
        X, cached = place_rows(X, persist, client)
        self.rows = RowChunks(X, cached, client)
        self.labels = share(np.asarray(y, dtype=np.int8), client)
        self.passes = 0

    def run(self, fn, name: str, *args) -> np.ndarray:
        """``sum over chunks of fn(chunk, labels of its rows, *args)`` (args given once)."""
        rows = self.rows
        name = f"{name}-{fresh_token()}"
        layer: dict = {}
        arg_keys = []
        for i, a in enumerate(args):
            layer[(f"{name}-arg", i)] = a
            arg_keys.append((f"{name}-arg", i))
        keys = []
        for c in range(rows.nchunks):
            a, b = int(rows.bounds[c]), int(rows.bounds[c + 1])
            layer[(name, c)] = (fn, rows.arg(c), (_labels, self.labels, a, b), *arg_keys)
            keys.append((name, c))
        root = tree_sum(layer, f"{name}-sum", keys)
        with dask.annotate(**rows.annotations([name])):
            graph = HighLevelGraph.from_collections(name, layer, dependencies=rows.deps)
        (out,) = compute(Delayed(root, graph, layer=name))
        rows.checked_once()
        self.passes += 1
        return out


def ls_conjugate_gradient(X, y: np.ndarray, *, lam: float, tol: float, max_iter: int,
                          precondition: bool = True, persist="auto") -> dict:
    """Solve LS's ``A w = D`` by Jacobi-preconditioned CG, one pass over ``X`` per product.

    ``X`` a row-chunked dask array (dense or CSR blocks) already validated, ``y`` numpy
    {-1, +1} labels with both classes. Returns ``{"coef", "n_iter", "converged", "history",
    "state"}``: ``history`` one record per iteration (``iter``, ``objective`` = LS from the
    CG residual, ``relative_residual``, ``seconds``), ``state`` the counts, ``D`` and the
    passes over the data.
    """
    start = time.perf_counter()
    y = np.asarray(y)
    n_pos, n_neg = int(np.count_nonzero(y > 0)), int(np.count_nonzero(y <= 0))
    client = distributed_client()
    with threads_limit(client):
        passes = _Passes(X, y, persist, client)
        sums = passes.run(_moments_block, "daskauc-lsauc-cg-moments")
        c_pos, c_neg = sums[0] / n_pos, sums[1] / n_neg
        D = c_pos - c_neg
        diag = sums[2] / n_pos - c_pos**2 + sums[3] / n_neg - c_neg**2 + D**2 + 0.5 * lam
        # a column of zeros with lam = 0 has no diagonal: left unscaled
        inv_m = 1.0 / np.where(diag > 0, diag, 1.0) if precondition else np.ones_like(D)
        w_pos, w_neg = 1.0 / n_pos, 1.0 / n_neg

        def product(v):  # in place: at 2^20 columns each r-vector temporary costs ~2 ms
            out = passes.run(_product_block, "daskauc-lsauc-cg", v, w_pos, w_neg)
            for x, a in ((c_pos, -(c_pos @ v)), (c_neg, -(c_neg @ v)), (D, D @ v),
                         (v, 0.5 * lam)):
                out = daxpy(x, out, a=float(a))
            return out

        w = np.zeros_like(D)
        res = D.copy()
        z = inv_m * res
        p = z.copy()
        rz = float(res @ z)
        d_norm = float(np.linalg.norm(D))
        history: list[dict] = []
        n_iter = 0
        converged = False
        while True:
            rel = float(np.linalg.norm(res)) / d_norm if d_norm > 0 else 0.0
            history.append({"iter": n_iter, "objective": 1.0 - float(w @ D) - float(w @ res),
                            "relative_residual": rel, "seconds": time.perf_counter() - start})
            logger.log(solver_log_level(), "LSAUC cg %d: LS=%.10g |r|/|D|=%.3g (%.2f s)",
                       n_iter, history[-1]["objective"], rel, history[-1]["seconds"])
            if rel <= tol:
                converged = True
                break
            if n_iter >= max_iter:
                break
            Ap = product(p)
            a = rz / float(p @ Ap)
            w = daxpy(p, w, a=a)
            res = daxpy(Ap, res, a=-a)
            np.multiply(inv_m, res, out=z)
            rz_new = float(res @ z)
            p *= rz_new / rz
            p += z
            rz = rz_new
            n_iter += 1
    state = {"route": "cg", "n_pos": n_pos, "n_neg": n_neg, "D": D, "passes": passes.passes}
    return {"coef": w, "n_iter": n_iter, "converged": converged, "history": history,
            "state": state}
