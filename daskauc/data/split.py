"""Exact, stratified train / test splits of numpy arrays, scipy sparse matrices, dask arrays
(dense or of CSR blocks) and dataset stores (dense or sparse).

The split is decided on the client from the n-vector of labels (small next to X): a boolean
test mask with exactly ``round(test_size * n_c)`` test rows of every class ``c`` (half-way
cases rounded up). Dask arrays are then cut chunk by chunk with that mask, so the result has
KNOWN chunk sizes, every output chunk comes from exactly one input chunk (no data moves
between chunks) and row order is preserved within train and within test.
"""

from __future__ import annotations

import datetime as _dt
import os
from numbers import Real

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from .._compute import compute
from .._params import seed_sequence
from .._readers import open_path
from .._sparse import frame_as_csr, is_sparse, is_sparse_frame
from .._validation import as_row_chunked, is_store_path
from ..store.dataset import open_dataset
from ..store.protocol import resolve_path, store_exists
from .dataset_write import plan_dataset_write

__all__ = ["train_test_split", "split_store", "split_mask"]


def _check_test_size(test_size) -> float:
    if not isinstance(test_size, Real) or isinstance(test_size, bool) or not 0 < test_size < 1:
        raise ValueError(
            f"test_size must be a fraction strictly between 0 and 1; got {test_size!r}")
    return float(test_size)


def _round_half_up(x: float) -> int:
    return int(np.floor(x + 0.5))


def split_mask(y: np.ndarray, *, test_size: float = 0.2, stratify: bool = True,
              random_state=None) -> np.ndarray:
    """Boolean mask of the test rows.

    With ``stratify`` every class ``c`` (distinct value of ``y``) gets exactly
    ``round(test_size * n_c)`` test rows, chosen uniformly at random within the class;
    otherwise ``round(test_size * n)`` rows are chosen uniformly at random.
    """
    test_size = _check_test_size(test_size)
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D; got shape {y.shape}")
    n = y.shape[0]
    rng = np.random.default_rng(seed_sequence(random_state))
    mask = np.zeros(n, dtype=bool)
    if stratify:
        classes, inv = np.unique(y, return_inverse=True)
        inv = inv.ravel()
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(classes.size + 1))
        for c in range(classes.size):
            members = order[bounds[c] : bounds[c + 1]]
            k = _round_half_up(test_size * members.size)
            mask[rng.choice(members, size=k, replace=False)] = True
    else:
        k = _round_half_up(test_size * n)
        mask[rng.choice(n, size=k, replace=False)] = True
    n_test = int(mask.sum())
    if n_test == 0 or n_test == n:
        raise ValueError(
            f"test_size={test_size} leaves {'no test' if n_test == 0 else 'no training'} rows "
            f"out of {n}; choose another test_size"
        )
    return mask


def _select_blocks(x: da.Array, mask: np.ndarray, part: str) -> da.Array:
    """Rows of a row-chunked dask array where ``mask`` holds; known chunks, one per input
    chunk that keeps at least one row."""
    bounds = np.concatenate([[0], np.cumsum(x.chunks[0])]).astype(np.int64)
    name = f"daskauc-split-{part}-{tokenize(x.name, mask)}"
    layer = {}
    sizes = []
    for i in range(len(x.chunks[0])):
        m = mask[bounds[i] : bounds[i + 1]]
        k = int(m.sum())
        if k == 0:
            continue
        j = len(sizes)
        if x.ndim == 2:
            layer[(name, j, 0)] = (_take_rows, (x.name, i, 0), m)
        else:
            layer[(name, j)] = (_take_rows, (x.name, i), m)
        sizes.append(k)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[x])
    chunks = (tuple(sizes),) + x.chunks[1:]
    return da.Array(graph, name, chunks, meta=x._meta)


def _take_rows(block: np.ndarray, m: np.ndarray) -> np.ndarray:
    return block[m]


