"""The outputs of a scoring pass, by the output's name.

* ``NAME.zarr``: a Zarr group (store kind ``"scores"``) holding 1-D ``id``,
  ``decision_function`` and ``probability`` in the input's row chunks, written and committed
  by the protocol of :mod:`daskauc.store.write`.
* ``NAME.parquet``: a directory of one part file per row chunk (``part-00000.parquet`` ...,
  in row order) and a record ``_daskauc.json`` (what was scored, the rows of each part and
  ``daskauc_complete``), written in a hidden sibling directory and renamed into place when
  complete; on object storage, where renames are copies, the parts are moved into place and
  the record written last. Readers of Parquet directories (pyarrow, dask, pandas, Spark)
  skip names starting with ``_`` or ``.``. An existing output is replaced only with
  ``overwrite``, and then only scores daskauc wrote (or an empty directory).

A task writes its chunk through a sink (:class:`ZarrSink`, :class:`ParquetSink`) guarded by a
:class:`Gate`, so that a failed pass removes a partial output no task writes to any more.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..store.protocol import (
    is_url,
    local_path,
    owned_tmp_name,
    partial_prefix,
    remove_path,
    remove_stale,
    resolve_path,
    store_exists,
    url_filesystem,
)
from ..store.write import Gate, check_directory, check_outside_stores
from .inputs import arrow_kind, is_path, pyarrow_modules

#: the columns (Parquet) or arrays (Zarr) of a scores output, in this order
COLUMNS = ("id", "decision_function", "probability")
#: the record of a Parquet scores output, written last
RECORD = "_daskauc.json"
#: the store kind of a Zarr scores output (and of a Parquet one's record)
KIND = "scores"


class ZarrSink:
    """Writes a chunk's scores into the pending Zarr group (whole output chunks)."""

    def __init__(self, arrays: dict, root: str | None, gate: Gate):
        self.arrays, self.root, self.gate = arrays, root, gate

    def write(self, index: int, start: int, ids, d, p) -> None:
        values = (_numpy_ids(ids), d, p)
        with self.gate:
            if self.root is not None and not os.path.isdir(self.root):
                raise RuntimeError(f"{self.root} was removed (the write failed elsewhere)")
            for name, v in zip(COLUMNS, values, strict=True):
                self.arrays[name][start : start + len(v)] = v


def _numpy_ids(ids):
    """Ids as Zarr stores them: int64, uint64, float64 or text."""
    if isinstance(ids, np.ndarray):
        return ids
    kind = arrow_kind(ids.type)
    if kind == "T":
        return np.asarray(ids.to_pylist(), dtype=str)
    return np.asarray(ids.to_numpy(zero_copy_only=False), dtype=kind + "8")


class ParquetSink:
    """Writes a chunk's scores as one part file of the hidden Parquet directory."""

    def __init__(self, where: str, url: bool, storage_options, digits: int, gate: Gate):
        self.where, self.url, self.storage_options = where, url, storage_options
        self.digits, self.gate = digits, gate

    def name(self, index: int) -> str:
        return f"part-{index:0{self.digits}d}.parquet"

    def write(self, index: int, start: int, ids, d, p) -> None:
        pa, pq = pyarrow_modules()
        id_array = pa.array(ids) if isinstance(ids, np.ndarray) else ids
        table = pa.Table.from_arrays([id_array, pa.array(d), pa.array(p)], names=list(COLUMNS))
        with self.gate:
            if self.url:
                fs, root = url_filesystem(self.where, self.storage_options)
                with fs.open(f"{root}/{self.name(index)}", "wb") as f:
                    pq.write_table(table, f)
            else:  # no directory is created: a removed (failed) one stays removed
                # opened here: pyarrow encodes a str path as UTF-8, which a name that is
                # not (os.fsdecode's surrogates) cannot be
                with open(os.path.join(self.where, self.name(index)), "wb") as f:
                    pq.write_table(table, f)


# ----------------------------------------------------------------------------- outputs


def output_format(output) -> str:
    """``"zarr"`` or ``"parquet"``, by the output's name."""
    if not is_path(output):
        raise TypeError(f"output must be a path or URL; got {type(output).__name__}")
    name = os.fspath(output).rstrip("/").lower()
    if name.endswith(".zarr"):
        return "zarr"
    if name.endswith(".parquet"):
        return "parquet"
    raise ValueError(f"cannot tell the format of the output {os.fspath(output)}: name it "
                     "NAME.zarr (a Zarr group) or NAME.parquet (a Parquet directory)")


