"""Input checking: any input kind -> a row-chunked dask array (labels -> {-1, +1}: :mod:`._labels`;
parameters: :mod:`._params`).

Every public entry point goes through here so errors read the same everywhere and name the
problem (NaN, one class, shape mismatch, unknown chunk sizes, wrong dtype, missing store).
Finiteness of dask input is checked lazily, inside the pass that reads the data, never by an
extra pass of its own.

Where scikit-learn's estimator checks look for particular words (``Expected 2D array``,
``X has 3 features, but RankSVM is expecting 4 features as input``, ``0 feature(s)``,
``Complex data not supported``, ``Only binary classification is supported``, ``Unknown label
type: continuous``, a ``DataConversionWarning`` for a column-vector y ...), the messages use
them and add daskauc's own advice; the error types are scikit-learn's (``ValueError`` for bad
values and shapes, ``TypeError`` for sparse input and non-numeric objects).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import dask.array as da
import numpy as np

from . import _config
from ._compute import compute
from ._readers import is_sparse_input, open_path, opened_attrs
from ._sparse import (
    canonical_blocks,
    canonical_csr,
    frame_as_csr,
    is_sparse,
    is_sparse_dask,
    is_sparse_frame,
    sparse_row_blocks,
)
from .store.dataset import is_zarr_array

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def is_store_path(obj: Any) -> bool:
    """True for a filesystem path or URL naming a Zarr store."""
    return isinstance(obj, (str, os.PathLike))


def is_dask_frame(obj: Any) -> bool:
    """True for a dask DataFrame or Series."""
    return hasattr(obj, "to_dask_array") and hasattr(obj, "npartitions")


def is_lazy_input(X: Any) -> bool:
    """True for input read chunk by chunk (a dask array or dataframe, a Zarr array or a store
    path), whose results are lazy dask arrays; False for in-memory input (numpy, lists,
    pandas dataframes)."""
    return isinstance(X, da.Array) or is_store_path(X) or is_zarr_array(X) or is_dask_frame(X)


def _frame_as_dask(X, name: str) -> da.Array:
    """A dask DataFrame's values as a dask array with known row chunks (one pass to count
    each partition's rows)."""
    check_frame_columns(X, name)
    return frame_values(X)


def frame_values(frame) -> da.Array:
    """A dask DataFrame's or Series' values as a dask array with known row chunks: one pass
    counts the rows of each of the array's own blocks.

    Not ``to_dask_array(lengths=True)``: it counts the rows of the frame's partitions as the
    optimizer plans them for counting, and the array it builds may have other partitions
    (two small Parquet files read as one partition when only some columns are read), so it
    failed with "The number of items in 'lengths' does not match the number of partitions.
    1 != 2" (dask 2026.8) on a Parquet directory of two files."""
    with warnings.catch_warnings():  # text labels become an object array, as intended
        warnings.filterwarnings("ignore", "Dask currently has limited support", UserWarning)
        values = frame.to_dask_array()
    rows = compute(values.map_blocks(_rows_of, dtype=np.int64, chunks=(1,),
                                     drop_axis=list(range(1, values.ndim)),
                                     token="daskauc-frame-rows"))[0]
    chunks = (tuple(int(n) for n in rows),) + values.chunks[1:]
    return da.Array(values.dask, values.name, chunks, dtype=values.dtype)


def _rows_of(block) -> np.ndarray:
    return np.array([len(block)], dtype=np.int64)


def check_frame_columns(X, name: str = "X") -> None:
    """A (pandas or dask) dataframe's columns that are not numeric or boolean are refused by
    name (never dropped): encode them first, or ingest with categorical='onehot'."""
    if not hasattr(X, "dtypes") or not hasattr(X, "columns"):
        return
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    bad = [f"{c!r} ({t})" for c, t in X.dtypes.items()
           if not (is_numeric_dtype(t) or is_bool_dtype(t))]
    if bad:
        raise TypeError(
            f"{name} has column(s) {', '.join(bad[:10])} that are not numbers; encode them "
            "first (or ingest the data with categorical='onehot'), or leave them out")


