"""Plain-bytes chunks read straight from their files (daskauc.store.rawchunks) against Zarr's
own read of the same store, and the faults it must name."""

import os

import numpy as np
import pytest
import zarr
from helpers import dataset_store

from daskauc import StoreIntegrityError
from daskauc.data import open_dataset
from daskauc.store.dataset import CheckedZarrArray
from daskauc.store.rawchunks import RawChunks
from daskauc.store.write import create_array, writing_store


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


@pytest.mark.parametrize("n", [240, 257])
def test_raw_writes_are_the_bytes_zarr_writes(tmp_path, n):
    from daskauc.store.rawchunks import write_rows

    rng = np.random.default_rng(5)
    X = rng.normal(size=(n, 7)).astype(np.float32)
    y = np.where(rng.random(n) < 0.3, 1, -1).astype(np.int8)
    for how in ("zarr", "raw"):
        with writing_store(tmp_path / f"{how}.zarr", kind="dataset") as g:
            for name, a, chunks in (("X", X, (60, 7)), ("y", y, (60,))):
                z = create_array(g, name, shape=a.shape, chunks=chunks, dtype=a.dtype,
                                 compressors=None)
                if how == "zarr":
                    z[...] = a
                else:
                    assert RawChunks.of(z).write(0, a[:120])  # two whole chunks
                    write_rows(z, 120, a[120:])  # the rest, the last chunk padded
    for name in ("X", "y"):
        files = sorted(os.listdir(tmp_path / "zarr.zarr" / name / "c"))
        assert files == sorted(os.listdir(tmp_path / "raw.zarr" / name / "c"))
        for root, _, names in os.walk(tmp_path / "zarr.zarr" / name / "c"):
            for f in names:
                mine = os.path.join(str(root).replace("zarr.zarr", "raw.zarr"), f)
                with open(os.path.join(root, f), "rb") as a, open(mine, "rb") as b:
                    assert a.read() == b.read(), (name, f)
    ds = open_dataset(tmp_path / "raw.zarr")
    np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)


def test_rows_that_are_not_whole_chunks_are_left_to_zarr(tmp_path):
    from daskauc.store.rawchunks import write_rows

    with writing_store(tmp_path / "p.zarr", kind="dataset") as g:
        z = create_array(g, "X", shape=(100, 2), chunks=(25, 2), dtype=np.float64,
                         compressors=None)
        raw = RawChunks.of(z)
        assert not raw.write(10, np.ones((25, 2)))  # not at a chunk start
        assert not raw.write(0, np.ones((30, 2)))  # ends inside a chunk
        z[...] = 0
        write_rows(z, 10, np.ones((30, 2)))  # through Zarr
    got = zarr.open_group(tmp_path / "p.zarr", mode="r")["X"][...]
    np.testing.assert_array_equal(got[:, 0], np.r_[np.zeros(10), np.ones(30), np.zeros(60)])


def test_a_pooled_buffer_is_reused_only_when_nothing_refers_to_it():
    from daskauc.store.rawchunks import BufferPool

    pool = BufferPool(max_buffers=2)
    a = pool.take(64)
    view = a[8:16].view(np.float64)  # a view keeps its buffer taken
    del a
    b = pool.take(64)
    assert b.__array_interface__["data"][0] != view.__array_interface__["data"][0]
    del view
    c = pool.take(64)  # the first buffer is free again
    assert c is not b and c.nbytes == 64
    del b, c
    assert pool.take(32).nbytes == 32 and len(pool._buffers) == 2  # the oldest forgotten


def test_streamed_reads_into_reused_buffers_stay_correct(tmp_path):
    """Blocks read by BlockReader (pooled) and kept alive are never overwritten by the next
    reads; each equals Zarr's read."""
    from daskauc.engine.stream import BlockReader

    rng = np.random.default_rng(9)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    path = dataset_store(tmp_path / "p.zarr", X, np.ones(300, np.int8), rows=50,
                         compressors=None)
    Xd = open_dataset(path).X
    kept = [BlockReader(Xd, c)() for c in range(6)] * 2  # all alive at once
    for _ in range(3):
        for c in range(6):
            BlockReader(Xd, c)()  # read and dropped: its buffer is reused
    for c, blk in enumerate(kept[:6]):
        np.testing.assert_array_equal(blk, X[50 * c : 50 * c + 50])


def test_a_chunk_is_checksummed_once_until_its_file_changes(tmp_path, monkeypatch):
    """A file read again unchanged is not checksummed again; any change to it, even one that
    keeps its size and sets its modification time back, is checked again and named."""
    import daskauc.store.rawchunks as rawchunks

    X = np.arange(400, dtype=np.float32).reshape(100, 4)
    y = np.ones(100, np.int8)
    path = dataset_store(tmp_path / "p.zarr", X, y, rows=25, compressors=None)
    calls = []
    real = rawchunks._crc32c_extend
    monkeypatch.setattr(rawchunks, "_crc32c_extend",
                        lambda crc, data: calls.append(1) or real(crc, data))
    ds = open_dataset(path)
    np.testing.assert_array_equal(ds.X.compute(scheduler="sync"), X)
    first = len(calls)
    assert first >= 4  # every chunk of X checked
    np.testing.assert_array_equal(ds.X.compute(scheduler="sync"), X)
    assert len(calls) == first  # unchanged: not checked again
    chunk = os.path.join(path, "X", "c", "2", "0")
    st = os.stat(chunk)
    with open(chunk, "r+b") as f:
        f.seek(8)
        f.write(b"\x01")
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same size and mtime
    with pytest.raises(StoreIntegrityError, match="rows 50:75 failed its checksum"):
        ds.X.compute(scheduler="sync")
    with pytest.raises(StoreIntegrityError, match="rows 50:75 failed its checksum"):  # again
        ds.X.compute(scheduler="sync")
