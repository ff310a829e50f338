"""Saving and loading fitted estimators as arrays plus JSON (a Zarr group), never pickle.

A model store holds, for the estimator and recursively for every fitted sub-estimator
(``embedding_``, ``solver_``, ``scaler_`` ...): its class name, its constructor parameters,
numeric fitted arrays as Zarr arrays and everything else fitted (scalars, strings, the
history) as JSON attributes. Only daskauc's own classes can be loaded, so loading a model
never imports or runs arbitrary code. Loading validates the schema before building anything
(:class:`ModelFileError` otherwise).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np
import zarr

from ._registry import MODEL_CLASSES
from .store.protocol import open_store, verify_chunk_checksums
from .store.write import create_array, writing_store


def json_value(value: Any):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        data = value.tolist()  # strings: the width of the longest, as the reader checks
        dtype = np.asarray(data, dtype=np.str_).dtype if value.dtype.kind == "U" else value.dtype
        return {"__ndarray__": data, "dtype": str(dtype)}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: json_value(v) for k, v in value.items()}
        # keys that are not strings (a class_weight by numeric labels) as pairs: JSON would
        # make them strings, and the loaded model would know other labels
        return {"__items__": [[json_value(k), json_value(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot save a value of type {type(value).__name__} as JSON")


#: itemsizes of the numeric dtypes :func:`json_value` writes (numpy's own scalar types)
_JSON_ITEMSIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}


def _unjson(value, at: str):
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return _array_from_json(value, at)
        if "__items__" in value:
            items = value["__items__"]
            if not (isinstance(items, list) and all(isinstance(kv, list) and len(kv) == 2
                                                    and isinstance(kv[0], (str, int, float))
                                                    for kv in items)):
                raise ModelFileError(f"{at}: malformed mapping {str(items)[:60]}")
            return {k: _unjson(v, at) for k, v in items}
        return {k: _unjson(v, at) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v, at) for v in value]
    return value


def _array_from_json(value: dict, at: str) -> np.ndarray:
    """An array :func:`json_value` wrote, of a dtype it writes (numeric of a normal itemsize,
    strings as wide as the longest, objects), built with memory in proportion to the file's
    content: a declared itemsize is never allocated (``"U100000000"`` for two one-letter
    strings was 800 MB); strings are sized by their content, and a declared width beyond
    it is refused."""
    name = value.get("dtype")
    try:
        dtype = np.dtype(name) if isinstance(name, str) else None
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or not (dtype.kind in "OU" or dtype.itemsize
                             in _JSON_ITEMSIZES.get(dtype.kind, ())):
        raise ModelFileError(f"{at}: an array of dtype {name!r}, which daskauc does not write")
    try:
        out = np.asarray(value["__ndarray__"], dtype=np.str_ if dtype.kind == "U" else dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{at}: {str(value['__ndarray__'])[:60]} is not an array of "
                             f"{name} ({exc})") from None
    if dtype.kind == "U" and dtype.itemsize > max(out.dtype.itemsize, 4):
        raise ModelFileError(f"{at}: an array of dtype {name!r} for strings of at most "
                             f"{out.dtype.itemsize // 4} characters, which daskauc does not "
                             "write")
    return out


def _sklearn_classes() -> dict[str, type]:
    """The scikit-learn classes a model file may hold besides daskauc's own, by the name a
    file gives them (``sklearn.preprocessing.StandardScaler``: daskauc has a StandardScaler
    of its own): ``Pipeline`` and the preprocessing steps whose fitted state is all public
    arrays and numbers (a step that keeps private state, or a function, could not be rebuilt
    without pickle)."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import (
        MaxAbsScaler,
        MinMaxScaler,
        Normalizer,
        QuantileTransformer,
        RobustScaler,
        StandardScaler,
    )

    return {f"sklearn.{c.__module__.split('.')[1]}.{c.__name__}": c
            for c in (Pipeline, StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler,
                      Normalizer, QuantileTransformer)}


_PIPELINE = "sklearn.pipeline.Pipeline"

