"""Writing daskauc stores: arrays with checksummed chunks, written under a hidden sibling and
committed (the chunk manifest recorded, ``daskauc_complete`` last) only when complete, and
the checks that an output may be written where the user asked, before any work (the
protocol: :mod:`daskauc.store.protocol`).

On object storage (an fsspec URL) there is no rename, atomic or not: the hidden sibling is
published by :func:`_publish`, which copies its objects into place and then checks that the
target holds exactly the chunks this writer recorded. Two writers of one target therefore
never leave a mix that opens as complete: each writes its own sibling and records its own
chunks' checksums, and a chunk the other copied over is found by the check (the commit is
withdrawn) or, if it lands after the check, by every read (a chunk whose checksum is not the
recorded one is an error naming it)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import threading
import uuid

import dask
import zarr
from dask.base import tokenize
from dask.delayed import Delayed

from .. import _config
from .._version import __version__
from .protocol import (
    StoreIntegrityError,
    check_grid,
    checksummed_keys,
    effective_storage_options,
    is_url,
    list_chunks,
    local_path,
    owned_tmp_name,
    partial_prefix,
    remove_path,
    remove_stale,
    resolve_path,
    restore_interrupted,
    store_exists,
    stored_kind,
    trailing_checksums,
    url_filesystem,
)
from .urls import check_access


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

    On normal exit the group is marked complete and moved (copied, on object storage) into
    place; on an exception the partial store is removed and whatever was at ``path`` is left
    untouched.
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

    Same protocol as :func:`~daskauc.store.write.writing_store`, split in two so the write
    can share a pass with other work: :func:`begin_store` creates the group at a hidden
    sibling path and :meth:`commit` marks it complete and moves it into place (on object
    storage: copies it, :func:`_publish`). ``commit`` is a plain picklable function of
    strings and the URL's storage options, so it runs as the last task of the graph on
    whichever worker; if the graph fails, the partial store stays hidden (at ``tmp``) and
    never opens as complete.
    """

    def __init__(self, group: zarr.Group, final: str, tmp: str,
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
        """Remove the hidden partial store."""
        _remove_partial(self.tmp, self.storage_options)

    def _target(self) -> tuple:
        return (self.final, self.tmp, self.storage_options, self.overwrite, self.writer)


def begin_store(path, *, kind: str, overwrite: bool = False, attrs: dict | None = None,
                storage_options: dict | None = None) -> PendingStore:
    """Start a store whose data a later compute writes; see :class:`PendingStore`."""
    path = resolve_path(path)
    restore_interrupted(path)
    check_writable(path, overwrite=overwrite, storage_options=storage_options, kind=kind)
    writer = uuid.uuid4().hex
    base = {"daskauc_kind": kind, "daskauc_version": __version__,
            "daskauc_format": _config.STORE_FORMAT, "daskauc_writer": writer, **(attrs or {})}
    if is_url(path):
        # the commit may run in another process (a worker): it gets the options this
        # process builds the filesystem with, its fsspec configuration included
        storage_options = effective_storage_options(path, storage_options)
        tmp = owned_tmp_name(partial_prefix(path))
        group = zarr.open_group(tmp, mode="w", storage_options=storage_options)
        group.update_attributes(base)
        return PendingStore(group, path, tmp, storage_options, overwrite, writer)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    remove_stale(partial_prefix(path))
    tmp = owned_tmp_name(partial_prefix(path))
    group = zarr.open_group(tmp, mode="w")
    group.update_attributes(base)
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
    check_access(path, storage_options)  # an endpoint, a bucket, credentials: said first
    check_outside_stores(path, storage_options)
    if not store_exists(path, storage_options):
        return
    if not overwrite:
        raise FileExistsError(
            f"{os.fspath(path)} already exists; pass overwrite=True (--overwrite) to replace it")
    held = stored_kind(path, storage_options)
    local = None if is_url(resolve_path(path)) else local_path(resolve_path(path))
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


#: the files that make a directory (or a key prefix) a Zarr group or array, v3 and v2
_ZARR_NODE_FILES = ("zarr.json", ".zgroup", ".zarray")


def check_outside_stores(path, storage_options: dict | None = None) -> None:
    """Refuse an output inside a Zarr group or array (a daskauc store or any other): a store
    written into another's directory became part of it, and the outer store no longer
    opened. Every directory above ``path`` is looked at (a URL's up to its bucket)."""
    target = resolve_path(path)
    if is_url(target):
        fs, inner = url_filesystem(target, storage_options)
        protocol = target.split("://", 1)[0]
        parts = inner.split("/")
        above = [f"{protocol}://{'/'.join(parts[:i])}" for i in range(len(parts) - 1, 0, -1)]

        def is_node(where: str) -> bool:
            base = where.split("://", 1)[1]
            return any(fs.exists(f"{base}/{f}") for f in _ZARR_NODE_FILES)
    else:
        local = os.path.abspath(local_path(target))
        above = []
        while os.path.dirname(local) != local:
            local = os.path.dirname(local)
            above.append(local)

        def is_node(where: str) -> bool:
            return any(os.path.isfile(os.path.join(where, f)) for f in _ZARR_NODE_FILES)
    for where in above:
        if is_node(where):
            kind = stored_kind(where, storage_options)
            what = f"a daskauc {kind} store" if kind else "a Zarr group daskauc did not make"
            raise ValueError(f"{os.fspath(path)} is inside {where}, {what}: a store written "
                             "into another makes the outer one unreadable; choose a path "
                             "outside it")


_FAMILIES = ({"dataset", "embedding"},)


def _same_family(held: str, kind: str) -> bool:
    return held == kind or any(held in f and kind in f for f in _FAMILIES)


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
    if not is_url(target):
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
    url = is_url(final)
    options = storage_options if url else None
    group = zarr.open_group(tmp, mode="r+", storage_options=options)
    chunks = list_chunks(tmp, options)
    try:
        check_grid(group, chunks, final)
    except StoreIntegrityError:
        _remove_partial(tmp, options)
        raise
    sums = trailing_checksums(tmp, options, {k: chunks[k] for k in checksummed_keys(group)})
    manifest = {k: [size, sums.get(k)] for k, size in chunks.items()}
    if url:
        group.update_attributes({**extra, _config.MANIFEST_ATTR: manifest})
        try:
            _publish(final, tmp, storage_options, overwrite, writer, manifest)
        finally:
            _remove_partial(tmp, options)
        return final
    group.update_attributes({**extra, _config.MANIFEST_ATTR: manifest,
                             _config.COMPLETE_ATTR: True})
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
        remove_path(f"{tmp}.del")
    return final


def _remove_partial(tmp: str, storage_options: dict | None) -> None:
    """Remove a writer's hidden partial store, local or on object storage (errors ignored:
    what is left is hidden and never opens as complete)."""
    if not is_url(tmp):
        shutil.rmtree(tmp, ignore_errors=True)
        return
    with contextlib.suppress(Exception):  # any filesystem's own errors, a missing tmp
        fs, root = url_filesystem(tmp, storage_options)
        fs.rm(root, recursive=True)


def _publish(final: str, tmp: str, storage_options: dict | None, overwrite: bool,
             writer: str, manifest: dict) -> None:
    """The commit's move on object storage, which has no rename: the staged store at ``tmp``
    (its chunk record in its attributes, ``daskauc_complete`` not yet) copied to ``final``.

    An existing ``final`` is refused without ``overwrite`` (checked again here: it may have
    appeared while the write ran) and otherwise removed first, its group metadata before the
    rest, so that it stops opening as complete. The group metadata goes first, without the
    complete mark (an interrupted copy leaves an incomplete daskauc store, which the next
    write may replace), then every other object, then the group metadata with the mark (one
    object written whole: the commit). Last the target is checked against ``manifest``: the
    group is still this writer's and every chunk is present with the size and checksum this
    writer recorded, and no other chunk is there. A chunk another writer copied over at the
    same time fails the check: the mark is taken back and the error says why. (Copied after
    the check, it fails every read instead: a chunk whose checksum is not the recorded one is
    a :class:`~daskauc.store.protocol.StoreIntegrityError`.)"""
    fs, root = url_filesystem(final, storage_options)
    _, troot = url_filesystem(tmp, storage_options)
    fs.invalidate_cache(root)
    if fs.exists(root):
        if not overwrite:
            raise FileExistsError(
                f"{final} appeared while this write ran (another writer?); it was not "
                "replaced; pass overwrite=True (--overwrite) to replace it")
        with contextlib.suppress(FileNotFoundError):
            fs.rm(f"{root}/zarr.json")
        fs.rm(root, recursive=True)
    meta = json.loads(fs.cat_file(f"{troot}/zarr.json"))
    fs.pipe_file(f"{root}/zarr.json", json.dumps(meta).encode())
    rest = sorted(p[len(troot):] for p in fs.find(troot) if p != f"{troot}/zarr.json")
    # server-side copies, pair by pair (sorted: the same pairs if fsspec sorts the lists)
    fs.copy([troot + p for p in rest], [root + p for p in rest])
    meta["attributes"][_config.COMPLETE_ATTR] = True
    fs.pipe_file(f"{root}/zarr.json", json.dumps(meta).encode())
    problem = _published_differs(final, storage_options, writer, manifest)
    if problem is None:
        return
    if problem == "writer":
        raise FileExistsError(
            f"{final}: another writer committed its store there while this write was being "
            "committed; this write's store is not there: write it again, one writer at a time")
    if problem.startswith("chunk"):  # still this writer's group: take the commit back
        meta["attributes"].pop(_config.COMPLETE_ATTR)
        fs.pipe_file(f"{root}/zarr.json", json.dumps(meta).encode())
    raise FileExistsError(
        f"{final}: another writer wrote there while this write was being committed "
        f"({problem}); it was left incomplete: write it again, one writer at a time")


def _published_differs(final: str, storage_options: dict | None, writer: str,
                       manifest: dict) -> str | None:
    """None when ``final`` holds this writer's group and exactly the chunks of ``manifest``
    (sizes and checksums); else ``"writer"`` (another writer's group metadata is there) or
    what differs, naming the first chunk."""
    fs, root = url_filesystem(final, storage_options)
    try:
        attrs = json.loads(fs.cat_file(f"{root}/zarr.json")).get("attributes", {})
    except FileNotFoundError:
        return "its group metadata was removed"
    if attrs.get("daskauc_writer") != writer:
        return "writer"
    present = list_chunks(final, storage_options)
    sums = trailing_checksums(final, storage_options,
                              {k: n for k, n in present.items()
                               if k in manifest and manifest[k][1] is not None})
    for key, (size, crc) in manifest.items():
        if present.get(key) != size or (crc is not None and sums.get(key) != crc):
            return f"chunk {key} is not the one this write recorded"
    extra = sorted(set(present) - set(manifest))
    if extra:
        return f"chunk {extra[0]} is not one this write made"
    return None


class Gate:
    """Refuses writes once a write pass has failed, and lets the failure wait for the writes
    in flight before the partial output is removed: dask's local schedulers raise the first
    task error while other tasks still run, and a chunk written after the removal would
    re-create the hidden partial output (a store's, or a Parquet scores directory's).
    Pickled (to a distributed worker) it is a new gate, never closed there."""

    def __init__(self):
        self._cond = threading.Condition()
        self._busy = 0
        self._closed = False

    def __enter__(self):
        with self._cond:
            if self._closed:
                raise RuntimeError("this write was abandoned after another task failed")
            self._busy += 1

    def __exit__(self, *exc):
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()

    def close_and_wait(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._busy == 0)

    def __reduce__(self):
        return (Gate, ())
