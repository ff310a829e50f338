"""Damaged and hostile text input: every fault is one ValueError naming the file and the
cause, nothing is left behind, and memory stays bounded by the chunk size.

Memory is measured in a child process (its peak RSS, VmHWM, under a hard ``RLIMIT_AS``),
never by allocating the amounts the bugs allocated. Not ``ru_maxrss``: Linux carries the
parent's peak across the exec, so a child of a big pytest process reports at least that.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import lzma
import os

import numpy as np
import pytest

from daskauc._params import seed_sequence
from daskauc.data.ingest import ingest

text_mod = importlib.import_module("daskauc.data.text")
parse_mod = importlib.import_module("daskauc.data.parse")
sources_mod = importlib.import_module("daskauc.data.sources")
writers_mod = importlib.import_module("daskauc.data.writers")

# on a distributed cluster a failed write's other tasks can still be writing chunks into the
# hidden partial store when the abort removes it (workers are not told to stop; see
# _GuardedTarget): these tests count what is left behind, so they run on threads
pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")

_COMPRESS = {"gzip": (".gz", gzip.compress), "xz": (".xz", lzma.compress),
             "bz2": (".bz2", bz2.compress)}


def _libsvm_text(n: int = 4000, d: int = 12, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    lines = [f"{'+1' if i % 3 == 0 else '-1'} "
             + " ".join(f"{j}:{rng.random():.6f}" for j in range(1, d + 1)) for i in range(n)]
    return ("\n".join(lines) + "\n").encode()


def _damage(data: bytes, how: str) -> bytes:
    if how == "truncated":
        return data[: len(data) // 2]
    out = bytearray(data)
    mid = len(out) // 2
    for k in range(8):
        out[mid + k] ^= 0xFF
    return bytes(out)


def _left_behind(tmp_path, *keep) -> list[str]:
    return sorted(set(os.listdir(tmp_path)) - set(keep))


# ------------------------------------------------------------------------ compressed input


@pytest.mark.parametrize("n_features", [None, 12])  # None: a first scan; 12: one parse pass
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("how", ["truncated", "flipped"])
@pytest.mark.parametrize("kind", ["gzip", "xz", "bz2"])
def test_damaged_compressed_input_is_one_clear_error(tmp_path, kind, how, shuffle, n_features):
    ext, compress = _COMPRESS[kind]
    src = tmp_path / f"data.libsvm{ext}"
    src.write_bytes(_damage(compress(_libsvm_text()), how))
    with pytest.raises(ValueError) as info:
        ingest(src, tmp_path / "new" / "s.zarr", n_features=n_features, shuffle=shuffle,
               chunk_rows=500)
    exc = info.value
    assert not isinstance(exc, OSError)  # the CLI would blame the cluster for an OSError
    msg = str(exc)
    assert "\n" not in msg
    assert msg.startswith(f"{src} is truncated or corrupt ({kind}: ")
    assert msg.endswith("); nothing was written")
    if how == "truncated":
        assert f"({kind}: unexpected end of stream)" in msg
    assert _left_behind(tmp_path) == [src.name]  # no store, no partial store, no spill, no dir


@pytest.mark.parametrize("kind", ["gzip", "xz", "bz2"])
def test_damage_found_while_sniffing_the_first_lines(tmp_path, kind):
    ext, compress = _COMPRESS[kind]
    src = tmp_path / f"tiny.svm{ext}"
    src.write_bytes(compress(b"+1 1:1\n-1 1:2\n")[:-6])
    with pytest.raises(ValueError, match=rf"tiny.svm{ext} is truncated or corrupt \({kind}: "):
        ingest(src, tmp_path / "s.zarr")
    assert _left_behind(tmp_path) == [src.name]


def test_damage_found_by_the_spill_pass_of_a_shuffle(tmp_path, monkeypatch):
    """The file is intact for the first scan and damaged when the spill pass reads it (a file
    replaced between the passes): the spill pass reports it and removes its spill files."""
    src = tmp_path / "data.libsvm.xz"
    good = lzma.compress(_libsvm_text())
    src.write_bytes(good)
    real_scan = text_mod._scan

    def scan_then_damage(*args, **kwargs):
        out = real_scan(*args, **kwargs)
        src.write_bytes(good[: len(good) // 2])
        return out

    monkeypatch.setattr(text_mod, "_scan", scan_then_damage)
    with pytest.raises(ValueError, match=r"truncated or corrupt \(xz: unexpected end of stream"):
        ingest(src, tmp_path / "s.zarr", shuffle=True, chunk_rows=300)
    assert _left_behind(tmp_path) == [src.name]


def test_damage_that_decodes_to_bad_text_is_reported_as_damage(tmp_path, monkeypatch):
    """gzip level 0 stores the text as is: flipped bytes reach the parser as a malformed line
    long before the stream's CRC is checked; the parse error is then traced to the damage."""
    monkeypatch.setattr(sources_mod, "_BLOCK_BYTES", 1 << 16)  # the file is many blocks
    src = tmp_path / "stored.svm.gz"
    src.write_bytes(_damage(gzip.compress(_libsvm_text(), compresslevel=0), "flipped"))
    with pytest.raises(ValueError, match=r"stored.svm.gz is truncated or corrupt \(gzip: CRC"):
        ingest(src, tmp_path / "s.zarr", n_features=12)
    assert _left_behind(tmp_path) == [src.name]


