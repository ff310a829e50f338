"""Zarr store layout and the safe-write protocol shared by datasets, embeddings and models.

A daskauc store is a Zarr (v3) group holding ``X`` (n x d, chunked by rows only), ``y``
(n, int8 in {-1,+1}) and metadata in the group attributes. Writes follow one protocol:

* a local store is written under a hidden sibling directory and renamed into place only when
  complete, so an interrupted write never sits at the final path;
* every store gets the attribute ``daskauc_complete = True`` last, and :func:`open_store`
  refuses a store without it (this is what protects object storage, where renames are not
  atomic);
* an existing store is never replaced unless ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import zarr
from dask.base import tokenize
from dask.delayed import Delayed

from .. import _config
from .._version import __version__


def _is_url(path: str) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def _local(path) -> str:
    p = os.fspath(path)
    return p[len("file://") :] if p.startswith("file://") else p


def store_exists(path, storage_options: dict | None = None) -> bool:
    path = os.fspath(path)
    if _is_url(path):
        import fsspec

        fs, _, paths = fsspec.get_fs_token_paths(path, storage_options=storage_options)
        return fs.exists(paths[0])
    return os.path.exists(_local(path))


@contextlib.contextmanager
def writing_store(path, *, overwrite: bool = False, kind: str, attrs: dict | None = None,
                  storage_options: dict | None = None):
    """Create a store safely; yield its open ``zarr.Group``.

    On normal exit the group is marked complete and (for local paths) moved into place; on an
    exception the partial store is removed and whatever was at ``path`` is left untouched.
    """
    pending = begin_store(path, kind=kind, overwrite=overwrite, attrs=attrs,
                          storage_options=storage_options)
    try:
        yield pending.group
    except BaseException:
        pending.abort()
        raise
    pending.commit()


class PendingStore:
    """A store being written by a dask graph that has not run yet.

    Same protocol as :func:`~daskauc.data.store.writing_store`, split in two so the write
    can share a pass with other work: :func:`begin_store` creates the group (at a hidden
    sibling path for local stores) and :meth:`commit` marks it complete and moves it into
    place. ``commit`` is a plain picklable function of strings, so it runs as the last task
    of the graph on whichever worker; if the graph fails, the partial store stays hidden
    (at ``tmp``) and never opens as complete.
    """

    def __init__(self, group: zarr.Group, final: str, tmp: str | None,
                 storage_options: dict | None):
        self.group, self.final, self.tmp, self.storage_options = group, final, tmp, storage_options

    def commit_delayed(self, *deps, attrs_from=None, name: str = "daskauc-write") -> Delayed:
        """A Delayed that waits for ``deps``, adds ``attrs_from(*results)`` and commits."""
        token = tokenize(self.final, self.tmp, [getattr(d, "key", d) for d in deps])
        return dask.delayed(_commit, pure=False)(
            self.final, self.tmp, self.storage_options, attrs_from, *deps,
            dask_key_name=f"{name}-commit-{token}")

    def commit(self, extra_attrs: dict | None = None) -> str:
        """Mark the store complete and move it into place (in this process)."""
        return _commit(self.final, self.tmp, self.storage_options,
                       (lambda: extra_attrs) if extra_attrs else None)

    def abort(self) -> None:
        """Remove the hidden partial store (local stores)."""
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


def begin_store(path, *, kind: str, overwrite: bool = False, attrs: dict | None = None,
                storage_options: dict | None = None) -> PendingStore:
    """Start a store whose data a later compute writes; see :class:`PendingStore`."""
    path = os.fspath(path)
    if store_exists(path, storage_options) and not overwrite:
        raise FileExistsError(
            f"{path} already exists; pass overwrite=True (--overwrite) to replace it")
    base = {"daskauc_kind": kind, "daskauc_version": __version__,
            "daskauc_format": _config.STORE_FORMAT, **(attrs or {})}
    if _is_url(path):
        group = zarr.open_group(path, mode="w", storage_options=storage_options)
        group.attrs.update(base)
        return PendingStore(group, path, None, storage_options)
    final = os.path.abspath(_local(path))
    parent = os.path.dirname(final) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(final)}.partial-{uuid.uuid4().hex[:8]}")
    group = zarr.open_group(tmp, mode="w")
    group.attrs.update(base)
    return PendingStore(group, final, tmp, storage_options)


def _commit(final, tmp, storage_options, attrs_from, *results):
    extra = attrs_from(*results) if attrs_from is not None else {}
    where = tmp if tmp is not None else final
    group = zarr.open_group(where, mode="r+", storage_options=None if tmp else storage_options)
    group.attrs.update({**extra, _config.COMPLETE_ATTR: True})
    if tmp is None:
        return final
    old = None
    if os.path.exists(final):
        old = f"{tmp}.old"
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


def open_store(path, *, kind: str | None = None, storage_options: dict | None = None,
               mode: str = "r") -> zarr.Group:
    """Open a complete daskauc store, with clear errors for a missing or partial one."""
    path = os.fspath(path)
    if not store_exists(path, storage_options):
        raise FileNotFoundError(f"no store at {path}")
    try:
        group = zarr.open_group(path if _is_url(path) else _local(path), mode=mode,
                                storage_options=storage_options)
    except Exception as exc:  # zarr raises several types for "not a group"
        raise FileNotFoundError(f"{path} is not a Zarr group: {exc}") from exc
    attrs = dict(group.attrs)
    if not attrs.get(_config.COMPLETE_ATTR):
        raise ValueError(
            f"{path} is incomplete (its write was interrupted or is still running); "
            "write it again"
        )
    if kind is not None and attrs.get("daskauc_kind") not in (kind, *_compatible(kind)):
        raise ValueError(
            f"{path} holds a daskauc {attrs.get('daskauc_kind')!r} store, not a {kind!r} store"
        )
    return group


def _compatible(kind: str) -> tuple[str, ...]:
    # an embedding store has the dataset layout (X, y) plus the fitted map
    return ("embedding",) if kind == "dataset" else ()


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
    if "X" not in group or "y" not in group:
        raise ValueError(f"{path} has no X and y arrays; is it a daskauc dataset store?")
    zX, zy = group["X"], group["y"]
    name = f"daskauc-zarr-{os.path.basename(os.fspath(path).rstrip('/'))}"
    X = da.from_zarr(zX, chunks=(zX.chunks[0], zX.shape[1]),
                     name=f"{name}-X-{uuid.uuid4().hex[:6]}")
    y = da.from_zarr(zy, chunks=(zX.chunks[0],), name=f"{name}-y-{uuid.uuid4().hex[:6]}")
    return Dataset(X=X, y=y, attrs=dict(group.attrs), path=os.fspath(path))
