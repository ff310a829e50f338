"""Batch scoring (``daskauc.write_scores``, ``daskauc predict``): the written scores are the
model's own ``decision_function`` / ``predict_proba`` on the same rows in memory, read back
with zarr and pyarrow directly; Parquet and Zarr in and out, the map applied on the fly, and
no output replaced unasked or left looking complete by a failed or killed run."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from helpers import ComputeCounter, damaged_parquet

from daskauc import (
    KMeansNystroem,
    PairwiseHingeSGD,
    StandardScaler,
    ingest_array,
    load_model,
    open_dataset,
    save_model,
    write_scores,
)
from daskauc.cli import main
from daskauc.store.protocol import open_store

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")

N, D, ROWS = 600, 4, 128  # 5 store chunks, the last of 88 rows
NAMES = [f"x{j}" for j in range(D)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A raw store, a linear model on it (saved), its embedding (written with a scaler) and a
    linear model fitted on the embedding (saved), and a model fitted on a DataFrame."""
    import dask

    tmp = tmp_path_factory.mktemp("scoring")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)).astype(np.float32)
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.2, 1, 0)
    p = lambda name: str(tmp / name)  # noqa: E731
    with dask.config.set(scheduler="threads"):
        raw = ingest_array(X, y, p("raw.zarr"), chunk_rows=ROWS)
        linear = PairwiseHingeSGD(n_epochs=2, random_state=0).fit(raw.X, raw.y)
        save_model(linear, p("linear"))
        scaler = StandardScaler().fit(raw.X)
        fmap = KMeansNystroem(24, kmeans_epochs=1, random_state=0).fit(scaler.transform(raw.X))
        emb = fmap.write_embedding(p("raw.zarr"), p("emb.zarr"), scaler=scaler)
        embedded = PairwiseHingeSGD(n_epochs=2, random_state=0).fit(emb.X, emb.y)
        save_model(embedded, p("embedded"))
        named = PairwiseHingeSGD(n_epochs=2, random_state=0).fit(
            pd.DataFrame(X, columns=NAMES), y)
    return {"X": X, "y": y, "p": p, "linear": load_model(p("linear")),
            "embedded": load_model(p("embedded")), "named": named,
            "Z": emb.X.compute()}


def _zarr(path):
    g = zarr.open_group(path, mode="r")
    return g, {k: g[k][:] for k in ("id", "decision_function", "probability")}


def _parquet(path):
    return pq.read_table(path).to_pandas()  # pyarrow skips _daskauc.json


def _expect(model, X):
    return model.decision_function(X), model.predict_proba(X)[:, 1]


def _assert_scores(d, p, model, X):
    d_ref, p_ref = _expect(model, X)
    np.testing.assert_allclose(d, d_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p, p_ref, rtol=1e-12, atol=1e-12)


def _listing(path):
    return sorted(os.listdir(os.path.dirname(path)))


def test_store_to_zarr_on_the_cluster(data, tmp_path, dask_cluster_client):
    out = str(tmp_path / "scores.zarr")
    done = write_scores(data["p"]("linear"), data["p"]("raw.zarr"), out)
    assert (done.n_rows, done.n_chunks, done.format) == (N, 5, "zarr")
    g, s = _zarr(out)
    _assert_scores(s["decision_function"], s["probability"], data["linear"], data["X"])
    np.testing.assert_array_equal(s["id"], np.arange(N))
    assert s["id"].dtype == np.int64
    assert all(g[k].chunks == (ROWS,) for k in ("id", "decision_function", "probability"))
    a = dict(g.attrs)
    assert a["n_rows"] == N and a["source"] == data["p"]("raw.zarr")
    assert a["model"] == data["p"]("linear") and a["model_class"] == "PairwiseHingeSGD"
    open_store(out, kind="scores")  # complete, its chunks as the commit recorded them
    assert _listing(out) == ["scores.zarr"]  # nothing hidden left beside it


