"""Data as users hold it: Parquet files and directories, CSV with a header, named label and
positive class, text columns refused or one-hot encoded, feature names kept in the store and
surfaced by estimators, pandas / dask DataFrames and Series as input.

The oracle is pandas: the same table read whole and converted by hand
(``pandas.get_dummies`` for the one-hot columns) must equal the store, value for value.
"""

from __future__ import annotations

import json
import os
import re

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import damaged_parquet

import daskauc
from daskauc import cli

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _frame(n=3000, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "id": np.arange(n) + 10_000,
        "a": rng.normal(size=n),
        "b": rng.integers(-3, 7, n),
        "colour": rng.choice(["red", "green", "blue"], n),
        "flag": rng.random(n) > 0.5,
    })
    score = df.a + (df.colour == "red") + 0.4 * rng.normal(size=n)
    df["class"] = np.where(score > 0.5, "fraud", "ok")
    return df


def _parquet_dir(df: pd.DataFrame, path, parts=3, row_group=400) -> str:
    """A directory of part files, each of several row groups."""
    os.makedirs(path)
    step = -(-len(df) // parts)
    for k in range(parts):
        df.iloc[k * step:(k + 1) * step].to_parquet(
            os.path.join(path, f"part-{k}.parquet"), row_group_size=row_group)
    return os.fspath(path)


def _expected(df: pd.DataFrame, drop=("id",), onehot=True, dtype=np.float32):
    X = df.drop(columns=[*drop, "class"])
    if onehot:
        X = pd.get_dummies(X, columns=["colour"], prefix_sep="=")
        # the one-hot features sit where their column was
        X = X[["a", "b", "colour=blue", "colour=green", "colour=red", "flag"]]
    return X.astype(dtype).to_numpy(), list(X.columns)


def test_parquet_directory_equals_pandas_oracle(tmp_path):
    df = _frame()
    src = _parquet_dir(df, tmp_path / "table")
    ds = daskauc.ingest(src, tmp_path / "s.zarr", drop=["id"], categorical="onehot",
                        positive="fraud", chunk_rows=700)
    X, names = _expected(df)
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), np.where(df["class"] == "fraud", 1, -1))
    assert ds.X.chunks[0][:2] == (700, 700)  # chunks cut across files and row groups
    a = ds.attrs
    assert a["feature_names"] == names and a["label_column"] == "class"
    assert a["classes"] == [["ok"], ["fraud"]] and a["source_format"] == "parquet"
    assert a["source_files"] == 3 and a["categories"] == {"colour": ["blue", "green", "red"]}
    assert a["n_positive"] == int((df["class"] == "fraud").sum())


def test_default_label_and_rule_and_several_positives(tmp_path):
    df = _frame(600)
    src = tmp_path / "t.parquet"
    df.drop(columns=["colour"]).to_parquet(src)
    ds = daskauc.ingest(src, tmp_path / "s.zarr", drop=["id"])
    # the column named "class" is the label; the larger of two labels is positive
    assert ds.attrs["label_column"] == "class" and ds.attrs["classes"] == [["fraud"], ["ok"]]
    assert ds.attrs["feature_names"] == ["a", "b", "flag"]
    df3 = df.assign(kind=np.array(["x", "y", "z"])[np.arange(600) % 3])
    df3.drop(columns=["colour", "class"]).to_parquet(tmp_path / "k.parquet")
    ds = daskauc.ingest(tmp_path / "k.parquet", tmp_path / "k.zarr", label="kind",
                        positive=["x", "z"], drop=["id"])
    assert ds.attrs["classes"] == [["y"], ["x", "z"]] and ds.attrs["n_positive"] == 400
    with pytest.raises(ValueError, match="which column holds the label"):
        daskauc.ingest(tmp_path / "k.parquet", tmp_path / "k2.zarr")
    with pytest.raises(ValueError, match="give the positive class once"):
        daskauc.ingest(src, tmp_path / "x.zarr", positive="ok", pos_label="ok")


