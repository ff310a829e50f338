"""Zarr store layout and the safe-write protocol shared by datasets, embeddings and models.

A daskauc store is a Zarr (v3) group holding ``X`` (n x d, chunked by rows only), ``y``
(n, int8 in {-1,+1}) and metadata in the group attributes. Writes follow one protocol:

* a local store is written under a hidden sibling directory and renamed into place only when
  complete, so an interrupted write never sits at the final path;
* every store gets the attribute ``daskauc_complete = True`` last, and :func:`open_store`
  refuses a store without it (this is what protects object storage, where renames are not
  atomic);
* an existing store is never replaced unless ``overwrite=True``, and a store that appears at
  the target while a write runs (a second writer) is not replaced either: the later commit
  refuses;
* every array is written with a CRC32C checksum in each chunk (Zarr's ``crc32c`` codec,
  verified on every read) and with every chunk present, even all-zero ones; the commit
  records every chunk file with its size and its checksum (``daskauc_chunks``), and
  :func:`open_store` checks the files against it before anything is read, so a missing or
  truncated chunk is an error that names it, never the fill value Zarr would return for an
  absent chunk. Dataset reads also check, on the worker that reads a chunk, that it is there
  and holds the checksum recorded for its position (:func:`open_dataset`), so chunk files
  swapped or copied over each other are an error too, not rows that no longer line up;
* every user path is resolved once (:func:`~daskauc.store.urls.resolve_path`) to an absolute
  path or a URL before it enters a graph, so workers started in another directory read the
  same store; it never enters a task key (:func:`open_dataset` names its arrays after a token
  of the store);
* the first request to an object store, from :func:`store_exists` and :func:`stored_kind`
  (:func:`~daskauc.store.urls.check_access`), says in one line, before any work, that its
  endpoint does not answer, that its bucket does not exist, or that this process or the Dask
  workers have no credentials for it;
* a writer names its hidden directory after its host and process id; the next writer of the
  same target removes those left by processes that are gone (a crash or ``kill -9``);
* object storage (an fsspec URL: ``s3://``, ``gs://`` ...) has no rename: a store is written
  under the same hidden sibling name and published by copying its objects into place, its
  group metadata first without and last with ``daskauc_complete``, then checked to hold
  exactly the chunks this writer recorded (:func:`daskauc.store.write.begin_store`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import posixpath
import shutil
import socket
import uuid
import warnings

import zarr

from .. import _config
from .urls import (  # noqa: F401 - effective_storage_options: re-exported (its old home)
    check_access,
    effective_storage_options,
    is_url,
    local_path,
    nothing_at,
    resolve_path,
    url_filesystem,
)


class StoreIntegrityError(ValueError):
    """A store's data does not match what daskauc wrote (a missing, truncated or altered
    chunk, or a store the reading worker cannot see)."""


def store_exists(path, storage_options: dict | None = None) -> bool:
    path = resolve_path(path)
    if is_url(path):
        check_access(path, storage_options)
        fs, root = url_filesystem(path, storage_options)
        fs.invalidate_cache(root)  # another process may have written or removed it since
        return fs.exists(root)
    return os.path.exists(local_path(path))


_PARTIAL = ".partial-"


def partial_prefix(final: str) -> str:
    p = posixpath if is_url(final) else os.path
    return p.join(p.dirname(final), f".{p.basename(final)}{_PARTIAL}")


def owned_tmp_name(prefix: str) -> str:
    """``prefix`` + host + pid + a random tag: a name :func:`remove_stale` can attribute."""
    return f"{prefix}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _left_by_dead_writers(prefix: str) -> list[str]:
    """Paths named ``prefix`` + HOST-PID-TAG (see :func:`owned_tmp_name`) whose process, on
    this host, no longer runs."""
    parent, base = os.path.split(prefix)
    try:
        names = sorted(os.listdir(parent or "."))
    except FileNotFoundError:
        return []
    host, out = socket.gethostname(), []
    for name in names:
        parts = name[len(base):].rsplit("-", 2) if name.startswith(base) else []
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit() \
                and not _alive(int(parts[1])):
            out.append(os.path.join(parent, name))
    return out


def remove_stale(prefix: str) -> list[str]:
    """Remove what killed writers left under ``prefix`` (this host's dead processes only;
    those of live processes, or of other hosts, are left alone); return the paths."""
    removed = _left_by_dead_writers(prefix)
    for path in removed:
        remove_path(path)
    return removed


def remove_path(path: str) -> None:
    """Remove a directory tree, a file or a link, as far as possible (errors ignored)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)


