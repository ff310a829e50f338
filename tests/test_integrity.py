"""Nothing silently wrong, nothing lost: store integrity, paths, concurrent writers, leftovers,
tampered models and the small input errors. Each test reproduces a case that gave a silently
wrong answer (or lost work) before the fix, with real Zarr stores and, where a cluster matters,
real scheduler and worker processes."""

import itertools
import json
import os
import subprocess
import sys

import dask
import numpy as np
import pytest
import zarr
from helpers import ExternalCluster, dataset_store

from daskauc import LSAUC, ModelFileError, RankSVM, StoreIntegrityError, load_model, save_model
from daskauc.cli import main
from daskauc.data import ingest_array, open_dataset
from daskauc.store.protocol import open_store
from daskauc.store.write import begin_store, create_array, writing_store


def _data(n=240, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    return X, y


@pytest.fixture(params=["zstd", "plain"])
def store(tmp_path, request):
    """A dataset store, compressed (read through Zarr) or of plain-bytes chunks (read
    straight from the files by daskauc.store.rawchunks): every check must hold for both."""
    X, y = _data()
    compressors = "auto" if request.param == "zstd" else None
    return dataset_store(tmp_path / "ds.zarr", X, y, rows=60, compressors=compressors), X, y


# ------------------------------------------------------------------------ store integrity


def test_a_missing_chunk_is_an_error_naming_it_not_rows_of_zeros(store):
    path, X, y = store
    os.remove(os.path.join(path, "X", "c", "2", "0"))
    with pytest.raises(StoreIntegrityError, match=r"chunk X/c/2/0 is missing"):
        open_dataset(path)
    with pytest.raises(StoreIntegrityError, match="X/c/2/0"):
        LSAUC().fit(path, y)  # a store path given to an estimator is verified the same way


def test_a_truncated_chunk_is_an_error(store):
    path, _, _ = store
    chunk = os.path.join(path, "y", "c", "1")
    size = os.path.getsize(chunk)
    with open(chunk, "r+b") as f:
        f.truncate(size - 7)
    with pytest.raises(StoreIntegrityError, match=rf"chunk y/c/1 has {size - 7} bytes, {size}"):
        open_dataset(path)


def test_a_chunk_lost_after_open_fails_the_read_on_the_worker(store):
    path, X, _ = store
    ds = open_dataset(path)
    np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)
    os.remove(os.path.join(path, "X", "c", "3", "0"))
    with pytest.raises(StoreIntegrityError, match=r"array X: chunk X/c/3/0 is missing"):
        ds.X.sum().compute(scheduler="threads")


def test_an_altered_chunk_fails_its_checksum(store):
    path, _, _ = store
    chunk = os.path.join(path, "X", "c", "1", "0")
    with open(chunk, "r+b") as f:  # same size, one byte flipped: only the checksum sees it
        f.seek(10)
        b = f.read(1)
        f.seek(10)
        f.write(bytes([b[0] ^ 0xFF]))
    ds = open_dataset(path)
    with pytest.raises(StoreIntegrityError, match="rows 60:120 failed its checksum"):
        ds.X.compute(scheduler="threads")


def test_a_store_moved_away_after_open_names_the_host_and_path(store, tmp_path):
    path, _, _ = store
    ds = open_dataset(path)
    os.rename(path, tmp_path / "elsewhere.zarr")
    with pytest.raises(StoreIntegrityError, match="does not exist on host .*same path"):
        ds.X.compute(scheduler="threads")


