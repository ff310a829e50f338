"""The Zarr stores of the k-means Nystroem map: embedding stores and map stores.

An embedding store (:meth:`~daskauc.embed.nystroem.KMeansNystroem.write_embedding`) holds
``X`` (n x r, the map's dtype), ``y`` (int8), a subgroup ``map`` and provenance (parameters,
``input_sha256``, ``map_sha256``, versions, source, class counts) in the group attributes. The
``map`` group, which is also the whole of a map store (:meth:`KMeansNystroem.save`), holds the
landmarks, projection, eigenvalues and scaler statistics, with gamma and the parameters in its
attributes: everything needed to map new points as the stored rows were mapped
(:func:`daskauc.embed.nystroem.load_embedding_map`). Both are written through
:func:`daskauc.store.write.writing_store`, so an interrupted write never looks complete.

The functions here take the fitted map as an argument, and its class where they build one:
:mod:`daskauc.embed.nystroem` calls them, never the other way round.
"""

from __future__ import annotations

import hashlib
import json
import os

import dask
import dask.array as da
import numpy as np

from .. import _config
from .._compute import compute, share
from .._labels import as_labels
from .._params import Interval, check_param
from .._readers import open_path
from .._sparse import is_sparse_dask
from .._validation import as_row_chunked, check_n_features, is_store_path
from .._version import __version__
from ..store.dataset import Dataset, open_dataset
from ..store.protocol import open_store
from ..store.write import create_array, writing_store

#: codec of the embedding X when ``compressor=None``: none. Measured (benchmarks/embed.py,
#: Nystroem features of standardized covtype rows, float32): zstd saves only a few percent of
#: the bytes while writing and reading are slower (docs/benchmarks/embed.md: ratio 1.26, reads
#: 0.52 GB/s against 1.02 GB/s uncompressed).
DEFAULT_COMPRESSOR = "none"

_STORE_KIND_MAP = "nystroem"


def write_embedding(est, map_block, source, store, *, y=None, scaler=None,
                    overwrite: bool = False, chunk_rows: int | None = None,
                    compressor=None) -> Dataset:
    """Map ``source`` by the fitted map ``est`` and write an embedding store (one compute).

    ``map_block(rows, *est._block_args(...))`` maps one block of rows. Parameters and store as
    for :meth:`daskauc.embed.nystroem.KMeansNystroem.write_embedding`.
    """
    source_attrs: dict = {}
    source_path = None
    if is_store_path(source):
        if y is not None:
            raise ValueError("y must not be given when source is a dataset store path")
        ds = open_path(source, what="source")
        X, yy = ds.X, ds.y
        source_attrs, source_path = ds.attrs, os.fspath(source)
    else:
        if y is None:
            raise ValueError("y is required when source is an array (or pass a store path)")
        X = source
        yy, _ = as_labels(y)
    Xd = as_row_chunked(X, dtype=est.dtype, sparse=True)
    n = Xd.shape[0]
    check_n_features(Xd.shape, est.n_features_in_, type(est).__name__)
    if yy.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {yy.shape[0]} labels; they must match")
    mean = scale = None
    if scaler is not None:
        mean, scale = _scaler_stats(scaler, est.n_features_in_)
    elif hasattr(est, "scaler_mean_"):
        mean, scale = est.scaler_mean_, est.scaler_scale_
    r = est.n_components_
    if chunk_rows is None:
        rows = _config.chunk_rows_for(r, Xd.dtype.itemsize, n)
    else:
        rows = check_param("chunk_rows", chunk_rows, Interval(int, 1))
    rows, Xd = _write_chunking(Xd, rows, exact=chunk_rows is not None)
    if isinstance(yy, da.Array):
        yd = yy.astype(np.int8).rechunk((Xd.chunks[0],))
    else:
        yd = da.from_array(np.asarray(yy, dtype=np.int8), chunks=(Xd.chunks[0],), name=False)
    # the projection: scattered
    args = share(est._block_args(Xd.dtype, mean, scale, sparse=is_sparse_dask(Xd)))
    codecs = _codecs(compressor)
    attrs = {
        "n_samples": int(n),
        "n_features": int(r),
        "params": _json_params(est),
        "input_sha256": getattr(est, "input_sha256_", None),
        "map_sha256": _map_sha256(est, mean, scale),
        "versions": _versions(),
        "source": source_path,
        "source_attrs": _jsonable(source_attrs),
        "compressor": str(compressor if compressor is not None else DEFAULT_COMPRESSOR),
    }
    with writing_store(store, overwrite=overwrite, kind="embedding", attrs=attrs) as group:
        zX = create_array(group, "X", shape=(n, r), chunks=(rows, r), dtype=Xd.dtype,
                          compressors=codecs)
        zy = create_array(group, "y", shape=(n,), chunks=(rows,), dtype=np.int8,
                          compressors=codecs)
        # one task per input chunk maps it and writes its output chunks (whole Zarr
        # chunks, so no lock), one at a time: a worker holds one input chunk and one
        # output chunk per thread, however many rows there are
        first_row = da.arange(n, chunks=(Xd.chunks[0],), dtype=np.int64)
        counts = da.blockwise(
            _map_write_block, "i", Xd, "ij", yd, "i", first_row, "i", concatenate=True,
            map_block=map_block, args=args, zX=zX, zy=zy, rows=rows, adjust_chunks={"i": 2},
            dtype=np.int64, token="daskauc-nystroem-write", meta=np.empty((0,), np.int64),
        )
        if dask.base.get_scheduler(collections=[counts]) is dask.threaded.get:
            with _config.blas_limit(1):
                counts = compute(counts)[0]
        else:
            counts = compute(counts)[0]
        nneg, npos = np.asarray(counts).reshape(-1, 2).sum(axis=0)
        if int(npos) + int(nneg) != n:
            raise ValueError("y must hold labels in {-1, +1} (int8) in a dataset store")
        _write_map(group.create_group("map"), est, mean, scale)
        group.update_attributes({"n_positive": int(npos), "n_negative": int(nneg)})
    return open_dataset(store)


