"""The Nystroem preconditioner with its factors on the workers, as b x b tiles.

Same mathematics and interface as :class:`daskauc.solvers.preconditioner.
NystroemPreconditioner` (read its docstring first): ``K_mm + jitter I = L L^T`` (``L = T^T``),
``A^T A = ridge I + scale T W T^T = ridge I + scale L^T W L`` with ``M = A^T`` lower, and

    B B^T r = L^{-T} M^{-T} M^{-1} L^{-1} r,

but ``L`` and ``M`` are kept as their lower-triangle tiles ``L_ij`` (i >= j), each a task result
held by a worker: the client holds the futures and m-vectors, never an m x m matrix. With
``nb = ceil(m / b)`` blocks:

* **Kernel and Cholesky** (one graph): the kernel tiles ``K_ij`` are computed where they are
  needed and the right-looking blocked Cholesky runs over them: for each k, ``L_kk =
  chol(A_kk)``, ``L_ik = A_ik L_kk^{-T}``, then ``A_ij -= L_ik L_jk^T`` (i >= j > k). The jitter
  is added to the diagonal tiles; when a diagonal tile is not positive definite the graph is
  rebuilt with the jitter grown as the client-side factor grows it.
* ``L^T W L``: tile ``R_ij = sum_{k >= i} L_ki^T (W L)_kj`` summed along k in a chain of tile
  products (``W = I``: ``(W L)_kj = L_kj``; an operator ``W`` is applied to the column panel
  ``L[:, J]`` of m x b, on one worker), then ``scale R + ridge I`` goes through the same blocked
  Cholesky, giving ``M``.
* A vector product or solve with ``L``, ``L^T``, ``M`` or ``M^T`` is a blocked substitution:
  tile-vector products run where the tiles are (b-vectors travel, tiles stay), so ``apply``
  (four solves) is one graph of about ``2 nb^2`` small tasks and one compute.

Flops are those of the client-side factor (Cholesky m^3 / 3, ``L^T L`` m^3 / 3, an operator
m^3; a solve m^2), spread over the workers' threads; communication is tiles moved between
workers by the Cholesky updates and the ``L^T W L`` chains, at most ``nb`` times the factor's
8 m^2 / 2 bytes for each of the two, and b-vectors in the solves. Memory: the two lower
triangles, ``8 m (m + b)`` bytes over the workers (m = 32,768, b = 4,096: 9.7 GB), plus the
tiles in flight.

Every tile task is deterministic and the graph fixes the order of every sum, so the same
centres give the same factor bit for bit (a resumed fit rebuilds it instead of saving it).
"""

from __future__ import annotations

import logging
import math
import time

import dask
import numpy as np
import scipy.linalg.blas as blas
import scipy.linalg.lapack as lapack
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from .._compute import compute as dask_compute
from .._compute import distributed_client, flush_releases, persist, share
from .._gaussian import GaussianCentres, gaussian_centres, kernel_block
from ..engine.cost import FACTOR_BLOCK_MAX
from ._graphs import fresh_token, threads_limit
from .preconditioner import JITTER_GROWTH, JITTER_PER_CENTRE, MAX_JITTER

logger = logging.getLogger(__name__)

#: default tile side (:data:`daskauc.engine.cost.FACTOR_BLOCK_MAX`)
BLOCK = FACTOR_BLOCK_MAX


class NotPositiveDefinite(np.linalg.LinAlgError):
    """A diagonal tile of the blocked Cholesky is not positive definite (pivot ``args[1]``)."""


class NonFiniteKernel(ValueError):
    """A kernel or factor tile holds NaN or infinity."""


# ----------------------------------------------------------------------------- tile tasks


def _kernel_tile(centres: tuple, r0: int, r1: int, c0: int, c1: int, jitter: float):
    """``K[r0:r1, c0:c1]`` of the centres (float64), plus ``jitter`` on a diagonal tile."""
    C, gc = centres
    cols = GaussianCentres(CaT=np.ascontiguousarray(gc.CaT[:, c0:c1]), shift=gc.shift,
                           gamma=gc.gamma)
    K = np.asfortranarray(kernel_block(C[r0:r1], cols))
    if r0 == c0:
        K[np.diag_indices(r1 - r0)] += jitter
    return K


