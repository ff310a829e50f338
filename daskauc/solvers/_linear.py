"""Scores of a linear model, ``X @ coef``, for numpy and dask inputs, and their AUC."""

from __future__ import annotations

import dask.array as da
import numpy as np

from .._sparse import is_sparse


def scores_block(block: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """``block @ coef`` in the block's float dtype (float32 stays float32); a sparse block
    multiplies its non-zeros only."""
    if is_sparse(block):
        return np.asarray(block @ coef.astype(block.dtype)).ravel()
    block = np.asarray(block)
    dtype = block.dtype if block.dtype in (np.float32, np.float64) else np.float64
    return block.astype(dtype, copy=False) @ coef.astype(dtype)


def linear_scores(X, coef: np.ndarray):
    """``X @ coef``: numpy for numpy, a lazy dask array (layer ``daskauc-scores``) for dask;
    on a distributed cluster a large ``coef`` (a model of hashed features: 32 MiB at 2**22)
    is scattered once, not sent inside the graph (:func:`daskauc._compute.share`)."""
    if isinstance(X, da.Array):
        from .._compute import share

        return X.map_blocks(scores_block, share(coef), drop_axis=1, dtype=X.dtype,
                            token="daskauc-scores", meta=np.empty((0,), X.dtype))
    return scores_block(X, coef)



def validation_score(validation, average: bool):
    """``score`` of :func:`daskauc.engine.stream.run_epochs` for a state with an iterate ``w``
    and its average ``wbar``: the exact AUC of ``X_val @ wbar`` (``average``) or ``X_val @ w``
    against ``y_val`` (both classes must occur); None without ``validation``."""
    if validation is None:
        return None
    X, y = validation

    def score(state) -> float:
        from ..metrics import roc_auc

        return float(roc_auc(y, linear_scores(X, state.wbar if average else state.w)))

    return score
