"""Input checking: any input kind -> a row-chunked dask array; labels -> {-1, +1}.

Every public entry point goes through here so errors read the same everywhere and name the
problem (NaN, one class, shape mismatch, unknown chunk sizes, wrong dtype, missing store).
Finiteness of dask input is checked lazily, inside the pass that reads the data, never by an
extra pass of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

import dask.array as da
import numpy as np

from . import _config

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def is_store_path(obj: Any) -> bool:
    """True for a filesystem path or URL naming a Zarr store."""
    return isinstance(obj, (str, os.PathLike))


def _float_dtype(dtype: np.dtype, name: str, requested=None) -> np.dtype:
    if requested is not None:
        requested = np.dtype(requested)
        if requested not in FLOAT_DTYPES:
            raise TypeError(f"dtype must be float32 or float64, got {requested}")
        return requested
    if dtype in FLOAT_DTYPES:
        return dtype
    if dtype.kind in "iub":
        return np.dtype(np.float64)
    if dtype.kind == "f":  # float16 / longdouble
        return np.dtype(np.float64)
    raise TypeError(
        f"{name} must hold real numbers (float32, float64, integers or booleans); "
        f"got dtype {dtype}"
    )


def _check_finite_block(block: np.ndarray, name: str, block_info=None) -> np.ndarray:
    if not np.isfinite(block).all():
        row = int(np.argwhere(~np.isfinite(block))[0][0])
        if block_info is not None:
            row += block_info[0]["array-location"][0][0]
        raise ValueError(
            f"{name} contains NaN or infinity (first in row {row}); "
            "impute or drop those values before fitting"
        )
    return block


def check_finite(X: da.Array, name: str = "X") -> da.Array:
    """Lazily check finiteness of every block, inside whatever pass reads them."""
    return X.map_blocks(_check_finite_block, name, dtype=X.dtype, token="daskauc-check-finite",
                        meta=X._meta)


def without_finite_check(X: da.Array) -> da.Array:
    """The array under a :func:`check_finite` layer (``X`` itself when there is none).

    Multi-pass solvers read the checked array in their first pass and this one afterwards,
    so the check is folded into a pass that reads the data anyway and runs only once.
    """
    if not (isinstance(X, da.Array) and X.name.startswith("daskauc-check-finite")):
        return X
    (dep,) = X.dask.dependencies[X.name]
    return da.Array(X.dask, dep, X.chunks, meta=X._meta)


def as_row_chunked(
    X: Any,
    *,
    name: str = "X",
    dtype=None,
    chunk_rows: int | None = None,
    check_finite_values: bool = True,
) -> da.Array:
    """Return ``X`` as a 2-D dask array chunked along rows only, float32 or float64.

    Accepts a numpy array, a dask array, a ``zarr.Array``, or the path of a daskauc dataset
    or embedding store (its ``X``). Integer and boolean data become float64. Dask input must
    have known chunk sizes. Non-finite values raise when the data is read.
    """
    reject_sparse(X, name)
    if is_store_path(X):
        from .data.store import open_dataset

        X = open_dataset(X).X
    else:
        try:
            import zarr

            if isinstance(X, zarr.Array):
                X = da.from_zarr(X)
        except ImportError:  # pragma: no cover - zarr is a hard dependency
            pass

    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}")
        if any(np.isnan(c) for cs in X.chunks for c in cs):
            raise ValueError(
                f"{name} has unknown chunk sizes (typically after boolean indexing or from a "
                "dask dataframe); call X.compute_chunk_sizes() or use to_dask_array(lengths=True)"
            )
        check_not_empty(X.shape, name)
        target = _float_dtype(X.dtype, name, dtype)
        if X.dtype != target:
            X = X.astype(target)
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        if chunk_rows is not None:
            X = X.rechunk({0: int(chunk_rows)})
        if check_finite_values:
            X = check_finite(X, name)
        return X

    if hasattr(X, "__array__") or isinstance(X, (list, tuple)):
        arr = np.asarray(X)
        if arr.dtype == object:
            raise TypeError(f"{name} has dtype object; convert it to a numeric array first")
        if arr.ndim != 2:
            raise ValueError(
                f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}"
            )
        check_not_empty(arr.shape, name)
        arr = np.ascontiguousarray(arr, dtype=_float_dtype(arr.dtype, name, dtype))
        rows = chunk_rows or _config.chunk_rows_for(arr.shape[1], arr.itemsize, arr.shape[0])
        return numpy_row_blocks(arr, max(1, rows), name=name, check=check_finite_values)

    raise TypeError(
        f"{name} must be a numpy array, a dask array, a zarr array or a store path; "
        f"got {type(X).__name__}"
    )


def reject_sparse(X, name: str = "X") -> None:
    """Sparse matrices are not read (every solver streams dense row blocks): say so, rather
    than failing on an object dtype."""
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        raise TypeError(
            f"{name} is a sparse {type(X).__name__}; daskauc reads dense data: pass "
            f"{name}.toarray() when it fits in memory, or write it as a LIBSVM file and "
            "ingest that (it is densified chunk by chunk)")


def check_not_empty(shape, name: str = "X") -> None:
    """At least one row and one feature (an empty X would fit an empty model)."""
    if shape[0] == 0:
        raise ValueError(f"{name} has 0 samples (shape={tuple(shape)}); at least 1 is required")
    if shape[1] == 0:
        raise ValueError(f"{name} has 0 features (shape={tuple(shape)}); at least 1 is required")


def numpy_row_blocks(arr: np.ndarray, rows: int, *, name: str = "X",
                     check: bool = True) -> da.Array:
    """A dask array whose blocks are read-only views of ``arr``'s row ranges.

    ``da.from_array`` copies its input (to guard against later mutation), which doubles the
    memory of a large in-memory design matrix and costs a full pass; the views share
    ``arr``'s memory and, being read-only, cannot be written through. ``check`` scans the
    blocks for NaN or infinity first (a block at a time, so no n x r temporary).
    """
    import uuid

    starts = list(range(0, arr.shape[0], rows)) or [0]
    key = f"daskauc-numpy-{uuid.uuid4().hex}"
    graph, sizes = {}, []
    for i, a in enumerate(starts):
        block = arr[a:a + rows]
        if check and not np.isfinite(block).all():
            row = a + int(np.argwhere(~np.isfinite(block))[0][0])
            raise ValueError(
                f"{name} contains NaN or infinity (first in row {row}); "
                "impute or drop those values before fitting"
            )
        block = block.view()
        block.flags.writeable = False
        graph[(key, i, 0)] = block
        sizes.append(block.shape[0])
    return da.Array(graph, key, chunks=(tuple(sizes), (arr.shape[1],)), meta=arr[:0])


def label_classes(y_values: np.ndarray, pos_label=None, positive_classes=None) -> np.ndarray:
    """Decide which raw label values are positive; return them as an array.

    ``y_values`` holds the distinct raw labels. With neither argument the labels must be
    two-valued and the larger one (scikit-learn's ``classes_[1]``) is positive: this maps
    -1/+1, 0/1 and 1/2 as their datasets mean.
    """
    uniq = np.unique(y_values)
    if positive_classes is not None:
        pos = np.unique(np.asarray(list(positive_classes), dtype=uniq.dtype))
        missing = np.setdiff1d(pos, uniq)
        if missing.size:
            raise ValueError(f"positive_classes {missing.tolist()} do not occur in y")
        if pos.size == uniq.size:
            raise ValueError("positive_classes covers every class of y: no negatives left")
        return pos
    if uniq.size < 2:
        raise ValueError(
            f"y has a single class ({uniq.tolist()}): AUC needs both positive and negative rows"
        )
    if pos_label is not None:
        if not np.isin(np.asarray([pos_label], dtype=uniq.dtype), uniq)[0]:
            raise ValueError(
                f"pos_label={pos_label!r} does not occur in y (classes {uniq.tolist()})"
            )
        if uniq.size > 2:
            raise ValueError(
                f"y has {uniq.size} classes {uniq.tolist()[:10]}; group them into two sets with "
                "positive_classes=[...] (pos_label names a single class)"
            )
        return np.asarray([pos_label], dtype=uniq.dtype)
    if uniq.size > 2:
        raise ValueError(
            f"y has {uniq.size} classes {uniq.tolist()[:10]}; daskauc is for binary problems: "
            "group the classes with positive_classes=[...]"
        )
    return uniq[1:]


def _to_pm1(block: np.ndarray, positives: np.ndarray) -> np.ndarray:
    return np.where(np.isin(block, positives), 1, -1).astype(np.int8)


def as_labels(y: Any, *, pos_label=None, positive_classes=None, name: str = "y"):
    """Map labels of any two-valued convention to int8 {-1, +1}.

    Returns ``(y_pm1, classes)`` where ``y_pm1`` has the input's kind (numpy or dask) and
    ``classes`` is ``[negative_value, positive_value]`` when the labels are two-valued (for a
    grouping, the raw class values are returned as ``[negatives, positives]`` lists).
    """
    if is_store_path(y):
        from .data.store import open_dataset

        y = open_dataset(y).y
    if isinstance(y, da.Array):
        if y.ndim != 1:
            y = y.ravel() if (y.ndim == 2 and y.shape[1] == 1) else y
        if y.ndim != 1:
            raise ValueError(f"{name} must be 1-D; got shape {y.shape}")
        uniq = np.unique(da.unique(y).compute())
        positives = label_classes(uniq, pos_label, positive_classes)
        return y.map_blocks(_to_pm1, positives, dtype=np.int8, token="daskauc-labels"), (
            _classes_of(uniq, positives)
        )
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinity")
    uniq = np.unique(arr)
    positives = label_classes(uniq, pos_label, positive_classes)
    return _to_pm1(arr, positives), _classes_of(uniq, positives)


def _classes_of(uniq: np.ndarray, positives: np.ndarray) -> np.ndarray:
    neg = np.setdiff1d(uniq, positives)
    if neg.size == 1 and positives.size == 1:
        return np.concatenate([neg, positives])
    return np.asarray([-1, 1])


def check_X_y(X, y, *, dtype=None, pos_label=None, positive_classes=None, chunk_rows=None):
    """Validate a design matrix and labels together.

    Returns ``(X, y, classes)``: X as a row-chunked dask array, y as an int8 {-1,+1} dask
    array with the same row chunks.
    """
    if is_store_path(X) and y is None:
        from .data.store import open_dataset

        ds = open_dataset(X)
        X, y = ds.X, ds.y
    Xd = as_row_chunked(X, dtype=dtype, chunk_rows=chunk_rows)
    if y is None:
        raise ValueError("y is required: pass labels, or a dataset store path as X")
    y_pm1, classes = as_labels(y, pos_label=pos_label, positive_classes=positive_classes)
    n_y = y_pm1.shape[0]
    if n_y != Xd.shape[0]:
        raise ValueError(f"X has {Xd.shape[0]} rows but y has {n_y} labels; they must match")
    if isinstance(y_pm1, da.Array):
        if np.isnan(n_y):
            raise ValueError("y has unknown chunk sizes; call y.compute_chunk_sizes()")
        yd = y_pm1.rechunk((Xd.chunks[0],))
    else:
        yd = da.from_array(y_pm1, chunks=(Xd.chunks[0],), name=False)
    return Xd, yd, classes


def check_n_features(X_shape, expected: int, what: str = "the fitted model") -> None:
    if X_shape[1] != expected:
        raise ValueError(
            f"X has {X_shape[1]} features but {what} was fitted with {expected}; "
            "transform data with the same columns as at fit time"
        )


def check_param(name: str, value, kind, *, low=None, high=None, include_low=True, choices=None):
    """Check one estimator parameter; the message names it, the valid range and the value."""
    if choices is not None:
        if value not in choices:
            raise ValueError(f"{name} must be one of {sorted(map(str, choices))}; got {value!r}")
        return value
    if kind is int:
        ok = isinstance(value, Integral) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, Real) and not isinstance(value, bool) and np.isfinite(value)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise TypeError(f"{name} must be {getattr(kind, '__name__', kind)}; got {value!r}")
    if low is not None and (value < low or (value == low and not include_low)):
        rng = f"{'>=' if include_low else '>'} {low}"
        raise ValueError(f"{name} must be {rng}; got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}; got {value!r}")
    return value


def check_params(est, table: Mapping[str, tuple]) -> None:
    """Check every parameter listed in ``table`` as ``name: (kind, kwargs)``."""
    for pname, (kind, kwargs) in table.items():
        value = getattr(est, pname)
        if value is None and kwargs.get("optional"):
            continue
        check_param(pname, value, kind, **{k: v for k, v in kwargs.items() if k != "optional"})


def seed_sequence(random_state) -> np.random.SeedSequence:
    """A SeedSequence from None, an int, a SeedSequence or a Generator."""
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(2**31)))
    if random_state is None or isinstance(random_state, Integral):
        return np.random.SeedSequence(random_state)
    raise TypeError(f"random_state must be None, an int or a numpy Generator; got {random_state!r}")
