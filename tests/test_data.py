"""The data layer (daskauc.data): ingest, shuffle, split, scalers, the default dataset.

Oracles: scikit-learn's ``load_svmlight_file`` and ``preprocessing`` scalers, numpy's
``loadtxt``, and the line-by-line readers of tests/reference/data.py.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import importlib
import io
import lzma
import os

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import shared_data
from helpers import ComputeCounter
from reference.data import pm1, read_dense_lines, read_libsvm_lines
from sklearn import preprocessing as skp
from sklearn.datasets import load_svmlight_file

from daskauc.data.default import default_dataset_path, load_default
from daskauc.data.ingest import ingest, ingest_array, write_dataset
from daskauc.data.scale import MinMaxScaler, StandardScaler, normalize_rows
from daskauc.data.split import split_mask, split_store, train_test_split
from daskauc.store.dataset import open_dataset

writers_mod = importlib.import_module("daskauc.data.writers")




def _assert_chunks_aligned(ds):
    """Every dask chunk of X and y is exactly one Zarr chunk (the last may be short)."""
    z = zarr.open_group(ds.path, mode="r")
    cr = z["X"].chunks[0]
    assert z["y"].chunks[0] == cr
    n = ds.X.shape[0]
    expected = tuple([cr] * (n // cr) + ([n % cr] if n % cr else []))
    assert ds.X.chunks[0] == expected
    assert ds.y.chunks[0] == expected
    assert ds.attrs["chunk_rows"] == cr
    assert ds.y.dtype == np.int8


def _write(path, text: str):
    data = text.encode()
    opener = {".bz2": bz2.open, ".xz": lzma.open, ".gz": gzip.open}.get(
        os.path.splitext(str(path))[1], open)
    with opener(path, "wb") as f:
        f.write(data)
    return path


def _random_libsvm(rng, n=60, d=9, labels=("-1", "+1")) -> str:
    """LIBSVM text with increasing indices, varied number formats, comments,
    qid tokens, empty rows and values the exact fast path must hand to Python."""
    fmts = [lambda v: f"{v:.6g}", lambda v: f"{v:.17g}", lambda v: f"{v:.3E}",
            lambda v: repr(v), lambda v: f"{v:.25f}"]
    lines = ["# a comment line", ""]
    for i in range(n):
        lab = labels[i % len(labels)] if i < len(labels) else labels[rng.integers(len(labels))]
        toks = [lab]
        if i % 7 == 3:
            toks.append(f"qid:{i}")
        for j in np.flatnonzero(rng.random(d) < 0.5):
            v = float(rng.normal() * 10.0 ** rng.integers(-8, 8))
            toks.append(f"{j + 1}:{fmts[rng.integers(len(fmts))](v)}")
        tail = "  # trailing comment" if i % 11 == 5 else " "
        lines.append(" ".join(toks) + tail)
    lines.append(f"{labels[0]} 1:1e-320 {d}:123456789012345678901234567890")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ LIBSVM


@pytest.mark.parametrize("ext", ["", ".bz2", ".xz", ".gz"])
def test_libsvm_roundtrip_equals_sklearn(tmp_path, ext):
    rng = np.random.default_rng(1)
    text = _random_libsvm(rng)
    src = _write(tmp_path / f"small.libsvm{ext}", text)
    ds = ingest(src, tmp_path / "store", dtype="float64", chunk_rows=7)
    Xs, ys = load_svmlight_file(io.BytesIO(text.encode()))
    np.testing.assert_array_equal(ds.X.compute(), Xs.toarray())  # bit for bit
    np.testing.assert_array_equal(ds.y.compute(), np.where(ys > 0, 1, -1))
    _assert_chunks_aligned(ds)
    assert ds.attrs["source_compression"] == {"": None, ".bz2": "bz2", ".xz": "xz",
                                              ".gz": "gzip"}[ext]
    assert ds.attrs["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert ds.attrs["n_positive"] + ds.attrs["n_negative"] == ds.attrs["n_samples"] == Xs.shape[0]

    ds32 = ingest(src, tmp_path / "store32", dtype="float32", n_features=12, chunk_rows=1000)
    assert ds32.attrs["source_sha256"] == ds.attrs["source_sha256"]  # hashed in the one pass
    assert ds32.X.dtype == np.float32 and ds32.X.shape == (Xs.shape[0], 12)
    np.testing.assert_array_equal(ds32.X[:, :9].compute(), Xs.toarray().astype(np.float32))
    assert not ds32.X[:, 9:].any().compute()


def test_a9a_test_file_matches_sklearn(tmp_path):
    path = shared_data("a9a", "a9a.t.xz")
    ds = ingest(path, tmp_path / "a9at", n_features=123, chunk_rows=5000)
    Xs, ys = load_svmlight_file(io.BytesIO(lzma.open(path).read()), n_features=123)
    assert ds.X.shape == (16_281, 123)
    assert ds.attrs["n_positive"] == 3_846 and ds.attrs["n_negative"] == 12_435
    np.testing.assert_array_equal(ds.X.compute(), Xs.toarray().astype(np.float32))
    np.testing.assert_array_equal(ds.y.compute(), ys.astype(np.int8))
    assert ds.attrs["classes"] == [[-1], [1]]
    assert ds.attrs["source_format"] == "libsvm" and ds.attrs["zero_based"] is False
    _assert_chunks_aligned(ds)


def test_multiclass_grouping_usps(tmp_path):
    with bz2.open(shared_data("usps", "usps.t.bz2"), "rt") as f:
        lines = [next(f) for _ in range(300)]
    src = tmp_path / "usps300"  # no extension: the format is sniffed from the content
    src.write_text("".join(lines))
    with pytest.raises(ValueError, match="positive_classes"):
        ingest(src, tmp_path / "bad")
    ds = ingest(src, tmp_path / "u", positive_classes=[1, 2], n_features=256, dtype="float64")
    Xs, ys = load_svmlight_file(str(src), n_features=256)
    np.testing.assert_array_equal(ds.X.compute(), Xs.toarray())
    np.testing.assert_array_equal(ds.y.compute(), np.where(np.isin(ys, [1, 2]), 1, -1))
    neg, pos = ds.attrs["classes"]
    assert pos == [1, 2] and sorted(neg) == sorted(set(np.unique(ys).astype(int)) - {1, 2})


@pytest.mark.parametrize("labels, positive", [
    (["-1", "+1"], "+1"), (["0", "1"], "1"), (["1", "2"], "2"), (["-1.0", "1.0"], "1.0"),
    (["ham", "spam"], "spam"),
])
def test_label_conventions(tmp_path, labels, positive):
    rng = np.random.default_rng(2)
    raw = [labels[i % 2] for i in range(40)]
    text = "".join(f"{lab} 1:{rng.normal():.6f} 3:{i}\n" for i, lab in enumerate(raw))
    src = _write(tmp_path / "conv.svm", text)
    ds = ingest(src, tmp_path / "s")
    np.testing.assert_array_equal(ds.y.compute(), pm1(raw, [positive]))
    X_ref, _ = read_libsvm_lines(text.splitlines())
    np.testing.assert_array_equal(ds.X.compute(), X_ref.astype(np.float32))
    # and the other class when it is named
    ds2 = ingest(src, tmp_path / "s2", pos_label=labels[0] if labels[0][0].isalpha()
                 else float(labels[0]))
    np.testing.assert_array_equal(ds2.y.compute(), -pm1(raw, [positive]))


def test_numeric_label_spellings_are_one_class(tmp_path):
    text = "+1 1:1\n1.0 1:2\n1 1:3\n-1 1:4\n-1.0 1:5\n"
    ds = ingest(_write(tmp_path / "f.svm", text), tmp_path / "s")
    np.testing.assert_array_equal(ds.y.compute(), [1, 1, 1, -1, -1])
    assert ds.attrs["classes"] == [[-1], [1]]


@pytest.mark.parametrize("n_features", [None, 5])
def test_zero_based_detection(tmp_path, n_features):
    text = "1 0:1.5 2:2\n-1 0:3\n\n-1 4:1 0:2\n"  # 0-based throughout (a blank line too)
    src = _write(tmp_path / "z.svm", text)
    ds = ingest(src, tmp_path / "s", n_features=n_features, dtype="float64", chunk_rows=1)
    X_ref, _ = read_libsvm_lines(text.splitlines(), n_features=n_features, zero_based=True)
    np.testing.assert_array_equal(ds.X.compute(), X_ref)
    assert ds.attrs["zero_based"] is True
    with pytest.raises(ValueError, match="zero_based=False"):
        ingest(src, tmp_path / "s2", n_features=n_features, zero_based=False)
    assert not (tmp_path / "s2").exists()


@pytest.mark.parametrize("n_features", [None, 5])
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_stray_zero_index_is_an_error_not_a_rebase(tmp_path, n_features, shuffle):
    # a 1-based file with one stray "0:" on line 3: read as 0-based, every column would shift
    text = "1 1:1.5 2:2\n-1 5:3\n-1 4:1 0:2\n1 3:1\n"
    src = _write(tmp_path / "mixed.svm", text)
    with pytest.raises(ValueError, match=r"line 3: feature index 0, but line 1 \(and 2 other"):
        ingest(src, tmp_path / "s", n_features=n_features, shuffle=shuffle)
    assert not (tmp_path / "s").exists()
    # asked for explicitly, the file is read 0-based (scikit-learn's loader agrees)
    ds = ingest(src, tmp_path / "s", n_features=6 if n_features else None, zero_based=True,
                dtype="float64")
    X_ref, _ = read_libsvm_lines(text.splitlines(), n_features=6 if n_features else None,
                                 zero_based=True)
    np.testing.assert_array_equal(ds.X.compute(), X_ref)


# ------------------------------------------------------------------------------ dense text


def test_csv_with_header_and_string_labels(tmp_path):
    rng = np.random.default_rng(3)
    rows = ["a,b,label,c"]
    for i in range(25):
        lab = '"yes"' if i % 3 == 0 else "no"
        rows.append(f"{rng.normal():.9g}, {i},{lab},{rng.integers(-5, 5)}")
    text = "\n".join(rows)  # no newline at the end of the last line
    src = _write(tmp_path / "d.csv.gz", text)
    ds = ingest(src, tmp_path / "s", label_column=2, dtype="float64", chunk_rows=4)
    X_ref, lab = read_dense_lines(text.splitlines(), ",", label_column=2, header=True)
    np.testing.assert_array_equal(ds.X.compute(), X_ref)
    np.testing.assert_array_equal(ds.y.compute(), pm1(lab, ["yes"]))
    assert ds.attrs["header"] is True and ds.attrs["classes"] == [["no"], ["yes"]]
    _assert_chunks_aligned(ds)
    shuf = ingest(src, tmp_path / "shuf", label_column=2, dtype="float64", chunk_rows=4,
                  shuffle=True, random_state=0)
    Xs, ys = _sorted_rows(shuf.X.compute()[:, [1, 0, 2]], shuf.y.compute())  # by column b = i
    np.testing.assert_array_equal(Xs[:, [1, 0, 2]], X_ref)
    np.testing.assert_array_equal(ys, pm1(lab, ["yes"]))


def test_svmguide3_numbered_header_is_detected(tmp_path):
    path = shared_data("svmguide3", "svmguide3.csv.xz")
    ds = ingest(path, tmp_path / "s", label_column=0, dtype="float64")
    ref = np.loadtxt(lzma.open(path), delimiter=",", skiprows=1)
    assert ds.X.shape == (1_243, 21)
    np.testing.assert_array_equal(ds.X.compute(), ref[:, 1:])
    np.testing.assert_array_equal(ds.y.compute(), ref[:, 0].astype(np.int8))
    assert (ds.attrs["n_negative"], ds.attrs["n_positive"]) == (947, 296)


def test_default_dataset_is_spambase(tmp_path):
    assert default_dataset_path().endswith("spambase.data.xz")
    ds = load_default(tmp_path / "spam")
    ref = np.loadtxt(lzma.open(default_dataset_path()))
    assert ds.X.shape == (4_601, 57)
    assert (ds.attrs["n_positive"], ds.attrs["n_negative"]) == (1_813, 2_788)
    np.testing.assert_array_equal(ds.X.compute(), ref[:, :-1].astype(np.float32))
    np.testing.assert_array_equal(ds.y.compute(), np.where(ref[:, -1] == 1, 1, -1))
    assert ds.attrs["source_format"] == "csv"


def test_format_sniffing(tmp_path):
    """LIBSVM content under a .txt or unknown name; whitespace and comma dense .data files."""
    svm = "1 1:2 3:4\n-1 2:1\n"
    for name in ("a.txt", "covtype.libsvm.binary", "plain"):
        ds = ingest(_write(tmp_path / name, svm), tmp_path / f"s-{name}")
        assert ds.attrs["source_format"] == "libsvm" and ds.X.shape == (2, 3)
    dense = "1.5 2 0\n3 4 1\n"
    ds = ingest(_write(tmp_path / "w.data", dense), tmp_path / "s-w")
    np.testing.assert_array_equal(ds.X.compute(), [[1.5, 2], [3, 4]])
    ds = ingest(_write(tmp_path / "c.data", dense.replace(" ", ",")), tmp_path / "s-c")
    np.testing.assert_array_equal(ds.X.compute(), [[1.5, 2], [3, 4]])


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("name, text, match", [
    ("nan.svm", "1 1:2\n\n-1 1:nan\n", r"nan.svm, line 3: non-finite"),
    ("inf.csv", "1,2,0\n3,-inf,1\n", r"inf.csv, line 2: non-finite"),
    ("word.svm", "1 1:2\n-1 2:abc\n", r"word.svm, line 2: cannot read 'abc'"),
    ("colon.svm", "1 1:2\n-1 2\n", r"colon.svm, line 2: token '2' is not of the form"),
    ("index.svm", "1 1:2\n-1 x:2\n", r"index.svm, line 2: .* valid feature index"),
    ("ragged.csv", "1,2,0\n3,1\n", r"ragged.csv, line 2: expected 3 fields"),
    ("empty.csv", "1,2,0\n3,,1\n", r"empty.csv, line 2: empty value"),
    ("single.svm", "1 1:2\n1 1:3\n", r"single class"),
    ("three.svm", "1 1:2\n2 1:3\n3 1:1\n", r"positive_classes"),
    ("nanlabel.csv", "1,2,0\n3,1,nan\n", r"label 'nan' is not a finite number"),
    ("missing.csv", "1,?,0\n3,1,1\n", r"missing.csv, line 1: cannot read '\?'"),
])
def test_bad_input_errors_name_the_problem(tmp_path, name, text, match):
    src = _write(tmp_path / name, text)
    with pytest.raises(ValueError, match=match):
        ingest(src, tmp_path / "s", chunk_rows=1)
    assert sorted(os.listdir(tmp_path)) == [name]  # no store, no partial store, no spill


def test_missing_file_beyond_n_features_and_bad_params(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.svm"):
        ingest(tmp_path / "nope.svm", tmp_path / "s")
    src = _write(tmp_path / "f.svm", "1 1:2 7:1\n-1 2:1\n")
    with pytest.raises(ValueError, match="line 1: feature index in '7:1' is beyond n_features=5"):
        ingest(src, tmp_path / "s", n_features=5)
    with pytest.raises(TypeError, match="dtype"):
        ingest(src, tmp_path / "s", dtype="int32")
    with pytest.raises(ValueError, match="chunk_rows"):
        ingest(src, tmp_path / "s", chunk_rows=0)
    with pytest.raises(ValueError, match="format"):
        ingest(src, tmp_path / "s", format="xlsx")
    with pytest.raises(ValueError, match="f.svm cannot be read as Parquet"):
        ingest(src, tmp_path / "s", format="parquet")


def test_existing_store_refused_then_replaced(tmp_path):
    a = _write(tmp_path / "a.svm", "1 1:1\n-1 1:2\n")
    b = _write(tmp_path / "b.svm", "1 1:5\n-1 1:6\n1 1:7\n")
    ingest(a, tmp_path / "s")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        ingest(b, tmp_path / "s")
    assert open_dataset(tmp_path / "s").X.shape[0] == 2
    ds = ingest(b, tmp_path / "s", overwrite=True)
    np.testing.assert_array_equal(ds.X.compute().ravel(), [5, 6, 7])


@pytest.mark.parametrize("shuffle", [False, True])
def test_interrupted_write_leaves_nothing(tmp_path, monkeypatch, shuffle):
    src = _write(tmp_path / "f.svm", "".join(f"{(-1) ** i} 1:{i}\n" for i in range(30)))
    ingest(src, tmp_path / "old")
    calls = []
    cls = writers_mod._ShuffleWriter if shuffle else writers_mod._DirectWriter
    original = cls.write

    def failing(self, chunk):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("simulated interruption")
        return original(self, chunk)

    monkeypatch.setattr(cls, "write", failing)
    for target, overwrite in (("new", False), ("old", True)):
        calls.clear()
        with pytest.raises(KeyboardInterrupt):
            ingest(src, tmp_path / target, chunk_rows=4, shuffle=shuffle, overwrite=overwrite)
    assert sorted(os.listdir(tmp_path)) == ["f.svm", "old"]
    np.testing.assert_array_equal(open_dataset(tmp_path / "old").X.compute().ravel(), range(30))


# ------------------------------------------------------------------------------ shuffle


def _sorted_rows(X, y):
    order = np.argsort(X[:, 0])
    return X[order], y[order]


def test_text_shuffle_is_a_balanced_permutation(tmp_path):
    n, cr = 5000, 500
    rng = np.random.default_rng(4)
    y_raw = np.sort(np.where(rng.random(n) < 0.3, 1, -1))  # negatives first: pure chunks
    text = "".join(f"{lab} 1:{i} 2:{rng.normal():.5f}\n" for i, lab in enumerate(y_raw))
    src = _write(tmp_path / "s.svm", text)
    plain = ingest(src, tmp_path / "plain", chunk_rows=cr, dtype="float64")
    shuf = ingest(src, tmp_path / "shuf", chunk_rows=cr, dtype="float64", shuffle=True,
                  random_state=7)
    X0, y0 = plain.X.compute(), plain.y.compute()
    X1, y1 = shuf.X.compute(), shuf.y.compute()
    assert not np.array_equal(X1[:, 0], X0[:, 0])
    Xs, ys = _sorted_rows(X1, y1)
    np.testing.assert_array_equal(Xs, X0)  # same multiset of rows ...
    np.testing.assert_array_equal(ys, y0)  # ... with their labels
    _assert_chunks_aligned(shuf)
    # positives per chunk of 500 drawn without replacement from 5000 with n+ of them:
    # hypergeometric, sd <= sqrt(500 p (1-p) 0.9); 6 sd bounds fail with prob < 1e-8 per chunk
    p = y0.mean() / 2 + 0.5
    sd = np.sqrt(cr * p * (1 - p) * (n - cr) / (n - 1))
    per_chunk = (y1.reshape(-1, cr) > 0).sum(axis=1)
    assert np.all(np.abs(per_chunk - cr * p) <= 6 * sd), per_chunk
    assert shuf.attrs["shuffled"] is True and shuf.attrs["shuffle_seed"] == "7"
    again = ingest(src, tmp_path / "again", chunk_rows=cr, dtype="float64", shuffle=True,
                   random_state=7)
    np.testing.assert_array_equal(again.X.compute(), X1)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_array_shuffle_is_a_permutation(tmp_path, kind):
    n = 1000
    rng = np.random.default_rng(5)
    X = np.column_stack([np.arange(n), rng.normal(size=n)])
    y = np.repeat([0, 1], [700, 300])
    Xin = X if kind == "numpy" else da.from_array(X, chunks=(130, 2))
    ds = ingest_array(Xin, y, tmp_path / "s", shuffle=True, random_state=3, chunk_rows=100)
    X1, y1 = ds.X.compute(), ds.y.compute()
    assert not np.array_equal(X1[:, 0], X[:, 0])
    Xs, ys = _sorted_rows(X1, y1)
    np.testing.assert_array_equal(Xs, X)
    np.testing.assert_array_equal(ys, np.where(y == 1, 1, -1))
    _assert_chunks_aligned(ds)
    sd = np.sqrt(100 * 0.3 * 0.7 * 0.9)
    assert np.all(np.abs((y1.reshape(-1, 100) > 0).sum(axis=1) - 30) <= 6 * sd)


# ------------------------------------------------------------------------------ arrays


def test_ingest_array_numpy_and_dask(tmp_path):
    rng = np.random.default_rng(6)
    X = rng.integers(-3, 3, size=(103, 4))
    y = rng.choice([1, 2], size=103)
    ds = ingest_array(X, y, tmp_path / "np", chunk_rows=20)
    assert ds.X.dtype == np.float64
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), np.where(y == 2, 1, -1))
    assert ds.attrs["classes"] == [[1], [2]] and ds.attrs["n_positive"] == int((y == 2).sum())
    _assert_chunks_aligned(ds)

    Xd = da.from_array(X.astype(np.float32), chunks=((30, 10, 40, 23), (2, 2)))
    yd = da.from_array(y, chunks=50)
    with dask.config.set(scheduler="sync"), ComputeCounter() as cc:
        ds = ingest_array(Xd, yd, tmp_path / "dk", pos_label=1, chunk_rows=25)
    assert cc.n == 2  # distinct labels of y, then the single write pass
    assert ds.X.dtype == np.float32
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), np.where(y == 1, 1, -1))
    _assert_chunks_aligned(ds)

    bad = X.astype(float)
    bad[57, 2] = np.nan
    with pytest.raises(ValueError, match="row 57"):
        ingest_array(bad, y, tmp_path / "nan")
    with pytest.raises(ValueError, match="NaN"):
        ingest_array(da.from_array(bad, chunks=20), y, tmp_path / "nan2")
    assert not (tmp_path / "nan2").exists()


def test_write_dataset_folds_into_another_pass(tmp_path):
    rng = np.random.default_rng(8)
    X = da.from_array(rng.normal(size=(90, 3)), chunks=30)
    y = da.from_array(np.where(rng.random(90) < 0.4, 1, -1).astype(np.int8), chunks=30)
    w = write_dataset(X, y, tmp_path / "s", attrs={"note": "x"}, compute=False)
    assert not (tmp_path / "s").exists()
    with dask.config.set(scheduler="sync"), ComputeCounter() as cc:
        path, total = dask.compute(w, X.sum())
    assert cc.n == 1 and os.path.samefile(path, tmp_path / "s")
    ds = open_dataset(tmp_path / "s")
    np.testing.assert_array_equal(ds.X.compute(), X.compute())
    assert ds.attrs["note"] == "x" and ds.attrs["n_positive"] == int((y > 0).sum().compute())
    assert np.isclose(total, X.sum().compute())
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []
    with pytest.raises(ValueError, match="only -1 and \\+1"):
        write_dataset(X, y + 1, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


# ------------------------------------------------------------------------------ split


def test_split_mask_exact_per_class():
    y = np.repeat(["a", "b", "c"], [5, 100, 37])
    m = split_mask(y, test_size=0.3, random_state=0)
    for c, n_c in (("a", 5), ("b", 100), ("c", 37)):
        assert m[y == c].sum() == np.floor(0.3 * n_c + 0.5)  # 2 (1.5 rounds up), 30, 11
    m2 = split_mask(y, test_size=0.3, stratify=False, random_state=0)
    assert m2.sum() == round(0.3 * y.size)
    with pytest.raises(ValueError, match="test_size"):
        split_mask(y, test_size=1.0)


def test_train_test_split_numpy_dask_and_store(tmp_path):
    rng = np.random.default_rng(9)
    n = 400
    X = np.column_stack([np.arange(n), rng.normal(size=n)])
    y = np.where(rng.random(n) < 0.2, 1, -1).astype(np.int8)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=1)
    ids_tr, ids_te = Xtr[:, 0], Xte[:, 0]
    assert np.intersect1d(ids_tr, ids_te).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([ids_tr, ids_te])), np.arange(n))
    for c in (-1, 1):
        assert (yte == c).sum() == np.floor(0.25 * (y == c).sum() + 0.5)
    np.testing.assert_array_equal(y[ids_te.astype(int)], yte)

    Xd = da.from_array(X, chunks=(64, 2))
    parts = train_test_split(Xd, da.from_array(y, chunks=64), test_size=0.25, random_state=1)
    for p, ref in zip(parts, (Xtr, Xte, ytr, yte), strict=True):
        assert isinstance(p, da.Array) and not np.isnan(sum(p.chunks[0]))
        assert any(k.startswith("daskauc-split") for k in p.dask.layers)
        np.testing.assert_array_equal(p.compute(), ref)
    # each output chunk is a subset of one input chunk: its ids lie in one 64-row window
    Xtr_d = parts[0]
    for k in range(Xtr_d.numblocks[0]):
        ids = Xtr_d.blocks[k].compute()[:, 0] // 64
        assert np.unique(ids).size == 1

    ingest_array(X, y, tmp_path / "all", chunk_rows=50)
    sparts = train_test_split(str(tmp_path / "all"), test_size=0.25, random_state=1)
    for p, ref in zip(sparts, (Xtr, Xte, ytr, yte), strict=True):
        np.testing.assert_array_equal(p.compute(), ref)


def test_train_test_split_of_dataframes_gives_dataframes():
    """pandas and dask DataFrames come back as DataFrames with their columns and index (a
    Series y as a Series), the rows those of the numpy split with the same seed."""
    import dask.dataframe as dd
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 300
    X = np.column_stack([np.arange(n), rng.normal(size=n)])
    y = np.where(rng.random(n) < 0.3, 1, -1).astype(np.int8)
    ref = train_test_split(X, y, test_size=0.2, random_state=4)
    index = pd.Index([f"row{i:04d}" for i in range(n)], name="id")  # sorts as it is
    frame = pd.DataFrame(X, columns=["i", "x"], index=index)
    labels = pd.Series(y, index=index, name="label")
    for yy in (labels, y):
        parts = train_test_split(frame, yy, test_size=0.2, random_state=4)
        assert all(isinstance(p, pd.DataFrame) for p in parts[:2])
        assert list(parts[0].columns) == ["i", "x"] and parts[0].index.name == "id"
        assert list(parts[1].index) == [f"row{int(i):04d}" for i in ref[1][:, 0]]
        for p, r in zip(parts, ref, strict=True):
            np.testing.assert_array_equal(np.asarray(p), r)
        assert isinstance(parts[2], pd.Series) == (yy is labels)
    dframe, dlabels = (dd.from_pandas(frame, npartitions=4),
                       dd.from_pandas(labels, npartitions=4))
    parts = train_test_split(dframe, dlabels, test_size=0.2, random_state=4)
    assert isinstance(parts[0], dd.DataFrame) and isinstance(parts[2], dd.Series)
    got = dask.compute(*parts)
    assert list(got[0].columns) == ["i", "x"] and list(got[1].index) == list(
        train_test_split(frame, labels, test_size=0.2, random_state=4)[1].index)
    for p, r in zip(got, ref, strict=True):
        np.testing.assert_array_equal(np.asarray(p), r)


def test_split_store_one_pass(tmp_path, dask_cluster_client):
    rng = np.random.default_rng(10)
    n = 600
    X = np.column_stack([np.arange(n), rng.normal(size=n)]).astype(np.float32)
    y = np.where(rng.random(n) < 0.1, "pos", "neg")
    ingest_array(da.from_array(X, chunks=90), da.from_array(y, chunks=90), tmp_path / "all",
                 chunk_rows=90, shuffle=True, random_state=2)
    tr, te = split_store(tmp_path / "all", tmp_path / "tr", tmp_path / "te", test_size=0.2,
                         random_state=3)
    full = open_dataset(tmp_path / "all")
    yf = full.y.compute()
    for c in (-1, 1):
        assert te.attrs["n_positive" if c > 0 else "n_negative"] == np.floor(
            0.2 * (yf == c).sum() + 0.5)
    ids = np.concatenate([tr.X[:, 0].compute(), te.X[:, 0].compute()])
    np.testing.assert_array_equal(np.sort(ids), np.arange(n))
    assert tr.attrs["split_part"] == "train" and te.attrs["classes"] == [["neg"], ["pos"]]
    _assert_chunks_aligned(tr)
    _assert_chunks_aligned(te)
    with pytest.raises(FileExistsError):
        split_store(tmp_path / "all", tmp_path / "tr", tmp_path / "te2")


# ------------------------------------------------------------------------------ scalers


def _scaling_data(rng, n=500):
    X = rng.normal(size=(n, 5)) * [1, 10, 0.01, 1, 3]
    X[:, 3] = 2.5  # constant column
    X[:, 4] += 1e6  # large offset: the sum-of-squares formula would cancel
    return X


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_standard_scaler_matches_sklearn(kind, tmp_path):
    X = _scaling_data(np.random.default_rng(11))
    Xin = X if kind == "numpy" else da.from_array(X, chunks=(37, 5))
    with dask.config.set(scheduler="sync"), ComputeCounter() as cc:
        sc = StandardScaler().fit(Xin)
    assert cc.n == (0 if kind == "numpy" else 1)  # one pass
    ref = skp.StandardScaler().fit(X)
    np.testing.assert_allclose(sc.mean_, ref.mean_, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(sc.var_, ref.var_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sc.scale_, ref.scale_, rtol=1e-10)
    assert sc.scale_[3] == 1.0 and sc.n_features_in_ == 5 and sc.n_samples_seen_ == 500
    out = sc.transform(Xin)
    assert isinstance(out, np.ndarray) == (kind == "numpy")
    if kind == "dask":
        assert any(k.startswith("daskauc-scale") for k in out.dask.layers)
    np.testing.assert_allclose(np.asarray(out), ref.transform(X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sc.inverse_transform(out)), X, rtol=1e-12)

    X32 = X[:, :3].astype(np.float32)
    sc32 = StandardScaler().fit(X32 if kind == "numpy" else da.from_array(X32, chunks=100))
    t32 = sc32.transform(X32 if kind == "numpy" else da.from_array(X32, chunks=100))
    assert t32.dtype == np.float32
    np.testing.assert_allclose(np.asarray(t32), skp.StandardScaler().fit_transform(
        X32.astype(np.float64)), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="features"):
        sc.transform(X[:, :4])


def test_scalers_on_a_store_and_minmax_and_normalize(tmp_path):
    X = _scaling_data(np.random.default_rng(12))
    ingest_array(X, np.arange(500) % 2, tmp_path / "s", dtype="float64", chunk_rows=64)
    with dask.config.set(scheduler="sync"), ComputeCounter() as cc:
        mm = MinMaxScaler().fit(str(tmp_path / "s"))
    assert cc.n == 1
    ref = skp.MinMaxScaler(feature_range=(-1, 1)).fit(X)
    for a in ("data_min_", "data_max_", "data_range_", "scale_", "min_"):
        np.testing.assert_allclose(getattr(mm, a), getattr(ref, a), rtol=1e-12, atol=1e-10)
    out = mm.transform(str(tmp_path / "s"))
    np.testing.assert_allclose(out.compute(), ref.transform(X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(mm.transform(X), ref.transform(X), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="feature_range"):
        MinMaxScaler(feature_range=(1, -1)).fit(X)

    Xn = X.copy()
    Xn[7] = 0.0
    ref_n = skp.normalize(Xn)
    np.testing.assert_allclose(normalize_rows(Xn), ref_n, rtol=1e-12)
    lazy = normalize_rows(da.from_array(Xn, chunks=100))
    assert any(k.startswith("daskauc-normalize") for k in lazy.dask.layers)
    np.testing.assert_allclose(lazy.compute(), ref_n, rtol=1e-12)
    with pytest.raises(ValueError, match="NaN"):
        StandardScaler().fit(np.array([[1.0], [np.nan]]))


def test_shuffled_ingest_closes_each_file_descriptor_once(tmp_path, monkeypatch):
    """The shuffle's spill files were closed by ``finish`` and again by the caller's
    ``finally``: the second ``os.close`` closed whatever file had been opened with the same
    number in between (another thread's), and CI saw ``shutil.rmtree`` of the spill
    directory fail with EBADF. Every descriptor is now closed once."""
    rng = np.random.default_rng(5)
    text = "".join(f"{1 if rng.random() < 0.4 else -1} 1:{rng.normal():.5f}\n"
                   for _ in range(2000))
    src = _write(tmp_path / "s.svm", text)
    opened: dict[int, int] = {}
    closes: list[int] = []
    real_open, real_close = os.open, os.close

    def tracking_open(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        opened[fd] = opened.get(fd, 0) + 1
        return fd

    def tracking_close(fd):
        closes.append(fd)
        return real_close(fd)

    monkeypatch.setattr(os, "open", tracking_open)
    monkeypatch.setattr(os, "close", tracking_close)
    ingest(src, tmp_path / "shuf", chunk_rows=300, dtype="float64", shuffle=True,
           random_state=1)
    monkeypatch.undo()
    for fd in set(closes):  # never closed more often than it was opened
        assert closes.count(fd) <= opened.get(fd, 0), fd
