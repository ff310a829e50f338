"""Get or start a Dask cluster and say where its dashboard is."""

from __future__ import annotations

import logging
import os
import warnings

logger = logging.getLogger("daskauc")


def default_worker_memory() -> int:
    """Bytes per worker for a LocalCluster sized for this machine (80% of RAM, split by cores)."""
    import psutil

    n = os.cpu_count() or 1
    return int(psutil.virtual_memory().total * 0.8 / n)


def free_dashboard_address(preferred: int = 8787, host: str = "127.0.0.1") -> str:
    """``"HOST:8787"`` when that port is free, else ``"HOST:0"`` (a free port the OS picks; the
    link says which): distributed would warn "Port 8787 is already in use" and pick one
    itself. The dashboard listens on ``host`` only: on all interfaces (distributed's
    ``":8787"``) it served worker logs, call stacks and paths to the network, unauthenticated."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, preferred))
        except OSError:
            return f"{host}:0"
    return f"{host}:{preferred}"


class WorkerMemoryError(ValueError):
    """The workers' memory limit is below what a worker needs before it holds any data."""


def get_client(address: str | None = None, *, n_workers: int | None = None,
               memory_limit: str | int | None = None, threads_per_worker: int = 1,
               dashboard: bool = True, quiet: bool = False, host: str = "127.0.0.1",
               scheduler_port: int = 0):
    """Connect to ``address`` (a scheduler address or a scheduler file), or start a LocalCluster.

    The local cluster has one single-threaded worker per core, so BLAS inside tasks does not
    oversubscribe the cores. Its scheduler, workers and dashboard listen on ``host`` only
    (this machine, by default). Each worker's memory is checked against what it needs once
    daskauc is loaded (:class:`WorkerMemoryError` rather than workers restarted forever).
    The dashboard link is logged (and returned as ``client.dashboard_link``).
    """
    from distributed import Client, LocalCluster

    if address:
        if os.path.exists(address) and address.endswith(".json"):
            client = Client(scheduler_file=address)
        else:
            client = Client(address)
    else:
        n = n_workers or (os.cpu_count() or 1)
        limit = memory_limit if memory_limit is not None else default_worker_memory()
        with warnings.catch_warnings():
            # the port found free was taken meanwhile: distributed picks another and says
            # so with a warning; the link logged below says which
            warnings.filterwarnings("ignore", message="Port .* is already in use")
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=threads_per_worker,
                memory_limit=limit,
                host=host,
                scheduler_port=scheduler_port,
                dashboard_address=free_dashboard_address(host=host) if dashboard else None,
                processes=True,
            )
        client = Client(cluster)
        try:
            check_worker_memory(client, limit)
        except BaseException:
            close_local_cluster(client)
            raise
    if not quiet:
        logger.info("Dask dashboard: %s", client.dashboard_link)
    return client


#: a worker must hold daskauc with this share of its memory limit to spare: distributed
#: starts spilling at 60% of the limit, pauses the worker at 80% and restarts it at 95%
WORKER_BASELINE_SHARE = 0.5


def check_worker_memory(client, memory_limit, timeout: float = 60.0) -> None:
    """Load daskauc on every worker and compare its memory with ``memory_limit``.

    A worker whose memory before any data is above its restart threshold is restarted by its
    nanny, again and again, and a command never ends (18 restarts in 240 s were seen at
    150 MiB); one with too little room left pauses or is killed at the first chunk. Both are
    refused here with the numbers and the option to change."""
    from dask.utils import format_bytes, parse_bytes

    from .. import _config

    limit = parse_bytes(memory_limit) if isinstance(memory_limit, str) else memory_limit
    if not limit:
        return
    try:
        rss = client.run(_worker_rss_with_daskauc, wait=True, on_error="raise")
        rss_max = max(rss.values()) if rss else 0
    except Exception as exc:  # noqa: BLE001 - a worker killed while loading daskauc
        raise WorkerMemoryError(
            f"the workers could not load daskauc within their memory limit of "
            f"{format_bytes(limit)} ({type(exc).__name__}: {exc}); raise --memory-limit "
            "(memory_limit=) to at least 1 GiB") from None
    if rss_max > WORKER_BASELINE_SHARE * limit:
        need = int(rss_max / WORKER_BASELINE_SHARE) + 4 * _config.TARGET_CHUNK_BYTES
        raise WorkerMemoryError(
            f"a worker needs {format_bytes(rss_max)} with daskauc loaded, before any data, "
            f"and its memory limit is {format_bytes(limit)} (distributed pauses a worker at "
            f"80% of it and restarts it at 95%): raise --memory-limit (memory_limit=) to at "
            f"least {format_bytes(need)}")


def _worker_rss_with_daskauc() -> int:
    """On a worker: import what every daskauc task imports, return the process's RSS."""
    import importlib

    import psutil

    # loaded, not used: what a task's process holds before any data (a measurement, not a
    # dependency of the engine on the floors above it)
    for name in ("daskauc", "daskauc.solvers"):
        importlib.import_module(name)
    return int(psutil.Process().memory_info().rss)


def _stop_heartbeats(dask_worker) -> None:
    """On a worker (``Client.run``): stop its periodic heartbeat to the scheduler."""
    dask_worker.periodic_callbacks["heartbeat"].stop()


def close_local_cluster(client, timeout: float = 10.0) -> None:
    """Close ``client`` and its LocalCluster: the client first, then the workers, then the
    scheduler.

    The client goes first so that the scheduler forgets everything it wanted (scattered
    data included): removing a worker that still held scattered data logged "caused the
    cluster to lose scattered data, which can't be recovered". Closing the scheduler while
    its workers run races with their heartbeats, and a worker then logs "Failed to
    communicate with scheduler during heartbeat" with a traceback: noise a user cannot act
    on, hence the workers, their processes closed, before the scheduler. That is not
    enough: retiring a worker closes its comm with the scheduler, and a heartbeat in flight
    then fails the same way (seen once in a fresh-clone suite run), so the workers' heartbeats
    are stopped first (the scheduler needs none while it shuts down)."""
    import time

    cluster = client.cluster
    if cluster is not None:
        try:
            client.run(_stop_heartbeats)
        except Exception as exc:  # noqa: BLE001 - closing must go on whatever happened
            logger.debug("stopping the workers' heartbeats failed: %s", exc)
    client.close()
    if cluster is None:
        return
    try:
        cluster.scale(0)
        deadline = time.monotonic() + timeout
        scheduler = getattr(cluster, "scheduler", None)
        # both sides: the scheduler forgets a worker when it retires it, the cluster when
        # the worker's process has closed (its heartbeats stopped); the scheduler alone let
        # a closing worker's last heartbeat meet a closing scheduler
        while ((scheduler is not None and scheduler.workers) or getattr(cluster, "workers", None)) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    except Exception as exc:  # noqa: BLE001 - closing must go on whatever happened
        logger.debug("scaling the local cluster to 0 failed: %s", exc)
    cluster.close()


