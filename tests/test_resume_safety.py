"""A checkpoint path never destroys what it holds, and a resume continues only the fit it
was saved from: the same data (a fingerprint recorded in the checkpoint) and no fewer epochs
or Newton steps than were saved. Every refusal comes before any work (no dask compute, no
k-means, no choice of C)."""

import inspect
import os
import shutil
import warnings

import numpy as np
import pytest
from dask.callbacks import Callback
from helpers import assert_covered, dataset_store, model_classes

from daskauc import (
    NSAUC,
    OPAUC,
    SPAM,
    PairwiseHingeSGD,
    RankSVM,
    load_model,
    open_dataset,
    save_model,
)

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _data(n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(size=n) > 0.5, 1, -1)
    return X, y


#: every registered class whose fit takes checkpoint=
CHECKPOINTED = model_classes(lambda cls: "checkpoint" in inspect.signature(cls.fit).parameters)
#: parameters that make a fit quick, should a refusal come after the work: two epochs, 16
#: landmarks (or centres), random_state 0 where a class has them, and these
QUICK = {
    "PairwiseHingeSGD": {"lam": 1e-4},
    "KernelAUC": {"lam": 1e-3, "gamma": 0.1},  # fixed: "auto" chooses them by validation
}
# RankSVM and the presets on it keep C="auto": the choice of C is work too


def _maker(cls, quick):
    params = cls().get_params()
    common = {"n_epochs": 2, "n_landmarks": 16, "n_centres": 16, "random_state": 0}
    kw = {k: v for k, v in common.items() if k in params}
    return lambda: cls(**kw, **quick)


#: classes with checkpoint= that refuse every checkpoint path, and why
NO_CHECKPOINT = {
    "LSAUC": "one pass, no epochs: fit(checkpoint=...) is refused whatever the path holds "
             "(\"LSAUC has no epochs to checkpoint\")",
}
MAKERS = {name: _maker(cls, QUICK.get(name, {})) for name, cls in CHECKPOINTED.items()
          if name not in NO_CHECKPOINT}


def test_every_class_with_a_checkpoint_has_a_maker_or_refuses_every_checkpoint(tmp_path):
    """Every class with checkpoint= has a maker (read from the registry: a new class is
    tested below without being named here) or refuses any checkpoint; QUICK names no other
    class."""
    assert_covered(CHECKPOINTED, MAKERS, NO_CHECKPOINT, "MAKERS")
    assert sorted(set(QUICK) - set(MAKERS)) == []
    X, y = _data()
    for name in NO_CHECKPOINT:
        with _Computes() as computes, pytest.raises(ValueError, match="no epochs to checkpoint"):
            CHECKPOINTED[name]().fit(X, y, checkpoint=tmp_path / "ck.zarr")
        assert computes.n == 0 and not (tmp_path / "ck.zarr").exists()


