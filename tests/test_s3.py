"""Object storage for real: the pipeline, the integrity checks and the concurrent-writer rule
against a real S3 API (moto's server mode on 127.0.0.1, the ``s3_server`` fixture of
conftest.py), with the credentials and endpoint given as users give them: fsspec's options in
Python, the AWS_* environment and ``--storage-options`` on the command line. Every worker of
the clusters here starts without them in its environment unless a test puts them there: what
reaches the workers is what daskauc sends them."""

import copy
import itertools
import json
import os
import sys
import time
import uuid

import dask
import fsspec.config
import numpy as np
import pytest

from daskauc import (
    KMeansNystroem,
    PairwiseHingeSGD,
    StandardScaler,
    StoreIntegrityError,
    ingest,
    ingest_array,
    load_model,
    open_dataset,
    roc_auc,
    save_model,
    split_store,
)
from daskauc.cli import main
from daskauc.store import write as _store_write
from daskauc.store.protocol import open_store
from daskauc.store.write import begin_store, create_array, writing_store

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")

_AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "FSSPEC_S3")


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The server, with nothing of it in this process's environment or fsspec configuration
    (a test gives the credentials the way it tests), and a fresh prefix for the test."""
    for name in _AWS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delitem(fsspec.config.conf, "s3", raising=False)
    s3 = copy.copy(s3_server)
    s3.prefix = uuid.uuid4().hex[:12]
    return s3


def _root(s3) -> str:
    return s3.url(s3.prefix)


def _with_options(monkeypatch, s3) -> None:
    """fsspec's defaults for s3:// in this process: what every daskauc call here uses."""
    monkeypatch.setitem(fsspec.config.conf, "s3", s3.storage_options)


def _with_environment(monkeypatch, s3) -> None:
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)


def _csv(path, n=600, d=6, seed=0) -> str:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] - X[:, 1] ** 2 + 0.5 * rng.normal(size=n) > -0.5).astype(int)
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", fmt="%.6g")
    return str(path)


# ------------------------------------------------------------------------------ round trip

LANDMARKS, CHUNK_ROWS, EPOCHS = 40, 200, 2  # 600 rows: 3 chunks, the training stores 3, the test 1


def _pipeline(csv: str, root: str) -> dict:
    """ingest -> split -> standardize + embed -> fit -> save -> evaluate -> load -> predict,
    every store under ``root``, as ``daskauc ingest --split / embed / fit / evaluate /
    predict`` do it (the same parameters and seeds)."""
    from daskauc import write_scores

    p = lambda name: f"{root}/{name}"  # noqa: E731
    ingest(csv, p("ds.zarr"), chunk_rows=CHUNK_ROWS)
    split_store(p("ds.zarr"), p("train.zarr"), p("test.zarr"), test_size=0.2, random_state=0)
    train = open_dataset(p("train.zarr"))
    scaler = StandardScaler().fit(train.X)
    fmap = KMeansNystroem(n_components=LANDMARKS, dtype="float32", random_state=0)
    fmap.fit(scaler.transform(train.X))
    fmap.write_embedding(p("train.zarr"), p("train-emb.zarr"), scaler=scaler)
    test = fmap.write_embedding(p("test.zarr"), p("test-emb.zarr"), scaler=scaler)
    model = PairwiseHingeSGD(average=True, n_epochs=EPOCHS, random_state=0)
    model.fit(p("train-emb.zarr"))
    save_model(model, p("model.zarr"))
    decision = np.asarray(model.decision_function(test.X))
    # batch scoring (the saved model loaded): the raw test rows, through the map of the
    # training embedding
    write_scores(p("model.zarr"), p("test.zarr"), p("scores.zarr"), map=p("train-emb.zarr"))
    return {"auc": float(roc_auc(test.y, decision)), "coef": model.coef_, "decision": decision,
            "scores": _scores(p("scores.zarr"))}


def _scores(url: str) -> np.ndarray:
    return np.asarray(open_store(url, kind="scores")["decision_function"][...])