def test_cli_reports_damage_as_an_input_error(tmp_path, capsys):
    from daskauc.cli import main

    src = tmp_path / "data.svm.bz2"
    src.write_bytes(_damage(bz2.compress(_libsvm_text()), "flipped"))
    assert main(["ingest", str(src), str(tmp_path / "s.zarr")]) == 1  # not 3: "cluster failed"
    err = capsys.readouterr().err.strip()
    assert "truncated or corrupt (bz2: " in err and "Dask cluster" not in err


# ------------------------------------------------------------------------ wide LIBSVM input

_CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # a bug fails, not the machine
from daskauc.data.ingest import ingest
kwargs = json.loads(sys.argv[3])
try:
    ds = ingest(sys.argv[1], sys.argv[2], **kwargs)
    out = {"shape": list(ds.X.shape), "chunk_rows": ds.attrs["chunk_rows"],
           "row_sums": ds.X.sum(axis=1).compute().tolist()}
except Exception as exc:
    out = {"error": type(exc).__name__, "message": str(exc)}
out["peak_mb"] = [int(v.split()[1]) / 1024 for v in open("/proc/self/status")
                 if v.startswith("VmHWM:")][0]  # ru_maxrss keeps the parent's
print(json.dumps(out))
"""


def _ingest_in_child(src, store, **kwargs) -> dict:
    """Ingest in a fresh process; return its result and its peak RSS in MB."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(store), json.dumps(kwargs)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _wide_file(path, rows: int, index: int):
    """``rows`` rows of two small features, then one row with feature ``index``."""
    with open(path, "w") as f:
        for i in range(rows):
            f.write(f"{'+1' if i % 2 else '-1'} 1:0.5 7:1.25\n")
        f.write(f"+1 3:1 {index}:2\n")
    return path


def test_chunk_rows_follow_the_width():
    from daskauc import _config

    assert _config.chunk_rows_for(100, 4) == _config.TARGET_CHUNK_BYTES // 400
    assert _config.chunk_rows_for(300_001, 4) == 55  # was 1,000 rows: 1.2 GB
    assert _config.chunk_rows_for(3_000_001, 4) == 5  # was 1,000 rows: 12 GB
    assert _config.chunk_rows_for(20_000_000, 4) == 1  # one row, 80 MB
    assert _config.chunk_rows_for(10, 8, n_rows=7) == 7


@pytest.mark.parametrize("shuffle", [False, True])
def test_one_huge_index_densified_within_the_chunk_size(tmp_path, shuffle):
    """201 rows, one index 2,000,000, allow_dense=True: 1.6 GB dense. A chunk of 1,000 rows
    (the former floor) took the whole 1.6 GB at once (MemoryError under the 3 GiB limit);
    now a chunk is 8 rows (64 MB) and the peak stays at a few hundred MB."""
    # 1,000,000 wide (0.8 GB dense, chunks of 16 rows) since the suite's time is counted:
    # the former 1,000-row floor would still take 4 GB at once
    src = _wide_file(tmp_path / "wide.svm", 200, 1_000_000)
    out = _ingest_in_child(src, tmp_path / "s.zarr", allow_dense=True, shuffle=shuffle)
    assert out.get("error") is None, out
    assert out["shape"] == [201, 1_000_000] and out["chunk_rows"] == 16
    assert sorted(out["row_sums"]) == [1.75] * 200 + [3.0]
    assert out["peak_mb"] < 600, out["peak_mb"]