def float_dtype(dtype: np.dtype, name: str, requested=None) -> np.dtype:
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


def _reject_complex(dtype: np.dtype, name: str) -> None:
    if dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {dtype}; pass its real "
                         "part, its magnitude or both as separate features")


def check_2d(shape, name: str = "X") -> None:
    """``X`` must be 2-D: one row per sample, one column per feature."""
    if len(shape) == 2:
        return
    what = {0: "a scalar", 1: "a 1D array"}.get(len(shape), f"an array of dim {len(shape)}")
    raise ValueError(
        f"Expected 2D array, got {what} instead: {name} has shape {tuple(shape)} and must be "
        "2-D (n_samples, n_features). Reshape your data either using array.reshape(-1, 1) if "
        "your data has a single feature or array.reshape(1, -1) if it contains a single sample."
    )


def check_finite_block(block: np.ndarray, name: str, block_info=None) -> np.ndarray:
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
    return X.map_blocks(check_finite_block, name, dtype=X.dtype, token="daskauc-check-finite",
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


def as_numpy_rows(X: Any, *, name: str = "X", dtype=None,
                  check_finite_values: bool = True) -> np.ndarray:
    """In-memory ``X`` (numpy, a list, a dataframe, anything with ``__array__``) as a
    C-contiguous 2-D float32 / float64 numpy array.

    Sparse matrices are refused (``TypeError``); an object array is converted to float64
    when every value is a number (else ``TypeError``); complex values, a 1-D or 3-D array and
    NaN or infinity are ``ValueError``. Integers and booleans become float64; float32 stays.
    """
    reject_sparse(X, name)
    check_frame_columns(X, name)
    arr = np.asarray(X)
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} has dtype object and not every value is a number "
                            f"({exc}); convert it to a numeric array first") from exc
    _reject_complex(arr.dtype, name)
    check_2d(arr.shape, name)
    arr = np.ascontiguousarray(arr, dtype=float_dtype(arr.dtype, name, dtype))
    if check_finite_values and not np.isfinite(arr).all():
        row = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise ValueError(f"{name} contains NaN or infinity (first in row {row}); "
                         "impute or drop those values first")
    return arr


def as_row_chunked(
    X: Any,
    *,
    name: str = "X",
    dtype=None,
    chunk_rows: int | None = None,
    check_finite_values: bool = True,
    sparse: bool = False,
) -> da.Array:
    """Return ``X`` as a 2-D dask array chunked along rows only, float32 or float64.

    Accepts a numpy array, a dask array, a ``zarr.Array``, or the path of a daskauc dataset
    or embedding store (its ``X``). Integer and boolean data become float64. Dask input must
    have known chunk sizes. Non-finite values raise when the data is read.

    With ``sparse=True`` (a caller that reads CSR blocks), sparse rows (a scipy sparse
    matrix, a sparse pandas frame, a dask array of sparse blocks, a sparse store) give a
    dask array of canonical CSR blocks (:mod:`daskauc._sparse`); otherwise they are a
    ``TypeError`` that says so.
    """
    if is_sparse_frame(X):
        X = frame_as_csr(X)
    if is_sparse(X) and not sparse:
        reject_sparse(X, name)
    if is_sparse(X):
        check_2d(X.shape, name)
        check_not_empty(X.shape, name)
        return sparse_row_blocks(X, chunk_rows, name=name, dtype=dtype,
                                 check_finite=check_finite_values)
    if is_store_path(X):
        X = open_path(X, what=name).X
    elif is_zarr_array(X):
        X = da.from_zarr(X)
    elif is_dask_frame(X):
        X = _frame_as_dask(X, name)

    if isinstance(X, da.Array):
        _reject_complex(X.dtype, name)
        check_2d(X.shape, name)
        if any(np.isnan(c) for cs in X.chunks for c in cs):
            raise ValueError(
                f"{name} has unknown chunk sizes (typically after boolean indexing or from a "
                "dask dataframe); call X.compute_chunk_sizes() or use to_dask_array(lengths=True)"
            )
        check_not_empty(X.shape, name)
        if is_sparse_dask(X):
            if not sparse:
                reject_sparse(X, name)
            X = canonical_blocks(X, name=name, dtype=dtype, check_finite=check_finite_values)
            return X if chunk_rows is None else X.rechunk({0: int(chunk_rows)})
        target = float_dtype(X.dtype, name, dtype)
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
        arr = as_numpy_rows(X, name=name, dtype=dtype, check_finite_values=False)
        check_not_empty(arr.shape, name)
        rows = chunk_rows or _config.chunk_rows_for(arr.shape[1], arr.itemsize, arr.shape[0])
        return numpy_row_blocks(arr, max(1, rows), name=name, check=check_finite_values)

    raise TypeError(
        f"{name} must be a numpy array, a dask array, a zarr array or a store path; "
        f"got {type(X).__name__}"
    )


