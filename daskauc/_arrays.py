"""Array helpers every floor shares: rows of a row-chunked dask array, stratified choices of
rows, the class counts of {-1, +1} labels.

The ground floor: imports nothing of daskauc but :mod:`._compute`.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ._compute import compute


def _take_rows(block, local, block_info=None):
    rows = local[block_info[0]["chunk-location"][0]]
    if hasattr(block, "tocsr"):  # a CSR block (daskauc._sparse) stays sparse
        return block[rows]
    return np.asarray(block)[rows]


def sample_rows(Xd: da.Array, idx: np.ndarray) -> da.Array:
    """Rows ``idx`` (sorted) of a row-chunked array, one ``daskauc-sample`` task per chunk.

    (Dask's own fancy indexing plans a shuffle for this; a local take per chunk is enough.)
    """
    idx = np.asarray(idx, dtype=np.int64)
    bounds = np.cumsum((0,) + Xd.chunks[0])
    cut = np.searchsorted(idx, bounds)
    local = [idx[cut[i] : cut[i + 1]] - bounds[i] for i in range(Xd.numblocks[0])]
    return Xd.map_blocks(_take_rows, local, chunks=(tuple(map(len, local)), Xd.chunks[1]),
                         dtype=Xd.dtype, token="daskauc-sample", meta=Xd._meta)


def stratified_subsample(y: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of ``min(n, rows)`` rows, each class in proportion (at least 2 each)."""
    n = y.shape[0]
    if rows >= n:
        return np.arange(n)
    out = []
    for cls in (-1, 1):
        members = np.flatnonzero(y == cls)
        k = max(2, int(round(rows * members.size / n)))
        out.append(rng.choice(members, size=min(k, members.size), replace=False))
    return np.sort(np.concatenate(out))


def stratified_split(y: np.ndarray, share: float, rng: np.random.Generator):
    """``(train, validation)`` sorted indices: ``share`` of each class to train (at least one
    row of each class on each side when the class has two)."""
    train = []
    for cls in (-1, 1):
        members = np.flatnonzero(y == cls)
        k = min(members.size - 1, max(1, int(round(share * members.size))))
        train.append(rng.choice(members, size=k, replace=False))
    train = np.sort(np.concatenate(train))
    return train, np.setdiff1d(np.arange(y.size), train)


def class_counts(y) -> tuple[int, int]:
    """``(positives, negatives)`` of {-1, +1} labels: positives are the labels above 0; numpy
    counted here, dask in one compute."""
    if isinstance(y, da.Array):
        pos, n = compute((y > 0).sum(), y.shape[0])
        return int(pos), int(n - pos)
    y = np.asarray(y)
    pos = int(np.count_nonzero(y > 0))
    return pos, int(y.size - pos)
