"""Nystroem (Falkon-style) preconditioner for problems in the kernel basis of m centres.

The kernel-basis solvers (:mod:`daskauc.solvers.kernel_basis`) minimize objectives whose
Hessian has the form

    H = lam K_mm + K_nm^T W K_nm,

with ``K_mm`` the kernel between the centres, ``K_nm`` the kernel between the n rows and the
centres, and ``W`` a row weighting (the Laplacian of the active pairs for the pairwise squared
hinge, class weights for least squares). When the centres are spread like the rows,
``K_nm^T W K_nm ~ (n w / m) K_mm^2`` for the mean weight ``w`` (Rudi, Carratino & Rosasco
2017), so with ``T^T T = K_mm`` (Cholesky, T upper) and ``A^T A = lam I + c T T^T``,
``c = n w / m``::

    H ~ T^T (lam I + c T T^T) T = T^T A^T A T,

and ``B = T^{-1} A^{-1}`` makes ``B^T H B`` close to the identity. Conjugate gradient on H
preconditioned by ``B B^T`` then needs tens of iterations where plain CG needs hundreds to
thousands (the Gaussian ``K_mm`` has eigenvalues spread over many orders of magnitude).

Storage follows Falkon: one m x m float64 matrix in Fortran order holds T in its upper
triangle and A^T in its lower one; their diagonals are kept apart and written back before
each triangular solve. ``K_mm`` is not kept: the regularizer ``v -> K_mm v`` is ``T^T T v``,
which is ``(K_mm + jitter I) v``; the solvers use that same matrix in their objective, so the
jitter is part of the problem they solve (reported, and 1e-10 or less of the diagonal unless
``K_mm`` is numerically singular).

Costs: building ``K_mm`` 2 m^2 d flops, then three m^3 / 3 flop LAPACK calls (Cholesky,
``lauum`` for ``T T^T``, Cholesky); refactoring for a new ``c`` repeats the last two. Memory
8 m^2 bytes (m = 16,384: 2.1 GB; 32,768: 8.6 GB). Applying ``B B^T`` is four triangular
solves, 4 m^2 flops reading the matrix four times.

References
----------
A. Rudi, L. Carratino and L. Rosasco, "FALKON: an optimal large scale kernel method",
NeurIPS 2017.
G. Meanti, L. Carratino, L. Rosasco and A. Rudi, "Kernel methods through the roof: handling
billions of points efficiently", NeurIPS 2020.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import numpy as np
import scipy.linalg.blas as blas
import scipy.linalg.lapack as lapack

from .. import _config
from ._preconditioner_kernels import (
    _mirror_lower_to_upper,
    _mirror_upper_to_lower,
    _scale_lower_add_diagonal,
)

logger = logging.getLogger(__name__)

#: first jitter added to the diagonal of K_mm, per centre (Falkon adds 1e-13 m in float64);
#: multiplied by ``JITTER_GROWTH`` after each failed Cholesky, up to ``MAX_JITTER``.
JITTER_PER_CENTRE = 1e-13
JITTER_GROWTH = 100.0
MAX_JITTER = 1e-2


def _diagonal(A: np.ndarray) -> np.ndarray:
    """A writeable view of the diagonal of a square Fortran- or C-contiguous matrix."""
    m = A.shape[0]
    return np.lib.stride_tricks.as_strided(A, shape=(m,), strides=((m + 1) * A.itemsize,))


def _all_threads():
    return _config.blas_limit(os.cpu_count() or 1)


class NystroemPreconditioner:
    """The preconditioner ``B B^T`` of a kernel-basis Hessian, with ``B = T^{-1} A^{-1}``.

    Parameters
    ----------
    fill_kernel : callable
        ``fill_kernel(out)`` writes ``K_mm`` (float64, m x m, symmetric; at least its lower
        triangle and diagonal) into ``out``. Called again, with a larger jitter, when
        ``K_mm`` is not numerically positive definite.
    m : int
        Number of centres.
    jitter : float, optional
        Value added to the diagonal of K_mm before the Cholesky factorization; default
        ``JITTER_PER_CENTRE * m``, grown by ``JITTER_GROWTH`` until the factorization succeeds.

    Attributes
    ----------
    jitter : float
        The jitter used: the regularizer is ``K_mm + jitter I``.
    seconds : dict
        Time of each stage (``kernel``, ``cholesky_T``, ``lauum``, ``cholesky_A``), summed
        over refactorizations.
    n_factorizations : int
        Times ``A`` was factorized.
    ridge, scale, operator
        ``A^T A = ridge I + scale T W T^T`` for the current factor (``W = operator``, or I).
    """

    placement = "client"

    def __init__(self, fill_kernel: Callable[[np.ndarray], None], m: int,
                 jitter: float | None = None):
        self.m = int(m)
        self.seconds = {"kernel": 0.0, "cholesky_T": 0.0, "lauum": 0.0, "cholesky_A": 0.0}
        self.n_factorizations = 0
        self.ridge = self.scale = self.operator = None
        self._F = np.empty((self.m, self.m), dtype=np.float64, order="F")
        self._diag = _diagonal(self._F)
        jitter = JITTER_PER_CENTRE * self.m if jitter is None else float(jitter)
        if not jitter >= 0:
            raise ValueError(f"jitter must be >= 0; got {jitter}")
        with _all_threads():
            while True:
                t0 = time.perf_counter()
                fill_kernel(self._F)
                self._diag += jitter
                t1 = time.perf_counter()
                self.seconds["kernel"] += t1 - t0
                _, info = lapack.dpotrf(self._F, lower=1, clean=0, overwrite_a=1)
                self.seconds["cholesky_T"] += time.perf_counter() - t1
                if info == 0 and not np.isfinite(self._diag).all():
                    raise np.linalg.LinAlgError(
                        f"the kernel matrix of the {self.m} centres is not positive definite: "
                        "it contains NaN or infinity (check the centres and gamma)"
                    )
                if info == 0:
                    break
                if info < 0:  # pragma: no cover - an argument error is a bug here
                    raise RuntimeError(f"dpotrf: illegal argument {-info}")
                nxt = max(jitter * JITTER_GROWTH, 1e-12)
                if nxt > MAX_JITTER:
                    raise np.linalg.LinAlgError(
                        f"the kernel matrix of the {self.m} centres is not positive definite "
                        f"even with jitter {jitter:.3g} on its diagonal; are there NaN values, "
                        "or is gamma 0?"
                    )
                logger.info("K_mm is not numerically positive definite (pivot %d); jitter "
                            "%.3g -> %.3g", info, jitter, nxt)
                jitter = nxt
        self.jitter = float(jitter)
        # lower(F) = L with L L^T = K_mm + jitter I, so T = L^T; keep T in the upper triangle
        self._dT = self._diag.copy()
        _mirror_lower_to_upper(self._F)
        self._dA = None

    # ------------------------------------------------------------------ factor A

    def factor(self, ridge: float, scale: float, operator=None, block: int = 512) -> None:
        """Factor ``A^T A = ridge I + scale T W T^T`` in place (then Cholesky).

        Parameters
        ----------
        ridge, scale : float
            ``ridge > 0``, ``scale >= 0``.
        operator : callable, optional
            ``W``: symmetric positive semi-definite, given as ``operator(B)`` returning
            ``W @ B`` for an (m, k) Fortran-ordered block (it may overwrite ``B``). Default
            ``W = I``, for which ``T T^T`` is one ``lauum`` (m^3 / 3 flops); an operator costs
            a triangular product ``T (W T^T)`` of m^3 flops, done in column blocks of
            ``block`` so that no second m x m matrix is needed.
        """
        if not (ridge > 0 and scale >= 0 and np.isfinite(ridge) and np.isfinite(scale)):
            raise ValueError(f"need ridge > 0 and scale >= 0; got {ridge}, {scale}")
        with _all_threads():
            t0 = time.perf_counter()
            if self._dA is not None:  # the lower triangle holds the previous A^T: restore T^T
                _mirror_upper_to_lower(self._F)
            self._diag[:] = self._dT
            if operator is None:
                _, info = lapack.dlauum(self._F, lower=1, overwrite_c=1)  # lower = T T^T
                if info != 0:  # pragma: no cover
                    raise RuntimeError(f"dlauum failed (info={info})")
            else:
                self._lower_from_operator(operator, block)
            t1 = time.perf_counter()
            _scale_lower_add_diagonal(self._F, float(scale), float(ridge))
            _, info = lapack.dpotrf(self._F, lower=1, clean=0, overwrite_a=1)
            if info != 0:  # ridge > 0 makes it positive definite; only NaN gets here
                raise np.linalg.LinAlgError(
                    f"Cholesky of ridge I + scale T W T^T failed (info={info}, ridge={ridge}, "
                    f"scale={scale})"
                )
            t2 = time.perf_counter()
        self.seconds["lauum"] += t1 - t0
        self.seconds["cholesky_A"] += t2 - t1
        self._dA = self._diag.copy()
        self.ridge, self.scale = float(ridge), float(scale)
        self.operator = operator
        self.n_factorizations += 1

    def _lower_from_operator(self, operator, block: int) -> None:
        """``lower(F) <- lower(T W T^T)`` with ``lower(F) = T^T`` and ``upper(F) = T`` on entry.

        Column block J of ``T W T^T`` is ``T (W T^T[:, J])``; ``T^T[:, J]`` is read from the
        lower triangle before block J of the result overwrites it (later blocks read only
        later columns), and the triangular product reads only the upper triangle and the
        diagonal, which keeps ``dT`` until the end.
        """
        F, m = self._F, self.m
        buf = np.empty((m, min(block, m)), order="F")
        diag = np.empty(m)
        for j0 in range(0, m, block):
            j1 = min(j0 + block, m)
            B = buf[:, : j1 - j0]
            B[:] = F[:, j0:j1]
            for k in range(j1 - j0):
                B[: j0 + k, k] = 0.0  # keep T^T's column: zero above the diagonal
            B = operator(B)
            B = blas.dtrmm(1.0, F, np.asfortranarray(B), side=0, lower=0, trans_a=0,
                           diag=0, overwrite_b=1)
            for k in range(j1 - j0):
                j = j0 + k
                F[j + 1 :, j] = B[j + 1 :, k]
                diag[j] = B[j, k]
        self._diag[:] = diag

    # ------------------------------------------------------------------ products and solves

    def _vector(self, v) -> np.ndarray:
        v = np.array(v, dtype=np.float64, copy=True).ravel()
        if v.shape != (self.m,):
            raise ValueError(f"expected a vector of length {self.m}; got shape {v.shape}")
        return v

    def _upper(self, x, trans: int, solve: bool) -> np.ndarray:
        self._diag[:] = self._dT
        f = blas.dtrsv if solve else blas.dtrmv
        return f(self._F, x, lower=0, trans=trans, overwrite_x=1)

    def _lower(self, x, trans: int) -> np.ndarray:
        self._diag[:] = self._dA
        return blas.dtrsv(self._F, x, lower=1, trans=trans, overwrite_x=1)

    def apply(self, r) -> np.ndarray:
        """``B B^T r = T^{-1} A^{-1} A^{-T} T^{-T} r`` (needs :meth:`factor`)."""
        if self._dA is None:
            raise RuntimeError("call factor(ridge, scale) before apply")
        x = self._upper(self._vector(r), trans=1, solve=True)  # T^{-T} r
        x = self._lower(x, trans=0)  # A^{-T} = (lower A^T)^{-1}
        x = self._lower(x, trans=1)  # A^{-1} = (lower A^T)^{-T}
        return self._upper(x, trans=0, solve=True)  # T^{-1}

    def regularizer_matvec(self, v) -> np.ndarray:
        """``T^T T v = (K_mm + jitter I) v``."""
        x = self._upper(self._vector(v), trans=0, solve=False)
        return self._upper(x, trans=1, solve=False)

    def whiten(self, v) -> np.ndarray:
        """``T^{-T} v``, so that ``||T^{-T} v||^2 = v^T (K_mm + jitter I)^{-1} v``."""
        return self._upper(self._vector(v), trans=1, solve=True)

    def features(self, K_block) -> np.ndarray:
        """``K_block T^{-1}`` for an (n, m) kernel block: Nystroem features with
        ``Phi Phi^T = K K~^{-1} K^T``, on which a linear model ``w`` is the kernel-basis model
        ``alpha = T^{-1} w`` with ``||w||^2 = alpha^T K~ alpha`` (float64)."""
        B = np.array(K_block, dtype=np.float64, order="F", copy=True)
        if B.ndim != 2 or B.shape[1] != self.m:
            raise ValueError(f"expected a block with {self.m} columns; got shape {B.shape}")
        self._diag[:] = self._dT
        return blas.dtrsm(1.0, self._F, B, side=1, lower=0, trans_a=0, diag=0, overwrite_b=1)

    def coefficients(self, w) -> np.ndarray:
        """``T^{-1} w``: the kernel-basis coefficients of a linear model on :meth:`features`."""
        return self._upper(self._vector(w), trans=0, solve=True)

    def regularizer_solve(self, b) -> np.ndarray:
        """``(K_mm + jitter I)^{-1} b = T^{-1} T^{-T} b``."""
        x = self._upper(self._vector(b), trans=1, solve=True)
        return self._upper(x, trans=0, solve=True)

    @property
    def nbytes(self) -> int:
        return int(self._F.nbytes)
