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