def test_store_to_parquet_in_one_compute(data, tmp_path):
    out = str(tmp_path / "scores.parquet")
    with ComputeCounter() as counter:
        write_scores(data["linear"], data["p"]("raw.zarr"), out)
    assert counter.n == 1
    parts = sorted(f for f in os.listdir(out) if f.endswith(".parquet"))
    assert parts == [f"part-{i:05d}.parquet" for i in range(5)]  # one per input chunk
    assert [pq.ParquetFile(os.path.join(out, f)).metadata.num_rows for f in parts] == \
        [ROWS] * 4 + [N - 4 * ROWS]
    df = _parquet(out)
    assert list(df.columns) == ["id", "decision_function", "probability"]
    np.testing.assert_array_equal(df["id"], np.arange(N))
    _assert_scores(df["decision_function"], df["probability"], data["linear"], data["X"])
    record = json.load(open(os.path.join(out, "_daskauc.json")))
    assert record["daskauc_complete"] is True and record["n_rows"] == N
    assert _listing(out) == ["scores.parquet"]


def _parquet_input(path, X, y, *, ids, order=NAMES[::-1], extra=True, bad_row=None,
                   bad=np.inf):
    """Two Parquet files of row groups of 50 rows: the features ``x_j = X[:, j]`` in the
    ``order`` given (by default not the model's), an id column ``key`` and (``extra``) a
    label and a text column, which are no features; ``bad`` in ``x2`` at ``bad_row`` (NaN
    is written as a missing value)."""
    df = pd.DataFrame(X.astype(np.float64), columns=NAMES)[list(order)]
    df.insert(1, "key", ids)
    if extra:
        df["label"] = y
        df["note"] = [f"row {i}" for i in range(len(df))]
    if bad_row is not None:
        df.iloc[bad_row, df.columns.get_loc(NAMES[2])] = bad
    os.makedirs(path)
    half = len(df) // 2 + 7
    for i, part in enumerate((df.iloc[:half], df.iloc[half:])):
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False),
                       os.path.join(path, f"part.{i}.parquet"), row_group_size=50)
    return str(path)


@pytest.mark.parametrize("fmt", ["parquet", "zarr"])
def test_parquet_input_with_named_ids_and_other_columns(data, tmp_path, fmt):
    ids = np.array([f"customer-{i:04d}" for i in range(N)])
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=ids)
    out = str(tmp_path / f"scores.{fmt}")
    done = write_scores(data["named"], src, out, id_column="key", chunk_rows=70)
    assert done.n_chunks == -(-N // 70)  # ranges across row groups and files
    df = _parquet(out) if fmt == "parquet" else pd.DataFrame(_zarr(out)[1])
    np.testing.assert_array_equal(np.asarray(df["id"], dtype=str), ids)
    frame = pd.DataFrame(data["X"].astype(np.float64), columns=NAMES)
    _assert_scores(df["decision_function"], df["probability"], data["named"], frame)


def test_parquet_input_without_names_takes_the_numeric_columns(data, tmp_path):
    """A model fitted on an array: every numeric column but the id, in the file's order."""
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=np.arange(N) * 10,
                         order=NAMES, extra=False)
    out = str(tmp_path / "scores.parquet")
    write_scores(data["linear"], src, out, id_column="key")
    df = _parquet(out)
    np.testing.assert_array_equal(df["id"], np.arange(N) * 10)
    _assert_scores(df["decision_function"], df["probability"], data["linear"],
                   data["X"].astype(np.float64))
    # without id_column the id is a feature too, and the label: five columns for four
    with pytest.raises(ValueError, match=r"5 numeric columns besides the id .*'key'.*"
                       r"expects 4.*map="):
        write_scores(data["linear"], src, str(tmp_path / "other.parquet"))