def test_all_zero_chunks_are_written_and_recorded(tmp_path):
    # Zarr skips all-fill chunks by default: absent chunks would then be legitimate, and a
    # deleted chunk undetectable; every daskauc array writes them
    X = np.zeros((100, 3), np.float32)
    X[:10] = 1
    y = np.r_[np.ones(50), -np.ones(50)].astype(np.int8)
    path = dataset_store(tmp_path / "z.zarr", X, y, rows=25)
    recorded = zarr.open_group(path).attrs["daskauc_chunks"]
    assert {f"X/c/{i}/0" for i in range(4)} <= set(recorded)
    os.remove(os.path.join(path, "X", "c", "3", "0"))  # an all-zero chunk
    with pytest.raises(StoreIntegrityError, match="X/c/3/0 is missing"):
        open_dataset(path)


def test_a_write_that_skipped_a_chunk_is_not_committed(tmp_path):
    with pytest.raises(StoreIntegrityError, match="left 1 chunk.* of array 'X' unwritten"):
        with writing_store(tmp_path / "s.zarr", kind="dataset") as g:
            z = create_array(g, "X", shape=(30, 2), chunks=(10, 2), dtype=np.float32)
            z[:20] = 1.0
    assert not (tmp_path / "s.zarr").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_a_store_without_chunk_records_warns(store):
    path, _, _ = store
    g = zarr.open_group(path, mode="r+")
    attrs = dict(g.attrs)
    del attrs["daskauc_chunks"]
    g.attrs.clear()
    g.attrs.update(attrs)
    with pytest.warns(UserWarning, match="without chunk records"):
        open_dataset(path)


CHUNK_KEYS = [*(f"X/c/{i}/0" for i in range(4)), *(f"y/c/{i}" for i in range(4))]


def _swap_equal_sized_chunks(get, put, keys):
    """Exchange the bytes of the first two chunk files among ``keys`` that have the same size
    and different contents: each still passes its own CRC32C, only its position is wrong."""
    blobs = {k: get(k) for k in keys}
    for a, b in itertools.combinations(keys, 2):
        if len(blobs[a]) == len(blobs[b]) and blobs[a] != blobs[b]:
            put(a, blobs[b])
            put(b, blobs[a])
            return a, b
    raise AssertionError(f"no two chunks of equal size among {keys}")


def _local_files(root):
    def get(key):
        with open(os.path.join(root, key), "rb") as f:
            return f.read()

    def put(key, data):
        with open(os.path.join(root, key), "wb") as f:
            f.write(data)

    return get, put


def _moved(a, b):
    # (as chunks ..., when another chunk holds the same bytes)
    return (rf"chunk ({a}|{b}) holds the data written as chunks? [^(]*({a}|{b}).* "
            r"\(chunk files swapped")


def test_the_commit_records_each_chunks_size_and_checksum(store):
    path, _, _ = store
    recorded = zarr.open_group(path).attrs["daskauc_chunks"]
    assert set(recorded) == set(CHUNK_KEYS)
    for key in CHUNK_KEYS:
        data = _local_files(path)[0](key)
        assert recorded[key] == [len(data), int.from_bytes(data[-4:], "little")]


def test_swapped_chunks_are_an_error_naming_them(store):
    """Two chunk files of equal size exchanged (X no longer lines up with y): each passes its
    own checksum, and the store's sizes all match, so only the position binding sees it."""
    path, X, y = store
    before = open_dataset(path)
    np.testing.assert_array_equal(before.X.compute(scheduler="threads"), X)  # checked, cached
    np.testing.assert_array_equal(before.y.compute(scheduler="threads"), y)
    a, b = _swap_equal_sized_chunks(*_local_files(path), CHUNK_KEYS)
    for ds in (before, open_dataset(path)):  # opened before the swap, and after it
        with pytest.raises(StoreIntegrityError, match=rf"{path} array [Xy]: {_moved(a, b)}"):
            dask.compute(ds.X, ds.y, scheduler="threads")


