"""What a user sees: no warnings they cannot act on, progress bars, plots, the CLI's manners."""

import warnings

import dask
import numpy as np
import pytest

import daskauc
from daskauc import _config


@pytest.fixture
def large_graph_threshold():
    """distributed warns about graphs above 64 kB here (10 MB by default), and daskauc shares
    constants from 16 kB: the same proportion as the defaults, at test sizes."""
    old = _config.SHARE_BYTES
    _config.SHARE_BYTES = 16_000
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "64kB"}):
        yield
    _config.SHARE_BYTES = old


def _data(n=6000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X[:, 0] + X[:, 1] ** 2 + 0.3 * rng.normal(size=n) > 1, 1, -1)
    return X, y


def test_no_large_graph_warnings_on_a_cluster(tmp_path, dask_cluster_client,
                                             large_graph_threshold):
    """The Nystroem projection (120 x 120 float64 = 115 kB), NSAUC's partner rows and Newton's
    sort order travel scattered, not inside every graph: without sharing, each of these
    steps warned "Sending large graph"."""
    X, y = _data()
    daskauc.ingest_array(X, y, tmp_path / "d.zarr", chunk_rows=1500)
    ds = daskauc.open_dataset(tmp_path / "d.zarr")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*[Ll]arge graph.*")
        fmap = daskauc.KMeansNystroem(120, dtype="float64", kmeans_epochs=1,
                                      random_state=0).fit(ds.X)
        emb = fmap.write_embedding(tmp_path / "d.zarr", tmp_path / "e.zarr")
        sgd = daskauc.PairwiseHingeSGD(n_epochs=2, random_state=0).fit(emb.X, emb.y)
        svm = daskauc.RankSVM(C=1e-3, max_iter=3, tol=0.5).fit(emb.X, emb.y)
    # the same models as on the threaded scheduler (where nothing is scattered)
    with dask.config.set(scheduler="threads"):
        sgd_t = daskauc.PairwiseHingeSGD(n_epochs=2, random_state=0).fit(emb.X, emb.y)
        svm_t = daskauc.RankSVM(C=1e-3, max_iter=3, tol=0.5).fit(emb.X, emb.y)
    np.testing.assert_array_equal(sgd.coef_, sgd_t.coef_)
    np.testing.assert_allclose(svm.coef_, svm_t.coef_, rtol=1e-10, atol=1e-12)
    assert sgd.score(emb.X, emb.y) > 0.9


def test_dashboard_port_taken_picks_another(tmp_path):
    """A second local cluster beside one that holds 8787 gets another port, no warning."""
    import socket

    from daskauc.cluster import free_dashboard_address

    with socket.socket() as sock:
        try:
            sock.bind(("", 8787))
        except OSError:
            pass  # taken already: the case under test
        sock.listen()
        assert free_dashboard_address() == ":0"
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    assert free_dashboard_address(port) == f":{port}"
