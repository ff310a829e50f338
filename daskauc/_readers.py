"""One door for inputs: the reader protocol and the registry of readers.

A reader knows one kind of input (a LIBSVM file, dense text, Parquet, a dataset store, a
numpy or dask array, a dataframe). Every use of an input goes through it: :func:`ingest
<daskauc.data.ingest.ingest>` writes a store from it, batch scoring reads it by row ranges
(:func:`open_rows`), and an estimator given a path learns from it what the path holds
(:func:`reader_for`). A reader is a class registered with :func:`register_reader`:

``name``, ``formats``
    Its name, and the names ``format=`` accepts for it.
``Options``
    A frozen dataclass of its own options (``LibsvmOptions(n_features=...)``), given to
    ``ingest`` as ``options=`` or as keywords; a keyword of another reader is refused
    unless it has its default value.
``detect(probe)``
    Whether the input is of its kind. Readers are asked in registration order, those
    marked ``fallback`` (text, which takes any local file) last; ``probe``
    (:class:`Probe`) reads what they look at once: the store kind, the Parquet files, the
    compression and the first lines of a text file.
``ingest(source, store, options, target)``
    Write a dataset store (``target``: :class:`StoreTarget`, what every ingest shares).
``open_rows(source, options, storage_options, **scoring)``
    Plan row ranges and read a block of rows: a :class:`RowSource` (readers whose rows can
    be read by range: a store, Parquet). A text file is read once from its start: it is
    ingested, not read by range.

A new format is its module (a reader class, its options and its reading), an import in
``daskauc/data/__init__.py``, its tests and docs.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from ._sparse import is_sparse, is_sparse_dask, is_sparse_frame
from .store.dataset import Dataset, open_dataset
from .store.protocol import is_url, nothing_at, resolve_path, store_exists, stored_kind


class RowSource(Protocol):
    """An input read by row ranges (a store, Parquet), as batch scoring reads it.

    ``format``, ``path``, ``label`` (how messages name it), ``n_rows``; ``width`` and
    ``feature_columns`` once the features are chosen; ``id_kind``, ``id_type`` (the ids
    written beside the scores); ``rows`` and ``bounds`` once planned.
    """

    format: str
    n_rows: int

    def select_features(self, names, check) -> None:
        """Choose the feature columns (``names``: the model's, or None) and check their
        number (``check(width, what)``)."""

    def chunk(self, chunk_rows) -> None:
        """Plan the row ranges: ``self.bounds`` ((start, stop) each), ``self.rows``."""

    def blocks(self) -> list:
        """What the task of each range reads from (a delayed row chunk, the row groups)."""

    def block_reader(self):
        """A small picklable object whose ``read(block, start)`` gives the rows of one
        range in a task: a finite float array and their ids (None: the row numbers); a
        non-finite value is an error naming its row and column."""


class Probe:
    """What the readers look at to claim an input, each read once when first asked."""

    def __init__(self, source, storage_options: dict | None = None):
        self.source = source
        self.storage_options = storage_options
        self.is_path = isinstance(source, (str, os.PathLike))
        self.path = os.fspath(source) if self.is_path else None
        self._memo: dict[str, Any] = {}

    @functools.cached_property
    def is_url(self) -> bool:
        return self.is_path and is_url(self.path)

    @functools.cached_property
    def store_kind(self) -> str | None:
        """The daskauc store kind at the path (None: not a daskauc store)."""
        return stored_kind(self.source, self.storage_options) if self.is_path else None

    def memo(self, name: str, compute):
        """``compute()``, computed once per probe (what a reader looks at: the Parquet
        files, a text file's first lines), so that readers asked in turn share it."""
        if name not in self._memo:
            self._memo[name] = compute()
        return self._memo[name]


@dataclass(frozen=True)
class StoreTarget:
    """What every ingest shares: the store written, its rows and labels."""

    store: Any
    dtype: np.dtype
    chunk_rows: int | None
    shuffle: bool
    random_state: Any
    overwrite: bool
    pos_label: Any
    positive_classes: Any
    storage_options: dict | None


class Reader:
    """The base of a reader (see the module's docstring for the protocol)."""

    name: ClassVar[str]
    formats: ClassVar[tuple[str, ...]] = ()
    #: its options (a frozen dataclass); ``NoOptions`` for none
    Options: ClassVar[type]
    #: its rows can be read by range (``open_rows``)
    by_rows: ClassVar[bool] = False
    #: it claims what no other reader does (text: any local file), so it is asked last
    fallback: ClassVar[bool] = False

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return False

    @classmethod
    def ingest(cls, source, store, options, target: StoreTarget) -> None:
        raise ValueError(f"{cls.name} input is not ingested from a path here"
                         + cls._ingest_advice())

    @classmethod
    def _ingest_advice(cls) -> str:
        return ""

    @classmethod
    def refuse_foreign(cls, names: list[str]) -> None:
        """Say why the options ``names`` (of other readers) do not apply, if it can say
        more than that they are not its own."""

    @classmethod
    def open_rows(cls, source, options, storage_options, **scoring) -> RowSource:
        raise ValueError(f"{os.fspath(source)} is {cls.name} input, read once from its "
                         "start, not by row ranges: ingest it to a dataset store first "
                         "(daskauc.ingest, or daskauc ingest) and use the store")


@dataclass(frozen=True)
class NoOptions:
    """A reader without options of its own."""


#: reader name -> its class, in the order they are asked to detect an input
READERS: dict[str, type[Reader]] = {}


def register_reader(cls: type[Reader]) -> type[Reader]:
    """Register a reader class (a decorator)."""
    if READERS.setdefault(cls.name, cls) is not cls:
        raise TypeError(f"two readers named {cls.name}")
    if not dataclasses.is_dataclass(cls.Options):
        raise TypeError(f"{cls.__name__}.Options must be a dataclass")
    return cls


def formats() -> dict[str, str]:
    """Every name ``format=`` accepts -> the reader it names."""
    return {f: name for name, cls in READERS.items() for f in (name, *cls.formats)}


def reader_named(format: str) -> type[Reader]:
    known = formats()
    if format not in known:
        raise ValueError(f"format must be one of {sorted(known)} or None; got {format!r}")
    return READERS[known[format]]


def find_reader(probe: Probe) -> type[Reader] | None:
    """The first reader that claims the input ``probe`` looks at, or None: in registration
    order, the fallbacks (text) after every other reader."""
    ordered = sorted(READERS.values(), key=lambda cls: cls.fallback)
    return next((cls for cls in ordered if cls.detect(probe)), None)


def reader_for(source, *, format: str | None = None,
               storage_options: dict | None = None) -> type[Reader]:
    """The reader of ``source``: the one ``format`` names, else the first that claims it;
    an input no reader claims is an error saying what it is (missing, a directory ...)."""
    if format is not None:
        return reader_named(format)
    probe = Probe(source, storage_options)
    reader = find_reader(probe)
    if reader is not None:
        return reader
    if not probe.is_path:
        raise TypeError(f"no reader for {type(source).__name__} input; daskauc reads "
                        f"{', '.join(READERS)}")
    path = probe.path
    if probe.is_url:
        if not store_exists(source, storage_options):
            raise FileNotFoundError(f"no input at {path}: {nothing_at(resolve_path(path))}")
        raise ValueError(f"{path}: a text file is read from a local path; copy it locally, or "
                         "convert it to Parquet to read it from object storage")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory with no Parquet files; give a "
                                "Parquet directory, a dataset store, or one LIBSVM or CSV "
                                "file")
    raise FileNotFoundError(f"no such file: {path}")


def options_for(reader: type[Reader], options=None, **keywords):
    """``reader``'s options: ``options`` (its ``Options``) or the keywords given.

    A keyword that is another reader's option is refused when it differs from its default
    (it would be silently ignored), and one no reader knows is a ``TypeError``.
    """
    own = {f.name for f in dataclasses.fields(reader.Options)}
    if options is not None:
        if not isinstance(options, reader.Options):
            raise TypeError(f"options must be {reader.Options.__name__} for {reader.name} "
                            f"input; got {type(options).__name__}")
        if keywords:
            raise TypeError(f"give {reader.name}'s options once: options= or the keywords "
                            f"{sorted(keywords)}, not both")
        return options
    defaults = {f.name: f.default for cls in READERS.values()
                for f in dataclasses.fields(cls.Options)}
    unknown = sorted(k for k in keywords if k not in defaults)
    if unknown:
        raise TypeError(f"unknown reader options {unknown}; the readers' options are "
                        f"{sorted(defaults)}")
    given = [k for k, v in keywords.items() if k not in own and not _is_default(v, defaults[k])]
    if given:
        reader.refuse_foreign(given)
        raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} not an "
                         f"option of {reader.name} input (its options: {sorted(own) or 'none'})")
    return reader.Options(**{k: v for k, v in keywords.items() if k in own})