def _potrf_tile(A: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of a diagonal tile (its lower triangle is read)."""
    L, info = lapack.dpotrf(A, lower=1, clean=1, overwrite_a=0)
    if info > 0:
        raise NotPositiveDefinite("diagonal tile not positive definite", int(info))
    if info < 0:  # pragma: no cover - an argument error is a bug here
        raise RuntimeError(f"dpotrf: illegal argument {-info}")
    if not np.isfinite(np.diag(L)).all():
        raise NonFiniteKernel("a diagonal tile of the factor holds NaN or infinity")
    return L


def _trsm_tile(A: np.ndarray, L_kk: np.ndarray) -> np.ndarray:
    """``A L_kk^{-T}``: a tile below the diagonal of the factor."""
    return blas.dtrsm(1.0, L_kk, np.array(A, order="F"), side=1, lower=1, trans_a=1)


def _update_tile(A: np.ndarray, L_ik: np.ndarray, L_jk: np.ndarray) -> np.ndarray:
    """``A - L_ik L_jk^T`` (a trailing tile of the blocked Cholesky)."""
    return blas.dgemm(-1.0, L_ik, L_jk, beta=1.0, c=np.array(A, order="F"), trans_b=1,
                      overwrite_c=1)


def _gram_step(acc, L_ki: np.ndarray, P_kj: np.ndarray, scale: float, ridge: float,
               last: bool) -> np.ndarray:
    """One term ``L_ki^T P_kj`` of ``R_ij`` added to ``acc`` (None at the chain's start); the
    last term also applies ``scale R_ij + ridge I`` (``ridge`` only on a diagonal tile)."""
    acc = blas.dgemm(1.0, L_ki, P_kj, trans_a=1) if acc is None else blas.dgemm(
        1.0, L_ki, P_kj, beta=1.0, c=acc, trans_a=1, overwrite_c=1)
    if last:
        acc *= scale
        if ridge:
            acc[np.diag_indices(acc.shape[0])] += ridge
    return acc


def _operator_panel(operator, tiles: list, bounds: list, j: int) -> list:
    """``W L[:, J]`` for the column panel ``J`` of the factor (``tiles``: ``L_kj`` for k >= j),
    returned as its row tiles (every block k; rows above the diagonal tile are zero in L but not
    in ``W L``)."""
    m = bounds[-1]
    b = bounds[j + 1] - bounds[j]
    panel = np.zeros((m, b), order="F")
    for k, tile in enumerate(tiles, start=j):
        panel[bounds[k] : bounds[k + 1]] = tile
    out = np.asfortranarray(operator(panel))
    return [np.asfortranarray(out[bounds[k] : bounds[k + 1]]) for k in range(len(bounds) - 1)]


def _pick(parts: list, k: int) -> np.ndarray:
    return parts[k]


def _gemv(tile: np.ndarray, x: np.ndarray, trans: bool) -> np.ndarray:
    return blas.dgemv(1.0, tile, x, trans=int(trans))


def _trsv(tile: np.ndarray, v: np.ndarray, parts: list, trans: bool) -> np.ndarray:
    """``tile^{-1} (v - sum(parts))`` (``tile^{-T}`` with ``trans``), tile lower."""
    x = np.array(v, dtype=np.float64, copy=True)
    for p in parts:
        x -= p
    return blas.dtrsv(tile, x, lower=1, trans=int(trans), overwrite_x=1)


def _trmv(tile: np.ndarray, v: np.ndarray, parts: list, trans: bool) -> np.ndarray:
    """``tril(tile) v + sum(parts)`` (``tril(tile)^T v`` with ``trans``)."""
    x = blas.dtrmv(tile, np.array(v, dtype=np.float64), lower=1, trans=int(trans))
    for p in parts:
        x += p
    return x


def _concatenate(parts: list) -> np.ndarray:
    return np.concatenate(parts)


# --------------------------------------------------------------------------- the graphs


def tile_owners(n_blocks: int, workers: list) -> dict:
    """The worker of each lower tile ``(i, j)``: the tiles in column order dealt to the
    workers in turn, so that each holds ``n_blocks (n_blocks + 1) / (2 W)`` tiles (give or
    take one) and a share of every column's updates. Left to the scheduler, the tiles went
    where their inputs were: on 2 workers one held 63% of the factor and paused 140 times at
    its memory limit (ijcnn1, m = 8,192, the workers in separate network namespaces)."""
    if not workers:
        return {}
    tiles = [(i, j) for j in range(n_blocks) for i in range(j, n_blocks)]
    return {ij: workers[t % len(workers)] for t, ij in enumerate(tiles)}


def _on_workers(where: dict) -> dict:
    """``dask.annotate`` arguments that run each task ``key`` of ``where`` on the worker
    ``where[key]`` (elsewhere only if it is gone); none for an empty ``where``."""
    if not where:
        return {}
    from ..engine.chain_plan import Placement

    return {"workers": Placement({k: [w] for k, w in where.items()}),
            "allow_other_workers": True}


def _cholesky_layer(layer: dict, name: str, tiles: dict, nb: int) -> dict:
    """Add the right-looking blocked Cholesky of the lower tiles ``tiles[(i, j)]`` (graph keys)
    to ``layer``; returns the keys of the factor's tiles."""
    current = dict(tiles)
    factor: dict = {}
    for k in range(nb):
        key = (f"{name}-L", k, k)
        layer[key] = (_potrf_tile, current[(k, k)])
        factor[(k, k)] = key
        for i in range(k + 1, nb):
            key = (f"{name}-L", i, k)
            layer[key] = (_trsm_tile, current[(i, k)], factor[(k, k)])
            factor[(i, k)] = key
        for i in range(k + 1, nb):
            for j in range(k + 1, i + 1):
                key = (f"{name}-A{k}", i, j)
                layer[key] = (_update_tile, current[(i, j)], factor[(i, k)], factor[(j, k)])
                current[(i, j)] = key
    return factor


class BlockedNystroemPreconditioner:
    """:class:`~daskauc.solvers.preconditioner.NystroemPreconditioner` with its two factors held
    by the workers (or, without a distributed client, by the threaded scheduler's process) as
    lower-triangle tiles of side ``block``.

    Parameters
    ----------
    centres : ndarray (m, d)
        The centres; their Gaussian kernel ``K_mm`` (width ``gamma``) is factored.
    gamma : float
    jitter : float, optional
        As for :class:`NystroemPreconditioner` (default ``JITTER_PER_CENTRE * m``, grown by
        ``JITTER_GROWTH`` until the blocked Cholesky succeeds).
    block : int, default ``BLOCK``
        Tile side.

    Attributes
    ----------
    jitter, seconds, n_factorizations, ridge, scale, operator, m
        As for :class:`NystroemPreconditioner`; ``seconds["kernel"]`` is 0: the kernel tiles
        are computed inside the Cholesky's graph and timed in ``seconds["cholesky_T"]``.
    block, n_blocks : int
    """

    placement = "workers"

    def __init__(self, centres, gamma: float, *, jitter: float | None = None,
                 block: int = BLOCK):
        C = np.ascontiguousarray(centres, dtype=np.float64)
        if C.ndim != 2:
            raise ValueError(f"centres must be a 2-d array; got shape {C.shape}")
        self.m = int(C.shape[0])
        if not (isinstance(block, (int, np.integer)) and block >= 1):
            raise ValueError(f"block must be a positive integer; got {block!r}")
        self.block = int(block)
        self.n_blocks = max(1, math.ceil(self.m / self.block))
        self.bounds = [min(i * self.block, self.m) for i in range(self.n_blocks + 1)]
        self.seconds = {"kernel": 0.0, "cholesky_T": 0.0, "lauum": 0.0, "cholesky_A": 0.0}
        self.n_factorizations = 0
        self.ridge = self.scale = self.operator = None
        self._M = None
        self._owners: dict = {}  # "L" / "M" -> {(i, j): worker}, empty without a cluster
        self._client = distributed_client()
        centres_ref = share((C, gaussian_centres(C, gamma, np.float64)), self._client,
                            min_bytes=0)
        jitter = JITTER_PER_CENTRE * self.m if jitter is None else float(jitter)
        if not jitter >= 0:
            raise ValueError(f"jitter must be >= 0; got {jitter}")
        while True:
            t0 = time.perf_counter()
            try:
                self._L = self._factor_kernel(centres_ref, jitter)
                break
            except NonFiniteKernel:
                raise np.linalg.LinAlgError(
                    f"the kernel matrix of the {self.m} centres is not positive definite: it "
                    "contains NaN or infinity (check the centres and gamma)") from None
            except NotPositiveDefinite as err:
                nxt = max(jitter * JITTER_GROWTH, 1e-12)
                if nxt > MAX_JITTER:
                    raise np.linalg.LinAlgError(
                        f"the kernel matrix of the {self.m} centres is not positive definite "
                        f"even with jitter {jitter:.3g} on its diagonal; are there NaN values, "
                        "or is gamma 0?") from None
                logger.info("K_mm is not numerically positive definite (%s); jitter %.3g -> "
                            "%.3g", err, jitter, nxt)
                jitter = nxt
            finally:
                self.seconds["cholesky_T"] += time.perf_counter() - t0
        self.jitter = float(jitter)

    # ------------------------------------------------------------------ graphs and tiles

    def _persist(self, layer: dict, name: str, keys: dict, dependencies: list,
                 which: str) -> dict:
        """Compute the tiles ``keys`` of ``layer`` (factor ``which``, "L" or "M") and keep
        them where they were computed: returns ``(i, j) -> persisted Delayed``. On a cluster
        every task of tile ``(i, j)`` (its kernel tile, its updates, its Gram chain, the tile
        itself) runs on the tile's owner (:func:`tile_owners`, kept in ``_owners[which]``), so
        that each worker holds an equal share of the factor."""
        owners = {}
        if self._client is not None:
            from ..engine.placement import worker_records

            owners = tile_owners(self.n_blocks, sorted(worker_records(self._client)))
        self._owners[which] = owners
        # the panels of an operator W and their row picks stay where the panel is
        where = {key: owners[key[1:]] for key in layer
                 if owners and len(key) == 3 and not key[0].endswith("-P")}
        with dask.annotate(**_on_workers(where)):
            graph = HighLevelGraph.from_collections(name, layer, dependencies=dependencies)
        order = list(keys)
        with threads_limit(self._client):
            out = persist(*[Delayed(keys[ij], graph, layer=name) for ij in order])
        if self._client is not None:  # distributed persist returns at once: wait, raise here
            from distributed import futures_of, wait

            futures = futures_of(out)
            wait(futures)
            for f in futures:
                if f.status == "error":
                    f.result()
        return dict(zip(order, out, strict=True))

    def _factor_kernel(self, centres_ref, jitter: float) -> dict:
        name = f"daskauc-blocked-kernel-{fresh_token()}"
        b, nb = self.bounds, self.n_blocks
        layer: dict = {}
        tiles = {}
        for i in range(nb):
            for j in range(i + 1):
                key = (f"{name}-K", i, j)
                layer[key] = (_kernel_tile, centres_ref, b[i], b[i + 1], b[j], b[j + 1],
                              jitter)
                tiles[(i, j)] = key
        factor = _cholesky_layer(layer, name, tiles, nb)
        return self._persist(layer, name, factor, [], "L")

    # ------------------------------------------------------------------ factor A

    def factor(self, ridge: float, scale: float, operator=None, block: int | None = None,
               ) -> None:
        """Factor ``ridge I + scale L^T W L`` (``W = operator`` or I) on the workers; see
        :meth:`NystroemPreconditioner.factor` (``block`` is ignored: the tiles are the
        factor's). The previous factor of A is released first."""
        if not (ridge > 0 and scale >= 0 and np.isfinite(ridge) and np.isfinite(scale)):
            raise ValueError(f"need ridge > 0 and scale >= 0; got {ridge}, {scale}")
        self._M = None
        flush_releases(self._client)
        name = f"daskauc-blocked-gram-{fresh_token()}"
        nb = self.n_blocks
        layer: dict = {}
        panels = {}
        if operator is not None:
            for j in range(nb):
                pkey = (f"{name}-panel", j)
                layer[pkey] = (_operator_panel, operator,
                               [self._L[(k, j)].key for k in range(j, nb)], self.bounds, j)
                for k in range(nb):
                    layer[(f"{name}-P", k, j)] = (_pick, pkey, k)
                    panels[(k, j)] = (f"{name}-P", k, j)
        gram = {}
        for i in range(nb):
            for j in range(i + 1):
                acc = None
                for k in range(nb - 1, i - 1, -1):  # from the far end: the order is fixed
                    P_kj = panels[(k, j)] if operator is not None else self._L[(k, j)].key
                    key = (f"{name}-R{k}", i, j)
                    layer[key] = (_gram_step, acc, self._L[(k, i)].key, P_kj, float(scale),
                                  float(ridge) if i == j else 0.0, k == i)
                    acc = key
                gram[(i, j)] = acc
        t0 = time.perf_counter()
        factor = _cholesky_layer(layer, name, gram, nb)
        try:
            self._M = self._persist(layer, name, factor, list(self._L.values()), "M")
        except NonFiniteKernel:
            raise np.linalg.LinAlgError(
                f"Cholesky of ridge I + scale T W T^T failed (ridge={ridge}, scale={scale}): "
                "NaN or infinity") from None
        except NotPositiveDefinite as err:
            raise np.linalg.LinAlgError(
                f"Cholesky of ridge I + scale T W T^T failed ({err}, ridge={ridge}, "
                f"scale={scale})") from None
        # the Gram chain and the Cholesky are one graph: the time is booked to "lauum"
        self.seconds["lauum"] += time.perf_counter() - t0
        self.ridge, self.scale = float(ridge), float(scale)
        self.operator = operator
        self.n_factorizations += 1

    # ------------------------------------------------------------------ products and solves

    def _vector(self, v) -> np.ndarray:
        v = np.array(v, dtype=np.float64, copy=True).ravel()
        if v.shape != (self.m,):
            raise ValueError(f"expected a vector of length {self.m}; got shape {v.shape}")
        return v

    def _chain(self, v, steps: list) -> np.ndarray:
        """Apply ``steps`` to ``v`` in one graph; each step is ``(factor, op, trans)`` with
        factor "L" or "M", op "solve" (``F^{-1}`` / ``F^{-T}``) or "mul" (``F`` / ``F^T``)."""
        v = self._vector(v)
        name = f"daskauc-blocked-vector-{fresh_token()}"
        b, nb = self.bounds, self.n_blocks
        layer: dict = {}
        where: dict = {}  # each tile-vector task on the tile's owner
        x = [v[b[i] : b[i + 1]] for i in range(nb)]
        deps = []
        for s, (which, op, trans) in enumerate(steps):
            tiles = self._L if which == "L" else self._M
            if tiles is None:
                raise RuntimeError("call factor(ridge, scale) before apply")
            deps.append(tiles)
            owners = self._owners.get(which, {})
            y: list = [None] * nb
            order = range(nb - 1, -1, -1) if (op == "solve" and trans) else range(nb)
            for i in order:
                # terms of block row i of F (or of F^T): F_ij x_j (j < i), F_ji^T x_j (j > i)
                js = range(i) if not trans else range(i + 1, nb)
                source = y if op == "solve" else x
                parts = []
                for j in js:
                    key = (f"{name}-p{s}", i, j)
                    ij = (i, j) if not trans else (j, i)
                    layer[key] = (_gemv, tiles[ij].key, source[j], bool(trans))
                    parts.append(key)
                    if owners:
                        where[key] = owners[ij]
                key = (f"{name}-x{s}", i)
                fn = _trsv if op == "solve" else _trmv
                layer[key] = (fn, tiles[(i, i)].key, x[i], parts, bool(trans))
                y[i] = key
                if owners:
                    where[key] = owners[(i, i)]
            x = y
        root = (f"{name}-out", 0)
        layer[root] = (_concatenate, x)
        with dask.annotate(**_on_workers(where)):
            graph = HighLevelGraph.from_collections(
                name, layer, dependencies=[d for t in deps for d in t.values()])
        with threads_limit(self._client):
            return dask_compute(Delayed(root, graph, layer=name))[0]

    def apply(self, r) -> np.ndarray:
        """``B B^T r = L^{-T} M^{-T} M^{-1} L^{-1} r`` (needs :meth:`factor`)."""
        if self._M is None:
            raise RuntimeError("call factor(ridge, scale) before apply")
        return self._chain(r, [("L", "solve", False), ("M", "solve", False),
                               ("M", "solve", True), ("L", "solve", True)])

    def regularizer_matvec(self, v) -> np.ndarray:
        """``L L^T v = (K_mm + jitter I) v``."""
        return self._chain(v, [("L", "mul", True), ("L", "mul", False)])

    def whiten(self, v) -> np.ndarray:
        """``L^{-1} v = T^{-T} v``."""
        return self._chain(v, [("L", "solve", False)])

    def coefficients(self, w) -> np.ndarray:
        """``L^{-T} w = T^{-1} w``."""
        return self._chain(w, [("L", "solve", True)])

    def regularizer_solve(self, b) -> np.ndarray:
        """``(K_mm + jitter I)^{-1} b = L^{-T} L^{-1} b``."""
        return self._chain(b, [("L", "solve", False), ("L", "solve", True)])

    def features(self, K_block):
        raise NotImplementedError(
            "the blocked preconditioner does not make Nystroem features (an n x m product "
            "with the whole factor); use NystroemPreconditioner for the embedding route")

    def tiles(self, which: str = "L") -> np.ndarray:
        """The factor ``L`` (or ``M``) gathered on the client as a dense lower-triangular
        matrix: for tests and small m only (8 m^2 bytes)."""
        tiles = self._L if which == "L" else self._M
        if tiles is None:
            raise RuntimeError(f"no factor {which} yet")
        keys = list(tiles)
        values = dask_compute(*[tiles[k] for k in keys])
        out = np.zeros((self.m, self.m))
        b = self.bounds
        for (i, j), t in zip(keys, values, strict=True):
            out[b[i] : b[i + 1], b[j] : b[j + 1]] = np.tril(t) if i == j else t
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the tiles on the workers (both factors); the client holds none."""
        per = sum((self.bounds[i + 1] - self.bounds[i]) * (self.bounds[j + 1] - self.bounds[j])
                  for i in range(self.n_blocks) for j in range(i + 1)) * 8
        return int(per * (1 if self._M is None else 2))

    client_nbytes = 0