#: parameters a model file never sets, by class: their value acts on the machine that loads
#: and refits the model, beyond the model itself. save_model refuses a model that sets one,
#: and load_model a file that does (:func:`_refused_params`, the one rule for both)
_REFUSED_PARAMS = {
    _PIPELINE: {"memory": "a cache of fitted steps on disk, which a refit writes as joblib "
                          "pickles and unpickles on a cache hit"},
}


def _refused_params(class_name: str, params: dict) -> str | None:
    """``memory='/tmp/c' (a cache of fitted steps ...)`` when ``params`` of a ``class_name``
    set a parameter that no model file may set (:data:`_REFUSED_PARAMS`), else None."""
    for name, why in _REFUSED_PARAMS.get(class_name, {}).items():
        if params.get(name) is not None:
            return f"{name}={params[name]!r} ({why})"
    return None


def _class_name(est) -> str:
    """The name a model file gives the class of ``est`` (a TypeError naming the classes it
    may hold if none)."""
    cls = type(est)
    if MODEL_CLASSES.get(cls.__name__) is cls:
        return cls.__name__
    for name, known in _sklearn_classes().items():
        if known is cls:
            return name
    steps = sorted(name.rpartition(".")[2] for name in _sklearn_classes() if name != _PIPELINE)
    raise TypeError(f"cannot save a {cls.__name__}: save_model writes daskauc's estimators, "
                    f"Pipelines of them and scikit-learn's {', '.join(steps)} (arrays and "
                    "JSON, never pickle)")


def _write_pipeline(group: zarr.Group, pipe) -> None:
    """A Pipeline: its parameters but ``steps``, and each step in a group ``step<i>`` (a
    step that is ``"passthrough"`` or None has no group; :func:`_check_savable_tree` has
    checked every step)."""
    params = {k: json_value(v) for k, v in pipe.get_params(deep=False).items() if k != "steps"}
    steps = []
    for i, (name, step) in enumerate(pipe.steps):
        if step is None or (isinstance(step, str) and step == "passthrough"):
            steps.append([name, None])
        else:
            _write_estimator(group.create_group(f"step{i}"), step)
            steps.append([name, f"step{i}"])
    group.update_attributes({"class": _PIPELINE, "params": params, "steps": steps,
                             "fitted": {}, "children": []})


def _read_pipeline(group: zarr.Group, attrs: dict, path: str, where: str, at: str):
    """A Pipeline written by :func:`_write_pipeline`, its schema checked first."""
    from sklearn.pipeline import Pipeline

    steps, subgroups = attrs.get("steps"), dict(group.groups())
    if not (isinstance(steps, list) and steps and all(
            isinstance(s, list) and len(s) == 2 and isinstance(s[0], str)
            and (s[1] is None or s[1] in subgroups) for s in steps)):
        raise ModelFileError(f"{at}: not a valid Pipeline (its steps are malformed or "
                             "missing)")
    extra = sorted(set(subgroups) - {s[1] for s in steps})
    unknown = sorted(set(attrs["params"]) - set(Pipeline([("x", None)]).get_params(deep=False)))
    if extra or unknown or attrs["fitted"] or attrs["children"] or dict(group.arrays()):
        raise ModelFileError(f"{at}: not a valid Pipeline (undeclared groups {extra}, unknown "
                             f"parameters {unknown}, or fitted attributes of its own)")
    built = [(name, "passthrough" if sub is None else
              _read_estimator(subgroups[sub], path, f"{where}/{sub}".lstrip("/")))
             for name, sub in steps]
    params = _unjson(attrs["params"], f"{at} params")
    refused = _refused_params(_PIPELINE, params)
    if refused:
        raise ModelFileError(f"{at}: a Pipeline with {refused} is refused; a model file never "
                             "sets it (save_model refuses it too)")
    return Pipeline(built, **params)