def _is_complete_store(path: str) -> bool:
    """A directory (not a link) whose group metadata says a daskauc commit completed it."""
    import json

    if os.path.islink(path) or not os.path.isdir(path):
        return False
    try:
        with open(os.path.join(path, "zarr.json"), "rb") as f:
            attrs = json.load(f).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(attrs, dict) and attrs.get(_config.COMPLETE_ATTR) is True


def restore_interrupted(final: str) -> bool:
    """Undo a replace (``overwrite=True``) killed between its two renames: the previous store
    sits at ``<partial>.old`` and nothing at ``final``. Move it back and return True; a
    checkpoint is then never lost by a kill during its own save. Only a complete daskauc
    store is moved back: what an overwrite replaced may have been a file, or anything."""
    if is_url(final) or os.path.lexists(final):
        return False
    for path in _left_by_dead_writers(partial_prefix(final)):
        if path.endswith(".old") and _is_complete_store(path):
            os.rename(path, final)
            warnings.warn(f"{final}: restored the previous store, whose replacement was "
                          "interrupted", stacklevel=3)
            return True
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stored_kind(path, storage_options: dict | None = None) -> str | None:
    """The ``daskauc_kind`` of the store at ``path`` (complete or not); None when ``path`` is
    not a daskauc store (a file, another directory, a foreign Zarr group)."""
    path = resolve_path(path)
    if is_url(path):  # an endpoint that does not answer, no credentials: said, not None
        check_access(path, storage_options)
    try:
        group = zarr.open_group(path if is_url(path) else local_path(path), mode="r",
                                storage_options=storage_options)
    except Exception:  # noqa: BLE001 - anything that is not a readable Zarr group
        return None
    kind = group.attrs.get("daskauc_kind")
    return kind if isinstance(kind, str) else None


_METADATA_FILES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


def list_chunks(root: str, storage_options: dict | None) -> dict[str, int]:
    """Every chunk file under a store (relative key -> size in bytes), metadata excluded.

    A symbolic link anywhere inside a local store (file or directory; the store's own path
    may be one) is a :class:`StoreIntegrityError`: daskauc never writes one, and one would
    make a read (of a model's ``coef_``, say) come from a file outside the store."""
    out = {}
    if is_url(root):
        fs, found = url_filesystem(root, storage_options)
        base = found + "/"
        for p, info in fs.find(found, detail=True).items():
            if info.get("type") != "directory" and p.rsplit("/", 1)[-1] not in _METADATA_FILES:
                out[p[len(base):] if p.startswith(base) else p] = int(info["size"])
        return out
    todo = [("", local_path(root))]
    while todo:  # scandir: the link test costs no system call, the size one lstat per file
        rel, where = todo.pop()
        with os.scandir(where) as entries:
            for entry in entries:
                key = f"{rel}{entry.name}"
                if entry.is_symlink():
                    raise StoreIntegrityError(
                        f"{root}: {key} is a symbolic link (to {os.readlink(entry.path)}); a "
                        "daskauc store holds no links, which could make a read come from "
                        "outside the store: replace it with what it points to, or write the "
                        "store again")
                if entry.is_dir(follow_symlinks=False):
                    todo.append((f"{key}/", entry.path))
                elif entry.name not in _METADATA_FILES:
                    out[key] = entry.stat(follow_symlinks=False).st_size
    return out


def trailing_checksums(root: str, storage_options: dict | None,
                        sizes: dict[str, int]) -> dict[str, int]:
    """Chunk key -> the CRC32C that Zarr's ``crc32c`` codec appended to the chunk file (its
    last 4 bytes, little endian): one 4-byte read per file, never a pass over the data."""
    keys = [k for k, n in sizes.items() if n >= 4]
    if is_url(root):
        fs, base = url_filesystem(root, storage_options)
        base += "/"
        tails = fs.cat_ranges([base + k for k in keys], [sizes[k] - 4 for k in keys],
                              [sizes[k] for k in keys], on_error="raise")
    else:
        tails = []
        for k in keys:
            fd = os.open(os.path.join(root, k), os.O_RDONLY)
            try:
                tails.append(os.pread(fd, 4, sizes[k] - 4))
            finally:
                os.close(fd)
    return {k: int.from_bytes(t, "little") for k, t in zip(keys, tails, strict=True)}


