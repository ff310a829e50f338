"""What a user sees: no warnings they cannot act on, progress bars, plots, the CLI's manners."""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import dask
import numpy as np
import pytest

import daskauc
from daskauc import _config


@pytest.fixture
def large_graph_threshold():
    """distributed warns about graphs above 64 kB here (10 MB by default), and daskauc shares
    constants from 16 kB: the same proportion as the defaults, at test sizes."""
    old = _config.SHARE_BYTES
    _config.SHARE_BYTES = 16_000
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "64kB"}):
        yield
    _config.SHARE_BYTES = old


def _data(n=6000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X[:, 0] + X[:, 1] ** 2 + 0.3 * rng.normal(size=n) > 1, 1, -1)
    return X, y


def test_no_large_graph_warnings_on_a_cluster(tmp_path, dask_cluster_client,
                                             large_graph_threshold):
    """The Nystroem projection (120 x 120 float64 = 115 kB), NSAUC's partner rows and Newton's
    sort order travel scattered, not inside every graph: without sharing, each of these
    steps warned "Sending large graph"."""
    X, y = _data()
    daskauc.ingest_array(X, y, tmp_path / "d.zarr", chunk_rows=1500)
    ds = daskauc.open_dataset(tmp_path / "d.zarr")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*[Ll]arge graph.*")
        fmap = daskauc.KMeansNystroem(120, dtype="float64", kmeans_epochs=1,
                                      random_state=0).fit(ds.X)
        emb = fmap.write_embedding(tmp_path / "d.zarr", tmp_path / "e.zarr")
        sgd = daskauc.PairwiseHingeSGD(n_epochs=2, random_state=0).fit(emb.X, emb.y)
        svm = daskauc.RankSVM(C=1e-3, max_iter=3, tol=0.5).fit(emb.X, emb.y)
    # the same models as on the threaded scheduler (where nothing is scattered)
    with dask.config.set(scheduler="threads"):
        sgd_t = daskauc.PairwiseHingeSGD(n_epochs=2, random_state=0).fit(emb.X, emb.y)
        svm_t = daskauc.RankSVM(C=1e-3, max_iter=3, tol=0.5).fit(emb.X, emb.y)
    # the same numba steps on the same chunks; only the client-side eta0 search goes through
    # BLAS, whose reduction order may change with its thread count on another machine
    np.testing.assert_allclose(sgd.coef_, sgd_t.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(svm.coef_, svm_t.coef_, rtol=1e-10, atol=1e-12)
    assert sgd.score(emb.X, emb.y) > 0.9


def test_a_wide_model_scores_a_store_without_a_large_graph(tmp_path, dask_cluster_client,
                                                           large_graph_threshold):
    """A linear model of 2**18 hashed features (a 2 MiB coefficient vector) scores a sparse
    store with its coefficients scattered once: inside the graph they warned "Sending large
    graph" (32 MiB at 2**22, on the click-log benchmark)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    cols = np.sort(rng.choice(2**18, size=(2000, 10)), axis=1)
    X = sp.csr_matrix((np.ones(cols.size), cols.ravel(), np.arange(0, cols.size + 1, 10)),
                      shape=(2000, 2**18))
    X.sum_duplicates()
    y = np.where(X[:, :2**17].sum(axis=1).A.ravel() > 5, 1, -1)
    with dask.config.set(scheduler="threads"):  # in-memory rows would travel in the graph
        daskauc.ingest_array(X, y, tmp_path / "wide.zarr", chunk_rows=500)
        model = daskauc.UnivariateAUC(n_epochs=1, random_state=0).fit(tmp_path / "wide.zarr")
        expected = np.asarray(model.decision_function(X))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*[Ll]arge graph.*")
        got = model.decision_function(str(tmp_path / "wide.zarr")).compute()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_dashboard_port_taken_picks_another(tmp_path):
    """A second local cluster beside one that holds 8787 gets another port, no warning."""
    import socket

    from daskauc.engine.cluster import free_dashboard_address

    with socket.socket() as sock:
        try:
            sock.bind(("", 8787))
        except OSError:
            pass  # taken already: the case under test
        sock.listen()
        assert free_dashboard_address() == "127.0.0.1:0"
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    assert free_dashboard_address(port) == f"127.0.0.1:{port}"


# -- progress ---------------------------------------------------------------------------------
class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_without_a_terminal_prints_start_and_end_lines():
    X, y = _data(n=3000)
    out = io.StringIO()
    with dask.config.set(scheduler="threads"), daskauc.progress("fit SGD", stream=out) as bar:
        daskauc.PairwiseHingeSGD(n_epochs=2, random_state=0).fit(X, y)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[daskauc] fit SGD ..."
    assert lines[-1].startswith("[daskauc] fit SGD: done in ") and bar.seconds > 0
    assert "\r" not in out.getvalue()  # nothing redrawn in a log file


@pytest.mark.parametrize("on_cluster", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_progress_bar_counts_tasks_and_epochs(on_cluster, request, monkeypatch):
    """The bar's text: the solver's epoch count and the tasks finished of those submitted,
    read from the scheduler plugin on a cluster, from a dask callback on threads."""
    from daskauc.engine import progress as progress_mod

    monkeypatch.setattr(progress_mod, "REFRESH", 0.01)
    X, y = _data(n=20_000)
    Xd = dask.array.from_array(X, chunks=(2000, X.shape[1]))
    yd = dask.array.from_array(y, chunks=2000)
    ctx = (request.getfixturevalue("dask_cluster_client") if on_cluster else None)
    term = _Terminal()
    with dask.config.set(scheduler=ctx if on_cluster else "threads"), \
            daskauc.progress("fit", stream=term) as bar:
        daskauc.PairwiseHingeSGD(n_epochs=3, random_state=0).fit(Xd, yd)
        final = bar.text()
    drawn = term.getvalue()
    assert "\r\x1b[K[daskauc] fit" in drawn  # redrawn in place on a terminal
    assert "epoch 3/3" in final
    assert "tasks" in drawn
    submitted, finished = bar._last
    assert finished > 0 and submitted >= finished
    assert drawn.rstrip().splitlines()[-1].endswith(f"[daskauc] fit: done in {bar.seconds:.2f} s")


def _overlapping_graphs(run):
    """Two graphs in two threads, ordered so that dask's local scheduler loses the callbacks:
    A starts (keeping the set), B starts (keeping the empty set A left while it runs), A
    ends (putting its set back), B ends (putting the empty one back). ``run(graph)``
    computes a graph; returns both results."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    b_started, a_done = threading.Event(), threading.Event()

    def a_task(_):
        assert b_started.wait(10)
        return 1

    def b_task(_):
        b_started.set()
        assert a_done.wait(10)
        return 2

    a = dask.delayed(a_task)(0)
    b = dask.delayed(b_task)(0)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(run, a)
        second = pool.submit(run, b)
        result_a = first.result(timeout=20)
        a_done.set()
        return result_a, second.result(timeout=20)


@pytest.mark.parametrize("whose", ["daskauc", "user"])
def test_overlapping_graphs_in_threads_keep_the_bar_and_the_users_callbacks(whose):
    """dask's local scheduler swaps the global callback set for an empty one while a graph runs
    and puts its copy back after: graphs overlapping in threads (KernelAUC's search) put
    theirs back out of order, the bar's callback was lost, and closing the bar raised
    KeyError from ``Callback.unregister`` after the fit had finished (the model was lost).
    daskauc's graphs now keep the set (a user's ``ProgressBar().register()`` too); the bar
    registers itself again when a user's own overlapping graphs dropped it."""
    from dask.callbacks import Callback
    from dask.diagnostics import ProgressBar

    from daskauc._compute import compute

    run = (lambda g: compute(g)[0]) if whose == "daskauc" else (lambda g: g.compute())
    users = ProgressBar(out=io.StringIO())
    users.register()
    try:
        with dask.config.set(scheduler="threads"), \
                daskauc.progress("overlap", stream=_Terminal()) as bar:
            assert _overlapping_graphs(run) == (1, 2)
            before = bar._counts.read()  # registered again if lost
            dask.delayed(sum)([1, 2]).compute()
            assert bar._counts.read()[1] > before[1]  # this graph's task was counted
        assert bar.seconds > 0
        if whose == "daskauc":
            assert Callback.active == {users._callback}  # the bar's gone, the user's kept
        else:  # dask's own swap lost the user's; the bar's is gone all the same
            assert bar._counts._callback not in Callback.active
    finally:
        Callback.active.discard(users._callback)


def _default_fit_classes():
    from daskauc._registry import MODEL_CLASSES

    return sorted(MODEL_CLASSES)


@pytest.mark.filterwarnings("ignore::UserWarning")  # landmarks capped to the rows, rank
@pytest.mark.parametrize("where", ["threads", pytest.param("cluster", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", _default_fit_classes())
def test_every_default_fit_inside_nested_progress_blocks_is_kept(name, where, request):
    """Every registered estimator and transformer, with its defaults (KernelAUC's search and
    NBAUC's C path run their candidates in threads, which overlapped their graphs), fitted in
    two nested ``daskauc.progress`` blocks on a terminal: the model is fitted, both blocks
    end, and no callback is left behind."""
    from dask.callbacks import Callback

    from daskauc._registry import MODEL_CLASSES

    before = set(Callback.active)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=400) > 0, 1, -1)  # linear
    scheduler = request.getfixturevalue("dask_cluster_client") if where == "cluster" \
        else "threads"
    term = _Terminal()
    with dask.config.set(scheduler=scheduler), daskauc.progress("outer", stream=term) as outer:
        with daskauc.progress("inner", stream=term) as inner:
            model = MODEL_CLASSES[name]().fit(X, y)
    assert outer.seconds >= inner.seconds > 0
    assert term.getvalue().rstrip().endswith(f"[daskauc] outer: done in {outer.seconds:.2f} s")
    assert set(Callback.active) == before
    if hasattr(model, "decision_function"):
        assert daskauc.roc_auc(y, model.decision_function(X)) > 0.85  # (about 0.95)


def test_log_lines_print_above_the_bar():
    """daskauc's epoch lines (the logging convention of dask-ml) appear with the bar."""
    X, y = _data(n=3000)
    out = io.StringIO()
    with dask.config.set(scheduler="threads"), daskauc.progress("fit", stream=out), \
            contextlib.redirect_stderr(out):
        daskauc.PairwiseHingeSGD(n_epochs=2, random_state=0).fit(X, y)
    assert "[daskauc] nsauc epoch 1:" in out.getvalue()
    assert "[daskauc] nsauc epoch 2:" in out.getvalue()


# -- plots ------------------------------------------------------------------------------------
def test_plot_roc_and_pr_match_scikit_learn():
    pytest.importorskip("matplotlib")
    from sklearn.metrics import average_precision_score, roc_auc_score

    rng = np.random.default_rng(1)
    y = np.where(rng.random(500) < 0.3, 1, -1)
    s = y * 0.8 + rng.normal(size=500)
    roc_ax, pr_ax = daskauc.plot_roc(y, s, pr=True, label="m")
    auc_text = roc_ax.get_legend().get_texts()[0].get_text()
    assert f"{roc_auc_score(y, s):.4f}" in auc_text
    ap_text = pr_ax.get_legend().get_texts()[0].get_text()
    assert f"{average_precision_score(y, s):.4f}" in ap_text
    fpr, tpr = roc_ax.lines[0].get_data()
    assert fpr[0] == 0 and tpr[-1] == 1


def test_plot_history_panels():
    pytest.importorskip("matplotlib")
    X, y = _data(n=3000)
    Xv, yv = _data(n=1000, seed=1)
    with dask.config.set(scheduler="threads"):
        sgd = daskauc.PairwiseHingeSGD(n_epochs=3, random_state=0).fit(
            X, y, validation=(Xv, yv))
        svm = daskauc.RankSVM(C=1e-3).fit(X, y)
    (ax,) = daskauc.plot_history(sgd)
    assert ax.get_ylabel() == "validation AUC"
    assert list(ax.lines[0].get_xdata()) == [1, 2, 3]
    axes = daskauc.plot_history(svm)
    assert [a.get_ylabel() for a in axes] == ["objective", "relative gradient norm"]
    assert axes[0].get_yscale() == "log"
    with pytest.raises(ValueError, match="empty"):
        daskauc.plot_history([])


# -- the command line -------------------------------------------------------------------------
def test_cli_version_and_help_for_every_option(capsys):
    from daskauc.cli import build_parser, main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"daskauc {daskauc.__version__}"
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "fit" in a.choices)
    assert "``" not in parser.description  # no RST markup in --help
    for name, sub in subparsers.choices.items():
        text = sub.format_help()
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            assert action.help, f"{name} {action.option_strings} has no help text"
            if action.nargs != 0 and action.default not in (None, "==SUPPRESS=="):
                assert "default" in (sub._get_formatter()._get_help_string(action)), \
                    f"{name} {action.option_strings}: default not shown"
        assert "--scheduler" in text and "--json" in text  # global options after it too


def test_cli_global_options_after_the_subcommand():
    from daskauc.cli import build_parser

    parser = build_parser()
    before = parser.parse_args(["--workers", "1", "--json", "evaluate", "m", "s"])
    after = parser.parse_args(["evaluate", "m", "s", "--workers", "1", "--json"])
    neither = parser.parse_args(["evaluate", "m", "s"])
    assert (before.workers, before.json) == (after.workers, after.json) == (1, True)
    assert (neither.workers, neither.json, neither.scheduler) == (None, False, None)


def _cli_stores(tmp_path):
    X, y = _data(n=800, d=3)
    daskauc.ingest_array(X, y, tmp_path / "d.zarr")
    return str(tmp_path / "d.zarr")


def test_cli_inputs_checked_before_the_cluster_starts(tmp_path, capsys):
    from daskauc.cli import main

    tic = time.perf_counter()
    assert main(["evaluate", str(tmp_path / "no-model"), str(tmp_path / "no-store")]) == 1
    assert main(["fit", str(tmp_path / "no-store"), str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "starting a local Dask cluster" not in err and err.count("error:") == 2
    assert time.perf_counter() - tic < 3
    store = _cli_stores(tmp_path)
    assert main(["fit", store, str(tmp_path / "m"), "--plot", str(tmp_path / "h.txt")]) == 1
    assert "--plot" in capsys.readouterr().err


@pytest.mark.slow  # starts processes
def test_cli_json_results_plots_and_streams(tmp_path, capsys):
    """Results on stdout (JSON with --json), progress and logs on stderr; the history and
    ROC figures written."""
    from daskauc.cli import main

    store = _cli_stores(tmp_path)
    model, hist, roc = (str(tmp_path / n) for n in ("m", "h.png", "roc.png"))
    assert main(["fit", store, model, "--method", "ranksvm", "--C", "1e-3", "--plot", hist,
                 "--json", "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["estimator"] == "RankSVM" and result["n_iter"] >= 1
    assert "starting a local Dask cluster: 1 worker(s)" in err and "newton 0:" in err
    assert "Dask dashboard" in err and "local cluster stopped" in err
    assert main(["evaluate", model, store, "--plot", roc, "--pr", "--json",
                 "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    auc = json.loads(out)["auc"]
    est = daskauc.load_model(model)
    ds = daskauc.open_dataset(store)
    assert auc == pytest.approx(est.score(ds.X, ds.y), abs=1e-12)
    from PIL import Image

    for path, min_width in ((hist, 800), (roc, 1000)):
        with Image.open(path) as img:
            assert img.format == "PNG" and img.size[0] >= min_width
    # an existing figure is not overwritten unasked
    assert main(["evaluate", model, store, "--plot", roc]) == 1
    assert "exists" in capsys.readouterr().err


@pytest.mark.slow  # starts processes
def test_cli_demo_cleans_up_its_temporary_directory(tmp_path, capsys, monkeypatch):
    from daskauc.cli import main

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["demo", "--landmarks", "50", "--epochs", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["workdir"] is None and result["test_auc"] > 0.9
    assert not [p for p in os.listdir(tmp_path) if p.startswith("daskauc-demo-")]


@pytest.mark.slow  # starts processes
def test_cli_cluster_is_reused_by_later_commands(tmp_path):
    """`daskauc cluster` in its own process; a later command uses it (no cluster started),
    and Ctrl-C stops it and removes its scheduler file."""
    store = _cli_stores(tmp_path)
    sched_file = tmp_path / "scheduler.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "daskauc.cli", "cluster", "--workers", "1", "--port", "0",
         "--scheduler-file", str(sched_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        address = proc.stdout.readline().split()[-1]  # "scheduler: tcp://..."
        assert address.startswith("tcp://")
        env = dict(os.environ, DASKAUC_SCHEDULER=address)
        fit = subprocess.run([sys.executable, "-m", "daskauc.cli", "fit", store,
                              str(tmp_path / "m"), "--epochs", "1", "--param",
                              "n_landmarks=20", "--json"],
                             capture_output=True, text=True, env=env, timeout=120)
        assert fit.returncode == 0, fit.stderr
        assert f"connecting to the Dask scheduler at {address}" in fit.stderr
        assert "starting a local" not in fit.stderr
        assert json.loads(fit.stdout)["estimator"] == "NSAUC"  # a raw store: embedded first
        assert json.loads(sched_file.read_text())["address"] == address
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "cluster stopped" in err and not sched_file.exists()


def test_cli_fit_plot_of_an_epoch_method_needs_validation(tmp_path, capsys):
    """``fit --plot history.png`` without ``--validation`` drew seconds per epoch for the
    stochastic methods; it now says what to add, before any work."""
    from daskauc.cli import main

    store = _cli_stores(tmp_path)
    tic = time.perf_counter()
    assert main(["fit", store, str(tmp_path / "m"), "--method", "oam", "--plot",
                 str(tmp_path / "h.png")]) == 2
    err = capsys.readouterr().err
    assert "--validation" in err and "starting a local Dask cluster" not in err
    assert time.perf_counter() - tic < 3 and not (tmp_path / "m").exists()


@pytest.mark.slow  # starts processes
def test_cli_warnings_are_one_line_with_what_to_do(tmp_path, _session_cluster_client):
    """A NystroemRankWarning printed 600 characters with its source line and pointed at
    eig_tol, which the command line has no option for: now one line naming --landmarks (in
    a process of its own: pytest records warnings instead of printing them)."""
    store = _cli_stores(tmp_path)  # 3 features: 300 landmarks are far more than the rank
    run = subprocess.run([sys.executable, "-m", "daskauc.cli", "embed", store,
                          str(tmp_path / "e.zarr"), "--landmarks", "300", "--scheduler",
                          _session_cluster_client.scheduler.address],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    line = next(ln for ln in run.stderr.splitlines() if "KMeansNystroem kept" in ln)
    assert line.startswith("[daskauc] warning: ") and "--landmarks" in line
    assert "warnings.warn" not in run.stderr and "nystroem.py" not in run.stderr


@pytest.mark.parametrize("steps", [
    "StandardScaler",  # scikit-learn's, which shares its name with daskauc's
    "MinMaxScaler QuantileTransformer",
    "RobustScaler passthrough MaxAbsScaler Normalizer",
    "daskauc.StandardScaler",
])
def test_save_model_of_a_pipeline_round_trips_bit_for_bit(tmp_path, steps):
    """A Pipeline of scikit-learn's preprocessing and a daskauc estimator saves as arrays and
    JSON (it raised "cannot save a value of type StandardScaler as JSON") and loads as the
    same Pipeline: the same steps, of the same classes, the same decision function."""
    import sklearn.preprocessing as skp
    from sklearn.pipeline import Pipeline, make_pipeline

    X, y = _data(n=600)
    built = []
    for name in steps.split():
        if name == "passthrough":
            built.append(name)
        elif name.startswith("daskauc."):
            built.append(daskauc.StandardScaler())
        else:
            kwargs = {"n_quantiles": 50} if name == "QuantileTransformer" else {}
            built.append(getattr(skp, name)(**kwargs))
    pipe = make_pipeline(*built, daskauc.RankSVM(C=1.0)).fit(X, y)
    daskauc.save_model(pipe, tmp_path / "m")
    loaded = daskauc.load_model(tmp_path / "m")
    assert isinstance(loaded, Pipeline)
    assert [(n, type(s)) for n, s in loaded.steps] == [(n, type(s)) for n, s in pipe.steps]
    np.testing.assert_array_equal(loaded.decision_function(X), pipe.decision_function(X))
    np.testing.assert_array_equal(loaded.predict(X), pipe.predict(X))
    described = json.loads(daskauc.io.describe_model(tmp_path / "m"))
    assert described["class"] == "sklearn.pipeline.Pipeline"
    assert described["steps"][-1] == ["ranksvm", "RankSVM"]


def test_save_model_refuses_what_it_cannot_rebuild_before_writing(tmp_path):
    """A step that needs pickle (a PCA, a function) or a Pipeline cache is refused by name,
    and nothing is written."""
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline

    X, y = _data(n=300)
    pipe = make_pipeline(PCA(3), daskauc.RankSVM(C=1.0)).fit(X, y)
    with pytest.raises(TypeError, match=r"cannot save a PCA: .*StandardScaler.*never pickle"):
        daskauc.save_model(pipe, tmp_path / "m")
    pipe = make_pipeline(daskauc.StandardScaler(), daskauc.RankSVM(C=1.0),
                         memory=str(tmp_path / "cache")).fit(X, y)
    with pytest.raises(TypeError, match="memory="):
        daskauc.save_model(pipe, tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("nested", [False, True])
def test_load_model_refuses_what_save_model_refuses(tmp_path, nested):
    """A model file whose Pipeline (or a Pipeline nested in it) sets memory= loaded, and a
    refit then wrote joblib pickles to the directory the file chose and unpickled them on a
    cache hit. load_model applies save_model's refusals, before any estimator is built."""
    import zarr
    from sklearn.pipeline import make_pipeline

    X, y = _data(n=300)
    inner = make_pipeline(daskauc.StandardScaler(), daskauc.RankSVM(C=1.0))
    pipe = (make_pipeline(daskauc.MinMaxScaler(), inner) if nested else inner).fit(X, y)
    daskauc.save_model(pipe, tmp_path / "m")
    group = zarr.open_group(tmp_path / "m" / ("step1" if nested else ""), mode="r+")
    group.attrs["params"] = {**group.attrs["params"], "memory": str(tmp_path / "cache")}
    with pytest.raises(daskauc.io.ModelFileError,
                       match=r"a Pipeline with memory='.*cache' \(a cache of fitted steps on "
                             r"disk, .*pickles.*\) is refused"):
        daskauc.load_model(tmp_path / "m")
    assert not (tmp_path / "cache").exists()


def test_the_c_path_says_each_candidate_i_of_n_time_left_and_the_choice(caplog):
    """C="auto" logs one line per C (its validation AUC, the best so far, i of N, the time
    left) and the chosen C, and not the hundreds of Newton steps inside the path (they are
    at DEBUG); the lines agree with the path's own table."""
    import logging
    import re

    X, y = _data(n=900)
    with caplog.at_level(logging.DEBUG, logger="daskauc"):
        model = daskauc.RankSVM(C="auto", random_state=0).fit(X, y)
    table = model.selection_["table"]
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    steps = [m for m in info if m.startswith("C path ") and "->" in m]
    grid = len(daskauc.model_selection.c_path.C_GRID)
    assert [int(re.match(r"C path (\d+)/", m).group(1)) for m in steps] == \
        list(range(1, len(table) + 1))
    assert all(f"/{grid}: C=2^" in m and re.search(r"s left|last candidate", m)
               for m in steps)
    logged = [float(re.search(r"validation AUC ([0-9.]+)", m).group(1)) for m in steps]
    np.testing.assert_allclose(logged, [row["val_auc"] for row in table], atol=1e-5)
    assert re.search(r"best [0-9.]+ at C=2\^-?\d+", steps[-1])
    chose = [m for m in info if m.startswith("C path: chose C=")]
    assert len(chose) == 1 and f"{model.C_:.3g}" in chose[0]
    assert f"stopped after {len(table)} of {grid}" in chose[0] or len(table) == grid
    # the solves' steps: DEBUG during the path, INFO in the final fit after it
    newton = [r for r in caplog.records if r.getMessage().startswith("newton ")]
    first_final = next(i for i, r in enumerate(newton) if r.levelno == logging.INFO)
    assert first_final > 0 and all(r.levelno == logging.DEBUG for r in newton[:first_final])


def test_a_preset_says_each_stage_before_it_runs(caplog):
    """No silences: the scaler, the landmarks (how many, how chosen), the embedding and the
    solver each get a line before they run, and the map's line says how many features it
    made (the landmarks it kept)."""
    import logging

    X, y = _data(n=2000)
    with caplog.at_level(logging.INFO, logger="daskauc"):
        model = daskauc.NSAUC(n_landmarks=50, n_epochs=1, random_state=0).fit(X, y)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("daskauc")]
    stages = [next(i for i, m in enumerate(lines) if m.startswith(text)) for text in (
        "NSAUC: standardizing 6 features over 2000 rows",
        "NSAUC: choosing 50 landmarks among 2000 rows by mini-batch k-means",
        "NSAUC: the feature map is fitted in ",
        "NSAUC: embedding ready in ")]
    assert stages == sorted(stages)
    assert f"({model.embedding_.n_components_} features); embedding 2000 rows" in \
        lines[stages[2]]
    assert "fitting PairwiseHingeSGD on it" in lines[stages[3]]


def test_the_kernel_search_log_agrees_with_itself(caplog):
    """Every search announces its total before it counts, and says so before it grows (no
    "7/7 ... last candidate" then "8/8"); the per-fold lines' "best" is what the choice is
    made on (the mean over the folds of a width done on every fold), and the chosen line
    gives that same mean."""
    import logging
    import re

    X, y = _data(n=3000)
    with caplog.at_level(logging.INFO, logger="daskauc"):
        daskauc.KernelAUC(n_centres=200, selection_rows=600, selection_centres=24,
                          random_state=0).fit(X, y)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("daskauc")]
    totals: dict = {}
    counted = 0
    for m in lines:
        start = re.match(r"(KernelAUC [^:]+?): (\d+) .* to score$", m)
        more = re.match(r"(KernelAUC [^:]+?): \d+ more .*; (\d+) in all$", m)
        step = re.match(r"(KernelAUC [^:]+?) (\d+)/(\d+): ", m)
        if start:
            totals[start.group(1)] = int(start.group(2))
        elif more:
            totals[more.group(1)] = int(more.group(2))
        elif step:
            name, i, total = step.group(1), int(step.group(2)), int(step.group(3))
            assert total == totals[name] and i <= total, m  # announced before counted
            counted += 1
    assert counted >= 6 and "KernelAUC gamma/lam search" in totals
    search = [m for m in lines if m.startswith("KernelAUC gamma/lam search ") and "->" in m]
    assert all("none complete yet" in m or "mean of 3 folds" in m for m in search)
    best = float(re.search(r"best ([0-9.]+) at", search[-1]).group(1))
    (chose,) = [m for m in lines if m.startswith("KernelAUC: chose gamma")]
    assert float(re.search(r"mean validation AUC ([0-9.]+)", chose).group(1)) == best
    assert re.search(r"best [0-9.]+ at gamma=([0-9.e-]+)/b", search[-1]).group(1) in chose


def test_the_bar_shows_the_search_and_its_time_left():
    from daskauc.engine.progress import search_progress

    stream = io.StringIO()
    with daskauc.progress("fit", stream=stream) as bar, \
            search_progress("C path", 4, unit="C") as search:
        assert "C path 0/4" in bar.text()
        search.record("C=2^-3", 0.75)
        search.record("C=2^-2", 0.7)
        text = bar.text()
    assert "C path 2/4 best 0.75000" in text and "s left in the search" in text


@pytest.mark.slow  # starts processes
def test_the_bar_updates_in_place_in_a_jupyter_kernel():
    """In a notebook the bar is a display updated in place (stderr is no terminal there: it
    only printed a start and an end line): run in a real IPython kernel, the messages are one
    display, updates of it with the epochs, and an end that says done."""
    from jupyter_client.manager import start_new_kernel

    code = "\n".join([
        "import numpy as np, dask, daskauc, daskauc.engine.progress as p",
        "p.REFRESH = 0.005",
        "rng = np.random.default_rng(0)",
        "X = rng.normal(size=(20000, 8)); y = np.where(X[:, 0] > 0, 1, -1)",
        "with dask.config.set(scheduler='threads'), daskauc.progress('fit NSVMSGD2'):",
        "    daskauc.PairwiseHingeSGD(n_epochs=20, random_state=0).fit(X, y)",
    ])
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        msg_id = kc.execute(code)
        kinds, updates = [], []
        while True:
            msg = kc.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            kinds.append(kind)
            if kind in ("display_data", "update_display_data"):
                updates.append(msg["content"]["data"])
            if kind == "error":
                pytest.fail("\n".join(msg["content"]["traceback"]))
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert kinds.count("display_data") == 1 and kinds.count("update_display_data") >= 2
    assert any("epoch " in u["text/plain"] for u in updates), [u["text/plain"] for u in updates]
    assert "<progress" in updates[-1]["text/html"]
    assert "fit NSVMSGD2: done in" in updates[-1]["text/plain"]
