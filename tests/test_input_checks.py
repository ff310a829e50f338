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


@pytest.mark.parametrize("make", [RankSVM, StandardScaler, lambda: KMeansNystroem(10),
                                  lambda: NSAUC(n_landmarks=10, random_state=0)])
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
    with pytest.raises(TypeError, match="sparse csr_matrix of .* daskauc reads dense rows"):
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
    from daskauc._validation import as_labels

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
    from daskauc._validation import as_labels

    with pytest.raises(ValueError, match="do not occur in y"):
        as_labels(np.asarray(labels * 2), positive_classes=positive_classes)


def test_pos_label_matches_labels_by_value():
    from daskauc import roc_auc
    from daskauc._validation import as_labels

    y_num = np.array([1.0, 2.0, 1.0, 2.0])
    assert as_labels(y_num, pos_label=2)[0].tolist() == [-1, 1, -1, 1]   # 2 is 2.0
    assert as_labels(y_num, pos_label=1)[0].tolist() == [1, -1, 1, -1]
    y_str = np.array(["yes", "no", "no", "yes"])
    assert as_labels(y_str, pos_label="no")[0].tolist() == [-1, 1, 1, -1]
    s = np.array([0.9, 0.1, 0.2, 0.8])
    assert roc_auc(y_str, s, pos_label="yes") == 1.0
    assert roc_auc(y_str, s, pos_label="no") == 0.0