def _write_estimator(group: zarr.Group, est) -> None:
    from sklearn.base import BaseEstimator
    from sklearn.pipeline import Pipeline

    if isinstance(est, Pipeline):
        _write_pipeline(group, est)
        return
    params = {}
    for k, v in est.get_params(deep=False).items():
        if isinstance(v, BaseEstimator):
            raise TypeError(f"parameter {k} is an estimator; daskauc models do not nest params")
        try:
            params[k] = json_value(v)
        except TypeError:
            if k == "random_state":
                params[k] = None  # a Generator cannot be saved; the fitted model does not need it
            else:
                raise
    attrs: dict[str, Any] = {"class": _class_name(est), "params": params}
    fitted: dict[str, Any] = {}
    children = []
    for name, value in vars(est).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        if isinstance(value, BaseEstimator):
            children.append(name)
            _write_estimator(group.create_group(name), value)
        elif isinstance(value, np.ndarray) and value.dtype.kind in "fiub" and value.ndim >= 1:
            arr = create_array(group, name, shape=value.shape, dtype=value.dtype,
                               chunks=value.shape or None, compressors=None)
            arr[...] = value
        else:
            fitted[name] = json_value(value)
    attrs["fitted"] = fitted
    attrs["children"] = children
    state = getattr(est, "_solver_state", None)
    if state is not None:
        sub = group.create_group(STATE_GROUP)
        sub.attrs["tree"] = _encode_state(state, sub, [0])
    group.update_attributes(attrs)


class ModelFileError(ValueError):
    """A model store that is not a valid daskauc model (tampered, truncated or foreign)."""


def _read_estimator(group: zarr.Group, path: str, where: str = ""):
    """Build an estimator from a model group, validating the whole schema first: the class is
    one of daskauc's estimators, the parameters are the class's own, fitted names follow the
    ``name_`` convention and shadow nothing of the class, every declared child exists, and
    every array's declared shape matches the bytes stored for it (a tampered shape must not
    allocate gigabytes)."""
    from sklearn.base import BaseEstimator

    at = f"{path}{'/' + where if where else ''}"
    attrs = dict(group.attrs)
    for key, kind in (("class", str), ("params", dict), ("fitted", dict), ("children", list)):
        if not isinstance(attrs.get(key), kind):
            raise ModelFileError(f"{at}: not a valid daskauc model (attribute {key!r} is "
                                 f"{'missing' if key not in attrs else 'malformed'})")
    cls = MODEL_CLASSES.get(attrs["class"]) or _sklearn_classes().get(attrs["class"])
    if cls is None or not issubclass(cls, BaseEstimator):
        raise ModelFileError(f"{at}: unknown model class {attrs['class']!r} "
                             "(not a daskauc estimator)")
    if attrs["class"] == _PIPELINE:
        return _read_pipeline(group, attrs, path, where, at)
    unknown = sorted(set(attrs["params"]) - set(cls().get_params(deep=False)))
    if unknown:
        raise ModelFileError(f"{at}: {cls.__name__} has no parameter(s) {unknown}")
    arrays = dict(group.arrays())
    names = [*attrs["fitted"], *attrs["children"], *arrays]
    for name in names:
        if not (isinstance(name, str) and name.endswith("_") and not name.startswith("_")
                and name.isidentifier()) or hasattr(cls, name):
            raise ModelFileError(f"{at}: {name!r} is not a fitted attribute name of "
                                 f"{cls.__name__} (it would shadow the class's own)")
    if len(set(names)) != len(names):
        raise ModelFileError(f"{at}: a fitted attribute is declared twice")
    stored = _stored_bytes(group)
    for name, arr in arrays.items():
        if arr.dtype.kind not in "fiub":
            raise ModelFileError(f"{at}: array {name!r} has dtype {arr.dtype}, not numeric")
        _check_stored(arr, stored.get(name, 0), f"{at}: array {name!r}")
    subgroups = dict(group.groups())
    for name in attrs["children"]:
        if name not in subgroups:
            raise ModelFileError(f"{at}: declared sub-estimator {name!r} is missing")
    extra = sorted(set(subgroups) - set(attrs["children"]) - {STATE_GROUP})
    if extra:
        raise ModelFileError(f"{at}: undeclared group(s) {extra}")
    state = None
    if STATE_GROUP in subgroups:
        sg = subgroups[STATE_GROUP]
        state = _decode_state(sg.attrs.get("tree"), sg, f"{at}/{STATE_GROUP}")
    params = _unjson(attrs["params"], f"{at} params")
    fitted = {name: _unjson(value, f"{at} {name}") for name, value in attrs["fitted"].items()}
    est = cls(**params)
    for name, value in fitted.items():
        setattr(est, name, value)
    for name in attrs["children"]:
        setattr(est, name, _read_estimator(subgroups[name], path, f"{where}/{name}".lstrip("/")))
    for name, arr in arrays.items():
        setattr(est, name, arr[...])
    if state is not None:
        est._solver_state = state
    return est