@pytest.fixture(scope="module")
def data_and_reference(tmp_path_factory, _session_cluster_client):
    """The CSV file and the pipeline's results on local stores (the session cluster)."""
    tmp = tmp_path_factory.mktemp("s3-reference")
    csv = _csv(tmp / "data.csv")
    client = _session_cluster_client
    with client.as_current(), dask.config.set(scheduler=client):
        tic = time.perf_counter()
        reference = _pipeline(csv, str(tmp / "local"))
    reference["seconds"] = time.perf_counter() - tic
    return csv, reference


def _run(argv, capsys) -> dict:
    code = main(["--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_the_command_line_on_s3_equals_the_pipeline_on_local_stores(s3, capsys,
                                                                    data_and_reference,
                                                                    _session_cluster_client):
    """``daskauc ingest --split / embed / fit / evaluate / predict`` with s3:// URLs and
    ``--storage-options``, on a running cluster (``--scheduler``: the session cluster, whose
    workers have no credentials in their environment)."""
    csv, local = data_and_reference
    p = lambda name: f"{_root(s3)}/{name}"  # noqa: E731
    options = ["--storage-options", json.dumps(s3.storage_options),
               "--scheduler", _session_cluster_client.scheduler.address]
    tic = time.perf_counter()
    _run(["ingest", csv, p("ds.zarr"), "--chunk-rows", str(CHUNK_ROWS),
          "--split", p("train.zarr"), p("test.zarr"), *options], capsys)
    _run(["embed", p("train.zarr"), p("train-emb.zarr"), "--landmarks", str(LANDMARKS),
          "--also", p("test.zarr"), p("test-emb.zarr"), *options], capsys)
    _run(["fit", p("train-emb.zarr"), p("model.zarr"), "--method", "nsauc",
          "--epochs", str(EPOCHS), *options], capsys)
    auc = _run(["evaluate", p("model.zarr"), p("test-emb.zarr"), *options], capsys)["auc"]
    _run(["predict", p("model.zarr"), p("test.zarr"), p("scores.zarr"),
          "--map", p("train-emb.zarr"), *options], capsys)
    print(f"\ncommand line on s3:// {time.perf_counter() - tic:.1f} s")
    assert auc == pytest.approx(local["auc"], abs=1e-12)
    assert "s3" not in fsspec.config.conf and "FSSPEC_S3" not in os.environ  # as before
    scores = open_store(p("scores.zarr"), storage_options=s3.storage_options)
    np.testing.assert_array_equal(scores["decision_function"][...], local["scores"])


def test_the_command_line_with_credentials_and_endpoint_in_the_environment(s3, monkeypatch,
                                                                          capsys, tmp_path):
    """Nothing on the command line but s3:// URLs: the AWS_* variables reach the client and
    the workers of the local cluster the command starts."""
    X, y = _data()
    store, model = f"{_root(s3)}/ds.zarr", str(tmp_path / "m.zarr")  # the workers read the store
    _with_environment(monkeypatch, s3)
    ingest_array(X, y, store, chunk_rows=60)
    fitted = PairwiseHingeSGD(random_state=0, n_epochs=2).fit(X, y)
    save_model(fitted, model)
    auc = _run(["evaluate", model, store, "--workers", "1"], capsys)["auc"]
    assert auc == pytest.approx(float(roc_auc(y, fitted.decision_function(X))), abs=1e-12)


# ------------------------------------------------------------------------------ integrity

CHUNK_KEYS = [*(f"X/c/{i}/0" for i in range(4)), *(f"y/c/{i}" for i in range(4))]


def _data(n=240, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    return X, y


@pytest.mark.parametrize("damage", ["deleted", "overwritten", "swapped"])
def test_a_damaged_chunk_on_s3_is_an_error_naming_it(s3, monkeypatch, damage,
                                                     dask_cluster_client):
    """As tests/test_integrity.py checks on local and memory:// stores, on S3: a chunk object
    deleted, overwritten with other bytes of its size, or swapped with another chunk is a
    StoreIntegrityError naming it, found when the store is opened (a missing object) or on
    the worker that reads it (the checksum the commit recorded for its position). The store
    is opened with ``storage_options=`` only: nothing in this process's configuration."""
    X, y = _data()
    url = f"{_root(s3)}/ds.zarr"
    _with_options(monkeypatch, s3)
    ingest_array(X, y, url, chunk_rows=60)
    monkeypatch.delitem(fsspec.config.conf, "s3")
    ds = open_dataset(url, storage_options=s3.storage_options)
    np.testing.assert_array_equal(ds.X.compute(), X)  # on the workers, no credentials there
    fs, base = s3.filesystem(), f"{s3.bucket}/{s3.prefix}/ds.zarr/"
    if damage == "deleted":
        fs.rm(base + "X/c/1/0")
        message = "chunk X/c/1/0 is missing"
        with pytest.raises(StoreIntegrityError, match=message):
            open_dataset(url, storage_options=s3.storage_options)
    elif damage == "overwritten":
        size = fs.size(base + "y/c/2")
        fs.pipe(base + "y/c/2", bytes(range(size)))
        message = "chunk y/c/2 holds data written at no position of it"
    else:  # two chunks of equal size exchanged: each passes its own checksum
        blobs = {k: fs.cat(base + k) for k in CHUNK_KEYS}
        a, b = next((a, b) for a, b in itertools.combinations(CHUNK_KEYS, 2)
                    if len(blobs[a]) == len(blobs[b]) and blobs[a] != blobs[b])
        fs.pipe(base + a, blobs[b])
        fs.pipe(base + b, blobs[a])
        message = rf"chunk ({a}|{b}) holds the data written as chunk ({a}|{b})"
    with pytest.raises(StoreIntegrityError, match=message):
        dask.compute(ds.X, ds.y)  # opened before the damage: each read checks its chunk


def test_a_damaged_model_on_s3_is_an_error_naming_the_chunk(s3, monkeypatch, capsys):
    X, y = _data()
    url = f"{_root(s3)}/m.zarr"
    _with_options(monkeypatch, s3)
    save_model(PairwiseHingeSGD(random_state=0, n_epochs=1).fit(X, y), url)
    fs = s3.filesystem()
    key = f"{s3.bucket}/{s3.prefix}/m.zarr/coef_/c/0"
    fs.pipe(key, bytes(fs.size(key)))
    with pytest.raises(StoreIntegrityError, match="chunk coef_/c/0 holds data written at no"):
        load_model(url)
    fs.rm(key)
    assert main(["evaluate", url, url]) == 1
    assert "chunk coef_/c/0 is missing" in capsys.readouterr().err


# ---------------------------------------------------------------------- concurrent writers


def _begin(url: str, value: float, overwrite: bool = False):
    """A writer of a small dataset store at ``url`` (X all ``value``), not yet committed."""
    pending = begin_store(url, kind="dataset", overwrite=overwrite)
    create_array(pending.group, "X", shape=(8, 2), chunks=(4, 2), dtype=np.float32)[...] = value
    create_array(pending.group, "y", shape=(8,), chunks=(4,), dtype=np.int8)[...] = [1, -1] * 4
    return pending


def _hidden(s3) -> list[str]:
    """What writers left beside the stores (their staged partial stores)."""
    return [p for p in s3.filesystem().find(f"{s3.bucket}/{s3.prefix}")
            if "/." in p.split(s3.prefix, 1)[1]]


def test_two_writers_of_one_s3_store_one_wins_the_other_says_why(s3, monkeypatch):
    """Object storage has no rename: each writer stages its store under its own hidden
    name, and the commit copies it into place. The first commit wins; the second finds the
    store there and replaces nothing (without overwrite=True), and neither leaves anything
    behind."""
    _with_options(monkeypatch, s3)
    url = f"{_root(s3)}/out.zarr"
    first, second = _begin(url, 1.0), _begin(url, 2.0)  # both started before either commits
    first.commit()
    with pytest.raises(FileExistsError, match="appeared while this write ran"):
        second.commit()
    np.testing.assert_array_equal(open_dataset(url).X.compute(), 1.0)
    assert _hidden(s3) == []
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        _begin(url, 3.0)
    with pytest.raises(FileExistsError, match="already exists"):
        with writing_store(url, kind="model"):
            pass
    _begin(url, 3.0, overwrite=True).commit()  # asked for: replaces
    np.testing.assert_array_equal(open_dataset(url).X.compute(), 3.0)
    assert _hidden(s3) == []


def test_a_writer_restarting_the_store_never_commits_the_other_writers_chunks(s3, monkeypatch):
    """The reported case: the second writer (overwrite=True) restarted the store in place
    while the first one's chunks were still landing; its commit recorded X as 2, 2, 2, 2,
    1, 1, 1, 1 and the store opened as complete. Each writer now has its own staged copy."""
    _with_options(monkeypatch, s3)
    url = f"{_root(s3)}/out.zarr"
    first = begin_store(url, kind="dataset")
    X1 = create_array(first.group, "X", shape=(8, 2), chunks=(4, 2), dtype=np.float32)
    y1 = create_array(first.group, "y", shape=(8,), chunks=(4,), dtype=np.int8)
    _begin(url, 2.0, overwrite=True).commit()
    X1[...], y1[...] = 1.0, [1, -1] * 4  # the first writer's chunks land after that
    with pytest.raises(FileExistsError, match="appeared while this write ran"):
        first.commit()
    np.testing.assert_array_equal(open_dataset(url).X.compute(), 2.0)
    assert _hidden(s3) == []


def test_a_chunk_of_another_writer_is_never_committed_as_part_of_a_store(s3, monkeypatch):
    """The case the write-in-place protocol lost: a second writer (overwrite=True) restarted
    the store while the first one's chunks were still landing, and its commit recorded the
    mix as complete. Now each writer records the checksums of the chunks it staged; a chunk
    the other writer puts at the target during the commit fails the commit's check (the
    store is left incomplete), and one put there after the check fails every read."""
    _with_options(monkeypatch, s3)
    url, fs = f"{_root(s3)}/out.zarr", s3.filesystem()
    chunk = f"{s3.bucket}/{s3.prefix}/out.zarr/X/c/1/0"
    first, second = _begin(url, 1.0), _begin(url, 2.0, overwrite=True)
    first.commit()
    theirs = fs.cat(chunk)
    check = _store_write._published_differs

    def the_other_writer_meanwhile(*args):
        fs.pipe(chunk, theirs)
        return check(*args)

    monkeypatch.setattr(_store_write, "_published_differs", the_other_writer_meanwhile)
    with pytest.raises(FileExistsError, match=r"another writer wrote there while this write "
                       r"was being committed \(chunk X/c/1/0 is not the one this write "
                       r"recorded\); it was left incomplete"):
        second.commit()
    with pytest.raises(ValueError, match="is incomplete"):
        open_dataset(url)
    monkeypatch.setattr(_store_write, "_published_differs", check)
    _begin(url, 3.0, overwrite=True).commit()
    ds = open_dataset(url)
    fs.pipe(chunk, theirs)  # after the commit's check
    with pytest.raises(StoreIntegrityError, match="chunk X/c/1/0 holds data written at no "
                       "position of it"):
        ds.X.compute()
    assert _hidden(s3) == []


def test_an_interrupted_write_to_s3_never_opens_as_complete(s3, monkeypatch):
    """A writer killed before its commit leaves nothing at the target; one killed while its
    commit copies leaves a store that opens as incomplete (never as complete), which only
    overwrite=True replaces."""
    _with_options(monkeypatch, s3)
    url = f"{_root(s3)}/out.zarr"
    _begin(url, 1.0)  # its process dies: never committed
    with pytest.raises(FileNotFoundError, match="no store at"):
        open_dataset(url)

    class KilledHalfway:
        """The filesystem of the commit, whose process dies halfway through the copy."""

        def __init__(self, fs):
            self.fs = fs

        def __getattr__(self, name):
            return getattr(self.fs, name)

        def copy(self, sources, targets, **kwargs):
            half = len(sources) // 2
            self.fs.copy(sources[:half], targets[:half], **kwargs)
            raise KeyboardInterrupt

    filesystem = _store_write.url_filesystem
    monkeypatch.setattr(_store_write, "url_filesystem",
                        lambda *a, **k: (KilledHalfway(filesystem(*a, **k)[0]),
                                         filesystem(*a, **k)[1]))
    with pytest.raises(KeyboardInterrupt):
        _begin(url, 1.0).commit()
    monkeypatch.setattr(_store_write, "url_filesystem", filesystem)
    with pytest.raises(ValueError, match="is incomplete"):
        open_dataset(url)
    with pytest.raises(FileExistsError, match="already exists"):
        _begin(url, 2.0)
    _begin(url, 2.0, overwrite=True).commit()
    np.testing.assert_array_equal(open_dataset(url).X.compute(), 2.0)


def test_two_concurrent_ingests_to_s3_one_wins_one_says_why(s3, monkeypatch, tmp_path):
    """Two ingests of one file race for one s3:// store (two threads: each writer stages
    under its own name, so a process of its own changes nothing on the bucket's side): one
    writes it and the other says why (or, when their checks interleave, both commit the same
    rows and the later store is left, whole); nothing is left beside it."""
    from concurrent.futures import ThreadPoolExecutor

    X, y = _data(n=2000, d=10)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt="%.6g")
    url = f"{_root(s3)}/o.zarr"
    _with_options(monkeypatch, s3)

    def one_ingest(_):
        try:
            ingest(csv, url, chunk_rows=250)
        except FileExistsError as exc:
            return str(exc)
        return None

    with dask.config.set(scheduler="synchronous"), ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(one_ingest, range(2)))
    assert sorted(outcomes, key=bool)[0] is None, outcomes  # one wrote it
    refused = [o for o in outcomes if o is not None]
    # usually the other is refused; when both pass the existence check before either
    # copies, both commits go through (the check and the copy are not one atomic step on
    # object storage: docs/cluster.md) and the later one's store is the one left, whole
    said = ("already exists", "appeared while", "another writer committed")
    assert all(any(why in r for why in said) for r in refused), outcomes
    np.testing.assert_allclose(open_dataset(url).X.compute(), X, rtol=1e-5)
    assert _hidden(s3) == []


