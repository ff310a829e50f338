"""Sparse dataset stores (CSR row chunks): written from LIBSVM text, scipy matrices and dask
arrays of sparse chunks, read back exactly, damage detected, bad input refused by line."""

import glob
import os
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import no_dense_rows
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

import daskauc
from daskauc._sparse import sparse_row_blocks
from daskauc.data import open_dataset
from daskauc.store.protocol import StoreIntegrityError
from daskauc.store.sparse import write_csr_chunk
from daskauc.store.write import create_array, writing_store


def _wide(n=600, d=50_000, density=0.001, seed=0):
    X = sp.random(n, d, density=density, format="csr", random_state=seed, dtype=np.float64)
    X.data = np.round(X.data * 1000) / 8  # exact in text and in float32
    y = np.where(np.random.default_rng(seed).random(n) < 0.3, 1, -1)
    return X, y


def _svm(path, X, y, zero_based=False):
    dump_svmlight_file(X, y, str(path), zero_based=zero_based)
    return str(path)


def test_a_wide_libsvm_file_is_stored_sparse_and_read_back_exactly(tmp_path):
    X, y = _wide()
    src = _svm(tmp_path / "w.svm", X, y)
    with no_dense_rows():
        ds = daskauc.ingest(src, tmp_path / "w.zarr", dtype="float64", chunk_rows=250)
        assert ds.attrs["rows"] == "csr" and ds.attrs["sparse_format"] == 1
        assert ds.attrs["n_nonzero"] == X.nnz and ds.X.chunks[0] == (250, 250, 100)
        assert ds.attrs["n_positive"] == int((y > 0).sum())
        block = ds.X.blocks[1].compute()
        assert sp.issparse(block) and block.has_canonical_format
    expected, _ = load_svmlight_file(src, n_features=X.shape[1])
    assert abs(ds.X.compute() - expected).max() == 0
    np.testing.assert_array_equal(ds.y.compute(), y)


def test_auto_keeps_narrow_files_dense_and_rows_overrides_it(tmp_path):
    X, y = _wide(n=300, d=40, density=0.1)
    src = _svm(tmp_path / "n.svm", X, y)
    assert "rows" not in daskauc.ingest(src, tmp_path / "auto.zarr").attrs  # dense, as before
    forced = daskauc.ingest(src, tmp_path / "sparse.zarr", rows="sparse", dtype="float64")
    assert forced.attrs["rows"] == "csr"
    assert abs(forced.X.compute() - X).max() == 0
    Xw, yw = _wide()
    wide = _svm(tmp_path / "w.svm", Xw, yw)
    dense = daskauc.ingest(wide, tmp_path / "dense.zarr", rows="dense", allow_dense=True)
    assert "rows" not in dense.attrs and dense.X.shape == Xw.shape
    with pytest.raises(ValueError, match="rows must be"):
        daskauc.ingest(src, tmp_path / "bad.zarr", rows="csr")


@pytest.mark.parametrize("make, dtype", [
    (lambda X: X.tocoo(), "float32"),
    (lambda X: sp.csr_array(X), "float64"),
    (lambda X: sparse_row_blocks(X, 200), None),
])
def test_scipy_matrices_and_dask_arrays_of_sparse_chunks_are_written_sparse(tmp_path, make,
                                                                             dtype):
    X, y = _wide()
    with no_dense_rows():
        ds = daskauc.ingest_array(make(X), y, tmp_path / "s.zarr", dtype=dtype, chunk_rows=200)
    assert ds.attrs["rows"] == "csr" and ds.X.chunks[0] == (200, 200, 200)
    got = ds.X.compute()
    assert got.dtype == np.dtype(dtype or "float64")
    assert abs(got - X.astype(got.dtype)).max() == 0


def test_nan_in_a_sparse_matrix_is_refused_by_row_before_anything_is_written(tmp_path):
    X, y = _wide()
    X = X.copy()
    row = 417
    X.data[X.indptr[row]] = np.nan
    with pytest.raises(ValueError, match=f"NaN or infinity \\(first in row {row}\\)"):
        daskauc.ingest_array(X, y, tmp_path / "s.zarr")
    assert not os.path.exists(tmp_path / "s.zarr")