def checksummed_keys(group: zarr.Group) -> list[str]:
    """The chunk keys of every array whose chunks end with a CRC32C (the last codec)."""
    from zarr.codecs import Crc32cCodec

    return [k for name, arr in _arrays(group)
            if isinstance(getattr(arr.metadata, "codecs", [None])[-1], Crc32cCodec)
            for k in _grid_keys(arr, f"{name}/")]


def _grid_keys(arr: zarr.Array, prefix: str):
    grid = [range(math.ceil(s / c) if c else 0)  # a zero-size array has no chunk
            for s, c in zip(arr.shape, arr.chunks, strict=True)]
    for coords in itertools.product(*grid):
        yield f"{prefix}{arr.metadata.encode_chunk_key(coords)}"


def _foreign_children(group: zarr.Group, recorded: dict, prefix: str = "") -> list:
    """(name, what) of the groups and arrays inside ``group`` that its writer did not make: a
    daskauc store (a group with its own ``daskauc_kind``), or an array none of whose chunks
    the commit recorded (an array the writer made with no chunk at all, size zero, is its
    own)."""
    out = []
    for name, sub in group.groups():
        kind = sub.attrs.get("daskauc_kind")
        if isinstance(kind, str):
            out.append((f"{prefix}{name}", f"a daskauc {kind} store"))
        else:
            out += _foreign_children(sub, recorded, f"{prefix}{name}/")
    for name, arr in group.arrays():
        keys = list(itertools.islice(_grid_keys(arr, f"{prefix}{name}/"), 1))
        if keys and not any(k.startswith(f"{prefix}{name}/") for k in recorded):
            out.append((f"{prefix}{name}", "a Zarr array"))
    return out


def _arrays(group: zarr.Group, prefix: str = ""):
    for name, arr in group.arrays():
        yield f"{prefix}{name}", arr
    for name, sub in group.groups():
        yield from _arrays(sub, f"{prefix}{name}/")


def check_grid(group: zarr.Group, chunks: dict[str, int], where: str) -> None:
    """At commit: every chunk of every array's grid was written (a write that skipped one
    would otherwise commit a store that reads fill values there)."""
    for name, arr in _arrays(group):
        missing = [k for k in _grid_keys(arr, f"{name}/") if k not in chunks]
        if missing:
            raise StoreIntegrityError(
                f"{where}: the write left {len(missing)} chunk(s) of array {name!r} unwritten "
                f"(first: {missing[0]}); the store was not committed")


def _chunk_records(recorded, path: str) -> tuple[dict[str, int], dict[str, int]]:
    """The commit's record (``MANIFEST_ATTR``) as chunk key -> size and chunk key -> CRC32C.

    Each chunk is recorded as ``[size, crc32c]`` (``crc32c`` None for an array written
    without checksums). Stores committed before checksums were recorded hold ``size`` alone:
    they are still read (their sizes checked; their chunks weeks of work for some), and
    :func:`verify_store` warns that a swap cannot be detected in them."""
    if not isinstance(recorded, dict):
        raise StoreIntegrityError(f"{path} is damaged: its chunk record is malformed; it "
                                  "cannot be used: restore or write it again")
    sizes, sums = {}, {}
    for key, rec in recorded.items():
        if type(rec) is int:  # (a bool is not a size)
            sizes[key] = rec
        elif (isinstance(rec, list) and len(rec) == 2 and type(rec[0]) is int
              and (rec[1] is None or (type(rec[1]) is int and 0 <= rec[1] < 2**32))):
            sizes[key] = rec[0]
            if rec[1] is not None:
                sums[key] = rec[1]
        else:
            raise StoreIntegrityError(
                f"{path} is damaged: the record of chunk {key} is malformed ({rec!r}); it "
                "cannot be used: restore or write it again")
    return sizes, sums


def recorded_checksums(group: zarr.Group, prefix: str = "") -> dict[str, int]:
    """Chunk key -> the CRC32C the commit recorded for it, for the chunks under ``prefix``
    (``"X/"``): what a reader compares each chunk's stored checksum with."""
    recorded = group.attrs.get(_config.MANIFEST_ATTR)
    if recorded is None:
        return {}
    _, sums = _chunk_records(recorded, "the store")
    return {k: c for k, c in sums.items() if k.startswith(prefix)}


