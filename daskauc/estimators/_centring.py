"""Row statistics of stochastic fits: centring the rows when their mean dominates, and the
mean squared row norm that step sizes scale with.

Running a stochastic solver on rows centred at their mean, when that mean dominates:

Every objective of daskauc's linear models is unchanged by a translation ``c`` of the rows:
the pairwise and least-squares AUC losses see only differences ``x_i - x_j``, and the
univariate losses have an unpenalized offset that absorbs it (``w.(x - c) + b = w.x +
(b - w.c)``). Plain SGD is not: on rows far from the origin its first steps move ``w`` along
the rows' mean by about ``eta ||x||^2``, and with the default steps of Uni-Exp (``eta0 =
0.01``) or SPAM (``eta = 1``) on rows around 100 the iterates overflow within a few rows.

So an estimator that sets ``_centre_rows`` runs its solver on ``x - center_`` when the rows'
mean dominates their spread (``||mean||^2 > mean ||x - mean||^2``, measured on every row of
in-memory input, or on the calibration's bounded sample of whole chunks otherwise, in one
compute); ``center_`` is zero otherwise and the rows are used as they are (so well-scaled
data give the same result as before, bit for bit). ``coef_`` applies to the rows as given.
Lazy rows are centred as the solver reads them; rows held in memory (numpy input, persisted
dask arrays) become a centred copy held in memory, since a chain reads those directly.
Sparse rows are never centred (``center_`` stays zero): ``x - mean`` would be dense.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from .. import _config
from .._compute import compute, persist
from .._sparse import is_sparse_dask, sparse_squares
from .._validation import check_finite, check_finite_block, without_finite_check
from ..composite.calibration import calibration_blocks
from ..engine.chain_plan import is_materialized


def dominant_mean(Xd: da.Array, *, all_rows: bool) -> np.ndarray:
    """The rows' mean when it dominates their spread (``||mean||^2 > mean ||x - mean||^2``),
    else zeros: from every row, or from a bounded sample of whole chunks (one compute)."""
    if is_sparse_dask(Xd):  # never centred: x - mean would be dense
        return np.zeros(Xd.shape[1])
    rows = _sample(Xd, all_rows)
    total, squares = compute(rows.sum(axis=0, dtype=np.float64),
                                  da.einsum("ij,ij->", rows, rows, dtype=np.float64))
    mean = np.asarray(total, dtype=np.float64) / rows.shape[0]
    spread = float(squares) / rows.shape[0] - float(mean @ mean)
    return mean if float(mean @ mean) > spread else np.zeros_like(mean)


def mean_sq_norm(Xd: da.Array, *, all_rows: bool) -> float:
    """Mean squared row norm ``(1/n) sum ||x||^2``, from every row or from the bounded sample
    of whole chunks the calibration uses (one compute): step sizes scale with it."""
    rows = _sample(Xd, all_rows)
    if is_sparse_dask(rows):
        squares = rows.map_blocks(sparse_squares, drop_axis=1, chunks=((1,) * rows.numblocks[0],),
                                  dtype=np.float64, meta=np.empty((0,)), token="daskauc-squares")
        return float(compute(squares.sum())[0]) / rows.shape[0]
    return float(compute(da.einsum("ij,ij->", rows, rows, dtype=np.float64))[0]) / rows.shape[0]


def auto_step(est, name: str, constant: float, state, scale) -> float:
    """The step parameter ``name`` of ``est`` as a number: a given one, or for
    "auto" ``constant / scale()`` on a fresh fit, recorded in ``<name>_`` and reused when the
    fit continues (partial_fit, further epochs, a resumed checkpoint).

    ``scale()`` is what the solver's gradient grows with (the mean squared row norm, say),
    so that "auto" steps do not depend on how the features were scaled. The estimator's
    table checked ``name`` ("auto" or a float > 0)."""
    value = getattr(est, name)
    if isinstance(value, str):
        if state is None or not hasattr(est, f"{name}_"):
            setattr(est, f"{name}_", constant / max(float(scale()), np.finfo(float).tiny))
        return float(getattr(est, f"{name}_"))
    setattr(est, f"{name}_", float(value))
    return float(value)


def _sample(Xd: da.Array, all_rows: bool) -> da.Array:
    if all_rows or Xd.shape[0] <= _config.CALIBRATION_ROWS:
        return Xd
    blocks, cut = calibration_blocks(Xd.chunks[0], _config.CALIBRATION_ROWS)
    rows = Xd.blocks[blocks]
    return rows[:cut] if cut is not None else rows


def centred_rows(Xd: da.Array, center: np.ndarray) -> da.Array:
    """``Xd - center`` for the solver (``Xd`` itself when ``center`` is zero)."""
    if not center.any():
        return Xd
    c = center.astype(Xd.dtype)
    raw = without_finite_check(Xd)
    if not is_materialized(raw):  # lazy rows: centred (and checked) as they are read
        return check_finite(raw.map_blocks(_subtract, c, False, dtype=Xd.dtype, meta=raw._meta,
                                           token="daskauc-centre"))
    # a chain reads rows held in memory directly, never through a graph: hold the centred
    # rows too, checked for NaN as they are made
    return persist(raw.map_blocks(_subtract, c, True, dtype=Xd.dtype, meta=raw._meta,
                                  token="daskauc-centre"))[0]


def _subtract(block: np.ndarray, c: np.ndarray, check: bool, block_info=None) -> np.ndarray:
    if check:
        check_finite_block(block, "X", block_info)
    return block - c
