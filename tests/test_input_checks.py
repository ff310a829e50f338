"""Input checking shared by every estimator (``daskauc._validation``): scikit-learn's error
types and words where its checks look for them, daskauc's advice after them, feature names of
dataframes, and MiniBatchKMeans' training labels."""

import warnings

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import DataConversionWarning

from daskauc import (
    NSAUC,
    KMeansNystroem,
    MiniBatchKMeans,
    PairwiseHingeSGD,
    RankSVM,
    StandardScaler,
)

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _data(n=80, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] > 0, 1, -1)


@pytest.mark.parametrize("make", [lambda: RankSVM(random_state=0), StandardScaler,
                                  lambda: KMeansNystroem(10, random_state=0),
                                  lambda: NSAUC(n_landmarks=10, random_state=0,
                                                dtype="float64", standardize=True)])
def test_shape_and_type_errors_use_scikit_learns_words(make):
    X, y = _data()
    est = make().fit(X, y)
    method = est.transform if hasattr(est, "transform") else est.decision_function
    with pytest.raises(ValueError, match=f"X has 2 features, but {type(est).__name__} is "
                                         "expecting 3 features as input"):
        method(X[:, :2])
    with pytest.raises(ValueError, match="Expected 2D array, got a 1D array instead.*Reshape"):
        method(X[0])
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(80, 0\)\) while a minimum "
                                         "of 1 is required"):
        make().fit(X[:, :0], y)
    with pytest.raises(ValueError, match="Complex data not supported"):
        make().fit(X + 1j, y)
    if getattr(type(est), "_sparse_rows", False):  # reads sparse rows: the same model
        sparse = make().fit(sp.csr_matrix(X), y)
        np.testing.assert_allclose(method.__func__(sparse, X), method(X), rtol=1e-9,
                                   atol=1e-12)
    else:
        with pytest.raises(TypeError, match="sparse .*reads dense rows"):
            make().fit(sp.csr_matrix(X), y)
    obj = X.astype(object)
    make().fit(obj, y)  # numbers held as objects are numbers
    obj[0, 0] = {"a": 1}
    with pytest.raises(TypeError, match="dtype object.*argument must be a string or a .*number"):
        make().fit(obj, y)


def test_label_errors_name_the_problem():
    X, y = _data()
    with pytest.raises(ValueError, match="Only binary classification is supported.*"
                                         "positive_classes"):
        RankSVM().fit(X, np.arange(80) % 3)
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        RankSVM().fit(X, X[:, 1])
    with pytest.raises(ValueError, match="single class.*one class"):
        RankSVM().fit(X, np.ones(80))
    with pytest.raises(ValueError, match="requires y to be passed, but the target y is None"):
        RankSVM().fit(X, None)
    with pytest.warns(DataConversionWarning, match="A column-vector y was passed"):
        a = RankSVM(C=1.0).fit(X, y[:, None])
    np.testing.assert_array_equal(a.coef_, RankSVM(C=1.0).fit(X, y).coef_)


