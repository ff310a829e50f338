"""The scoring pass: everything checked before any work (:func:`plan_scores`), then one
task per row chunk that reads it, scores it and writes its part, in one dask compute
(:meth:`ScoringPlan.run`), and the output committed.

* The input is a daskauc dataset (or embedding) store, whose ids are the row indices, or a
  Parquet file or directory (only the feature columns and the id column are read), whose ids
  are a named column or the row index (:mod:`.inputs`).
* A task scores its chunk through the embedding map first when the model was fitted on an
  embedding and the input is raw; memory stays a few chunks per worker thread whatever the
  input's size; the model and map go to the workers once.
* The output's format comes from its name: ``NAME.zarr`` or ``NAME.parquet``
  (:mod:`.outputs`).
* Checked before any work: the model is fitted and calibrated; the input's columns and width
  match the model (or the map) and the map's output the model; the output is not an input
  and replaces nothing unasked.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _config
from .._compute import compute, share
from .._params import Interval, Options, check_param
from .._readers import StoreInput
from .._validation import check_input_map
from .._version import __version__
from ..composite.calibration import proba_block
from ..embed.embedding_store import map_sha256
from ..embed.nystroem import KMeansNystroem, load_embedding_map
from ..io import load_model
from ..store.protocol import is_url, resolve_path, store_exists, stored_kind
from ..store.write import check_output, create_array, writing_store
from .inputs import carried_options, is_path, open_input, tasks
from .outputs import (
    COLUMNS,
    KIND,
    Gate,
    ParquetSink,
    ZarrSink,
    begin_parquet,
    check_parquet_output,
    commit_parquet,
    output_format,
    remove_any,
)


@dataclass(frozen=True)
class ScoresWritten:
    """What :func:`write_scores` wrote: the output's path, its format (``"zarr"`` or
    ``"parquet"``), the rows and row chunks scored and the seconds the pass took."""

    path: str
    format: str
    n_rows: int
    n_chunks: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.n_rows / self.seconds if self.seconds > 0 else float("inf")


def write_scores(model, source, output, *, id_column: str | None = None, map=None,
                 overwrite: bool = False, storage_options: dict | None = None,
                 chunk_rows: int | None = None, handle_unknown: str = "error") -> ScoresWritten:
    """Score every row of ``source`` with a fitted model; write id, decision and probability.

    Parameters
    ----------
    model : fitted daskauc classifier, or the path of one saved by :func:`daskauc.save_model`
    source : str or path-like
        A dataset or embedding store (path or URL; its ``X`` is scored and the id is the row
        index, int64), or a Parquet file or directory (path or URL). Of a Parquet input only
        the feature columns and the id column are read: the columns named by the model's
        ``feature_names_in_`` (the map's, with ``map``) when it has them, else every numeric
        or boolean column except the id column, in the file's order.
    output : str, bytes or path-like
        ``NAME.zarr``: a Zarr group holding ``id``, ``decision_function`` and
        ``probability`` (1-D, the input's row chunks); ``NAME.parquet``: a directory of one
        part file per row chunk with those columns. Path or URL; a local name need not be
        UTF-8 (bytes, or a str from :func:`os.fsdecode`).
    id_column : str, optional
        Parquet input: the column written as the id, of any type (Zarr output takes integer,
        float or text ids). Default: the row index (int64).
    map : embedding store path, map store path or fitted feature map, optional
        For a model fitted on an embedding (``daskauc embed`` then ``daskauc fit``) and a raw
        input: the embedding store the model was fitted on (its map, and scaler statistics,
        are read from it: :func:`daskauc.load_embedding_map`), a map saved by
        ``KMeansNystroem.save``, or a fitted map object. Each chunk is mapped in the task
        that scores it.
    overwrite : bool, default False
        Replace an existing output (only scores daskauc wrote, or an empty directory).
    storage_options : dict, optional
        fsspec options of the source and the output URLs.
    chunk_rows : int, optional
        Rows per task and output chunk. Default: a store's own row chunks; for Parquet
        about 8 MiB of float64 features, in whole row groups where they are equal. A task
        scores its chunk in blocks of rows whose widest intermediate (an embedding, a kernel
        row over the centres) is about 64 MiB.
    handle_unknown : {"error", "ignore"}, default "error"
        A Parquet input scored by a model fitted on a store ingested with
        ``categorical="onehot"`` (features ``column=value``): a value of the text column the
        model has no feature for (unseen at ingest) is an error naming the column, the value
        and the row ("error", as scikit-learn's ``OneHotEncoder``), or scored as zeros in
        every feature of that column ("ignore"). The model's features give the known values.

    Returns
    -------
    ScoresWritten
        The output's path and format, the rows and chunks scored and the seconds taken.

    Notes
    -----
    ``decision_function`` and ``probability`` are the model's own on each chunk:
    ``probability = predict_proba(X)[:, 1]``, the probability of ``classes_[1]``, computed
    from the chunk's decision values by the model's calibration (as ``predict_proba`` does).
    A task's memory is its chunk, one block's intermediates (the map's output, a kernel
    block) and the chunk's scores; the one compute runs the tasks on the current scheduler
    (a distributed client if there is one), the model and map sent to the workers once.

    An interrupted or failed run never leaves an output that opens as complete: the Zarr
    group is committed, and the Parquet directory moved into place, only after every chunk
    was written (a hidden partial output left by a killed process is removed by the next
    write of the same output).
    """
    return plan_scores(model, source, output, id_column=id_column, map=map,
                       overwrite=overwrite, storage_options=storage_options,
                       chunk_rows=chunk_rows, handle_unknown=handle_unknown).run()


def plan_scores(model, source, output, *, id_column: str | None = None, map=None,
                overwrite: bool = False, storage_options: dict | None = None,
                chunk_rows: int | None = None, handle_unknown: str = "error") -> ScoringPlan:
    """Every check of :func:`write_scores` (same parameters), before any work; returns the
    plan whose :meth:`ScoringPlan.run` scores and writes."""
    check_param("overwrite", overwrite, bool)
    if chunk_rows is not None:
        check_param("chunk_rows", chunk_rows, Interval(int, 1))
    if id_column is not None:
        check_param("id_column", id_column, str)
    check_param("handle_unknown", handle_unknown, Options("error", "ignore"))
    if isinstance(output, bytes):  # a local name that is not UTF-8, as the OS gives it
        output = os.fsdecode(output)
    fmt = output_format(output)
    est, model_label = _load_model(model)
    fmap, map_label = _load_map(map)
    inp = open_input(source, id_column, storage_options, handle_unknown)
    slope = _slope(est, model_label)
    _check_map(est, model_label, fmap, map_label, inp)
    expects = fmap if fmap is not None else est
    inp.select_features(_feature_names(expects), _width_check(est, model_label, fmap,
                                                              map_label, inp.label))
    inp.chunk(chunk_rows)
    if fmt == "zarr" and inp.id_kind not in ("i", "u", "f", "T"):
        raise ValueError(f"the id column {id_column!r} of {inp.label} has type {inp.id_type}; a "
                         "Zarr output holds integer, float or text ids: write the scores to "
                         "Parquet (NAME.parquet), which keeps any type")
    inputs = [inp.path, model if is_path(model) else None, map if is_path(map) else None]
    expected = inp.n_rows * 24
    if fmt == "zarr":
        target = check_output(output, kind=KIND, overwrite=overwrite, inputs=inputs,
                              expected_bytes=expected, storage_options=storage_options)
    else:
        target = check_parquet_output(output, overwrite=overwrite, inputs=inputs,
                                       expected_bytes=expected,
                                       storage_options=storage_options)
    widest = max(_widest(est), _widest(fmap) if fmap is not None else 0, inp.width)
    scorer = _Scorer(est, fmap, slope, _feature_names(est),
                     None if fmap is None else _feature_names(fmap),
                     _config.chunk_rows_for(widest, 8))
    attrs = {"model": model_label, "model_class": type(est).__name__,
             "classes": _jsonable(getattr(est, "classes_", None)), "map": map_label,
             "source": inp.path, "source_format": inp.format, "id_column": id_column,
             "n_rows": int(inp.n_rows), "columns": list(COLUMNS),
             "chunk_rows": int(inp.rows), "feature_columns": inp.feature_columns}
    return ScoringPlan(scorer=scorer, input=inp, output=target, format=fmt,
                       overwrite=overwrite, storage_options=storage_options, attrs=attrs)


@dataclass
class ScoringPlan:
    """A checked scoring pass (:func:`plan_scores`); :meth:`run` does it."""

    scorer: Any
    input: Any
    output: str
    format: str
    overwrite: bool
    storage_options: dict | None
    attrs: dict = field(default_factory=dict)

    def run(self) -> ScoresWritten:
        """Score every chunk and write its part (one dask compute), then commit the output."""
        tic = time.perf_counter()
        gate = Gate()
        if self.format == "zarr":
            n = self._run_zarr(gate)
        else:
            n = self._run_parquet(gate)
        return ScoresWritten(self.output, self.format, n, len(self.input.bounds),
                             time.perf_counter() - tic)

    def _run_zarr(self, gate: Gate) -> int:
        inp, rows = self.input, self.input.rows
        with writing_store(self.output, overwrite=self.overwrite, kind=KIND, attrs=self.attrs,
                           storage_options=self.storage_options) as group:
            id_dtype = str if inp.id_kind == "T" else np.dtype(inp.id_kind + "8")
            arrays = {name: create_array(group, name, shape=(inp.n_rows,), chunks=(rows,),
                                         dtype=dtype)
                      for name, dtype in zip(COLUMNS, (id_dtype, np.float64, np.float64),
                                             strict=True)}
            root = None if is_url(self.output) else group.store_path.store.root
            sink = ZarrSink(arrays, None if root is None else os.fspath(root), gate)
            return self._compute(sink, gate)

    def _run_parquet(self, gate: Gate) -> int:
        tmp = begin_parquet(self.output, self.storage_options)
        digits = max(5, len(str(len(self.input.bounds) - 1)))
        sink = ParquetSink(tmp, is_url(tmp), carried_options(tmp, self.storage_options),
                           digits, gate)
        try:
            n = self._compute(sink, gate)
            record = {**self.attrs, "daskauc_kind": KIND, "daskauc_version": __version__,
                      "parts": [{"file": sink.name(i), "rows": int(b - a)}
                                for i, (a, b) in enumerate(self.input.bounds)],
                      _config.COMPLETE_ATTR: True}
            commit_parquet(tmp, self.output, record, self.overwrite, self.storage_options)
        except BaseException:
            remove_any(tmp, self.storage_options)
            raise
        return n

    def _compute(self, sink, gate: Gate) -> int:
        """The pass: one task per chunk, one compute; the rows written, checked."""
        import dask

        scorer = share(self.scorer, min_bytes=0)  # the model and map: to the workers once
        token = uuid.uuid4().hex[:12]
        chunk_tasks = tasks(self.input, scorer, sink, token)
        try:
            if dask.base.get_scheduler(collections=chunk_tasks) is dask.threaded.get:
                with _config.blas_limit(1):  # one BLAS thread per task thread
                    counts = compute(*chunk_tasks)
            else:
                counts = compute(*chunk_tasks)
        except BaseException:
            gate.close_and_wait()  # the local schedulers raise while other tasks still write
            raise
        n = int(sum(counts))
        if n != self.input.n_rows:
            raise RuntimeError(f"the pass wrote {n} rows of {self.input.n_rows}; the output "
                               "was not committed")
        return n


# ----------------------------------------------------------------------------- the model


def _load_model(model) -> tuple[Any, str]:
    if is_path(model):
        return load_model(model), resolve_path(model)
    from sklearn.utils.validation import check_is_fitted

    if not hasattr(model, "decision_function"):
        raise TypeError(f"model must be a fitted daskauc classifier or the path of a saved "
                        f"one; got {type(model).__name__}")
    check_is_fitted(model)
    return model, f"<{type(model).__name__} object>"


def _slope(est, label: str) -> float:
    """The model's calibration slope (its ``predict_proba`` from its decision values)."""
    calibration = getattr(est, "_calibration", None)
    if calibration is None or not hasattr(est, "decision_function"):
        raise TypeError(f"{label}: a {type(est).__name__} has no calibrated decision_function "
                        "and predict_proba; pass a fitted daskauc classifier")
    return calibration()[0]


def _load_map(fmap) -> tuple[Any, str | None]:
    """The feature map to apply first, and what it is for the output's attributes."""
    if fmap is None:
        return None, None
    if is_path(fmap):
        kind = stored_kind(fmap)
        if kind == "embedding":
            return load_embedding_map(fmap), resolve_path(fmap)
        if kind == "nystroem":
            return KMeansNystroem.load(fmap), resolve_path(fmap)
        what = "nothing" if not store_exists(fmap) else (
            f"a daskauc {kind} store" if kind else "not a daskauc store")
        raise ValueError(f"map={os.fspath(fmap)} is {what}; give the embedding store the "
                         "model was fitted on (from daskauc embed), or a saved map")
    if not (hasattr(fmap, "transform") and hasattr(fmap, "n_components_")):
        raise TypeError(f"map must be an embedding store path or a fitted feature map; got "
                        f"{type(fmap).__name__}")
    return fmap, f"<{type(fmap).__name__} object>"


def _check_map(est, model_label: str, fmap, map_label, inp) -> None:
    """The map (or the embedding store scored) is the one that made the rows the model was
    fitted on, when the model records it (``input_map_sha256_``): a map of the same width
    but other landmarks gives scores that mean nothing (an AUC of 0.39 for 0.98)."""
    fitted = getattr(est, "input_map_sha256_", None)
    if fitted is None:
        return
    if fmap is None:
        if isinstance(inp, StoreInput):
            check_input_map(est, inp.ds.attrs, inp.label)
        return
    if not hasattr(fmap, "projection_"):
        raise ValueError(f"the map {map_label} is a {type(fmap).__name__}, but the model "
                         f"{model_label} was fitted on rows embedded by a Nystroem map (map "
                         f"sha256 {fitted[:12]}); give that embedding store as the map")
    theirs = map_sha256(fmap)
    if theirs != fitted:
        raise ValueError(f"the map {map_label} (map sha256 {theirs[:12]}) is not the one the "
                         f"model {model_label} was fitted on (map sha256 {fitted[:12]}): its "
                         "scores would be meaningless; give the embedding store the model "
                         "was fitted on as the map")


def _feature_names(est) -> list[str] | None:
    names = getattr(est, "feature_names_in_", None)
    return None if names is None else [str(n) for n in names]


def _width_check(est, model_label: str, fmap, map_label, label: str):
    """The check of the input's width, once its feature columns are known: against what the
    map or the model takes, and the map's output against the model's input. Its errors name
    the widths and what to pass."""
    m = int(est.n_features_in_)
    if fmap is not None:
        r, d_map = int(fmap.n_components_), int(fmap.n_features_in_)
        if r != m:
            raise ValueError(f"the map {map_label} gives {r} features but the model "
                             f"{model_label} expects {m}: it is not the map the model was "
                             "fitted on")

    def check(width: int, what: str = "features") -> int:
        if fmap is not None and width != d_map:
            hint = " (is it already embedded? then leave out map= / --map)" if width == m \
                else ""
            raise ValueError(f"{label} has {width} {what} but the map {map_label} takes "
                             f"{d_map}{hint}")
        if fmap is None and width != m:
            raise ValueError(f"{label} has {width} {what} but the model {model_label} "
                             f"expects {m}; if the model was fitted on an embedding (daskauc "
                             "embed), pass the embedding store it was fitted on as map= "
                             "(--map EMBEDDING_STORE) to map the rows on the fly")
        return width

    return check


def _widest(est) -> int:
    """The most values a row becomes inside ``est`` (and its fitted sub-estimators): its
    embedding's width (``n_components_``), its landmarks or centres (a kernel block's
    width), or its input."""
    from sklearn.base import BaseEstimator

    widths, todo = [int(getattr(est, "n_features_in_", 1))], [est]
    while todo:
        e = todo.pop()
        for name, value in vars(e).items():
            if name == "n_components_" and isinstance(value, (int, np.integer)):
                widths.append(int(value))
            elif name in ("landmarks_", "centres_", "components_") \
                    and isinstance(value, np.ndarray) and value.ndim == 2:
                widths.append(value.shape[0])
            elif name.endswith("_") and isinstance(value, BaseEstimator):
                todo.append(value)
    return max(widths)


class _Scorer:
    """What a task applies to its chunk: the map (if any), then the model, ``block_rows``
    rows at a time (a map or a kernel turns a row into many values: a chunk's embedding of
    1,600 float32 columns is 16 times its 100 raw ones); the rows passed as a DataFrame
    with the names the estimator was fitted with, when it was."""

    def __init__(self, model, fmap, slope: float, model_names, map_names, block_rows: int):
        self.model, self.fmap, self.slope = model, fmap, float(slope)
        self.model_names, self.map_names = model_names, map_names
        self.block_rows = int(block_rows)

    def __call__(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = np.concatenate([self._decision(X[a : a + self.block_rows])
                            for a in range(0, X.shape[0], self.block_rows)] or
                           [np.empty(0, np.float64)])
        return d, proba_block(d, self.slope)[:, 1]

    def _decision(self, X: np.ndarray) -> np.ndarray:
        if self.fmap is not None:
            X = self.fmap.transform(_named(X, self.map_names))
        return np.asarray(self.model.decision_function(_named(X, self.model_names)),
                          dtype=np.float64)


def _named(X: np.ndarray, names):
    if names is None:
        return X
    import pandas as pd

    return pd.DataFrame(X, columns=names, copy=False)


def _jsonable(value):
    if value is None:
        return None
    return json.loads(json.dumps(np.asarray(value).tolist(), default=str))