def save_map(est, path, overwrite: bool = False) -> None:
    """Write the fitted map ``est`` to a map store (:meth:`KMeansNystroem.save`)."""
    with writing_store(path, overwrite=overwrite, kind=_STORE_KIND_MAP,
                       attrs={"versions": _versions()}) as group:
        _write_map(group, est, getattr(est, "scaler_mean_", None),
                   getattr(est, "scaler_scale_", None))


def load_map(path, cls):
    """The map of a map store, as an instance of ``cls`` (:meth:`KMeansNystroem.load`)."""
    return _read_map(open_store(path, kind=_STORE_KIND_MAP), cls)


def read_embedding_map(store, cls):
    """The map of an embedding store, as an instance of ``cls`` (:func:`load_embedding_map`)."""
    group = open_store(store, kind="embedding")
    if "map" not in group:
        raise ValueError(f"{store} has no 'map' group; was it written by write_embedding?")
    return _read_map(group["map"], cls)


# ----------------------------------------------------------------------------- helpers


def _write_chunking(Xd: da.Array, rows: int, exact: bool) -> tuple[int, da.Array]:
    """Rows per output chunk and the input chunked so that each input chunk holds whole
    output chunks (so one task maps and writes them, and no two tasks share a Zarr chunk).

    With ``exact`` the output has ``rows`` rows per chunk; otherwise ``rows`` is a target,
    and the output chunk is an equal split of the input chunk when the input is chunked
    regularly (a store's chunks: nothing is rechunked), else ``rows`` with the input rechunked
    to about its own chunk size in whole output chunks.
    """
    sizes = Xd.chunks[0]
    c0 = max(sizes)
    regular = all(c == c0 for c in sizes[:-1])
    if not exact and regular:
        if rows // 2 <= c0 <= rows:
            return c0, Xd
        k = -(-c0 // rows)
        for parts in range(k, 2 * k + 1):  # an equal split near the target, if one exists
            if c0 % parts == 0:
                return c0 // parts, Xd
    if regular and c0 % rows == 0:
        return rows, Xd
    group = rows * max(1, round(c0 / rows))
    return rows, Xd.rechunk({0: group})


def _map_write_block(Xb, yb, first, *, map_block, args, zX, zy, rows):
    """Map one input chunk (``map_block(rows, *args)``) and write its output chunks at its
    rows, one output chunk at a time; return its (neg, pos) counts."""
    from ..store.rawchunks import write_rows

    start = int(first[0]) if len(first) else 0
    for s in range(0, Xb.shape[0], rows):
        write_rows(zX, start + s, map_block(Xb[s : s + rows], *args))
        write_rows(zy, start + s, np.asarray(yb[s : s + rows], dtype=np.int8))
    return np.array([np.count_nonzero(yb < 0), np.count_nonzero(yb > 0)], dtype=np.int64)


def _scaler_stats(scaler, d: int):
    """The ``(mean, scale)`` the map applies for ``scaler``: a mean it does not subtract
    (``with_mean=False``, as on sparse rows) is 0, a scale it does not divide by is 1."""
    if not hasattr(scaler, "mean_") or not hasattr(scaler, "scale_"):
        raise TypeError(
            f"scaler must be a fitted object with mean_ and scale_ (e.g. StandardScaler); "
            f"got {type(scaler).__name__}"
        )
    mean = np.zeros(d) if scaler.mean_ is None or not getattr(scaler, "with_mean", True) \
        else np.asarray(scaler.mean_, dtype=np.float64)
    scale = np.ones(d) if scaler.scale_ is None or not getattr(scaler, "with_std", True) \
        else np.asarray(scaler.scale_, dtype=np.float64)
    for name, a in (("mean_", mean), ("scale_", scale)):
        if a.shape != (d,):
            raise ValueError(f"scaler.{name} has shape {a.shape}; the map expects ({d},)")
        if not np.isfinite(a).all():
            raise ValueError(f"scaler.{name} contains NaN or infinity")
    if np.any(scale == 0):
        raise ValueError("scaler.scale_ contains zeros")
    return mean, scale


def _codecs(compressor):
    if compressor is None:
        compressor = DEFAULT_COMPRESSOR
    if isinstance(compressor, str):
        if compressor == "none":
            return None
        if compressor == "zstd":
            from zarr.codecs import ZstdCodec

            return ZstdCodec()
        raise ValueError(f"compressor must be None, 'none', 'zstd' or a Zarr codec; "
                         f"got {compressor!r}")
    return compressor


def _versions() -> dict:
    import numba
    import zarr

    return {"daskauc": __version__, "numpy": np.__version__, "dask": dask.__version__,
            "zarr": zarr.__version__, "numba": numba.__version__}


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def _json_params(est) -> dict:
    p = est.get_params()
    if not isinstance(p["landmarks"], str):
        p["landmarks"] = "array"
    p["dtype"] = None if p["dtype"] is None else np.dtype(p["dtype"]).name
    rs = p["random_state"]
    p["random_state"] = rs if (rs is None or isinstance(rs, int)) else repr(rs)
    return _jsonable(p)


def map_sha256(fmap) -> str:
    """The digest of a fitted Nystroem map (landmarks, projection, its scaler's statistics,
    gamma): the ``map_sha256`` an embedding store made by it records, and a model fitted on
    that store as ``input_map_sha256_``."""
    return _map_sha256(fmap, getattr(fmap, "scaler_mean_", None),
                       getattr(fmap, "scaler_scale_", None))


def _map_sha256(est, mean, scale) -> str:
    h = hashlib.sha256()
    for a in (est.landmarks_, est.projection_, mean, scale):
        if a is not None:
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    h.update(repr(est.gamma_).encode())
    return h.hexdigest()


def _write_map(group, est, mean, scale) -> None:
    arrays = {"landmarks": est.landmarks_, "projection": est.projection_,
              "eigenvalues": est.eigenvalues_}
    if mean is not None:
        arrays["scaler_mean"] = np.asarray(mean, dtype=np.float64)
        arrays["scaler_scale"] = np.asarray(scale, dtype=np.float64)
    for name, a in arrays.items():
        create_array(group, name, data=np.ascontiguousarray(a, dtype=np.float64), compressors=None)
    group.update_attributes({
        "gamma": float(est.gamma_),
        "n_components": int(est.n_components_),
        "n_features_in": int(est.n_features_in_),
        "params": _json_params(est),
        "input_sha256": getattr(est, "input_sha256_", None),
        "map_sha256": _map_sha256(est, mean, scale),
    })


def _read_map(group, cls):
    attrs = dict(group.attrs)
    if "gamma" not in attrs or "projection" not in group:
        raise ValueError("the store holds no Nystroem map (gamma / projection missing)")
    params = dict(attrs["params"])
    landmarks = np.asarray(group["landmarks"][...], dtype=np.float64)
    if params.get("landmarks") == "array":
        params["landmarks"] = landmarks
    if isinstance(params.get("random_state"), str):
        params["random_state"] = None
    est = cls(**params)
    est.landmarks_ = landmarks
    est.components_ = est.landmarks_
    est.projection_ = np.asarray(group["projection"][...], dtype=np.float64)
    est.eigenvalues_ = np.asarray(group["eigenvalues"][...], dtype=np.float64)
    est.gamma_ = float(attrs["gamma"])
    est.n_components_ = int(attrs["n_components"])
    est.n_features_in_ = int(attrs["n_features_in"])
    if attrs.get("input_sha256") is not None:
        est.input_sha256_ = attrs["input_sha256"]
    if "scaler_mean" in group:
        est.scaler_mean_ = np.asarray(group["scaler_mean"][...], dtype=np.float64)
        est.scaler_scale_ = np.asarray(group["scaler_scale"][...], dtype=np.float64)
    if est.projection_.shape != (est.landmarks_.shape[0], est.n_components_):
        raise ValueError("the stored map is inconsistent (projection shape)")
    return est
