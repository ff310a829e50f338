import pathlib

import pytest

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(*parts) -> pathlib.Path:
    """Path into ../shared/data; skip the test when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


@pytest.fixture(scope="session")
def dask_cluster_client():
    """A 2-worker LocalCluster shared by the distributed tests."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                      processes=True, memory_limit="2GiB") as cluster, Client(cluster) as client:
        yield client