def _held_record(target: str, storage_options) -> dict | None:
    """The record of a Parquet scores output at ``target``; None when there is none."""
    try:
        if is_url(target):
            fs, root = url_filesystem(target, storage_options)
            with fs.open(f"{root}/{RECORD}", "rb") as f:
                record = json.load(f)
        else:
            with open(os.path.join(local_path(target), RECORD), "rb") as f:
                record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("daskauc_kind") == KIND else None


def _replaceable(target: str, storage_options) -> bool:
    """An existing output ``overwrite`` may replace: scores daskauc wrote, or (locally) an
    empty directory, which holds nothing to lose."""
    local = None if is_url(target) else local_path(target)
    if local is not None and os.path.isdir(local) and not os.path.islink(local) \
            and not os.listdir(local):
        return True
    return _held_record(target, storage_options) is not None


def begin_parquet(output: str, storage_options) -> str:
    """Create the hidden directory a Parquet output is written in (beside ``output``, named
    after this host and process: what killed writers left there is removed first)."""
    prefix = partial_prefix(output)
    tmp = owned_tmp_name(prefix)
    if is_url(output):
        fs, root = url_filesystem(tmp, storage_options)
        fs.makedirs(root, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(output), exist_ok=True)
        remove_stale(prefix)
        os.makedirs(tmp)
    return tmp


def check_parquet_output(path, *, overwrite: bool, inputs, expected_bytes: int,
                          storage_options) -> str:
    """As :func:`daskauc.store.write.check_output` for a Parquet directory: not an input,
    replaced only with ``overwrite`` and only when it holds scores daskauc wrote (or
    nothing), its directory writable with room for the scores."""
    target = resolve_path(path)
    for other in inputs:
        if other is not None and resolve_path(other) == target:
            raise ValueError(f"{os.fspath(path)} is also an input of this command; "
                             "an output never replaces its input: choose another path")
    check_outside_stores(path, storage_options)
    if store_exists(target, storage_options):
        if not overwrite:
            raise FileExistsError(f"{os.fspath(path)} already exists; pass overwrite=True "
                                  "(--overwrite) to replace it")
        if not _replaceable(target, storage_options):
            raise FileExistsError(f"{os.fspath(path)} is not scores written by daskauc; "
                                  "daskauc replaces only its own outputs: remove it yourself "
                                  "or choose another path")
    if not is_url(target):
        check_directory(target, expected_bytes, shown=os.fspath(path))
    return target


def commit_parquet(tmp: str, final: str, record: dict, overwrite: bool,
                    storage_options) -> None:
    """The record written last into the complete directory, which is then moved into place:
    a rename locally (``rename(2)`` refuses a non-empty target: a directory that appeared
    meanwhile is never replaced unasked), part by part then the record on object storage."""
    body = json.dumps(record).encode()
    if is_url(final):
        fs, root = url_filesystem(final, storage_options)
        _, troot = url_filesystem(tmp, storage_options)
        if fs.exists(root):
            if not overwrite or not _replaceable(final, storage_options):
                raise FileExistsError(f"{final} appeared while this write ran (another "
                                      "writer?); it was not replaced")
            fs.rm(f"{root}/{RECORD}")  # no longer complete, then replaced
            fs.rm(root, recursive=True)
        for part in record["parts"]:
            fs.mv(f"{troot}/{part['file']}", f"{root}/{part['file']}")
        fs.pipe(f"{root}/{RECORD}", body)
        remove_any(tmp, storage_options)
        return
    with open(os.path.join(tmp, RECORD), "wb") as f:
        f.write(body)
    if not overwrite or not os.path.lexists(final):
        try:
            os.rename(tmp, final)
        except OSError as exc:
            raise FileExistsError(f"{final} appeared while this write ran (another writer?); "
                                  "it was not replaced; pass overwrite=True (--overwrite) to "
                                  "replace it") from exc
        return
    if not _replaceable(final, storage_options):  # what appeared meanwhile stays
        raise FileExistsError(f"{final} appeared while this write ran and is not scores "
                              "written by daskauc; it was not replaced")
    old = f"{tmp}.old"
    os.replace(final, old)
    try:
        os.replace(tmp, final)
    except OSError:
        os.replace(old, final)  # the user's output back before reporting
        raise
    os.replace(old, f"{tmp}.del")
    remove_path(f"{tmp}.del")


def remove_any(path: str, storage_options) -> None:
    """Remove a local tree or file, or everything under a URL (errors ignored)."""
    if is_url(path):
        fs, root = url_filesystem(path, storage_options)
        try:
            fs.rm(root, recursive=True)
        except (OSError, FileNotFoundError):
            pass
    else:
        remove_path(path)
