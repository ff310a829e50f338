"""Shuffling and splitting sparse rows: a shuffled sparse LIBSVM ingest holds the rows of the
dense shuffle of the same file and seed, in bounded memory; a split of sparse rows (scipy,
dask, a sparse store) chooses the rows of the dense split and writes two sparse stores; the
command line ingests, shuffles and splits a wide file without densifying it."""

import glob
import json
import os

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers import no_dense_rows
from sklearn.datasets import dump_svmlight_file

import daskauc
from daskauc._config import MANIFEST_ATTR
from daskauc._params import seed_sequence
from daskauc._sparse import sparse_row_blocks
from daskauc.cli import main
from daskauc.data import open_dataset
from daskauc.data import sources as sources_mod
from daskauc.data import writers as writers_mod
from daskauc.data.split import split_mask, split_store, train_test_split
from daskauc.store.dataset import CsrChunkReader


def _data(n=1500, d=2000, density=0.01, seed=0):
    X = sp.random(n, d - 1, density=density, format="csr", random_state=seed,
                  dtype=np.float64)
    X.data = np.round(X.data * 1000) / 8  # exact in text and in float32
    ids = sp.csr_matrix(np.arange(1, n + 1, dtype=np.float64)[:, None])
    X = sp.hstack([ids, X], format="csr")  # column 0 names the row
    y = np.where(np.random.default_rng(seed).random(n) < 0.3, 1, -1)
    return X, y


def _svm(path, X, y):
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return str(path)


def _same(A, B) -> bool:
    """Sparse or dense A and B hold the same values (never densifying a sparse one)."""
    A = A if sp.issparse(A) else sp.csr_matrix(A)
    B = B if sp.issparse(B) else sp.csr_matrix(B)
    return A.shape == B.shape and (A != B).nnz == 0


def _no_spill_left(tmp_path):
    assert glob.glob(f"{tmp_path}/.daskauc-spill-*") == []


# ------------------------------------------------------------------------------ shuffle


@pytest.mark.parametrize("dtype, chunk_rows", [("float64", 128), ("float32", 700)])
def test_a_shuffled_sparse_ingest_has_the_dense_shuffles_row_order(tmp_path, dtype,
                                                                    chunk_rows):
    X, y = _data()
    src = _svm(tmp_path / "w.svm", X, y)
    kw = dict(dtype=dtype, chunk_rows=chunk_rows, random_state=5)
    with no_dense_rows():
        shuf = daskauc.ingest(src, tmp_path / "s.zarr", rows="sparse", shuffle=True, **kw)
        plain = daskauc.ingest(src, tmp_path / "p.zarr", rows="sparse", **kw)
        Xs, Xp = shuf.X.compute(), plain.X.compute()
        blocks = [shuf.X.blocks[i].compute() for i in range(shuf.X.numblocks[0])]
    dense = daskauc.ingest(src, tmp_path / "d.zarr", rows="dense", shuffle=True, **kw)
    assert shuf.attrs["rows"] == "csr" and shuf.attrs["shuffled"] is True
    assert shuf.attrs["shuffle_seed"] == dense.attrs["shuffle_seed"] == "5"
    assert _same(Xs, dense.X.compute())  # the dense shuffle's rows, in its order ...
    np.testing.assert_array_equal(shuf.y.compute(), dense.y.compute())
    perm = np.random.default_rng(seed_sequence(5)).permutation(X.shape[0])
    assert _same(Xs[perm], Xp)  # ... which is perm's: file row i at position perm[i]
    np.testing.assert_array_equal(shuf.y.compute()[perm], plain.y.compute())
    assert shuf.X.chunks[0] == plain.X.chunks[0]
    assert all(sp.isspmatrix_csr(b) and b.has_canonical_format for b in blocks)
    assert shuf.attrs["n_nonzero"] == X.nnz
    assert shuf.attrs["chunk_nonzeros"] == [b.nnz for b in blocks]
    assert shuf.attrs["n_positive"] == int((y > 0).sum())
    _no_spill_left(tmp_path)