def train_test_split(X, y=None, *, test_size: float = 0.2, stratify: bool = True,
                     random_state=None):
    """Split rows into train and test sets, stratified exactly by class.

    Parameters
    ----------
    X : numpy array, pandas or dask DataFrame, scipy sparse matrix, dask array (of numpy or
        of CSR blocks), or the path of a dataset store, dense or sparse (then ``y`` is None)
    y : labels (numpy or dask), any values; stratification is over their distinct values
    test_size : float in (0, 1)
    stratify : bool
        Exactly ``round(test_size * n_c)`` test rows per class (half up) when True, else
        ``round(test_size * n)`` rows at random.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    X_train, X_test, y_train, y_test
        numpy for numpy ``X``; DataFrames for a pandas or dask DataFrame ``X`` (its columns
        and index kept; a pandas or dask Series ``y`` stays one); CSR for scipy sparse ``X``
        (or a sparse pandas frame); dask
        arrays with known chunk sizes for dask ``X`` or a store, of CSR blocks for sparse
        rows (``y`` follows ``X``'s kind). Row order is kept within each part. Sparse rows
        are never made dense, and the same ``y`` and seed choose the same rows as for the
        dense matrix.

    Notes
    -----
    For dask input the labels are computed once on the client (an n-vector); ``X`` is not
    read until the parts are computed, and each output chunk is a subset of one input chunk.
    """
    if is_store_path(X):
        if y is not None:
            raise ValueError("pass either a store path as X (and no y) or arrays X and y")
        ds = open_path(X)
        X, y = ds.X, ds.y
    if y is None:
        raise ValueError("y is required unless X is a dataset store path")
    _check_test_size(test_size)

    if is_sparse_frame(X):
        X = frame_as_csr(X)
    elif _is_frame(X):
        return _split_frame(X, y, test_size=test_size, stratify=stratify,
                            random_state=random_state)
    if isinstance(X, da.Array):
        Xd = as_row_chunked(X, check_finite_values=False, sparse=True)
        y_np = _label_vector(compute(y)[0] if isinstance(y, da.Array) else y, Xd.shape[0])
        mask = split_mask(y_np, test_size=test_size, stratify=stratify, random_state=random_state)
        yd = da.from_array(y_np, chunks=(Xd.chunks[0],), name=False)
        return (_select_blocks(Xd, ~mask, "train"), _select_blocks(Xd, mask, "test"),
                _select_blocks(yd, ~mask, "train"), _select_blocks(yd, mask, "test"))

    Xn = X.tocsr() if is_sparse(X) else np.asarray(X)  # sparse rows stay sparse
    if Xn.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {Xn.shape}")
    yn = _label_vector(compute(y)[0] if isinstance(y, da.Array) else y, Xn.shape[0])
    mask = split_mask(yn, test_size=test_size, stratify=stratify, random_state=random_state)
    train, test = np.flatnonzero(~mask), np.flatnonzero(mask)
    return Xn[train], Xn[test], yn[train], yn[test]