def test_the_map_applied_on_the_fly_equals_embed_then_score(data, tmp_path):
    out = str(tmp_path / "scores.zarr")
    write_scores(data["p"]("embedded"), data["p"]("raw.zarr"), out, map=data["p"]("emb.zarr"))
    _, s = _zarr(out)
    d_ref, p_ref = _expect(data["embedded"], data["Z"])  # the written embedding, scored
    # the same float32 map (equal bit for bit here; in blocks of other sizes, to float32
    # rounding)
    np.testing.assert_allclose(s["decision_function"], d_ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(s["probability"], p_ref, rtol=0, atol=1e-5)
    # and from Parquet (float64 columns cast to the map's float32, as the store's)
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=np.arange(N), order=NAMES,
                         extra=False)
    out = str(tmp_path / "from-parquet.parquet")
    write_scores(data["embedded"], src, out, map=data["p"]("emb.zarr"), id_column="key")
    np.testing.assert_allclose(_parquet(out)["decision_function"], d_ref, rtol=0, atol=1e-5)


class _Recorder:
    """A fitted map that records the rows of every block it maps."""

    def __init__(self, fmap):
        self.fmap, self.rows = fmap, []
        self.n_components_, self.n_features_in_ = fmap.n_components_, fmap.n_features_in_
        # what the map's digest is made of (scoring checks it is the model's map)
        for name in ("landmarks_", "projection_", "gamma_", "scaler_mean_", "scaler_scale_"):
            if hasattr(fmap, name):
                setattr(self, name, getattr(fmap, name))

    def transform(self, X):
        self.rows.append(len(X))
        return self.fmap.transform(X)


def test_a_chunk_is_scored_in_blocks_of_its_widest_rows(data, tmp_path, monkeypatch):
    """A task maps its chunk in blocks whose embedding is about TARGET_CHUNK_BYTES in
    float64: here 24 columns x 8 bytes x 50 rows, so the store's chunks of 128 rows go in
    blocks of 50, 50 and 28; the scores are those of the whole chunk."""
    import dask

    from daskauc import _config, load_embedding_map

    fmap = _Recorder(load_embedding_map(data["p"]("emb.zarr")))
    monkeypatch.setattr(_config, "TARGET_CHUNK_BYTES", 24 * 8 * 50)
    out = str(tmp_path / "scores.zarr")
    with dask.config.set(scheduler="synchronous"):  # the recorder is this process's
        write_scores(data["embedded"], data["p"]("raw.zarr"), out, map=fmap)
    assert sorted(fmap.rows) == sorted([50, 50, 28] * 4 + [50, 38])  # chunks in any order
    d_ref, p_ref = _expect(data["embedded"], data["Z"])
    _, s = _zarr(out)
    np.testing.assert_allclose(s["decision_function"], d_ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(s["probability"], p_ref, rtol=0, atol=1e-5)


def test_width_mismatches_name_the_widths_and_the_option(data, tmp_path):
    p, out = data["p"], str(tmp_path / "s.zarr")
    with pytest.raises(ValueError, match=r"has 4 features but the model .* expects 24; .*"
                       r"map= \(--map EMBEDDING_STORE\)"):
        write_scores(p("embedded"), p("raw.zarr"), out)
    with pytest.raises(ValueError, match=r"24 features but the map .* takes 4 .*already "
                       r"embedded"):
        write_scores(p("embedded"), p("emb.zarr"), out, map=p("emb.zarr"))
    with pytest.raises(ValueError, match="gives 24 features but the model .* expects 4"):
        write_scores(p("linear"), p("raw.zarr"), out, map=p("emb.zarr"))
    with pytest.raises(ValueError, match="NAME.zarr .* or NAME.parquet"):
        write_scores(p("linear"), p("raw.zarr"), str(tmp_path / "scores.csv"))
    with pytest.raises(ValueError, match="also an input"):
        write_scores(p("linear"), p("raw.zarr"), p("raw.zarr"))
    assert not os.path.exists(out)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_an_existing_output_is_replaced_only_when_asked(data, tmp_path, fmt):
    p, out = data["p"], str(tmp_path / f"scores.{fmt}")
    write_scores(p("linear"), p("raw.zarr"), out, chunk_rows=300)
    read = (lambda: pd.DataFrame(_zarr(out)[1])) if fmt == "zarr" else (lambda: _parquet(out))
    before = read()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_scores(p("embedded"), p("raw.zarr"), out, map=p("emb.zarr"))
    pd.testing.assert_frame_equal(read(), before)  # nothing of the old output lost
    write_scores(p("embedded"), p("raw.zarr"), out, map=p("emb.zarr"), overwrite=True)
    after = read()
    assert len(after) == N and not np.allclose(after["decision_function"],
                                               before["decision_function"])
    assert _listing(out) == [os.path.basename(out)]
    # what is not daskauc's scores is never replaced, overwrite or not
    other = tmp_path / f"other.{fmt}"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="replaces only its own"):
        write_scores(p("linear"), p("raw.zarr"), str(other), overwrite=True)
    assert (other / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_a_failed_run_leaves_no_output(data, tmp_path, fmt):
    """An infinity in the last rows fails the pass after other chunks were written: nothing
    at the output, nothing hidden beside it, and an output being replaced is kept."""
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=np.arange(N),
                         bad_row=N - 3)
    out = str(tmp_path / f"scores.{fmt}")
    with pytest.raises(ValueError, match=rf"column 'x2' is inf in row {N - 3}"):
        write_scores(data["named"], src, out, chunk_rows=100, id_column="key")
    assert not os.path.exists(out) and _listing(out) == ["in"]
    write_scores(data["linear"], data["p"]("raw.zarr"), out)
    with pytest.raises(ValueError, match="is inf"):
        write_scores(data["named"], src, out, chunk_rows=100, id_column="key",
                     overwrite=True)
    df = pd.DataFrame(_zarr(out)[1]) if fmt == "zarr" else _parquet(out)
    _assert_scores(df["decision_function"], df["probability"], data["linear"], data["X"])