def test_the_sparse_shuffle_holds_about_one_chunk_of_non_zeros(tmp_path, monkeypatch):
    """The memory traced does not grow with the rows: a chunk of non-zeros is spilled to its
    destinations' files as it is parsed, and a destination chunk is read back alone."""
    import tracemalloc

    monkeypatch.setattr(sources_mod, "_BLOCK_BYTES", 1 << 16)
    rng = np.random.default_rng(3)
    peaks, per_row = {}, 12
    for n in (2000, 10_000, 50_000):  # the first warms up imports and caches
        cols = np.arange(per_row) * 4000 + rng.integers(1, 4000, (n, per_row))  # sorted
        labels = np.where(np.arange(n) % 4 == 0, "1", "-1")
        src = tmp_path / f"rows{n}.svm"
        np.savetxt(src, np.column_stack([labels, *(np.char.add(c.astype(str), ":1")
                                                   for c in cols.T)]), fmt="%s")
        tracemalloc.start()
        try:
            ds = daskauc.ingest(src, tmp_path / f"s{n}.zarr", rows="sparse", shuffle=True,
                                random_state=11, chunk_rows=5000, dtype="float64")
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert ds.attrs["n_nonzero"] == 50_000 * per_row
    # a row holds 144 bytes of non-zeros: holding the 40,000 more rows would add 5.8 MB.
    # Measured 6.06 MB at 10,000 and at 50,000 rows alone (the parse buffers, zarr and a few
    # 720 kB chunks); once 0.24 MB more in the whole suite, not alone (tracemalloc traces
    # every thread, the background threads of earlier tests' clusters included): the bound
    # is a tenth of what holding the rows would add
    assert peaks[50_000] - peaks[10_000] < 40_000 * per_row * 12 // 10, peaks
    _no_spill_left(tmp_path)


def test_bad_sparse_text_is_still_refused_when_shuffling(tmp_path):
    rows = [f"{1 if i % 3 else -1} 1:0.5 {7 + i}:1" for i in range(40)]
    rows[27] = "1 3:1 2:1"
    src = tmp_path / "bad.svm"
    src.write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError, match="line 28.*smaller than the one before"):
        daskauc.ingest(src, tmp_path / "bad.zarr", rows="sparse", shuffle=True,
                       chunk_rows=8)
    assert sorted(os.listdir(tmp_path)) == ["bad.svm"]  # no store, no spill files


def test_an_interrupted_sparse_shuffle_leaves_nothing(tmp_path, monkeypatch):
    X, y = _data(n=300, d=500)
    src = _svm(tmp_path / "w.svm", X, y)
    daskauc.ingest(src, tmp_path / "old.zarr", rows="sparse", chunk_rows=50)
    calls, original = [], writers_mod._SparseShuffleWriter.write

    def failing(self, chunk):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("simulated interruption")
        return original(self, chunk)

    monkeypatch.setattr(writers_mod._SparseShuffleWriter, "write", failing)
    for target, overwrite in (("new.zarr", False), ("old.zarr", True)):
        calls.clear()
        with pytest.raises(KeyboardInterrupt):
            daskauc.ingest(src, tmp_path / target, rows="sparse", chunk_rows=50,
                           shuffle=True, overwrite=overwrite)
    assert sorted(os.listdir(tmp_path)) == ["old.zarr", "w.svm"]
    assert open_dataset(tmp_path / "old.zarr").attrs["shuffled"] is False


# ------------------------------------------------------------------------------ split


@pytest.mark.parametrize("kind", ["csr", "coo", "csr_array", "frame", "dask"])
def test_a_split_of_sparse_rows_chooses_the_rows_of_the_dense_split(kind):
    X, y = _data(n=400, d=60, density=0.1)
    Xin = {"csr": lambda: X, "coo": X.tocoo, "csr_array": lambda: sp.csr_array(X),
           "frame": lambda: pd.DataFrame.sparse.from_spmatrix(X),
           "dask": lambda: sparse_row_blocks(X, 64)}[kind]()
    dense = train_test_split(X.toarray(), y, test_size=0.25, random_state=1)
    with no_dense_rows(max_cells=0):
        parts = train_test_split(Xin, y, test_size=0.25, random_state=1)
        if kind == "dask":
            assert all(isinstance(p, da.Array) for p in parts)
            assert not np.isnan(sum(parts[0].chunks[0]))
            assert sp.issparse(parts[0]._meta) and parts[0].numblocks[0] == 7
            parts = [p.compute() for p in parts]
    assert sp.issparse(parts[0]) and sp.issparse(parts[1])
    for got, ref in zip(parts[:2], dense[:2], strict=True):
        assert _same(got, ref)
    for got, ref in zip(parts[2:], dense[2:], strict=True):
        np.testing.assert_array_equal(got, ref)
    for c in (-1, 1):  # exact per class: round half up
        assert (parts[3] == c).sum() == np.floor(0.25 * (y == c).sum() + 0.5)


