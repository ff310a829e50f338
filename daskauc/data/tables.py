"""Columnar input: Parquet files and directories (and CSV with ``categorical="onehot"``) read
as Arrow record batches into full row chunks.

* The source is opened as a :mod:`pyarrow.dataset` (a file, a directory of part files, hive
  partitions; local or any fsspec URL with ``storage_options``). Only the columns needed are
  read (column projection) and the rows arrive one record batch at a time (row groups
  streamed), so memory is bounded by a batch and a row chunk, whatever the file's size.
* Which columns are what (:func:`_plan_columns`): the label column (``label=``; by default a
  column named ``label``, ``y``, ``target`` or ``class``), the features (every other column
  unless ``features=`` / ``drop=`` say otherwise). A numeric or boolean column is one
  feature; a text or categorical column is refused by name, or one-hot encoded with
  ``categorical="onehot"`` (its levels found by a first pass over that column only, at most
  ``_config.MAX_ONEHOT_LEVELS`` of them). Any other type (dates, lists) is refused by name.
* Labels are coded by their text as in a text ingest (:mod:`daskauc.data.labels`): numbers
  compare as numbers, text as text, and a missing label is an error naming its row.
* A missing or non-finite feature value is an error naming its column and row.
* Before any work: every file's columns are compared from the footers (:func:`check_schemas`)
  and two features of one name are refused (:func:`_check_feature_names`). The pages' CRC
  checksums, where the writer wrote them (Spark does by default), are verified as the rows
  are read: a damaged page is an error naming its file (:func:`checked_pages`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import _config
from ..store.protocol import is_url, local_path, resolve_path
from .parse import _Chunk, _overflow_advice
from .sources import check_unique_names

#: column names taken for the label when ``label`` is not given (compared case-insensitively)
LABEL_NAMES = ("label", "y", "target", "class")


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.dataset as pads
    except ImportError as exc:  # pragma: no cover - pyarrow is a test dependency
        raise ImportError("reading Parquet needs pyarrow: pip install 'daskauc[parquet]' "
                          "(or pip install pyarrow)") from exc
    return pa, pc, pads


PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")


def is_parquet(path, storage_options: dict | None = None) -> bool:
    """True for a ``.parquet`` / ``.pq`` file or a directory (local or URL) holding them."""
    p = os.fspath(path).rstrip("/")
    return p.lower().endswith(PARQUET_SUFFIXES) or parquet_files(p, storage_options) is not None


def parquet_files(source, storage_options: dict | None = None) -> list[str] | None:
    """The Parquet files of a file or directory (sorted; names starting with ``_`` or ``.``
    skipped, as Parquet readers do); None when ``source`` is neither."""
    path = resolve_path(source)
    if is_url(path):
        import fsspec

        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        if not fs.exists(root):
            return None
        if fs.isfile(root):
            return [path] if root.lower().endswith(PARQUET_SUFFIXES) else None
        proto = path.split("://", 1)[0]
        found = sorted(p for p in fs.find(root) if _is_part(p[len(root):]))
        return [f"{proto}://{p}" for p in found] or None
    path = local_path(path)
    if os.path.isfile(path):
        return [path] if path.lower().endswith(PARQUET_SUFFIXES) else None
    if not os.path.isdir(path):
        return None
    found = []
    for where, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        found += [os.path.join(where, f) for f in files if _is_part(f)]
    return sorted(found) or None


def _is_part(rel: str) -> bool:
    parts = [p for p in rel.split("/") if p]
    return (bool(parts) and not any(p.startswith(("_", ".")) for p in parts)
            and parts[-1].lower().endswith(PARQUET_SUFFIXES))


def open_parquet(path: str, storage_options: dict | None = None):
    """The Parquet file or directory at ``path`` as a ``pyarrow.dataset.Dataset``."""
    _, _, pads = _pyarrow()
    p = os.fspath(path)
    if is_url(p):
        import fsspec

        fs, root = fsspec.core.url_to_fs(p, **(storage_options or {}))
    else:
        if not os.path.exists(p):
            raise FileNotFoundError(f"no such file or directory: {p}")
        fs, root = None, p
    pa, _, _ = _pyarrow()
    # the pages' checksums verified where the writer wrote them (a file without them reads
    # as before: nothing to verify)
    fmt = pads.ParquetFileFormat(default_fragment_scan_options=pads.ParquetFragmentScanOptions(
        page_checksum_verification=True))
    try:
        return pads.dataset(root, format=fmt, filesystem=fs, partitioning="hive")
    except (pa.ArrowInvalid, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if "duplicate field names" in str(exc):  # name the columns
            import fsspec
            import pyarrow.parquet as pq

            for f in parquet_files(p, storage_options) or ():
                with fsspec.open(f, "rb", **(storage_options or {})) as source:
                    check_unique_names(pq.read_schema(source).names, f)
        raise ValueError(f"{p} cannot be read as Parquet (format='parquet'): "
                         f"{' '.join(str(exc).split())[:300]}") from None


@contextlib.contextmanager
def checked_pages(path: str):
    """Arrow's error for a Parquet page whose CRC checksum does not match its bytes (read
    with ``page_checksum_verification=True``) as one ``ValueError`` naming the file; any
    other error as it is."""
    try:
        yield
    except OSError as exc:
        if "checksum" not in str(exc).lower():
            raise
        raise ValueError(f"{path}: its data is damaged (a page checksum mismatch: "
                         f"{' '.join(str(exc).split())[:200]}); nothing was written") from None


def check_schemas(schemas: Sequence, files: Sequence[str], used: Callable[[str], bool],
                  advice: str = "") -> None:
    """Every file's columns (``schemas``, from the footers) against the first file's: a
    column for which ``used(name)`` is true must be in every file with one type. Raise
    naming the file and the column (missing, extra or of another type), and ``advice``."""
    if len(schemas) < 2:
        return
    first = {f.name: f.type for f in schemas[0]}
    for path, schema in zip(files[1:], schemas[1:], strict=True):
        types = {f.name: f.type for f in schema}
        why = None
        for name, t in first.items():
            if not used(name):
                continue
            if name not in types:
                why = f"{path} lacks the column {name!r} that {files[0]} has"
            elif not types[name].equals(t):
                why = f"{path}: column {name!r} is {types[name]} there but {t} in {files[0]}"
            if why:
                break
        extra = [n for n in types if n not in first and used(n)]
        if why is None and extra:
            why = f"{path} has a column {extra[0]!r} that {files[0]} lacks"
        if why:
            raise ValueError(f"{why}: the files of one table must agree on every column read"
                             f"{advice}")


@dataclass
class ColumnPlan:
    """What each column of a table becomes: the label, and the features in order."""

    label: str
    #: (column name, kind): kind "number" (one feature) or "onehot" (one per level)
    columns: list[tuple[str, str]]
    #: column name -> its levels (one-hot columns), in the order of their features
    levels: dict[str, list[str]] = field(default_factory=dict)

    @property
    def feature_names(self) -> list[str]:
        names = []
        for name, kind in self.columns:
            if kind == "number":
                names.append(name)
            else:
                names.extend(f"{name}={v}" for v in self.levels[name])
        return names

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def read_columns(self) -> list[str]:
        return [name for name, _ in self.columns] + [self.label]


def _kind(t) -> str:
    pa, _, _ = _pyarrow()
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) \
            or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_dictionary(t) or pa.types.is_string(t) or pa.types.is_large_string(t) \
            or getattr(pa.types, "is_string_view", lambda _: False)(t):
        return "text"
    return "other"


def _plan_columns(schema, where: str, *, label, features, drop, categorical,
                  other_names=()) -> ColumnPlan:
    """The label column and the feature columns of ``schema``, checked; raise naming any
    column that cannot be a feature."""
    names = list(schema.names)
    check_unique_names(names, where)
    shown = ", ".join(repr(n) for n in names[:20]) + (" ..." if len(names) > 20 else "")
    if label is None:
        found = [n for n in names if str(n).lower() in LABEL_NAMES]
        if len(found) != 1:
            why = "none" if not found else f"several ({found})"
            raise ValueError(
                f"{where}: which column holds the label? label= (CLI: --label) was not given "
                f"and {why} of the columns is named {' / '.join(LABEL_NAMES)}; columns: "
                f"{shown}")
        label = found[0]
    elif isinstance(label, int) and not isinstance(label, bool):
        if not -len(names) <= label < len(names):
            raise ValueError(f"{where}: label column {label} is out of range for "
                             f"{len(names)} columns")
        label = names[label]
    if label not in names:
        raise ValueError(f"{where}: no column named {label!r} for the label; columns: {shown}")
    drop = list(drop or ())
    for n in drop:  # a column of a later file only may be dropped too
        if n not in names and n not in other_names:
            raise ValueError(f"{where}: no column named {n!r}; columns: {shown}")
    for n in features or ():
        if n not in names:
            raise ValueError(f"{where}: no column named {n!r}; columns: {shown}")
    if features is not None:
        if label in features:
            raise ValueError(f"{where}: the label column {label!r} is also in features")
        chosen = [n for n in features if n not in drop]
    else:
        chosen = [n for n in names if n != label and n not in drop]
    if not chosen:
        raise ValueError(f"{where}: no feature column left (label {label!r}, drop {drop})")
    if _kind(schema.field(label).type) == "other":
        raise ValueError(f"{where}: the label column {label!r} has type "
                         f"{schema.field(label).type}; labels are numbers or text")
    columns, text, other = [], [], []
    for n in chosen:
        k = _kind(schema.field(n).type)
        if k == "other":
            other.append(f"{n!r} ({schema.field(n).type})")
        elif k == "text":
            text.append(n)
        columns.append((n, "number" if k == "number" else "onehot"))
    if other:
        raise ValueError(f"{where}: column(s) {', '.join(other)} cannot be features (numbers, "
                         "booleans and text are read); leave them out with drop=[...] "
                         "(CLI: --drop)")
    if text and categorical != "onehot":
        raise ValueError(
            f"{where}: column(s) {', '.join(repr(n) for n in text)} hold text, not numbers. "
            "Pass categorical='onehot' (CLI: --categorical onehot) to encode each as one "
            "0/1 feature per value, or leave them out with drop=[...] (CLI: --drop)")
    return ColumnPlan(label=label, columns=columns)


def _check_feature_names(plan: ColumnPlan, where: str) -> None:
    """Refuse two features of one name (a numeric column ``colour=red`` beside the one-hot
    ``colour``'s value ``red``): a model would have two features of that name, and scoring
    the raw table would feed one column into both."""
    seen: dict[str, str] = {}
    for name, kind in plan.columns:
        if kind == "number":
            made = [(name, f"the numeric column {name!r}")]
        else:
            made = [(f"{name}={v}", f"the one-hot column {name!r} (value {v!r})")
                    for v in plan.levels[name]]
        for feature, source in made:
            if feature in seen:
                raise ValueError(f"{where}: feature name {feature!r} comes from {seen[feature]} "
                                 f"and from {source}; rename a column, or leave one out with "
                                 "drop=[...] (CLI: --drop)")
            seen[feature] = source


def _as_text(array):
    """An Arrow array as strings (dictionary and numbers included)."""
    pa, pc, _ = _pyarrow()
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = pc.cast(array, pa.string())
    return array


def find_levels(batches: Iterator, plan: ColumnPlan, where: str) -> None:
    """Fill ``plan.levels`` from a pass over the one-hot columns' batches (sorted levels)."""
    cap = _config.MAX_ONEHOT_LEVELS
    onehot = [n for n, k in plan.columns if k == "onehot"]
    seen: dict[str, set] = {n: set() for n in onehot}
    row = 0
    for batch in batches:
        for n in onehot:
            col = batch.column(n)
            if col.null_count:
                _missing(where, n, row + _first_null(col))
            _, pc, _ = _pyarrow()
            seen[n].update(pc.unique(_as_text(col)).to_pylist())
            if len(seen[n]) > cap:
                raise ValueError(
                    f"{where}: column {n!r} has more than {cap:,} distinct values; is it an "
                    "ID or free text? leave it out with drop=[...], or raise "
                    "daskauc._config.MAX_ONEHOT_LEVELS")
        row += batch.num_rows
    plan.levels = {n: sorted(seen[n]) for n in onehot}


def _first_null(col) -> int:
    return int(np.flatnonzero(np.asarray(col.is_null()))[0])


def _missing(where: str, column: str, row: int):
    raise ValueError(f"{where}: column {column!r} has a missing value (first in row {row}, "
                     "0-based); impute or drop those rows before ingesting")


class TableChunks:
    """Full row chunks (:class:`~daskauc.data.parse._Chunk`) from Arrow record batches, with
    the label codes of :mod:`daskauc.data.parse` (``tokens``: raw label text -> code)."""

    def __init__(self, plan: ColumnPlan, where: str, dtype, chunk_rows: int):
        self.plan, self.where, self.dtype = plan, where, np.dtype(dtype)
        self.X = np.zeros((chunk_rows, plan.n_features), dtype=self.dtype)
        self.codes = np.zeros(chunk_rows, dtype=np.int32)
        self.lines = np.zeros(chunk_rows, dtype=np.int64)
        self.tokens: dict[bytes, int] = {}
        self.filled = 0
        self.row = 0  # rows of the source read so far
        self.offsets = []  # first feature of each column
        j = 0
        for name, kind in plan.columns:
            self.offsets.append(j)
            j += 1 if kind == "number" else len(plan.levels[name])

    def chunks(self, batches: Iterator) -> Iterator[_Chunk]:
        """The full row chunks of ``batches``, then the last one (call :meth:`reset` once a
        chunk is written)."""
        for batch in batches:
            a = 0
            while a < batch.num_rows:
                take = min(batch.num_rows - a, self.X.shape[0] - self.filled)
                self._fill(batch.slice(a, take))
                a += take
                if self.filled == self.X.shape[0]:
                    yield _Chunk(self.X, self.codes, self.lines)
        if self.filled:
            n = self.filled
            yield _Chunk(self.X[:n], self.codes[:n], self.lines[:n])

    def reset(self) -> None:
        self.filled = 0

    def _fill(self, batch) -> None:
        pa, pc, _ = _pyarrow()
        a, m = self.filled, batch.num_rows
        rows = slice(a, a + m)
        X = self.X
        for (name, kind), j in zip(self.plan.columns, self.offsets, strict=True):
            col = batch.column(name)
            if col.null_count:
                _missing(self.where, name, self.row + _first_null(col))
            if kind == "number":
                values = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
                with np.errstate(over="ignore"):
                    X[rows, j] = values
                bad = ~np.isfinite(X[rows, j])
                if bad.any():
                    r = int(np.flatnonzero(bad)[0])
                    what = (_overflow_advice(self.dtype) if np.isfinite(values[r])
                            else "is not a finite number")
                    raise ValueError(f"{self.where}: column {name!r}, row {self.row + r} "
                                     f"(0-based): {values[r]!r} {what}")
            else:
                levels = self.plan.levels[name]
                idx = pc.index_in(_as_text(col), value_set=pa.array(levels, pa.string()))
                if idx.null_count:  # a value the levels' pass did not see: the file changed
                    raise RuntimeError(f"{self.where} changed while it was read (column "
                                       f"{name!r} has a value its first pass did not see)")
                X[rows, j : j + len(levels)] = 0
                X[np.arange(a, a + m), j + np.asarray(idx.to_numpy(), dtype=np.int64)] = 1
        labels = batch.column(self.plan.label)
        if labels.null_count:
            r = _first_null(labels)
            raise ValueError(f"{self.where}: the label column {self.plan.label!r} has a "
                             f"missing value (first in row {self.row + r}, 0-based)")
        encoded = pc.dictionary_encode(_as_text(labels))
        table = self.tokens
        lut = np.array([table.setdefault(str(v).encode(), len(table))
                        for v in encoded.dictionary.to_pylist()], dtype=np.int32)
        if len(table) > _config.MAX_LABELS:
            raise ValueError(
                f"{self.where}: the label column {self.plan.label!r} has more than "
                f"{_config.MAX_LABELS:,} distinct values: is it a regression target or an ID? "
                "choose the label column with label= (CLI: --label)")
        self.codes[rows] = lut[np.asarray(encoded.indices.to_numpy(zero_copy_only=False),
                                          dtype=np.int64)]
        self.lines[rows] = np.arange(self.row, self.row + m)
        self.filled += m
        self.row += m


def iter_batches(dataset, columns: list[str], batch_rows: int) -> Iterator:
    """The record batches of ``columns``, one file after the other, in the files' order, read
    on this thread with no read-ahead: memory is about one row group. (The dataset scanner's
    read-ahead, even at one batch and one file, held 666 MiB of Arrow memory at once while a
    slower consumer wrote 1 GB of covtype copies; its default of 16 batches and 4 files
    more.)"""
    pa, _, pads = _pyarrow()
    for fragment in dataset.get_fragments():
        # hive partitions: a key's value is in the fragment's path, not in its file
        keys = pads.get_partition_keys(fragment.partition_expression) or {}
        own = [c for c in columns if c not in keys]
        with checked_pages(fragment.path):
            for batch in fragment.to_batches(columns=own, batch_size=batch_rows,
                                             batch_readahead=0, fragment_readahead=0,
                                             use_threads=False):
                if len(own) < len(columns):
                    n = batch.num_rows
                    batch = pa.RecordBatch.from_arrays(
                        [pa.array([keys[c]] * n) if c in keys else batch.column(c)
                         for c in columns], names=columns)
                yield batch


def plan_source(dataset, where: str, *, label=None, features: Sequence[str] | None = None,
                drop: Sequence[str] = (), categorical: str = "error",
                batch_rows: int = 65_536) -> ColumnPlan:
    """The column plan of a ``pyarrow.dataset`` (one-hot levels found by a pass over those
    columns only), checked before any work.

    The files of a directory are compared from their footers first (:func:`check_schemas`):
    a column read (the label, a feature, and without ``features`` every column not in
    ``drop``) must be in every file with one type; a column the ingest never reads (in
    ``drop``, or not among ``features``) may differ. Column projection never reads those, so
    they cannot change the store; any other difference would (Arrow reads every file as the
    first: a column only in a later file was dropped without a word, one missing from it
    failed naming no file)."""
    fragments = list(dataset.get_fragments())
    schemas = [f.physical_schema for f in fragments] if len(fragments) > 1 else []
    others = {n for s in schemas for n in s.names}
    plan = _plan_columns(dataset.schema, where, label=label, features=features, drop=drop,
                         categorical=categorical, other_names=others)
    read = set(plan.read_columns)
    check_schemas(schemas, [f.path for f in fragments],
                  lambda n: n not in drop and (features is None or n in read),
                  "; leave a column out with drop=[...] (CLI: --drop)")
    onehot = [n for n, k in plan.columns if k == "onehot"]
    if onehot:
        find_levels(iter_batches(dataset, onehot, batch_rows), plan, where)
    _check_feature_names(plan, where)
    return plan


def source_files(dataset) -> tuple[int, int]:
    """The number of files of a ``pyarrow.dataset`` and their total size in bytes."""
    fs = dataset.filesystem
    files = list(dataset.files)
    return len(files), int(sum(fs.get_file_info(f).size or 0 for f in files))
