"""Checkpoint and resume: the whole solver state is saved with a model, ``partial_fit`` on a
loaded model continues exactly, and a fit killed (SIGKILL of its process) at any point and
resumed from its checkpoint gives the uninterrupted fit's model bit for bit."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from helpers import dataset_store

from daskauc import (
    OAM,
    OPAUC,
    SOLAM,
    SPAM,
    SPDAM,
    KernelAUC,
    PairwiseHingeSGD,
    RankSVM,
    TwoPassAUC,
    UnivariateAUC,
    load_model,
    save_model,
)
from daskauc.cli import main

STOCHASTIC = [PairwiseHingeSGD, SPAM, SPDAM, SOLAM, OPAUC, TwoPassAUC, OAM, UnivariateAUC]


def _data(n=900, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + X[:, 1] ** 2 + rng.normal(size=n) > 1, 1, -1)
    return X, y


@pytest.mark.parametrize("cls", STOCHASTIC)
def test_partial_fit_on_a_loaded_model_continues_exactly(cls, tmp_path):
    """The reported case: partial_fit after load_model started over at epoch 1."""
    X, y = _data()
    straight = cls(random_state=0, n_epochs=2).fit(X, y).partial_fit(X, y)
    saved = cls(random_state=0, n_epochs=2).fit(X, y)
    save_model(saved, tmp_path / "m.zarr")
    loaded = load_model(tmp_path / "m.zarr").partial_fit(X, y)
    np.testing.assert_array_equal(loaded.coef_, straight.coef_)
    assert len(loaded.history_) == len(straight.history_)
    assert loaded._solver_state.epoch == straight._solver_state.epoch == 3


def test_a_model_saved_without_its_state_refuses_to_continue(tmp_path):
    X, y = _data()
    model = PairwiseHingeSGD(random_state=0, n_epochs=1).fit(X, y)
    del model._solver_state
    save_model(model, tmp_path / "m.zarr")
    with pytest.raises(ValueError, match="no solver state to continue from"):
        load_model(tmp_path / "m.zarr").partial_fit(X, y)


@pytest.mark.parametrize("cls", STOCHASTIC)
def test_checkpointed_fits_resume_exactly(cls, tmp_path):
    X, y = _data()
    straight = cls(random_state=0, n_epochs=4).fit(X, y)
    ck = tmp_path / "ck.zarr"
    cls(random_state=0, n_epochs=2).fit(X, y, checkpoint=ck)  # "stopped" after 2 epochs
    assert load_model(ck)._solver_state.epoch == 2
    resumed = cls(random_state=0, n_epochs=4).fit(X, y, checkpoint=ck, resume=True)
    np.testing.assert_array_equal(resumed.coef_, straight.coef_)
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3, 4]
    np.testing.assert_array_equal(load_model(ck).coef_, straight.coef_)


def test_newton_resumes_from_any_step(tmp_path):
    X, y = _data(n=2000, d=12)
    straight = RankSVM(C=10.0, tol=1e-8).fit(X, y)
    assert straight.n_iter_ >= 4
    for k in (1, straight.n_iter_ - 1):
        ck = tmp_path / f"ck{k}.zarr"
        with pytest.warns(Warning, match="did not reach"):
            RankSVM(C=10.0, tol=1e-8, max_iter=k).fit(X, y, checkpoint=ck)
        resumed = RankSVM(C=10.0, tol=1e-8).fit(X, y, checkpoint=ck, resume=True)
        np.testing.assert_array_equal(resumed.coef_, straight.coef_)
        assert resumed.n_iter_ == straight.n_iter_
        assert [h["objective"] for h in resumed.history_] == \
            [h["objective"] for h in straight.history_]


@pytest.mark.parametrize("params", [
    {"solver": "kernel", "weighting": "pairs"},
    {"solver": "kernel", "weighting": "mean", "factor_placement": "workers"},
    {"solver": "embedding"},
])
def test_kernel_auc_resumes_from_any_step(tmp_path, params):
    """The kernel route's factors are computed again from the checkpoint's centres and the
    factor of A rebuilt from what the snapshot says it was built from (for "pairs", the
    coefficients whose centre scores gave its Laplacian), so the resumed steps refactor
    when and as the uninterrupted ones do; the embedding route rebuilds its map."""
    X, y = _data(n=1500, d=5)
    kw = dict(n_centres=120, gamma=0.5, lam=1e-5, tol=1e-9, random_state=0, **params)
    straight = KernelAUC(**kw).fit(X, y)
    assert straight.n_iter_ >= 4
    # both ends for "pairs" (its factor is rebuilt from saved coefficients), a late step for
    # the others (the suite's time)
    ks = (1, straight.n_iter_ - 2) if params.get("weighting") == "pairs" else (
        straight.n_iter_ - 2,)
    for k in ks:
        ck = tmp_path / f"ck{k}.zarr"
        with pytest.warns(Warning, match="did not reach"):
            KernelAUC(**{**kw, "max_iter": k}).fit(X, y, checkpoint=ck)
        saved = load_model(ck)
        assert saved.n_iter_ == k and not hasattr(saved, "calibration_slope_")
        resumed = KernelAUC(**kw).fit(X, y, checkpoint=ck, resume=True)
        assert np.max(np.abs(resumed.dual_coef_ - straight.dual_coef_)) == 0.0
        assert resumed.n_iter_ == straight.n_iter_
        assert [h["objective"] for h in resumed.history_] == \
            [h["objective"] for h in straight.history_]
        assert resumed.intercept_ == straight.intercept_


def test_kernel_auc_resumes_with_the_checkpoints_choices(tmp_path):
    """random_state=None draws other centres at every fit, and gamma / lam "auto" would
    choose again: a resumed fit takes the checkpoint's scaler, gamma, lam, centres and
    route instead; least squares has no Newton steps to checkpoint."""
    X, y = _data(n=1200, d=5)
    kw = dict(n_centres=80, tol=1e-9, selection_rows=300, width_rows=0, cv=2)
    ck = tmp_path / "ck.zarr"
    with pytest.warns(Warning, match="did not reach"):
        first = KernelAUC(**kw, max_iter=2).fit(X, y, checkpoint=ck)
    resumed = KernelAUC(**kw).fit(X, y, checkpoint=ck, resume=True)
    np.testing.assert_array_equal(resumed.centres_, first.centres_)
    assert (resumed.gamma_, resumed.lam_, resumed.route_) == \
        (first.gamma_, first.lam_, first.route_)
    assert resumed.selection_ == first.selection_ and resumed.n_iter_ > 2
    assert resumed.timings_["selection"] < first.timings_["selection"]
    with pytest.raises(ValueError, match="no Newton steps to checkpoint"):
        KernelAUC(loss="least_squares", gamma=0.5, lam=1e-3).fit(X, y, checkpoint=ck)
    # one line that names the parameter, the checkpoint's value and this fit's (it was a
    # 1,098-character dump of both parameter sets)
    with pytest.raises(ValueError) as err:
        KernelAUC(**{**kw, "n_centres": 90}).fit(X, y, checkpoint=ck, resume=True)
    message = str(err.value)
    assert message.endswith("was fitted with other parameters: n_centres=80 in the "
                            "checkpoint, 90 now; resume with the checkpoint's values or use "
                            "another checkpoint path")
    assert "\n" not in message and len(message) < 250


def test_resume_refuses_a_checkpoint_of_another_fit(tmp_path):

    X, y = _data()
    ck = tmp_path / "ck.zarr"
    SPAM(random_state=0, n_epochs=1).fit(X, y, checkpoint=ck)
    with pytest.raises(ValueError, match="other parameters: random_state=0 in the checkpoint, "
                                         "1 now; "):
        SPAM(random_state=1, n_epochs=2).fit(X, y, checkpoint=ck, resume=True)
    with pytest.raises(ValueError, match="fitted on other data"):
        SPAM(random_state=0, n_epochs=2).fit(X[:, :4], y, checkpoint=ck, resume=True)
    with pytest.raises(FileExistsError, match="is of SPAM, not a checkpoint of this SOLAM"):
        SOLAM(random_state=0, n_epochs=2).fit(X, y, checkpoint=ck, resume=True)


# ----------------------------------------------------------------- SIGKILL, then resume

_CHILD = """
import sys
import numpy as np
import dask
dask.config.set(scheduler="threads")
import daskauc
from daskauc.data import open_dataset
ds = open_dataset(sys.argv[1])
est = daskauc.{cls}(**{params})
est.fit(ds.X, ds.y, checkpoint=sys.argv[2])
"""


def _steps_in(ck) -> int:
    """Epochs or Newton steps recorded in a complete checkpoint (0 while there is none)."""
    try:
        attrs = json.loads(open(os.path.join(ck, "zarr.json")).read())["attributes"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0
    return int(attrs["fitted"].get("n_iter_", 0)) if attrs.get("daskauc_complete") else 0


def _this_process_blas_environ() -> dict:
    """``os.environ`` with the BLAS thread count this process runs with. A LocalCluster's
    nanny leaves OMP_NUM_THREADS=1 (and the like) in ``os.environ`` for its workers: a child
    started after any cluster test took 1 BLAS thread while this process kept 2, and its
    Newton steps differed in the last bits (KernelAUC at lam = 1e-7: by 0.025 after resume)."""
    from threadpoolctl import threadpool_info

    n = max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"),
            default=1)
    return {**os.environ, **{k: str(n) for k in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}


def kill_mid_fit(store, ck, cls: str, params: dict, *, after_steps: int, timeout=240.0):
    """Start a fit with a checkpoint in a child process (this process's BLAS threads: the
    resume here must see the same rounding) and SIGKILL it once the checkpoint holds
    ``after_steps`` steps; return the steps it held at the kill."""
    code = textwrap.dedent(_CHILD).format(cls=cls, params=repr(params))
    child = subprocess.Popen([sys.executable, "-c", code, str(store), str(ck)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=_this_process_blas_environ())
    deadline = time.time() + timeout
    try:
        while _steps_in(ck) < after_steps:
            if child.poll() is not None:
                raise AssertionError(f"the fit ended before the kill: {child.stderr.read()}")
            if time.time() > deadline:
                raise AssertionError("no checkpoint appeared in time")
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    return _steps_in(ck)


@pytest.mark.parametrize("cls, params, after", [
    ("PairwiseHingeSGD", {"lam": 1e-4, "n_epochs": 8, "random_state": 3}, 2),  # NSAUC's solver
    ("SPAM", {"n_epochs": 8, "random_state": 3}, 3),
    ("RankSVM", {"C": 100.0, "tol": 1e-9, "max_iter": 40}, 2),  # NBAUC's solver
    ("KernelAUC", {"n_centres": 300, "gamma": 0.05, "lam": 1e-7, "tol": 1e-9, "max_iter": 7,
                   "solver": "kernel", "random_state": 3}, 2),  # 7 steps: the suite's time
])
@pytest.mark.slow  # starts processes
def test_a_fit_killed_mid_run_resumes_to_the_same_model(tmp_path, cls, params, after):
    import daskauc

    X, y = _data(n=30000, d=40, seed=1)
    store = dataset_store(tmp_path / "ds.zarr", X.astype(np.float32), y, rows=3000)
    ck = tmp_path / "ck.zarr"
    held = kill_mid_fit(store, ck, cls, params, after_steps=after)
    total = params.get("n_epochs") or None
    import dask

    from daskauc.data import open_dataset

    with dask.config.set(scheduler="threads"):
        ds = open_dataset(store)
        straight = getattr(daskauc, cls)(**params).fit(ds.X, ds.y)
        resumed = getattr(daskauc, cls)(**params).fit(ds.X, ds.y, checkpoint=ck, resume=True)
    assert held < (total or straight.n_iter_), "killed after the fit had finished"
    coef = "dual_coef_" if cls == "KernelAUC" else "coef_"
    assert np.max(np.abs(getattr(resumed, coef) - getattr(straight, coef))) == 0.0
    assert resumed.n_iter_ == straight.n_iter_


@pytest.mark.slow  # starts processes
def test_cli_checkpoint_and_resume(tmp_path, monkeypatch, capsys):
    import daskauc.engine.cluster as cluster_mod

    def get_client(address=None, **kwargs):
        from distributed import Client, LocalCluster

        return Client(LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                   dashboard_address=":0"))

    monkeypatch.setattr(cluster_mod, "get_client", get_client)
    X, y = _data()
    store = dataset_store(tmp_path / "ds.zarr", X.astype(np.float32), y, rows=300)
    ck = str(tmp_path / "ck.zarr")
    base = ["fit", store, "--method", "spam", "--seed", "5", "--checkpoint", ck]
    assert main([*base[:2], str(tmp_path / "a.zarr"), *base[2:], "--epochs", "2"]) == 0
    assert main([*base[:2], str(tmp_path / "b.zarr"), *base[2:], "--epochs", "4",
                 "--resume"]) == 0
    assert main(["fit", store, str(tmp_path / "c.zarr"), "--method", "spam", "--seed", "5",
                 "--epochs", "4"]) == 0
    np.testing.assert_array_equal(load_model(tmp_path / "b.zarr").coef_,
                                  load_model(tmp_path / "c.zarr").coef_)
    assert main(["fit", store, str(tmp_path / "d.zarr"), "--method", "lsauc",
                 "--checkpoint", ck]) == 2
    assert "no epochs or steps to checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize("name, params, short", [
    ("NSAUC", {"n_epochs": 4}, {"n_epochs": 2}),
    ("NBAUC", {}, {"max_iter": 1}),
])
def test_presets_pass_the_checkpoint_to_their_solver(tmp_path, name, params, short):
    """The preset's checkpoint holds its solver; the embedding is recomputed on resume
    (deterministic for an integer random_state), so the resumed preset is the same model."""
    import warnings

    import daskauc

    X, y = _data(n=1500)
    cls = getattr(daskauc, name)
    straight = cls(n_landmarks=32, random_state=0, **params).fit(X, y)
    ck = tmp_path / "ck.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NBAUC stopped after one Newton step says so
        cls(n_landmarks=32, random_state=0, **{**params, **short}).fit(X, y, checkpoint=ck)
    resumed = cls(n_landmarks=32, random_state=0, **params).fit(X, y, checkpoint=ck,
                                                                 resume=True)
    np.testing.assert_array_equal(resumed.decision_function(X), straight.decision_function(X))