def misplaced_chunk(label: str, key: str, found: int, recorded: dict[str, int]) -> str:
    """The message for chunk ``key`` whose file holds checksum ``found``, not the one the
    commit recorded for that position (``recorded``: key -> CRC32C)."""
    owners = [k for k, c in recorded.items() if c == found and k != key]
    what = (f"holds the data written as chunk{'s' * (len(owners) > 1)} {', '.join(owners[:3])}"
            if owners else f"holds data written at no position of it (checksum {found:08x}, "
            f"{recorded[key]:08x} was written)")
    return (f"{label}: chunk {key} {what} (chunk files swapped, copied over or altered "
            "after the write); it cannot be used: restore or write the store again")


def verify_chunk_checksums(group: zarr.Group, path, storage_options: dict | None = None
                           ) -> None:
    """Check that every recorded chunk file holds the checksum recorded for its position: one
    4-byte read per chunk, for stores read whole at once (models); dataset reads do this per
    chunk on the worker that reads it."""
    recorded = group.attrs.get(_config.MANIFEST_ATTR)
    if recorded is None:
        return
    path = resolve_path(path)
    sizes, sums = _chunk_records(recorded, path)
    found = trailing_checksums(local_path(path), storage_options, {k: sizes[k] for k in sums})
    for key, crc in sums.items():
        if key not in found:
            raise StoreIntegrityError(f"{path}: chunk {key} is too short to hold its checksum; "
                                      "it cannot be used: restore or write the store again")
        if found[key] != crc:
            raise StoreIntegrityError(misplaced_chunk(path, key, found[key], sums))


def verify_store(group: zarr.Group, path: str, storage_options: dict | None = None) -> None:
    """Check that every chunk file the commit recorded is present with its recorded size, and
    that the store holds no symbolic link."""
    recorded = group.attrs.get(_config.MANIFEST_ATTR)
    present = list_chunks(path, storage_options)  # refuses symbolic links, record or not
    if recorded is None:
        warnings.warn(f"{path} was written by a daskauc without chunk records (store format "
                      f"{group.attrs.get('daskauc_format')}); its chunks cannot be verified: "
                      "write it again with this version", stacklevel=3)
        return
    sizes, _ = _chunk_records(recorded, path)
    if any(type(r) is int for r in recorded.values()):  # the size-only form
        warnings.warn(f"{path} was written by a daskauc that recorded chunk sizes only: chunk "
                      "files swapped with others of the same size cannot be detected in it; "
                      "write it again with this version", stacklevel=3)
    foreign = _foreign_children(group, recorded)
    if foreign:
        name, what = foreign[0]
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise StoreIntegrityError(
            f"{path} holds {name!r}, {what}{more}, which its writer did not write: something "
            f"was written inside {path} (its own data is intact); move {name!r} out of it "
            "(or remove it) and it opens again")
    bad = []
    for key, size in sizes.items():
        if key not in present:
            bad.append(f"chunk {key} is missing")
        elif present[key] != size:
            bad.append(f"chunk {key} has {present[key]} bytes, {size} were written "
                       "(truncated or altered)")
    for name, arr in _arrays(group):  # a shape edited after the write declares more chunks
        extra = next((k for k in _grid_keys(arr, f"{name}/") if k not in recorded), None)
        if extra is not None:
            bad.append(f"array {name!r} declares shape {arr.shape} but chunk {extra} was "
                       "never written (its metadata was altered)")
            break
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise StoreIntegrityError(f"{path} is damaged: {bad[0]}{more}; it cannot be used: "
                                  "restore or write it again")


def open_store(path, *, kind: str | None = None, storage_options: dict | None = None,
               mode: str = "r", verify: bool = True) -> zarr.Group:
    """Open a complete daskauc store, with clear errors for a missing, partial or damaged one
    (its chunk files are checked against the commit's record unless ``verify=False``)."""
    path = resolve_path(path)
    if not store_exists(path, storage_options) and not restore_interrupted(path):
        raise FileNotFoundError(f"no store at {path}: {nothing_at(path)}" if is_url(path)
                                else f"no store at {path}")
    try:
        group = zarr.open_group(path if is_url(path) else local_path(path), mode=mode,
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
    if verify:
        verify_store(group, path, storage_options)
    return group


def _compatible(kind: str) -> tuple[str, ...]:
    # an embedding store has the dataset layout (X, y) plus the fitted map
    return ("embedding",) if kind == "dataset" else ()
