"""The one door for inputs (daskauc._readers): the registry, detection, reader options, a new
reader added in one place, row ranges for scoring, a path an estimator cannot learn from, and
a store opened once per fit."""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
import pytest

import daskauc
from daskauc import _readers
from daskauc._readers import (
    READERS,
    NoOptions,
    Reader,
    formats,
    open_rows,
    options_for,
    reader_for,
    register_reader,
)
from daskauc.data import DenseTextOptions, LibsvmOptions, TableOptions, ingest, ingest_array

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _xy(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).round(3)
    y = np.where(X[:, 0] > 0, 1, -1)
    y[:2] = (1, -1)
    return X, y


def _write_libsvm(path, X, y):
    lines = [f"{int(t)} " + " ".join(f"{j + 1}:{v}" for j, v in enumerate(row) if v != 0)
             for row, t in zip(X, y, strict=True)]
    path.write_text("\n".join(lines) + "\n")


def _write_csv(path, X, y):
    path.write_text("\n".join(",".join([*map(str, row), str(int(t))])
                              for row, t in zip(X, y, strict=True)) + "\n")


def _write_parquet(path, X, y):
    cols = {f"f{j}": X[:, j] for j in range(X.shape[1])}
    pq.write_table(pa.table({**cols, "label": y}), path)


def test_every_input_kind_has_one_registered_reader_with_its_options():
    assert list(READERS) == ["store", "parquet", "libsvm", "csv", "dask", "dataframe", "sparse",
                             "numpy"]
    for cls in READERS.values():
        assert dataclasses.is_dataclass(cls.Options), cls
    # the names format= took before the door still name the same readers
    known = formats()
    assert {f: known[f] for f in ("parquet", "libsvm", "svmlight", "csv", "dense", "txt")} == {
        "parquet": "parquet", "libsvm": "libsvm", "svmlight": "libsvm", "csv": "csv",
        "dense": "csv", "txt": "csv"}
    with pytest.raises(ValueError, match="format must be one of"):
        reader_for("x", format="hdf5")


def test_each_input_is_claimed_by_its_reader(tmp_path):
    """Detection against what each input is (a name that says nothing for the text files)."""
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    X, y = _xy()
    _write_libsvm(tmp_path / "a", X, y)
    _write_csv(tmp_path / "b", X, y)
    _write_parquet(tmp_path / "c.parquet", X, y)
    (tmp_path / "parts").mkdir()
    _write_parquet(tmp_path / "parts" / "part-0.pq", X, y)
    ingest_array(X, y, tmp_path / "s.zarr")
    frame = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"]), npartitions=2)
    expected = {tmp_path / "a": "libsvm", tmp_path / "b": "csv", tmp_path / "c.parquet":
                "parquet", tmp_path / "parts": "parquet", tmp_path / "s.zarr": "store"}
    for source, name in expected.items():
        assert reader_for(source).name == name, source
        assert reader_for(str(source)).name == name, source
    assert reader_for(da.from_array(X)).name == "dask"
    assert reader_for(frame).name == "dataframe"
    assert reader_for(X).name == "numpy"
    assert reader_for(X.tolist()).name == "numpy"
    import scipy.sparse as sp

    assert reader_for(sp.csr_matrix(X)).name == "sparse"
    assert reader_for(pd.DataFrame(X).astype(pd.SparseDtype(float, 0.0))).name == "sparse"
    with pytest.raises(FileNotFoundError, match="no such file"):
        reader_for(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IsADirectoryError, match="directory with no Parquet files"):
        reader_for(tmp_path / "empty")
    with pytest.raises(TypeError, match="no reader for object input"):
        reader_for(object())


