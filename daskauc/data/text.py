"""Text input through the one door (:mod:`daskauc._readers`): LIBSVM / svmlight files and
dense delimited text (CSV, TSV, whitespace), optionally compressed.

A text file is read once from its start (after a first cheap scan when its width or row
count is needed first): it is ingested into a dataset store, never read by row ranges.
What its bytes are and how they are cut into lines is :mod:`daskauc.data.sources`; the
numba parser is :mod:`daskauc.data.parse`; the store is written by
:func:`daskauc.data.dataset_write.write_rows`.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass

from .. import _config
from .._params import Interval, check_param
from .._readers import Probe, Reader, StoreTarget, register_reader
from .._validation import SPARSE_ADVICE
from .dataset_write import write_rows
from .labels import _label_params
from .parquet import TableOptions, csv_dataset, ingest_table
from .parse import _CsrParser, _Parser, _scan, _ZeroIndexSeen
from .sources import (
    _compression_of,
    _DamagedInput,
    _dense_layout,
    _detect_format,
    _head_lines,
    _iter_blocks,
    _open_text,
)
from .space import _check_dense, _failing_cleanly, _nbytes
from .writers import _check_sparse_text_space, _check_text_space


@dataclass(frozen=True)
class LibsvmOptions:
    """The options of a LIBSVM / svmlight file (:func:`~daskauc.data.ingest`).

    Parameters
    ----------
    n_features : int, optional
        The width. When None the largest index seen is used, which needs a first cheap
        streaming scan of the file; when given, the file is read once (and an index beyond
        it is an error).
    zero_based : {"auto", True, False}
        The index base. "auto" reads indices as 1-based, or as 0-based when every row with
        indices has index 0 (a file 0-based throughout); a file where only some rows have
        index 0 is an error naming the first such line and the first row without it (one
        stray ``0:`` must not shift every column of a 1-based file): pass ``True`` for a
        0-based file.
    allow_dense : bool
        Write the dense matrix even when it is absurdly larger than the data, that is larger
        than ``_config.DENSE_MAX_BYTES`` (1 GiB) and more than ``_config.DENSE_MAX_RATIO``
        (100) times the bytes of the non-zero values read. Without it such an ingest is
        refused before anything is written (after the first scan; with ``n_features`` given
        and no shuffle, as soon as the rows read pass the rule), naming the largest feature
        index and its line. Memory stays bounded by one chunk either way. With
        ``rows="auto"`` it also keeps such a file dense.
    rows : {"auto", "sparse", "dense"}
        How the store keeps the rows. "sparse": CSR row chunks (a sparse store,
        docs/store_format.md), whose size and memory follow the non-zeros, however wide the
        file. "dense": a dense store (the rule of ``allow_dense`` applies). "auto" (default):
        sparse when the dense matrix would be both larger than
        ``_config.SPARSE_ROWS_MIN_BYTES`` (64 MiB, one chunk) and fewer than
        ``_config.SPARSE_ROWS_MAX_DENSITY`` (10 %) of its entries non-zero, and dense
        otherwise (so narrow files such as a9a or w8a stay dense: every estimator reads them).
    """

    n_features: int | None = None
    zero_based: bool | str = "auto"
    allow_dense: bool = False
    rows: str = "auto"

    def __post_init__(self):
        if self.n_features is not None:
            check_param("n_features", self.n_features, Interval(int, 1))
        if self.rows not in ("auto", "sparse", "dense"):
            raise ValueError(f"rows must be 'auto', 'sparse' or 'dense'; got {self.rows!r}")
        if self.zero_based not in ("auto", True, False):
            raise ValueError(f"zero_based must be 'auto', True or False; got "
                             f"{self.zero_based!r}")


@dataclass(frozen=True)
class DenseTextOptions(TableOptions):
    """The options of dense delimited text (:func:`~daskauc.data.ingest`): those of a table
    (:class:`TableOptions`; ``features``, ``drop`` and ``categorical="onehot"`` need a
    header line, ``label`` may be a position) and:

    Parameters
    ----------
    label_column : int
        The column holding the label (negative counts from the end).
    delimiter : str, optional
        One character, or None for a comma in ``.csv`` files, a tab in ``.tsv`` files, else
        a comma if the first data line has one and any whitespace otherwise.
    header : bool, optional
        Whether the first line is a header. None detects it: a first line whose feature
        fields are all non-numeric, or that is just the column numbers 0..k-1 or 1..k (a
        first line with only some non-numeric fields is data, and fails with its line).
    n_features : int, optional
        The number of feature columns, checked against the first line.
    """

    label_column: int = -1
    delimiter: str | None = None
    header: bool | None = None
    n_features: int | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.n_features is not None:
            check_param("n_features", self.n_features, Interval(int, 1))
        check_param("label_column", self.label_column, int)
        if self.header not in (None, True, False):
            raise ValueError(f"header must be None, True or False; got {self.header!r}")
        if self.delimiter is not None and (not isinstance(self.delimiter, str)
                                           or len(self.delimiter) != 1):
            raise ValueError(f"delimiter must be a single character or None; got "
                             f"{self.delimiter!r}")


class _TextReader(Reader):
    """A local text file, its format from ``format=``, its name or its first lines; asked
    after every other reader (any local file may be text)."""

    fallback = True

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return (probe.is_path and not probe.is_url and os.path.isfile(probe.path)
                and _layout(probe)["fmt"] == cls.name)


def _layout(probe: Probe, fmt: str | None = None) -> dict:
    """The compression, the first data lines and the format of the text file at the probe."""
    def find() -> dict:
        compression = _compression_of(probe.path)
        return {"compression": compression, "head": _head_lines(probe.path, compression)}

    found = probe.memo("text", find)
    if fmt is None:  # a file without data lines is dense text (whose ingest says so)
        fmt = _detect_format(probe.path, found["head"]) if found["head"] else "csv"
    return {**found, "fmt": fmt}


def _text_params(fmt: str, n_features, target: StoreTarget, libsvm: LibsvmOptions,
                 text: DenseTextOptions) -> dict:
    """The creation parameters a text ingest records (both formats' options)."""
    return {"format": fmt, "n_features": n_features,
            **_label_params(target.pos_label, target.positive_classes),
            "label": text.label, "label_column": text.label_column,
            "delimiter": text.delimiter, "header": text.header, "dtype": target.dtype.name,
            "chunk_rows": target.chunk_rows, "shuffle": target.shuffle,
            "zero_based": libsvm.zero_based, "allow_dense": libsvm.allow_dense,
            "rows": libsvm.rows}


def _open_text_file(path: str, fmt: str) -> dict:
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory with no Parquet files; give a "
                                "Parquet directory, or one LIBSVM or CSV file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    layout = _layout(Probe(path), fmt)
    if not layout["head"]:
        raise ValueError(f"{path} holds no data lines")
    return {"fmt": fmt, "compression": layout["compression"], "head": layout["head"]}


@register_reader
class LibsvmReader(_TextReader):
    """A LIBSVM / svmlight file: ``label index:value ...`` per line."""

    name = "libsvm"
    formats = ("svmlight",)
    Options = LibsvmOptions

    @classmethod
    def refuse_foreign(cls, names: list[str]) -> None:
        if "header" in names:
            raise ValueError("header=True applies to dense text, not to LIBSVM files")
        if {"label", "features", "drop", "categorical"} & set(names):
            raise ValueError("label, features, drop and categorical name columns of a "
                             "Parquet or CSV source; a LIBSVM file has none (its label is "
                             "the first token of each line)")

    @classmethod
    def ingest(cls, source, store, options: LibsvmOptions, target: StoreTarget) -> None:
        path = os.fspath(source)
        opts = _open_text_file(path, "libsvm")
        params = _text_params("libsvm", options.n_features, target, options,
                              DenseTextOptions())
        kw = dict(opts=opts, n_features=options.n_features, params=params,
                  allow_dense=options.allow_dense, rows=options.rows)
        with _failing_cleanly(store):
            try:
                _ingest_text(path, target, zero_based=options.zero_based, **kw)
            except _ZeroIndexSeen as exc:
                if options.zero_based is False:
                    raise ValueError(f"{exc}: feature index 0 in a file read with "
                                     "zero_based=False") from None
                # read in one pass without the scan: scan now, then decide (or refuse)
                _scan(path, opts["compression"], "libsvm", []).index_base(path)  # 0, mixed
                _ingest_text(path, target, zero_based=True, **kw)


@register_reader
class DenseTextReader(_TextReader):
    """Dense delimited text: one row per line, the label in one column."""

    name = "csv"
    formats = ("dense", "txt")
    Options = DenseTextOptions

    @classmethod
    def ingest(cls, source, store, options: DenseTextOptions, target: StoreTarget) -> None:
        path = os.fspath(source)
        opts = _open_text_file(path, "csv")
        label, label_column = options.label, options.label_column
        if isinstance(label, int) and not isinstance(label, bool):
            label_column, label = label, None
        opts.update(_dense_layout(path, opts.pop("head"), options.delimiter, options.header,
                                  label_column, options.n_features, label_name=label))
        if options.categorical == "onehot" or options.features is not None or options.drop:
            if not opts["header"]:
                raise ValueError(f"{path}: features, drop and categorical='onehot' name "
                                 "columns, and this file has no header line")
            table = TableOptions(label=opts["label_name"], features=options.features,
                                 drop=options.drop, categorical=options.categorical)
            return ingest_table(csv_dataset(path, opts), path, "csv", table, target)
        params = _text_params("csv", options.n_features, target, LibsvmOptions(),
                              DenseTextOptions(label=label, label_column=label_column,
                                               delimiter=options.delimiter,
                                               header=options.header))
        with _failing_cleanly(store):
            _ingest_text(path, target, opts=opts, n_features=options.n_features,
                         params=params, zero_based="auto", allow_dense=False)


def _ingest_text(path: str, target: StoreTarget, *, opts: dict, n_features, params: dict,
                 zero_based, allow_dense: bool, rows: str = "dense") -> None:
    fmt, compression = opts["fmt"], opts["compression"]
    store, dtype, chunk_rows, shuffle = (target.store, target.dtype, target.chunk_rows,
                                         target.shuffle)
    hasher: list = []
    n_rows = None
    index_base = 0 if zero_based is True else 1
    check_dense = fmt == "libsvm" and not allow_dense
    if fmt == "libsvm":
        # one row wider than the dense limit (a huge n_features) cannot even be parsed within
        # it: scan first so the rule is applied before any buffer is allocated; "auto" rows
        # scan a wide file to choose
        wide = n_features is not None and (
            (check_dense and n_features * dtype.itemsize > _config.DENSE_MAX_BYTES)
            or (rows == "auto" and not allow_dense and n_features >= _AUTO_SCAN_WIDTH))
        if n_features is None or shuffle or wide or rows == "sparse":
            scan = _scan(path, compression, fmt, hasher)
            n_rows = scan.rows
            if zero_based == "auto":
                index_base = scan.index_base(path)
            if n_features is None:
                if scan.max_index < 0:
                    raise ValueError(f"{path}: no feature index found; pass n_features")
                n_features = scan.max_index + 1 - index_base
            if rows == "sparse" or (rows == "auto" and not allow_dense and _sparse_is_better(
                    scan.rows, int(n_features), dtype.itemsize, scan.values)):
                return _ingest_sparse(path, target, compression, int(n_features), index_base,
                                      scan, params, hasher)
            if check_dense:
                _check_dense(path, scan.rows, int(n_features), dtype.itemsize, scan.values,
                             scan.max_index, scan.max_index_line)
                check_dense = False  # decided for the whole file
    else:
        n_features = opts["n_features"]
        if shuffle:
            n_rows = _scan(path, compression, fmt, hasher).rows
            n_rows -= int(opts["header"])
    if n_rows is not None and n_rows == 0:
        raise ValueError(f"{path} holds no data rows")
    d = int(n_features)
    if d * dtype.itemsize > _config.DENSE_MAX_BYTES:  # a chunk holds whole rows
        raise ValueError(
            f"{path}: one row of {d:,} features takes {_nbytes(d * dtype.itemsize)} "
            f"({dtype.name}), more than a chunk can hold (_config.DENSE_MAX_BYTES = "
            f"{_nbytes(_config.DENSE_MAX_BYTES)}), even with allow_dense=True. "
            + SPARSE_ADVICE)
    if n_rows is not None:  # the size is known (a first scan): check the space before work
        _check_text_space(store, n_rows, d, dtype.itemsize, shuffle)
    cr = int(chunk_rows or _config.chunk_rows_for(d, dtype.itemsize, n_rows))
    parser = _Parser(path, fmt, d, dtype, cr, index_base=index_base,
                     label_col=opts.get("label_col", 0), n_cols=opts.get("n_cols", 0),
                     delim=opts.get("delim", -1), feature_names=opts.get("feature_names"))

    def feed(writer) -> None:
        with _open_text(path, compression, None if hasher else hasher) as f:
            header_lines = opts["header_line"] + 1 if fmt == "csv" and opts["header"] else 0
            try:
                for chunk in parser.chunks(_iter_blocks(f), header_lines):
                    if check_dense:
                        parser.check_dense(writer.n + chunk.X.shape[0])
                    writer.write(chunk)
                    parser.reset()
            except ValueError as exc:
                # damaged data can decode to a malformed line before the decompressor
                # reaches the checksum that proves it damaged: report the damage
                if not isinstance(exc, _DamagedInput):
                    f.check_rest()
                raise

    write_rows(target, where=path, feed=feed, tokens=lambda: parser.tokens, n_rows=n_rows, d=d,
               cr=cr, params=params,
               source_attrs=lambda: _source_attrs(path, fmt, compression, hasher, index_base,
                                                  opts))


def _source_attrs(path: str, fmt: str, compression, hasher: list, index_base: int,
                  opts: dict) -> dict:
    """The provenance a text ingest records (the file, its hash, how it was read)."""
    stat = os.stat(path)
    return {
        "source": os.path.abspath(path), "source_format": fmt,
        "source_compression": compression, "source_sha256": hasher[0].sha256.hexdigest(),
        "source_size": int(stat.st_size),
        "source_mtime": _dt.datetime.fromtimestamp(
            stat.st_mtime, tz=_dt.timezone.utc).isoformat(),
        "zero_based": bool(index_base == 0) if fmt == "libsvm" else None,
        "header": opts.get("header"),
        "label_column": opts.get("label_name"),
        "feature_names": opts.get("feature_names"),
    }


#: "auto" rows scan a LIBSVM file of this many features or more (given ``n_features``) to
#: choose between dense and sparse; narrower ones are read dense in one pass
_AUTO_SCAN_WIDTH = 1024


def _sparse_is_better(n_rows: int, d: int, itemsize: int, values: int) -> bool:
    """The "auto" rule of :class:`LibsvmOptions`: the dense matrix would be large and mostly
    zeros."""
    dense = n_rows * d * itemsize
    return (dense > _config.SPARSE_ROWS_MIN_BYTES
            and values < _config.SPARSE_ROWS_MAX_DENSITY * n_rows * d)


def _ingest_sparse(path: str, target: StoreTarget, compression, d: int, index_base: int,
                   scan, params: dict, hasher: list) -> None:
    """A LIBSVM file as a sparse store (:mod:`daskauc.store.sparse`): CSR row chunks of about
    ``_config.TARGET_CHUNK_BYTES`` of values each, parsed straight into CSR; with
    ``shuffle``, in the dense shuffle's row order (``writers._SparseShuffleWriter``).
    Memory holds about one chunk of non-zeros either way."""
    from .._sparse import sparse_chunk_rows
    from ..store.sparse import index_dtype

    dtype = target.dtype
    if scan.rows == 0:
        raise ValueError(f"{path} holds no data rows")
    index_itemsize = index_dtype(d).itemsize
    _check_sparse_text_space(target.store, scan.rows, scan.values, dtype.itemsize,
                             index_itemsize, target.shuffle)
    cr = int(target.chunk_rows or sparse_chunk_rows(scan.rows, scan.values, dtype.itemsize,
                                                    index_itemsize))
    per_row = scan.values / scan.rows
    parser = _CsrParser(path, d, dtype, cr, index_base=index_base,
                        nnz_hint=int(per_row * min(cr, scan.rows) * 1.25) + 16)
    def feed(writer) -> None:
        with _open_text(path, compression, None) as f:  # the scan hashed the file
            try:
                for chunk in parser.chunks(_iter_blocks(f)):
                    writer.write(chunk)
                    parser.reset()
            except ValueError as exc:
                if not isinstance(exc, _DamagedInput):
                    f.check_rest()
                raise

    write_rows(target, where=path, feed=feed, tokens=lambda: parser.tokens, n_rows=scan.rows,
               d=d, cr=cr, params={**params, "rows": "sparse"},
               source_attrs=lambda: _source_attrs(path, "libsvm", compression, hasher,
                                                  index_base, {}),
               sparse=True)
