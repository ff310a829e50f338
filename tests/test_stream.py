import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from dask.utils import key_split

from daskauc import OAM, OPAUC, SOLAM, SPAM, SPDAM, PairwiseHingeSGD, TwoPassAUC, UnivariateAUC
from daskauc.engine.chain_plan import is_materialized
from daskauc.engine.stream import (
    BlockReader,
    block_class_counts,
    chunk_order,
    epoch_graph,
    epoch_plan,
    run_epoch,
    seed_root,
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


@pytest.mark.parametrize("task_bytes, n_tasks", [(120, 4), (240, 2), (10**9, 1)])
def test_streamed_chain_does_not_depend_on_array_blocks(tmp_path, monkeypatch, task_bytes,
                                                        n_tasks):
    from daskauc import _config

    X = np.arange(60.0).reshape(20, 3)
    Xz = _zarr_array(tmp_path, X, 5)
    y = da.from_array(np.ones(20, np.int8), chunks=5)
    monkeypatch.setattr(_config, "CHAIN_TASK_BYTES", task_bytes)  # a chunk is 120 bytes
    g = epoch_graph(_visit_log, Xz, y, [], solver="test", order=[0, 1, 2, 3],
                    per_chunk=range(4))
    graph = dict(g.__dask_graph__())
    chain = [k for k in graph if key_split(k) == "daskauc-test-epoch"]
    assert len(chain) == 1 + n_tasks  # the initial state and the tasks of the visits
    (out,) = dask.compute(g, scheduler="sync")
    assert [c for c, _ in out] == [0, 1, 2, 3]
    # no Zarr read task is a separate dependency: each chain task reads its own block
    assert not any(isinstance(k, tuple) and k[0] == Xz.name for k in graph)
    reader = BlockReader(Xz, 2)
    np.testing.assert_array_equal(reader(), X[10:15])
    assert len(reader.graph) <= 3  # only what block 2 needs


_READS: list = []


def _logged_block(block, block_id=None):
    import threading

    _READS.append((block_id[0], threading.current_thread().name))
    if float(block[0, 0]) < 0:
        raise OSError(f"cannot read block {block_id[0]}")
    return block


@pytest.mark.parametrize("n_chains", [1, 2])
def test_streamed_chains_read_ahead_each_block_once(n_chains):
    """Every block is read once per epoch; all but each chain's first are read in the
    background while the previous task of the chain works, and nothing is left pending."""
    from daskauc.engine import stream

    X = np.arange(80.0).reshape(40, 2)
    Xd = da.from_array(X, chunks=(5, 2)).map_blocks(_logged_block, dtype=float)
    y = da.from_array(np.ones(40, np.int8), chunks=5)
    order = [3, 0, 7, 5, 1, 6, 2, 4]
    _READS.clear()
    out = run_epoch(_visit_log, Xd, y, [], solver="test", order=order, per_chunk=range(8),
                    stream=True, n_chains=n_chains, merge=lambda s, f, seed: s + sum(f, []))
    assert sorted(c for c, _ in out) == sorted(order)
    assert sorted(c for c, _ in _READS) == list(range(8))  # each block read exactly once
    ahead = [c for c, thread in _READS if thread.startswith("daskauc-read-ahead")]
    assert sorted(ahead) == sorted(order[n_chains:])  # each chain's first is read in place
    assert not stream._READ_AHEAD._pending


def test_a_read_ahead_that_fails_fails_the_epoch():
    X = np.arange(80.0).reshape(40, 2)
    X[25:30] = -1.0  # block 5's read raises
    Xd = da.from_array(X, chunks=(5, 2)).map_blocks(_logged_block, dtype=float)
    y = da.from_array(np.ones(40, np.int8), chunks=5)
    with pytest.raises(OSError, match="cannot read block 5"):
        run_epoch(_visit_log, Xd, y, [], solver="test", order=[0, 5, 1], per_chunk=range(8),
                  stream=True)


def test_block_class_counts():
    y = np.array([1, -1, -1, 1, 1, -1, -1, -1], dtype=np.int8)
    counts = block_class_counts(da.from_array(y, chunks=3))
    np.testing.assert_array_equal(counts, [[2, 1], [1, 2], [2, 0]])


def test_epoch_plan_depends_only_on_the_root_and_the_epoch():
    a_order, a_seeds = epoch_plan(7, (1,), 2, 5)
    b_order, b_seeds = epoch_plan(7, (1,), 2, 5)
    assert list(a_order) == list(b_order) and sorted(a_order) == list(range(5))
    draws = [np.random.default_rng(s).random(3) for s in a_seeds]
    np.testing.assert_array_equal(draws, [np.random.default_rng(s).random(3) for s in b_seeds])
    assert len({tuple(d) for d in draws}) == 5  # one stream per visit
    c_order, c_seeds = epoch_plan(7, (1,), 3, 5)
    assert not np.array_equal(np.random.default_rng(c_seeds[0]).random(3), draws[0])
    assert list(epoch_plan(7, (1,), 2, 5, shuffle=False)[0]) == list(range(5))
    entropy, key = seed_root(11)
    assert (entropy, key) == seed_root(11) and key == ()


STOCHASTIC = {
    "NSAUC": lambda: PairwiseHingeSGD(lam=1e-3, average=True),
    "NSVMSGD2": lambda: PairwiseHingeSGD(lam=1e-3, average=False),
    "OAM-seq": lambda: OAM(update="seq"),
    "OAM-gra": lambda: OAM(update="gra"),
    "Uni-Exp": lambda: UnivariateAUC(loss="exp"),
    "Uni-Squ": lambda: UnivariateAUC(loss="square"),
    "TwoPassAUC": lambda: TwoPassAUC(lam=0.1),
    "OPAUC": lambda: OPAUC(lam=0.1),
    "SOLAM": lambda: SOLAM(),
    "SPAM": lambda: SPAM(lam=0.1),
    "SPDAM": lambda: SPDAM(lam=0.1),
}


@pytest.mark.parametrize("name", sorted(STOCHASTIC))
def test_k_epochs_in_one_fit_equal_k_partial_fits(name):
    # every epoch's random numbers come from epoch_plan(root, epoch): running the epochs in
    # one fit or continuing with partial_fit is the same computation (this is what makes the
    # epoch-count CV and the convergence study by partial_fit exact)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=300) > 0.3, 1, -1)
    Xd, yd = da.from_array(X, chunks=(60, 4)), da.from_array(y, chunks=60)
    whole = STOCHASTIC[name]().set_params(n_epochs=3, random_state=5).fit(Xd, yd)
    step = STOCHASTIC[name]().set_params(n_epochs=1, random_state=5).fit(Xd, yd)
    step.partial_fit(Xd, yd).partial_fit(Xd, yd)
    np.testing.assert_allclose(step.coef_, whole.coef_, rtol=1e-12, atol=1e-15)
    assert np.any(step.coef_ != 0)


def test_numpy_input_becomes_read_only_views_not_a_copy():
    # da.from_array copies its input; a 3 GB in-memory embedding must not be doubled by fit
    from daskauc._validation import as_row_chunked

    X = np.random.default_rng(0).normal(size=(250, 3))
    Xd = as_row_chunked(X, chunk_rows=100)
    assert Xd.chunks == ((100, 100, 50), (3,))
    blocks = [v for v in dict(Xd.__dask_graph__()).values() if isinstance(v, np.ndarray)]
    assert len(blocks) == 3
    assert all(np.shares_memory(b, X) and not b.flags.writeable for b in blocks)
    np.testing.assert_array_equal(Xd.compute(), X)
    assert as_row_chunked(X).name != as_row_chunked(X).name  # no hashing of the data
    X[230, 1] = np.inf
    with pytest.raises(ValueError, match=r"NaN or infinity \(first in row 230\)"):
        as_row_chunked(X, chunk_rows=100)


def _chained_estimators() -> list[type]:
    """Every registered estimator whose solver runs epochs as chains over row chunks."""
    from daskauc._registry import MODEL_CLASSES

    return [cls for _, cls in sorted(MODEL_CLASSES.items()) if "n_chains" in cls().get_params()]


@pytest.mark.parametrize("cls", _chained_estimators(), ids=lambda cls: cls.__name__)
def test_fits_on_arrays_persisted_on_a_process_cluster(dask_cluster_client, cls):
    """The first epoch's finiteness check made a persisted X look lazy: the chain then tried
    to read its blocks from a graph of Futures and failed ("Missing dependency")."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 6)).astype(np.float32)
    y = np.where(X[:, 0] + rng.normal(size=4000) > 0, 1, -1).astype(np.int8)
    Xd = da.from_array(X, chunks=(500, 6)).persist()
    yd = da.from_array(y, chunks=500).persist()
    on_cluster = cls(n_epochs=2, random_state=0).fit(Xd, yd)
    import dask

    with dask.config.set(scheduler="threads"):  # the same chunks, read lazily, in-process
        local = cls(n_epochs=2, random_state=0).fit(da.from_array(X, chunks=(500, 6)),
                                                    da.from_array(y, chunks=500))
    np.testing.assert_allclose(on_cluster.coef_, local.coef_, rtol=1e-10, atol=1e-12)