@pytest.mark.parametrize("n_features, shuffle", [(None, False), (None, True),
                                                 (3_000_000, True), (10**9, False)])
def test_absurd_densifying_is_refused_before_writing(tmp_path, n_features, shuffle):
    """1,000 rows of 20 non-zeros and one index 3,000,000 (or n_features=10**9 given) would
    densify into 12 GB to 4 TB (14.3 GiB peak was measured): with rows="dense", refused after
    the first scan, naming the largest index and its line, the dense size, the ratio and the
    ways out (rows="auto", the default, stores such a file sparse:
    tests/test_sparse_store.py)."""
    src = tmp_path / "sparse.svm"
    rng = np.random.default_rng(0)
    with open(src, "w") as f:
        for i in range(1000):
            idx = np.sort(rng.choice(np.arange(1, 100_000), 20, replace=False))
            f.write(f"{(-1) ** i} " + " ".join(f"{j}:1" for j in idx) + "\n")
        f.write("+1 5:1 3000000:1\n")
    kwargs = {"shuffle": shuffle, "n_features": n_features, "rows": "dense"}
    out = _ingest_in_child(src, tmp_path / "s.zarr", **kwargs)
    assert out["error"] == "ValueError", out
    msg = out["message"]
    assert "largest feature index, 3000000, is on line 1001" in msg
    assert "allow_dense=True" in msg and "features this sparse are refused" in msg
    assert "rows='sparse'" in msg
    assert "FeatureHasher" in msg and "SparseRandomProjection" in msg
    assert "iB (" in msg and "times the" in msg
    assert out["peak_mb"] < 400, out["peak_mb"]
    assert _left_behind(tmp_path) == ["sparse.svm"]


def test_one_pass_ingest_refuses_as_soon_as_the_rows_read_are_too_sparse(tmp_path, monkeypatch):
    """With n_features given the file is read once: the rule is applied to the rows read so
    far, before each chunk is written (thresholds lowered here to keep the test small)."""
    from daskauc import _config

    monkeypatch.setattr(_config, "DENSE_MAX_BYTES", 2**20)
    src = _wide_file(tmp_path / "w.svm", 3000, 5000)
    with pytest.raises(ValueError, match=r"rows read so far .* allow_dense=True"):
        ingest(src, tmp_path / "s.zarr", n_features=5000, chunk_rows=100, rows="dense")
    assert _left_behind(tmp_path) == ["w.svm"]
    ds = ingest(src, tmp_path / "s.zarr", n_features=5000, chunk_rows=100, allow_dense=True)
    assert ds.X.shape == (3001, 5000)


def test_long_rows_of_slow_values_need_no_bigger_slow_list(tmp_path, monkeypatch):
    """Values the exact fast path hands to Python are listed in a fixed-size list; a row with
    more of them than room is finished after the list is emptied (it used to double the list
    without bound: 32 bytes per value of the longest line)."""
    monkeypatch.setattr(parse_mod, "_SLOW_CAPACITY", 3)
    sizes = set()
    real_fix = parse_mod._Parser._fix_slow

    def recording_fix(self, buf):
        sizes.add(self.slow.shape[0])
        return real_fix(self, buf)

    monkeypatch.setattr(parse_mod._Parser, "_fix_slow", recording_fix)
    rng = np.random.default_rng(2)
    vals = (rng.normal(size=(40, 9)) * 10.0 ** rng.integers(-40, 40, size=(40, 9))).tolist()
    lab = np.where(np.arange(40) % 3 == 0, 1, -1)
    svm = "".join(f"{lab[i]} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(row)) + "\n"
                  for i, row in enumerate(vals))
    csv = "".join(",".join(repr(v) for v in row) + f",{lab[i]}\n" for i, row in enumerate(vals))
    (tmp_path / "a.svm").write_text(svm)
    (tmp_path / "a.csv").write_text(csv)
    for name in ("a.svm", "a.csv"):
        for chunk_rows in (1, 7):
            ds = ingest(tmp_path / name, tmp_path / f"{name}{chunk_rows}.zarr",
                        dtype="float64", chunk_rows=chunk_rows)
            np.testing.assert_array_equal(ds.X.compute(), np.array(vals))
            np.testing.assert_array_equal(ds.y.compute(), lab)
    assert sizes == {3}