def test_a_failure_on_the_cluster_commits_nothing(data, tmp_path, dask_cluster_client):
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=np.arange(N), bad_row=5,
                         bad=np.nan)
    out = str(tmp_path / "scores.zarr")
    with pytest.raises(ValueError, match="column 'x2' has no value in row 5"):
        write_scores(data["named"], src, out, chunk_rows=100, id_column="key")
    with pytest.raises(FileNotFoundError):
        open_store(out)


_KILLED_CHILD = """
import sys, time, dask
dask.config.set(scheduler="threads")
import daskauc

class Slow:  # a map that takes its time, so the writer is killed in the middle
    n_components_ = n_features_in_ = 4
    def transform(self, X):
        time.sleep(0.2)
        return X

model = daskauc.load_model(sys.argv[1])
daskauc.write_scores(model, sys.argv[2], sys.argv[3], map=Slow(), chunk_rows=20)
"""


@pytest.mark.slow  # starts processes
def test_a_killed_writer_leaves_nothing_that_opens_as_complete(data, tmp_path):
    """SIGKILL in the middle of a Parquet output leaves only a hidden directory without the
    record, which the next write of the output removes (a Zarr output is written by the
    store protocol, whose kills tests/test_integrity.py covers)."""
    out = str(tmp_path / "scores.parquet")
    child = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD, data["p"]("linear"),
                              data["p"]("raw.zarr"), out], stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not any(n.startswith(".scores") and os.listdir(tmp_path / n)
                  for n in os.listdir(tmp_path)):  # the first part is written
        assert child.poll() is None and time.time() < deadline, child.stderr.read()
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not os.path.exists(out)  # only a hidden partial directory, which no reader opens
    left = [n for n in os.listdir(tmp_path) if n.startswith(".scores")]
    assert left and not os.path.exists(tmp_path / left[0] / "_daskauc.json")
    write_scores(data["linear"], data["p"]("raw.zarr"), out)  # removes the dead writer's
    assert _listing(out) == ["scores.parquet"]
    assert len(_parquet(out)) == N