def _check_stored(arr: zarr.Array, stored: int, what: str) -> None:
    """The declared layout (shape, chunks, dtype) must be exactly the bytes stored for the
    array, so that reading it allocates no more than the store holds: Zarr stores every
    chunk whole (the last one padded) and decodes a chunk at its declared shape."""
    n_chunks = math.prod(math.ceil(s / c) if c else 0
                         for s, c in zip(arr.shape, arr.chunks, strict=True))
    expected = n_chunks * (math.prod(arr.chunks) * arr.dtype.itemsize + _crc_bytes(arr))
    if stored != expected:
        raise ModelFileError(
            f"{what} declares shape {arr.shape} in chunks of {arr.chunks}, {arr.dtype} "
            f"({expected} bytes with checksums) but {stored} bytes are stored")


def _crc_bytes(arr: zarr.Array) -> int:
    """Bytes the crc32c codec appends to each chunk (models are written uncompressed)."""
    return 4 * any(type(c).__name__ == "Crc32cCodec" for c in arr.metadata.codecs)


def _stored_bytes(group: zarr.Group) -> dict[str, int]:
    """Bytes stored under each array of ``group`` (its chunk files), from the store itself."""
    from zarr.core.sync import sync

    store, base = group.store_path.store, group.store_path.path

    async def sizes():
        out: dict[str, int] = {}
        prefix = f"{base}/" if base else ""
        async for key in store.list_prefix(prefix):
            rel = key[len(prefix):]
            name, _, rest = rel.partition("/")
            if rest.startswith("c/"):
                out[name] = out.get(name, 0) + int(await store.getsize(key))
        return out

    return sync(sizes())


STATE_GROUP = "solver_state"


def _state_classes() -> dict[str, type]:
    """The solver-state dataclasses a model file may rebuild (and nothing else): those the
    solvers register (``@solver(states=...)``)."""
    from . import solvers  # noqa: F401 - every solver registered
    from ._registry import SOLVERS

    return {c.__name__: c for entry in SOLVERS.values() for c in entry.states}