# ------------------------------------------------------------------------ float32 overflow

_F32 = (r"overflows float32 \(largest 3\.402823e\+38\); "
        r"pass dtype=\"float64\" \(CLI: --dtype float64\)")


@pytest.mark.parametrize("name, text, where", [
    ("big.svm", "+1 1:1 2:3\n-1 1:2 2:1e308\n", r"line 2: 1e308 in feature column 1"),
    ("big.csv", "f1,f2,y\n1,2,0\n3,-4e39,1\n", r"line 3: -4e39 in feature column 1"),
    ("edge.csv", "1,2,0\n3,3.4028236e38,1\n", r"line 2: 3.4028236e38 in feature column 1"),
])
def test_float32_overflow_in_text_names_value_line_and_the_way_out(tmp_path, name, text,
                                                                   where):
    src = tmp_path / name
    src.write_text(text)
    with pytest.raises(ValueError, match=rf"{name}, {where} \(0-based\) {_F32}"):
        ingest(src, tmp_path / "s.zarr")
    assert _left_behind(tmp_path) == [name]
    ds = ingest(src, tmp_path / "s.zarr", dtype="float64")
    assert np.isfinite(ds.X.compute()).all()


def test_the_largest_float32_is_not_an_overflow(tmp_path):
    src = tmp_path / "max.csv"
    src.write_text("1,2,0\n3,3.4028235e38,1\n")  # rounds to float32's largest, not to inf
    ds = ingest(src, tmp_path / "s.zarr")
    assert ds.X.compute()[1, 1] == np.finfo(np.float32).max


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_float32_overflow_in_arrays_names_value_row_and_column(tmp_path, kind):
    import dask.array as da

    from daskauc.data.ingest import ingest_array

    X = np.ones((30, 3))
    X[17, 2] = -1e308
    Xin = da.from_array(X, chunks=(8, 3)) if kind == "dask" else X
    with pytest.raises(ValueError, match=rf"X\[17, 2\] = -1e\+308 {_F32}"):
        ingest_array(Xin, np.arange(30) % 2, tmp_path / "s.zarr", dtype="float32",
                     chunk_rows=8)
    assert _left_behind(tmp_path) == []  # numpy input used to be written with -inf
    with pytest.raises(ValueError, match=rf"X\[17, 2\] = -1e\+308 {_F32}"):  # original row
        ingest_array(Xin, np.arange(30) % 2, tmp_path / "s.zarr", dtype="float32",
                     chunk_rows=8, shuffle=True, random_state=3)
    assert _left_behind(tmp_path) == []


# ------------------------------------------------------------------------ free space


@pytest.fixture
def small_disk(monkeypatch):
    """Every file system reports ``small_disk.free`` bytes free; ``small_disk.asked`` lists
    the paths asked about."""
    import collections
    import shutil
    import types

    disk = types.SimpleNamespace(free=1000, asked=[])
    usage = collections.namedtuple("usage", "total used free")

    def fake(path):
        disk.asked.append(os.fspath(path))
        return usage(10**12, 10**12 - disk.free, disk.free)

    monkeypatch.setattr(shutil, "disk_usage", fake)
    return disk


def _svm_file(path, rows=50):
    path.write_text("".join(f"{(-1) ** i} 1:{i} 3:0.5\n" for i in range(rows)))
    return path