def default_chunks(X: da.Array) -> da.Array:
    """``X`` (a 2-D dask array) in the row chunks daskauc cuts numpy input into: about 64 MiB
    each (``_config.chunk_rows_for`` of its width and float dtype), one column chunk.

    The rule that makes chunking deterministic: a stochastic solver streams row chunks, so
    its model depends on the rows, ``random_state`` and the row chunks. numpy input is cut
    into these default chunks; a dask array or a store keeps its own (they are the unit of
    its reads and tasks). So numpy input and ``default_chunks(dask input)`` give the same
    model, bit for bit (a dask array persisted on a cluster: rechunk before persisting).
    """
    if not isinstance(X, da.Array) or X.ndim != 2:
        raise TypeError(f"default_chunks takes a 2-D dask array; got {type(X).__name__}")
    itemsize = float_dtype(X.dtype, "X").itemsize
    rows = _config.chunk_rows_for(X.shape[1], itemsize, X.shape[0])
    return X.rechunk({0: rows, 1: -1})


#: what to do with sparse, high-dimensional data (text features), in every refusal of it
SPARSE_ADVICE = (
    "Reduce the features first: hash them into a few thousand columns "
    "(sklearn.feature_extraction.FeatureHasher), project them "
    "(sklearn.random_projection.SparseRandomProjection or sklearn.decomposition.TruncatedSVD) "
    "or keep the frequent ones, then ingest the result; or keep the rows sparse and fit a "
    "model that reads them (docs/sparse.md).")


def reject_sparse(X, name: str = "X") -> None:
    """Sparse matrices are not read here (a step that needs dense rows): say so, rather
    than failing on an object dtype."""
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        from dask.utils import format_bytes

        n, d = X.shape
        raise TypeError(
            f"{name} is a sparse {type(X).__name__} of {n:,} x {d:,} ({X.nnz:,} non-zero; "
            f"{format_bytes(8 * n * d)} dense); this step reads dense rows: pass "
            f"{name}.toarray() when that fits in memory. {SPARSE_ADVICE}")


def check_sparse_accepted(est, X: Any, name: str = "X") -> None:
    """Sparse ``X`` for an estimator whose ``_sparse_rows`` is False is a ``TypeError`` that
    says why it needs dense rows and which estimators read sparse ones."""
    if getattr(type(est), "_sparse_rows", False) or not is_sparse_input(X):
        return
    from ._registry import MODEL_CLASSES

    readers = sorted(n for n, c in MODEL_CLASSES.items() if getattr(c, "_sparse_rows", False))
    why = getattr(type(est), "_dense_only", "it works on dense rows")
    raise TypeError(
        f"{name} holds sparse rows; {type(est).__name__} reads dense rows only ({why}). "
        + (f"These read sparse rows: {', '.join(readers)}. Or: " if readers else "")
        + SPARSE_ADVICE)