class _Computes(Callback):
    """Counts dask computes (every pass over the data, k-means and the choice of C
    included, runs through one)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def _start(self, dsk):
        self.n += 1


def _snapshot(path):
    """Every file under ``path`` with its bytes (a regular file: itself)."""
    if os.path.isfile(path):
        return {"": open(path, "rb").read()}
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = open(full, "rb").read()
    return out


def _refused_before_any_work(make, X, y, ck, match, error=FileExistsError, **kw):
    before = _snapshot(ck) if os.path.exists(ck) else None
    with _Computes() as computes, pytest.raises(error, match=match) as info:
        make().fit(X, y, checkpoint=ck, **kw)
    assert computes.n == 0, f"{computes.n} computes ran before the refusal"
    if before is not None:
        assert _snapshot(ck) == before, "the refused path was changed"
    assert str(ck) in str(info.value)


def _other_class(name):
    """The class of the checkpoint that a fit of ``name`` must not replace."""
    return SPAM if name == "OPAUC" else OPAUC


@pytest.fixture
def held(tmp_path, name):
    """Paths holding what a checkpoint of ``name`` must never replace."""
    X, y = _data()
    paths = {"dataset": dataset_store(tmp_path / "ds.zarr", X.astype(np.float32), y,
                                      rows=200)}
    _other_class(name)(n_epochs=1, random_state=0).fit(  # a checkpoint
        X, y, checkpoint=tmp_path / "model.zarr")
    paths["model of another class"] = str(tmp_path / "model.zarr")
    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "results.csv").write_text("a,b\n1,2\n")
    paths["directory"] = str(plain)
    (tmp_path / "file.txt").write_text("keep me")
    paths["file"] = str(tmp_path / "file.txt")
    return paths


EXPECTED = {
    "dataset": "holds a daskauc dataset store; a checkpoint never replaces data",
    "model of another class": "holds a daskauc model that is of {other}, not",
    "directory": "holds a directory that is not a daskauc store",
    "file": "holds a file, not a daskauc checkpoint",
}


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("what", list(EXPECTED))
def test_a_checkpoint_path_holding_anything_else_is_refused_untouched(held, name, what):
    X, y = _data()
    expected = EXPECTED[what].format(other=_other_class(name).__name__)
    _refused_before_any_work(MAKERS[name], X, y, held[what], expected)
    _refused_before_any_work(MAKERS[name], X, y, held[what], expected, resume=True)


def test_an_embedding_store_and_a_finished_model_are_refused(tmp_path):
    X, y = _data()
    emb = NSAUC(n_epochs=1, n_landmarks=8, random_state=0,
                embedding_store=str(tmp_path / "emb.zarr")).fit(X, y)
    _refused_before_any_work(MAKERS["PairwiseHingeSGD"], X, y, str(tmp_path / "emb.zarr"),
                             "holds a daskauc embedding store; a checkpoint never replaces data")
    save_model(emb.solver_, tmp_path / "final.zarr")  # calibrated: the end of a fit
    _refused_before_any_work(MAKERS["PairwiseHingeSGD"], X, y, str(tmp_path / "final.zarr"),
                             "holds a finished PairwiseHingeSGD model")


@pytest.mark.parametrize("name", ["SPAM", "RankSVM", "NSAUC"])
def test_the_store_being_fitted_is_never_the_checkpoint(tmp_path, name):
    """The reported case: checkpoint=the training store destroyed the data after epoch 1."""
    X, y = _data()
    store = dataset_store(tmp_path / "ds.zarr", X.astype(np.float32), y, rows=200)
    ds = open_dataset(store)
    inside = "is, or lies inside, the data store .* this fit reads"
    for data in ((store, None), (ds.X, ds.y)):
        _refused_before_any_work(MAKERS[name], *data, store, inside, error=ValueError)
    _refused_before_any_work(MAKERS[name], store, None, os.path.join(store, "ck.zarr"), inside,
                             error=ValueError)
    assert open_dataset(store).X.shape == X.shape  # still whole


def test_a_preset_refuses_its_embedding_store_as_checkpoint(tmp_path):
    X, y = _data()
    emb = str(tmp_path / "emb.zarr")
    with _Computes() as computes, pytest.raises(
            ValueError, match="lies inside, the embedding_store .* this fit writes"):
        NSAUC(n_epochs=1, n_landmarks=8, embedding_store=emb).fit(X, y, checkpoint=emb)
    assert computes.n == 0


def test_an_unwritable_checkpoint_directory_is_refused_before_any_work(tmp_path):
    X, y = _data()
    (tmp_path / "a-file").write_text("")
    ck = str(tmp_path / "a-file" / "ck.zarr")  # its "directory" is a file (root ignores modes)
    for name in ("SPAM", "RankSVM", "NBAUC"):
        _refused_before_any_work(MAKERS[name], X, y, ck, r"cannot write the checkpoint "
                                 r".*a-file is a file, not a directory",
                                 error=NotADirectoryError)


def test_a_checkpoint_of_the_same_class_is_replaced_by_a_fresh_fit(tmp_path):
    X, y = _data()
    ck = tmp_path / "ck.zarr"
    SPAM(n_epochs=3, random_state=1).fit(X, y, checkpoint=ck)
    fresh = SPAM(n_epochs=2, random_state=0).fit(X, y, checkpoint=ck)
    saved = load_model(ck)
    assert saved.random_state == 0 and saved.n_iter_ == fresh.n_iter_ == 2
    (tmp_path / "empty").mkdir()  # an empty directory holds nothing to lose
    SPAM(n_epochs=1, random_state=0).fit(X, y, checkpoint=tmp_path / "empty")
    assert load_model(tmp_path / "empty").n_iter_ == 1


# ---------------------------------------------------------------- resuming on other data


def test_resume_on_another_store_of_the_same_shape_is_refused(tmp_path):
    X, y = _data()
    X2, y2 = _data(seed=1)
    a = dataset_store(tmp_path / "a.zarr", X.astype(np.float32), y, rows=200)
    b = dataset_store(tmp_path / "b.zarr", X2.astype(np.float32), y2, rows=200)
    ck = tmp_path / "ck.zarr"
    SPAM(n_epochs=1, random_state=0).fit(a, checkpoint=ck)
    with _Computes() as computes, pytest.raises(ValueError, match="fitted on other data") as e:
        SPAM(n_epochs=2, random_state=0).fit(b, checkpoint=ck, resume=True)
    assert computes.n == 0
    assert a in str(e.value) and b in str(e.value)
    ds = open_dataset(b)
    with pytest.raises(ValueError, match="fitted on other data"):
        SPAM(n_epochs=2, random_state=0).fit(ds.X, ds.y, checkpoint=ck, resume=True)
    # the same store, as a path or as open_dataset's arrays, resumes; so does a copy
    straight = SPAM(n_epochs=3, random_state=0).fit(a)
    ds = open_dataset(a)
    SPAM(n_epochs=2, random_state=0).fit(ds.X, ds.y, checkpoint=ck, resume=True)
    shutil.copytree(a, tmp_path / "copy.zarr")
    resumed = SPAM(n_epochs=3, random_state=0).fit(str(tmp_path / "copy.zarr"), checkpoint=ck,
                                                    resume=True)
    np.testing.assert_array_equal(resumed.coef_, straight.coef_)
    assert load_model(ck).data_fingerprint_["X"]["path"] == str(tmp_path / "copy.zarr")


@pytest.mark.parametrize("name", ["PairwiseHingeSGD", "RankSVM"])
def test_resume_on_other_in_memory_data_is_refused(tmp_path, name):
    X, y = _data()
    ck = tmp_path / "ck.zarr"
    make = {"PairwiseHingeSGD": lambda n: PairwiseHingeSGD(lam=1e-4, n_epochs=n,
                                                           random_state=0),
            "RankSVM": lambda n: RankSVM(C=1.0, tol=1e-9, max_iter=n)}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RankSVM stopped early says so
        make(1).fit(X, y, checkpoint=ck)
        X2 = X.copy()
        X2[0, 0] += 1.0  # one value differs
        with pytest.raises(ValueError, match="fitted on other data.*in-memory data"):
            make(3).fit(X2, y, checkpoint=ck, resume=True)
        y2 = y.copy()
        y2[:2] = -y2[:2]
        with pytest.raises(ValueError, match="fitted on other data"):
            make(3).fit(X, y2, checkpoint=ck, resume=True)
        straight = make(3).fit(X, y)
        resumed = make(3).fit(X.copy(), y.copy(), checkpoint=ck, resume=True)
    np.testing.assert_array_equal(resumed.coef_, straight.coef_)


def test_a_checkpoint_without_a_data_record_is_not_resumed(tmp_path):
    X, y = _data()
    ck = tmp_path / "ck.zarr"
    SPAM(n_epochs=1, random_state=0).fit(X, y, checkpoint=ck)
    old = load_model(ck)
    del old.data_fingerprint_  # as an older daskauc saved it
    save_model(old, ck, overwrite=True)
    with pytest.raises(ValueError, match="holds no record of the data"):
        SPAM(n_epochs=2, random_state=0).fit(X, y, checkpoint=ck, resume=True)


def test_a_preset_resumed_with_another_feature_map_is_refused(tmp_path):
    X, y = _data()
    ck = tmp_path / "ck.zarr"
    NSAUC(n_epochs=1, n_landmarks=16).fit(X, y, checkpoint=ck)  # random_state=None
    with pytest.raises(ValueError, match="another feature map"):
        NSAUC(n_epochs=2, n_landmarks=16).fit(X, y, checkpoint=ck, resume=True)


# ---------------------------------------------------------------- shorter than saved


def test_resume_with_fewer_epochs_than_saved_is_an_error(tmp_path):
    """The reported case: n_epochs=2 resumed from a 5-epoch checkpoint gave n_iter_=5."""
    X, y = _data()
    ck = tmp_path / "ck.zarr"
    SPAM(n_epochs=5, random_state=0).fit(X, y, checkpoint=ck)
    with _Computes() as computes, pytest.raises(
            ValueError, match=r"has run 5 epochs, more than this fit's n_epochs=2"):
        SPAM(n_epochs=2, random_state=0).fit(X, y, checkpoint=ck, resume=True)
    assert computes.n == 0
    assert SPAM(n_epochs=5, random_state=0).fit(X, y, checkpoint=ck, resume=True).n_iter_ == 5


def test_resume_with_fewer_newton_steps_than_saved_is_an_error(tmp_path):
    X, y = _data(n=1500, d=8)
    ck = tmp_path / "ck.zarr"
    with pytest.warns(Warning, match="did not reach"):
        RankSVM(C=10.0, tol=1e-9, max_iter=3).fit(X, y, checkpoint=ck)
    with pytest.raises(ValueError, match=r"has run 3 Newton steps, more than this fit's "
                                         r"max_iter=2"):
        RankSVM(C=10.0, tol=1e-9, max_iter=2).fit(X, y, checkpoint=ck, resume=True)


def test_resume_needs_a_checkpoint():
    X, y = _data()
    with pytest.raises(ValueError, match="resume=True needs checkpoint=PATH"):
        SPAM(n_epochs=1).fit(X, y, resume=True)


def test_a_checkpoint_opened_before_the_fit_is_passed_to_it(tmp_path):
    """What the command line can do: check the path before starting a cluster, then fit."""
    from daskauc.estimators._checkpoint import open_checkpoint

    X, y = _data()
    est = NSAUC(n_epochs=2, n_landmarks=16, random_state=0)
    with pytest.raises(FileExistsError, match="holds a daskauc dataset store"):
        open_checkpoint(est, dataset_store(tmp_path / "ds.zarr", X, y, rows=200), X, y)
    ck = open_checkpoint(est, tmp_path / "ck.zarr", X, y)
    est.fit(X, y, checkpoint=ck)
    assert type(load_model(tmp_path / "ck.zarr")).__name__ == "PairwiseHingeSGD"
    again = open_checkpoint(est, tmp_path / "ck.zarr", X, y, resume=True)
    assert again.previous is not None and again.previous.n_iter_ == 2