@pytest.mark.parametrize("kind", ["numpy", "dask", "write_dataset"])
def test_arrays_refused_before_any_work_when_the_disk_is_too_small(tmp_path, small_disk,
                                                                   kind, monkeypatch):
    import dask.array as da

    from daskauc.data.ingest import ingest_array, write_dataset

    X = np.ones((100, 4))  # 3,200 bytes of float64, 100 of labels
    y = np.arange(100) % 2
    def no_compute(*args, **kwargs):
        raise AssertionError("computed before the free space was checked")

    monkeypatch.setattr(da.Array, "compute", no_compute)
    target = tmp_path / "new" / "s.zarr"
    with pytest.raises(ValueError) as info:
        if kind == "write_dataset":
            write_dataset(da.from_array(X, chunks=50), da.from_array(2 * y - 1), target)
        else:
            ingest_array(X if kind == "numpy" else da.from_array(X, chunks=50), y, target)
    msg = str(info.value)
    assert not isinstance(info.value, OSError)
    assert msg.startswith(f"{target}: writing it needs 3,300 bytes (3.2 KiB) for X and y "
                          f"uncompressed, but 1,000 bytes are free on the file system of "
                          f"{tmp_path};")
    assert small_disk.asked[0] == str(tmp_path)  # the nearest existing parent
    assert _left_behind(tmp_path) == []


def test_text_ingest_checks_the_space_after_its_first_scan(tmp_path, small_disk):
    src = _svm_file(tmp_path / "f.svm")  # 50 rows x 3 float32: 600 + 50 bytes, codes 200
    small_disk.free = 849
    with pytest.raises(ValueError, match=r"s.zarr: writing it needs 850 bytes for X and y "
                       r"uncompressed and 200 bytes of spill files, but 849 bytes are free"):
        ingest(src, tmp_path / "s.zarr")
    small_disk.free = 1849  # the shuffle also spills X, each row's place and the permutation
    with pytest.raises(ValueError, match=r"s.zarr: writing it needs 1,850 bytes \(1.8 KiB\) "
                       r"for X and y uncompressed and 1.2 KiB of spill files, but 1,849"):
        ingest(src, tmp_path / "s.zarr", shuffle=True)
    assert _left_behind(tmp_path) == ["f.svm"]
    small_disk.free = 1850
    assert ingest(src, tmp_path / "s.zarr", shuffle=True).X.shape == (50, 3)
    small_disk.free = 0  # one pass (n_features given): the size is not known, no check
    assert ingest(src, tmp_path / "s2.zarr", n_features=3).X.shape == (50, 3)


def test_urls_are_not_checked(small_disk):
    import dask.array as da

    from daskauc.data.ingest import write_dataset

    small_disk.free = 0
    ds = write_dataset(da.ones((10, 2), chunks=5), da.ones(10, dtype=np.int8, chunks=5),
                       "memory://daskauc-free-space/s.zarr")
    assert ds.X.shape == (10, 2) and small_disk.asked == []


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_disk_that_fills_up_during_a_one_pass_ingest_is_an_input_error(tmp_path, shuffle,
                                                                         monkeypatch):
    """Without a first scan the size is unknown: a full disk is then found by the write,
    reported as such (not as an OSError, which the CLI takes for a lost cluster)."""
    import errno

    src = _svm_file(tmp_path / "f.svm")
    cls = writers_mod._ShuffleWriter if shuffle else writers_mod._DirectWriter

    def full(self, chunk):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cls, "write", full)
    with pytest.raises(ValueError, match=r"new/s.zarr: the file system ran out of space while "
                       r"writing it \(\[Errno 28\] No space left on device\); nothing was written"):
        ingest(src, tmp_path / "new" / "s.zarr", n_features=3, shuffle=shuffle)
    assert _left_behind(tmp_path) == ["f.svm"]


# ------------------------------------------------------------------------ unbounded input

_LONG_LINE_CHILD = """
import gzip, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
from daskauc.data.ingest import ingest
try:
    ingest(sys.argv[1], sys.argv[2])
    out = {"error": None}
except Exception as exc:
    out = {"error": type(exc).__name__, "message": str(exc)[:300]}
out["peak_mb"] = [int(v.split()[1]) / 1024 for v in open("/proc/self/status")
                 if v.startswith("VmHWM:")][0]  # ru_maxrss keeps the parent's
print(json.dumps(out))
"""


