"""What a text input is and how its bytes are read.

* Its compression, from the name (``.bz2``, ``.xz``/``.lzma``, ``.gz``) or the magic bytes;
  it is decompressed on the fly, never to disk, and damage (truncated, corrupt) is one
  ``ValueError`` naming the file wherever the stream is read (:class:`_CheckedStream`).
* The bytes as stored are hashed while they are read (:class:`_HashingReader`).
* The text is cut into blocks of complete lines, a line at most ``_config.MAX_LINE_BYTES``
  (:func:`_iter_blocks`).
* Its first lines give the format (LIBSVM or dense text) and, for dense text, the layout:
  delimiter, number of columns, label column and header (:func:`_dense_layout`).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import io
import logging
import lzma
import os
import re
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import _config
from .space import _nbytes

logger = logging.getLogger("daskauc")

_COMPRESSION_EXT = {".bz2": "bz2", ".xz": "xz", ".lzma": "xz", ".gz": "gzip"}
_MAGIC = ((b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"\x1f\x8b", "gzip"))
_LIBSVM_EXT = {".libsvm", ".svm", ".svmlight", ".t", ".trn", ".tst"}
_DENSE_EXT = {".csv": ",", ".tsv": "\t"}
_FORMATS = {"libsvm": "libsvm", "svmlight": "libsvm", "csv": "csv", "dense": "csv", "txt": "csv"}
_BLOCK_BYTES = 8 * 2**20


class _HashingReader(io.RawIOBase):
    """A raw reader that hashes the bytes of the file as stored (compressed)."""

    def __init__(self, raw):
        self._raw = raw
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._raw.readinto(b)
        if n:
            self.sha256.update(memoryview(b)[:n])
        return n

    def drain(self) -> None:
        """Hash whatever the decompressor left unread (trailing bytes)."""
        for block in iter(lambda: self._raw.read(1 << 20), b""):
            self.sha256.update(block)

    def close(self) -> None:
        self._raw.close()
        super().close()


def _compression_of(path: str) -> str | None:
    ext = os.path.splitext(path)[1].lower()
    if ext in _COMPRESSION_EXT:
        return _COMPRESSION_EXT[ext]
    with open(path, "rb") as f:
        head = f.read(8)
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return None


class _DamagedInput(ValueError):
    """A compressed file that cannot be decompressed to its end (truncated or corrupt)."""


#: what the decompressors raise for damaged data: gzip EOFError / BadGzipFile (an OSError) /
#: zlib.error, lzma EOFError / LZMAError, bz2 EOFError / OSError("Invalid data stream").
_DECOMPRESS_ERRORS = (EOFError, zlib.error, lzma.LZMAError, OSError)


class _CheckedStream:
    """A decompressed stream whose damage is one ``ValueError`` naming the file and format.

    Raised wherever the stream is read (the sniffing of the first lines, the scan, the parse,
    a shuffle's spill pass), so the caller's cleanup runs and the CLI reports an input error,
    not a lost cluster (it takes an ``OSError`` for one). An ``OSError`` with an errno is a
    real I/O failure of the disk and is left as it is.
    """

    def __init__(self, f, path: str, compression: str | None):
        self._f, self.path, self.compression = f, path, compression

    def _damaged(self, exc: BaseException) -> _DamagedInput:
        cause = ("unexpected end of stream" if isinstance(exc, EOFError)
                 else " ".join(str(exc).split()) or type(exc).__name__)
        return _DamagedInput(f"{self.path} is truncated or corrupt ({self.compression}: "
                             f"{cause}); nothing was written")

    def _call(self, method, n):
        try:
            return method(n)
        except _DECOMPRESS_ERRORS as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise
            raise self._damaged(exc) from None

    def read(self, n: int = -1) -> bytes:
        return self._call(self._f.read, n)

    def readline(self, limit: int = -1) -> bytes:
        return self._call(self._f.readline, limit)

    def check_rest(self) -> None:
        """Decompress the rest of the stream (discarded): raise if it is damaged."""
        if self.compression is None:
            return
        logger.info("%s: checking that the rest of the compressed file is intact", self.path)
        while self.read(1 << 20):
            pass


@contextlib.contextmanager
def _open_text(path: str, compression: str | None, hasher: list | None = None):
    """Open ``path`` as a decompressed binary stream (a :class:`_CheckedStream`); append the
    hashing reader to ``hasher``."""
    raw = open(path, "rb", buffering=0)  # noqa: SIM115 - closed below
    if hasher is not None:
        raw = _HashingReader(raw)
        hasher.append(raw)
    f: Any = io.BufferedReader(raw, 1 << 20)
    if compression == "bz2":
        f = bz2.BZ2File(f)
    elif compression == "xz":
        f = lzma.LZMAFile(f)
    elif compression == "gzip":
        f = gzip.GzipFile(fileobj=f)
    try:
        yield _CheckedStream(f, path, compression)
        if isinstance(raw, _HashingReader):
            raw.drain()
    finally:
        f.close()
        raw.close()


def _iter_blocks(stream, block_bytes: int | None = None) -> Iterator[np.ndarray]:
    """Yield uint8 arrays of complete lines (each ending in a newline).

    A line longer than ``_config.MAX_LINE_BYTES`` is an error naming it: the unfinished
    line's pieces were concatenated again at every block (quadratic) until memory ran out.
    """
    block_bytes = block_bytes or _BLOCK_BYTES
    max_line = _config.MAX_LINE_BYTES
    pieces: list[bytes] = []  # the unfinished line
    held = 0
    lines = 0  # complete lines yielded
    while True:
        data = stream.read(block_bytes)
        if not data:
            if pieces:
                yield np.frombuffer(b"".join(pieces) + b"\n", dtype=np.uint8)
            return
        cut = data.rfind(b"\n")
        first = data.find(b"\n") if cut >= 0 else len(data)
        if held + first > max_line:  # lines after the first are shorter than a block
            _line_too_long(stream, lines + 1)
        if cut < 0:
            pieces.append(data)
            held += len(data)
            continue
        if pieces:
            block = np.frombuffer(b"".join([*pieces, data[: cut + 1]]), dtype=np.uint8)
        else:
            block = np.frombuffer(data, dtype=np.uint8, count=cut + 1)
        lines += data.count(b"\n", 0, cut + 1)
        yield block
        pieces = [data[cut + 1 :]] if cut + 1 < len(data) else []
        held = len(data) - cut - 1


def _line_too_long(stream, line: int):
    raise ValueError(
        f"{getattr(stream, 'path', 'the input')}, line {line}: longer than "
        f"{_nbytes(_config.MAX_LINE_BYTES)} without a line break; a text file holds one row "
        "a line: check that this is one, or raise daskauc._config.MAX_LINE_BYTES if its rows "
        "are that long")


#: the first lines used to detect the format and the dense layout: at most this many lines
#: and, after the first line (always read whole), about this many bytes.
_HEAD_LINES = 20


_HEAD_BYTES = 2**20


def _head_lines(path: str, compression: str | None) -> list[tuple[int, str]]:
    """The first non-blank, non-comment lines as ``(line_index, text)``."""
    out: list[tuple[int, str]] = []
    held = 0
    max_line = _config.MAX_LINE_BYTES
    with _open_text(path, compression) as f:
        for i, raw in enumerate(iter(lambda: f.readline(max_line + 1), b"")):
            if len(raw) > max_line and not raw.endswith(b"\n"):
                _line_too_long(f, i + 1)
            text = raw.decode("utf-8", "replace").split("#", 1)[0].strip()
            if text:
                out.append((i, text))
                held += len(text)
                if len(out) >= _HEAD_LINES or held > _HEAD_BYTES:
                    break
    return out


def _detect_format(path: str, head: list[tuple[int, str]]) -> str:
    name = os.path.basename(path)
    stem, ext = os.path.splitext(name)
    if ext.lower() in _COMPRESSION_EXT:
        ext = os.path.splitext(stem)[1]
    ext = ext.lower()
    if ext in _LIBSVM_EXT:
        return "libsvm"
    if ext in _DENSE_EXT:
        return "csv"
    pair = re.compile(r"\s\d+:\S")  # a token after the label that starts with "index:"
    if any(pair.search(text) for _, text in head):
        return "libsvm"
    return "csv"


def _iter_fields(text: str, delim: int) -> Iterator[str]:
    """The fields of a line, one at a time (a wide line held as a list of Python strings
    took about 60 bytes a field, 30 times its text)."""
    if delim < 0:
        for m in re.finditer(r"\S+", text):
            yield m.group()
        return
    sep, start = chr(delim), 0
    while True:
        end = text.find(sep, start)
        if end < 0:
            yield text[start:].strip()
            return
        yield text[start:end].strip()
        start = end + 1


_IS_WORD = np.ones(256, dtype=bool)
_IS_WORD[[9, 10, 11, 12, 13, 32]] = False


def _count_fields(text: str, delim: int) -> int:
    """The number of fields of a line (whitespace runs counted 1 MiB at a time)."""
    if delim >= 0:
        return text.count(chr(delim)) + 1
    raw = text.encode("utf-8", "replace")
    n, prev = 0, False
    for a in range(0, len(raw), 1 << 20):
        w = _IS_WORD[np.frombuffer(raw, dtype=np.uint8, count=min(1 << 20, len(raw) - a),
                                   offset=a)]
        n += int(w[0] and not prev) + int(np.count_nonzero(w[1:] & ~w[:-1]))
        prev = bool(w[-1])
    return n


def _is_number(tok: str) -> bool:
    try:
        float(tok.strip("\"'"))
    except ValueError:
        return False
    return True


def _looks_like_header(text: str, delim: int, label_col: int) -> bool:
    fields = _iter_fields(text, delim)
    if not any(_is_number(t) for k, t in enumerate(fields) if k != label_col):
        return True  # names, not values
    # a header written by a dataframe library: the column numbers 0..k-1 or 1..k
    zero_based = one_based = True
    k = 0
    for k, t in enumerate(_iter_fields(text, delim), 1):
        try:
            v = int(t.strip("\"'"))
        except ValueError:
            return False
        zero_based &= v == k - 1
        one_based &= v == k
        if not (zero_based or one_based):
            return False
    return k >= 3


def check_unique_names(names, where: str) -> None:
    """Refuse two columns of one name (a header's, a table's), counted from 1."""
    first: dict[str, int] = {}
    for k, name in enumerate(names):
        if name in first:
            raise ValueError(f"{where}: columns {first[name] + 1} and {k + 1} are both named "
                             f"{name!r} (counting from 1); rename one")
        first[name] = k


def _dense_layout(path, head, delimiter, header, label_column, n_features,
                  label_name: str | None = None) -> dict:
    ext = os.path.splitext(path)[1].lower()
    if ext in _COMPRESSION_EXT:
        ext = os.path.splitext(os.path.splitext(path)[0])[1].lower()
    first_line, first = head[0]
    if delimiter is None:
        if ext in _DENSE_EXT:
            delim = ord(_DENSE_EXT[ext])
        else:
            delim = ord(",") if "," in first else -1
    else:
        delim = -1 if delimiter == " " else ord(delimiter)
    n_cols = _count_fields(first, delim)
    if n_cols < 2:
        raise ValueError(f"{path}, line {first_line + 1}: found {n_cols} field(s); need the "
                         "label and at least one feature (check the delimiter)")
    if label_name is not None:  # a named label column: the first line is the header
        if header is False:
            raise ValueError(f"label={label_name!r} names a column, but header=False")
        fields = [t.strip("\"'") for t in _iter_fields(first, delim)]
        if label_name not in fields:
            shown = ", ".join(repr(t) for t in fields[:20]) + (" ..." if n_cols > 20 else "")
            raise ValueError(f"{path}: no column named {label_name!r} in the header (line "
                             f"{first_line + 1}) for the label; columns: {shown}")
        label_column, header = fields.index(label_name), True
    if not -n_cols <= label_column < n_cols:
        raise ValueError(f"label_column={label_column} is out of range for {n_cols} columns")
    label_col = label_column % n_cols
    if header is None:
        header = _looks_like_header(first, delim, label_col)
    if n_features is not None and n_features != n_cols - 1:
        raise ValueError(f"{path} has {n_cols - 1} feature columns but n_features={n_features}")
    names = None
    if header:
        fields = [t.strip("\"'") for t in _iter_fields(first, delim)]
        names = [t for k, t in enumerate(fields) if k != label_col]
        if all(_is_number(t) for t in names):  # column numbers written by a library
            names = None
        else:  # two features of one name: scoring by name would feed one column into both
            check_unique_names(fields, f"{path}, line {first_line + 1}")
    return {"delim": delim, "n_cols": n_cols, "label_col": label_col, "header": bool(header),
            "header_line": first_line, "n_features": n_cols - 1, "feature_names": names,
            "label_name": fields[label_col] if header else None}
