import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import dask
import pytest

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(*parts) -> pathlib.Path:
    """Path into ../shared/data; skip the test when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


_WARMUP = ("import sys, dask; dask.config.set(scheduler='synchronous'); "
           "from daskauc.estimators._warmup import warm_up; warm_up(sys.argv[1])")


#: modules whose tests start processes (the command line's local clusters, real scheduler and
#: worker processes, killed writers), inject faults or serve object storage: ``-m slow``
SLOW_MODULES = {"test_faults", "test_cli_faults", "test_multihost", "test_cold_start",
                "test_ingest_faults", "test_s3", "test_cli", "test_readme"}
#: a test that takes one of these (directly or through another fixture) runs on a real
#: cluster: ``-m slow`` too (a test that asks for one by ``request.getfixturevalue`` says so
#: with its own mark)
CLUSTER_FIXTURES = {"dask_cluster_client", "_session_cluster_client"}


def pytest_collection_modifyitems(config, items):
    """Mark the real-cluster, process and fault tests ``slow`` by the rules above, so that
    ``pytest -m "not slow"`` is the fast subset (every oracle test on the threaded
    scheduler), and the README's command runs them all."""
    for item in items:
        module = item.module.__name__.rpartition(".")[2]
        if module in SLOW_MODULES or CLUSTER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


def pytest_sessionstart(session):
    """``daskauc warmup`` in a second process, at low priority, while the first tests run.

    A fresh clone starts with numba's on-disk cache empty: every kernel is compiled by the
    first test that calls it, one after the other on one core (about a minute of the suite
    in a fresh clone). The warm-up compiles them beside the tests on the idle core and writes
    them to the cache, from which later tests load them; a kernel that a test reaches first
    is compiled by both, at no cost but the idle core. DASKAUC_TEST_WARMUP=0 turns it off."""
    if os.environ.get("DASKAUC_TEST_WARMUP", "1") == "0":
        return
    workdir = tempfile.mkdtemp(prefix="daskauc-test-warmup-")  # its small stores
    session.config._daskauc_warmup = (workdir, subprocess.Popen(
        [sys.executable, "-c", _WARMUP, workdir], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, preexec_fn=lambda: os.nice(10)))


def pytest_sessionfinish(session, exitstatus):
    workdir, proc = getattr(session.config, "_daskauc_warmup", (None, None))
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def _session_cluster_client():
    """One 2-worker LocalCluster for the whole run, not Dask's default scheduler."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                      processes=True, memory_limit="2GiB") as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


@pytest.fixture
def dask_cluster_client(_session_cluster_client):
    """The shared 2-worker LocalCluster, as Dask's scheduler for this test only.

    Tests without this fixture run on the threaded scheduler even after the cluster exists.
    """
    client = _session_cluster_client
    with client.as_current(), dask.config.set(scheduler=client):
        yield client


@pytest.fixture
def threaded_unless_cluster(request):
    """Run on the threaded scheduler unless the test asks for the cluster.

    The session-wide ``dask_cluster_client`` becomes dask's default scheduler once created;
    without this, every later test would pay ~60 ms of cluster latency per compute. Modules
    opt in with ``pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")``.
    """
    if "dask_cluster_client" in request.fixturenames:
        yield
    else:
        with dask.config.set(scheduler="threads"):
            yield


class S3Server:
    """A running S3 API (see the ``s3_server`` fixture): its endpoint, one bucket, and the
    credentials and endpoint both ways users give them."""

    def __init__(self, endpoint: str, bucket: str):
        key, secret, region = "daskauc-test", "daskauc-test-secret", "us-east-1"
        self.endpoint, self.bucket = endpoint, bucket
        #: fsspec (s3fs) options, as ``storage_options=`` or ``fsspec.config.conf["s3"]``
        self.storage_options = {"key": key, "secret": secret,
                                "client_kwargs": {"endpoint_url": endpoint}}
        #: the environment botocore reads in any process (dask workers included); no probe of
        #: the EC2 metadata service when a process has none of it
        self.env = {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
                    "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": region,
                    "AWS_EC2_METADATA_DISABLED": "true"}

    def filesystem(self):
        """An s3fs filesystem on the server (listings never cached: tests change objects
        behind daskauc's back)."""
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options, use_listings_cache=False,
                                 skip_instance_cache=True)

    def url(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *parts])


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 API for the suite: moto's server mode in a thread of this process, listening
    on 127.0.0.1 only (a free port), with one bucket. Skipped, with the reason, when moto's
    server or s3fs is not importable (both are in the ``test`` extra)."""
    import logging

    for module in ("moto.server", "s3fs"):
        pytest.importorskip(module, reason=f"{module} is not installed: pip install -e "
                            "'.[test]' (the S3 tests need moto[server] and s3fs)")
    from moto.server import ThreadedMotoServer

    werkzeug = logging.getLogger("werkzeug")  # a line per request otherwise
    level = werkzeug.level
    werkzeug.setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        s3 = S3Server(f"http://{host}:{port}", "daskauc-test")
        s3.filesystem().mkdir(s3.bucket)
        yield s3
    finally:
        server.stop()
        werkzeug.setLevel(level)
