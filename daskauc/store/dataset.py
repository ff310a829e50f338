"""Opening a dataset store for reading: ``X`` and ``y`` as dask arrays whose tasks check, on
the worker that reads a chunk, that it is the chunk recorded for its position (the protocol:
:mod:`daskauc.store.protocol`)."""

from __future__ import annotations

import itertools
import os
import socket
from dataclasses import dataclass, field
from typing import Any

import dask.array as da
import numpy as np
import zarr
from dask.base import tokenize

from .. import _config
from .._sparse import sparse_meta
from .protocol import (
    StoreIntegrityError,
    misplaced_chunk,
    open_store,
    recorded_checksums,
    resolve_path,
)
from .sparse import GROUP, PARTS, chunk_path, is_sparse_store
from .urls import storage_fault


class CheckedZarrArray:
    """A Zarr array as dask reads it, refusing absent chunks on the reading worker: Zarr
    returns the fill value for a chunk file that is not there (deleted after the store was
    opened, or a store the worker cannot see at all), which would train on zeros.

    ``checksums`` (chunk key -> CRC32C, from :func:`recorded_checksums`) are what the commit
    recorded for each chunk position: a chunk whose file holds another checksum (files
    swapped or copied over, each still passing its own CRC32C) is refused too. They travel
    with the array to the workers (4 bytes and a key per chunk)."""

    def __init__(self, array: zarr.Array, label: str, checksums: dict[str, int] | None = None):
        from .rawchunks import RawChunks

        self.array, self.label = array, label
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim
        self.checksums = dict(checksums or {})
        # plain-bytes chunks on a local disk: read directly
        self.raw = RawChunks.of(array, self.checksums)

    def __getitem__(self, selection):
        try:
            return self._read(selection)
        except StoreIntegrityError:
            raise
        except Exception as exc:
            # no credentials on this worker, an endpoint it cannot reach: one line naming
            # the store, not botocore's traceback
            fault = storage_fault(exc, self.label)
            if fault is None:
                raise
            raise fault from None

    def _read(self, selection):
        from zarr.abc.store import SuffixByteRequest
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        rows = selection[0].indices(self.shape[0])
        if (self.raw is not None and rows[2] == 1
                and all(s.indices(n) == (0, n, 1) for s, n in
                        zip(selection[1:], self.shape[1:], strict=True))):
            return self.raw.read(rows[0], rows[1], self._fault)
        store, base = self.array.store_path.store, self.array.store_path.path
        ranges = []
        for sl, size, chunk in zip(selection, self.shape, self.array.chunks, strict=True):
            start, stop, _ = sl.indices(size)
            ranges.append(range(start // chunk, max(start // chunk, -(-stop // chunk))))
        for coords in itertools.product(*ranges):
            key = f"{base}/{self.array.metadata.encode_chunk_key(coords)}"
            if key not in self.checksums:
                if not sync(store.exists(key)):
                    raise StoreIntegrityError(self._missing(key))
                continue
            # the stored checksum, 4 bytes (a read as cheap as the existence check it
            # replaces); Zarr then checks the chunk's bytes against it
            tail = sync(store.get(key, default_buffer_prototype(), SuffixByteRequest(4)))
            if tail is None:
                raise StoreIntegrityError(self._missing(key))
            found = int.from_bytes(tail.to_bytes(), "little")
            if found != self.checksums[key]:
                raise StoreIntegrityError(misplaced_chunk(self.label, key, found,
                                                          self.checksums))
        try:
            return self.array[selection]
        except ValueError as exc:  # the crc32c codec: "Stored and computed checksum ..."
            if "checksum" not in str(exc):
                raise
            raise StoreIntegrityError(
                f"{self.label}: a chunk of rows {selection[0].start}:{selection[0].stop} failed "
                f"its checksum (altered on disk): {exc}") from exc

    def _fault(self, kind: str, i: int, key: str, detail: str) -> StoreIntegrityError:
        """The error for chunk ``i`` the raw reader found missing, of the wrong size, altered
        or ``"moved"`` (``detail``: the checksum it holds, in hex)."""
        if kind == "missing":
            return StoreIntegrityError(self._missing(key))
        if kind == "moved":
            return StoreIntegrityError(misplaced_chunk(self.label, key, int(detail, 16),
                                                       self.checksums))
        cr = self.array.chunks[0]
        if kind == "checksum":
            return StoreIntegrityError(
                f"{self.label}: a chunk of rows {i * cr}:{min(self.shape[0], (i + 1) * cr)} "
                f"failed its checksum (altered on disk): {detail}")
        return StoreIntegrityError(f"{self.label}: chunk {key} is truncated or altered "
                                   f"({detail}); write it again")

    def _missing(self, key: str) -> str:
        host = socket.gethostname()
        root = getattr(self.array.store_path.store, "root", None)
        if root is not None and not os.path.exists(root):
            return (f"{self.label}: the store {root} does not exist on host {host} (process "
                    f"{os.getpid()}, working directory {os.getcwd()}): every worker must see "
                    "the store at the same path (shared storage) or through a URL")
        return f"{self.label}: chunk {key} is missing (read on host {host}); write it again"


@dataclass
class Dataset:
    """A dataset store opened as dask arrays."""

    X: da.Array
    y: da.Array
    attrs: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


def open_dataset(path, *, storage_options: dict | None = None) -> Dataset:
    """Open a dataset (or embedding) store as lazy dask arrays, one dask chunk per Zarr chunk."""
    group = open_store(path, kind="dataset", storage_options=storage_options)
    if is_sparse_store(dict(group.attrs)):
        return _open_sparse(group, resolve_path(path))
    if "X" not in group or "y" not in group:
        raise ValueError(f"{path} has no X and y arrays; is it a daskauc dataset store?")
    path = resolve_path(path)
    zX, zy = group["X"], group["y"]
    token = _store_token(group, path)
    X = _checked_dask(zX, f"{path} array X", (zX.chunks[0], zX.shape[1]),
                      f"daskauc-zarr-X-{token}", recorded_checksums(group, "X/"))
    y = _checked_dask(zy, f"{path} array y", (zX.chunks[0],), f"daskauc-zarr-y-{token}",
                      recorded_checksums(group, "y/"))
    return Dataset(X=X, y=y, attrs=dict(group.attrs), path=path)


def _open_sparse(group: zarr.Group, path: str) -> Dataset:
    """A sparse store (:mod:`daskauc.store.sparse`): ``X`` of CSR row chunks."""
    if "y" not in group:
        raise ValueError(f"{path} has no y array; is it a daskauc dataset store?")
    token = _store_token(group, path)
    X = open_csr_X(group, f"{path} X", f"daskauc-zarr-Xcsr-{token}",
                   recorded_checksums(group, f"{GROUP}/"))
    zy = group["y"]
    y = _checked_dask(zy, f"{path} array y", (X.chunks[0],), f"daskauc-zarr-y-{token}",
                      recorded_checksums(group, "y/"))
    return Dataset(X=X, y=y, attrs=dict(group.attrs), path=path)


def _store_token(group: zarr.Group, path: str) -> str:
    """What a read of the store depends on, as a token for its task keys: the resolved path,
    the writer's token and the commit's chunk record. The same unchanged store gives the same
    keys (opened twice, in two processes), a rewritten one new keys; and no user text enters
    a key (keys are msgpack'ed: a path that is not UTF-8 killed every worker and the client
    waited for ever). The record goes in as its JSON text: a fifth of the time of tokenizing
    the dict (2 against 9 ms for 2,000 chunks)."""
    import json

    recorded = group.attrs.get(_config.MANIFEST_ATTR)
    return tokenize(path, group.attrs.get("daskauc_writer"),
                    json.dumps(recorded, sort_keys=True))


def _checked_dask(array: zarr.Array, label: str, chunks, name: str,
                  checksums: dict[str, int]) -> da.Array:
    return da.from_array(CheckedZarrArray(array, label, checksums), chunks=chunks, lock=False,
                         asarray=False, fancy=False, name=name,
                         meta=np.empty((0,) * array.ndim, dtype=array.dtype))


def is_zarr_array(obj: Any) -> bool:
    """True for a ``zarr.Array``."""
    return type(obj).__module__.startswith("zarr") and hasattr(obj, "chunks")


def zarr_array_of(obj) -> zarr.Array | None:
    """The ``zarr.Array`` behind ``obj`` when ``obj`` is one, or is exactly the dask array
    of one (``open_dataset``, ``da.from_zarr``: not sliced, cast or rechunked); else None."""
    if is_zarr_array(obj):
        return obj
    if not isinstance(obj, da.Array):
        return None
    layer = obj.dask.layers.get(f"original-{obj.name}")
    if layer is None or len(layer) != 1:
        return None
    source = next(iter(layer.values()))
    if isinstance(source, CheckedZarrArray):
        source = source.array
    return source if is_zarr_array(source) else None


def zarr_location(arr: zarr.Array) -> tuple[str | None, dict]:
    """(resolved path or URL of the store holding ``arr``, its root group's attributes)."""
    store = arr.store_path.store
    root = getattr(store, "root", None)
    if root is not None:
        location = os.path.abspath(os.fspath(root))
    elif getattr(store, "fs", None) is not None:
        location = store.fs.unstrip_protocol(store.path).rstrip("/")
    else:  # an in-memory Zarr store: no location
        return None, {}
    try:
        attrs = dict(zarr.open_group(store=store, mode="r").attrs)
    except Exception:  # a bare array without a group: no writer token
        attrs = {}
    return location, attrs


class CsrChunkReader:
    """Reads CSR row chunk ``i`` of a sparse store on the worker that needs it: the three
    arrays through :class:`~daskauc.store.dataset.CheckedZarrArray` (each chunk checked
    against the checksum the commit recorded for its position), then their structure
    (pointers from 0 to the values' count, non-decreasing; columns in range, increasing
    within a row), so a damaged or hand-made chunk is an error naming it, never rows that
    no longer line up."""

    def __init__(self, group: zarr.Group, label: str, rows: tuple[int, ...], n_features: int,
                 dtype, checksums: dict[str, int]):
        self.group, self.label, self.rows = group, label, tuple(int(r) for r in rows)
        self.n_features, self.dtype = int(n_features), np.dtype(dtype)
        self.checksums = checksums
        #: each chunk's non-zeros as the writer recorded them (None: not recorded)
        self.chunk_nonzeros = None

    def __call__(self, i: int):
        import scipy.sparse

        where = f"{self.label} row chunk {i} ({chunk_path(i)})"
        try:
            arrays = [self.group[f"{chunk_path(i)}/{name}"] for name in PARTS]
        except KeyError:
            raise StoreIntegrityError(f"{where} is missing; write the store again") from None
        parts = []
        for name, z in zip(PARTS, arrays, strict=True):
            if z.shape[0] == 0:
                parts.append(np.zeros(0, dtype=z.dtype))
                continue
            prefix = f"{chunk_path(i)}/{name}/"
            sums = {k: v for k, v in self.checksums.items() if k.startswith(prefix)}
            parts.append(CheckedZarrArray(z, f"{where} {name}", sums)[(slice(None),)])
        indptr, indices, data = parts
        self._check(where, i, indptr, indices, data)
        return scipy.sparse.csr_matrix((data, indices, indptr),
                                       shape=(self.rows[i], self.n_features))

    def _check(self, where: str, i: int, indptr, indices, data) -> None:
        from ._csr_kernels import CSR_COLUMNS, CSR_OK, CSR_POINTERS, csr_fault

        n = self.rows[i]
        if data.dtype != self.dtype:
            raise StoreIntegrityError(f"{where}: values of dtype {data.dtype}, the store "
                                      f"says {self.dtype}; write the store again")
        fault = csr_fault(indptr, indices, data, n, self.n_features)  # one pass, numba
        if fault == CSR_OK:
            return
        if fault == CSR_POINTERS:
            raise StoreIntegrityError(
                f"{where}: its row pointers do not match its {n} rows and {data.shape[0]} "
                "values; write the store again")
        if fault == CSR_COLUMNS:
            raise StoreIntegrityError(
                f"{where}: column indices out of range [0, {self.n_features}) or not "
                "increasing within a row; write the store again")
        raise StoreIntegrityError(f"{where}: holds NaN or infinity; write the store again")


def _read_chunk(reader: CsrChunkReader, i: int):
    return reader(i)


def open_csr_X(group: zarr.Group, label: str, name: str, checksums: dict[str, int]) -> da.Array:
    """``X`` of a sparse store as a dask array of CSR row chunks (one task a chunk)."""
    attrs = group.attrs
    n, d = int(attrs["n_samples"]), int(attrs["n_features"])
    cr = int(attrs["chunk_rows"])
    rows = tuple([cr] * (n // cr) + ([n % cr] if n % cr else []))
    dtype = np.dtype(attrs["dtype"])
    reader = CsrChunkReader(group, label, rows, d, dtype, checksums)
    counts = attrs.get("chunk_nonzeros")
    if isinstance(counts, list) and len(counts) == len(rows):
        reader.chunk_nonzeros = tuple(int(c) for c in counts)
    graph = {(name, i, 0): (_read_chunk, reader, i) for i in range(len(rows))}
    return da.Array(graph, name, chunks=(rows, (d,)), meta=sparse_meta(d, dtype))