# ---------------------------------------------------------------- filesystem not installed


def test_a_url_whose_filesystem_is_not_installed_is_one_error_naming_the_package(
        monkeypatch, capsys):
    """Not "no such file" or a traceback from inside fsspec: the package to install."""
    from fsspec.registry import _registry

    X, y = _data()
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"gs://b/ds\.zarr: gs:// URLs need the package "
                           r"gcsfs, which is not installed: pip install gcsfs$"):
            open_dataset("gs://b/ds.zarr")
    monkeypatch.setitem(sys.modules, "s3fs", None)  # s3fs not installed
    monkeypatch.delitem(_registry, "s3", raising=False)
    message = r"s3:// URLs need the package s3fs, which is not installed: pip install s3fs"
    with pytest.raises(ImportError, match=message):
        ingest_array(X, y, "s3://b/ds.zarr")
    for argv in (["evaluate", "s3://b/m.zarr", "s3://b/t.zarr"],
                 ["split", "s3://b/ds.zarr", "tr.zarr", "te.zarr"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert f"daskauc {argv[0]}: error: s3://b/" in err and "pip install s3fs" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(ValueError, match=r"unknown URL scheme nosuch://"):
        open_dataset("nosuch://b/ds.zarr")


def test_a_parquet_table_on_s3_ingests_with_explicit_options_and_scores_to_parquet(s3):
    """The Python API with the options given only as ``storage_options`` (nothing in
    fsspec's configuration or the environment): a Parquet directory in the bucket ingested
    by name (label, positive class, a dropped id column), split, fitted and evaluated on the
    bucket's stores, and the same table scored back to a Parquet directory in the bucket,
    keyed by its id column. (The whole pipeline with embedding is the command line's test
    below, equal to the same run on local stores.)"""
    import pandas as pd

    from daskauc import LSAUC, write_scores

    opts = s3.storage_options
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"tx": np.arange(900) + 5_000, "a": rng.normal(size=900),
                       "b": rng.normal(size=900)})
    df["status"] = np.where(df.a - df.b + 0.3 * rng.normal(size=900) > 0, "fraud", "ok")
    table = f"{_root(s3)}/table"
    for k in range(3):
        with fsspec.open(f"{table}/part-{k}.parquet", "wb", **opts) as f:
            df.iloc[k * 300:(k + 1) * 300].to_parquet(f, row_group_size=100)
    store = f"{_root(s3)}/tx.zarr"
    ds = ingest(table, store, label="status", positive="fraud", drop=["tx"], chunk_rows=200,
                storage_options=opts)
    assert ds.attrs["feature_names"] == ["a", "b"] and ds.attrs["classes"] == [["ok"], ["fraud"]]
    np.testing.assert_array_equal(ds.X.compute(), df[["a", "b"]].to_numpy(np.float32))
    train, test = split_store(store, f"{_root(s3)}/train.zarr", f"{_root(s3)}/test.zarr",
                              random_state=0, storage_options=opts)
    model = LSAUC().fit(train.X, train.y)
    assert 0.8 < roc_auc(test.y, model.decision_function(test.X)) <= 1.0
    out = f"{_root(s3)}/scores.parquet"
    written = write_scores(model, table, out, id_column="tx", storage_options=opts)
    assert written.n_rows == 900
    fs = fsspec.filesystem("s3", **opts)
    got = pd.concat([pd.read_parquet(f"s3://{p}", filesystem=fs)
                     for p in sorted(fs.glob(out.split("://")[1] + "/part-*.parquet"))])
    np.testing.assert_array_equal(got["id"].to_numpy(), df["tx"].to_numpy())
    np.testing.assert_allclose(got["decision_function"].to_numpy(),
                               model.decision_function(df[["a", "b"]].to_numpy()),
                               rtol=1e-12)


