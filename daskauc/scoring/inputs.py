"""The inputs of a scoring pass: whatever the one door (:mod:`daskauc._readers`) reads by
row ranges (a dataset or embedding store, Parquet), and the task that scores one range."""

from __future__ import annotations

import os

import numpy as np

from .._readers import open_rows
from ..data.parquet import arrow_kind, carried_options, pyarrow_modules

__all__ = ["arrow_kind", "carried_options", "is_path", "open_input", "pyarrow_modules",
           "tasks"]


def is_path(obj) -> bool:
    """A path or URL (a string or path-like), not an object."""
    return isinstance(obj, (str, os.PathLike))


def open_input(source, id_column, storage_options, handle_unknown: str = "error"):
    """The input at ``source`` read by row ranges (:class:`daskauc._readers.RowSource`);
    clear errors for anything else."""
    return open_rows(source, storage_options=storage_options, id_column=id_column,
                     handle_unknown=handle_unknown)


def tasks(inp, scorer, sink, token: str) -> list:
    """One task per planned row range of ``inp``: read its rows, score them, write them."""
    import dask

    reader = inp.block_reader()
    score = dask.delayed(_score_chunk, pure=False)
    return [score(reader, block, a, i, scorer, sink,
                  dask_key_name=f"daskauc-predict-{token}-{i}")
            for i, (block, (a, _)) in enumerate(zip(inp.blocks(), inp.bounds, strict=True))]


def _score_chunk(reader, block, start: int, index: int, scorer, sink) -> int:
    X, ids = reader.read(block, start)
    if ids is None:
        ids = np.arange(start, start + X.shape[0], dtype=np.int64)
    sink.write(index, start, ids, *scorer(X))
    return int(X.shape[0])
