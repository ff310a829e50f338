"""Paths and URLs: what a user's path becomes before it enters a graph (an absolute path or
an fsspec URL, :func:`resolve_path`), a URL's filesystem and the options a task opening it
elsewhere needs (:func:`effective_storage_options`), and daskauc's first request to an object
store (:func:`check_access`), which says in one line, before any work, that its endpoint does
not answer, that its bucket does not exist, or that this process or the Dask workers have no
credentials for it. (The ground floor: imports nothing of daskauc but ``_config`` and, to
find the workers, ``_compute``.)"""

from __future__ import annotations

import os
import socket

from .. import _config


def is_url(path: str) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def local_path(path) -> str:
    p = os.fspath(path)
    return p[len("file://") :] if p.startswith("file://") else p


def resolve_path(path) -> str:
    """The one place a user's path becomes what goes into a graph: an absolute local path
    (``~`` expanded, ``file://`` stripped) or an fsspec URL unchanged. A relative path sent to
    workers as is would be read relative to each worker's working directory. A URL whose
    filesystem is not installed (``s3://`` without s3fs) is refused here, naming the package
    (:func:`check_protocol`)."""
    p = os.fspath(path)
    if is_url(p):
        check_protocol(p)
        return p.rstrip("/")
    return os.path.abspath(os.path.expanduser(local_path(p)))


def check_protocol(url: str) -> None:
    """Refuse a URL that fsspec cannot open here: one ``ImportError`` naming the package to
    install (``s3fs`` for ``s3://``, ``gcsfs`` for ``gs://`` ...), or a ``ValueError`` for a
    scheme fsspec does not know. Without it the first use failed with a traceback from
    deep inside fsspec, or as a missing file."""
    import fsspec
    from fsspec.registry import known_implementations

    for part in url.split("::"):  # chained URLs: simplecache::s3://...
        protocol = part.split("://", 1)[0]
        try:
            fsspec.get_filesystem_class(protocol)
        except ImportError as exc:
            known = known_implementations.get(protocol, {})
            package = known.get("class", protocol).split(".", 1)[0]
            if package == "fsspec":  # one of fsspec's own (http://: aiohttp and requests)
                raise ImportError(f"{url}: {known.get('err') or exc}") from None
            extra = " (or pip install 'daskauc[s3]')" if package == "s3fs" else ""
            raise ImportError(
                f"{url}: {protocol}:// URLs need the package {package}, which is not "
                f"installed: pip install {package}{extra}", name=package) from None
        except ValueError:
            raise ValueError(f"{url}: unknown URL scheme {protocol}:// (fsspec has no "
                             "filesystem for it)") from None


def url_filesystem(url: str, storage_options: dict | None = None):
    """The fsspec filesystem of ``url`` and the path of ``url`` in it (``bucket/key``)."""
    import fsspec

    fs, _, paths = fsspec.get_fs_token_paths(url, storage_options=storage_options)
    return fs, paths[0].rstrip("/")


def effective_storage_options(url: str, storage_options: dict | None = None) -> dict:
    """The options ``url``'s filesystem is built with in this process: ``storage_options``
    over fsspec's configuration for its protocol (``fsspec.config.conf``, which the
    ``FSSPEC_<PROTOCOL>`` variables and ``daskauc --storage-options`` fill). What a task that
    opens ``url`` in another process (a worker, whose configuration may lack them) needs."""
    fs, _ = url_filesystem(url, storage_options)
    return dict(fs.storage_options)


class StorageUnreachableError(ConnectionError):
    """The endpoint of an object store does not answer, here or on the Dask workers: one
    line naming the URL and the endpoint (:func:`check_access`)."""


_DOCS = "docs/cluster.md, 'Credentials and endpoint'"
#: what :func:`check_access` found reachable: option tokens, and (client id, token) pairs
_ACCESS_CHECKED: set = set()


