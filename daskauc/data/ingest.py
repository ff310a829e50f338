"""Ingest LIBSVM / svmlight text, dense delimited text, numpy and dask arrays into dataset stores.

A dataset store (see :mod:`daskauc._store`) is a Zarr group with ``X`` (n x d, float32 or
float64, chunked by rows only), ``y`` (n, int8 in {-1, +1}, the same row chunks) and its
provenance in the group attributes. Every write goes through the safe-write protocol of
:func:`~daskauc._store_write.writing_store`: an interrupted ingest never leaves a store that
opens as complete, and an existing store is only replaced with ``overwrite=True``.

How a text file is read (memory is bounded by a few row chunks, one block of text and one
line, whatever the input: a chunk is about ``_config.TARGET_CHUNK_BYTES`` or one row, a line
at most ``_config.MAX_LINE_BYTES``, the label table at most ``_config.MAX_LABELS`` tokens):

* The file is decompressed on the fly (``.bz2``, ``.xz``/``.lzma``, ``.gz``, or by magic bytes)
  and cut into blocks of complete lines (:mod:`daskauc.data.sources`) that numba kernels
  parse straight into a dense ``chunk_rows x d`` buffer (:mod:`daskauc.data.parse`). Numbers
  are converted exactly (equal to Python's ``float`` of the token).
* The width ``d`` must be known before the first chunk is written. For LIBSVM with
  ``n_features=None`` a first, cheap streaming scan finds the largest feature index and the
  row count (and whether indices are 0-based); with ``n_features`` given the file is read
  once. Dense text gets its width from its first line. ``shuffle=True`` always scans first,
  because the shuffle needs the row count. LIBSVM that would densify into something absurd
  (see ``allow_dense``) is refused before anything is written, and once the size is known
  the free space of the target's file system is checked before any work
  (:mod:`daskauc.data.space`).
* Damage to compressed input (truncated, corrupt) is one ``ValueError`` naming the file,
  wherever the stream is read.
* Labels are not converted while parsing: each row keeps a code for its raw label token and
  the codes are spilled to a temporary file. When the pass is over the label set is known,
  it is mapped to {-1, +1} by the rules of :func:`daskauc._labels.label_classes`
  (:mod:`daskauc.data.labels`) and ``y`` is written from the spilled codes.
* ``shuffle=True`` gives a uniformly random row permutation with bounded memory, through
  spill files beside the store (:mod:`daskauc.data.writers`).
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np

from .. import _compute, _config
from .._dataset import Dataset, open_dataset
from .._params import check_param, seed_sequence
from .._store import is_url, store_exists
from .._store_write import PendingStore, begin_store, check_writable, create_array, writing_store
from .._urls import nothing_at
from .._validation import SPARSE_ADVICE, as_row_chunked, check_not_empty, reject_sparse
from ..engine.stream import class_counts_block
from .labels import _array_label_table, _check_pm1, _label_params, _label_table, _to_pm1
from .parse import _overflow_advice, _Parser, _scan, _ZeroIndexSeen
from .sources import (
    _FORMATS,
    _compression_of,
    _DamagedInput,
    _dense_layout,
    _detect_format,
    _head_lines,
    _iter_blocks,
    _open_text,
)
from .space import _check_dense, _check_store_space, _failing_cleanly, _nbytes
from .tables import (
    TableChunks,
    is_parquet,
    iter_batches,
    open_parquet,
    plan_source,
    source_files,
)
from .writers import _check_text_space, _DirectWriter, _GuardedTarget, _ShuffleWriter, _spill_dir

__all__ = ["ingest", "ingest_array", "write_dataset", "PendingStore", "begin_store"]


def _check_common(dtype, chunk_rows, overwrite, store, shuffle, storage_options=None):
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64; got {dtype}")
    if chunk_rows is not None:
        check_param("chunk_rows", chunk_rows, int, low=1)
    check_param("shuffle", shuffle, bool)
    check_param("overwrite", overwrite, bool)
    check_writable(store, overwrite=overwrite, storage_options=storage_options)
    return dtype


# --------------------------------------------------------------------------------------------
# ingest from text
# --------------------------------------------------------------------------------------------


def ingest(
    source: str | os.PathLike,
    store: str | os.PathLike,
    *,
    format: str | None = None,
    n_features: int | None = None,
    pos_label=None,
    positive_classes: Sequence | None = None,
    label_column: int = -1,
    delimiter: str | None = None,
    header: bool | None = None,
    dtype="float32",
    chunk_rows: int | None = None,
    shuffle: bool = False,
    random_state=None,
    overwrite: bool = False,
    zero_based: bool | str = "auto",
    allow_dense: bool = False,
    label: str | int | None = None,
    positive=None,
    features: Sequence[str] | None = None,
    drop: Sequence[str] = (),
    categorical: str = "error",
    storage_options: dict | None = None,
) -> Dataset:
    """Ingest a Parquet file or directory, a CSV file or a LIBSVM/svmlight file into a Zarr
    dataset store.

    Parameters
    ----------
    source : path or URL
        A Parquet file or a directory of Parquet files (local or an fsspec URL such as
        ``s3://bucket/table/``, read with ``storage_options``), or a text file, optionally
        compressed (``.bz2``, ``.xz``/``.lzma``, ``.gz``, or detected from its first bytes;
        decompressed on the fly, never to disk).
    store : path or URL
        The dataset store to create.
    format : {"parquet", "libsvm", "svmlight", "csv", "dense"}, optional
        Detected when None: a ``.parquet``/``.pq`` file or a directory holding them is
        Parquet, ``.libsvm .svm .svmlight .t .trn .tst`` are LIBSVM, ``.csv .tsv`` dense;
        any other name is LIBSVM if its first lines hold ``index:value`` tokens, else dense
        text.
    label : str or int, optional
        The label column, by name (Parquet, or CSV with a header) or position. Parquet
        without it: the one column named ``label``, ``y``, ``target`` or ``class``. For text
        files ``label_column`` is the same by position.
    positive : label or list of labels, optional
        The positive class: one raw label (as ``pos_label``) or several, grouped against the
        rest (as ``positive_classes``). Without it, the larger of two labels is positive (the
        rule of ``pos_label``); the store's ``classes`` attribute records the result.
    features, drop : lists of column names, optional
        Parquet and CSV with a header: the columns to read as features (default: all but the
        label) and columns to leave out (an ID, a timestamp). Read by column projection:
        columns left out are never read from Parquet.
    categorical : {"error", "onehot"}
        A text column among the features is an error naming it ("error"), or one 0/1
        feature per distinct value ("onehot", named ``column=value``, at most
        ``_config.MAX_ONEHOT_LEVELS`` values a column). Columns are never dropped silently.
    storage_options : dict, optional
        fsspec options (credentials, endpoint) for a URL source and store.
    n_features : int, optional
        LIBSVM width. When None the largest index seen is used, which needs a first cheap
        streaming scan of the file; when given, the file is read once (and an index beyond it
        is an error).
    pos_label, positive_classes :
        Which raw labels are positive, as in :func:`daskauc._labels.label_classes`: with
        neither, the labels must be two-valued and the larger is positive (-1/+1, 0/1, 1/2,
        ``no``/``yes``); ``positive_classes=[...]`` groups a multi-class file. Numeric label
        tokens are compared as numbers (``1``, ``+1`` and ``1.0`` are one class).
    label_column : int
        Dense text: the column holding the label (negative counts from the end).
    delimiter : str, optional
        Dense text: one character, or None for a comma in ``.csv`` files, a tab in ``.tsv``
        files, else a comma if the first data line has one and any whitespace otherwise.
    header : bool, optional
        Dense text: whether the first line is a header. None detects it: a first line whose
        feature fields are all non-numeric, or that is just the column numbers 0..k-1 or 1..k
        (a first line with only some non-numeric fields is data, and fails with its line).
    dtype : {"float32", "float64"}
    chunk_rows : int, optional
        Rows per chunk; default from :func:`daskauc._config.chunk_rows_for` (about 64 MiB).
    shuffle : bool
        Write the rows in a uniformly random order (bounded memory, through a temporary spill
        file next to the store), so that chunks are exchangeable.
    random_state : None, int, SeedSequence or Generator
        Seed of the shuffle; its entropy is recorded in the attributes.
    overwrite : bool
        Replace an existing store (only once the new one is complete).
    zero_based : {"auto", True, False}
        LIBSVM index base. "auto" reads indices as 1-based, or as 0-based when every row
        with indices has index 0 (a file 0-based throughout); a file where only some rows have
        index 0 is an error naming the first such line and the first row without it (one
        stray ``0:`` must not shift every column of a 1-based file): pass ``True`` for a
        0-based file.
    allow_dense : bool
        LIBSVM: write the dense matrix even when it is absurdly larger than the data, that is
        larger than ``_config.DENSE_MAX_BYTES`` (1 GiB) and more than
        ``_config.DENSE_MAX_RATIO`` (100) times the bytes of the non-zero values read. Without
        it such an ingest is refused before anything is written (after the first scan; with
        ``n_features`` given and no shuffle, as soon as the rows read pass the rule), naming
        the largest feature index and its line. Memory stays bounded by one chunk either way.

    Returns
    -------
    Dataset
        The new store opened as dask arrays.

    Notes
    -----
    Parsing is done by numba kernels over blocks of decompressed bytes; a row chunk is
    written as soon as it is full, so memory is bounded by a few chunks, one 8 MiB block and
    one line (at most ``_config.MAX_LINE_BYTES``). Lines are split at ``#`` (comments), blank
    lines are skipped, LIBSVM ``qid:`` tokens are ignored and a repeated index keeps its last
    value. Errors (a malformed token, NaN or inf, a value that overflows float32, a ragged
    dense row, more than ``_config.MAX_LABELS`` distinct labels, a line too long) name the
    file and the line; a truncated or corrupt compressed file is a ``ValueError`` naming the
    file, the format and the cause. Where the size is known before writing (after the first
    scan), a target file system without room for the store and the spill files is refused
    before any work (``_config.CHECK_FREE_SPACE``). The attributes record the counts,
    the classes mapped to -1 and +1, the source (path, format, compression, sha256 of the
    stored bytes, size, mtime), the creation parameters, the dtype, the chunking and the
    shuffle seed.
    """
    path = os.fspath(source)
    if is_url(path) and not store_exists(path, storage_options):  # before any other request
        raise FileNotFoundError(f"no input at {path}: {nothing_at(path)}")
    pos_label, positive_classes = _positive_args(positive, pos_label, positive_classes)
    if categorical not in ("error", "onehot"):
        raise ValueError(f"categorical must be 'error' or 'onehot'; got {categorical!r}")
    if format == "parquet" or (format is None and is_parquet(path, storage_options)):
        dtype = _check_common(dtype, chunk_rows, overwrite, store, shuffle, storage_options)
        dataset = open_parquet(path, storage_options)
        return _ingest_table(dataset, path, "parquet", store, label=label, features=features,
                             drop=drop, categorical=categorical, pos_label=pos_label,
                             positive_classes=positive_classes, dtype=dtype,
                             chunk_rows=chunk_rows, shuffle=shuffle, random_state=random_state,
                             overwrite=overwrite, storage_options=storage_options)
    if is_url(path):
        raise ValueError(f"{path}: a text file is read from a local path; copy it locally, or "
                         "convert it to Parquet to read it from object storage")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory with no Parquet files; give a "
                                "Parquet directory, or one LIBSVM or CSV file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    dtype = _check_common(dtype, chunk_rows, overwrite, store, shuffle, storage_options)
    if n_features is not None:
        check_param("n_features", n_features, int, low=1)
    check_param("label_column", label_column, int)
    if zero_based not in ("auto", True, False):
        raise ValueError(f"zero_based must be 'auto', True or False; got {zero_based!r}")
    if header not in (None, True, False):
        raise ValueError(f"header must be None, True or False; got {header!r}")
    if format is not None and format not in _FORMATS:
        raise ValueError(f"format must be one of {sorted(_FORMATS)} or None; got {format!r}")
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1):
        raise ValueError(f"delimiter must be a single character or None; got {delimiter!r}")

    compression = _compression_of(path)
    head = _head_lines(path, compression)
    if not head:
        raise ValueError(f"{path} holds no data lines")
    fmt = _FORMATS[format] if format is not None else _detect_format(path, head)

    opts: dict[str, Any] = {"fmt": fmt, "compression": compression}
    if isinstance(label, int) and not isinstance(label, bool):
        label_column, label = label, None
    if fmt == "csv":
        opts.update(_dense_layout(path, head, delimiter, header, label_column, n_features,
                                  label_name=label))
        if categorical == "onehot" or features is not None or drop:
            if not opts["header"]:
                raise ValueError(f"{path}: features, drop and categorical='onehot' name "
                                 "columns, and this file has no header line")
            return _ingest_table(
                _csv_dataset(path, opts), path, "csv", store,
                label=opts["label_name"], features=features, drop=drop,
                categorical=categorical, pos_label=pos_label,
                positive_classes=positive_classes, dtype=dtype, chunk_rows=chunk_rows,
                shuffle=shuffle, random_state=random_state, overwrite=overwrite,
                storage_options=storage_options)
    else:
        if header:
            raise ValueError("header=True applies to dense text, not to LIBSVM files")
        if label is not None or features is not None or drop or categorical != "error":
            raise ValueError("label, features, drop and categorical name columns of a "
                             "Parquet or CSV source; a LIBSVM file has none (its label is "
                             "the first token of each line)")

    params = {
        "format": fmt, "n_features": n_features,
        **_label_params(pos_label, positive_classes),
        "label": label, "label_column": label_column, "delimiter": delimiter,
        "header": header,
        "dtype": dtype.name, "chunk_rows": chunk_rows, "shuffle": shuffle,
        "zero_based": zero_based, "allow_dense": allow_dense,
    }
    kw = dict(path=path, store=store, opts=opts, n_features=n_features, pos_label=pos_label,
              positive_classes=positive_classes, dtype=dtype, chunk_rows=chunk_rows,
              shuffle=shuffle, random_state=random_state, overwrite=overwrite, params=params,
              allow_dense=allow_dense, storage_options=storage_options)
    with _failing_cleanly(store):
        try:
            _ingest_text(zero_based=zero_based, **kw)
        except _ZeroIndexSeen as exc:
            if zero_based is False:
                raise ValueError(
                    f"{exc}: feature index 0 in a file read with zero_based=False") from None
            # read in one pass without the scan: scan now, then decide (or refuse) as above
            _scan(path, opts["compression"], "libsvm", []).index_base(path)  # 0, or mixed
            _ingest_text(zero_based=True, **kw)
    return open_dataset(store, storage_options=storage_options)


def _ingest_text(*, path, store, opts, n_features, pos_label, positive_classes, dtype,
                 chunk_rows, shuffle, random_state, overwrite, params, zero_based,
                 allow_dense, storage_options) -> None:
    fmt, compression = opts["fmt"], opts["compression"]
    hasher: list = []
    n_rows = None
    index_base = 0 if zero_based is True else 1
    check_dense = fmt == "libsvm" and not allow_dense
    if fmt == "libsvm":
        # one row wider than the dense limit (a huge n_features) cannot even be parsed within
        # it: scan first so the rule is applied before any buffer is allocated
        wide = check_dense and n_features is not None and (
            n_features * dtype.itemsize > _config.DENSE_MAX_BYTES)
        if n_features is None or shuffle or wide:
            scan = _scan(path, compression, fmt, hasher)
            n_rows = scan.rows
            if zero_based == "auto":
                index_base = scan.index_base(path)
            if n_features is None:
                if scan.max_index < 0:
                    raise ValueError(f"{path}: no feature index found; pass n_features")
                n_features = scan.max_index + 1 - index_base
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

    def source_attrs() -> dict:
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

    _write_rows(store, where=path, feed=feed, tokens=lambda: parser.tokens, n_rows=n_rows, d=d,
                cr=cr, dtype=dtype, shuffle=shuffle, random_state=random_state,
                overwrite=overwrite, pos_label=pos_label, positive_classes=positive_classes,
                params=params, source_attrs=source_attrs, storage_options=storage_options)


def _write_rows(store, *, where: str, feed, tokens, n_rows: int | None, d: int, cr: int, dtype,
                shuffle: bool, random_state, overwrite: bool, pos_label, positive_classes,
                params: dict, source_attrs, storage_options: dict | None = None) -> None:
    """Write a store from parsed row chunks: ``feed(writer)`` writes every chunk (the spill
    files hold the label codes, and the shuffle's rows), then the labels ``tokens()`` are
    mapped to {-1, +1}, ``y`` is written and the attributes recorded (``source_attrs()``)."""
    seed = seed_sequence(random_state) if shuffle else None
    spill = _spill_dir(store)
    writer = None
    try:
        with writing_store(store, overwrite=overwrite, kind="dataset",
                           storage_options=storage_options) as group:
            zX = create_array(group, "X", shape=(n_rows or 0, d), chunks=(cr, d), dtype=dtype)
            if shuffle:
                writer = _ShuffleWriter(zX, spill, n_rows, cr, d, dtype, seed)
            else:
                writer = _DirectWriter(zX, spill, cr, known_rows=n_rows is not None)
            feed(writer)
            n = writer.n
            if n == 0:
                raise ValueError(f"{where} holds no data rows")
            if n_rows is not None and n != n_rows:
                raise RuntimeError(f"{where} changed while it was read ({n_rows} then {n} rows)")
            lut, classes = _label_table(tokens(), pos_label, positive_classes, where)
            zy = create_array(group, "y", shape=(n,), chunks=(cr,), dtype=np.int8)
            counts = writer.finish(zy, lut)
            group.update_attributes({
                "n_samples": int(n), "n_features": d,
                "n_negative": int(counts[0]), "n_positive": int(counts[1]),
                "classes": classes,
                **source_attrs(),
                "dtype": dtype.name, "chunk_rows": cr,
                "shuffled": bool(shuffle),
                "shuffle_seed": None if seed is None else str(seed.entropy),
                "params": params,
                "created": _dt.datetime.now(tz=_dt.timezone.utc).isoformat(),
            })
    finally:
        if writer is not None:
            writer.close()
        shutil.rmtree(spill, ignore_errors=True)


def _positive_args(positive, pos_label, positive_classes):
    """``positive`` (one label or a list) as ``(pos_label, positive_classes)``."""
    if positive is None:
        return pos_label, positive_classes
    if pos_label is not None or positive_classes is not None:
        raise ValueError("give the positive class once: positive=, or pos_label= / "
                         "positive_classes=, not both")
    if isinstance(positive, (str, bytes)) or not np.iterable(positive):
        return positive, None
    positive = list(positive)
    if not positive:
        raise ValueError("positive=[] names no class")
    return (positive[0], None) if len(positive) == 1 else (None, positive)


def _csv_dataset(path: str, opts: dict):
    """A CSV file with a header as a ``pyarrow.dataset`` (its layout found by
    :func:`_dense_layout`): read by Arrow when columns are chosen or one-hot encoded."""
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

    delim = opts["delim"]
    if delim < 0:
        raise ValueError(f"{path}: features, drop and categorical='onehot' read a delimited "
                         "file; this one is separated by whitespace (pass delimiter=)")
    fmt = pads.CsvFileFormat(
        parse_options=pacsv.ParseOptions(delimiter=chr(delim)),
        read_options=pacsv.ReadOptions(skip_rows=opts["header_line"], block_size=8 * 2**20))
    return pads.dataset(path, format=fmt)


def _ingest_table(dataset, path: str, fmt: str, store, *, label, features, drop, categorical,
                  pos_label, positive_classes, dtype, chunk_rows, shuffle, random_state,
                  overwrite, storage_options) -> Dataset:
    """Ingest a ``pyarrow.dataset`` (Parquet, or CSV read by Arrow) into a store."""
    plan = plan_source(dataset, path, label=label, features=features, drop=drop,
                       categorical=categorical)
    d = plan.n_features
    n_rows = int(dataset.count_rows())
    if n_rows == 0:
        raise ValueError(f"{path} holds no data rows")
    _check_text_space(store, n_rows, d, dtype.itemsize, shuffle)
    cr = int(chunk_rows or _config.chunk_rows_for(d, dtype.itemsize, n_rows))
    chunks = TableChunks(plan, path, dtype, cr)

    def feed(writer) -> None:
        batches = iter_batches(dataset, plan.read_columns, min(cr, 65_536))
        for chunk in chunks.chunks(batches):
            writer.write(chunk)
            chunks.reset()

    def source_attrs() -> dict:
        n_files, size = source_files(dataset)
        return {"source": path if is_url(path) else os.path.abspath(path),
                "source_format": fmt, "source_files": n_files, "source_size": size,
                "label_column": plan.label, "feature_names": plan.feature_names,
                "categories": plan.levels or None}

    params = {"format": fmt, "label": plan.label, "features": features, "drop": list(drop),
              "categorical": categorical, **_label_params(pos_label, positive_classes),
              "dtype": dtype.name, "chunk_rows": chunk_rows, "shuffle": shuffle}
    with _failing_cleanly(store):
        _write_rows(store, where=path, feed=feed, tokens=lambda: chunks.tokens, n_rows=n_rows,
                    d=d, cr=cr, dtype=dtype, shuffle=shuffle, random_state=random_state,
                    overwrite=overwrite, pos_label=pos_label,
                    positive_classes=positive_classes, params=params,
                    source_attrs=source_attrs, storage_options=storage_options)
    return open_dataset(store, storage_options=storage_options)


# --------------------------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------------------------


def ingest_array(
    X,
    y,
    store: str | os.PathLike,
    *,
    pos_label=None,
    positive_classes: Sequence | None = None,
    dtype=None,
    chunk_rows: int | None = None,
    shuffle: bool = False,
    random_state=None,
    overwrite: bool = False,
    attrs: dict | None = None,
) -> Dataset:
    """Write a numpy or dask ``X`` and labels ``y`` of any two-valued convention to a store.

    Parameters
    ----------
    X : array-like or dask array, shape (n_samples, n_features)
        Integer and boolean data become float64 unless ``dtype`` says otherwise.
    y : array-like or dask array, shape (n_samples,)
        Raw labels, mapped to {-1, +1} by ``pos_label`` / ``positive_classes`` as in
        :func:`daskauc._labels.label_classes`.
    store : path or URL
    dtype : {None, "float32", "float64"}
    chunk_rows : int, optional
        Rows per Zarr chunk (default: dask input keeps its first chunk size; numpy input gets
        :func:`daskauc._config.chunk_rows_for`).
    shuffle : bool
        Write the rows in a uniformly random order. numpy input is permuted one output chunk
        at a time; dask input with :func:`dask.array.shuffle` (a task-based shuffle, bounded
        memory per task).
    random_state : seed of the shuffle.
    overwrite : bool
    attrs : dict, optional
        Extra JSON-serializable attributes.

    Returns
    -------
    Dataset

    Notes
    -----
    numpy input is written from the client chunk by chunk (it is already in this process);
    dask input is written by :func:`write_dataset` in one compute on the current scheduler,
    with finiteness checked and class counts taken in that same pass. For dask ``y`` the
    distinct labels are found first (one small pass over ``y`` only). A value that
    overflows ``dtype`` (``1e308`` as float32) is an error naming ``X[row, col]``, found in
    the write pass. Before any work, a local target whose file system has less free space than
    X and y uncompressed is refused (``_config.CHECK_FREE_SPACE``).
    """
    if dtype is not None:
        dtype = np.dtype(dtype)
    _check_common(dtype or np.float64, chunk_rows, overwrite, store, shuffle)
    seed = seed_sequence(random_state) if shuffle else None
    base_attrs = {
        "source": "array", "source_format": "dask" if isinstance(X, da.Array) else "numpy",
        "shuffled": bool(shuffle),
        "shuffle_seed": None if seed is None else str(seed.entropy),
        "params": {**_label_params(pos_label, positive_classes),
                   "dtype": None if dtype is None else dtype.name, "chunk_rows": chunk_rows,
                   "shuffle": shuffle},
        "created": _dt.datetime.now(tz=_dt.timezone.utc).isoformat(),
        **(attrs or {}),
    }

    if isinstance(X, da.Array) or isinstance(y, da.Array):
        Xd = as_row_chunked(X, check_finite_values=False)  # finiteness checked when written
        if dtype is not None and Xd.dtype != dtype:  # a value that overflows dtype named
            Xd = Xd.map_blocks(_cast_block, dtype, dtype=dtype, token="daskauc-cast")
        yd = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=-1)
        if yd.ndim == 2 and yd.shape[1] == 1:
            yd = yd.ravel()
        if yd.ndim != 1 or yd.shape[0] != Xd.shape[0]:
            raise ValueError(f"y must be 1-D with {Xd.shape[0]} labels; got shape {yd.shape}")
        _check_store_space(store, *Xd.shape, Xd.dtype.itemsize)
        uniq = np.unique(_compute.compute(da.unique(yd))[0])
        if uniq.dtype.kind == "f" and not np.isfinite(uniq).all():
            raise ValueError("y contains NaN or infinity")
        positives, classes = _array_label_table(uniq, pos_label, positive_classes)
        yd = yd.rechunk((Xd.chunks[0],)).map_blocks(
            _to_pm1, positives, dtype=np.int8, token="daskauc-labels")
        cr = int(chunk_rows or max(Xd.chunks[0]))
        if shuffle:
            n = Xd.shape[0]
            perm = np.random.default_rng(seed).permutation(n)
            groups = [perm[a : a + cr].tolist() for a in range(0, n, cr)]
            Xd = da.shuffle(Xd, groups, axis=0)
            yd = da.shuffle(yd, groups, axis=0)
        return write_dataset(Xd, yd, store, attrs={"classes": classes, **base_attrs},
                             overwrite=overwrite, chunk_rows=cr)

    reject_sparse(X)
    Xn = np.asarray(X)
    if Xn.dtype == object:
        raise TypeError("X has dtype object; convert it to a numeric array first")
    if Xn.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {Xn.shape}")
    check_not_empty(Xn.shape)
    target = dtype or (Xn.dtype if Xn.dtype in (np.float32, np.float64) else np.dtype(np.float64))
    if Xn.dtype.kind not in "fiub":
        raise TypeError(f"X must hold real numbers; got dtype {Xn.dtype}")
    yn = np.asarray(y)
    if yn.ndim == 2 and yn.shape[1] == 1:
        yn = yn.ravel()
    if yn.ndim != 1 or yn.shape[0] != Xn.shape[0]:
        raise ValueError(f"X has {Xn.shape[0]} rows but y has shape {yn.shape}; they must match")
    _check_store_space(store, *Xn.shape, target.itemsize)
    if yn.dtype.kind == "f" and not np.isfinite(yn).all():
        row = int(np.argmin(np.isfinite(yn)))
        raise ValueError(f"y contains NaN or infinity (first at row {row})")
    if not np.isfinite(Xn).all():
        row = int(np.argwhere(~np.isfinite(Xn))[0][0])
        raise ValueError(f"X contains NaN or infinity (first in row {row}); impute or drop it")
    n, d = Xn.shape
    if n == 0:
        raise ValueError("X has no rows")
    positives, classes = _array_label_table(np.unique(yn), pos_label, positive_classes)
    ypm = _to_pm1(yn, positives)
    cr = int(chunk_rows or _config.chunk_rows_for(d, target.itemsize, n))
    perm = np.random.default_rng(seed).permutation(n) if shuffle else None
    with _failing_cleanly(store), \
            writing_store(store, overwrite=overwrite, kind="dataset") as group:
        zX, zy = _create_xy(group, n, d, cr, target)
        for a in range(0, n, cr):
            rows = slice(a, a + cr) if perm is None else perm[a : a + cr]
            zX[a : a + cr] = _cast_checked(Xn[rows], target, a if perm is None else rows)
            zy[a : a + cr] = ypm[rows]
        n_pos = int(np.count_nonzero(ypm > 0))
        group.update_attributes({
            "n_samples": n, "n_features": d, "n_positive": n_pos, "n_negative": n - n_pos,
            "classes": classes, "dtype": target.name, "chunk_rows": cr, **base_attrs})
    return open_dataset(store)


def _cast_checked(block: np.ndarray, target, rows: int | np.ndarray = 0) -> np.ndarray:
    """``block`` as ``target``; a finite value that becomes infinite is an error naming it
    (its row: ``rows`` + the block's row, or ``rows[r]`` for the rows of a shuffle)."""
    with np.errstate(over="ignore"):
        out = np.asarray(block, dtype=target)
    if out.dtype.itemsize < np.asarray(block).dtype.itemsize and out.dtype.kind == "f":
        bad = np.isinf(out)
        if bad.any():
            bad &= np.isfinite(block)
            if bad.any():
                r, c = (int(v) for v in np.argwhere(bad)[0])
                row = int(rows[r]) if isinstance(rows, np.ndarray) else rows + r
                raise ValueError(f"X[{row}, {c}] = {float(block[r, c])!r} "
                                 f"{_overflow_advice(target)}")
    return out


def _cast_block(block: np.ndarray, target, block_info=None) -> np.ndarray:
    return _cast_checked(block, target, block_info[0]["array-location"][0][0])


# --------------------------------------------------------------------------------------------
# the generic dask writer
# --------------------------------------------------------------------------------------------


def _create_xy(group, n: int, d: int, cr: int, dtype):
    """The empty ``X`` (``n`` x ``d``, ``dtype``) and int8 ``y`` of a store, ``cr`` rows a
    chunk."""
    return (create_array(group, "X", shape=(n, d), chunks=(cr, d), dtype=dtype),
            create_array(group, "y", shape=(n,), chunks=(cr,), dtype=np.int8))


def _counts_attrs(counts) -> dict:
    counts = np.asarray(counts).reshape(-1, 2).sum(axis=0)
    return {"n_negative": int(counts[0]), "n_positive": int(counts[1])}


def write_dataset(
    X,
    y,
    store: str | os.PathLike,
    *,
    attrs: dict | None = None,
    overwrite: bool = False,
    compute: bool = True,
    chunk_rows: int | None = None,
    storage_options: dict | None = None,
):
    """Write a row-chunked dask ``X`` and a {-1, +1} dask ``y`` to a dataset store.

    Parameters
    ----------
    X : dask array (n, d), chunked by rows (numpy is converted)
    y : dask array (n,) of -1 / +1 (checked lazily in the same pass; written as int8)
    store : path or URL
    attrs : dict, optional
        JSON-serializable attributes (provenance); ``n_samples``, ``n_features``, ``dtype``,
        ``chunk_rows`` and the class counts ``n_positive`` / ``n_negative`` are added.
    overwrite : bool
    compute : bool
        When False, nothing is written yet: a ``Delayed`` is returned whose computation (alone
        or in one ``dask.compute`` with other work, sharing the pass over the input) writes
        the arrays, counts the classes and then commits the store; it evaluates to the path.
    chunk_rows : int, optional
        Zarr chunk rows; default the largest dask row chunk. ``X`` and ``y`` are rechunked
        to exactly that (each dask chunk one Zarr chunk), so parallel writes never share a
        Zarr chunk.

    Returns
    -------
    Dataset, or Delayed when ``compute=False``.
    """
    # finiteness is checked in the write pass; not with _validation.check_finite, whose fixed
    # key name collides when two writes share one graph (split_store)
    Xd = as_row_chunked(X)
    yd = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=-1)
    if yd.ndim != 1 or yd.shape[0] != Xd.shape[0]:
        raise ValueError(f"y must be 1-D with {Xd.shape[0]} labels; got shape {yd.shape}")
    n, d = Xd.shape
    if n == 0:
        raise ValueError("X has no rows")
    _check_store_space(store, n, d, Xd.dtype.itemsize)
    cr = int(chunk_rows or max(Xd.chunks[0]))
    target = tuple([cr] * (n // cr) + ([n % cr] if n % cr else []))
    if Xd.chunks[0] != target:
        Xd = Xd.rechunk({0: cr})
    yd = yd.rechunk((Xd.chunks[0],)).map_blocks(_check_pm1, dtype=np.int8,
                                                token="daskauc-check-labels")
    meta = {**(attrs or {}), "n_samples": int(n), "n_features": int(d),
            "dtype": Xd.dtype.name, "chunk_rows": cr}
    counts = yd.map_blocks(class_counts_block, chunks=((1,) * yd.numblocks[0], (2,)), new_axis=1,
                           dtype=np.int64, token="daskauc-class-counts").sum(axis=0)

    if compute:
        with _failing_cleanly(store), \
                writing_store(store, overwrite=overwrite, kind="dataset", attrs=meta,
                              storage_options=storage_options) as group:
            targets = [_GuardedTarget(z) for z in _create_xy(group, n, d, cr, Xd.dtype)]
            try:
                stored = da.store([Xd, yd], targets, lock=False, compute=False)
                _, c = _compute.compute(stored, counts)
            except BaseException:
                for t in targets:
                    t.close_and_wait()
                raise
            group.update_attributes(_counts_attrs(c))
        return open_dataset(store, storage_options=storage_options)

    pending = begin_store(store, kind="dataset", overwrite=overwrite, attrs=meta,
                          storage_options=storage_options)
    zX, zy = _create_xy(pending.group, n, d, cr, Xd.dtype)
    stored = da.store([Xd, yd], [zX, zy], lock=False, compute=False)
    return pending.commit_delayed(stored, counts, attrs_from=_attrs_from_store_and_counts)


def _attrs_from_store_and_counts(_stored, counts) -> dict:
    return _counts_attrs(counts)
