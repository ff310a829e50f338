"""The LIBSVM / dense text parser: blocks of lines -> full row chunks.

Numba kernels (:mod:`daskauc.data._kernels`) parse a block of complete lines straight into a
dense ``chunk_rows x d`` buffer; :class:`_Parser` drives them and does what they hand back:

* values the exact fast path leaves to Python (converted equal to Python's ``float`` of the
  token, listed in a fixed-size list, ``_SLOW_CAPACITY``);
* label codes: labels are not converted while parsing, each row keeps a code for its raw
  label token (at most ``_config.MAX_LABELS`` distinct tokens), mapped to {-1, +1} once the
  pass is over (:mod:`daskauc.data.labels`);
* errors, each naming the file and the line: a malformed token, NaN or inf, a value that
  overflows the dtype, a ragged dense row, an index beyond ``n_features``, and the 0 index
  of a file read 1-based (:class:`_ZeroIndexSeen`, on which "auto" mode restarts 0-based).

:func:`_scan` is the cheap first pass: the rows, the extreme feature indices and where
index 0 occurs, which give the width and the index base before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .. import _config
from . import _kernels as K
from .sources import _iter_blocks, _open_text
from .space import _check_dense

logger = logging.getLogger("daskauc")


_SLOW_CAPACITY = 1 << 16
_TOKEN_BLOCK_BYTES = 8 * 2**20


def _shown(tok: str, limit: int = 80) -> str:
    """A token as quoted in an error message (a token can be a whole line of megabytes)."""
    return tok if len(tok) <= limit else f"{tok[:limit]}... ({len(tok):,} characters)"


def _overflow_advice(dtype) -> str:
    return (f"overflows {np.dtype(dtype).name} (largest {np.finfo(dtype).max:.6e}); pass "
            'dtype="float64" (CLI: --dtype float64)')


#: boolean text read as 1 / 0 (as pandas and Arrow write boolean columns)
_BOOLEANS = {"True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0, "TRUE": 1.0, "FALSE": 0.0}


class _ZeroIndexSeen(Exception):
    """A 0 feature index appeared while reading 1-based (auto mode restarts 0-based)."""


def _gather_tokens(buf: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Byte tokens ``buf[s:e]`` for each span, as a fixed-width ``S`` array (vectorized)."""
    lens = spans[:, 1] - spans[:, 0]
    width = max(int(lens.max()) if lens.size else 1, 1)
    offs = np.arange(width)
    idx = np.minimum(spans[:, :1] + offs, buf.shape[0] - 1)
    mat = np.where(offs < lens[:, None], buf[idx], 0).astype(np.uint8)
    return np.ascontiguousarray(mat).view(f"S{width}").ravel()


class _Chunk:
    """One parsed row chunk: X rows, label codes and the file line of each row."""

    __slots__ = ("X", "codes", "lines")

    def __init__(self, X, codes, lines):
        self.X, self.codes, self.lines = X, codes, lines