# ------------------------------------------- nothing there, no answer, workers without keys


def _closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _model(tmp_path) -> str:
    X, y = _data()
    path = str(tmp_path / "m.zarr")
    save_model(PairwiseHingeSGD(random_state=0, n_epochs=1).fit(X, y), path)
    return path


def _one_error_line(command: str, err: str) -> str:
    """The command's one error line on stderr (progress lines may come before it), with no
    traceback."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith(f"daskauc {command}: error: "), err
    return errors[0]


@pytest.mark.parametrize("missing", ["key", "bucket"])
def test_nothing_at_an_s3_input_says_so_naming_the_url(s3, monkeypatch, tmp_path, capsys,
                                                       missing):
    """A key or prefix that does not exist, or a bucket that does not exist, as the input of
    ingest, open_dataset, a fit on a store path, write_scores and the command line's ingest
    and predict: one error naming the URL, and the bucket when it is the bucket that is
    missing; nothing written. Ingest said "a text file is read from a local path"."""
    _with_options(monkeypatch, s3)
    model, out = _model(tmp_path), tmp_path / "out.zarr"
    root = _root(s3) if missing == "key" else "s3://daskauc-no-such-bucket/p"
    said = ("the bucket daskauc-test exists" if missing == "key" else
            "the bucket daskauc-no-such-bucket does not exist")
    csv, store = f"{root}/nothing.csv", f"{root}/nothing.zarr"
    from daskauc import NSAUC, write_scores

    def scores():
        write_scores(model, store, out)

    for url, call in [(csv, lambda: ingest(csv, out)),
                      (f"{root}/nothing/", lambda: ingest(f"{root}/nothing/", out)),
                      (store, lambda: open_dataset(store)),
                      (store, lambda: NSAUC(n_landmarks=10).fit(store)),
                      (store, scores)]:
        with pytest.raises(FileNotFoundError) as caught:
            call()
        message = str(caught.value)
        assert url.rstrip("/") in message and "\n" not in message, message
        if call is not scores or missing == "bucket":  # scoring says "no input at URL"
            assert "nothing exists" in message and said in message, message
    for argv in (["ingest", csv, str(out)], ["predict", model, store, str(out)]):
        assert main(argv) == 1
        line = _one_error_line(argv[0], capsys.readouterr().err)
        assert argv[1 if argv[0] == "ingest" else 2] in line, line
        assert said in line or (argv[0] == "predict" and missing == "key"), line
        assert "local path" not in line, line
    assert not out.exists()


def test_an_unreachable_s3_endpoint_is_one_line_naming_it_at_once(s3, monkeypatch, tmp_path,
                                                                 capsys, request):
    """An endpoint that does not answer (a closed port), given in the storage options or as
    AWS_ENDPOINT_URL: one error naming it within a few seconds (botocore's retries took
    14.8 s, then three tracebacks), before anything is written; the command line prints the
    one line and exits with 1."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    options = {**s3.storage_options, "client_kwargs": {"endpoint_url": endpoint}}
    csv, model = _csv(tmp_path / "d.csv", n=60), _model(tmp_path)
    url, out = f"{_root(s3)}/ds.zarr", tmp_path / "out.zarr"
    from daskauc import NSAUC

    def refused(call) -> None:
        tic = time.perf_counter()
        with pytest.raises(ConnectionError) as caught:
            call()
        assert time.perf_counter() - tic < 5
        assert endpoint in str(caught.value) and url in str(caught.value), caught.value
        assert "\n" not in str(caught.value)

    refused(lambda: ingest(csv, url, storage_options=options))  # an output
    refused(lambda: ingest(f"{url}.csv", out, storage_options=options))  # an input
    refused(lambda: open_dataset(url, storage_options=options))
    tic = time.perf_counter()
    assert main(["ingest", csv, url, "--storage-options", json.dumps(options)]) == 1
    assert time.perf_counter() - tic < 5
    assert endpoint in _one_error_line("ingest", capsys.readouterr().err)
    import s3fs

    # s3fs keeps one filesystem per set of options: the environment's endpoint is read when
    # one is made
    s3fs.S3FileSystem.clear_instance_cache()
    request.addfinalizer(s3fs.S3FileSystem.clear_instance_cache)
    _with_environment(monkeypatch, s3)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    refused(lambda: NSAUC(n_landmarks=10).fit(url))
    tic = time.perf_counter()
    assert main(["predict", model, url, str(out)]) == 1
    assert time.perf_counter() - tic < 5
    assert endpoint in _one_error_line("predict", capsys.readouterr().err)
    assert not out.exists()