def test_reader_options_from_an_object_or_keywords():
    assert options_for(READERS["libsvm"], n_features=5) == LibsvmOptions(n_features=5)
    given = LibsvmOptions(zero_based=True)
    assert options_for(READERS["libsvm"], given) is given
    # another reader's option at its default is what the command line passes: ignored
    assert options_for(READERS["parquet"], n_features=None, header=None, label_column=-1,
                       label="y") == TableOptions(label="y")
    with pytest.raises(ValueError, match=r"n_features is not an option of parquet input"):
        options_for(READERS["parquet"], n_features=7)
    with pytest.raises(ValueError, match="a LIBSVM file has none"):
        options_for(READERS["libsvm"], features=["a"])
    with pytest.raises(ValueError, match="header=True applies to dense text"):
        options_for(READERS["libsvm"], header=True)
    with pytest.raises(TypeError, match=r"unknown reader options \['colour'\]"):
        options_for(READERS["csv"], colour="red")
    with pytest.raises(TypeError, match="options must be LibsvmOptions"):
        options_for(READERS["libsvm"], TableOptions())
    with pytest.raises(TypeError, match="not both"):
        options_for(READERS["libsvm"], LibsvmOptions(), n_features=3)
    # each options object checks its own values, whichever way it is made
    with pytest.raises(ValueError, match="zero_based must be"):
        LibsvmOptions(zero_based="yes")
    with pytest.raises(ValueError, match="delimiter must be a single character"):
        DenseTextOptions(delimiter=";;")
    with pytest.raises(ValueError, match="categorical must be"):
        TableOptions(categorical="drop")


def test_options_object_and_keywords_write_the_same_store(tmp_path):
    X, y = _xy()
    _write_libsvm(tmp_path / "a.svm", X, y)
    by_kw = ingest(tmp_path / "a.svm", tmp_path / "kw.zarr", n_features=4, dtype="float64")
    by_obj = ingest(tmp_path / "a.svm", tmp_path / "obj.zarr", dtype="float64",
                    options=LibsvmOptions(n_features=4))
    np.testing.assert_array_equal(by_kw.X.compute(), by_obj.X.compute())
    np.testing.assert_array_equal(by_obj.X.compute()[:, :3], X)
    np.testing.assert_array_equal(by_obj.y.compute(), y)
    assert by_obj.attrs["params"] == by_kw.attrs["params"]


def test_a_new_reader_is_one_class_registered_in_one_place(tmp_path):
    """A format daskauc does not know (.npz holding X and y), added by registering a reader
    class: ingest finds it by detection and by format=, with its own options."""

    @dataclasses.dataclass(frozen=True)
    class NpzOptions:
        x_key: str = "X"

    class NpzReader(Reader):
        name = "npz-test"
        Options = NpzOptions

        @classmethod
        def detect(cls, probe):
            return probe.is_path and probe.path.endswith(".npz")

        @classmethod
        def ingest(cls, source, store, options, target):
            with np.load(source) as f:
                ingest_array(f[options.x_key], f["y"], store, dtype=target.dtype,
                             overwrite=target.overwrite)

    X, y = _xy(seed=3)
    np.savez(tmp_path / "d.npz", features=X, y=y)
    register_reader(NpzReader)
    try:
        ds = ingest(tmp_path / "d.npz", tmp_path / "d.zarr", x_key="features",
                    dtype="float64")
        np.testing.assert_array_equal(ds.X.compute(), X)
        np.testing.assert_array_equal(ds.y.compute(), y)
        ds2 = ingest(tmp_path / "d.npz", tmp_path / "d2.zarr", format="npz-test",
                     options=NpzOptions(x_key="features"))
        np.testing.assert_array_equal(ds2.X.compute(), X.astype(np.float32))
        with pytest.raises(TypeError, match="two readers named npz-test"):
            register_reader(type("Other", (NpzReader,), {}))
    finally:
        READERS.pop("npz-test")
    assert "npz-test" not in formats()


def test_scoring_reads_by_row_ranges_only_what_can_be_read_so(tmp_path):
    X, y = _xy()
    _write_libsvm(tmp_path / "a.svm", X, y)
    _write_parquet(tmp_path / "c.parquet", X, y)
    ingest_array(X, y, tmp_path / "s.zarr", chunk_rows=15)
    with pytest.raises(ValueError, match="neither a daskauc dataset store nor a Parquet"):
        open_rows(tmp_path / "a.svm")
    with pytest.raises(FileNotFoundError, match="no input at"):
        open_rows(tmp_path / "nothing.parquet")
    for source, kind in ((tmp_path / "c.parquet", "parquet"), (tmp_path / "s.zarr", "store")):
        inp = open_rows(source)
        assert inp.format == kind and inp.n_rows == len(X)
        inp.select_features(None if kind == "store" else ["f0", "f1", "f2"],
                            lambda width, what=None: width)
        inp.chunk(15)
        assert inp.bounds == [(0, 15), (15, 30), (30, 40)]
        reader = inp.block_reader()
        import dask

        got = np.vstack([reader.read(dask.compute(block)[0], a)[0]
                         for block, (a, _) in zip(inp.blocks(), inp.bounds, strict=True)])
        np.testing.assert_allclose(got, X)