def test_swapped_chunks_on_object_storage_are_an_error():
    import fsspec

    X, y = _data()
    url, base = "memory://daskauc-swap/ds.zarr", "/daskauc-swap/ds.zarr/"
    fs = fsspec.filesystem("memory")
    try:
        with dask.config.set(scheduler="threads"):
            ingest_array(X, y, url, overwrite=True, chunk_rows=60)
        a, b = _swap_equal_sized_chunks(lambda k: fs.cat(base + k),
                                        lambda k, v: fs.pipe(base + k, v), CHUNK_KEYS)
        ds = open_dataset(url)
        with pytest.raises(StoreIntegrityError, match=_moved(a, b)):
            dask.compute(ds.X, ds.y, scheduler="threads")
    finally:
        fs.rm("/daskauc-swap", recursive=True)


def test_swapped_model_chunks_are_an_error(tmp_path):
    from daskauc import PairwiseHingeSGD

    X, y = _data()
    path = tmp_path / "m.zarr"
    save_model(PairwiseHingeSGD(n_epochs=2).fit(X, y), path)  # coef_ and state vectors
    keys = sorted(zarr.open_group(path).attrs["daskauc_chunks"])
    a, b = _swap_equal_sized_chunks(*_local_files(path), keys)
    with pytest.raises(StoreIntegrityError, match=_moved(a, b)):
        load_model(path)


def test_a_store_with_size_only_chunk_records_opens_with_a_warning(store):
    """Stores committed before checksums were recorded: sizes are still checked; a swap
    cannot be seen, which the warning says."""
    path, X, _ = store
    g = zarr.open_group(path, mode="r+")
    g.attrs["daskauc_chunks"] = {k: v[0] for k, v in g.attrs["daskauc_chunks"].items()}
    with pytest.warns(UserWarning, match="chunk sizes only.*swapped"):
        ds = open_dataset(path)
    np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)
    g.attrs["daskauc_chunks"] = {**g.attrs["daskauc_chunks"], "X/c/0/0": "a lot"}
    with pytest.raises(StoreIntegrityError, match="record of chunk X/c/0/0 is malformed"):
        open_dataset(path)


def test_a_symlink_in_a_model_store_is_refused(tmp_path):
    """A chunk file replaced by a link to a file outside the store, the record edited to
    match it: load_model read that file into coef_. No link is accepted inside a store."""
    X, y = _data()
    path, other = tmp_path / "m.zarr", tmp_path / "other.zarr"
    save_model(LSAUC().fit(X, y), path)
    save_model(LSAUC().fit(X, -y), other)
    outside = tmp_path / "outside.bin"
    os.rename(other / "coef_" / "c" / "0", outside)
    os.remove(path / "coef_" / "c" / "0")
    os.symlink(outside, path / "coef_" / "c" / "0")
    data = outside.read_bytes()
    _edit_attrs(path, lambda a: a["daskauc_chunks"].update(
        {"coef_/c/0": [len(data), int.from_bytes(data[-4:], "little")]}))
    with pytest.raises(StoreIntegrityError, match=r"coef_/c/0 is a symbolic link .*outside"):
        load_model(path)


@pytest.mark.parametrize("link", ["X/c/1/0", "y", "zarr.json"])
def test_a_symlink_in_a_dataset_store_is_refused(store, tmp_path, link):
    import shutil

    path, _, _ = store
    inside, outside = os.path.join(path, link), tmp_path / "outside"
    (shutil.copytree if os.path.isdir(inside) else shutil.copy)(inside, outside)
    (shutil.rmtree if os.path.isdir(inside) else os.remove)(inside)
    os.symlink(outside, inside)
    with pytest.raises(StoreIntegrityError, match=rf"{path}: {link} is a symbolic link"):
        open_dataset(path)


def test_a_missing_model_chunk_is_an_error_not_auc_one_half(store, tmp_path, capsys):
    path, X, y = store
    model = tmp_path / "m.zarr"
    save_model(LSAUC().fit(X, y), model)
    os.remove(model / "coef_" / "c" / "0")
    assert main(["evaluate", str(model), path]) == 1
    out, err = capsys.readouterr()
    assert "chunk coef_/c/0 is missing" in err and '"auc"' not in out


