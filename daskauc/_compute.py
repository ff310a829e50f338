"""How daskauc runs its graphs: ``compute`` and ``persist`` that let earlier releases go
first, ``share`` for constants every task reads, and the threads of the process that runs a
task. The ground floor: every layer computes through here."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading


def distributed_client():
    """The distributed Client dask would use now, or None (threaded / synchronous scheduler)."""
    import dask

    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a hard dependency
        return None
    try:
        client = default_client()
    except ValueError:
        return None
    sched = dask.base.get_scheduler()
    return client if getattr(sched, "__self__", None) is client else None


def flush_releases(client=None) -> None:
    """Let ``client`` (default: the distributed client dask would use) send the releases it
    has queued, before a new graph goes out.

    distributed releases a result in two hops on the client's event loop (``Future.release``
    queues ``_dec_ref``, which queues the message), so a graph submitted right after a
    compute, or right after a persisted array was dropped, reached the scheduler *before*
    the release of the earlier result. The scheduler then still held that result's lineage,
    and a key of it that the new graph fuses differently (the same data, fused with its
    reader in one graph and not in the other) was logged as ``Detected different run_spec``
    (dask/dask#9888), which it warns can return stale results or deadlock. One loop round
    trip (about 0.1 ms) puts the releases first."""
    client = client if client is not None else distributed_client()
    if client is None or getattr(client, "asynchronous", False) or client.status != "running":
        return
    try:
        from distributed import get_worker

        get_worker()  # inside a task: the worker's client is not ours to drive
        return
    except ValueError:
        pass
    client.sync(_loop_round_trip)


async def _loop_round_trip() -> None:
    return None


def compute(*collections, **kwargs):
    """``dask.compute`` for daskauc's graphs: the releases of earlier results go first, and
    this result's release is sent before it returns, so that the next graph (daskauc's, or
    the caller's own ``.compute()``) never overtakes it (:func:`flush_releases`); on dask's
    local schedulers, graphs overlapping in threads keep the registered callbacks
    (:func:`_callbacks_kept`). Every compute in the package goes through here."""
    import dask

    raise_swallowed_stop()
    flush_releases()
    try:
        with _callbacks_kept(collections, kwargs):
            result = dask.compute(*collections, **kwargs)
    finally:
        flush_releases()
    raise_swallowed_stop()
    return result


def compute_built(build):
    """The result of the one collection ``build()`` makes, computed as :func:`compute` does;
    on a distributed client the client lets go of the graph as soon as it is submitted.

    A constant scattered into the graph (:func:`share`) is then held on the cluster only
    until the tasks that read it are done, not until the whole graph is: a stochastic
    solver's starting state (a few d-vectors, 256 MiB at 2**24 features) otherwise sat on
    one worker beside every later state of the epoch's chain.

    The scheduler can then no longer recompute the graph's results from their start: when a
    worker is lost with results the graph still needs (the chain's current state), the
    graph's output is cancelled, and the graph is built (``build()``, a constant scattered
    again) and run once more, with a warning. ``build`` must give the same graph each time
    (an epoch's seeds and order are fixed by its number)."""
    import logging

    from distributed.client import FutureCancelledError

    client = distributed_client()
    if client is None:
        (out,) = compute(build())
        return out
    for attempt in (1, 2):
        raise_swallowed_stop()
        flush_releases(client)
        future = client.compute(build())
        try:
            out = future.result()
            break
        except FutureCancelledError as exc:
            if attempt == 2:
                raise RuntimeError(
                    "workers were lost twice with results this computation needed (a worker "
                    "over its memory limit is restarted by its nanny: see the workers' logs)"
                ) from exc
            logging.getLogger("daskauc").warning(
                "a worker was lost with results this computation still needed; running it "
                "again from its start")
        except BaseException:
            future.cancel()
            raise
        finally:
            del future
            flush_releases(client)
    raise_swallowed_stop()
    return out


def persist(*collections, **kwargs):
    """``dask.persist`` for daskauc's graphs (see :func:`compute`)."""
    import dask

    raise_swallowed_stop()
    flush_releases()
    with _callbacks_kept(collections, kwargs):
        return dask.persist(*collections, **kwargs)


_swallowed_stops: list[BaseException] = []  # a stop Python could not raise where it arrived


def keep_swallowed_stop(unraisable, stops: tuple = (KeyboardInterrupt,)) -> bool:
    """For ``sys.unraisablehook``: keep a ``KeyboardInterrupt`` (or another of ``stops``)
    that arrived while Python ran a weakref callback or a ``__del__``. Python prints such
    exceptions ("Exception ignored in ...") and goes on, so a Ctrl-C or SIGTERM landing in
    a garbage collection was lost and the command ran to its end and exited 0. Kept here,
    the next :func:`compute` or :func:`persist` in the main thread raises it.
    True when it was kept."""
    if isinstance(unraisable.exc_value, stops):
        _swallowed_stops[:] = [unraisable.exc_value]
        return True
    return False


def forget_swallowed_stop() -> None:
    """Drop a kept stop (a new command starts)."""
    _swallowed_stops.clear()


def raise_swallowed_stop() -> None:
    """Raise (once) a stop kept by :func:`keep_swallowed_stop`, in the main thread only."""
    if _swallowed_stops and threading.current_thread() is threading.main_thread():
        raise _swallowed_stops.pop()


_callbacks_lock = threading.Lock()
_overlapping = 0  # daskauc graphs running on a local scheduler now
_registered = None  # the callback set before the first of them started


@contextlib.contextmanager
def _callbacks_kept(collections, kwargs: dict):
    """Run a graph on dask's local schedulers (threaded, synchronous, processes) without
    losing the registered callbacks.

    Each local graph swaps the global ``dask.callbacks.Callback.active`` for an empty set
    while it runs (so that graphs computed inside its tasks do not call them) and puts its
    copy back after. Graphs overlapping in threads (a search's parallel solves, read-ahead)
    put their copies back out of order, and a copy taken while another ran, empty, won: the
    callbacks were lost (a progress bar's, a user's ``ProgressBar().register()``), and
    unregistering them raised KeyError after the fit had finished. The set as it was before
    the first of overlapping graphs is put back when the last ends; dask's own swap, and so
    what graphs inside tasks see, is unchanged."""
    global _overlapping, _registered
    import dask
    from dask.callbacks import Callback

    graphs = [c for c in collections if dask.is_dask_collection(c)]
    local = ("callbacks" not in kwargs and graphs and _scheduler_is_local(
        dask.base.get_scheduler(scheduler=kwargs.get("scheduler"), collections=graphs)))
    if not local:
        yield
        return
    with _callbacks_lock:
        if _overlapping == 0:
            _registered = Callback.active
        _overlapping += 1
    try:
        yield
    finally:
        with _callbacks_lock:
            _overlapping -= 1
            if _overlapping == 0:
                Callback.active, _registered = _registered, None


def unregister_callback(callback) -> None:
    """Remove a dask callback (its ``_callback`` tuple) from the registered set, also from the
    set a running graph will put back (:func:`_callbacks_kept`); no error if it is gone."""
    from dask.callbacks import Callback

    with _callbacks_lock:
        Callback.active.discard(callback)
        if _registered is not None:
            _registered.discard(callback)


def register_callback(callback) -> None:
    """Add a dask callback (its ``_callback`` tuple) to the registered set, also to the set a
    running daskauc graph will put back (:func:`_callbacks_kept`)."""
    from dask.callbacks import Callback

    with _callbacks_lock:
        Callback.active.add(callback)
        if _registered is not None:
            _registered.add(callback)


def callback_registered(callback) -> bool:
    """Whether a dask callback (its ``_callback`` tuple) is registered: in the set a running
    daskauc graph will put back (:func:`_callbacks_kept`), else in the current set."""
    from dask.callbacks import Callback

    with _callbacks_lock:
        return callback in (_registered if _registered is not None else Callback.active)


def _scheduler_is_local(get) -> bool:
    import dask.local
    import dask.multiprocessing
    import dask.threaded

    return get in (dask.threaded.get, dask.local.get_sync, dask.multiprocessing.get)


def nbytes_of(obj) -> int:
    """Bytes of the arrays in ``obj`` (arrays, dataclasses, tuples, lists, dicts of them):
    what embedding it in a graph would cost; other objects count 0."""
    if hasattr(obj, "nbytes") and hasattr(obj, "dtype"):
        return int(obj.nbytes)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(nbytes_of(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, (tuple, list)):
        return sum(nbytes_of(v) for v in obj)
    if isinstance(obj, dict):
        return sum(nbytes_of(v) for v in obj.values())
    return 0


def share(obj, client=None, *, broadcast: bool = False, min_bytes: int | None = None):
    """``obj`` as graph tasks should take it: a Future of a copy scattered to the cluster when
    a distributed client runs the graphs (on every worker with ``broadcast``) and ``obj``
    holds at least ``min_bytes`` (default ``_config.SHARE_BYTES``); else ``obj`` itself.

    Tasks that take the Future as an argument receive ``obj``. Scattering once replaces
    sending ``obj`` inside every graph that uses it."""
    from . import _config

    client = client if client is not None else distributed_client()
    limit = _config.SHARE_BYTES if min_bytes is None else min_bytes
    if client is None or nbytes_of(obj) < limit:
        return obj
    return client.scatter(obj, broadcast=broadcast, hash=False)


def threads_here() -> int:
    """Threads that run tasks in this process: the Dask worker's, else the local scheduler's."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        import dask

        return max(1, int(dask.config.get("num_workers", None) or os.cpu_count() or 1))
