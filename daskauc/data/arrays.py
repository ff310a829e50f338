"""Arrays through the one door (:mod:`daskauc._readers`): numpy (and anything
``numpy.asarray`` takes: lists, pandas), dask arrays and dask dataframes, written to a
dataset store by :func:`ingest_array`.

numpy input is written from the client chunk by chunk (it is already in this process); dask
input (a dask dataframe as its dask array of values) by
:func:`~daskauc.data.dataset_write.write_dataset` in one compute on the current scheduler.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence

import dask.array as da
import numpy as np

from .. import _compute, _config
from .._params import Interval, check_param, seed_sequence
from .._readers import NoOptions, Probe, Reader, StoreTarget, reader_for, register_reader
from .._sparse import is_sparse, is_sparse_dask, is_sparse_frame
from .._validation import (
    as_row_chunked,
    check_not_empty,
    frame_values,
    is_dask_frame,
)
from ..store.dataset import Dataset, open_dataset
from ..store.write import check_writable, writing_store
from .dataset_write import _create_xy, write_dataset
from .labels import _array_label_table, _label_params, _to_pm1
from .parse import _overflow_advice
from .space import _check_store_space, _failing_cleanly


def check_common(dtype, chunk_rows, overwrite, store, shuffle, storage_options=None):
    """The options every write of a dataset store shares, checked before any work; the
    dtype as a numpy dtype."""
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64; got {dtype}")
    if chunk_rows is not None:
        check_param("chunk_rows", chunk_rows, Interval(int, 1))
    check_param("shuffle", shuffle, bool)
    check_param("overwrite", overwrite, bool)
    check_writable(store, overwrite=overwrite, storage_options=storage_options)
    return dtype


class _ArrayReader(Reader):
    """An in-memory or dask array: what :func:`ingest_array` writes."""

    Options = NoOptions

    @classmethod
    def _ingest_advice(cls) -> str:
        return "; write it with daskauc.ingest_array(X, y, store)"


@register_reader
class DaskReader(_ArrayReader):
    """A dask array, read by its row chunks."""

    name = "dask"

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return isinstance(probe.source, da.Array)


@register_reader
class FrameReader(_ArrayReader):
    """A dask dataframe (or series), read as the dask array of its values."""

    name = "dataframe"

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return is_dask_frame(probe.source)


@register_reader
class SparseReader(_ArrayReader):
    """A scipy sparse matrix or array, or a pandas frame of sparse columns: written as a
    sparse store (CSR row chunks, :mod:`daskauc.store.sparse`)."""

    name = "sparse"

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return not probe.is_path and (is_sparse(probe.source) or is_sparse_frame(probe.source))


@register_reader
class NumpyReader(_ArrayReader):
    """numpy, or anything ``numpy.asarray`` takes (lists, pandas), in this process."""

    name = "numpy"

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return not probe.is_path and (hasattr(probe.source, "__array__")
                                      or isinstance(probe.source, (list, tuple)))


def ingest_array(
    X,
    y,
    store: str | os.PathLike,
    *,
    pos_label=None,
    positive_classes: Sequence | None = None,
    dtype=None,
    chunk_rows: int | None = None,
    shuffle: bool = False,
    random_state=None,
    overwrite: bool = False,
    attrs: dict | None = None,
) -> Dataset:
    """Write a numpy or dask ``X`` and labels ``y`` of any two-valued convention to a store.

    Parameters
    ----------
    X : array-like or dask array, shape (n_samples, n_features)
        Integer and boolean data become float64 unless ``dtype`` says otherwise.
    y : array-like or dask array, shape (n_samples,)
        Raw labels, mapped to {-1, +1} by ``pos_label`` / ``positive_classes`` as in
        :func:`daskauc._labels.label_classes`.
    store : path or URL
    dtype : {None, "float32", "float64"}
    chunk_rows : int, optional
        Rows per Zarr chunk (default: dask input keeps its first chunk size; numpy input gets
        :func:`daskauc._config.chunk_rows_for`).
    shuffle : bool
        Write the rows in a uniformly random order. numpy input is permuted one output chunk
        at a time; dask input with :func:`dask.array.shuffle` (a task-based shuffle, bounded
        memory per task).
    random_state : seed of the shuffle.
    overwrite : bool
    attrs : dict, optional
        Extra JSON-serializable attributes.

    Returns
    -------
    Dataset

    Notes
    -----
    numpy input is written from the client chunk by chunk (it is already in this process);
    dask input is written by :func:`write_dataset` in one compute on the current scheduler,
    with finiteness checked and class counts taken in that same pass. For dask ``y`` the
    distinct labels are found first (one small pass over ``y`` only). A value that
    overflows ``dtype`` (``1e308`` as float32) is an error naming ``X[row, col]``, found in
    the write pass. Before any work, a local target whose file system has less free space than
    X and y uncompressed is refused (``_config.CHECK_FREE_SPACE``).
    """
    if dtype is not None:
        dtype = np.dtype(dtype)
    check_common(dtype or np.float64, chunk_rows, overwrite, store, shuffle)
    reader = reader_for(X)
    if not issubclass(reader, _ArrayReader):
        raise TypeError(f"ingest_array writes arrays; {os.fspath(X)!r} is {reader.name} input: "
                        "write it with daskauc.ingest(path, store)")
    if reader.name == "dataframe":
        X = frame_values(X)
    if is_dask_frame(y):
        y = frame_values(y)
    seed = seed_sequence(random_state) if shuffle else None
    base_attrs = {
        "source": "array", "source_format": "dask" if isinstance(X, da.Array) else "numpy",
        "shuffled": bool(shuffle),
        "shuffle_seed": None if seed is None else str(seed.entropy),
        "params": {**_label_params(pos_label, positive_classes),
                   "dtype": None if dtype is None else dtype.name, "chunk_rows": chunk_rows,
                   "shuffle": shuffle},
        "created": _dt.datetime.now(tz=_dt.timezone.utc).isoformat(),
        **(attrs or {}),
    }

    target = StoreTarget(store=store, dtype=dtype, chunk_rows=chunk_rows, shuffle=shuffle,
                         random_state=seed, overwrite=overwrite, pos_label=pos_label,
                         positive_classes=positive_classes, storage_options=None)
    if reader.name == "sparse":  # validated (canonical, finite) as it is cut into chunks
        X = as_row_chunked(X, dtype=dtype, chunk_rows=chunk_rows, sparse=True)
        base_attrs["source_format"] = "scipy.sparse"
    write = _write_dask if isinstance(X, da.Array) or isinstance(y, da.Array) else _write_numpy
    return write(X, y, target, base_attrs)


def _write_dask(X, y, target: StoreTarget, base_attrs: dict) -> Dataset:
    """Write dask ``X`` and ``y`` (either may be numpy) in one compute: the labels' distinct
    values found first, a shuffle by :func:`dask.array.shuffle`."""
    store, dtype, chunk_rows, seed = target.store, target.dtype, target.chunk_rows, \
        target.random_state
    Xd = as_row_chunked(X, check_finite_values=False, sparse=True)  # checked when written
    sparse = is_sparse_dask(Xd)
    if sparse:
        Xd = as_row_chunked(Xd, dtype=dtype, sparse=True)  # cast and checked block by block
    elif dtype is not None and Xd.dtype != dtype:  # a value that overflows dtype named
        Xd = Xd.map_blocks(_cast_block, dtype, dtype=dtype, token="daskauc-cast")
    yd = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=-1)
    if yd.ndim == 2 and yd.shape[1] == 1:
        yd = yd.ravel()
    if yd.ndim != 1 or yd.shape[0] != Xd.shape[0]:
        raise ValueError(f"y must be 1-D with {Xd.shape[0]} labels; got shape {yd.shape}")
    if not sparse:
        _check_store_space(store, *Xd.shape, Xd.dtype.itemsize)
    uniq = np.unique(_compute.compute(da.unique(yd))[0])
    if uniq.dtype.kind == "f" and not np.isfinite(uniq).all():
        raise ValueError("y contains NaN or infinity")
    positives, classes = _array_label_table(uniq, target.pos_label,
                                             target.positive_classes)
    yd = yd.rechunk((Xd.chunks[0],)).map_blocks(
        _to_pm1, positives, dtype=np.int8, token="daskauc-labels")
    cr = int(chunk_rows or max(Xd.chunks[0]))
    if target.shuffle:
        n = Xd.shape[0]
        perm = np.random.default_rng(seed).permutation(n)
        groups = [perm[a : a + cr].tolist() for a in range(0, n, cr)]
        Xd = da.shuffle(Xd, groups, axis=0)
        yd = da.shuffle(yd, groups, axis=0)
    return write_dataset(Xd, yd, store, attrs={"classes": classes, **base_attrs},
                         overwrite=target.overwrite, chunk_rows=cr)


def _write_numpy(X, y, out: StoreTarget, base_attrs: dict) -> Dataset:
    """Write in-memory ``X`` and ``y`` from this process, one output chunk at a time."""
    store, dtype, chunk_rows, seed = out.store, out.dtype, out.chunk_rows, out.random_state
    Xn = np.asarray(X)
    if Xn.dtype == object:
        raise TypeError("X has dtype object; convert it to a numeric array first")
    if Xn.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {Xn.shape}")
    check_not_empty(Xn.shape)
    target = dtype or (Xn.dtype if Xn.dtype in (np.float32, np.float64) else np.dtype(np.float64))
    if Xn.dtype.kind not in "fiub":
        raise TypeError(f"X must hold real numbers; got dtype {Xn.dtype}")
    yn = np.asarray(y)
    if yn.ndim == 2 and yn.shape[1] == 1:
        yn = yn.ravel()
    if yn.ndim != 1 or yn.shape[0] != Xn.shape[0]:
        raise ValueError(f"X has {Xn.shape[0]} rows but y has shape {yn.shape}; they must match")
    _check_store_space(store, *Xn.shape, target.itemsize)
    if yn.dtype.kind == "f" and not np.isfinite(yn).all():
        row = int(np.argmin(np.isfinite(yn)))
        raise ValueError(f"y contains NaN or infinity (first at row {row})")
    if not np.isfinite(Xn).all():
        row = int(np.argwhere(~np.isfinite(Xn))[0][0])
        raise ValueError(f"X contains NaN or infinity (first in row {row}); impute or drop it")
    n, d = Xn.shape
    if n == 0:
        raise ValueError("X has no rows")
    positives, classes = _array_label_table(np.unique(yn), out.pos_label,
                                             out.positive_classes)
    ypm = _to_pm1(yn, positives)
    cr = int(chunk_rows or _config.chunk_rows_for(d, target.itemsize, n))
    perm = np.random.default_rng(seed).permutation(n) if out.shuffle else None
    with _failing_cleanly(store), \
            writing_store(store, overwrite=out.overwrite, kind="dataset") as group:
        zX, zy = _create_xy(group, n, d, cr, target)
        for a in range(0, n, cr):
            rows = slice(a, a + cr) if perm is None else perm[a : a + cr]
            zX[a : a + cr] = _cast_checked(Xn[rows], target, a if perm is None else rows)
            zy[a : a + cr] = ypm[rows]
        n_pos = int(np.count_nonzero(ypm > 0))
        group.update_attributes({
            "n_samples": n, "n_features": d, "n_positive": n_pos, "n_negative": n - n_pos,
            "classes": classes, "dtype": target.name, "chunk_rows": cr, **base_attrs})
    return open_dataset(store)


def _cast_checked(block: np.ndarray, target, rows: int | np.ndarray = 0) -> np.ndarray:
    """``block`` as ``target``; a finite value that becomes infinite is an error naming it
    (its row: ``rows`` + the block's row, or ``rows[r]`` for the rows of a shuffle)."""
    with np.errstate(over="ignore"):
        out = np.asarray(block, dtype=target)
    if out.dtype.itemsize < np.asarray(block).dtype.itemsize and out.dtype.kind == "f":
        bad = np.isinf(out)
        if bad.any():
            bad &= np.isfinite(block)
            if bad.any():
                r, c = (int(v) for v in np.argwhere(bad)[0])
                row = int(rows[r]) if isinstance(rows, np.ndarray) else rows + r
                raise ValueError(f"X[{row}, {c}] = {float(block[r, c])!r} "
                                 f"{_overflow_advice(target)}")
    return out


def _cast_block(block: np.ndarray, target, block_info=None) -> np.ndarray:
    return _cast_checked(block, target, block_info[0]["array-location"][0][0])