def _encode_state(value, group: zarr.Group, counter: list):
    """A JSON tree of a solver state; arrays go to ``group`` as ``a0``, ``a1``, ... (exact
    bytes), floats stay exact (JSON writes the shortest repr that reads back the same)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value).__name__ not in _state_classes():
            raise TypeError(f"cannot save solver state of type {type(value).__name__}")
        return {"__state__": type(value).__name__,
                "fields": {f.name: _encode_state(getattr(value, f.name), group, counter)
                           for f in dataclasses.fields(value)}}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "fiub":
            raise TypeError(f"cannot save a solver-state array of dtype {value.dtype}")
        key = f"a{counter[0]}"
        counter[0] += 1
        flat = np.ascontiguousarray(value).reshape(-1)
        arr = create_array(group, key, shape=flat.shape, dtype=flat.dtype,
                           chunks=(max(flat.size, 1),), compressors=None)
        if flat.size:
            arr[...] = flat
        return {"__array__": key, "shape": list(value.shape)}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode_state(v, group, counter) for v in value]}
    if isinstance(value, list):
        return [_encode_state(v, group, counter) for v in value]
    if isinstance(value, dict):
        return {"__dict__": {str(k): _encode_state(v, group, counter) for k, v in value.items()}}
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        return {"__float__": repr(float(value))}
    return json_value(value)


def _decode_state(tree, group: zarr.Group, at: str):
    import dataclasses

    if isinstance(tree, list):
        return [_decode_state(v, group, at) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "__state__" in tree:
        cls = _state_classes().get(tree["__state__"])
        fields = tree.get("fields")
        if cls is None or not isinstance(fields, dict):
            raise ModelFileError(f"{at}: unknown solver state {tree['__state__']!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        # fields added since a file was written have defaults (the clock and velocity of
        # parallel chains): a file without them loads with those
        required = {f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}
        if not required <= set(fields) <= names:
            raise ModelFileError(f"{at}: {cls.__name__} fields {sorted(fields)} are not "
                                 f"{sorted(names)}")
        return cls(**{k: _decode_state(v, group, at) for k, v in fields.items()})
    if "__array__" in tree:
        key, shape = tree["__array__"], tree.get("shape")
        arrays = dict(group.arrays())
        if not isinstance(key, str) or key not in arrays:
            raise ModelFileError(f"{at}: solver-state array {key!r} is missing")
        if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
            raise ModelFileError(f"{at}: solver-state array {key!r} has a malformed shape "
                                 f"{shape!r}")
        arr, size = arrays[key], math.prod(shape)
        if arr.ndim != 1 or arr.shape[0] != size or arr.dtype.kind not in "fiub":
            raise ModelFileError(f"{at}: solver-state array {key!r} does not hold shape "
                                 f"{tuple(shape)}")
        _check_stored(arr, _stored_bytes(group).get(key, 0), f"{at}: solver-state array {key!r}")
        return arr[...].reshape(shape)
    if "__tuple__" in tree:
        return tuple(_decode_state(v, group, at) for v in tree["__tuple__"])
    if "__dict__" in tree:
        return {k: _decode_state(v, group, at) for k, v in tree["__dict__"].items()}
    if "__float__" in tree:
        return float(tree["__float__"])
    raise ModelFileError(f"{at}: malformed solver state")


def save_model(estimator, path, *, overwrite: bool = False) -> str:
    """Save a fitted daskauc estimator to a Zarr group at ``path`` (arrays + JSON, never
    pickle).

    ``estimator`` is one of daskauc's estimators, or a scikit-learn ``Pipeline`` of them and
    of scikit-learn's ``StandardScaler``, ``MinMaxScaler``, ``MaxAbsScaler``,
    ``RobustScaler``, ``Normalizer`` and ``QuantileTransformer`` (steps may be
    ``"passthrough"``; Pipelines may nest). Anything else is refused by name before any
    file is written. :func:`load_model` gives back an estimator of the same class whose
    predictions are the same, bit for bit."""
    from sklearn.utils.validation import check_is_fitted

    _class_name(estimator)
    check_is_fitted(estimator)
    _check_savable_tree(estimator)
    with writing_store(path, overwrite=overwrite, kind="model") as group:
        _write_estimator(group, estimator)
    return os.fspath(path)


def _check_savable_tree(est) -> None:
    """Refuse an unsavable step anywhere in a Pipeline before anything is written."""
    from sklearn.pipeline import Pipeline

    if isinstance(est, Pipeline):
        refused = _refused_params(_PIPELINE, est.get_params(deep=False))
        if refused:
            raise TypeError(f"cannot save a Pipeline with {refused}; set it to None before "
                            "saving")
        for _, step in est.steps:
            if step is not None and not (isinstance(step, str) and step == "passthrough"):
                _class_name(step)
                _check_savable_tree(step)


def load_model(path):
    """Load an estimator saved by :func:`save_model` (its schema validated first; a damaged
    or foreign store raises :class:`ModelFileError`)."""
    group = open_store(path, kind="model")
    verify_chunk_checksums(group, path)  # each chunk file at its own position (a few reads)
    try:
        return _read_estimator(group, os.fspath(path))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ModelFileError(f"{os.fspath(path)}: not a valid daskauc model ({exc!r})") from exc
    except RecursionError:
        raise ModelFileError(f"{os.fspath(path)}: not a valid daskauc model (its JSON is "
                             "nested too deeply)") from None


def describe_model(path) -> str:
    """A JSON summary of a saved model (class and parameters)."""
    group = open_store(path, kind="model")
    attrs = dict(group.attrs)
    out = {"class": attrs.get("class"), "params": attrs.get("params")}
    if attrs.get("class") == _PIPELINE and isinstance(attrs.get("steps"), list):
        out["steps"] = [[name, None if sub is None else dict(group[sub].attrs).get("class")]
                        for name, sub in attrs["steps"]]
    return json.dumps(out, indent=2)
