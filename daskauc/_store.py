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
* every user path is resolved once (:func:`resolve_path`) to an absolute path or a URL
  before it enters a graph, so workers started in another directory read the same store; it
  never enters a task key (:func:`open_dataset` names its arrays after a token of the store);
* a writer names its hidden directory after its host and process id; the next writer of the
  same target removes those left by processes that are gone (a crash or ``kill -9``).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import math
import os
import shutil
import socket
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import zarr
from dask.base import tokenize
from dask.delayed import Delayed

from . import _config
from ._version import __version__


class StoreIntegrityError(ValueError):
    """A store's data does not match what daskauc wrote (a missing, truncated or altered
    chunk, or a store the reading worker cannot see)."""


def _is_url(path: str) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def _local(path) -> str:
    p = os.fspath(path)
    return p[len("file://") :] if p.startswith("file://") else p


def resolve_path(path) -> str:
    """The one place a user's path becomes what goes into a graph: an absolute local path
    (``~`` expanded, ``file://`` stripped) or an fsspec URL unchanged. A relative path sent to
    workers as is would be read relative to each worker's working directory."""
    p = os.fspath(path)
    if _is_url(p):
        return p.rstrip("/")
    return os.path.abspath(os.path.expanduser(_local(p)))


def store_exists(path, storage_options: dict | None = None) -> bool:
    path = resolve_path(path)
    if _is_url(path):
        import fsspec

        fs, _, paths = fsspec.get_fs_token_paths(path, storage_options=storage_options)
        return fs.exists(paths[0])
    return os.path.exists(_local(path))


