"""Saving and loading fitted estimators as arrays plus JSON (a Zarr group), never pickle.

A model store holds, for the estimator and recursively for every fitted sub-estimator
(``embedding_``, ``solver_``, ``scaler_`` ...): its class name, its constructor parameters,
numeric fitted arrays as Zarr arrays and everything else fitted (scalars, strings, the
history) as JSON attributes. Only daskauc's own classes can be loaded, so loading a model
never imports or runs arbitrary code. Solver state used by ``partial_fit`` is not saved.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import zarr

from .data.store import open_store, writing_store


def _registry() -> dict[str, type]:
    import daskauc

    out = {}
    for name in getattr(daskauc, "__all__", []):
        obj = getattr(daskauc, name, None)
        if isinstance(obj, type):
            out[obj.__name__] = obj
    return out


def _jsonable(value: Any):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot save a value of type {type(value).__name__} as JSON")


def _unjson(value):
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return np.asarray(value["__ndarray__"], dtype=value["dtype"])
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    return value


def _write_estimator(group: zarr.Group, est) -> None:
    from sklearn.base import BaseEstimator

    params = {}
    for k, v in est.get_params(deep=False).items():
        if isinstance(v, BaseEstimator):
            raise TypeError(f"parameter {k} is an estimator; daskauc models do not nest params")
        try:
            params[k] = _jsonable(v)
        except TypeError:
            if k == "random_state":
                params[k] = None  # a Generator cannot be saved; the fitted model does not need it
            else:
                raise
    attrs: dict[str, Any] = {"class": type(est).__name__, "params": params}
    fitted: dict[str, Any] = {}
    children = []
    for name, value in vars(est).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        if isinstance(value, BaseEstimator):
            children.append(name)
            _write_estimator(group.create_group(name), value)
        elif isinstance(value, np.ndarray) and value.dtype.kind in "fiub" and value.ndim >= 1:
            arr = group.create_array(name, shape=value.shape, dtype=value.dtype,
                                     chunks=value.shape or None, compressors=None)
            arr[...] = value
        else:
            fitted[name] = _jsonable(value)
    attrs["fitted"] = fitted
    attrs["children"] = children
    group.attrs.update(attrs)


def _read_estimator(group: zarr.Group):
    attrs = dict(group.attrs)
    registry = _registry()
    cls_name = attrs.get("class")
    if cls_name not in registry:
        raise ValueError(f"unknown model class {cls_name!r} in store (not a daskauc estimator)")
    est = registry[cls_name](**_unjson(attrs["params"]))
    for name, value in attrs.get("fitted", {}).items():
        setattr(est, name, _unjson(value))
    for name in attrs.get("children", []):
        setattr(est, name, _read_estimator(group[name]))
    for name, arr in group.arrays():
        setattr(est, name, arr[...])
    return est


def save_model(estimator, path, *, overwrite: bool = False) -> str:
    """Save a fitted daskauc estimator to a Zarr group at ``path`` (arrays + JSON)."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator)
    with writing_store(path, overwrite=overwrite, kind="model") as group:
        _write_estimator(group, estimator)
    return os.fspath(path)


def load_model(path):
    """Load an estimator saved by :func:`save_model`."""
    group = open_store(path, kind="model")
    return _read_estimator(group)


def describe_model(path) -> str:
    """A JSON summary of a saved model (class and parameters)."""
    group = open_store(path, kind="model")
    attrs = dict(group.attrs)
    return json.dumps({"class": attrs.get("class"), "params": attrs.get("params")}, indent=2)
