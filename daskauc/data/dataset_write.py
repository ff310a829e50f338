"""Writing a dataset store: from parsed row chunks (:func:`write_rows`, every ingest of a
file), and from dask arrays in one compute (:func:`write_dataset`)."""

from __future__ import annotations

import datetime as _dt
import os
import shutil

import dask.array as da
import numpy as np

from .. import _compute
from .._params import seed_sequence
from .._readers import StoreTarget
from .._sparse import is_sparse_dask
from .._validation import as_row_chunked
from ..engine.stream import class_counts_block
from ..store.dataset import Dataset, open_dataset
from ..store.sparse import CSR, FORMAT_ATTR, FORMAT_VERSION, GROUP, ROWS_ATTR, write_csr_chunk
from ..store.write import begin_store, create_array, writing_store
from .labels import _check_pm1, _label_table
from .space import _check_store_space, _failing_cleanly
from .writers import _DirectWriter, _GuardedTarget, _ShuffleWriter, _SparseWriter, _spill_dir


def write_rows(target: StoreTarget, *, where: str, feed, tokens, n_rows: int | None, d: int,
               cr: int, params: dict, source_attrs, sparse: bool = False) -> None:
    """Write the store ``target`` names from parsed row chunks: ``feed(writer)`` writes every
    chunk (the spill files hold the label codes, and the shuffle's rows), then the labels
    ``tokens()`` are mapped to {-1, +1}, ``y`` is written and the attributes recorded
    (``source_attrs()``). ``sparse``: the chunks' ``X`` are CSR blocks, written as a sparse
    store (:mod:`daskauc.store.sparse`)."""
    store, dtype, shuffle = target.store, target.dtype, target.shuffle
    overwrite, storage_options = target.overwrite, target.storage_options
    pos_label, positive_classes = target.pos_label, target.positive_classes
    random_state = target.random_state
    seed = seed_sequence(random_state) if shuffle else None
    spill = _spill_dir(store)
    writer = None
    try:
        with writing_store(store, overwrite=overwrite, kind="dataset",
                           storage_options=storage_options) as group:
            if sparse:
                if shuffle:
                    raise ValueError(
                        f"{where}: shuffle=True is not available for sparse rows yet; ingest "
                        "without shuffling (the stochastic solvers visit chunks in a random "
                        "order and rows within a chunk in a random order), or shuffle the "
                        "file's lines first (e.g. shuf)")
                writer = _SparseWriter(group, spill, cr)
            elif shuffle:
                zX = create_array(group, "X", shape=(n_rows or 0, d), chunks=(cr, d),
                                  dtype=dtype)
                writer = _ShuffleWriter(zX, spill, n_rows, cr, d, dtype, seed)
            else:
                zX = create_array(group, "X", shape=(n_rows or 0, d), chunks=(cr, d),
                                  dtype=dtype)
                writer = _DirectWriter(zX, spill, cr, known_rows=n_rows is not None)
            feed(writer)
            n = writer.n
            if n == 0:
                raise ValueError(f"{where} holds no data rows")
            if n_rows is not None and n != n_rows:
                raise RuntimeError(f"{where} changed while it was read ({n_rows} then {n} rows)")
            lut, classes = _label_table(tokens(), pos_label, positive_classes, where)
            zy = create_array(group, "y", shape=(n,), chunks=(cr,), dtype=np.int8)
            counts = writer.finish(zy, lut)
            group.update_attributes({
                "n_samples": int(n), "n_features": d,
                "n_negative": int(counts[0]), "n_positive": int(counts[1]),
                "classes": classes,
                **source_attrs(),
                "dtype": dtype.name, "chunk_rows": cr,
                "shuffled": bool(shuffle),
                "shuffle_seed": None if seed is None else str(seed.entropy),
                "params": params,
                "created": _dt.datetime.now(tz=_dt.timezone.utc).isoformat(),
                **(writer.attrs() if sparse else {}),
            })
    finally:
        if writer is not None:
            writer.close()
        shutil.rmtree(spill, ignore_errors=True)


def _create_xy(group, n: int, d: int, cr: int, dtype):
    """The empty ``X`` (``n`` x ``d``, ``dtype``) and int8 ``y`` of a store, ``cr`` rows a
    chunk."""
    return (create_array(group, "X", shape=(n, d), chunks=(cr, d), dtype=dtype),
            create_array(group, "y", shape=(n,), chunks=(cr,), dtype=np.int8))


def _counts_attrs(counts) -> dict:
    counts = np.asarray(counts).reshape(-1, 2).sum(axis=0)
    return {"n_negative": int(counts[0]), "n_positive": int(counts[1])}


