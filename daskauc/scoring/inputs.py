"""The inputs of a scoring pass, read by row chunks: a dataset or embedding store (its
``X``; the id is the row index) or a Parquet file or directory (pyarrow, the footers read
to plan and compared; a task reads the row groups of its rows, only the feature and id
columns, its pages' checksums verified), and the task that scores one chunk."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _config
from .._dataset import open_dataset
from .._store import (
    effective_storage_options,
    is_url,
    nothing_at,
    resolve_path,
    store_exists,
    stored_kind,
    url_filesystem,
)
from ..data.tables import check_schemas, checked_pages, parquet_files


def is_path(obj) -> bool:
    """A path or URL (a string or path-like), not an object."""
    return isinstance(obj, (str, os.PathLike))


def carried_options(url: str, storage_options) -> dict | None:
    """What a task opening ``url`` on a worker needs (:func:`effective_storage_options`);
    ``storage_options`` as given for a path."""
    return effective_storage_options(url, storage_options) if is_url(url) else storage_options


def open_input(source, id_column, storage_options, handle_unknown: str = "error"):
    """The input at ``source``: a dataset or embedding store (:class:`StoreInput`) or a
    Parquet file or directory (:class:`ParquetInput`); clear errors for anything else."""
    if not is_path(source):
        raise TypeError(f"source must be the path or URL of a dataset store or a Parquet file "
                        f"or directory; got {type(source).__name__}")
    kind = stored_kind(source, storage_options)
    if kind in ("dataset", "embedding"):
        if id_column is not None:
            raise ValueError(f"id_column={id_column!r}: the ids of a dataset store are its "
                             "row indices; id_column names a column of a Parquet input")
        return StoreInput(source, storage_options)
    if kind is not None:
        raise ValueError(f"{os.fspath(source)} holds a daskauc {kind} store, not a dataset "
                         "store or Parquet input")
    files = parquet_files(source, storage_options)
    if files is None:
        if not store_exists(source, storage_options):
            where = resolve_path(source)
            raise FileNotFoundError(f"no input at {os.fspath(source)}"
                                    + (f": {nothing_at(where)}" if is_url(where) else ""))
        raise ValueError(f"{os.fspath(source)} is neither a daskauc dataset store nor a "
                         "Parquet file or directory (*.parquet files)")
    return ParquetInput(source, files, id_column, storage_options, handle_unknown)


def _first_rows(starts) -> list[tuple[int, int]]:
    return list(zip(starts[:-1], starts[1:], strict=True))


class StoreInput:
    """A dataset or embedding store: its ``X`` in its row chunks (or ``chunk_rows``); the id
    is the row index."""

    format = "store"
    id_kind, id_type, feature_columns = "i", "int64", None

    def __init__(self, source, storage_options):
        self.ds = open_dataset(source, storage_options=storage_options)
        self.path = self.label = self.ds.path
        self.n_rows, self.width = self.ds.n_samples, self.ds.n_features
        names = self.ds.attrs.get("feature_names")
        self.names = [str(n) for n in names] if isinstance(names, list) else None

    def select_features(self, names, check) -> None:
        """Check the store's width (``check``) and, when both have them, its column names
        against the model's (or the map's)."""
        if names is not None and self.names is not None and names != self.names:
            missing = [n for n in names if n not in self.names][:5]
            raise ValueError(f"{self.label} has the columns {self.names[:10]} but the model "
                             f"was fitted on {names[:10]}" + (
                                 f" (missing: {missing})" if missing else "")
                             + "; score data with the columns the model was fitted on")
        check(self.width)

    def chunk(self, chunk_rows) -> None:
        X = self.ds.X if chunk_rows is None else self.ds.X.rechunk({0: chunk_rows})
        self.X, self.rows = X, int(max(X.chunks[0]))
        self.bounds = _first_rows(np.concatenate([[0], np.cumsum(X.chunks[0])]).tolist())

    def tasks(self, scorer, sink, token: str) -> list:
        import dask

        blocks = self.X.to_delayed().ravel()
        score = dask.delayed(_score_store_chunk, pure=False)
        return [score(block, a, i, scorer, sink, self.label,
                      dask_key_name=f"daskauc-predict-{token}-{i}")
                for i, (block, (a, _)) in enumerate(zip(blocks, self.bounds, strict=True))]


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
        self.bounds = _first_rows(edges)

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

    def tasks(self, scorer, sink, token: str) -> list:
        import dask

        reader = ParquetReader(self.feature_columns, self.id_column, self.dtype,
                                self.storage_options, self.label, self.read_columns,
                                self.encoded, self.levels, self.handle_unknown)
        score = dask.delayed(_score_parquet_chunk, pure=False)
        return [score(reader, self.pieces(a, b), a, i, scorer, sink,
                      dask_key_name=f"daskauc-predict-{token}-{i}")
                for i, (a, b) in enumerate(self.bounds)]


@dataclass(frozen=True)
class ParquetReader:
    """Reads the rows of some row groups: features as a float array, ids as Arrow."""

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


# ----------------------------------------------------------------------------- tasks


def _score_store_chunk(X, start: int, index: int, scorer, sink, label: str) -> int:
    if not np.isfinite(X).all():
        r, c = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
        raise ValueError(f"{label}: X[{start + r}, {c}] is {X[r, c]}; impute or drop the "
                         "non-finite values first")
    ids = np.arange(start, start + X.shape[0], dtype=np.int64)
    sink.write(index, start, ids, *scorer(X))
    return int(X.shape[0])


def _score_parquet_chunk(reader: ParquetReader, pieces, start: int, index: int, scorer,
                         sink) -> int:
    X, ids = reader.read(pieces, start)
    if not np.isfinite(X).all():
        r, c = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
        raise ValueError(f"{reader.label}: column {reader.columns[c]!r} is {X[r, c]} in row "
                         f"{start + r}; impute or drop the non-finite values first")
    if ids is None:
        ids = np.arange(start, start + X.shape[0], dtype=np.int64)
    sink.write(index, start, ids, *scorer(X))
    return int(X.shape[0])