def _credentials_of_their_own() -> bool:
    """On a worker: credentials botocore would find without daskauc's options."""
    return any(name in os.environ for name in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE")) \
        or os.path.exists(os.path.expanduser("~/.aws"))


def test_workers_without_the_clients_credentials_are_one_line_naming_the_url(
        s3, monkeypatch, tmp_path, capsys, dask_cluster_client):
    """The credentials in this process's environment only: the workers of the cluster (started
    without them) cannot read the bucket. Opening a store, fitting on it and the command line
    with --scheduler say so in one line naming the URL, before any task runs; a store opened
    before the client existed says it from the worker's read, naming the store. It was a
    100-line NoCredentialsError traceback from the first worker that read a chunk."""
    from distributed import get_task_stream

    if any(dask_cluster_client.run(_credentials_of_their_own).values()):
        pytest.skip("the cluster's workers have credentials of their own (AWS_* or ~/.aws)")
    X, y = _data()
    url, model = f"{_root(s3)}/ds.zarr", _model(tmp_path)
    _with_environment(monkeypatch, s3)  # this process only
    with dask.config.set(scheduler="threads"):
        ingest_array(X, y, url, chunk_rows=60)
        ds = open_dataset(url)  # no client in sight: the workers are not asked
    said = (f"{url}: the Dask workers have no credentials for s3://", "this process has",
            "docs/cluster.md")
    with get_task_stream(dask_cluster_client) as tasks:
        for call in (lambda: open_dataset(url), lambda: PairwiseHingeSGD(n_epochs=1).fit(url)):
            with pytest.raises(PermissionError) as caught:
                call()
            assert all(s in str(caught.value) for s in said), caught.value
            assert "\n" not in str(caught.value)
        address = dask_cluster_client.scheduler.address
        with dask.config.set(scheduler="threads"):  # found when the command connects
            assert main(["--scheduler", address, "evaluate", model, url]) == 1
        line = _one_error_line("evaluate", capsys.readouterr().err)
        assert all(s in line for s in said), line
    assert tasks.data == []  # before any work
    with pytest.raises(PermissionError) as caught:
        ds.X.sum().compute()
    assert f"{url} array X" in str(caught.value), caught.value
    assert "no credentials for s3://" in str(caught.value), caught.value
    assert "docs/cluster.md" in str(caught.value), caught.value