def test_text_and_other_columns_are_named_never_dropped(tmp_path):
    df = _frame(300)
    df["when"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(np.arange(300), unit="h")
    src = tmp_path / "t.parquet"
    df.to_parquet(src)
    with pytest.raises(ValueError, match=r"'when' \(timestamp.*drop="):
        daskauc.ingest(src, tmp_path / "s.zarr", categorical="onehot")
    with pytest.raises(ValueError, match="'colour' hold text.*categorical='onehot'"):
        daskauc.ingest(src, tmp_path / "s.zarr", drop=["when"])
    assert not os.path.exists(tmp_path / "s.zarr")
    # columns left out are never read: the timestamp column is not even looked at
    ds = daskauc.ingest(src, tmp_path / "s.zarr", features=["a", "b"])
    np.testing.assert_array_equal(ds.X.compute(), df[["a", "b"]].to_numpy(np.float32))
    with pytest.raises(ValueError, match="no column named 'nope'"):
        daskauc.ingest(src, tmp_path / "s2.zarr", drop=["nope"])


def test_missing_values_are_named(tmp_path):
    df = _frame(300)[["a", "b", "class"]].astype({"b": "Int64"})
    df.loc[123, "b"] = pd.NA
    df.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(ValueError, match="column 'b' has a missing value .*row 123"):
        daskauc.ingest(tmp_path / "t.parquet", tmp_path / "s.zarr")
    df = _frame(300)[["a", "class"]]
    df.loc[7, "class"] = None
    df.to_parquet(tmp_path / "u.parquet")
    with pytest.raises(ValueError, match="label column 'class' has a missing value.*row 7"):
        daskauc.ingest(tmp_path / "u.parquet", tmp_path / "s.zarr")
    assert not os.path.exists(tmp_path / "s.zarr")


def test_parquet_shuffle_is_the_text_shuffle(tmp_path):
    """The same rows, seed and chunking shuffle to the same store from Parquet and CSV."""
    df = _frame(2000)[["a", "b", "class"]]
    df.to_parquet(tmp_path / "t.parquet", row_group_size=300)
    df.to_csv(tmp_path / "t.csv", index=False)
    kw = dict(shuffle=True, random_state=5, chunk_rows=512)
    p = daskauc.ingest(tmp_path / "t.parquet", tmp_path / "p.zarr", **kw)
    c = daskauc.ingest(tmp_path / "t.csv", tmp_path / "c.zarr", label="class", **kw)
    np.testing.assert_array_equal(p.X.compute(), c.X.compute())
    np.testing.assert_array_equal(p.y.compute(), c.y.compute())
    assert not np.array_equal(p.X.compute(), df[["a", "b"]].to_numpy(np.float32))
    assert p.attrs["feature_names"] == c.attrs["feature_names"] == ["a", "b"]


def test_csv_with_header_names_label_and_onehot(tmp_path):
    df = _frame(900)
    df.to_csv(tmp_path / "f.csv", index=False)
    with pytest.raises(ValueError, match="cannot read '.*' as a number \\(column 'colour'\\)"):
        daskauc.ingest(tmp_path / "f.csv", tmp_path / "s.zarr", label="class")
    ds = daskauc.ingest(tmp_path / "f.csv", tmp_path / "s.zarr", label="class",
                        drop=["id"], categorical="onehot", positive="fraud")
    X, names = _expected(df)
    np.testing.assert_array_equal(ds.X.compute(), X)
    assert ds.attrs["feature_names"] == names and ds.attrs["classes"] == [["ok"], ["fraud"]]
    # the fast text parser, with a header and booleans written by pandas
    df.drop(columns=["colour"]).to_csv(tmp_path / "g.csv", index=False)
    g = daskauc.ingest(tmp_path / "g.csv", tmp_path / "g.zarr", label="class")
    assert g.attrs["feature_names"] == ["id", "a", "b", "flag"]
    np.testing.assert_array_equal(
        g.X.compute(), df[["id", "a", "b", "flag"]].astype(np.float32).to_numpy())
    with pytest.raises(ValueError, match="no column named 'klass' in the header"):
        daskauc.ingest(tmp_path / "g.csv", tmp_path / "h.zarr", label="klass")


def test_feature_names_reach_estimators_and_inputs_give_one_model(tmp_path):
    """numpy, dask array, pandas, dask DataFrame and the store fit the same exact model."""
    df = _frame(1500)
    src = _parquet_dir(df, tmp_path / "table")
    store = os.fspath(tmp_path / "s.zarr")
    daskauc.ingest(src, store, drop=["id"], categorical="onehot", positive="fraud",
                   dtype="float64")
    X, names = _expected(df, dtype=np.float64)
    Xdf = pd.DataFrame(X, columns=names)
    y = pd.Series(df["class"].to_numpy(), name="class")  # labels as the user has them
    inputs = {
        "store": (store, None),
        "numpy": (X, np.where(y == "fraud", 1, -1)),
        "pandas": (Xdf, (y == "fraud")),
        "dask dataframe": (dd.from_pandas(Xdf, npartitions=3),
                           dd.from_pandas(y == "fraud", npartitions=3)),
    }
    coefs = {}
    for kind, (Xi, yi) in inputs.items():
        m = daskauc.LSAUC(lam=1e-2).fit(Xi, yi)
        coefs[kind] = m.coef_
        if kind == "numpy":
            assert not hasattr(m, "feature_names_in_")
        else:
            assert list(m.feature_names_in_) == names, kind
    for kind, c in coefs.items():
        np.testing.assert_allclose(c, coefs["store"], rtol=1e-9, atol=1e-12, err_msg=kind)
    m = daskauc.LSAUC(lam=1e-2).fit(store)
    with pytest.raises(ValueError, match="feature names should match"):
        m.decision_function(Xdf.rename(columns={"a": "A"}))
    lazy = m.decision_function(dd.from_pandas(Xdf, npartitions=2))
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        plain = m.decision_function(X)  # scikit-learn's warning for a model fitted with names
    np.testing.assert_allclose(lazy.compute(), plain, rtol=1e-12)


def test_dataframes_with_text_columns_and_text_labels(tmp_path):
    df = _frame(800)
    X = df[["a", "b", "colour"]]
    y = df["class"]
    for Xi in (X, dd.from_pandas(X, npartitions=2)):
        with pytest.raises(TypeError, match="'colour' .* not numbers"):
            daskauc.LSAUC().fit(Xi, y)
    Xn = df[["a", "b"]]
    # any two labels, pandas or dask: classes_ sorted, the larger positive (scikit-learn's)
    m = daskauc.LSAUC().fit(dd.from_pandas(Xn, npartitions=2), dd.from_pandas(y, npartitions=2))
    assert list(m.classes_) == ["fraud", "ok"]
    auc_ok = daskauc.roc_auc(y, m.decision_function(Xn), pos_label="ok")
    assert auc_ok > 0.7
    assert m.score(Xn, y) == pytest.approx(auc_ok)


def test_cli_ingest_parquet_states_the_positive_class(tmp_path, capsys):
    df = _frame(500)
    src = _parquet_dir(df, tmp_path / "table", parts=2)
    out = tmp_path / "s.zarr"
    assert cli.main(["ingest", src, os.fspath(out), "--drop", "id", "--categorical", "onehot",
                     "--positive", "fraud", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert payload["positive"] == ["fraud"] and payload["negative"] == ["ok"]
    assert payload["label_column"] == "class" and payload["positive_rule"] == "as asked"
    assert payload["feature_names"][:2] == ["a", "b"]
    assert cli.main(["ingest", src, os.fspath(tmp_path / "t.zarr"), "--drop", "id,colour"]) == 0
    text = capsys.readouterr().out
    assert "positive class: 'ok' (negative: 'fraud'; the larger of the two labels" in text


def test_a_store_fitted_model_speaks_the_users_labels(tmp_path):
    """classes_ are the store's raw labels, the named positive class last even when it
    sorts first; predict returns them and score ranks that class high, for y in the user's
    labels or in the store's -1 / +1."""
    df = _frame(1200)[["a", "b", "class"]]
    df.to_parquet(tmp_path / "t.parquet")
    store = os.fspath(tmp_path / "s.zarr")
    ds = daskauc.ingest(tmp_path / "t.parquet", store, positive="fraud")
    m = daskauc.LSAUC().fit(store)
    assert list(m.classes_) == ["ok", "fraud"]
    X = df[["a", "b"]]
    s = m.decision_function(X)
    from sklearn.metrics import roc_auc_score

    auc = roc_auc_score(df["class"] == "fraud", s)
    assert auc > 0.8  # fraud ranked high
    assert m.score(X, df["class"]) == pytest.approx(auc, abs=1e-12)
    assert m.score(X, ds.y.compute()) == pytest.approx(auc, abs=1e-12)
    assert m.score(store) == pytest.approx(auc, abs=1e-12)
    pred = m.predict(X)
    assert set(pred) <= {"ok", "fraud"} and np.mean(pred == df["class"]) > 0.7
    # the default rule: the larger label is positive, classes_ sorted as scikit-learn's
    daskauc.ingest(tmp_path / "t.parquet", tmp_path / "d.zarr")
    assert list(daskauc.LSAUC().fit(tmp_path / "d.zarr").classes_) == ["fraud", "ok"]


def test_scoring_the_raw_table_encodes_its_text_columns_as_ingest_did(tmp_path):
    """A model fitted on a store ingested with categorical="onehot" scores the raw Parquet
    table: its features "colour=red" ... are made from the text column as ingest made them."""
    df = _frame(1000)
    src = _parquet_dir(df, tmp_path / "table", parts=2, row_group=250)
    store = os.fspath(tmp_path / "s.zarr")
    ds = daskauc.ingest(src, store, drop=["id"], categorical="onehot", positive="fraud")
    model = daskauc.LSAUC().fit(store)
    out = tmp_path / "scores.parquet"
    daskauc.write_scores(model, src, out, id_column="id")
    got = pd.read_parquet(out)
    np.testing.assert_array_equal(got["id"].to_numpy(), df["id"].to_numpy())
    assert ds.attrs["feature_names"] == list(model.feature_names_in_)
    X, names = _expected(df, dtype=np.float64)
    expected = model.decision_function(pd.DataFrame(X, columns=names))
    np.testing.assert_allclose(got["decision_function"].to_numpy(), expected, rtol=1e-12)


def test_hive_partitions_are_columns(tmp_path):
    """A directory written with partition_cols: the partition key (in the path, not in the
    files) is a column like the others; here a text one, one-hot encoded."""
    df = _frame(400)[["a", "b", "colour", "class"]]
    df.to_parquet(tmp_path / "t", partition_cols=["colour"])
    ds = daskauc.ingest(tmp_path / "t", tmp_path / "s.zarr", categorical="onehot")
    assert ds.attrs["feature_names"] == ["a", "b", "colour=blue", "colour=green", "colour=red"]
    # the rows arrive partition by partition: compare as sets of rows
    X = pd.get_dummies(df.drop(columns=["class"]), columns=["colour"], prefix_sep="=")
    X = X[ds.attrs["feature_names"]].astype(np.float32).to_numpy()
    got = ds.X.compute()
    key = lambda A: A[np.lexsort(A.T[::-1])]  # noqa: E731
    np.testing.assert_array_equal(key(got), key(X))


def test_nbauc_records_the_chosen_C_as_documented(tmp_path):
    """The user guide says the chosen C is ``C_``; ``NBAUC().fit(...).C_`` raised
    AttributeError (it lived on ``solver_``)."""
    df = _frame(600)
    X, y = df[["a", "b"]].to_numpy(), df["class"].to_numpy()
    m = daskauc.NBAUC(n_landmarks=20, random_state=0).fit(X, y)
    assert m.C_ == m.solver_.C_ and m.selection_ == m.solver_.selection_
    assert m.C_ == m.selection_["C"] and m.selection_["table"]
    daskauc.save_model(m, tmp_path / "m.zarr")
    back = daskauc.load_model(tmp_path / "m.zarr")
    assert back.C_ == m.C_


def test_boolean_labels_ingest(tmp_path):
    """``ingest_array(X, y_bool)`` failed writing its attributes: numpy's bool is not JSON."""
    X = np.arange(20.0).reshape(10, 2)
    ds = daskauc.ingest_array(X, X[:, 0] > 8, tmp_path / "b.zarr")
    assert ds.attrs["classes"] == [[False], [True]] and ds.attrs["n_positive"] == 5


def test_a_damaged_parquet_page_is_named_not_ingested(tmp_path, capsys):
    """A file written with page checksums (Spark's default), one bit of a data page flipped:
    pyarrow reads it without a word unless asked to verify the checksums; daskauc asks, in
    the pass over the rows and in the one-hot levels' pass."""
    df = _frame(300)[["a", "colour", "class"]]
    table = pa.Table.from_pandas(df, preserve_index=False)
    bad = damaged_parquet(table, tmp_path / "a.parquet", "a")
    assert not np.array_equal(pq.read_table(bad)["a"].to_numpy(), df["a"].to_numpy())
    store = tmp_path / "s.zarr"
    damaged = rf"{re.escape(bad)}: its data is damaged \(a page checksum mismatch"
    with pytest.raises(ValueError, match=damaged):  # during the pass, nothing written
        daskauc.ingest(bad, store, drop=["colour"])
    assert os.listdir(tmp_path) == ["a.parquet"]
    assert cli.main(["ingest", bad, os.fspath(store), "--drop", "colour"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the step's own line
    assert last.startswith("daskauc ingest: error: ") and re.search(damaged, last)
    bad = damaged_parquet(table, tmp_path / "c.parquet", "colour")
    with pytest.raises(ValueError, match=rf"{re.escape(bad)}: its data is damaged"):
        daskauc.ingest(bad, store, categorical="onehot")  # the levels' pass: before any work
    assert not os.path.exists(store)


def test_two_features_with_one_name_are_refused_before_any_work(tmp_path):
    """A numeric column "colour=red" beside a text column "colour" one-hot encoded, or a
    header naming two columns alike: the model would have two features of one name, and
    scoring the raw table would feed one column into both."""
    df = pd.DataFrame({"colour=red": [0.5, 1.5, 2.5, 3.5], "colour": ["red", "blue"] * 2,
                       "class": [0, 1, 0, 1]})
    df.to_parquet(tmp_path / "t.parquet")
    store = tmp_path / "s.zarr"
    with pytest.raises(ValueError, match=re.escape(
            "feature name 'colour=red' comes from the numeric column 'colour=red' and from "
            "the one-hot column 'colour' (value 'red')")):
        daskauc.ingest(tmp_path / "t.parquet", store, categorical="onehot")
    # a Parquet file with two columns of one name, and CSV headers, by each reader
    pq.write_table(pa.table([[1.0, 2.0], [3.0, 4.0], [0, 1]], names=["a", "a", "class"]),
                   tmp_path / "d.parquet")
    with pytest.raises(ValueError, match="columns 1 and 2 are both named 'a'"):
        daskauc.ingest(tmp_path / "d.parquet", store)
    (tmp_path / "f.csv").write_text("a,b,a,label\n1,2,3,0\n4,5,6,1\n")
    for kw in ({}, {"label": "label"}, {"drop": ["b"]}, {"categorical": "onehot"}):
        with pytest.raises(ValueError, match="columns 1 and 3 are both named 'a'"):
            daskauc.ingest(tmp_path / "f.csv", store, **kw)
    assert not os.path.exists(store)


def _parts(path, first: pd.DataFrame, second: pd.DataFrame) -> str:
    os.makedirs(path)
    first.to_parquet(os.path.join(path, "part-0.parquet"))
    second.to_parquet(os.path.join(path, "part-1.parquet"))
    return os.fspath(path)


def test_parquet_files_that_disagree_are_named_before_any_work(tmp_path):
    """A column only in a later file was dropped without a word; a column missing from a
    later file failed with Arrow's "No match for FieldRef.Name(b)" naming no file. Every
    file's columns are compared from the footers first: a column read must be in every file
    with one type; a column left out (drop=, or not among features=) may differ."""
    df = _frame(300)[["a", "b", "class"]]
    head, tail = df.iloc[:150], df.iloc[150:]
    cases = {
        "extra": (tail.assign(c=1.0), "has a column 'c' that"),
        "missing": (tail.drop(columns="b"), "lacks the column 'b' that"),
        "retyped": (tail.astype({"b": np.float64}), "column 'b' is double there but int64"),
    }
    for name, (second, what) in cases.items():
        src = _parts(tmp_path / name, head, second)
        later = re.escape(os.path.join(src, "part-1.parquet"))
        store = tmp_path / f"{name}.zarr"
        with pytest.raises(ValueError, match=rf"{later}.*{what} .*part-0.parquet"):
            daskauc.ingest(src, store)
        assert not os.path.exists(store), name
        left_out = "c" if name == "extra" else "b"
        ds = daskauc.ingest(src, store, drop=[left_out], overwrite=True)
        kept = ["a", "b"] if name == "extra" else ["a"]
        np.testing.assert_array_equal(ds.X.compute(), df[kept].to_numpy(np.float32))
        ds = daskauc.ingest(src, store, features=["a"], overwrite=True)
        assert ds.attrs["feature_names"] == ["a"]


def test_a_boolean_label_stays_boolean(tmp_path, capsys):
    """A boolean label column (Parquet bool, CSV true/false) became the text 'false' /
    'true', and positive=True, --positive true / True / 1 were all refused. The classes are
    booleans, True positive by default, and a model fitted on the store predicts booleans."""
    df = _frame(400)[["a", "b"]].assign(fraud=lambda d: d.a > 0.3)
    df.to_parquet(tmp_path / "t.parquet")
    df.to_csv(tmp_path / "t.csv", index=False)  # True / False
    (tmp_path / "l.csv").write_text(
        df.to_csv(index=False).replace("True", "true").replace("False", "false"))
    y = np.where(df["fraud"], 1, -1)
    store = os.fspath(tmp_path / "s.zarr")
    # the CSV files by the text parser, and by Arrow (categorical="onehot")
    for src, kw in [("t.parquet", {}), ("t.csv", {}), ("l.csv", {}),
                    ("t.csv", {"categorical": "onehot"}), ("l.csv", {"categorical": "onehot"})]:
        ds = daskauc.ingest(tmp_path / src, store, label="fraud", overwrite=True, **kw)
        assert json.dumps(ds.attrs["classes"]) == "[[false], [true]]", (src, kw)
        np.testing.assert_array_equal(ds.y.compute(), y)
    for positive in (True, 1, "true"):
        ds = daskauc.ingest(tmp_path / "t.parquet", store, label="fraud", positive=positive,
                            overwrite=True)
        assert json.dumps(ds.attrs["classes"]) == "[[false], [true]]", positive
    for positive in (False, 0, "False", "0"):
        ds = daskauc.ingest(tmp_path / "t.csv", store, label="fraud", positive=positive,
                            overwrite=True)
        assert json.dumps(ds.attrs["classes"]) == "[[true], [false]]", positive
        np.testing.assert_array_equal(ds.y.compute(), -y)
    ds = daskauc.ingest_array(df[["a", "b"]].to_numpy(), df["fraud"].to_numpy(),
                              tmp_path / "b.zarr", pos_label="false")
    assert json.dumps(ds.attrs["classes"]) == "[[true], [false]]"
    with pytest.raises(ValueError, match="pos_label='yes' does not occur.*False, True"):
        daskauc.ingest(tmp_path / "t.parquet", store, label="fraud", positive="yes",
                       overwrite=True)
    for value in ("true", "True", "1"):
        assert cli.main(["ingest", os.fspath(tmp_path / "t.parquet"), store, "--label",
                         "fraud", "--positive", value, "--overwrite", "--json"]) == 0
        payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert payload["positive"] == [True] and payload["negative"] == [False], value
    model = daskauc.LSAUC().fit(store)
    assert model.classes_.tolist() == [False, True]
    assert model.predict(df[["a", "b"]]).dtype == bool