# ------------------------------------------------------------------------------- paths


@pytest.mark.slow  # starts processes
def test_relative_paths_reach_workers_started_elsewhere(tmp_path, monkeypatch, capsys):
    """The reported case: ``daskauc --scheduler ... fit rel.zarr m`` with workers started in
    another directory read no chunks and said "y has a single class ([0])"."""
    X, y = _data(n=300)
    here = tmp_path / "client"
    here.mkdir()
    monkeypatch.chdir(here)
    dataset_store("rel.zarr", X, y, rows=100)
    cluster = ExternalCluster(tmp_path, cwd=tmp_path / "workers")
    try:
        with dask.config.set(scheduler=cluster.client):
            ds = open_dataset("rel.zarr")
            assert ds.path == str(here / "rel.zarr")
            np.testing.assert_allclose(ds.X.sum(axis=0).compute(), X.sum(axis=0), rtol=1e-5)
        assert main(["--scheduler", cluster.address, "fit", "rel.zarr", "m.zarr",
                     "--method", "lsauc"]) == 0
        expected = LSAUC().fit(X, y).coef_
        np.testing.assert_allclose(load_model("m.zarr").coef_, expected, rtol=1e-5, atol=1e-7)
    finally:
        cluster.close()


def test_file_urls_and_home_relative_paths_resolve_to_the_same_store(tmp_path, monkeypatch):
    X, y = _data()
    monkeypatch.setenv("HOME", str(tmp_path))
    ingest_array(X, y, f"file://{tmp_path}/a.zarr")
    for spelling in (f"file://{tmp_path}/a.zarr", "~/a.zarr", str(tmp_path / "a.zarr")):
        ds = open_dataset(spelling)
        assert ds.path == str(tmp_path / "a.zarr")
        np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)


def test_fsspec_memory_urls_work_end_to_end():
    X, y = _data()
    url = "memory://daskauc-test/ds.zarr"
    with dask.config.set(scheduler="threads"):
        ingest_array(X, y, url, overwrite=True, chunk_rows=60)
        ds = open_dataset(url)
        np.testing.assert_array_equal(ds.X.compute(), X)
        model = RankSVM(C=1.0).fit(ds.X, ds.y)
        save_model(model, "memory://daskauc-test/m.zarr", overwrite=True)
        back = load_model("memory://daskauc-test/m.zarr")
    np.testing.assert_array_equal(back.coef_, model.coef_)
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.rm("/daskauc-test/ds.zarr/X/c/1/0")
    with pytest.raises(StoreIntegrityError, match="X/c/1/0 is missing"):
        open_dataset(url)
    fs.rm("/daskauc-test", recursive=True)


def _key_names(arr):
    return {k[0] for k in dask.core.flatten(arr.__dask_keys__())}


@pytest.mark.timeout(240)  # the regression hung the client for ever: it must fail instead
def test_a_store_path_that_is_not_utf8_computes_on_threads_and_on_a_cluster(tmp_path):
    """Task keys are msgpack'ed: a key holding the path's lone surrogate killed every worker
    (UnicodeEncodeError) and the client waited for ever."""
    from distributed import Client, LocalCluster

    X, y = _data()
    path = dataset_store(tmp_path / os.fsdecode(b"lat\xe9n1.zarr"), X, y, rows=60)
    ds = open_dataset(path)
    for name in (*_key_names(ds.X), *_key_names(ds.y)):
        name.encode("utf-8")  # no user text in a key
    np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        got = [f.result(timeout=60) for f in client.compute([ds.X.sum(axis=0), ds.y])]
    np.testing.assert_allclose(got[0], X.sum(axis=0), rtol=1e-5)
    np.testing.assert_array_equal(got[1], y)