def test_feature_names_of_dataframes_are_recorded_and_checked():
    X, y = _data()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    est = PairwiseHingeSGD(random_state=0).fit(df, y)
    np.testing.assert_array_equal(est.feature_names_in_, ["a", "b", "c"])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        np.testing.assert_array_equal(est.decision_function(df), est.decision_function(X))
    with pytest.raises(ValueError, match="feature names should match"):
        est.decision_function(df[["b", "a", "c"]])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        est.predict(X)
    assert not hasattr(PairwiseHingeSGD(random_state=0).fit(X, y), "feature_names_in_")
    assert not hasattr(est.fit(X, y), "feature_names_in_")  # a refit forgets them
    plain = StandardScaler().fit(X)
    with pytest.warns(UserWarning, match="fitted without feature names"):
        plain.transform(df)
    with pytest.raises(TypeError, match="only supported if all input features have string"):
        StandardScaler().fit(pd.DataFrame(X, columns=["a", 1, "c"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # dask input has no names and warns about none
        est.decision_function(da.from_array(X, chunks=20)).compute()


def test_minibatch_kmeans_labels_its_training_rows_when_they_are_in_memory():
    X, _ = _data(n=300)
    km = MiniBatchKMeans(4, random_state=0).fit(X)
    np.testing.assert_array_equal(km.labels_, km.predict(X))
    assert km.inertia_ == pytest.approx(-km.score(X), rel=1e-9)
    np.testing.assert_array_equal(MiniBatchKMeans(4, random_state=0).fit_predict(X), km.labels_)
    lazy = MiniBatchKMeans(4, random_state=0).fit(da.from_array(X, chunks=100))
    assert not hasattr(lazy, "labels_")  # a pass and an n-vector: only when asked
    asked = MiniBatchKMeans(4, random_state=0, compute_labels=True).fit(
        da.from_array(X, chunks=100))
    np.testing.assert_array_equal(asked.labels_, asked.predict(X))
    assert not hasattr(MiniBatchKMeans(4, compute_labels=False).fit(X), "labels_")


# a value that is not exactly one of the labels is an error, never cast to one of them
# (casting to the labels' dtype made "gamma" match "g", 1.9 match 1 and "yesterday" "yes")
@pytest.mark.parametrize("labels, pos_label", [
    (["g", "h"], "gamma"), ([1, 2], 1.9), (["no", "yes"], "yesterday"), ([1, 2], "1"),
    (["1", "2"], 1)])
def test_a_pos_label_that_is_not_a_label_is_an_error(labels, pos_label):
    from daskauc import roc_auc
    from daskauc._labels import as_labels

    y = np.asarray(labels * 3)
    s = np.arange(y.size, dtype=float)
    for call in (lambda: as_labels(y, pos_label=pos_label),
                 lambda: as_labels(da.from_array(y, chunks=2), pos_label=pos_label),
                 lambda: roc_auc(y, s, pos_label=pos_label),
                 lambda: roc_auc(da.from_array(y, chunks=2), da.from_array(s, chunks=2),
                                 pos_label=pos_label)):
        with pytest.raises(ValueError, match=f"pos_label={pos_label!r} does not occur"):
            call()


@pytest.mark.parametrize("labels, positive_classes", [
    (["a", "bb", "c"], ["b"]), ([1, 2, 3], [2.5]), ([1, 2, 3], ["2"])])
def test_positive_classes_that_are_not_labels_are_an_error(labels, positive_classes):
    from daskauc._labels import as_labels

    with pytest.raises(ValueError, match="do not occur in y"):
        as_labels(np.asarray(labels * 2), positive_classes=positive_classes)


def test_pos_label_matches_labels_by_value():
    from daskauc import roc_auc
    from daskauc._labels import as_labels

    y_num = np.array([1.0, 2.0, 1.0, 2.0])
    assert as_labels(y_num, pos_label=2)[0].tolist() == [-1, 1, -1, 1]   # 2 is 2.0
    assert as_labels(y_num, pos_label=1)[0].tolist() == [1, -1, 1, -1]
    y_str = np.array(["yes", "no", "no", "yes"])
    assert as_labels(y_str, pos_label="no")[0].tolist() == [-1, 1, 1, -1]
    s = np.array([0.9, 0.1, 0.2, 0.8])
    assert roc_auc(y_str, s, pos_label="yes") == 1.0
    assert roc_auc(y_str, s, pos_label="no") == 0.0


# -- X and y from a dask DataFrame of several partitions ----------------------------------------
def _registered():
    """Every registered estimator and transformer, with small settings where a default only
    costs time (20 landmarks, not 1,600, on 600 rows; C and KernelAUC's gamma and lam given,
    5 epochs: the searches are tested elsewhere, the input path is under test here)."""
    from daskauc._registry import MODEL_CLASSES

    small = {"n_landmarks": 20, "n_components": 20, "C": 1e-2, "n_epochs": 5,
             "n_clusters": 8}
    out = []
    for name, cls in sorted(MODEL_CLASSES.items()):
        params = cls().get_params()
        given = {k: v for k, v in small.items() if k in params and params[k] != "all"}
        if name == "KernelAUC":
            given = {"n_centres": 20, "gamma": "rule", "lam": 1e-3}
        out.append(pytest.param(cls, given, id=name))
    return out


def _frames(tmp_path, how):
    """The same 600 rows as (X frame, y series) from a dask DataFrame: read from a Parquet
    directory of two files, or ``from_pandas`` with X in 3 partitions and y in 2."""
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.normal(size=(600, 3)), columns=["a", "b", "c"])
    df["class"] = np.where(df.a - df.b ** 2 + 0.3 * rng.normal(size=600) > -0.5, "g", "h")
    if how == "parquet":
        pytest.importorskip("pyarrow")
        (tmp_path / "t").mkdir()
        df.iloc[:250].to_parquet(tmp_path / "t" / "part0.parquet")
        df.iloc[250:].to_parquet(tmp_path / "t" / "part1.parquet")
        ddf = dd.read_parquet(tmp_path / "t")
        assert ddf.npartitions == 2
        return df, ddf[["a", "b", "c"]], ddf["class"]
    return (df, dd.from_pandas(df[["a", "b", "c"]], npartitions=3),
            dd.from_pandas(df["class"], npartitions=2))


@pytest.mark.filterwarnings("ignore::daskauc.embed.nystroem.NystroemRankWarning")
@pytest.mark.parametrize("how", ["parquet", "from_pandas"])
@pytest.mark.parametrize("cls, params", _registered())
def test_x_and_y_from_dask_dataframes_of_several_partitions(tmp_path, how, cls, params):
    """dask 2026.8's ``to_dask_array(lengths=True)`` counted the partitions of a frame read
    from two Parquet files as one and failed ("The number of items in 'lengths' does not
    match the number of partitions. 1 != 2"). The oracle: the same model as from dask arrays
    of the same rows in the chunks the frames give; from Parquet with the label as a boolean
    (== 'g') too. A transformer gives the same transform."""
    df, X, y = _frames(tmp_path, how)
    model = cls(**params, random_state=0) if "random_state" in cls().get_params() \
        else cls(**params)
    fitted = model.fit(X, y)
    Xa = X.to_dask_array().compute_chunk_sizes()
    ya = da.from_array(df["class"].to_numpy(), chunks=(Xa.chunks[0],))
    expect = type(model)(**model.get_params()).fit(
        da.from_array(df[["a", "b", "c"]].to_numpy(), chunks=Xa.chunks), ya)
    rows = df[["a", "b", "c"]]
    if not hasattr(model, "decision_function"):
        np.testing.assert_allclose(fitted.transform(rows), expect.transform(rows.to_numpy()),
                                   rtol=1e-6, atol=1e-8)
        return
    assert list(fitted.classes_) == ["g", "h"]
    # the same arithmetic but for the order of threaded reductions (KernelAUC's Newton sums)
    np.testing.assert_allclose(fitted.decision_function(rows),
                               expect.decision_function(rows.to_numpy()), rtol=1e-6, atol=1e-8)
    if how != "parquet":
        return
    boolean = type(model)(**model.get_params()).fit(X, y == "g")
    assert list(boolean.classes_) == [False, True]
    expect = type(model)(**model.get_params()).fit(
        da.from_array(rows.to_numpy(), chunks=Xa.chunks), ya == "g")
    np.testing.assert_allclose(boolean.decision_function(rows),
                               expect.decision_function(rows.to_numpy()), rtol=1e-6, atol=1e-8)
