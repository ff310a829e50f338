"""Get or start a Dask cluster and say where its dashboard is (the public face of
:mod:`daskauc.engine.cluster`)."""

from .engine.cluster import (
    WorkerMemoryError,
    close_local_cluster,
    default_worker_memory,
    get_client,
)

__all__ = ["get_client", "close_local_cluster", "default_worker_memory", "WorkerMemoryError"]
