"""Damaged and hostile text input: every fault is one ValueError naming the file and the
cause, nothing is left behind, and memory stays bounded by the chunk size.

Memory is measured in a child process (``ru_maxrss`` of RUSAGE_CHILDREN, under a hard
``RLIMIT_AS``), never by allocating the amounts the bugs allocated.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import lzma
import os

import numpy as np
import pytest

from daskauc.data.ingest import ingest

ingest_mod = importlib.import_module("daskauc.data.ingest")

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
    real_scan = ingest_mod._scan

    def scan_then_damage(*args, **kwargs):
        out = real_scan(*args, **kwargs)
        src.write_bytes(good[: len(good) // 2])
        return out

    monkeypatch.setattr(ingest_mod, "_scan", scan_then_damage)
    with pytest.raises(ValueError, match=r"truncated or corrupt \(xz: unexpected end of stream"):
        ingest(src, tmp_path / "s.zarr", shuffle=True, chunk_rows=300)
    assert _left_behind(tmp_path) == [src.name]


def test_damage_that_decodes_to_bad_text_is_reported_as_damage(tmp_path, monkeypatch):
    """gzip level 0 stores the text as is: flipped bytes reach the parser as a malformed line
    long before the stream's CRC is checked; the parse error is then traced to the damage."""
    monkeypatch.setattr(ingest_mod, "_BLOCK_BYTES", 1 << 16)  # the file is many blocks
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