def test_task_keys_are_tokens_of_the_store_not_of_its_name(tmp_path):
    X, y = _data()
    path = dataset_store(tmp_path / "ds.zarr", X, y, rows=60)
    first, again = open_dataset(path), open_dataset(path)
    assert first.X.name.startswith("daskauc-zarr-X-") and first.y.name.startswith("daskauc-zarr-y-")
    assert "ds.zarr" not in first.X.name
    assert (first.X.name, first.y.name) == (again.X.name, again.y.name)  # same store, same keys
    with writing_store(path, kind="dataset", overwrite=True) as g:  # the same data, rewritten
        create_array(g, "X", shape=X.shape, chunks=(60, X.shape[1]), dtype=X.dtype)[...] = X
        create_array(g, "y", shape=y.shape, chunks=(60,), dtype=np.int8)[...] = y
    rewritten = open_dataset(path)
    assert rewritten.X.name != first.X.name and rewritten.y.name != first.y.name
    np.testing.assert_array_equal(rewritten.X.compute(scheduler="threads"), X)


# ----------------------------------------------------------------- writers and leftovers


def test_a_second_concurrent_writer_does_not_replace_the_first(tmp_path):
    target = tmp_path / "out.zarr"
    first = begin_store(target, kind="dataset")
    second = begin_store(target, kind="dataset")  # both started before either committed
    for pending, value in ((first, 1.0), (second, 2.0)):
        create_array(pending.group, "X", shape=(4, 2), chunks=(4, 2), dtype=np.float32)[...] = value
    first.commit()
    with pytest.raises(FileExistsError, match="appeared while this write ran"):
        second.commit()
    assert open_store(target)["X"][0, 0] == 1.0
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    third = begin_store(target, kind="dataset", overwrite=True)  # asked for: replaces
    create_array(third.group, "X", shape=(4, 2), chunks=(4, 2), dtype=np.float32)[...] = 3.0
    third.commit()
    assert open_store(target)["X"][0, 0] == 3.0


