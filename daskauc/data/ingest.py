"""Ingest any input daskauc reads into a dataset store, through one door: its reader
(:mod:`daskauc._readers`) is found from ``format=`` or the input itself, its options are
its own (``options=`` or keywords), and what every ingest shares is one
:class:`~daskauc._readers.StoreTarget`.

A dataset store (see :mod:`daskauc.store.protocol`) is a Zarr group with ``X`` (n x d, float32 or
float64, chunked by rows only), ``y`` (n, int8 in {-1, +1}, the same row chunks) and its
provenance in the group attributes. Every write goes through the safe-write protocol of
:func:`~daskauc.store.write.writing_store`: an interrupted ingest never leaves a store that
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

import os
from collections.abc import Sequence

import numpy as np

from .._readers import StoreTarget, options_for, reader_for
from ..store.dataset import Dataset, open_dataset
from ..store.protocol import is_url, store_exists
from ..store.urls import nothing_at
from ..store.write import PendingStore, begin_store
from .arrays import check_common, ingest_array
from .dataset_write import write_dataset

__all__ = ["ingest", "ingest_array", "write_dataset", "PendingStore", "begin_store"]


def ingest(
    source: str | os.PathLike,
    store: str | os.PathLike,
    *,
    format: str | None = None,
    options=None,
    positive=None,
    pos_label=None,
    positive_classes: Sequence | None = None,
    dtype="float32",
    chunk_rows: int | None = None,
    shuffle: bool = False,
    random_state=None,
    overwrite: bool = False,
    storage_options: dict | None = None,
    **reader_options,
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
    options : TableOptions, LibsvmOptions or DenseTextOptions, optional
        The options of the input's reader as one object
        (:class:`~daskauc.data.TableOptions` for Parquet: ``label``, ``features``, ``drop``,
        ``categorical``; :class:`~daskauc.data.LibsvmOptions`: ``n_features``,
        ``zero_based``, ``allow_dense``; :class:`~daskauc.data.DenseTextOptions`: the table
        options and ``label_column``, ``delimiter``, ``header``, ``n_features``).
    **reader_options
        The same options as keywords (``ingest(path, store, n_features=10)``). A keyword
        that is an option of another reader than the input's is an error unless it has its
        default value (it would be ignored).
    positive : label or list of labels, optional
        The positive class: one raw label (as ``pos_label``) or several, grouped against the
        rest (as ``positive_classes``). Without it, the larger of two labels is positive (the
        rule of ``pos_label``); the store's ``classes`` attribute records the result.
    pos_label, positive_classes :
        Which raw labels are positive, as in :func:`daskauc._labels.label_classes`: with
        neither, the labels must be two-valued and the larger is positive (-1/+1, 0/1, 1/2,
        ``no``/``yes``); ``positive_classes=[...]`` groups a multi-class file. Numeric label
        tokens are compared as numbers (``1``, ``+1`` and ``1.0`` are one class).
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
    storage_options : dict, optional
        fsspec options (credentials, endpoint) for a URL source and store.

    Returns
    -------
    Dataset
        The new store opened as dask arrays.

    Notes
    -----
    Text is parsed by numba kernels over blocks of decompressed bytes; a row chunk is
    written as soon as it is full, so memory is bounded by a few chunks, one 8 MiB block and
    one line (at most ``_config.MAX_LINE_BYTES``). Lines are split at ``#`` (comments), blank
    lines are skipped, LIBSVM ``qid:`` tokens are ignored and a repeated index keeps its last
    value. Errors (a malformed token, NaN or inf, a value that overflows float32, a ragged
    dense row, more than ``_config.MAX_LABELS`` distinct labels, a line too long) name the
    file and the line; a truncated or corrupt compressed file is a ``ValueError`` naming the
    file, the format and the cause. Where the size is known before writing, a target file
    system without room for the store and the spill files is refused before any work
    (``_config.CHECK_FREE_SPACE``). The attributes record the counts, the classes mapped to
    -1 and +1, the source (path, format, compression, sha256 of the stored bytes, size,
    mtime), the creation parameters, the dtype, the chunking and the shuffle seed.
    """
    path = os.fspath(source)
    if is_url(path) and not store_exists(path, storage_options):  # before any other request
        raise FileNotFoundError(f"no input at {path}: {nothing_at(path)}")
    pos_label, positive_classes = _positive_args(positive, pos_label, positive_classes)
    reader = reader_for(source, format=format, storage_options=storage_options)
    options = options_for(reader, options, **reader_options)
    dtype = check_common(dtype, chunk_rows, overwrite, store, shuffle, storage_options)
    target = StoreTarget(store=store, dtype=dtype, chunk_rows=chunk_rows, shuffle=shuffle,
                         random_state=random_state, overwrite=overwrite, pos_label=pos_label,
                         positive_classes=positive_classes, storage_options=storage_options)
    reader.ingest(source, store, options, target)
    return open_dataset(store, storage_options=storage_options)


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