def check_not_empty(shape, name: str = "X", min_samples: int = 1) -> None:
    """At least ``min_samples`` rows and one feature (an empty X would fit an empty model).

    The wording is scikit-learn's (``Found array with 0 feature(s) (shape=(10, 0)) while a
    minimum of 1 is required``), after daskauc's own.
    """
    n, d = int(shape[0]), int(shape[1])
    if n < min_samples:
        raise ValueError(
            f"{name} has {n} {'sample' if n == 1 else 'samples'}: found array with {n} "
            f"sample(s) (shape={(n, d)}) while a minimum of {min_samples} is required.")
    if d == 0:
        raise ValueError(
            f"{name} has 0 features: found array with 0 feature(s) (shape={(n, d)}) while a "
            "minimum of 1 is required.")


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


# ----------------------------------------------------------------------------- features


def feature_names_of(X: Any) -> np.ndarray | None:
    """The column names of a dataframe ``X`` when they are all strings (scikit-learn's rule:
    then they are recorded and checked), None when there are none or none is a string."""
    if is_store_path(X):
        names = _store_feature_names(X)
        return None if names is None else np.asarray(names, dtype=object)
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, da.Array):
        return None
    names = np.asarray(list(columns), dtype=object)
    kinds = sorted({type(n).__name__ for n in names})
    if names.size == 0 or "str" not in kinds:
        return None
    if len(kinds) > 1:
        raise TypeError(
            "Feature names are only supported if all input features have string names, but "
            f"your input has {kinds} as feature name / column name types; convert them all "
            "to strings (X.columns = X.columns.astype(str)) or to a non-string type")
    return names


def _store_feature_names(path) -> list | None:
    """The feature names a dataset store records (ingested from Parquet or a CSV header)."""
    names = (store_attrs_of(path) or {}).get("feature_names")
    return list(names) if names else None


def store_attrs_of(X: Any) -> dict | None:
    """The attributes of the daskauc store ``X`` reads (:func:`store_of`), else None."""
    return store_of(X)[1]


def store_of(X: Any) -> tuple[str | None, dict | None]:
    """(location, attributes) of the daskauc store ``X`` reads: a store path, or a Zarr array
    of one or its dask array as :func:`~daskauc.open_dataset` gives it (unsliced); else
    ``(None, None)``."""
    from .store.dataset import zarr_array_of, zarr_location

    if is_store_path(X):
        from .store.protocol import open_store, resolve_path

        attrs = opened_attrs(X)
        if attrs is not None:
            return resolve_path(X), dict(attrs)
        try:
            return resolve_path(X), dict(open_store(X, verify=False).attrs)
        except (FileNotFoundError, ValueError):
            return None, None
    arr = zarr_array_of(X)
    location, attrs = zarr_location(arr) if arr is not None else (None, None)
    return (location, attrs) if attrs and attrs.get("daskauc_kind") else (None, None)


def set_features_in(est, X: Any, n_features: int) -> None:
    """Record ``n_features_in_``; for a dataframe with string column names (or a store that
    records them), ``feature_names_in_``; for the rows of an embedding store,
    ``input_map_sha256_``, the digest of the map that made them (stale ones from an earlier
    fit are removed)."""
    est.n_features_in_ = int(n_features)
    names = feature_names_of(X)
    if names is None:
        est.__dict__.pop("feature_names_in_", None)
    else:
        est.feature_names_in_ = names
    digest = (store_attrs_of(X) or {}).get("map_sha256") if is_lazy_input(X) else None
    if digest is None:
        est.__dict__.pop("input_map_sha256_", None)
    else:
        est.input_map_sha256_ = str(digest)