def test_an_estimator_given_a_path_it_cannot_learn_from_says_what_it_is(tmp_path):
    X, y = _xy()
    _write_parquet(tmp_path / "c.parquet", X, y)
    _write_libsvm(tmp_path / "a.svm", X, y)
    for path, kind in ((tmp_path / "c.parquet", "parquet"), (tmp_path / "a.svm", "libsvm")):
        with pytest.raises(ValueError, match=rf"is {kind} input; daskauc learns from a "
                                             r"dataset store: ingest it first"):
            daskauc.LSAUC().fit(str(path))


@pytest.mark.parametrize("make", [lambda: daskauc.LSAUC(),
                                  lambda: daskauc.NBAUC(C=1.0, max_iter=3),
                                  lambda: daskauc.KernelAUC(n_centres=16, gamma=0.5, lam=1e-3,
                                                            max_iter=3, random_state=0)],
                         ids=["LSAUC", "NBAUC", "KernelAUC"])
def test_a_fit_on_a_store_path_opens_the_store_once(tmp_path, monkeypatch, make):
    """Each opening of the store (its metadata read and checked) counted through the fit."""
    from daskauc.store import protocol as _store

    X, y = _xy(n=200, d=4)
    ingest_array(X, y, tmp_path / "s.zarr", chunk_rows=50)
    real, opened = _store.open_store, []

    def counting(path, **kwargs):
        opened.append(str(path))
        return real(path, **kwargs)

    monkeypatch.setattr(_store, "open_store", counting)
    monkeypatch.setattr("daskauc.store.dataset.open_store", counting)
    est = make().fit(str(tmp_path / "s.zarr"))
    assert len(opened) == 1, opened
    assert est.score(str(tmp_path / "s.zarr")) > 0.5
    assert _readers._OPENED.get() is None  # the scope ended with the fit


def test_ingest_array_takes_a_dask_dataframe_as_its_values(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    X, y = _xy(n=60)
    frame = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"]), npartitions=3)
    labels = dd.from_pandas(pd.Series(y), npartitions=3)
    ds = ingest_array(frame, labels, tmp_path / "f.zarr")
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), y)
    assert ds.attrs["source_format"] == "dask"
    with pytest.raises(TypeError, match="ingest_array writes arrays"):
        ingest_array(str(tmp_path / "f.zarr"), y, tmp_path / "g.zarr")


def test_no_options_reader_refuses_every_option():
    assert dataclasses.fields(NoOptions) == ()
    with pytest.raises(ValueError, match="not an option of store input"):
        options_for(READERS["store"], n_features=3)


def test_the_fit_scope_keeps_each_fit_signature():
    """``reading_once`` wraps every AUC estimator's own ``fit`` and ``partial_fit``: the
    command line reads their parameters (``checkpoint=``, ``validation=``) from the
    signature, which must stay the method's own."""
    import inspect

    from daskauc._registry import MODEL_CLASSES
    from daskauc.estimators._base import AUCScoreMixin

    models = [c for c in MODEL_CLASSES.values() if issubclass(c, AUCScoreMixin)]
    assert len(models) >= 15
    for cls in models:
        assert getattr(cls.fit, "_reads_once", False), cls  # every model's fit is scoped
        for name in ("fit", "partial_fit"):
            method = getattr(cls, name, None)
            if method is not None:
                inner = inspect.unwrap(method)
                assert inspect.signature(method) == inspect.signature(inner), (cls, name)
    assert "checkpoint" in inspect.signature(daskauc.KernelAUC.fit).parameters
    assert "validation" in inspect.signature(daskauc.PairwiseHingeSGD.fit).parameters