def _damage(store, how):
    a = sorted(glob.glob(f"{store}/Xcsr/000001/indices/c/*"))[0]
    b = sorted(glob.glob(f"{store}/Xcsr/000002/indices/c/*"))[0]
    if how == "missing":
        os.remove(a)
    elif how == "truncated":
        with open(a, "rb") as f:
            data = f.read()
        with open(a, "wb") as f:
            f.write(data[: len(data) // 2])
    else:  # two chunk files of the same size swapped: each passes its own CRC32C
        shutil.copy(a, str(a) + ".tmp")
        shutil.copy(b, a)
        shutil.copy(str(a) + ".tmp", b)
        os.remove(str(a) + ".tmp")


@pytest.mark.parametrize("how", ["missing", "truncated", "swapped"])
def test_a_damaged_sparse_chunk_is_an_error_that_names_it(tmp_path, how):
    rng = np.random.default_rng(1)
    n, d, per_row = 300, 10_000, 5  # equal non-zeros per row: chunk files of equal sizes
    cols = np.sort(np.stack([rng.choice(d, per_row, replace=False) for _ in range(n)]), axis=1)
    X = sp.csr_matrix((np.ones(n * per_row), cols.ravel(), np.arange(0, n * per_row + 1,
                                                                      per_row)), shape=(n, d))
    y = np.r_[np.ones(100), -np.ones(200)]
    store = str(tmp_path / "s.zarr")
    daskauc.ingest_array(X, y, store, chunk_rows=100)
    _damage(store, how)
    with pytest.raises(StoreIntegrityError, match="Xcsr/00000[12]/indices"):
        open_dataset(store).X.compute(scheduler="sync")


_UNSORTED = (np.ones(3), np.array([5, 2, 7]), np.array([0, 2, 3]))


@pytest.mark.parametrize("parts, message", [
    (_UNSORTED, "not increasing within a row"),
    ((np.ones(3), np.array([2, 2, 7]), np.array([0, 2, 3])), "not increasing within a row"),
    ((np.ones(3), np.array([2, 5, 10]), np.array([0, 2, 3])), "out of range"),
    ((np.ones(3), np.array([-1, 5, 7]), np.array([0, 2, 3])), "out of range"),
    ((np.ones(3), np.array([2, 5, 7]), np.array([0, 2, 2])), "row pointers do not match"),
    ((np.ones(3), np.array([2, 5, 7]), np.array([0, 3, 2])), "row pointers do not match"),
    ((np.array([1.0, np.nan, 1.0]), np.array([2, 5, 7]), np.array([0, 2, 3])),
     "NaN or infinity"),
], ids=["unsorted", "duplicate", "past-the-width", "negative", "short-pointers",
        "decreasing-pointers", "nan"])
def test_a_chunk_whose_structure_does_not_match_is_refused_on_read(tmp_path, parts, message):
    # written by hand, checksummed and committed: only the structure check can catch it
    bad = sp.csr_matrix((2, 10))
    bad.data, bad.indices, bad.indptr = parts  # as written, not checked by scipy
    store = str(tmp_path / "hand.zarr")
    attrs = {"rows": "csr", "sparse_format": 1, "n_samples": 2, "n_features": 10,
             "chunk_rows": 2, "dtype": "float64", "n_positive": 1, "n_negative": 1}
    with writing_store(store, kind="dataset", attrs=attrs) as group:
        write_csr_chunk(group, 0, bad)
        create_array(group, "y", shape=(2,), chunks=(2,), dtype=np.int8)[:] = [1, -1]
    with pytest.raises(StoreIntegrityError, match=f"Xcsr/000000.*{message}"):
        open_dataset(store).X.compute(scheduler="sync")


def test_an_unknown_format_version_is_refused_by_name(tmp_path):
    X, y = _wide(n=100)
    store = str(tmp_path / "s.zarr")
    daskauc.ingest_array(X, y, store)
    import zarr

    zarr.open_group(store, mode="r+").attrs["sparse_format"] = 2
    with pytest.raises(ValueError, match="sparse rows in format 2"):
        open_dataset(store)


@pytest.mark.parametrize("line, message", [
    ("1 3:1 2:1", "is smaller than the one before"),
    ("1 2:1 2:3", "repeats the one before"),
    ("1 2:nan", "non-finite value nan"),
    ("1 2:1 9999999:1", "beyond n_features"),
    ("1 2:x", "cannot read 'x' as a number"),
])
def test_bad_sparse_text_is_refused_naming_its_line_and_nothing_is_written(tmp_path, line,
                                                                          message):
    rows = [f"{1 if i % 3 else -1} 1:0.5 {7 + i}:1" for i in range(40)]
    rows[27] = line
    src = tmp_path / "bad.svm"
    src.write_text("\n".join(rows) + "\n")
    store = tmp_path / "bad.zarr"
    with pytest.raises(ValueError, match=message) as info:
        daskauc.ingest(src, store, rows="sparse", n_features=None if "9999999" not in line
                       else 100)
    assert "line 28" in str(info.value)
    assert not store.exists()


def test_values_left_to_python_are_exact_however_many_a_row_holds(tmp_path, monkeypatch):
    # numbers the fast path cannot convert exactly go to a fixed-size list; a row with more
    # of them than room is finished after the list is emptied (SLOW_FULL), and one whose
    # values outgrow the chunk's arrays after they grow (NNZ_FULL)
    from daskauc.data import parse

    monkeypatch.setattr(parse, "_SLOW_CAPACITY", 3)
    rng = np.random.default_rng(4)
    lines = []
    for i in range(60):
        cols = np.sort(rng.choice(5000, 5 if i < 30 else 75, replace=False)) + 1
        lines.append(f"{1 if i % 4 else -1} " + " ".join(
            f"{c}:{rng.normal():.19f}" for c in cols))
    src = tmp_path / "slow.svm"
    src.write_text("\n".join(lines) + "\n")
    ds = daskauc.ingest(src, tmp_path / "s.zarr", rows="sparse", dtype="float64",
                        chunk_rows=25)
    expected, _ = load_svmlight_file(str(src), n_features=5000)
    assert abs(ds.X.compute() - expected).max() == 0


def test_a_file_of_16_million_features_is_ingested_within_a_chunk_of_memory(tmp_path):
    # 2**24 features: dense rows would be 64 MiB each; the sparse store holds the non-zeros
    rng = np.random.default_rng(2)
    lines = []
    for i in range(2000):
        cols = np.sort(rng.choice(2**24, 12, replace=False)) + 1
        lines.append(f"{1 if i % 10 == 0 else -1} " + " ".join(f"{c}:1" for c in cols))
    src = tmp_path / "click.svm"
    src.write_text("\n".join(lines) + "\n")
    with no_dense_rows():
        ds = daskauc.ingest(src, tmp_path / "click.zarr", n_features=2**24)
        assert ds.attrs["rows"] == "csr" and ds.X.shape == (2000, 2**24)
        assert ds.X.blocks[0].compute().nnz == 2000 * 12
    size = sum(os.path.getsize(p) for p in glob.glob(f"{tmp_path}/click.zarr/**/*",
                                                      recursive=True) if os.path.isfile(p))
    assert size < 2000 * 12 * 8 * 2  # about the non-zeros, never 2000 x 2**24


def test_the_non_zeros_a_row_are_known_without_reading_the_rows(tmp_path):
    from daskauc._sparse import nonzeros_per_row
    from daskauc.engine.chain_plan import is_materialized

    X, y = _wide()
    in_memory = sparse_row_blocks(X, 200)
    assert is_materialized(in_memory)
    assert nonzeros_per_row(in_memory) == pytest.approx(X.nnz / X.shape[0])
    ds = daskauc.ingest_array(X, y, tmp_path / "s.zarr", chunk_rows=200)
    assert ds.attrs["chunk_nonzeros"] == [X[a:a + 200].nnz for a in (0, 200, 400)]
    assert nonzeros_per_row(ds.X) == pytest.approx(X.nnz / X.shape[0])
    assert not is_materialized(ds.X)