def check_access(url: str, storage_options: dict | None = None) -> None:
    """daskauc's first request to the bucket of an ``s3://`` URL, before any work: one
    ``HeadBucket`` with a bounded connect timeout and number of attempts
    (``_config.PROBE_*``; the user's options, unchanged, serve every later request), in this
    process and, when a distributed client is current, on one of its workers with the
    options a task carries (:func:`effective_storage_options`). One line naming the URL:

    * :class:`StorageUnreachableError` (a ``ConnectionError``) for an endpoint that does not
      answer, naming it (botocore's retries took 15 s before three tracebacks);
    * ``FileNotFoundError`` for a bucket that does not exist;
    * ``PermissionError`` for no credentials, saying whether this process or the workers
      lack them (a worker found none where the client had them in its own environment: a
      100-line traceback from the first chunk read).

    Once per process for each set of options and bucket (and each client, for the workers);
    other protocols, chained URLs and local paths are not asked (their first request says
    it)."""
    url = resolve_path(url)
    protocol = url.split("://", 1)[0]
    if not is_url(url) or "::" in url or protocol not in ("s3", "s3a"):
        return
    from dask.base import tokenize

    options = _probe_options(effective_storage_options(url, storage_options))
    fs, root = url_filesystem(url, options)
    bucket = root.split("/", 1)[0]
    token = tokenize(protocol, options, bucket,
                     sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))
    if token not in _ACCESS_CHECKED:
        problem = _access_problem(fs, bucket)
        if problem is not None:
            raise _access_error(url, bucket, *problem)
        _ACCESS_CHECKED.add(token)
    client = _client_of_workers()
    if client is not None:
        _check_workers(client, url, protocol, options, bucket)


def check_workers_access(client, urls) -> None:
    """:func:`check_access`'s request on one worker of ``client`` for each ``s3://`` URL of
    ``urls``, with the options their tasks carry: the command line, whose stores are checked
    before its cluster starts, asks once it is connected."""
    for url in urls:
        protocol = url.split("://", 1)[0]
        if "::" in url or protocol not in ("s3", "s3a"):
            continue
        options = _probe_options(effective_storage_options(url))
        bucket = url_filesystem(url, options)[1].split("/", 1)[0]
        _check_workers(client, url, protocol, options, bucket)


def _check_workers(client, url, protocol, options, bucket) -> None:
    from dask.base import tokenize

    token = (client.id, tokenize(protocol, options, bucket))
    if getattr(client, "asynchronous", False) or token in _ACCESS_CHECKED:
        return
    worker = next(iter(client.scheduler_info(n_workers=1).get("workers", {})), None)
    if worker is None:
        return
    problem = client.run(_worker_access, protocol, options, bucket, workers=[worker])[worker]
    if problem is not None:
        raise _access_error(url, bucket, *problem, worker=worker)
    _ACCESS_CHECKED.add(token)


def _client_of_workers():
    """The distributed client daskauc computes on now, unless this runs in a task (a worker
    asks for itself)."""
    try:
        from distributed import get_worker

        get_worker()
        return None
    except (ImportError, ValueError):
        pass
    from .._compute import distributed_client

    return distributed_client()


def _probe_options(options: dict) -> dict:
    """``options`` with botocore's connect timeout, read timeout and attempts of the probe."""
    config = {**(options.get("config_kwargs") or {}),
              "connect_timeout": _config.PROBE_CONNECT_TIMEOUT,
              "read_timeout": _config.PROBE_READ_TIMEOUT,
              "retries": {"max_attempts": _config.PROBE_ATTEMPTS, "mode": "standard"}}
    return {**options, "config_kwargs": config}


def _worker_access(protocol: str, options: dict, bucket: str):
    """:func:`_access_problem` on a worker, for a filesystem built as a task's is (from the
    options it carries); a missing package is a problem too."""
    import fsspec

    try:
        fs = fsspec.get_filesystem_class(protocol)(**options)
    except ImportError as exc:
        return "package", str(exc), ""
    return _access_problem(fs, bucket)


def _access_problem(fs, bucket: str) -> tuple[str, str, str] | None:
    """(kind, detail, endpoint) of what a ``HeadBucket`` on ``fs`` meets: ``"bucket"`` (it
    does not exist), ``"credentials"`` or ``"unreachable"`` (:func:`storage_fault_kind`);
    None when it answers, or refuses in a way the reads may not (a 403: permission to
    read objects without permission to head their bucket)."""
    try:
        fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        return "bucket", "", _endpoint(fs)
    except Exception as exc:  # noqa: BLE001 - only the kinds below are the probe's to say
        kind, detail, endpoint = storage_fault_kind(exc)
        if kind is not None:
            return kind, detail, endpoint or _endpoint(fs)
    return None


def _endpoint(fs) -> str:
    client = getattr(fs, "s3", None)
    found = getattr(getattr(client, "meta", None), "endpoint_url", None)
    return found or (fs.client_kwargs or {}).get("endpoint_url") or "AWS's default endpoint"


