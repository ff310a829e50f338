"""Parquet input, through the one door (:mod:`daskauc._readers`): a file, a directory of
part files or hive partitions, local or any fsspec URL.

* Ingest (:class:`ParquetReader`): opened as a :mod:`pyarrow.dataset` and read by column
  projection, one record batch at a time, into row chunks (:mod:`daskauc.data.tables` plans
  the columns: label, features, one-hot levels). A CSV file with a header whose columns are
  chosen or one-hot encoded is read the same way (:func:`csv_dataset`).
* By row ranges (:class:`ParquetInput`, batch scoring): the footers are read to plan the
  ranges and compared; a task reads the row groups of its rows (:class:`ParquetBlocks`), only
  the feature and id columns, its pages' checksums verified. A one-hot feature
  ``column=value`` of a model is made from its text column.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _config
from .._readers import Probe, Reader, StoreTarget, register_reader, row_ranges
from ..store.protocol import effective_storage_options, is_url, resolve_path, url_filesystem
from .dataset_write import write_rows
from .labels import _label_params
from .space import _failing_cleanly
from .tables import (
    PARQUET_SUFFIXES,
    TableChunks,
    check_schemas,
    checked_pages,
    iter_batches,
    open_parquet,
    parquet_files,
    plan_source,
    source_files,
)
from .writers import _check_text_space


@dataclass(frozen=True)
class TableOptions:
    """The options of a table, Parquet or CSV with a header (:func:`~daskauc.data.ingest`):
    which columns are what.

    Parameters
    ----------
    label : str or int, optional
        The label column, by name (Parquet, or CSV with a header) or position (CSV).
        Parquet without it: the one column named ``label``, ``y``, ``target`` or ``class``.
    features, drop : lists of column names, optional
        The columns to read as features (default: all but the label) and columns to leave
        out (an ID, a timestamp). Read by column projection: columns left out are never read
        from Parquet.
    categorical : {"error", "onehot"}
        A text column among the features is an error naming it ("error"), or one 0/1
        feature per distinct value ("onehot", named ``column=value``, at most
        ``_config.MAX_ONEHOT_LEVELS`` values a column). Columns are never dropped silently.
    """

    label: Any = None
    features: Any = None
    drop: Any = ()
    categorical: str = "error"

    def __post_init__(self):
        if self.categorical not in ("error", "onehot"):
            raise ValueError(f"categorical must be 'error' or 'onehot'; got "
                             f"{self.categorical!r}")


def carried_options(url: str, storage_options) -> dict | None:
    """What a task opening ``url`` on a worker needs (:func:`effective_storage_options`);
    ``storage_options`` as given for a path."""
    return effective_storage_options(url, storage_options) if is_url(url) else storage_options


@register_reader
class ParquetReader(Reader):
    """A Parquet file or directory (``.parquet``, ``.pq``, ``.parq`` part files)."""

    name = "parquet"
    Options = TableOptions
    by_rows = True

    @classmethod
    def files(cls, probe: Probe) -> list[str] | None:
        return probe.memo("parquet_files",
                          lambda: parquet_files(probe.source, probe.storage_options))

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return probe.is_path and (probe.path.rstrip("/").lower().endswith(PARQUET_SUFFIXES)
                                  or cls.files(probe) is not None)

    @classmethod
    def ingest(cls, source, store, options: TableOptions, target: StoreTarget) -> None:
        path = os.fspath(source)
        ingest_table(open_parquet(path, target.storage_options), path, "parquet", options,
                     target)

    @classmethod
    def open_rows(cls, source, options, storage_options, *, id_column=None,
                  handle_unknown="error") -> ParquetInput:
        from ..store.protocol import nothing_at

        files = cls.files(Probe(source, storage_options))
        if files is None:
            where = resolve_path(source)
            raise FileNotFoundError(f"no input at {os.fspath(source)}"
                                    + (f": {nothing_at(where)}" if is_url(where) else ""))
        return ParquetInput(source, files, id_column, storage_options, handle_unknown)


def csv_dataset(path: str, opts: dict):
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


def ingest_table(dataset, path: str, fmt: str, options: TableOptions,
                 target: StoreTarget) -> None:
    """Ingest a ``pyarrow.dataset`` (Parquet, or CSV read by Arrow) into a store."""
    label, features, drop, categorical = (options.label, options.features, options.drop,
                                          options.categorical)
    store, dtype, chunk_rows, shuffle = (target.store, target.dtype, target.chunk_rows,
                                         target.shuffle)
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
              "categorical": categorical,
              **_label_params(target.pos_label, target.positive_classes),
              "dtype": dtype.name, "chunk_rows": chunk_rows, "shuffle": shuffle}
    with _failing_cleanly(store):
        write_rows(target, where=path, feed=feed, tokens=lambda: chunks.tokens, n_rows=n_rows,
                   d=d, cr=cr, params=params, source_attrs=source_attrs)


def pyarrow_modules():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is an optional dependency
        raise ImportError("reading or writing Parquet needs pyarrow: pip install "
                          "'daskauc[parquet]' (or pip install pyarrow)") from exc
    return pa, pq


@contextlib.contextmanager
def _open_parquet(path: str, storage_options):
    """A ``pyarrow.parquet.ParquetFile`` (only its footer read until asked; its pages'
    checksums verified where the writer wrote them), closed after."""
    _, pq = pyarrow_modules()
    with contextlib.ExitStack() as stack:
        if is_url(path):
            fs, root = url_filesystem(path, storage_options)
            source = stack.enter_context(fs.open(root, "rb"))
        else:
            source = path
        pf = stack.enter_context(pq.ParquetFile(source, page_checksum_verification=True))
        yield pf


def arrow_kind(t) -> str:
    """``"b"``, ``"i"``, ``"u"``, ``"f"`` (numeric), ``"T"`` (text) or ``"O"`` (other)."""
    pa, _ = pyarrow_modules()
    for test, kind in ((pa.types.is_boolean, "b"), (pa.types.is_signed_integer, "i"),
                       (pa.types.is_unsigned_integer, "u"), (pa.types.is_floating, "f"),
                       (pa.types.is_string, "T"), (pa.types.is_large_string, "T")):
        if test(t):
            return kind
    return "O"


class ParquetInput:
    """A Parquet file or directory: its row groups, read by row ranges; the feature columns
    by the model's names or every numeric column but the id. A one-hot feature
    ``column=value`` (of a store ingested with ``categorical="onehot"``) is made from its text
    column; a value of that column the model has no feature for is an error naming the
    column, the value and the row, or (``handle_unknown="ignore"``) zeros for that column."""

    format = "parquet"
    width = None  # known once the columns are chosen

    def __init__(self, source, files, id_column, storage_options, handle_unknown="error"):
        self.path = resolve_path(source)
        storage_options = carried_options(self.path, storage_options)  # for the workers
        self.label, self.id_column, self.storage_options = self.path, id_column, storage_options
        self.handle_unknown = handle_unknown
        self.files = files
        self.groups: list[tuple[int, int, int]] = []  # (file, row group, rows)
        self.schemas = []
        for f, path in enumerate(files):  # the footers only
            with _open_parquet(path, storage_options) as pf:
                self.schemas.append(pf.schema_arrow)
                self.groups += [(f, g, pf.metadata.row_group(g).num_rows)
                                for g in range(pf.metadata.num_row_groups)]
        schema = self.schemas[0]
        self.n_rows = sum(n for _, _, n in self.groups)
        if self.n_rows == 0:
            raise ValueError(f"{self.label} has no rows")
        self.types = {name: schema.field(name).type for name in schema.names}
        if id_column is not None and id_column not in self.types:
            raise ValueError(f"{self.label} has no column {id_column!r} (id_column); its "
                             f"columns: {list(self.types)[:20]}")
        self.id_type = self.types[id_column] if id_column is not None else "int64"
        self.id_kind = arrow_kind(self.id_type) if id_column is not None else "i"

    def select_features(self, names, check) -> None:
        """The feature columns: ``names`` (the model's or the map's), each present and
        numeric, or every numeric or boolean column but the id; their number checked
        (``check``), and every file holding them with one type (an unused column may
        differ; without ``names`` every numeric column is used)."""
        pa, _ = pyarrow_modules()
        numeric = [n for n, t in self.types.items() if arrow_kind(t) in "biuf"]
        self.encoded = {}
        self.levels: dict[str, list[str]] = {}
        if names is not None:
            if len(set(names)) < len(names):
                twice = next(n for n in names if names.count(n) > 1)
                raise ValueError(f"the model has two features named {twice!r}: scoring by "
                                 "name would feed one column into both; refit it on a store "
                                 "ingested again (ingest refuses two features of one name)")
            # a feature "column=value" of a model fitted on a store ingested with
            # categorical="onehot": 1 where the text column holds the value, else 0; the
            # column's known values are those of the model's features
            for n in names:
                col = _onehot_column(n, self.types)
                if col is not None:
                    self.encoded[n] = (col, n[len(col) + 1 :])
                    self.levels.setdefault(col, []).append(n[len(col) + 1 :])
            numeric += list(self.encoded)
            missing = [n for n in names if n not in self.types and n not in self.encoded]
            if missing:
                raise ValueError(f"{self.label} lacks the columns {missing[:10]} the model was "
                                 f"fitted on (its columns: {list(self.types)[:20]})")
            bad = [f"{n} ({self.types[n]})" for n in names if n not in numeric]
            if bad:
                raise ValueError(f"{self.label}: the feature columns {bad[:10]} are not "
                                 "numeric")
            columns = list(names)
        else:
            columns = [n for n in numeric if n != self.id_column]
        shown = f"{columns[:10]}{' ...' if len(columns) > 10 else ''}"
        self.width = check(len(columns), f"numeric columns besides the id ({shown})"
                           if names is None else "features")
        self.feature_columns = columns
        self.dtype = np.float32 if all(c not in self.encoded and pa.types.is_float32(
            self.types[c]) for c in columns) else np.float64
        self.read_columns = list(dict.fromkeys(self.encoded.get(c, (c,))[0] for c in columns))
        need = self.read_columns + ([self.id_column] if self.id_column else [])
        # a model without names takes every numeric column: one of a later file is used too
        numeric_somewhere = set() if names is not None else {
            f.name for schema in self.schemas for f in schema if arrow_kind(f.type) in "biuf"}
        check_schemas(self.schemas, self.files,
                      lambda n: n in need or n in numeric_somewhere)

    def chunk(self, chunk_rows) -> None:
        if chunk_rows is None:  # ~8 MiB of float64 rows, in whole row groups if equal
            # (a task holds its rows twice, as Arrow columns and as floats; and inputs of a
            # few hundred MB make enough tasks to keep every worker busy to the end)
            target = _config.chunk_rows_for(self.width, 64, self.n_rows)
            largest = max(n for _, _, n in self.groups)
            chunk_rows = max(largest, (target // largest) * largest)
        self.rows = int(min(chunk_rows, self.n_rows))
        edges = list(range(0, self.n_rows, self.rows)) + [self.n_rows]
        self.bounds = row_ranges(edges)

    def pieces(self, a: int, b: int) -> list[tuple[str, int, int, int]]:
        """The row groups holding rows ``a:b``: (file, row group, first row, stop) each."""
        out, start = [], 0
        for f, g, n in self.groups:
            lo, hi = max(a, start), min(b, start + n)
            if lo < hi:
                out.append((self.files[f], g, lo - start, hi - start))
            start += n
            if start >= b:
                break
        return out

    def blocks(self) -> list:
        return [self.pieces(a, b) for a, b in self.bounds]

    def block_reader(self) -> ParquetBlocks:
        return ParquetBlocks(self.feature_columns, self.id_column, self.dtype,
                             self.storage_options, self.label, self.read_columns,
                             self.encoded, self.levels, self.handle_unknown)


@dataclass(frozen=True)
class ParquetBlocks:
    """Reads the rows of some row groups in a task: features as a finite float array, ids as
    Arrow."""

    columns: list
    id_column: str | None
    dtype: Any
    storage_options: dict | None
    label: str
    read_columns: list
    #: feature name -> (text column, value) of the one-hot features
    encoded: dict
    #: text column -> the values the model has a feature for
    levels: dict
    #: a value without a feature: "error" or "ignore" (zeros for that column)
    handle_unknown: str = "error"

    def read(self, pieces, start: int):
        pa, _ = pyarrow_modules()
        want = list(dict.fromkeys(self.read_columns
                                  + ([self.id_column] if self.id_column else [])))
        tables = []
        for path in dict.fromkeys(p[0] for p in pieces):  # each file opened once
            with _open_parquet(path, self.storage_options) as pf, checked_pages(path):
                tables += [pf.read_row_group(g, columns=want, use_threads=False)
                           .slice(lo, hi - lo) for p, g, lo, hi in pieces if p == path]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        X = np.empty((table.num_rows, len(self.columns)), dtype=self.dtype)
        codes: dict[str, np.ndarray] = {}  # text column -> each row's level (-1: none)
        for j, name in enumerate(self.columns):
            source, value = self.encoded.get(name, (name, None))
            column = table.column(source)
            if column.null_count:
                raise ValueError(self._null(source, column, start))
            if value is None:
                X[:, j] = column.to_numpy()
            else:
                if source not in codes:
                    codes[source] = self._codes(source, column, start)
                X[:, j] = codes[source] == self.levels[source].index(value)
        if not np.isfinite(X).all():
            r, c = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
            raise ValueError(f"{self.label}: column {self.columns[c]!r} is {X[r, c]} in row "
                             f"{start + r}; impute or drop the non-finite values first")
        ids = None
        if self.id_column is not None:
            ids = table.column(self.id_column).combine_chunks()
            if ids.null_count:
                raise ValueError(self._null(self.id_column, ids, start))
        return X, ids

    def _codes(self, name: str, column, start: int) -> np.ndarray:
        """Each row's index among the known values of the text column ``name``; a value
        without a feature is an error naming it and its row, or -1 (``"ignore"``)."""
        import pyarrow.compute as pc

        pa, _ = pyarrow_modules()
        levels = self.levels[name]
        index = pc.index_in(column, value_set=pa.array(levels, column.type))
        codes = np.asarray(pc.fill_null(index, -1).to_numpy(), dtype=np.int64)
        if self.handle_unknown == "error" and (codes < 0).any():
            r = int(np.flatnonzero(codes < 0)[0])
            shown = ", ".join(map(repr, levels[:10])) + (" ..." if len(levels) > 10 else "")
            raise ValueError(
                f"{self.label}: column {name!r} has the value {column[r].as_py()!r} in row "
                f"{start + r} (0-based), which the model was not fitted on (its values: "
                f"{shown}); pass handle_unknown='ignore' (CLI: --handle-unknown ignore) to "
                "score it as zeros for that column")
        return codes

    def _null(self, name: str, column, start: int) -> str:
        row = start + int(np.flatnonzero(np.asarray(column.is_null()))[0])
        return (f"{self.label}: column {name!r} has no value in row {row}; impute or drop "
                "the missing values first")


def _onehot_column(feature: str, types: dict) -> str | None:
    """The text column of a one-hot feature ``column=value`` (the first ``=`` after which a
    text column's name ends); None for a column of its own or no text column."""
    if feature in types:
        return None
    at = feature.find("=")
    while at > 0:
        t = types.get(feature[:at])
        if t is not None and arrow_kind(t) == "T":
            return feature[:at]
        at = feature.find("=", at + 1)
    return None
