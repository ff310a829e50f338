"""The command line, run in-process on temporary stores."""

import json
import os

import dask
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from daskauc.cli import main
from daskauc.data import open_dataset
from daskauc.io import load_model


@pytest.fixture(autouse=True)
def _threaded_local_cluster(monkeypatch):
    # the CLI starts a LocalCluster; in tests use one small in-process cluster instead
    import daskauc.engine.cluster as cluster_mod

    def get_client(address=None, **kwargs):
        from distributed import Client, LocalCluster

        if address:  # a running cluster (the CLI closes only its client): connect to it
            return Client(address)
        return Client(LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                   dashboard_address=":0"))

    monkeypatch.setattr(cluster_mod, "get_client", get_client)


def _libsvm(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.5, 2, 1)  # labels 1/2, nonlinear
    with open(path, "w") as f:
        for xi, yi in zip(X, y, strict=True):
            f.write(f"{yi} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(xi)) + "\n")
    return X, y


def test_ingest_embed_fit_evaluate(tmp_path, capsys):
    src = tmp_path / "data.svm"
    _libsvm(src)
    d = lambda name: str(tmp_path / name)  # noqa: E731
    assert main(["ingest", str(src), d("all.zarr"), "--shuffle", "--split", d("tr.zarr"),
                 d("te.zarr")]) == 0
    tr, te = open_dataset(d("tr.zarr")), open_dataset(d("te.zarr"))
    assert tr.n_samples + te.n_samples == 400
    assert main(["embed", d("tr.zarr"), d("tr-emb.zarr"), "--landmarks", "60",
                 "--also", d("te.zarr"), d("te-emb.zarr")]) == 0
    assert open_dataset(d("tr-emb.zarr")).X.shape == (tr.n_samples, 60)
    # mapping new data with the map stored in an embedding store gives the same rows
    assert main(["embed", d("te.zarr"), d("te-emb2.zarr"), "--map", d("tr-emb.zarr")]) == 0
    np.testing.assert_allclose(open_dataset(d("te-emb2.zarr")).X.compute(),
                               open_dataset(d("te-emb.zarr")).X.compute(), rtol=1e-5,
                               atol=1e-6)
    assert main(["fit", d("tr-emb.zarr"), d("model"), "--method", "nsauc", "--lam", "1e-4",
                 "--epochs", "3", "--validation", d("te-emb.zarr")]) == 0
    capsys.readouterr()
    assert main(["evaluate", d("model"), d("te-emb.zarr"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = load_model(d("model"))
    te_emb = open_dataset(d("te-emb.zarr"))
    expected = roc_auc_score(te_emb.y.compute(), te_emb.X.compute() @ model.coef_)
    assert out["auc"] == pytest.approx(expected, abs=1e-12)
    assert out["auc"] > 0.9  # a circle: linear features cannot, the Gaussian embedding can


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """A small train / test embedding pair made through the command line."""
    tmp = tmp_path_factory.mktemp("cli-methods")
    src = tmp / "data.svm"
    _libsvm(src, n=300, seed=3)
    d = lambda name: str(tmp / name)  # noqa: E731
    assert main(["ingest", str(src), d("all.zarr"), "--shuffle", "--split", d("tr.zarr"),
                 d("te.zarr")]) == 0
    assert main(["embed", d("tr.zarr"), d("tr-emb.zarr"), "--landmarks", "40",
                 "--also", d("te.zarr"), d("te-emb.zarr")]) == 0
    return d("tr-emb.zarr"), d("te-emb.zarr")


@pytest.mark.parametrize("method", ["nsauc", "nsvmsgd2", "nbauc", "ranksvm", "lsauc", "twopass",
                                    "opauc", "solam", "spam", "spdam", "oam", "uni-exp",
                                    "uni-squ"])
def test_every_method_fits_saves_and_evaluates(embedded, tmp_path, method, capsys,
                                              dask_cluster_client, monkeypatch):
    """On the test session's cluster (DASKAUC_SCHEDULER): starting a local cluster per
    command is covered above, and cost 6 s per method. RankSVM with a given C: C="auto" is
    covered by tests/test_streams_and_defaults.py."""
    from daskauc.cli import _methods

    monkeypatch.setenv("DASKAUC_SCHEDULER", dask_cluster_client.scheduler.address)
    assert method in _methods()
    train, test = embedded
    model = str(tmp_path / "model")
    given_c = ["--C", "1e-2"] if method in ("nbauc", "ranksvm") else []
    if method in ("nsauc", "nsvmsgd2"):  # 20 by default, as NSAUC's: 5 are enough here
        given_c = ["--epochs", "5"]
    assert main(["fit", train, model, "--method", method, "--validation", test,
                 *given_c]) == 0
    err = capsys.readouterr().err
    if method in ("nbauc", "ranksvm"):  # progress: one line per Newton iteration
        assert "newton 0:" in err and "newton 1:" in err
    assert main(["--json", "evaluate", model, test]) == 0
    auc = json.loads(capsys.readouterr().out)["auc"]
    est = load_model(model)
    te = open_dataset(test)
    assert auc == pytest.approx(roc_auc_score(te.y.compute(), est.decision_function(
        te.X.compute())), abs=1e-12)
    assert auc > 0.5  # learned something from the (nonlinear, embedded) problem


def test_kernel_method_fits_a_raw_store_as_kernelauc_does(embedded, tmp_path, capsys,
                                                          dask_cluster_client, monkeypatch):
    """``--method kernel`` is KernelAUC on the raw (not embedded) store, checkpointed, with
    its parameters from --lam / --param: the model of KernelAUC(...).fit in Python, and
    evaluate scores the raw test store through it."""
    from daskauc import KernelAUC

    monkeypatch.setenv("DASKAUC_SCHEDULER", dask_cluster_client.scheduler.address)
    train, test = (p.replace("-emb.zarr", ".zarr") for p in embedded)
    model, ck = str(tmp_path / "model"), str(tmp_path / "ck")
    params = ["--param", "n_centres=40", "--param", "gamma=0.5", "--param", "tol=0.02"]
    assert main(["fit", train, model, "--method", "kernel", "--lam", "1e-3", *params,
                 "--checkpoint", ck]) == 0
    est = load_model(model)
    assert isinstance(est, KernelAUC) and est.n_iter_ > 1
    tr, te = open_dataset(train), open_dataset(test)
    ref = KernelAUC(n_centres=40, gamma=0.5, lam=1e-3, tol=0.02, random_state=0).fit(tr.X,
                                                                                    tr.y)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-8, atol=1e-10)
    capsys.readouterr()
    assert main(["--json", "evaluate", model, test]) == 0
    auc = json.loads(capsys.readouterr().out)["auc"]
    assert auc == pytest.approx(roc_auc_score(te.y.compute(), ref.decision_function(
        te.X.compute())), abs=1e-10)
    assert auc > 0.9  # the circle, through the kernel


def test_fit_errors_are_reported_not_raised(tmp_path, capsys):
    src = tmp_path / "data.svm"
    _libsvm(src, n=100)
    store = str(tmp_path / "s.zarr")
    assert main(["ingest", str(src), store]) == 0
    assert main(["ingest", str(src), store]) == 1  # exists, no --overwrite
    assert "already exists" in capsys.readouterr().err
    assert main(["fit", store, str(tmp_path / "m"), "--method", "nope"]) == 2
    assert main(["fit", store, str(tmp_path / "m"), "--param", "bogus=1"]) == 2
    assert main(["evaluate", str(tmp_path / "missing"), store]) == 1
    assert "no store" in capsys.readouterr().err


def test_model_round_trip_without_pickle(tmp_path):
    from daskauc import PairwiseHingeSGD, save_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.where(X[:, 0] > 0, "b", "a")
    m = PairwiseHingeSGD(lam=1e-3, n_epochs=2, random_state=0).fit(X, y)
    save_model(m, tmp_path / "m")
    back = load_model(tmp_path / "m")
    np.testing.assert_array_equal(back.coef_, m.coef_)
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    assert back.get_params() == m.get_params()
    with pytest.raises(FileExistsError):
        save_model(m, tmp_path / "m")
    assert not list(tmp_path.glob("**/*.pkl"))


def test_demo_on_the_shipped_dataset(tmp_path, capsys):
    assert main(["demo", "--workdir", str(tmp_path), "--landmarks", "100", "--epochs", "2"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "Dask dashboard:" in captured.err and "Dask dashboard" not in out
    auc = float(out.split("NSAUC test AUC:")[1].split()[0])
    te = open_dataset(tmp_path / "test-emb.zarr")
    assert te.n_samples == 921  # 20% of spambase's 4,601 rows, stratified
    assert auc > 0.95  # Khalid et al.: 0.9804 (NBAUC, 1600 landmarks)


def test_nonlinear_methods_embed_a_raw_store_as_python_does(embedded, tmp_path, capsys,
                                                           dask_cluster_client, monkeypatch):
    """``fit --method nsauc`` on a raw dataset store fitted a linear model on the raw
    features (0.9495 where the embedded NSAUC reached 0.9999 on a user's data), with no word
    said: it is now NSAUC, the model ``NSAUC(random_state=seed).fit(store)`` gives, saved as
    NSAUC and reported with the method typed and the positive class. A model fitted on an
    embedding, evaluated on a raw store, names the command that maps the rows."""
    from daskauc import NSAUC

    monkeypatch.setenv("DASKAUC_SCHEDULER", dask_cluster_client.scheduler.address)
    train_emb, test_emb = embedded
    root = os.path.dirname(train_emb)
    raw_train, raw_test = os.path.join(root, "tr.zarr"), os.path.join(root, "te.zarr")
    model = str(tmp_path / "nsauc")
    assert main(["--json", "fit", raw_train, model, "--method", "nsauc", "--epochs", "3",
                 "--param", "n_landmarks=30"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["method"] == "nsauc" and payload["estimator"] == "NSAUC"
    assert payload["positive_class"] == 2  # the store's raw labels are 1 and 2
    assert "raw dataset store: nsauc embeds it first" in captured.err
    est = load_model(model)
    python = NSAUC(n_epochs=3, n_landmarks=30, random_state=0).fit(raw_train)
    X = open_dataset(raw_test).X.compute()
    np.testing.assert_allclose(est.decision_function(X), python.decision_function(X),
                               rtol=1e-6, atol=1e-9)
    # the embedding's model on the raw test store: the error says what to run
    emb_model = str(tmp_path / "emb")
    assert main(["fit", train_emb, emb_model, "--method", "ranksvm", "--C", "1e-2"]) == 0
    capsys.readouterr()
    assert main(["evaluate", emb_model, raw_test]) != 0
    err = capsys.readouterr().err
    assert "daskauc embed" in err and "--map TRAIN-EMB.zarr" in err and "expects" in err


def test_models_fitted_from_a_stores_text_labels_say_them(tmp_path, capsys):
    """A CSV with text labels, ingested with --positive, then embedded: a model fitted on the
    embedding (or on the raw store) reports the positive class by its raw label (it printed
    np.int8(1)), its classes_ are the raw labels, and --param class_weight names them."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=600) > 0.8, "fault", "normal")
    with open(tmp_path / "t.csv", "w") as f:
        f.write("a,b,c,outcome\n")
        f.writelines(f"{r[0]},{r[1]},{r[2]},{label}\n" for r, label in zip(X, y, strict=True))
    store, emb = str(tmp_path / "t.zarr"), str(tmp_path / "e.zarr")
    assert main(["ingest", str(tmp_path / "t.csv"), store, "--label", "outcome",
                 "--positive", "fault"]) == 0
    with dask.config.set(scheduler="threads"):
        assert main(["embed", store, emb, "--landmarks", "30"]) == 0
        capsys.readouterr()
        for source, name in ((emb, "m1"), (store, "m2")):
            landmarks = ["--param", "n_landmarks=30"] if source == store else []
            assert main(["--json", "fit", source, str(tmp_path / name), "--method", "nsauc",
                         "--epochs", "2", *landmarks,
                         "--param", 'class_weight={"fault": 3.0}']) == 0
            assert json.loads(capsys.readouterr().out)["positive_class"] == "fault"
            model = load_model(str(tmp_path / name))
            assert model.classes_.tolist() == ["normal", "fault"]
            assert model.get_params()["class_weight"] == {"fault": 3.0}


def test_a_class_weight_by_a_numeric_label_from_the_command_line(tmp_path, capsys):
    """--param 'class_weight={"1": 10}' on a store of labels 1.0 / 2.0: JSON keys are text, and
    the key "1" names the label 1 as --positive 1 does (it was refused: no spelling reached
    a numeric label). The model equals the one fitted in Python with the key 1; a key naming
    no label is refused in one line naming it and the labels."""
    from daskauc import RankSVM, ingest_array

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=400) > 0.8, 2.0, 1.0)
    store, cli_model = str(tmp_path / "s.zarr"), str(tmp_path / "m")
    with dask.config.set(scheduler="threads"):
        ingest_array(X, y, store, chunk_rows=100)
        assert main(["fit", store, cli_model, "--method", "ranksvm",
                     "--param", 'class_weight={"1": 10}']) == 0
        fitted = RankSVM(random_state=0, class_weight={1: 10}).fit(store)
    loaded = load_model(cli_model)
    for name in ("coef_", "intercept_", "calibration_slope_", "classes_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(fitted, name))
    capsys.readouterr()
    assert main(["fit", store, str(tmp_path / "m2"), "--method", "ranksvm",
                 "--param", 'class_weight={"3": 10}']) == 1
    err = capsys.readouterr().err
    assert "class_weight names [3], which are not labels of y (the labels: [1, 2])" in err
    assert "Traceback" not in err and not os.path.exists(tmp_path / "m2")
    assert main(["fit", store, str(tmp_path / "m2"), "--method", "ranksvm",
                 "--param", 'class_weight={"1": 2, "1.0": 3}']) == 2
    assert "--param class_weight: the keys '1' and '1.0' of" in capsys.readouterr().err


def test_a_ctrl_c_lost_in_a_garbage_collection_still_stops_the_fit(embedded, tmp_path,
                                                                     monkeypatch, capsys):
    # CPython cannot raise a signal's KeyboardInterrupt that lands in a weakref callback or
    # a __del__: it prints "Exception ignored" and goes on (seen once in CI: the fit ran to
    # its end and exited 0 after SIGINT). The command must still stop, at its next compute.
    import daskauc._compute as compute_mod

    class DiesInterrupted:
        def __del__(self):
            raise KeyboardInterrupt

    calls = {"n": 0}
    flush = compute_mod.flush_releases

    def flush_then_collect(client=None):
        calls["n"] += 1
        if calls["n"] == 8:  # mid-fit: a garbage collection meets the Ctrl-C
            DiesInterrupted()
        return flush(client)

    monkeypatch.setattr(compute_mod, "flush_releases", flush_then_collect)
    train, _ = embedded
    model = tmp_path / "m"
    assert main(["fit", train, str(model), "--method", "twopass", "--epochs", "30"]) == 130
    assert calls["n"] < 30  # it stopped soon after, not at the end of 30 epochs
    assert "interrupted" in capsys.readouterr().err
    assert not model.exists()


@pytest.mark.slow  # six command-line fits on a cluster
def test_a_wide_sparse_file_from_ingest_to_scores(tmp_path, capsys):
    # 100,000 features, a few dozen non-zeros a row: stored sparse, fitted, evaluated and
    # scored through the command line, the scores those of evaluate
    import pandas as pd
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    n, d, per_row = 1500, 100_000, 30
    cols = np.sort(rng.choice(300, size=(n, per_row)), axis=1) * 333  # shared columns
    X = sp.csr_matrix((rng.random(n * per_row), cols.ravel(),
                       np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
    X.sum_duplicates()
    s = X @ rng.normal(size=d)
    y = (s > np.quantile(s, 0.7)).astype(int)
    d_ = lambda name: str(tmp_path / name)  # noqa: E731
    dump_svmlight_file(X[:1200], y[:1200], d_("tr.svm"), zero_based=False)
    dump_svmlight_file(X[1200:], y[1200:], d_("te.svm"), zero_based=False)
    assert main(["ingest", d_("tr.svm"), d_("tr.zarr"), "--n-features", str(d)]) == 0
    assert main(["ingest", d_("te.svm"), d_("te.zarr"), "--n-features", str(d)]) == 0
    assert "sparse rows: " in capsys.readouterr().out
    assert open_dataset(d_("tr.zarr")).attrs["rows"] == "csr"
    for method in ("ranksvm", "lsauc", "oam", "tpauc", "spam", "pairwise-hinge"):
        assert main(["fit", d_("tr.zarr"), d_(f"{method}.zarr"), "--method", method]) == 0
        capsys.readouterr()
        assert main(["--json", "evaluate", d_(f"{method}.zarr"), d_("te.zarr")]) == 0
        auc = json.loads(capsys.readouterr().out)["auc"]
        assert auc > 0.85, (method, auc)
    assert main(["predict", d_("lsauc.zarr"), d_("te.zarr"), d_("scores.parquet")]) == 0
    scores = pd.read_parquet(d_("scores.parquet"))
    model = load_model(d_("lsauc.zarr"))
    np.testing.assert_allclose(scores["decision_function"], model.decision_function(X[1200:]),
                               rtol=1e-5, atol=1e-6)