@pytest.mark.parametrize("line", [1, 25])
def test_a_line_longer_than_memory_is_refused_with_bounded_memory(tmp_path, line):
    """A 1.5 GiB line (a 1.5 MB .gz file): the first lines were read with an unbounded
    readline and the blocks of an unfinished line were concatenated again and again
    (quadratic, then a MemoryError under the 3 GiB limit); now it is refused at
    _config.MAX_LINE_BYTES with its line number."""
    import json
    import subprocess
    import sys

    src = tmp_path / "long.svm.gz"
    piece = b"1" * (16 * 2**20)
    with gzip.open(src, "wb", compresslevel=1) as f:
        for i in range(line - 1):
            f.write(f"{(-1) ** i} 1:{i}\n".encode())
        f.write(b"+1 1:")
        for _ in range(96):
            f.write(piece)
        f.write(b"\n-1 1:2\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", _LONG_LINE_CHILD, str(src), str(tmp_path / "s")],
                       capture_output=True, text=True, env=env, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["error"] == "ValueError", out
    assert out["message"].startswith(f"{src}, line {line}: longer than 64.0 MiB"), out
    assert out["peak_mb"] < 700, out["peak_mb"]
    assert _left_behind(tmp_path) == [src.name]


def test_long_lines_up_to_the_limit_are_read(tmp_path, monkeypatch):
    from daskauc import _config

    row = "+1 " + " ".join(f"{j}:{j}" for j in range(1, 60))
    monkeypatch.setattr(sources_mod, "_BLOCK_BYTES", 64)
    monkeypatch.setattr(_config, "MAX_LINE_BYTES", len(row) - 1)
    src = tmp_path / "f.svm"
    src.write_text(f"-1 1:5\n{row[:-1]}\n-1 2:1\n{row}\n")  # 59:5 fits, 59:59 does not
    with pytest.raises(ValueError, match=rf"f.svm, line 4: longer than {len(row) - 1} bytes"):
        ingest(src, tmp_path / "s.zarr")
    src.write_text(f"{row[:-1]}\n-1 1:5\n{row[:-1]}")  # first line, last line without \n
    ds = ingest(src, tmp_path / "s.zarr", n_features=59)
    assert ds.X.shape == (3, 59) and ds.X[2].sum().compute() == sum(range(1, 59)) + 5


