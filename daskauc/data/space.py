"""The room a write takes: refused before any work when it cannot fit, reported as an input
error when the file system fills up during the write.

* Sparse LIBSVM text that would densify into something absurd is refused
  (:func:`_check_dense`, the ``allow_dense`` rule).
* A local target whose file system has less free space than the write needs is refused
  (:func:`_check_free_space`, ``_config.CHECK_FREE_SPACE``).
* A write that fails anyway (a full disk, an interruption) removes the folders it made and
  reports ``ENOSPC`` as a ``ValueError``, which the command line takes for an input error
  (:func:`_failing_cleanly`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil

from .. import _config
from .._validation import SPARSE_ADVICE
from ..store.protocol import is_url, resolve_path


@contextlib.contextmanager
def _failing_cleanly(store):
    """On failure, remove the (still empty) directories above a local target that did not
    exist before (a failed write leaves nothing behind, not even the folders it made), and
    report a full file system as the input error it is, not as an ``OSError``, which the
    command line takes for a lost cluster."""
    p = os.fspath(store)
    made = []
    if not is_url(p):
        parent = os.path.dirname(resolve_path(p))
        while parent and not os.path.exists(parent):
            made.append(parent)
            parent = os.path.dirname(parent)
    try:
        yield
    except BaseException as exc:
        for parent in made:  # deepest first; a directory someone filled meanwhile stays
            with contextlib.suppress(OSError):
                os.rmdir(parent)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ValueError(
                f"{resolve_path(p)}: the file system ran out of space while writing it ({exc});"
                " nothing was written") from exc
        raise


def _nbytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} bytes" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError  # unreachable


def _check_dense(path, rows: int, d: int, itemsize: int, values: int, max_index: int,
                 max_line: int, *, so_far: bool = False) -> None:
    """Refuse to densify sparse text into something absurd: a dense matrix larger than
    ``_config.DENSE_MAX_BYTES`` AND more than ``_config.DENSE_MAX_RATIO`` times the bytes of
    the non-zero values read (so fewer than 1 % of its entries would be non-zero)."""
    dense = rows * d * itemsize
    sparse = max(values, 1) * itemsize
    ratio = dense / sparse
    if dense <= _config.DENSE_MAX_BYTES or ratio <= _config.DENSE_MAX_RATIO:
        return
    read = "rows read so far" if so_far else "rows"
    where = (f"the largest feature index, {max_index}, is on line {max_line}" if max_index > 0
             else "no feature index was read")
    raise ValueError(
        f"{path}: the dense matrix would take {_nbytes(dense)} ({rows:,} {read} x {d:,} "
        f"features x {itemsize} bytes), {ratio:,.0f} times the {_nbytes(sparse)} of the "
        f"{values:,} non-zero values read; {where}. Nothing was written: with dense rows, "
        f"{d:,} features this sparse are refused rather than densified. Keep them sparse with "
        "rows='sparse' (CLI: --rows sparse; the default 'auto' chooses it from the data), "
        f"or: {SPARSE_ADVICE} Or pass allow_dense=True (CLI: --allow-dense) to write it "
        "dense anyway (memory stays bounded by one chunk; the store takes the size above)")



def _check_free_space(store, needed: int, detail: str) -> None:
    """Refuse a local write of ``needed`` bytes when the file system it goes to (that of the
    nearest existing parent of ``store``) has less free space; URLs are not checked."""
    p = os.fspath(store)
    if not _config.CHECK_FREE_SPACE or needed <= 0 or is_url(p):
        return
    path = resolve_path(p)
    probe = os.path.dirname(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    free = shutil.disk_usage(probe).free
    if needed > free:
        def exact(n):
            return f"{n:,} bytes" + (f" ({_nbytes(n)})" if n >= 1024 else "")

        raise ValueError(
            f"{path}: writing it needs {exact(needed)} for {detail}, but {exact(free)} are "
            f"free on the file system of {probe}; free some space or write elsewhere (the "
            "size is uncompressed: if the data compresses well, set "
            "daskauc._config.CHECK_FREE_SPACE = False to write anyway)")


def _check_store_space(store, rows: int, d: int, itemsize: int) -> None:
    """Refuse a local store whose ``X`` (``rows`` x ``d``, ``itemsize`` bytes a value) and
    int8 ``y`` do not fit uncompressed."""
    _check_free_space(store, rows * (d * itemsize + 1), "X and y uncompressed")