def _label_vector(y, n_rows: int) -> np.ndarray:
    """``y`` as a 1-D numpy vector of ``n_rows`` labels (an (n, 1) column flattened)."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.shape != (int(n_rows),):
        raise ValueError(f"X has {int(n_rows)} rows but y has shape {y.shape}")
    return y


def _is_frame(X) -> bool:
    """A pandas or dask DataFrame (of dense columns)."""
    import pandas as pd

    if isinstance(X, pd.DataFrame):
        return True
    try:
        import dask.dataframe as dd
    except ImportError:  # pragma: no cover - dask[dataframe] is a dependency
        return False
    return isinstance(X, dd.DataFrame)


def _split_frame(X, y, *, test_size, stratify, random_state):
    """:func:`train_test_split` of a pandas or dask DataFrame: DataFrames out, with their
    columns and index, as scikit-learn's; ``y`` a Series (pandas or dask) stays one. A dask
    frame is cut partition by partition with the mask (its partitions' lengths are computed
    with the labels, in one compute)."""
    import pandas as pd

    if isinstance(X, pd.DataFrame):
        yn = _label_vector(compute(y)[0] if isinstance(y, da.Array) else y, X.shape[0])
        mask = split_mask(yn, test_size=test_size, stratify=stratify,
                          random_state=random_state)
        train, test = np.flatnonzero(~mask), np.flatnonzero(mask)
        if isinstance(y, pd.Series | pd.DataFrame):
            return X.iloc[train], X.iloc[test], y.iloc[train], y.iloc[test]
        return X.iloc[train], X.iloc[test], yn[train], yn[test]
    import dask.dataframe as dd

    lengths, yn = compute(X.map_partitions(len), y)
    lengths = np.asarray(lengths, dtype=np.int64)
    yn = _label_vector(yn, int(lengths.sum()))
    mask = split_mask(yn, test_size=test_size, stratify=stratify, random_state=random_state)
    bounds = np.concatenate([[0], np.cumsum(lengths)])

    def part(frame, keep):
        from dask import delayed

        pieces = [delayed(_take_rows)(p, keep[a:b])
                  for p, a, b in zip(frame.to_delayed(), bounds[:-1], bounds[1:], strict=True)]
        return dd.from_delayed(pieces, meta=frame._meta, verify_meta=False)

    y_out = ((part(y, ~mask), part(y, mask)) if isinstance(y, dd.Series)
             else (yn[~mask], yn[mask]))
    return part(X, ~mask), part(X, mask), *y_out


def split_store(store, train_store, test_store, *, test_size: float = 0.2,
                stratify: bool = True, random_state=None, overwrite: bool = False,
                storage_options: dict | None = None):
    """Split a dataset store into a train store and a test store in one pass over ``X``.

    Returns
    -------
    (Dataset, Dataset)
        The train and test stores, opened.

    Notes
    -----
    Both stores are written by one ``dask.compute`` (each input chunk is read once), with
    exact per-class test counts as :func:`train_test_split`. Their attributes keep the
    source store's provenance and add ``split_of``, ``split_part``, ``test_size`` and the
    seed entropy (``split_seed``) so the split can be reproduced. A sparse store splits into
    two sparse stores (CSR row chunks, :mod:`daskauc.store.sparse`; never made dense), with
    the rows the dense store of the same data would give.
    """
    test_size = _check_test_size(test_size)
    for p in (train_store, test_store):
        if store_exists(p, storage_options) and not overwrite:
            raise FileExistsError(
                f"{os.fspath(p)} already exists; pass overwrite=True to replace it")
    seed = seed_sequence(random_state)
    ds = open_dataset(store, storage_options=storage_options)
    X_tr, X_te, y_tr, y_te = train_test_split(ds.X, ds.y, test_size=test_size,
                                              stratify=stratify, random_state=seed)
    keep = {k: v for k, v in ds.attrs.items()
            if not k.startswith("daskauc_") and k not in
            ("n_samples", "n_positive", "n_negative", "chunk_rows", "n_features", "dtype",
             "n_nonzero", "chunk_nonzeros")}
    common = {**keep, "split_of": resolve_path(store), "test_size": test_size,
              "stratified": bool(stratify), "split_seed": str(seed.entropy),
              "created": _dt.datetime.now(tz=_dt.timezone.utc).isoformat()}
    cr = int(ds.attrs.get("chunk_rows") or max(ds.X.chunks[0]))
    # the two stores' writes are computed as arrays in one compute (not two Delayed: each
    # would hold its own copy of the input's graph, dask/dask#12318, and read it again)
    plans = []
    try:
        for Xp, yp, where, part in ((X_tr, y_tr, train_store, "train"),
                                    (X_te, y_te, test_store, "test")):
            plans.append(plan_dataset_write(
                Xp, yp, where, attrs={**common, "split_part": part}, overwrite=overwrite,
                chunk_rows=min(cr, Xp.shape[0]), storage_options=storage_options))
        results = compute(*(a for plan in plans for a in plan.arrays))
    except BaseException:
        for plan in plans:
            plan.abort()
        raise
    k = len(plans[0].arrays)
    try:
        plans[0].commit(results[:k])
    except BaseException:
        plans[1].abort()
        raise
    plans[1].commit(results[k:])
    return (open_dataset(train_store, storage_options=storage_options),
            open_dataset(test_store, storage_options=storage_options))

