import dask.array as da
import numpy as np
import zarr
from dask.utils import key_split

from daskauc.solvers.stream import (
    BlockReader,
    block_class_counts,
    chunk_order,
    epoch_graph,
    is_materialized,
    run_epoch,
)


def _visit_log(X_block, y_block, state, seed, extra):
    # records the order of visits and sums the rows, so the result checks both
    return state + [(int(extra), float(np.asarray(X_block).sum()))]


def _zarr_array(tmp_path, X, rows):
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape,
                        chunks=(rows, X.shape[1]), dtype=X.dtype)
    z[...] = X
    return da.from_zarr(z)


def test_epoch_visits_chunks_in_order_and_streams_or_depends(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    y = da.from_array(np.where(rng.random(100) < 0.5, 1, -1).astype(np.int8), chunks=10)
    Xz = _zarr_array(tmp_path, X, 10)
    order = chunk_order(10, np.random.SeedSequence(1))
    assert sorted(order) == list(range(10))
    expected = [(c, X[10 * c:10 * c + 10].sum()) for c in order]
    for Xin, materialized in ((Xz, False), (Xz.persist(), True)):
        assert is_materialized(Xin) is materialized
        out = run_epoch(_visit_log, Xin, y, [], solver="test", order=order,
                        per_chunk=np.arange(10))
        assert [c for c, _ in out] == list(order)
        np.testing.assert_allclose([s for _, s in out], [s for _, s in expected])


def test_streamed_chain_does_not_depend_on_array_blocks(tmp_path):
    X = np.arange(60.0).reshape(20, 3)
    Xz = _zarr_array(tmp_path, X, 5)
    y = da.from_array(np.ones(20, np.int8), chunks=5)
    g = epoch_graph(_visit_log, Xz, y, [], solver="test", order=[0, 1, 2, 3],
                    per_chunk=range(4))
    graph = dict(g.__dask_graph__())
    chain = [k for k in graph if key_split(k) == "daskauc-test-epoch"]
    assert len(chain) == 5  # the initial state and one task per visit
    # no Zarr read task is a separate dependency: each chain task reads its own block
    assert not any(isinstance(k, tuple) and k[0] == Xz.name for k in graph)
    reader = BlockReader(Xz, 2)
    np.testing.assert_array_equal(reader(), X[10:15])
    assert len(reader.graph) <= 3  # only what block 2 needs


def test_block_class_counts():
    y = np.array([1, -1, -1, 1, 1, -1, -1, -1], dtype=np.int8)
    counts = block_class_counts(da.from_array(y, chunks=3))
    np.testing.assert_array_equal(counts, [[2, 1], [1, 2], [2, 0]])
