"""Where the commands run: a local cluster started and stopped per command, or the one
``daskauc cluster`` keeps (``--scheduler``); ``daskauc warmup`` and ``daskauc cluster``."""

from __future__ import annotations

import contextlib
import os
import threading
import time

from .options import _check_file_output, _log, _result, _urls


def _scheduler(args) -> str | None:
    return args.scheduler or os.environ.get("DASKAUC_SCHEDULER") or None



def _local_cluster_text(args) -> str:
    from dask.utils import format_bytes

    from ..engine.cluster import default_worker_memory

    n = args.workers or (os.cpu_count() or 1)
    mem = args.memory_limit or format_bytes(default_worker_memory())
    return f"{n} worker(s) x 1 thread, {mem} each"



@contextlib.contextmanager
def _cluster(args):
    """The client the command runs on: the scheduler given, or a LocalCluster started (and
    announced) here and stopped at the end."""

    from ..engine.cluster import close_local_cluster, get_client

    address = _scheduler(args)
    _state["cluster_used"] = True
    if not args.verbose:  # worker processes log through their own config, set before start
        _quiet_workers()
    tic = time.perf_counter()
    if address:
        _log(f"connecting to the Dask scheduler at {address} ...")
    else:
        _log(f"starting a local Dask cluster: {_local_cluster_text(args)} ...")
    client = get_client(address, n_workers=args.workers, memory_limit=args.memory_limit,
                        quiet=True)
    _log(f"{'connected' if address else 'cluster ready'} in {time.perf_counter() - tic:.1f} s; "
         f"Dask dashboard: {client.dashboard_link}")
    from ..engine.progress import dashboard_announced

    dashboard_announced(client.dashboard_link)
    try:
        from ..store.urls import check_workers_access

        # the stores were checked from here before the cluster started; a cluster's workers
        # may lack what this process has (credentials in its own environment)
        check_workers_access(client, _urls(args))
        yield client
    finally:
        tic = time.perf_counter()
        if address:
            client.close()
        else:
            close_local_cluster(client)
            _log(f"local cluster stopped in {time.perf_counter() - tic:.1f} s")



def _quiet_workers() -> None:
    """Worker processes log only errors (a task cancelled by Ctrl-C logged a WARNING line).

    A worker process sets up its logging when it imports distributed, from its environment,
    before the nanny hands it this process's configuration: the level goes through both."""
    import dask

    dask.config.set({"logging.distributed": "error", "logging.asyncio": "critical"})
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    # s3fs's HTTP sessions still open when a worker exits: "Unclosed client session" lines,
    # two per worker after every command on s3:// (this process's are off in
    # _configure_logging)
    os.environ.setdefault("DASK_LOGGING__ASYNCIO", "critical")



def _warm_up_here() -> float:
    """:func:`daskauc.estimators._warmup.warm_up` in this process on the threaded scheduler
    (on a worker: as a task, so the worker keeps answering); returns its seconds."""
    import dask

    from ..estimators._warmup import warm_up

    with dask.config.set(scheduler="threads"):
        return sum(warm_up().values())



def cmd_warmup(args) -> int:
    """Compile (or load) every numba kernel the default fits use, so that later processes
    load them from numba's on-disk cache: once after installing, or in a container image."""
    tic = time.perf_counter()
    address = _scheduler(args)
    if address:  # one worker per host: the workers of a host share its on-disk cache
        from ..engine.cluster import get_client

        client = get_client(address, quiet=True)
        try:
            hosts: dict[str, str] = {}
            for worker, info in sorted(client.scheduler_info()["workers"].items()):
                hosts.setdefault(info["host"], worker)
            _log(f"compiling (or loading) numba's kernels on {len(hosts)} host(s) ...")
            futures = {host: client.submit(_warm_up_here, workers=[worker], pure=False,
                                           allow_other_workers=False)
                       for host, worker in hosts.items()}
            steps = {host: round(f.result(), 1) for host, f in futures.items()}
        finally:
            client.close()
    else:
        _log("compiling (or loading) numba's kernels on small data ...")
        steps = {"here": round(_warm_up_here(), 1)}
    seconds = time.perf_counter() - tic
    _result(args, {"seconds": seconds, "hosts": steps},
            f"numba's kernels compiled and cached in {seconds:.1f} s")
    return 0



def cmd_cluster(args) -> int:
    """Start a local cluster that stays until interrupted; later commands use --scheduler."""
    import signal

    from ..engine.cluster import close_local_cluster, get_client

    if not args.verbose:
        _quiet_workers()
    if args.scheduler_file:
        _check_file_output(args.scheduler_file, args.overwrite, "--scheduler-file")
    _check_port_free(args.host, args.port)
    _state["cluster_used"] = True
    tic = time.perf_counter()
    _log(f"starting a local Dask cluster: {_local_cluster_text(args)} ...")
    client = get_client(None, n_workers=args.workers, memory_limit=args.memory_limit,
                        host=args.host, scheduler_port=args.port, quiet=True)
    cluster = client.cluster
    address = cluster.scheduler_address
    if args.scheduler_file:
        client.write_scheduler_file(args.scheduler_file)
    _log(f"cluster ready in {time.perf_counter() - tic:.1f} s; stop it with Ctrl-C")
    _log(_exposure(args.host))
    _result(args, {"scheduler": address, "dashboard": client.dashboard_link,
                   "scheduler_file": args.scheduler_file, "host": args.host},
            f"scheduler: {address}\ndashboard: {client.dashboard_link}\n"
            f"use it:    daskauc --scheduler {address} fit ...   "
            f"(or export DASKAUC_SCHEDULER={address})")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        close_local_cluster(client)
        if args.scheduler_file and os.path.exists(args.scheduler_file):
            os.remove(args.scheduler_file)
        _log("cluster stopped")
    return 0



def _check_port_free(host: str, port: int) -> None:
    """The scheduler's port, before anything starts: a taken one gave three tracebacks."""
    import socket

    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ValueError(
                f"port {port} on {host} is taken ({exc.strerror}): another Dask scheduler or "
                f"'daskauc cluster' runs there? Use it with --scheduler tcp://{host}:{port}, "
                "or start this one with --port 0 (any free port)") from None



def _exposure(host: str) -> str:
    """What a cluster on ``host`` exposes, and to whom."""
    if host in ("127.0.0.1", "localhost", "::1"):
        return ("the scheduler, its workers and the dashboard listen on this machine only "
                f"({host}); to serve other machines, start it with --host ADDRESS and "
                "secure it first (see 'Security' in docs/cluster.md)")
    return (f"WARNING: the scheduler and dashboard listen on {host} without TLS or "
            "authentication: anyone who reaches this address can run code on the workers "
            "and read their data, logs and paths; use it on a trusted network only, or set "
            "up distributed's TLS (see 'Security' in docs/cluster.md)")


_state = {"cluster_used": False}