def storage_fault_kind(exc: BaseException) -> tuple[str | None, str, str]:
    """(kind, detail, endpoint) of an object-storage error, found anywhere in the chain of
    ``exc`` (s3fs and zarr may wrap botocore's, as an ``OSError``): ``"credentials"`` (none
    found), ``"unreachable"`` (no connection, or no answer in time), or None for another
    error."""
    try:
        from botocore import exceptions as boto
    except ImportError:
        return None, "", ""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        endpoint = (getattr(e, "kwargs", None) or {}).get("endpoint_url", "")
        if isinstance(e, (boto.NoCredentialsError, boto.PartialCredentialsError)):
            return "credentials", str(e), endpoint
        if isinstance(e, (boto.ConnectionError, boto.ReadTimeoutError)):
            refused = _in_chain(e, ConnectionRefusedError)
            detail = ("connection refused" if refused else
                      f"{type(e).__name__}: {str(e).split(': ', 1)[0]}")
            return "unreachable", detail, endpoint
        todo += [e.__cause__, e.__context__]
    return None, "", ""


def _in_chain(exc: BaseException, kind: type) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _access_error(url: str, bucket: str, kind: str, detail: str, endpoint: str,
                  worker: str | None = None) -> Exception:
    """The one-line error of :func:`check_access` (``worker``: found on that worker, where
    this process found none)."""
    endpoint = _bare_endpoint(endpoint)
    if worker is None:
        if kind == "bucket":
            return FileNotFoundError(
                f"nothing exists at {url}: the bucket {bucket} does not exist (endpoint "
                f"{endpoint}); check the URL, or create the bucket to write there")
        if kind == "unreachable":
            return StorageUnreachableError(
                f"{url}: the S3 endpoint {endpoint} does not answer ({detail}); check it "
                "(endpoint_url in the storage options or --storage-options, or "
                "AWS_ENDPOINT_URL) and that the service runs")
        return PermissionError(
            f"{url}: this process has no credentials for s3:// ({detail}); give them in the "
            "environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), in "
            f"the storage options or with --storage-options ({_DOCS})")
    where = f"worker {worker}: {detail}" if detail else f"worker {worker}"
    if kind == "credentials":
        return PermissionError(
            f"{url}: the Dask workers have no credentials for s3:// ({where}); this process "
            "has them, but they do not reach the workers: give the workers credentials "
            "(their environment or role), or give them as storage options "
            "(fsspec.config.conf['s3'], storage_options=, --storage-options), which travel "
            f"with the tasks ({_DOCS})")
    if kind == "unreachable":
        return StorageUnreachableError(
            f"{url}: the Dask workers cannot reach the S3 endpoint {endpoint} ({where}); "
            f"this process can: give the workers an endpoint they reach ({_DOCS})")
    if kind == "bucket":
        return FileNotFoundError(
            f"{url}: the Dask workers find no bucket {bucket} at the endpoint {endpoint} "
            f"({where}), where this process finds it: give them this process's endpoint "
            f"({_DOCS})")
    return ImportError(f"{url}: the Dask workers cannot open s3:// URLs ({where}): install "
                       "s3fs on every worker (pip install s3fs)")


def _bare_endpoint(endpoint: str) -> str:
    """``http://host:port`` of a request's URL (botocore names the URL it asked)."""
    if "://" not in endpoint:
        return endpoint
    scheme, rest = endpoint.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}"


def storage_fault(exc: BaseException, label: str) -> Exception | None:
    """The one-line error for a read of ``label`` (a store's array) that met no credentials
    or an endpoint that does not answer (:func:`storage_fault_kind`), saying where: on a Dask
    worker, its address and host (the client that opened the store had what it needed); None
    for any other error."""
    kind, detail, endpoint = storage_fault_kind(exc)
    if kind is None:
        return None
    try:
        from distributed import get_worker

        where = f"the Dask worker {get_worker().address} on host {socket.gethostname()}"
        opened = ("; the client opened the store with credentials of its own, which do not "
                  "reach the workers: give the workers credentials (their environment or "
                  "role), or give them as storage options, which travel with the tasks")
    except (ImportError, ValueError):
        where, opened = "this process", ""
    if kind == "credentials":
        return PermissionError(f"{label}: {where} has no credentials for s3:// ({detail})"
                               f"{opened} ({_DOCS})")
    endpoint = f"the S3 endpoint {_bare_endpoint(endpoint)}" if endpoint else "its S3 endpoint"
    return StorageUnreachableError(f"{label}: {where} cannot reach {endpoint} ({detail}) "
                                   f"({_DOCS})")


def nothing_at(url: str) -> str:
    """What to add to "no store at URL" (or input) once :func:`check_access` found its bucket:
    that nothing exists at the URL, and that its bucket does."""
    if url.split("://", 1)[0] in ("s3", "s3a") and "::" not in url:
        bucket = url.split("://", 1)[1].split("/", 1)[0]
        return f"nothing exists at that URL (the bucket {bucket} exists: check the path)"
    return "nothing exists at that URL"
