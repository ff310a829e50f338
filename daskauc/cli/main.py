"""``main``: logging, signals, and every error as one line with its exit status."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import sys
import threading
import warnings

from .._compute import forget_swallowed_stop, keep_swallowed_stop, raise_swallowed_stop
from ..store.urls import StorageUnreachableError
from .options import _storage_options
from .parser import build_parser
from .session import _scheduler, _state


def _configure_logging(verbose: bool) -> None:
    """daskauc's own progress lines on stderr; Dask's logs only with --verbose."""
    from ..engine.progress import log_to_stderr

    log_to_stderr(logging.INFO)
    logging.getLogger("distributed").setLevel(logging.INFO if verbose else logging.WARNING)
    for name in ("bokeh", "tornado"):  # the dashboard server's notes: nothing to act on
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    # an interrupted gather leaves an asyncio task whose AllExit is "never retrieved": a
    # traceback after Ctrl-C that says nothing the one line "interrupted" does not
    logging.getLogger("asyncio").setLevel(logging.WARNING if verbose else logging.CRITICAL)
    if not verbose:
        logging.getLogger("tornado.application").addFilter(_drop_interrupted_sync_cancel)
        # a warning is one line a user can act on, not the file and source line it came from
        warnings.formatwarning = _one_line_warning



def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"[daskauc] warning: {message}\n"



def _drop_interrupted_sync_cancel(record: logging.LogRecord) -> bool:
    """False for one known traceback of an interrupted call (``distributed`` 2026.8).

    When Ctrl-C reaches ``distributed.utils.sync`` before its coroutine has started, the
    cancel callback it schedules reads a variable not yet assigned and tornado logs the
    ``NameError`` at ERROR. Nothing was running to cancel, so the one line "interrupted" says
    all there is; every other error of the event loop still prints.
    """
    exc = record.exc_info[1] if record.exc_info else None
    return not (isinstance(exc, NameError) and "sync.<locals>.cancel" in record.getMessage())



class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every ``finally`` runs (the local cluster
    stops, partial outputs are removed) before the process exits with 143."""



def _raise_terminated(signum, frame):
    raise _Terminated()


_STOPS = (KeyboardInterrupt, _Terminated)


def _stop_word(stop: BaseException) -> str:
    return "terminated (SIGTERM)" if isinstance(stop, _Terminated) else "interrupted"


_FILE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT,
                          errno.ENOENT, errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.EIO,
                          errno.EFBIG, errno.ENAMETOOLONG, errno.ENOTEMPTY, errno.EMFILE})



def main(argv: list[str] | None = None) -> int:
    import signal

    for stream in (sys.stdout, sys.stderr):  # a path that is not UTF-8 prints as its bytes
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="surrogateescape")
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    _state["cluster_used"] = False
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    previous_hook = sys.unraisablehook
    forget_swallowed_stop()
    sys.unraisablehook = functools.partial(_keep_stops, previous_hook)
    try:
        with _storage_options(args):
            status = int(args.func(args) or 0)
        try:
            raise_swallowed_stop()
        except _STOPS as stop:
            print(f"daskauc {args.command}: {_stop_word(stop)} as it finished; its output is "
                  "complete", file=sys.stderr)
            return 143 if isinstance(stop, _Terminated) else 130
        return status
    except KeyboardInterrupt:
        print(f"daskauc {args.command}: interrupted; nothing was saved by the interrupted "
              "step", file=sys.stderr)
        return 130
    except _Terminated:
        print(f"daskauc {args.command}: terminated (SIGTERM); nothing was saved by the "
              "interrupted step", file=sys.stderr)
        return 143
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, IsADirectoryError,
            NotADirectoryError, PermissionError, ImportError, StorageUnreachableError) as exc:
        print(f"daskauc {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if _file_error(exc) or (isinstance(exc, OSError) and not _state["cluster_used"]):
            print(f"daskauc {args.command}: error: {_os_error_line(exc, args)}",
                  file=sys.stderr)
            return 1
        if not (_state["cluster_used"] and _cluster_failure(exc)):
            raise
        print(f"daskauc {args.command}: error: the Dask cluster failed ({type(exc).__name__}: "
              f"{_one_line(exc) or 'no detail'}){_memory_hint(args, exc)}; nothing was saved "
              "by the interrupted step", file=sys.stderr)
        return 3
    finally:
        sys.unraisablehook = previous_hook
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _keep_stops(previous_hook, unraisable) -> None:
    """A Ctrl-C or SIGTERM that Python could not raise (it arrived in a garbage collection's
    callback) is kept for the next compute; anything else goes to the previous hook."""
    if not keep_swallowed_stop(unraisable, _STOPS):
        previous_hook(unraisable)



def _one_line(exc: BaseException) -> str:
    """An exception as one line (the first line of its message)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__



def _os_error_line(exc: OSError, args) -> str:
    """An OS error with the path it is about: its own, or the command's outputs."""
    if exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or _one_line(exc)}"
    text = exc.strerror or _one_line(exc)
    outputs = []
    for name in _OUTPUTS.get(args.command, ()):
        value = getattr(args, name, None) or ()
        if name == "also":
            value = [out for _, out in value]
        outputs += [value] if isinstance(value, str) else list(value)
    return f"{text} (writing {', '.join(map(str, outputs))})" if outputs else text


_OUTPUTS = {"ingest": ("store", "split"), "split": ("train", "test"), "embed": ("out", "also"),
            "fit": ("model", "checkpoint", "plot"), "evaluate": ("plot",), "predict": ("output",),
            "cluster": ("scheduler_file",)}



def _file_error(exc: BaseException) -> bool:
    """An OS error about a file (a full disk, a read-only directory, a missing path), raised
    here or on a worker: the user's to fix, not the cluster's."""
    try:
        from distributed.comm.core import CommClosedError
    except ImportError:  # pragma: no cover
        CommClosedError = ()  # noqa: N806
    if not isinstance(exc, OSError) or isinstance(exc, (CommClosedError, ConnectionError,
                                                        TimeoutError)):
        return False
    return exc.errno in _FILE_ERRNOS or exc.filename is not None



def _memory_hint(args, exc: BaseException) -> str:
    """For a task whose workers died under it: the memory limit is the usual cause."""
    from distributed import KilledWorker

    if not isinstance(exc, KilledWorker):
        return ""
    if _scheduler(args):
        return ("; its workers died while running it: if they ran out of memory, give the "
                "cluster's workers more (dask worker --memory-limit)")
    from dask.utils import format_bytes

    from ..engine.cluster import default_worker_memory

    limit = args.memory_limit or format_bytes(default_worker_memory())
    return (f"; its workers died while running it: if they ran out of memory, raise "
            f"--memory-limit (now {limit} per worker) or use fewer, larger workers "
            "(--workers)")



def _cluster_failure(exc: BaseException) -> bool:
    """A lost scheduler or workers: connection errors, timeouts, cancelled futures."""
    import asyncio
    import concurrent.futures

    from distributed import KilledWorker

    return isinstance(exc, (OSError, TimeoutError, asyncio.TimeoutError, KilledWorker,
                            concurrent.futures.CancelledError, asyncio.CancelledError))