def _is_default(value, default) -> bool:
    if default is dataclasses.MISSING:
        return False
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return value is default or (type(value) is type(default) and value == default)


def open_rows(source, *, storage_options: dict | None = None, **scoring) -> RowSource:
    """``source`` (a path or URL) read by row ranges, by its reader (batch scoring)."""
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be the path or URL of a dataset store or a Parquet file "
                        f"or directory; got {type(source).__name__}")
    reader = find_reader(Probe(source, storage_options))
    if reader is None and not store_exists(source, storage_options):
        where = resolve_path(source)
        raise FileNotFoundError(f"no input at {os.fspath(source)}"
                                + (f": {nothing_at(where)}" if is_url(where) else ""))
    if reader is None or not reader.by_rows:
        raise ValueError(f"{os.fspath(source)} is neither a daskauc dataset store nor a "
                         "Parquet file or directory (*.parquet files)")
    return reader.open_rows(source, reader.Options(), storage_options, **scoring)


#: the stores opened in this call (``reading_once``): resolved path -> Dataset
_OPENED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("daskauc_opened",
                                                                     default=None)


@contextlib.contextmanager
def reading_once():
    """Within it, a store path is opened once (:func:`open_path`, :func:`opened_attrs`): the
    scope of one public call (an estimator's ``fit``), in which the store cannot be meant to
    change. Nested scopes share the outer one's stores."""
    if _OPENED.get() is not None:
        yield
        return
    token = _OPENED.set({})
    try:
        yield
    finally:
        _OPENED.reset(token)


