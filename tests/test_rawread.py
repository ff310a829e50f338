"""Plain-bytes chunks read straight from their files (daskauc.data.rawread) against Zarr's
own read of the same store, and the faults it must name."""

import os

import numpy as np
import pytest
import zarr
from helpers import dataset_store

from daskauc import StoreIntegrityError
from daskauc.data import open_dataset
from daskauc.data.rawread import RawChunks
from daskauc.data.store import CheckedZarrArray, create_array, writing_store


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [240, 257])  # whole chunks only, and a last partial chunk
def test_raw_reads_equal_zarr_reads_bit_for_bit(tmp_path, dtype, n):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 7)).astype(dtype)
    y = np.where(rng.random(n) < 0.3, 1, -1).astype(np.int8)
    path = dataset_store(tmp_path / "p.zarr", X, y, rows=60, compressors=None)
    group = zarr.open_group(path, mode="r")
    for name, ref in (("X", X), ("y", y)):
        arr = CheckedZarrArray(group[name], name)
        assert arr.raw is not None
        full = (slice(None),) * (ref.ndim - 1)
        for rows in (slice(0, n), slice(60, 120), slice(0, 60), slice(180, n), slice(7, 131),
                     slice(119, 121), slice(n - 1, n), slice(30, 30)):
            got = arr[(rows, *full)]
            assert got.dtype == ref.dtype and got.flags.c_contiguous
            np.testing.assert_array_equal(got, ref[rows])
            np.testing.assert_array_equal(got, group[name][(rows, *full)])
    ds = open_dataset(path)
    np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)
    np.testing.assert_array_equal(ds.y.compute(scheduler="threads"), y)


def test_only_plain_row_chunked_local_arrays_take_the_raw_path(tmp_path):
    X = np.ones((40, 4), np.float32)
    y = np.ones(40, np.int8)
    zstd = zarr.open_group(dataset_store(tmp_path / "z.zarr", X, y, rows=10), mode="r")
    assert RawChunks.of(zstd["X"]) is None
    with writing_store(tmp_path / "cols.zarr", kind="dataset") as g:
        a = create_array(g, "A", shape=(40, 4), chunks=(10, 2), dtype=np.float32,
                         compressors=None)
        a[...] = X
    assert RawChunks.of(zarr.open_group(tmp_path / "cols.zarr", mode="r")["A"]) is None
    # columns selected: Zarr reads it
    plain = zarr.open_group(dataset_store(tmp_path / "p.zarr", X, y, rows=10,
                                          compressors=None), mode="r")
    arr = CheckedZarrArray(plain["X"], "X")
    np.testing.assert_array_equal(arr[slice(0, 10), slice(1, 3)], X[:10, 1:3])


def test_a_chunk_truncated_after_open_is_named(tmp_path):
    X = np.arange(400, dtype=np.float32).reshape(100, 4)
    y = np.ones(100, np.int8)
    path = dataset_store(tmp_path / "p.zarr", X, y, rows=25, compressors=None)
    ds = open_dataset(path)
    chunk = os.path.join(path, "X", "c", "2", "0")
    size = os.path.getsize(chunk)
    with open(chunk, "r+b") as f:
        f.truncate(size - 8)
    with pytest.raises(StoreIntegrityError, match=rf"X/c/2/0 is truncated or altered "
                                                  rf"\({size - 8} bytes instead of {size}\)"):
        ds.X.compute(scheduler="threads")