@pytest.mark.slow  # starts processes
def test_two_concurrent_cli_ingests_one_wins_one_says_why(tmp_path):
    X, y = _data(n=20000, d=20)
    src = tmp_path / "d.csv"
    np.savetxt(src, np.column_stack([X, y]), delimiter=",", fmt="%.5g")
    cmd = [sys.executable, "-m", "daskauc.cli", "ingest", str(src), str(tmp_path / "o.zarr"),
           "--chunk-rows", "500"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    # without --overwrite the second either finds the store at its start or at its commit
    assert sorted(p.returncode for p in procs) == [0, 1], outs
    assert any("already exists" in err or "appeared while" in err for _, err in outs)
    np.testing.assert_allclose(open_dataset(tmp_path / "o.zarr").X.compute(), X, rtol=1e-4)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


@pytest.mark.slow  # starts processes
def test_leftovers_of_killed_writers_are_removed_by_the_next_write(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    host = socket.gethostname()
    stale = [tmp_path / f".out.zarr.partial-{host}-{dead.pid}-deadbeef",
             tmp_path / f".daskauc-spill-{host}-{dead.pid}-deadbeef"]
    live = tmp_path / f".out.zarr.partial-{host}-{os.getpid()}-cafecafe"  # a running writer
    other_host = tmp_path / f".out.zarr.partial-otherhost-{dead.pid}-cafecafe"
    for p in (*stale, live, other_host):
        (p / "X").mkdir(parents=True)
    X, y = _data()
    src = tmp_path / "d.csv"
    np.savetxt(src, np.column_stack([X, y]), delimiter=",", fmt="%.6g")
    from daskauc import ingest

    ingest(src, tmp_path / "out.zarr")
    left = sorted(p for p in os.listdir(tmp_path) if p.startswith("."))
    assert left == sorted([live.name, other_host.name])


@pytest.mark.slow  # starts processes
def test_a_replace_killed_between_its_renames_is_undone(store, tmp_path):
    """overwrite=True moves the old store aside, then the new one in: a kill in between left
    no store at the path. The next open (or write) moves the old one back."""
    import socket

    path, X, _ = store
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    aside = tmp_path / f".ds.zarr.partial-{socket.gethostname()}-{dead.pid}-0badf00d.old"
    os.rename(path, aside)
    with pytest.warns(UserWarning, match="restored the previous store"):
        ds = open_dataset(path)
    np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)
    assert not aside.exists()


def _write_small_store(target, overwrite=False):
    with writing_store(target, kind="dataset", overwrite=overwrite) as g:
        create_array(g, "X", shape=(4, 2), chunks=(4, 2), dtype=np.float32)[...] = 1.0


def test_overwriting_a_regular_file_leaves_nothing_behind(tmp_path):
    """The replaced file went to a hidden ``.old`` that rmtree could not remove (silently),
    and a later open restored it over the path. A file is not daskauc's to replace: refused
    before the write, untouched; one that appears while the write runs (overwrite asked) is
    replaced without a remnant."""
    from daskauc.store.write import begin_store

    target = tmp_path / "out.zarr"
    target.write_text("a file, not a store")
    with pytest.raises(FileExistsError, match="out.zarr is a file; daskauc replaces only"):
        _write_small_store(target, overwrite=True)
    assert target.read_text() == "a file, not a store"
    target.unlink()
    pending = begin_store(target, kind="dataset", overwrite=True)
    create_array(pending.group, "X", shape=(4, 2), chunks=(4, 2), dtype=np.float32)[...] = 1.0
    target.write_text("appeared while the write ran")
    pending.commit()
    assert open_store(target)["X"][0, 0] == 1.0
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


@pytest.mark.slow  # starts processes
def test_only_a_complete_store_is_ever_restored(tmp_path):
    import shutil
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    target = tmp_path / "out.zarr"
    aside = f".out.zarr.partial-{socket.gethostname()}-{dead.pid}-%s.old"
    (tmp_path / (aside % "0badf00d")).write_text("a file the old commit left aside")
    with pytest.raises(FileNotFoundError, match="no store at"):
        open_store(target)
    assert not target.exists()
    _write_small_store(tmp_path / "elsewhere.zarr")  # an incomplete store is not restored
    shutil.copytree(tmp_path / "elsewhere.zarr", tmp_path / (aside % "0badd1r0"))
    _edit_attrs(tmp_path / (aside % "0badd1r0"), lambda a: a.pop("daskauc_complete"))
    with pytest.raises(FileNotFoundError, match="no store at"):
        open_store(target)
    _write_small_store(target)  # the next write removes what the dead writer left
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_cli_checks_outputs_before_any_work(tmp_path, capsys):
    X, y = _data()
    path = dataset_store(tmp_path / "ds.zarr", X, y, rows=60)
    model = tmp_path / "m.zarr"
    save_model(LSAUC().fit(X, y), model)
    before = open(model / "zarr.json").read()
    capsys.readouterr()
    assert main(["fit", path, str(model), "--method", "nsauc"]) == 1
    out, err = capsys.readouterr()
    assert "already exists" in err and "fit nsauc" not in out and "dashboard" not in out
    assert open(model / "zarr.json").read() == before
    assert main(["embed", path, str(model)]) == 1  # embed: before the scaler and k-means
    out, err = capsys.readouterr()
    assert "already exists" in err and "k-means" not in out and "dashboard" not in out
    assert main(["fit", str(tmp_path / "nope.zarr"), str(tmp_path / "m2.zarr")]) == 1
    out, err = capsys.readouterr()
    assert "no store at" in err and "dashboard" not in out


# ------------------------------------------------------------------------ tampered models


@pytest.fixture
def model_path(tmp_path):
    X, y = _data()
    path = tmp_path / "m.zarr"
    save_model(RankSVM().fit(X, y), path)
    return path


def _edit_attrs(path, fn, where=""):
    meta = path / where / "zarr.json"
    doc = json.loads(meta.read_text())
    fn(doc["attributes"])
    meta.write_text(json.dumps(doc))


def test_a_tampered_shape_is_refused_before_allocating(model_path):
    meta = model_path / "coef_" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["shape"] = [300_000_000]
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [300_000_000]
    meta.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=r"declares shape \(300000000,\)"):
        load_model(model_path)