def create_array(group: zarr.Group, name: str, *, compressors="auto", **kwargs) -> zarr.Array:
    """Create an array the way every daskauc array is written: the given compressors (Zarr's
    default, zstd, for ``"auto"``; none for ``None``) followed by a CRC32C checksum in each
    chunk, and every chunk written even when it holds only the fill value, so that the commit's
    chunk list is the array's whole chunk grid and an absent chunk is always a fault."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    if isinstance(compressors, str) and compressors == "auto":
        codecs = [ZstdCodec()]
    elif compressors is None:
        codecs = []
    elif isinstance(compressors, (list, tuple)):
        codecs = list(compressors)
    else:
        codecs = [compressors]
    if _config.CHECKSUMS:
        codecs.append(Crc32cCodec())
    return group.create_array(name, compressors=codecs, config={"write_empty_chunks": True},
                              **kwargs)


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
        pending.commit()
    except BaseException:
        pending.abort()
        raise


class PendingStore:
    """A store being written by a dask graph that has not run yet.

    Same protocol as :func:`~daskauc._store.writing_store`, split in two so the write
    can share a pass with other work: :func:`begin_store` creates the group (at a hidden
    sibling path for local stores) and :meth:`commit` marks it complete and moves it into
    place. ``commit`` is a plain picklable function of strings, so it runs as the last task
    of the graph on whichever worker; if the graph fails, the partial store stays hidden
    (at ``tmp``) and never opens as complete.
    """

    def __init__(self, group: zarr.Group, final: str, tmp: str | None,
                 storage_options: dict | None, overwrite: bool = False, writer: str = ""):
        self.group, self.final, self.tmp, self.storage_options = group, final, tmp, storage_options
        self.overwrite, self.writer = overwrite, writer

    def commit_delayed(self, *deps, attrs_from=None, name: str = "daskauc-write") -> Delayed:
        """A Delayed that waits for ``deps``, adds ``attrs_from(*results)`` and commits."""
        token = tokenize(self.final, self.tmp, [getattr(d, "key", d) for d in deps])
        return dask.delayed(_commit, pure=False)(
            self._target(), attrs_from, *deps, dask_key_name=f"{name}-commit-{token}")

    def commit(self, extra_attrs: dict | None = None) -> str:
        """Mark the store complete and move it into place (in this process)."""
        return _commit(self._target(), (lambda: extra_attrs) if extra_attrs else None)

    def abort(self) -> None:
        """Remove the hidden partial store (local stores)."""
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _target(self) -> tuple:
        return (self.final, self.tmp, self.storage_options, self.overwrite, self.writer)


_PARTIAL = ".partial-"


def _partial_prefix(final: str) -> str:
    return os.path.join(os.path.dirname(final), f".{os.path.basename(final)}{_PARTIAL}")


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
        _remove(path)
    return removed


def _remove(path: str) -> None:
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
    if _is_url(final) or os.path.lexists(final):
        return False
    for path in _left_by_dead_writers(_partial_prefix(final)):
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


def begin_store(path, *, kind: str, overwrite: bool = False, attrs: dict | None = None,
                storage_options: dict | None = None) -> PendingStore:
    """Start a store whose data a later compute writes; see :class:`PendingStore`."""
    path = resolve_path(path)
    restore_interrupted(path)
    check_writable(path, overwrite=overwrite, storage_options=storage_options, kind=kind)
    writer = uuid.uuid4().hex
    base = {"daskauc_kind": kind, "daskauc_version": __version__,
            "daskauc_format": _config.STORE_FORMAT, "daskauc_writer": writer, **(attrs or {})}
    if _is_url(path):
        group = zarr.open_group(path, mode="w", storage_options=storage_options)
        group.attrs.update(base)
        return PendingStore(group, path, None, storage_options, overwrite, writer)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    remove_stale(_partial_prefix(path))
    tmp = owned_tmp_name(_partial_prefix(path))
    group = zarr.open_group(tmp, mode="w")
    group.attrs.update(base)
    return PendingStore(group, path, tmp, storage_options, overwrite, writer)


def check_writable(path, *, overwrite: bool = False, storage_options: dict | None = None,
                   kind: str | None = None):
    """Refuse an output that would replace something unasked, or something that is not of its
    kind: called before any expensive work.

    An existing ``path`` is replaced only with ``overwrite``, and then only when it holds a
    daskauc store of the same kind as the one to be written (a model replaces a model, a
    dataset or embedding replaces a dataset or embedding; ``kind=None`` accepts any daskauc
    store). A regular file, a directory that is not a daskauc store, or a store of another
    kind is never removed, whatever ``overwrite`` says (an empty directory may be: it holds
    nothing to lose): a checkpoint or model path pointed at the training data must not
    destroy it."""
    if not store_exists(path, storage_options):
        return
    if not overwrite:
        raise FileExistsError(
            f"{os.fspath(path)} already exists; pass overwrite=True (--overwrite) to replace it")
    held = stored_kind(path, storage_options)
    local = None if _is_url(resolve_path(path)) else _local(resolve_path(path))
    if held is None and local is not None and os.path.isdir(local) and not os.listdir(local):
        return  # an empty directory: nothing to lose
    if held is None:
        what = "a file" if local is not None and os.path.isfile(local) else \
            "not a daskauc store"
        raise FileExistsError(
            f"{os.fspath(path)} is {what}; daskauc replaces only its own stores: remove it "
            "yourself or choose another path")
    if kind is not None and not _same_family(held, kind):
        raise FileExistsError(
            f"{os.fspath(path)} holds a daskauc {held} store, which a {kind} never replaces: "
            "choose another path (or remove it yourself)")


_FAMILIES = ({"dataset", "embedding"},)


def _same_family(held: str, kind: str) -> bool:
    return held == kind or any(held in f and kind in f for f in _FAMILIES)


def stored_kind(path, storage_options: dict | None = None) -> str | None:
    """The ``daskauc_kind`` of the store at ``path`` (complete or not); None when ``path`` is
    not a daskauc store (a file, another directory, a foreign Zarr group)."""
    path = resolve_path(path)
    try:
        group = zarr.open_group(path if _is_url(path) else _local(path), mode="r",
                                storage_options=storage_options)
    except Exception:  # noqa: BLE001 - anything that is not a readable Zarr group
        return None
    kind = group.attrs.get("daskauc_kind")
    return kind if isinstance(kind, str) else None


def check_output(path, *, kind: str | None = None, overwrite: bool = False,
                 inputs=(), expected_bytes: int | None = None,
                 storage_options: dict | None = None) -> str:
    """Everything that can be known about writing ``path`` before the work that produces it:
    not one of the ``inputs`` (an output written over its own input destroys it),
    :func:`check_writable`, and for a local path that its directory can be created and
    written to (a file is created and removed there) with at least ``expected_bytes`` free.
    Returns the resolved path; the errors name the path and the cause."""
    target = resolve_path(path)
    for other in inputs:
        if other is not None and resolve_path(other) == target:
            raise ValueError(f"{os.fspath(path)} is also an input of this command; "
                             "an output never replaces its input: choose another path")
    check_writable(path, overwrite=overwrite, storage_options=storage_options, kind=kind)
    if not _is_url(target):
        check_directory(target, expected_bytes, shown=os.fspath(path))
    return target


def check_directory(target: str, expected_bytes: int | None = None, *,
                    shown: str | None = None) -> None:
    """The local file or store ``target`` can be written: its directory exists or can be
    created below the nearest existing one, which takes a file (one is created and removed
    there: permission bits do not tell for root or a read-only mount) and has at least
    ``expected_bytes`` free."""
    shown = shown or target
    parent = os.path.dirname(os.path.abspath(target))
    existing = parent
    while not os.path.isdir(existing):
        if os.path.exists(existing):
            raise NotADirectoryError(f"cannot write {shown}: {existing} is a file, not a "
                                     "directory")
        existing = os.path.dirname(existing)
    probe = os.path.join(existing, f".daskauc-probe-{socket.gethostname()}-{os.getpid()}")
    try:
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise PermissionError(f"cannot write {shown}: {existing}: "
                              f"{exc.strerror or exc}") from None
    if expected_bytes:
        free = shutil.disk_usage(existing).free
        if free < expected_bytes:
            raise OSError(errno.ENOSPC, f"cannot write {shown}: it needs about "
                          f"{_gib(expected_bytes)} and {existing} has {_gib(free)} free")


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _commit(target, attrs_from, *results):
    final, tmp, storage_options, overwrite, writer = target
    extra = attrs_from(*results) if attrs_from is not None else {}
    where = tmp if tmp is not None else final
    group = zarr.open_group(where, mode="r+", storage_options=None if tmp else storage_options)
    if tmp is None and group.attrs.get("daskauc_writer") != writer:
        raise FileExistsError(
            f"another writer started writing {final} while this write ran; the store is "
            "left incomplete: write it again, one writer at a time")
    chunks = _list_chunks(where, None if tmp else storage_options)
    try:
        _check_grid(group, chunks, final)
    except StoreIntegrityError:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    sums = _trailing_checksums(where, None if tmp else storage_options,
                               {k: chunks[k] for k in _checksummed_keys(group)})
    manifest = {k: [size, sums.get(k)] for k, size in chunks.items()}
    group.attrs.update({**extra, _config.MANIFEST_ATTR: manifest, _config.COMPLETE_ATTR: True})
    if tmp is None:
        return final
    if not overwrite:
        try:  # rename(2) of a directory onto a non-empty one fails: no check-then-act race
            os.rename(tmp, final)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise FileExistsError(
                f"{final} appeared while this write ran (another writer?); it was not "
                "replaced; pass overwrite=True (--overwrite) to replace it") from exc
        return final
    old = None
    if os.path.lexists(final):
        old = f"{tmp}.old"
        os.replace(final, old)
    try:
        os.replace(tmp, final)
    except OSError:
        if old is not None:  # put the user's store back before reporting
            os.replace(old, final)
        raise
    if old is not None:
        # first out of restore_interrupted's sight (only ``.old`` is restored: a tree half
        # removed must never come back), then removed, file or tree; if that fails, the
        # next write here removes the ``.del`` (its name is this process')
        os.replace(old, f"{tmp}.del")
        _remove(f"{tmp}.del")
    return final


_METADATA_FILES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


def _list_chunks(root: str, storage_options: dict | None) -> dict[str, int]:
    """Every chunk file under a store (relative key -> size in bytes), metadata excluded.

    A symbolic link anywhere inside a local store (file or directory; the store's own path
    may be one) is a :class:`StoreIntegrityError`: daskauc never writes one, and one would
    make a read (of a model's ``coef_``, say) come from a file outside the store."""
    out = {}
    if _is_url(root):
        import fsspec

        fs, _, paths = fsspec.get_fs_token_paths(root, storage_options=storage_options)
        base = paths[0].rstrip("/") + "/"
        for p, info in fs.find(paths[0], detail=True).items():
            if info.get("type") != "directory" and p.rsplit("/", 1)[-1] not in _METADATA_FILES:
                out[p[len(base):] if p.startswith(base) else p] = int(info["size"])
        return out
    todo = [("", _local(root))]
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


def _trailing_checksums(root: str, storage_options: dict | None,
                        sizes: dict[str, int]) -> dict[str, int]:
    """Chunk key -> the CRC32C that Zarr's ``crc32c`` codec appended to the chunk file (its
    last 4 bytes, little endian): one 4-byte read per file, never a pass over the data."""
    keys = [k for k, n in sizes.items() if n >= 4]
    if _is_url(root):
        import fsspec

        fs, _, paths = fsspec.get_fs_token_paths(root, storage_options=storage_options)
        base = paths[0].rstrip("/") + "/"
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


def _checksummed_keys(group: zarr.Group) -> list[str]:
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


def _arrays(group: zarr.Group, prefix: str = ""):
    for name, arr in group.arrays():
        yield f"{prefix}{name}", arr
    for name, sub in group.groups():
        yield from _arrays(sub, f"{prefix}{name}/")


def _check_grid(group: zarr.Group, chunks: dict[str, int], where: str) -> None:
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
    found = _trailing_checksums(_local(path), storage_options, {k: sizes[k] for k in sums})
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
    present = _list_chunks(path, storage_options)  # refuses symbolic links, record or not
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
    if verify:
        verify_store(group, path, storage_options)
    return group


def _compatible(kind: str) -> tuple[str, ...]:
    # an embedding store has the dataset layout (X, y) plus the fitted map
    return ("embedding",) if kind == "dataset" else ()


class CheckedZarrArray:
    """A Zarr array as dask reads it, refusing absent chunks on the reading worker: Zarr
    returns the fill value for a chunk file that is not there (deleted after the store was
    opened, or a store the worker cannot see at all), which would train on zeros.

    ``checksums`` (chunk key -> CRC32C, from :func:`recorded_checksums`) are what the commit
    recorded for each chunk position: a chunk whose file holds another checksum (files
    swapped or copied over, each still passing its own CRC32C) is refused too. They travel
    with the array to the workers (4 bytes and a key per chunk)."""

    def __init__(self, array: zarr.Array, label: str, checksums: dict[str, int] | None = None):
        from ._rawchunks import RawChunks

        self.array, self.label = array, label
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim
        self.checksums = dict(checksums or {})
        # plain-bytes chunks on a local disk: read directly
        self.raw = RawChunks.of(array, self.checksums)

    def __getitem__(self, selection):
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
    import numpy as np

    return da.from_array(CheckedZarrArray(array, label, checksums), chunks=chunks, lock=False,
                         asarray=False, fancy=False, name=name,
                         meta=np.empty((0,) * array.ndim, dtype=array.dtype))