def test_parquet_in_and_out_on_object_storage(data, tmp_path):
    """URLs (fsspec's in-process memory filesystem, threaded scheduler): a Parquet directory
    read by row groups, the parts written under a hidden prefix and moved into place, the
    record last; an existing output replaced only with overwrite."""
    import fsspec

    fs = fsspec.filesystem("memory")
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=np.arange(N) + 7)
    for name in os.listdir(src):
        fs.pipe(f"/lake-{tmp_path.name}/in/{name}", open(os.path.join(src, name), "rb").read())
    root = f"memory://lake-{tmp_path.name}"
    done = write_scores(data["named"], f"{root}/in", f"{root}/scores.parquet",
                        id_column="key", chunk_rows=120)
    assert done.n_chunks == 5
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"/lake-{tmp_path.name}/scores.parquet",
                                                       detail=False)) == \
        ["_daskauc.json", *(f"part-{i:05d}.parquet" for i in range(5))]
    assert not [p for p in fs.ls(f"/lake-{tmp_path.name}", detail=False)
                if p.rsplit("/", 1)[-1].startswith(".")]  # the hidden prefix removed
    df = pq.read_table(f"/lake-{tmp_path.name}/scores.parquet", filesystem=fs).to_pandas()
    np.testing.assert_array_equal(df["id"], np.arange(N) + 7)
    frame = pd.DataFrame(data["X"].astype(np.float64), columns=NAMES)
    _assert_scores(df["decision_function"], df["probability"], data["named"], frame)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_scores(data["named"], f"{root}/in", f"{root}/scores.parquet", id_column="key")
    write_scores(data["named"], f"{root}/in", f"{root}/scores.parquet", id_column="key",
                 overwrite=True)  # default chunks now: the old parts are gone
    assert len(fs.ls(f"/lake-{tmp_path.name}/scores.parquet", detail=False)) == 2


