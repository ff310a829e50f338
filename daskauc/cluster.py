"""Get or start a Dask cluster and say where its dashboard is."""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("daskauc")


def default_worker_memory() -> int:
    """Bytes per worker for a LocalCluster sized for this machine (80% of RAM, split by cores)."""
    import psutil

    n = os.cpu_count() or 1
    return int(psutil.virtual_memory().total * 0.8 / n)


def get_client(address: str | None = None, *, n_workers: int | None = None,
               memory_limit: str | int | None = None, threads_per_worker: int = 1,
               dashboard: bool = True, quiet: bool = False):
    """Connect to ``address`` (a scheduler address or a scheduler file), or start a LocalCluster.

    The local cluster has one single-threaded worker per core, so BLAS inside tasks does not
    oversubscribe the cores. The dashboard link is logged (and returned as
    ``client.dashboard_link``).
    """
    from distributed import Client, LocalCluster

    if address:
        if os.path.exists(address) and address.endswith(".json"):
            client = Client(scheduler_file=address)
        else:
            client = Client(address)
    else:
        n = n_workers or (os.cpu_count() or 1)
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            memory_limit=memory_limit if memory_limit is not None else default_worker_memory(),
            dashboard_address=":8787" if dashboard else None,
            processes=True,
        )
        client = Client(cluster)
    if not quiet:
        logger.info("Dask dashboard: %s", client.dashboard_link)
    return client


def threads_here() -> int:
    """Threads that run tasks in this process: the Dask worker's, else the local scheduler's."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        import dask

        return max(1, int(dask.config.get("num_workers", None) or os.cpu_count() or 1))