def test_a_sparse_store_splits_into_two_sparse_stores_in_one_pass(tmp_path, monkeypatch):
    X, y = _data(n=1000, d=3000, density=0.005)
    daskauc.ingest_array(X, y, tmp_path / "s.zarr", chunk_rows=130)
    daskauc.ingest_array(X.toarray(), y, tmp_path / "d.zarr", chunk_rows=130)
    reads, read = [], CsrChunkReader.__call__

    def counted(self, i):
        reads.append(i)
        return read(self, i)

    monkeypatch.setattr(CsrChunkReader, "__call__", counted)
    with no_dense_rows():
        tr, te = split_store(tmp_path / "s.zarr", tmp_path / "tr.zarr", tmp_path / "te.zarr",
                             test_size=0.2, random_state=3)
        assert sorted(reads) == list(range(8))  # one pass: each row chunk read once
        got = [tr.X.compute(), te.X.compute()]
    dtr, dte = split_store(tmp_path / "d.zarr", tmp_path / "dtr.zarr",
                           tmp_path / "dte.zarr", test_size=0.2, random_state=3)
    assert _same(got[0], dtr.X.compute()) and _same(got[1], dte.X.compute())
    np.testing.assert_array_equal(te.y.compute(), dte.y.compute())
    mask = split_mask(y, test_size=0.2, random_state=seed_sequence(3))
    np.testing.assert_array_equal(np.sort(got[1][:, 0].data), np.flatnonzero(mask) + 1)
    for s, part in ((tr, "train"), (te, "test")):
        a = s.attrs
        assert a["rows"] == "csr" and a["sparse_format"] == 1 and a["split_part"] == part
        assert a["chunk_rows"] == 130 and s.X.chunks[0][0] == min(130, s.n_samples)
        assert a[MANIFEST_ATTR]  # committed: every chunk file with its size and checksum
    assert tr.attrs["n_nonzero"] + te.attrs["n_nonzero"] == X.nnz
    assert te.attrs["chunk_nonzeros"] == [te.X.blocks[i].compute().nnz
                                          for i in range(te.X.numblocks[0])]
    for c, key in ((-1, "n_negative"), (1, "n_positive")):
        assert te.attrs[key] == np.floor(0.2 * (y == c).sum() + 0.5)
        assert tr.attrs[key] + te.attrs[key] == (y == c).sum()
    with pytest.raises(FileExistsError):
        split_store(tmp_path / "s.zarr", tmp_path / "tr.zarr", tmp_path / "te2.zarr")


# ------------------------------------------------------------------------------ command line


def test_the_command_line_shuffles_and_splits_a_wide_sparse_file(tmp_path, capsys):
    rng = np.random.default_rng(4)
    n, d = 2000, 2**18
    lines = []
    for i in range(n):
        cols = np.sort(rng.choice(np.arange(2, d + 1), 19, replace=False))
        label = 1 if i % 5 == 0 else -1
        lines.append(f"{label} 1:{i + 1} " + " ".join(f"{c}:{1 + c % 3}" for c in cols))
    src = tmp_path / "wide.svm"
    src.write_text("\n".join(lines) + "\n")
    p = lambda name: str(tmp_path / name)  # noqa: E731
    with no_dense_rows():
        assert main(["ingest", str(src), p("all.zarr"), "--shuffle", "--split", p("tr.zarr"),
                     p("te.zarr"), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        full, tr, te = (open_dataset(p(s)) for s in ("all.zarr", "tr.zarr", "te.zarr"))
        ids = [ds.X.compute()[:, 0].tocsc().data.astype(int) for ds in (full, tr, te)]
    assert out["rows"] == "sparse" and out["train"] == p("tr.zarr")
    assert all(ds.attrs["rows"] == "csr" for ds in (full, tr, te))
    assert full.X.shape == (n, d) and full.attrs["shuffled"] is True
    perm = np.random.default_rng(seed_sequence(0)).permutation(n)
    np.testing.assert_array_equal(ids[0][perm], np.arange(1, n + 1))  # the seed's order
    mask = split_mask(full.y.compute(), test_size=0.2, random_state=seed_sequence(0))
    np.testing.assert_array_equal(ids[2], ids[0][mask])
    np.testing.assert_array_equal(ids[1], ids[0][~mask])
    assert te.attrs["n_positive"] == 80 and te.attrs["n_negative"] == 320
    assert tr.attrs["n_nonzero"] + te.attrs["n_nonzero"] == n * 20