def opened_attrs(path) -> dict | None:
    """The attributes of the store at ``path`` if this call has opened it already."""
    cache = _OPENED.get()
    ds = None if cache is None else cache.get(resolve_path(path))
    return None if ds is None else ds.attrs


def open_path(path, *, storage_options: dict | None = None, what: str = "X") -> Dataset:
    """The dataset store at ``path`` (an estimator's, a split's or an embedding's input),
    opened once within :func:`reading_once`.

    A path that holds another input (Parquet, a LIBSVM or CSV file) is an error saying so
    and how to make a store of it, found by the readers only when the path is not a store.
    """
    cache = _OPENED.get()
    key = resolve_path(path)
    if cache is not None and key in cache and storage_options is None:
        return cache[key]
    try:
        ds = open_dataset(path, storage_options=storage_options)
    except (FileNotFoundError, ValueError):
        reader = find_reader(Probe(path, storage_options))
        if reader is None or reader.name == "store":
            raise
        raise ValueError(f"{what} = {os.fspath(path)!r} is {reader.name} input; daskauc "
                         "learns from a dataset store: ingest it first (daskauc.ingest(path, "
                         "store) or daskauc ingest) and pass the store") from None
    if cache is not None and storage_options is None:
        cache[key] = ds
    return ds


# ----------------------------------------------------------------------------- the store


def row_ranges(starts) -> list[tuple[int, int]]:
    return list(zip(starts[:-1], starts[1:], strict=True))


@register_reader
class StoreReader(Reader):
    """A daskauc dataset or embedding store: its ``X`` by row chunks; the ids are the row
    numbers."""

    name = "store"
    formats = ("zarr",)
    Options = NoOptions
    by_rows = True

    @classmethod
    def detect(cls, probe: Probe) -> bool:
        return probe.store_kind is not None

    @classmethod
    def ingest(cls, source, store, options, target: StoreTarget) -> None:
        raise ValueError(f"{os.fspath(source)} is already a daskauc {Probe(source).store_kind} "
                         "store; use it as it is, or split it with split_store")

    @classmethod
    def open_rows(cls, source, options, storage_options, *, id_column=None,
                  handle_unknown="error") -> StoreInput:
        kind = stored_kind(source, storage_options)
        if kind not in ("dataset", "embedding"):
            raise ValueError(f"{os.fspath(source)} holds a daskauc {kind} store, not a dataset "
                             "store or Parquet input")
        if id_column is not None:
            raise ValueError(f"id_column={id_column!r}: the ids of a dataset store are its "
                             "row indices; id_column names a column of a Parquet input")
        return StoreInput(source, storage_options)


class StoreInput:
    """A dataset or embedding store read by row ranges: its ``X`` in its row chunks (or
    ``chunk_rows``); the id is the row index."""

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
        self.bounds = row_ranges(np.concatenate([[0], np.cumsum(X.chunks[0])]).tolist())

    def blocks(self) -> list:
        return list(self.X.to_delayed().ravel())

    def block_reader(self) -> StoreBlocks:
        return StoreBlocks(self.label)


@dataclass(frozen=True)
class StoreBlocks:
    """Reads a store's rows in a task: the block is the row chunk itself."""

    label: str

    def read(self, X: np.ndarray, start: int):
        if is_sparse(X):  # a sparse store's chunk: checked when it was read
            return X, None
        if not np.isfinite(X).all():
            r, c = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
            raise ValueError(f"{self.label}: X[{start + r}, {c}] is {X[r, c]}; impute or "
                             "drop the non-finite values first")
        return X, None


def is_sparse_input(X: Any) -> bool:
    """True for sparse rows: a scipy sparse matrix, a sparse pandas frame, a dask array of
    sparse blocks, or the path of a sparse dataset store."""
    if is_sparse(X) or is_sparse_frame(X) or is_sparse_dask(X):
        return True
    if isinstance(X, (str, os.PathLike)):
        try:
            return is_sparse_dask(open_path(X).X)
        except Exception:  # noqa: BLE001 - not a readable store: the fit says why
            return False
    return False