@pytest.mark.parametrize("edit, message", [
    (lambda a: a["fitted"].update(decision_function=1), "would shadow"),
    (lambda a: a["fitted"].update(__class__=1), "not a fitted attribute name"),
    (lambda a: a.pop("params"), "'params' is missing"),
    (lambda a: a.update({"class": "Dataset"}), "not a daskauc estimator"),
    (lambda a: a.update({"class": "os.system"}), "not a daskauc estimator"),
    (lambda a: a["params"].update(evil=1), r"no parameter\(s\) \['evil'\]"),
    (lambda a: a.update(children=["embedding_"]), "sub-estimator 'embedding_' is missing"),
])
@pytest.mark.slow  # starts processes
def test_a_tampered_model_is_a_clear_error(model_path, edit, message, capsys):
    _edit_attrs(model_path, edit)
    with pytest.raises(ModelFileError, match=message):
        load_model(model_path)
    capsys.readouterr()
    assert main(["evaluate", str(model_path), str(model_path)]) == 1  # one line, no traceback
    err = capsys.readouterr().err
    assert err.startswith("daskauc evaluate: error:") and "Traceback" not in err


def _peak_bytes(fn):
    """Peak bytes traced (numpy's buffers included) while ``fn()`` runs."""
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("dtype", ["U100000000", "<U100000000", "S100000000", "V100000000",
                                   "(100000000,)f8", "complex128", "f16", "M8[ns]",
                                   [["a", "f8"]], 5])
def test_a_declared_dtype_cannot_make_load_model_allocate(model_path, dtype):
    """The reported case: a 931-byte edit (``"dtype": "U100000000"``) made load_model allocate
    ~800 MB. Only the dtypes the writer produces are read, strings sized by their content."""
    _edit_attrs(model_path, lambda a: a["fitted"].update(
        x_={"__ndarray__": ["a", "b"], "dtype": dtype}))

    def load():
        with pytest.raises(ModelFileError, match=r"x_: an array of dtype .* daskauc does not"):
            load_model(model_path)

    assert _peak_bytes(load) < 50 * 2**20


@pytest.mark.parametrize("part, edit, message", [
    ("coef_", lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[100_000_000]),
     r"array 'coef_' declares shape \(5,\) in chunks of \(100000000,\)"),
    ("", lambda d: d["attributes"]["fitted"].update(
        x_={"__ndarray__": [[1], [2, 3]], "dtype": "int64"}), "x_: .*not an array of int64"),
    ("", lambda d: d["attributes"]["fitted"].update(
        x_={"__ndarray__": [10**30], "dtype": "int64"}), "x_: .*not an array of int64"),
    ("", lambda d: d["attributes"]["fitted"].update(x_=[[[[1]]] * 3] * 3),
     None),  # plain nested JSON is fine
], ids=["chunk-shape", "ragged", "overflow", "nested-json"])
def test_declared_layouts_that_the_writer_never_writes_are_refused(model_path, part, edit,
                                                                   message):
    meta = model_path / part / "zarr.json"
    doc = json.loads(meta.read_text())
    edit(doc)
    meta.write_text(json.dumps(doc))
    if message is None:
        assert load_model(model_path).x_ == [[[[1]]] * 3] * 3
        return
    with pytest.raises(ModelFileError, match=message):
        load_model(model_path)


