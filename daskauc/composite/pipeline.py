"""The presets' pipeline as functions: rows scaled, mapped by a feature map (the k-means
Nystroem map or random Fourier features), and a linear AUC model fitted and calibrated on
the embedding. The presets (:mod:`daskauc.estimators.presets`) are these three steps with
their parameters; the pieces are estimators passed in (a scaler, a map, a linear model),
used through their public methods only.
"""

from __future__ import annotations

import dask
import dask.array as da

from .. import _config
from .._compute import persist
from ..solvers._linear import linear_scores
from .calibration import calibrate


def scaled(X, scaler):
    """``X`` through the fitted ``scaler`` (None: as it is)."""
    return scaler.transform(X) if scaler is not None else X


def embed_training(Xd: da.Array, yd: da.Array, *, feature_map, scaler, store=None,
                   overwrite: bool = False, persist_rows: bool = False) -> da.Array:
    """The embedding of the training rows ``Xd`` by the fitted ``feature_map``: written to an
    embedding store (``store``, with its labels ``yd``, the scaler recorded) and read back
    from it, or lazy; kept in memory with ``persist_rows``."""
    if store is not None:
        ds = feature_map.write_embedding(Xd, store, y=yd, scaler=scaler, overwrite=overwrite)
        return persist(ds.X)[0] if persist_rows else ds.X
    Z = feature_map.transform(scaled(Xd, scaler))
    if persist_rows:
        with dask.config.set(**{"array.slicing.split_large_chunks": False}):
            Z = persist(Z)[0]
    return Z


def fit_on_embedding(model, Z: da.Array, yd: da.Array, *, all_rows: bool, **fit_kwargs):
    """Fit the linear ``model`` on the embedding ``Z`` (labels ``yd`` in {-1, +1}) and, for
    in-memory input (``all_rows``), calibrate it on every row: the model saw a dask
    embedding and calibrated itself on a sample of its chunks."""
    model.fit(Z, yd, **fit_kwargs)
    if all_rows and Z.shape[0] > _config.CALIBRATION_ROWS:
        coef = model.coef_
        calibrate(model, Z, yd, lambda rows: linear_scores(rows, coef), all_rows=True)
    return model