class _Parser:
    """Drive a parse kernel over blocks of lines; yield full row chunks."""

    def __init__(self, path: str, fmt: str, n_features: int, dtype: np.dtype, chunk_rows: int,
                 *, index_base: int = 1, label_col: int = 0, n_cols: int = 0, delim: int = -1,
                 feature_names: list[str] | None = None):
        self.path, self.fmt, self.index_base = path, fmt, index_base
        self.feature_names = feature_names
        self.label_col, self.n_cols, self.delim = label_col, n_cols, delim
        self.n_features = n_features
        self.X = np.zeros((chunk_rows, n_features), dtype=dtype)
        self.spans = np.zeros((chunk_rows, 2), dtype=np.int64)
        self.lines = np.zeros(chunk_rows, dtype=np.int64)
        self.codes = np.zeros(chunk_rows, dtype=np.int32)
        self.slow = np.zeros((_SLOW_CAPACITY, 4), dtype=np.int64)
        # [max index, min index, slow entries, values stored, line of the max index]
        self.stats = np.array([0, np.iinfo(np.int64).max, 0, 0, 0], dtype=np.int64)
        self.filled = 0
        self.line = 0
        self.resume = -1  # >= 0: the next call continues a row stopped by a full `slow`
        self.tokens: dict[bytes, int] = {}

    def _call(self, buf, pos):
        if self.fmt == "libsvm":
            return K._parse_libsvm(buf, self.X, self.spans, self.lines, self.slow, self.stats,
                                   pos, self.filled, self.line, self.index_base, self.resume)
        return K._parse_dense(buf, self.X, self.spans, self.lines, self.slow, self.stats,
                              pos, self.filled, self.line, self.label_col, self.n_cols,
                              self.delim, self.resume)

    @property
    def values_read(self) -> int:
        """LIBSVM index:value pairs stored so far."""
        return int(self.stats[3])

    def chunks(self, blocks: Iterator[np.ndarray], header_lines: int = 0) -> Iterator[_Chunk]:
        """The full row chunks of ``blocks``, then the last one; the first ``header_lines``
        lines are skipped. Call :meth:`reset` once a chunk is written."""
        for k, buf in enumerate(blocks):
            start = 0
            if k == 0 and header_lines:
                start = _skip_lines(buf, header_lines)
                self.line = header_lines
            yield from self.feed(buf, start)
        yield from self.finish()

    def feed(self, buf: np.ndarray, start: int = 0) -> Iterator[_Chunk]:
        pos = start
        while True:
            row0 = self.filled
            pos, r, line, status, err = self._call(buf, pos)
            if status < 0:
                self._raise(buf, status, err, line)
            if r > row0:
                self._codes(buf, row0, r)
            self.filled, self.line = r, line
            self._fix_slow(buf)
            if status == K.NNZ_FULL:
                self._grow()
            # SLOW_FULL: err says where the row resumes (the dense kernel's column); NNZ_FULL:
            # the CSR kernel resumes at the token it returned
            self.resume = err if status == K.SLOW_FULL else (0 if status == K.NNZ_FULL else -1)
            if status == K.FULL:
                yield self._emit()
            elif status == K.DONE:
                return

    def finish(self) -> Iterator[_Chunk]:
        if self.filled:
            yield self._emit()

    def _emit(self) -> _Chunk:
        n = self.filled
        X = self.X[:n]
        if not np.isfinite(X).all():
            r, c = np.argwhere(~np.isfinite(X))[0]
            raise ValueError(
                f"{self.path}, line {self.lines[r] + 1}: non-finite value {X[r, c]} in feature "
                f"column {c} (0-based); remove or impute NaN/inf before ingesting"
            )
        chunk = _Chunk(X, self.codes[:n], self.lines[:n])
        return chunk

    def reset(self) -> None:
        """Called by the consumer once it has written the emitted chunk."""
        if self.fmt == "libsvm":
            self.X[: self.filled] = 0
        self.filled = 0

    def check_dense(self, rows: int) -> None:
        """The densifying rule of :func:`_check_dense` over the rows read so far."""
        _check_dense(self.path, rows, self.X.shape[1], self.X.itemsize, int(self.stats[3]),
                     int(self.stats[0]), int(self.stats[4]) + 1, so_far=True)

    def _codes(self, buf, a, b) -> None:
        """Code rows a..b-1 by their raw label token, a few MiB of tokens at a time (rows x
        the longest token at once took 200 GB for one 1 MB label in a 200,000-row chunk)."""
        spans, table, cap = self.spans, self.tokens, _config.MAX_LABELS
        longest = int((spans[a:b, 1] - spans[a:b, 0]).max())
        step = max(1, _TOKEN_BLOCK_BYTES // max(1, longest))
        for s in range(a, b, step):
            e = min(b, s + step)
            before = len(table)
            uniq, inv = np.unique(_gather_tokens(buf, spans[s:e]), return_inverse=True)
            m = np.array([table.setdefault(bytes(t), len(table)) for t in uniq], dtype=np.int32)
            codes = self.codes[s:e] = m[inv.ravel()]
            if len(table) > cap:  # the row whose label is the first beyond the cap, in order
                new = np.flatnonzero(codes >= before)
                _, first = np.unique(codes[new], return_index=True)
                r = s + int(np.sort(new[first])[cap - before])
                tok = bytes(buf[spans[r, 0] : spans[r, 1]]).decode("utf-8", "replace")
                raise ValueError(
                    f"{self.path}, line {self.lines[r] + 1}: more than {cap:,} distinct labels "
                    f"(this one: {_shown(tok)!r}): is the label column a regression target or "
                    "an ID? check the format and label_column, or raise "
                    "daskauc._config.MAX_LABELS if the file really has that many classes")

    def _fix_slow(self, buf) -> None:
        k = int(self.stats[2])
        X = self.X
        for row, col, s, e in self.slow[:k]:
            tok = bytes(buf[s:e]).decode("utf-8", "replace").strip().strip("\"'")
            try:
                v = _BOOLEANS.get(tok)
                if v is None:
                    v = float(tok)
            except ValueError:
                names = self.feature_names
                raise ValueError(
                    f"{self.path}, line {self.lines[row] + 1}: cannot read {_shown(tok)!r} as "
                    + (f"a number (column {names[col]!r}); a text column can be one-hot "
                       "encoded with categorical='onehot' (CLI: --categorical onehot) or left "
                       "out with drop=[...] (CLI: --drop)" if names else
                       f"a number (feature column {col}, 0-based)")
                ) from None
            with np.errstate(over="ignore"):
                X[row, col] = v
            if np.isinf(X[row, col]) and np.isfinite(v):  # the fast path never overflows
                raise ValueError(
                    f"{self.path}, line {self.lines[row] + 1}: {_shown(tok)} in feature column "
                    f"{col} (0-based) {_overflow_advice(X.dtype)}")
        self.stats[2] = 0

    def _raise(self, buf, status, err, line) -> None:
        tail = buf[err:]
        blank = np.flatnonzero((tail == 9) | (tail == 10) | (tail == 13) | (tail == 32))
        end = err + (int(blank[0]) if blank.size else tail.shape[0])
        tok = _shown(bytes(buf[err:end]).decode("utf-8", "replace"))
        where = f"{self.path}, line {line + 1}"
        d = self.n_features
        if status == K.E_ZERO:
            if self.index_base == 1:
                raise _ZeroIndexSeen(where)
        if status == K.E_RANGE:
            raise ValueError(
                f"{where}: feature index in {tok!r} is beyond n_features={d} (indices read as "
                f"{self.index_base}-based); pass a larger n_features or leave it None"
            )
        if status in (K.E_INDEX, K.E_ZERO):
            raise ValueError(f"{where}: {tok!r} does not start with a valid feature index")
        if status == K.E_COLON:
            raise ValueError(f"{where}: token {tok!r} is not of the form index:value")
        if status == K.E_EMPTY:
            raise ValueError(f"{where}: empty value near {tok!r}")
        if status in (K.E_ORDER, K.E_DUPLICATE):
            what = "repeats" if status == K.E_DUPLICATE else "is smaller than"
            raise ValueError(
                f"{where}: the feature index of {tok!r} {what} the one before it on the line; "
                "LIBSVM / svmlight rows list their indices in increasing order, each once: "
                "sort the row's index:value pairs and add up (or drop) repeated indices")
        raise ValueError(
            f"{where}: expected {self.n_cols} fields (as in the first data line), found another "
            "number; check the delimiter and the rows"
        )


def _scan(path, compression, fmt, hasher) -> _ScanStats:
    """Rows, extreme feature indices and where index 0 occurs (LIBSVM), in one pass."""
    stats = np.array([0, -1, np.iinfo(np.int64).max, 0, 0, 0, 0, 0, 0, 0], dtype=np.int64)
    kernel = K._scan_libsvm if fmt == "libsvm" else K._scan_rows
    with _open_text(path, compression, hasher) as f:
        for buf in _iter_blocks(f):
            kernel(buf, stats)
    return _ScanStats(*(int(v) for v in stats))


@dataclass(frozen=True)
class _ScanStats:
    rows: int
    max_index: int
    min_index: int
    rows_with_zero: int
    rows_with_index: int
    lines: int
    first_zero_line: int
    first_line_without_zero: int
    values: int  # index:value tokens (LIBSVM)
    max_index_line: int  # 1-based

    def index_base(self, path) -> int:
        """"auto" mode: 0-based only for a file that is 0-based throughout (index 0 on every
        row with indices); one stray ``0:`` in a 1-based file is an error naming its line."""
        if self.rows_with_zero == 0:
            return 1
        if self.rows_with_zero == self.rows_with_index:
            logger.info("%s: every row has feature index 0; reading it as 0-based", path)
            return 0
        raise ValueError(
            f"{path}, line {self.first_zero_line}: feature index 0, but line "
            f"{self.first_line_without_zero} (and {self.rows_with_index - self.rows_with_zero - 1}"
            " other rows) has none: the file mixes 0-based and 1-based rows. Pass "
            "zero_based=True if it is 0-based (indices are then shifted down by one on every "
            "row) or correct that line")


def _skip_lines(buf: np.ndarray, n_lines: int) -> int:
    pos = 0
    for _ in range(n_lines):
        nl = np.flatnonzero(buf[pos:] == 10)
        pos = pos + int(nl[0]) + 1 if nl.size else buf.shape[0]
    return pos


class _CsrParser(_Parser):
    """:class:`_Parser` of LIBSVM lines into CSR row chunks (``_Chunk.X`` a canonical
    ``csr_matrix``): memory follows the non-zeros of a chunk, never rows x features."""

    def __init__(self, path: str, n_features: int, dtype: np.dtype, chunk_rows: int, *,
                 index_base: int = 1, nnz_hint: int = 1 << 16):
        self.path, self.fmt, self.index_base = path, "libsvm", index_base
        self.feature_names = None
        self.n_features, self.dtype = n_features, np.dtype(dtype)
        index = np.int32 if n_features < 2**31 else np.int64
        self.indptr = np.zeros(chunk_rows + 1, dtype=np.int64)
        self.indices = np.zeros(max(1, nnz_hint), dtype=index)
        self.data = np.zeros(max(1, nnz_hint), dtype=dtype)
        self.spans = np.zeros((chunk_rows, 2), dtype=np.int64)
        self.lines = np.zeros(chunk_rows, dtype=np.int64)
        self.codes = np.zeros(chunk_rows, dtype=np.int32)
        self.slow = np.zeros((_SLOW_CAPACITY, 4), dtype=np.int64)
        self.stats = np.array([0, np.iinfo(np.int64).max, 0, 0, 0], dtype=np.int64)
        self.filled = 0
        self.line = 0
        self.resume = -1
        self.tokens = {}

    def _call(self, buf, pos):
        return K._parse_libsvm_csr(buf, self.indptr, self.indices, self.data, self.spans,
                                   self.lines, self.slow, self.stats, pos, self.filled,
                                   self.line, self.index_base, self.n_features, self.resume)

    def _grow(self) -> None:
        """Double the value arrays (the chunk's rows hold more non-zeros than they had)."""
        self.indices = np.concatenate([self.indices, np.zeros_like(self.indices)])
        self.data = np.concatenate([self.data, np.zeros_like(self.data)])

    def _fix_slow(self, buf) -> None:
        k = int(self.stats[2])
        for pos, col, s, e in self.slow[:k]:
            tok = bytes(buf[s:e]).decode("utf-8", "replace").strip().strip("\"'")
            row = int(np.searchsorted(self.indptr[: self.filled + 1], pos, side="right")) - 1
            try:
                v = _BOOLEANS.get(tok)
                if v is None:
                    v = float(tok)
            except ValueError:
                raise ValueError(f"{self.path}, line {self._line_of(row) + 1}: cannot read "
                                 f"{_shown(tok)!r} as a number (feature column {col}, "
                                 "0-based)") from None
            with np.errstate(over="ignore"):
                self.data[pos] = v
            if np.isinf(self.data[pos]) and np.isfinite(v):
                raise ValueError(
                    f"{self.path}, line {self._line_of(row) + 1}: {_shown(tok)} in feature "
                    f"column {col} (0-based) {_overflow_advice(self.dtype)}")
        self.stats[2] = 0

    def _line_of(self, row: int) -> int:
        """The file line of ``row`` of the chunk (the row being read: the parser's line)."""
        return int(self.lines[row]) if row < self.filled else self.line

    def _emit(self) -> _Chunk:
        import scipy.sparse

        n = self.filled
        nnz = int(self.indptr[n])
        data = self.data[:nnz].copy()
        finite = np.isfinite(data)
        if not finite.all():
            pos = int(np.argmin(finite))
            r = int(np.searchsorted(self.indptr[: n + 1], pos, side="right")) - 1
            raise ValueError(
                f"{self.path}, line {self.lines[r] + 1}: non-finite value {data[pos]} in feature "
                f"column {self.indices[pos]} (0-based); remove or impute NaN/inf before "
                "ingesting")
        X = scipy.sparse.csr_matrix((data, self.indices[:nnz].copy(), self.indptr[: n + 1].copy()),
                                    shape=(n, self.n_features))
        return _Chunk(X, self.codes[:n], self.lines[:n])

    def reset(self) -> None:
        self.filled = 0
        self.indptr[0] = 0

    def check_dense(self, rows: int) -> None:
        """Sparse rows are never densified: nothing to check."""