def test_predict_command(data, tmp_path, capsys, dask_cluster_client, monkeypatch):
    monkeypatch.setenv("DASKAUC_SCHEDULER", dask_cluster_client.scheduler.address)
    p, out = data["p"], str(tmp_path / "scores.parquet")
    assert main(["predict", p("embedded"), p("raw.zarr"), out, "--map", p("emb.zarr"),
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"rows", "seconds", "rows_per_second", "output", "format"}
    assert (result["rows"], result["output"], result["format"]) == (N, out, "parquet")
    assert result["rows_per_second"] > 0
    ref = str(tmp_path / "ref.parquet")
    write_scores(p("embedded"), p("raw.zarr"), ref, map=p("emb.zarr"))
    pd.testing.assert_frame_equal(_parquet(out), _parquet(ref))
    # an existing output, and a model that needs a map, are refused before any work
    assert main(["predict", p("linear"), p("raw.zarr"), out]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main(["predict", p("embedded"), p("raw.zarr"), str(tmp_path / "s.zarr")]) == 1
    assert "--map EMBEDDING_STORE" in capsys.readouterr().err
    assert main(["predict", p("linear"), p("raw.zarr"), str(tmp_path / "s.zarr")]) == 0
    assert f"{N} rows scored" in capsys.readouterr().out
    _, s = _zarr(str(tmp_path / "s.zarr"))
    _assert_scores(s["decision_function"], s["probability"], data["linear"], data["X"])
    assert open_dataset(p("raw.zarr")).n_samples == N  # the input untouched


@pytest.fixture
def cluster(_session_cluster_client):
    """The session's cluster for the commands (DASKAUC_SCHEDULER) of a test whose own
    write_scores calls run on the threaded scheduler: dask's local schedulers wait for the
    writes in flight before removing a failed output, so nothing hidden is left beside it."""
    return _session_cluster_client


def test_a_damaged_parquet_page_is_named_not_scored(data, tmp_path, capsys, cluster,
                                                   monkeypatch):
    """A later file of the input with a data page altered (its checksum written): the pass
    stops naming the file, nothing is written; unchecked it scored a wrong row."""
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=np.arange(N))
    bad = os.path.join(src, "part.1.parquet")
    table = pq.read_table(bad)
    damaged_parquet(table, bad, "x0")
    assert pq.read_table(bad)["x0"].to_pylist()[-1] != table["x0"].to_pylist()[-1]
    damaged = rf"{re.escape(bad)}: its data is damaged \(a page checksum mismatch"
    for fmt in ("parquet", "zarr"):
        out = str(tmp_path / f"scores.{fmt}")
        with pytest.raises(ValueError, match=damaged):
            write_scores(data["named"], src, out, id_column="key", chunk_rows=100)
        assert _listing(out) == ["in"]  # during the pass: nothing written, nothing hidden
    save_model(data["named"], str(tmp_path / "named"))
    monkeypatch.setenv("DASKAUC_SCHEDULER", cluster.scheduler.address)
    assert main(["predict", str(tmp_path / "named"), src, out, "--id-column", "key"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the steps' own lines
    assert last.startswith("daskauc predict: error: ") and re.search(damaged, last)
    assert sorted(os.listdir(tmp_path)) == ["in", "named"]


@pytest.fixture(scope="module")
def colours(tmp_path_factory):
    """A model whose features are those of a store ingested with categorical="onehot"
    (colour=blue, colour=red), saved; a Parquet input of two files whose text column has a
    value the ingest never saw ("green", first in row 137 of the input, in its second file)."""
    tmp = tmp_path_factory.mktemp("colours")
    rng = np.random.default_rng(1)
    colour = rng.choice(["blue", "red"], N).astype(object)
    a = rng.normal(size=N)
    X = pd.DataFrame({"a": a, "colour=blue": colour == "blue", "colour=red": colour == "red"},
                     dtype=np.float64)
    model = PairwiseHingeSGD(n_epochs=2, random_state=0).fit(X, (a + (colour == "red")) > 0.5)
    save_model(model, str(tmp / "model"))
    colour[[137, 150]] = "green"  # in one chunk of 60 rows: the first is named
    src = tmp / "in"
    os.makedirs(src)
    df = pd.DataFrame({"key": np.arange(N), "a": a, "colour": colour})
    df.iloc[:100].to_parquet(src / "part.0.parquet")
    df.iloc[100:].to_parquet(src / "part.1.parquet", row_group_size=50)
    zeros = X.assign(**{"colour=blue": (colour == "blue") * 1.0,
                        "colour=red": (colour == "red") * 1.0})
    return {"model": model, "path": str(tmp / "model"), "src": str(src), "X": zeros}


def test_a_category_unseen_at_ingest_is_refused_or_zeros_when_asked(
        colours, tmp_path, capsys, cluster, monkeypatch):
    """A value of a one-hot column the model never saw was scored as all zeros without a
    word. As scikit-learn's OneHotEncoder: refused by default, naming the column, the value
    and the row; handle_unknown="ignore" (--handle-unknown ignore) scores it as zeros."""
    unseen = re.escape(f"{colours['src']}: column 'colour' has the value 'green' in row 137 "
                       "(0-based), which the model was not fitted on")
    out = str(tmp_path / "scores.parquet")
    with pytest.raises(ValueError, match=unseen + r".*'blue', 'red'.*handle_unknown="):
        write_scores(colours["model"], colours["src"], out, id_column="key", chunk_rows=60)
    assert _listing(out) == []  # during the pass: nothing written
    with pytest.raises(ValueError, match="handle_unknown must be one of"):
        write_scores(colours["model"], colours["src"], out, handle_unknown="zeros")
    done = write_scores(colours["model"], colours["src"], out, id_column="key",
                        handle_unknown="ignore")
    assert done.n_rows == N
    df = _parquet(out)
    _assert_scores(df["decision_function"], df["probability"], colours["model"], colours["X"])
    monkeypatch.setenv("DASKAUC_SCHEDULER", cluster.scheduler.address)
    assert main(["predict", colours["path"], colours["src"], str(tmp_path / "s.zarr")]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("daskauc predict: error: ") and re.search(unseen, last)
    assert _listing(str(tmp_path / "s.zarr")) == ["scores.parquet"]
    assert main(["predict", colours["path"], colours["src"], str(tmp_path / "s.zarr"),
                 "--handle-unknown", "ignore"]) == 0
    _, s = _zarr(str(tmp_path / "s.zarr"))
    np.testing.assert_allclose(s["decision_function"], df["decision_function"], rtol=1e-12)


def test_parquet_files_that_disagree_are_named_before_any_work(data, tmp_path):
    """Every file's columns are compared from the footers before any work: a column the
    scoring reads must be in every file with one type; an unused one may differ. A model
    without feature names takes every numeric column: one only in a later file is refused
    (it was dropped without a word)."""
    src = _parquet_input(tmp_path / "in", data["X"], data["y"], ids=np.arange(N), order=NAMES,
                         extra=False)
    later = os.path.join(src, "part.1.parquet")
    table = pq.read_table(later)
    out = str(tmp_path / "scores.parquet")
    cases = {
        "z": (table.append_column("z", pa.array(np.ones(len(table)))),
              "has a column 'z' that", data["linear"]),
        "x2": (table.drop_columns(["x2"]), "lacks the column 'x2' that", data["named"]),
        "x1": (table.set_column(2, "x1", table["x1"].cast(pa.float32())),
               "column 'x1' is float there but double", data["named"]),
    }
    for name, (changed, what, model) in cases.items():
        pq.write_table(changed, later)
        with pytest.raises(ValueError, match=rf"{re.escape(later)}.*{what} .*part.0.parquet"):
            write_scores(model, src, out, id_column="key")
        assert _listing(out) == ["in"], name
    # unused by a model with names: an extra column, and a text column in one file only
    pq.write_table(table.append_column("z", pa.array(np.ones(len(table))))
                   .append_column("note", pa.array(["n"] * len(table))), later)
    write_scores(data["named"], src, out, id_column="key")
    frame = pd.DataFrame(data["X"].astype(np.float64), columns=NAMES)
    df = _parquet(out)
    _assert_scores(df["decision_function"], df["probability"], data["named"], frame)


def test_an_output_name_that_is_not_utf8(data, tmp_path, capsysbinary, cluster, monkeypatch):
    """A Parquet output whose name is not UTF-8 (bytes, a str of os.fsdecode, the command
    line's argument) failed with only UnicodeEncodeError: pyarrow takes str paths that it
    encodes as UTF-8. The part files are opened by Python and handed to the writer."""
    raw = os.fsencode(tmp_path)
    for output in (raw + b"/\xff.parquet", os.fsdecode(raw + b"/\xfe.parquet"),
                   raw + b"/\xfd.zarr"):
        done = write_scores(data["linear"], data["p"]("raw.zarr"), output, chunk_rows=300)
        assert done.n_rows == N
    for name in (b"\xff.parquet", b"\xfe.parquet"):
        where = os.path.join(raw, name)
        parts = sorted(f for f in os.listdir(where) if f.endswith(b".parquet"))
        assert len(parts) == 2 and os.path.exists(os.path.join(where, b"_daskauc.json"))
        with open(os.path.join(where, parts[0]), "rb") as f:
            head = pq.read_table(f).to_pandas()
        np.testing.assert_array_equal(head["id"], np.arange(300))
        _assert_scores(head["decision_function"], head["probability"], data["linear"],
                       data["X"][:300])
    out = os.fsdecode(raw + b"/\xfc.parquet")  # as Python gives sys.argv
    monkeypatch.setenv("DASKAUC_SCHEDULER", cluster.scheduler.address)
    assert main(["predict", data["p"]("linear"), data["p"]("raw.zarr"), out]) == 0
    assert raw + b"/\xfc.parquet: 600 rows scored" in capsysbinary.readouterr().out
    assert sorted(os.listdir(raw)) == [b"\xfc.parquet", b"\xfd.zarr", b"\xfe.parquet",
                                       b"\xff.parquet"]
