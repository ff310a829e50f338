"""Writing a dataset store: from parsed row chunks (:func:`write_rows`, every ingest of a
file), and from dask arrays in one compute (:func:`write_dataset`)."""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import dask.array as da
import numpy as np

from .. import _compute
from .._params import seed_sequence
from .._readers import StoreTarget
from .._sparse import is_sparse_dask
from .._validation import as_row_chunked
from ..engine.stream import class_counts_block
from ..store.dataset import open_dataset
from ..store.sparse import CSR, FORMAT_ATTR, FORMAT_VERSION, GROUP, ROWS_ATTR, write_csr_chunk
from ..store.write import Gate, PendingStore, begin_store, create_array, writing_store
from .labels import _check_pm1, _label_table
from .space import _check_store_space, _failing_cleanly
from .writers import (
    _csr_attrs,
    _DirectWriter,
    _GuardedTarget,
    _ShuffleWriter,
    _SparseShuffleWriter,
    _SparseWriter,
    _spill_dir,
)


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
            if sparse and shuffle:
                writer = _SparseShuffleWriter(group, spill, n_rows, cr, d, dtype, seed)
            elif sparse:
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
    X : dask array (n, d), chunked by rows (numpy is converted); dense, or of CSR blocks
        (then a sparse store is written, :mod:`daskauc.store.sparse`)
    y : dask array (n,) of -1 / +1 (checked lazily in the same pass; written as int8)
    store : path or URL
    attrs : dict, optional
        JSON-serializable attributes (provenance); ``n_samples``, ``n_features``, ``dtype``,
        ``chunk_rows`` and the class counts ``n_positive`` / ``n_negative`` are added.
    overwrite : bool
    compute : bool
        When False, nothing is written yet: a ``Delayed`` is returned whose computation writes
        the arrays, counts the classes and then commits the store; it evaluates to the path.
        (To write several stores from one input in one pass, use :func:`plan_dataset_write`:
        a ``Delayed`` built on dask arrays holds its own copy of their graph, dask/dask#12318,
        so two of them computed together read their shared input twice.)
    chunk_rows : int, optional
        Zarr chunk rows; default the largest dask row chunk. ``X`` and ``y`` are rechunked
        to exactly that (each dask chunk one Zarr chunk), so parallel writes never share a
        Zarr chunk.

    Returns
    -------
    Dataset, or Delayed when ``compute=False``.
    """
    Xd, yd, counts, meta = _prepared(X, y, store, attrs, chunk_rows)
    if compute and not is_sparse_dask(Xd):
        n, d = Xd.shape
        with _failing_cleanly(store), \
                writing_store(store, overwrite=overwrite, kind="dataset", attrs=meta,
                              storage_options=storage_options) as group:
            targets = [_GuardedTarget(z) for z in _create_xy(group, n, d, meta["chunk_rows"],
                                                             Xd.dtype)]
            try:
                stored = da.store([Xd, yd], targets, lock=False, compute=False)
                _, c = _compute.compute(stored, counts)
            except BaseException:
                for t in targets:
                    t.close_and_wait()
                raise
            group.update_attributes(_counts_attrs(c))
        return open_dataset(store, storage_options=storage_options)
    plan = _planned(Xd, yd, counts, meta, store, overwrite, storage_options)
    if not compute:
        return plan.pending.commit_delayed(*plan.arrays, attrs_from=plan.attrs_from)
    with _failing_cleanly(store):
        plan.commit(plan.run())
    return open_dataset(store, storage_options=storage_options)


@dataclass
class PlannedWrite:
    """A dataset store begun (hidden, :func:`daskauc.store.write.begin_store`) whose writes
    are the lazy dask ``arrays``: compute them (alone, or in one ``dask.compute`` with other
    work, so the input they share with it is read once), then :meth:`commit` the results, or
    :meth:`abort`."""

    pending: PendingStore
    arrays: tuple
    attrs_from: Callable
    gate: Gate

    def run(self) -> tuple:
        """Compute the writes in this process; on failure abort (and re-raise)."""
        try:
            return _compute.compute(*self.arrays)
        except BaseException:
            self.abort()
            raise

    def commit(self, results) -> None:
        """Record the attributes the results give (class counts, non-zeros) and publish."""
        self.pending.commit(self.attrs_from(*results))

    def abort(self) -> None:
        """Refuse the writes still to come, wait for those in flight, remove the store."""
        self.gate.close_and_wait()
        self.pending.abort()


def plan_dataset_write(X, y, store, *, attrs: dict | None = None, overwrite: bool = False,
                       chunk_rows: int | None = None,
                       storage_options: dict | None = None) -> PlannedWrite:
    """Begin the store :func:`write_dataset` writes and return its writes, not yet run (the
    parameters are :func:`write_dataset`'s): several stores written from one input in one
    pass (:func:`daskauc.data.split.split_store`)."""
    Xd, yd, counts, meta = _prepared(X, y, store, attrs, chunk_rows)
    return _planned(Xd, yd, counts, meta, store, overwrite, storage_options)


def _prepared(X, y, store, attrs, chunk_rows):
    """``X`` and ``y`` checked and cut into the store's chunks, the class counts (lazy) and
    the store's attributes."""
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
    if sparse:
        meta.update({ROWS_ATTR: CSR, FORMAT_ATTR: FORMAT_VERSION})
    counts = yd.map_blocks(class_counts_block, chunks=((1,) * yd.numblocks[0], (2,)), new_axis=1,
                           dtype=np.int64, token="daskauc-class-counts").sum(axis=0)
    return Xd, yd, counts, meta


def _planned(Xd, yd, counts, meta, store, overwrite, storage_options) -> PlannedWrite:
    """Begin the store and plan its writes. A sparse store's are one task a row chunk that
    writes its three arrays and its labels and returns ``[non-zeros, negatives,
    positives]``: one array, as a ``Delayed`` of several would copy the labels' graph."""
    n, d, cr = Xd.shape[0], Xd.shape[1], meta["chunk_rows"]
    pending = begin_store(store, kind="dataset", overwrite=overwrite, attrs=meta,
                          storage_options=storage_options)
    gate = Gate()
    if not is_sparse_dask(Xd):
        zX, zy = (_GuardedTarget(z, gate)
                  for z in _create_xy(pending.group, n, d, cr, Xd.dtype))
        stored = da.store([Xd, yd], [zX, zy], lock=False, compute=False)
        return PlannedWrite(pending, (stored, counts), _attrs_from_store_and_counts, gate)
    zy = create_array(pending.group, "y", shape=(n,), chunks=(cr,), dtype=np.int8)
    pending.group.require_group(GROUP)
    written = da.map_blocks(_write_sparse_block, Xd, yd[:, None], pending.group, zy, cr, gate,
                            chunks=((1,) * Xd.numblocks[0], (3,)), dtype=np.int64,
                            meta=np.empty((0, 0), np.int64), token="daskauc-write-csr")
    return PlannedWrite(pending, (written,), _sparse_attrs_from, gate)


def _attrs_from_store_and_counts(_stored, counts) -> dict:
    return _counts_attrs(counts)


def _write_sparse_block(block, labels, group, zy, chunk_rows: int, gate: Gate,
                        block_info=None) -> np.ndarray:
    """Write CSR row chunk ``block`` and its labels; ``[[non-zeros, negatives, positives]]``."""
    first = block_info[0]["array-location"][0][0]
    yb = labels[:, 0]
    with gate:
        nnz = write_csr_chunk(group, first // chunk_rows, block)
        zy[first : first + yb.shape[0]] = yb
    return np.concatenate([[nnz], class_counts_block(yb)[0]])[None, :].astype(np.int64)


def _sparse_attrs_from(per_chunk) -> dict:
    per_chunk = np.asarray(per_chunk).reshape(-1, 3)
    return {**_counts_attrs(per_chunk[:, 1:]), **_csr_attrs(per_chunk[:, 0])}