def check_input_map(est, attrs: dict | None, where: str) -> None:
    """Refuse the rows of a store (``attrs``) made by another map than the rows ``est`` was
    fitted on (its ``input_map_sha256_``): the same width, other features, silently wrong
    scores. Rows from no store, or a model fitted on no embedding, cannot be checked; a raw
    store of another width than the model's is left to the width check, whose message names
    both widths."""
    fitted = getattr(est, "input_map_sha256_", None)
    if fitted is None or attrs is None:
        return
    cls = type(est).__name__
    theirs = attrs.get("map_sha256")
    if theirs is None and attrs.get("n_features") != getattr(est, "n_features_in_", None):
        return
    if theirs is None:
        raise ValueError(
            f"{where} holds raw rows, but {cls} was fitted on rows embedded by a Nystroem map "
            f"(map sha256 {fitted[:12]}): map them with that map first (daskauc embed STORE "
            "OUT.zarr --map TRAIN-EMB.zarr, or write_scores / daskauc predict with map= / "
            "--map TRAIN-EMB.zarr)")
    if theirs != fitted:
        raise ValueError(
            f"{where} was embedded by another map (map sha256 {str(theirs)[:12]}) than the "
            f"rows {cls} was fitted on (map sha256 {fitted[:12]}): its scores would be "
            "meaningless; embed the rows with the training embedding's map (daskauc embed "
            "STORE OUT.zarr --map TRAIN-EMB.zarr)")


def check_n_features(X_shape, expected: int, what: str = "the model") -> None:
    """The number of columns at fit time; ``what`` names the estimator (its class name)."""
    if X_shape[1] != expected:
        raise ValueError(
            f"X has {X_shape[1]} features, but {what} is expecting {expected} features as "
            "input; pass data with the same columns as at fit time"
        )


def _check_feature_names(est, X) -> None:
    fitted = getattr(est, "feature_names_in_", None)
    names = feature_names_of(X)
    cls = type(est).__name__
    if fitted is None and names is None:
        return
    if names is None:
        warnings.warn(f"X does not have valid feature names, but {cls} was fitted with "
                      "feature names", UserWarning, stacklevel=4)
    elif fitted is None:
        warnings.warn(f"X has feature names, but {cls} was fitted without feature names",
                      UserWarning, stacklevel=4)
    elif len(names) != len(fitted) or np.any(names != fitted):
        unseen = [n for n in names if n not in set(fitted)][:5]
        missing = [n for n in fitted if n not in set(names)][:5]
        raise ValueError(
            "The feature names should match those that were passed during fit: "
            f"{cls} was fitted with {list(fitted)[:10]}; "
            + (f"unseen at fit time: {unseen}; " if unseen else "")
            + (f"missing: {missing}; " if missing else "")
            + "pass the same columns in the same order")


def check_predict_X(est, X: Any, *, dtype=None):
    """``X`` for ``predict`` / ``transform`` / ``decision_function`` of a fitted ``est``.

    In-memory input gives a validated numpy array, a dask array, Zarr array or store path a
    row-chunked dask array (so each method returns the input's kind). The number of features
    (and, for a dataframe, the column names) must be those seen by ``fit``.
    """
    check_sparse_accepted(est, X)
    if is_lazy_input(X):
        if is_dask_frame(X) or (is_store_path(X) and getattr(est, "feature_names_in_", None)
                                is not None and feature_names_of(X) is not None):
            _check_feature_names(est, X)
        if getattr(est, "input_map_sha256_", None) is not None:
            location, attrs = store_of(X)
            check_input_map(est, attrs, location)
        Xv = as_row_chunked(X, dtype=dtype, sparse=True)
    elif is_sparse(X) or is_sparse_frame(X):
        _check_feature_names(est, X)
        Xv = canonical_csr(frame_as_csr(X) if is_sparse_frame(X) else X, dtype=dtype)
        check_2d(Xv.shape)
    else:
        _check_feature_names(est, X)
        Xv = as_numpy_rows(X, dtype=dtype)
    check_n_features(Xv.shape, est.n_features_in_, type(est).__name__)
    return Xv


def preserved_dtypes(dtype) -> list[str]:
    """The ``transformer_tags.preserves_dtype`` of a transformer with a ``dtype`` parameter:
    the input's float dtype when it is None, else that dtype only."""
    if dtype is None:
        return ["float64", "float32"]
    try:
        return [np.dtype(dtype).name]
    except TypeError:
        return ["float64"]