def write_dataset(
    X,
    y,
    store: str | os.PathLike,
    *,
    attrs: dict | None = None,
    overwrite: bool = False,
    compute: bool = True,
    chunk_rows: int | None = None,
    storage_options: dict | None = None,
):
    """Write a row-chunked dask ``X`` and a {-1, +1} dask ``y`` to a dataset store.

    Parameters
    ----------
    X : dask array (n, d), chunked by rows (numpy is converted)
    y : dask array (n,) of -1 / +1 (checked lazily in the same pass; written as int8)
    store : path or URL
    attrs : dict, optional
        JSON-serializable attributes (provenance); ``n_samples``, ``n_features``, ``dtype``,
        ``chunk_rows`` and the class counts ``n_positive`` / ``n_negative`` are added.
    overwrite : bool
    compute : bool
        When False, nothing is written yet: a ``Delayed`` is returned whose computation (alone
        or in one ``dask.compute`` with other work, sharing the pass over the input) writes
        the arrays, counts the classes and then commits the store; it evaluates to the path.
    chunk_rows : int, optional
        Zarr chunk rows; default the largest dask row chunk. ``X`` and ``y`` are rechunked
        to exactly that (each dask chunk one Zarr chunk), so parallel writes never share a
        Zarr chunk.

    Returns
    -------
    Dataset, or Delayed when ``compute=False``.
    """
    # finiteness is checked in the write pass; not with _validation.check_finite, whose fixed
    # key name collides when two writes share one graph (split_store)
    Xd = as_row_chunked(X, sparse=True)
    yd = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=-1)
    if yd.ndim != 1 or yd.shape[0] != Xd.shape[0]:
        raise ValueError(f"y must be 1-D with {Xd.shape[0]} labels; got shape {yd.shape}")
    n, d = Xd.shape
    if n == 0:
        raise ValueError("X has no rows")
    sparse = is_sparse_dask(Xd)
    if not sparse:
        _check_store_space(store, n, d, Xd.dtype.itemsize)
    cr = int(chunk_rows or max(Xd.chunks[0]))
    target = tuple([cr] * (n // cr) + ([n % cr] if n % cr else []))
    if Xd.chunks[0] != target:
        Xd = Xd.rechunk({0: cr})
    yd = yd.rechunk((Xd.chunks[0],)).map_blocks(_check_pm1, dtype=np.int8,
                                                token="daskauc-check-labels")
    meta = {**(attrs or {}), "n_samples": int(n), "n_features": int(d),
            "dtype": Xd.dtype.name, "chunk_rows": cr}
    counts = yd.map_blocks(class_counts_block, chunks=((1,) * yd.numblocks[0], (2,)), new_axis=1,
                           dtype=np.int64, token="daskauc-class-counts").sum(axis=0)

    if sparse:
        if not compute:
            raise ValueError("compute=False writes dense rows only; sparse rows are written "
                             "in one compute (compute=True)")
        return _write_sparse(Xd, yd, counts, store, meta, overwrite, storage_options)
    if compute:
        with _failing_cleanly(store), \
                writing_store(store, overwrite=overwrite, kind="dataset", attrs=meta,
                              storage_options=storage_options) as group:
            targets = [_GuardedTarget(z) for z in _create_xy(group, n, d, cr, Xd.dtype)]
            try:
                stored = da.store([Xd, yd], targets, lock=False, compute=False)
                _, c = _compute.compute(stored, counts)
            except BaseException:
                for t in targets:
                    t.close_and_wait()
                raise
            group.update_attributes(_counts_attrs(c))
        return open_dataset(store, storage_options=storage_options)

    pending = begin_store(store, kind="dataset", overwrite=overwrite, attrs=meta,
                          storage_options=storage_options)
    zX, zy = _create_xy(pending.group, n, d, cr, Xd.dtype)
    stored = da.store([Xd, yd], [zX, zy], lock=False, compute=False)
    return pending.commit_delayed(stored, counts, attrs_from=_attrs_from_store_and_counts)


def _attrs_from_store_and_counts(_stored, counts) -> dict:
    return _counts_attrs(counts)


def _write_sparse(Xd: da.Array, yd: da.Array, counts, store, meta: dict, overwrite: bool,
                  storage_options) -> Dataset:
    """Write a dask array of CSR blocks as a sparse store (:mod:`daskauc.store.sparse`): one
    task a row chunk writes its three arrays, in the same compute as ``y`` and the counts."""
    meta = {**meta, ROWS_ATTR: CSR, FORMAT_ATTR: FORMAT_VERSION}
    n, cr = Xd.shape[0], meta["chunk_rows"]
    with _failing_cleanly(store), \
            writing_store(store, overwrite=overwrite, kind="dataset", attrs=meta,
                          storage_options=storage_options) as group:
        zy = create_array(group, "y", shape=(n,), chunks=(cr,), dtype=np.int8)
        group.require_group(GROUP)
        nnz = Xd.map_blocks(_write_csr_block, group, cr, drop_axis=1,
                            chunks=((1,) * Xd.numblocks[0],), dtype=np.int64,
                            meta=np.empty((0,), np.int64), token="daskauc-write-csr")
        target = _GuardedTarget(zy)
        try:
            stored = da.store(yd, target, lock=False, compute=False)
            _, c, per_chunk = _compute.compute(stored, counts, nnz)
        except BaseException:
            target.close_and_wait()
            raise
        group.update_attributes({**_counts_attrs(c), "n_nonzero": int(per_chunk.sum()),
                                 "chunk_nonzeros": [int(v) for v in per_chunk]})
    return open_dataset(store, storage_options=storage_options)


def _write_csr_block(block, group, chunk_rows: int, block_info=None) -> np.ndarray:
    first = block_info[0]["array-location"][0][0]
    return np.array([write_csr_chunk(group, first // chunk_rows, block)], dtype=np.int64)