@pytest.mark.parametrize("delimiter", [",", " "])
def test_a_wide_first_line_is_inspected_without_a_list_of_its_fields(tmp_path, delimiter):
    """The dense layout split the first line into a Python list (about 60 bytes a field,
    30 times its text: 250 MB for this 8 MB line); it is now counted and inspected lazily."""
    import tracemalloc

    d = 2_000_000
    head = [(0, delimiter.join(["0.5"] * d + ["1"]))]
    tracemalloc.start()
    try:
        layout = sources_mod._dense_layout("w.csv", head, delimiter, None, -1, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert layout["n_cols"] == d + 1 and layout["header"] is False
    assert peak < 20 * 2**20, peak
    numbered = [(0, delimiter.join(str(k) for k in range(1, 6)))]
    assert sources_mod._dense_layout("h.csv", numbered, delimiter, None, -1, None)["header"]


def test_a_long_label_token_is_coded_in_bounded_blocks(tmp_path, monkeypatch):
    """Label codes gathered every row's token into rows x (longest token) bytes at once:
    one 1 MB label in a chunk of 200,000 rows asked for 200 GB."""
    sizes = []
    real = parse_mod._gather_tokens

    def recording(buf, spans):
        out = real(buf, spans)
        sizes.append(out.nbytes)
        return out

    monkeypatch.setattr(parse_mod, "_gather_tokens", recording)
    long_label = "x" * 2**20
    src = tmp_path / "labels.csv"
    src.write_text("".join(f"{i},{'a' if i % 2 else 'b'}\n" for i in range(200))
                   + f"7,{long_label}\n")
    with pytest.raises(ValueError, match="positive_classes"):  # three labels, none given
        ingest(src, tmp_path / "s.zarr")
    assert max(sizes) <= 16 * 2**20, max(sizes)


def test_too_many_distinct_labels_stop_the_pass_early(tmp_path, monkeypatch):
    """A regression target or an ID column as labels: the table of raw label tokens grew
    with every distinct value until the end of the pass; it stops at _config.MAX_LABELS."""
    from daskauc import _config

    monkeypatch.setattr(_config, "MAX_LABELS", 50)
    src = tmp_path / "reg.csv"
    src.write_text("".join(f"{i * 0.5},{i * 0.25}\n" for i in range(500)))
    with pytest.raises(ValueError, match=r"reg.csv, line 51: more than 50 distinct labels "
                                         r"\(this one: '12.5'\)"):
        ingest(src, tmp_path / "s.zarr", chunk_rows=30)
    assert _left_behind(tmp_path) == ["reg.csv"]


def test_a_row_wider_than_a_chunk_can_hold_is_refused(tmp_path):
    """n_features=10**10 with allow_dense=True: one row is 40 GB; refused before anything
    is allocated, whatever allow_dense says."""
    src = _svm_file(tmp_path / "f.svm")
    with pytest.raises(ValueError, match=r"one row of 10,000,000,000 features takes 37.3 GiB"):
        ingest(src, tmp_path / "s.zarr", n_features=10**10, allow_dense=True)
    assert _left_behind(tmp_path) == ["f.svm"]


def test_an_error_quotes_a_huge_token_briefly(tmp_path):
    src = tmp_path / "bad.svm"
    src.write_text("+1 1:1\n-1 " + "x" * 10**6 + "\n")
    with pytest.raises(ValueError) as info:
        ingest(src, tmp_path / "s.zarr")
    assert len(str(info.value)) < 400 and "1,000,000 characters" in str(info.value)


def test_the_shuffle_keeps_its_permutation_on_disk_and_its_order(tmp_path, monkeypatch):
    """The permutation is the seed's ``default_rng(seed).permutation(n)`` as before (stores
    written with a seed stay reproducible), but the memory traced no longer grows with n:
    ``permutation(n)`` and its ``argsort`` took 16 bytes a row more (measured 5.5 and 8.7 MB
    at 200,000 and 400,000 rows; now 3.6 and 3.8), 16 GB for the billion rows a first scan
    can report."""
    import tracemalloc

    monkeypatch.setattr(sources_mod, "_BLOCK_BYTES", 1 << 16)
    peaks = {}
    for n in (2000, 200_000, 400_000):  # the first warms up imports and caches
        src = tmp_path / f"rows{n}.svm"
        src.write_text("".join(f"{1 if i % 4 == 0 else -1} 1:{i}\n" for i in range(n)))
        tracemalloc.start()
        try:
            ds = ingest(src, tmp_path / f"s{n}.zarr", shuffle=True, random_state=11,
                        chunk_rows=2000, dtype="float64")
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peaks[400_000] - peaks[200_000] < 4 * 200_000, peaks  # < 4 bytes a row
    perm = np.random.default_rng(seed_sequence(11)).permutation(n)
    X, y = ds.X.compute()[:, 0], ds.y.compute()
    expected = np.empty(n)
    expected[perm] = np.arange(n)  # row i goes to position perm[i]
    np.testing.assert_array_equal(X, expected)
    np.testing.assert_array_equal(y, np.where(expected % 4 == 0, 1, -1))


def test_a_failed_dask_write_leaves_no_partial_store_behind(tmp_path):
    """dask's local schedulers raise the first task error while other tasks still run: a
    chunk written after the abort had removed the hidden partial store re-created it."""
    import time

    import dask
    import dask.array as da

    from daskauc.data.ingest import write_dataset

    def block(i):
        if i == 0:
            time.sleep(0.2)  # lets block 1 start first; it writes after the abort
            raise ValueError("block 0 is bad")
        time.sleep(0.6)
        return np.ones((5, 3))

    parts = [da.from_delayed(dask.delayed(block)(i), (5, 3), dtype=float) for i in range(2)]
    X = da.concatenate(parts)
    y = da.from_array(np.array([1, -1] * 5, dtype=np.int8), chunks=5)
    with dask.config.set(scheduler="threads", num_workers=2), \
            pytest.raises(ValueError, match="block 0 is bad"):
        write_dataset(X, y, tmp_path / "s.zarr", chunk_rows=5)
    time.sleep(1.0)
    assert _left_behind(tmp_path) == []