@pytest.mark.parametrize("shape", [[-1, -5], [5.0], ["5"], 5, [2**40, 0]])
def test_a_tampered_solver_state_shape_is_a_model_file_error(tmp_path, shape):
    from daskauc import PairwiseHingeSGD

    X, y = _data()
    path = tmp_path / "m.zarr"
    save_model(PairwiseHingeSGD(n_epochs=1).fit(X, y), path)

    def edit(attrs):
        def walk(node):
            if isinstance(node, dict):
                if "__array__" in node and node["shape"] == [5]:
                    node["shape"] = shape
                    return True
                return any(walk(v) for v in node.values())
            return isinstance(node, list) and any(walk(v) for v in node)
        assert walk(attrs["tree"])

    _edit_attrs(path, edit, "solver_state")
    with pytest.raises(ModelFileError, match="solver-state array .* shape"):
        load_model(path)


def test_strings_and_names_round_trip_sized_by_their_content(tmp_path):
    import pandas as pd

    X, y = _data()
    frame = pd.DataFrame(X, columns=[f"feature {i}" for i in range(X.shape[1])])
    model = LSAUC().fit(frame, y)
    model.labels_ = np.array(["neg", "positive"], dtype="U20")  # saved as wide as "positive"
    save_model(model, tmp_path / "m.zarr")
    back = load_model(tmp_path / "m.zarr")
    assert back.feature_names_in_.dtype == object
    np.testing.assert_array_equal(back.feature_names_in_, model.feature_names_in_)
    assert back.labels_.dtype == np.dtype("<U8")
    np.testing.assert_array_equal(back.labels_, model.labels_)


# ----------------------------------------------------------------------- small input errors


def test_small_input_errors_say_what_is_wrong(tmp_path):
    import scipy.sparse as sp

    y = np.r_[np.ones(5), -np.ones(5)]
    with pytest.raises(ValueError, match="0 samples"):  # sparse rows: tests/test_sparse_store
        ingest_array(sp.random(0, 3, format="csr"), np.zeros(0), tmp_path / "a.zarr")
    with pytest.raises(ValueError, match="0 samples"):
        ingest_array(np.zeros((0, 3)), np.zeros(0), tmp_path / "b.zarr")
    from daskauc import PairwiseHingeSGD

    for est in (PairwiseHingeSGD(), RankSVM(), LSAUC()):
        with pytest.raises(ValueError, match="0 features"):
            est.fit(np.zeros((10, 0)), y)
        with pytest.raises(ValueError, match="0 samples"):
            est.fit(np.zeros((0, 3)), np.zeros(0))
    from daskauc import ingest

    with pytest.raises(IsADirectoryError, match="is a directory"):
        ingest(tmp_path, tmp_path / "c.zarr")


def test_a_store_with_a_foreign_child_says_so(tmp_path):
    """A store copied (or written by other software) inside another: the outer store said
    "is damaged ... restore or write it again" although its bytes were intact. It names the
    child, says its own data is intact, and opens again once the child is moved out."""
    import shutil

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), np.where(rng.normal(size=60) > 0, 1, -1)
    host, other = tmp_path / "host.zarr", tmp_path / "other.zarr"
    ingest_array(X, y, host, chunk_rows=20)
    save_model(LSAUC().fit(X, y), other)
    shutil.copytree(other, host / "ck.zarr")  # as a checkpoint written inside it did
    with pytest.raises(StoreIntegrityError) as err:
        open_dataset(host)
    message = str(err.value)
    assert "'ck.zarr', a daskauc model store" in message and "own data is intact" in message
    assert "damaged" not in message
    shutil.move(host / "ck.zarr", tmp_path / "moved.zarr")
    np.testing.assert_array_equal(open_dataset(host).X.compute(), X)
    zarr.open_group(host, mode="r+").create_array("extra", data=np.arange(5))  # not daskauc's
    with pytest.raises(StoreIntegrityError, match="holds 'extra', a Zarr array, which its "
                                                  "writer did not write"):
        open_dataset(host)
