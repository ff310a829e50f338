"""A synthetic click log of hashed features, of any size and width, for the click-log benchmark.

Each row is an ad impression: ``N_FIELDS`` categorical fields (one value each, one-hot), a bag
of 0 to ``MAX_BAG`` tokens (user tags, query words) and ``N_NUMERIC`` numeric counts, all
hashed into ``n_features`` columns (default 2**22) as the hashing trick does: a column is a
splitmix64 hash of (field, value) modulo ``n_features``. Field ``f`` has a vocabulary of
``VOCAB[f]`` values (10 to about 3,000,000) drawn with Zipf-like frequencies (exponent
``ZIPF``), the bag's tokens from a vocabulary of 2**24 (exponent ``BAG_ZIPF``): a few columns
(the heads of the small fields) are in a large share of the rows, most appear once or never.
A row has 24 to 36 non-zeros (30 on average, fewer where two of its features hash to one
column: those are added up, so a value can be 2.0); one-hot values are 1.0, numeric ones
``log1p(count) / log1p(1 / p)`` of a geometric count of success probability ``p``
(``NUMERIC_P``), about 1.

The label comes from a sparse ground-truth logistic model over the features: feature ``k``
(a field's value, a token, a numeric count) has the weight ``SIGMA * z(k)``, ``z`` a standard
normal drawn from a hash of ``k`` (no table; the same model at every width), and a row is
positive with probability ``sigmoid(x.w + BIAS)``; ``BIAS`` makes about 1 % of the rows
positive. Most features of a row are rare, so much of the score is noise that no model can
learn from the rows: ranking by the true score gives a test AUC of about 0.86, and
``SGDClassifier(loss="log_loss")`` fitted on 400,000 rows 0.76.

Rows come in blocks of ``BLOCK`` generated from ``(seed, block index)`` alone, so any block can
be made in any worker process and the first n rows of a larger set are the smaller set.
:func:`rows` gives any row range as a canonical CSR matrix (indices sorted within each row, no
duplicates), :func:`dask_rows` a dask array of CSR row chunks and its labels for a store
(``daskauc.write_dataset``), :func:`write_text` the same rows as Vowpal Wabbit
(``label |f id:value ...``) or LIBSVM text, formatted by a numba kernel.
"""

from __future__ import annotations

import os

import numpy as np
from numba import njit

BLOCK = 10_000
N_FEATURES = 2**22
N_FIELDS = 20
#: vocabulary of each categorical field: 10 to about 3,000,000 values
VOCAB = np.round(np.logspace(1, 6.5, N_FIELDS)).astype(np.int64)
ZIPF = 1.1
MAX_BAG = 12
BAG_VOCAB = 2**24
BAG_ZIPF = 1.05
N_NUMERIC = 4
#: success probability of each numeric feature's geometric count
NUMERIC_P = np.array([0.5, 0.2, 0.05, 0.01])
SIGMA = 0.3
#: the intercept giving about 1 % positives (estimated once from 1,000,000 rows of seed 0 at
#: 2**22 columns with :func:`estimate_bias`; every block and width uses this one value)
BIAS = -5.916

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S40 = (np.uint64(s) for s in (30, 27, 31, 40))
_BAG_KEY, _NUM_KEY, _WEIGHT_SALT = np.uint64(1000), np.uint64(1001), np.uint64(0x5EED5EED)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise on uint64 (a new array)."""
    x = x.astype(np.uint64) + _GOLDEN
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _zipf(u: np.ndarray, vocab, exponent: float) -> np.ndarray:
    """Ranks 0 .. vocab - 1 with P(rank r) ~ (r + 1)^-exponent: the continuous inverse CDF of
    the truncated power law at the uniforms ``u``, floored."""
    a = 1.0 - exponent
    top = (np.asarray(vocab, dtype=np.float64) + 1.0) ** a
    r = np.floor((1.0 + u * (top - 1.0)) ** (1.0 / a)) - 1.0
    return np.minimum(r, np.asarray(vocab) - 1).astype(np.uint64)


def _key(field, value: np.ndarray) -> np.ndarray:
    """The identity of ``value`` of ``field`` before hashing (uint64)."""
    return (np.asarray(field, dtype=np.uint64) + np.uint64(1)) << _S40 | value


def columns(keys: np.ndarray, n_features: int) -> np.ndarray:
    """The hashed column of each feature identity (int64 in [0, n_features))."""
    return (_mix(keys) % np.uint64(n_features)).astype(np.int64)


def weights(keys: np.ndarray) -> np.ndarray:
    """The ground-truth weight of each feature identity: ``SIGMA`` times a standard normal
    made from a hash of it (Box-Muller on its two 32-bit halves). Of the identity, not of
    its column, so the model is the same at every width (two features hashed to one column
    are added up, as a hashed model sees them)."""
    h = _mix(np.asarray(keys, dtype=np.uint64) ^ _WEIGHT_SALT)
    u1 = ((h >> np.uint64(32)).astype(np.float64) + 0.5) / 2.0**32
    u2 = ((h & np.uint64(0xFFFFFFFF)).astype(np.float64) + 0.5) / 2.0**32
    return SIGMA * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def _block_raw(seed: int, index: int, n_features: int):
    """Block ``index`` before the label's intercept: ``(csr float64, score x.w, rng)``."""
    import scipy.sparse

    rng = np.random.default_rng([int(seed), int(index)])
    b = BLOCK
    cat = _key(np.arange(N_FIELDS, dtype=np.uint64)[None, :],
               _zipf(rng.random((b, N_FIELDS)), VOCAB[None, :], ZIPF))
    counts = rng.geometric(NUMERIC_P[None, :], size=(b, N_NUMERIC))
    num = _key(_NUM_KEY, np.arange(N_NUMERIC, dtype=np.uint64))
    n_bag = rng.integers(0, MAX_BAG + 1, size=b)
    bag = _key(_BAG_KEY, _zipf(rng.random(int(n_bag.sum())), BAG_VOCAB, BAG_ZIPF))
    # row-major layout: the fields, the numeric features, then the row's bag
    fixed = N_FIELDS + N_NUMERIC
    indptr = np.zeros(b + 1, dtype=np.int64)
    np.cumsum(fixed + n_bag, out=indptr[1:])
    starts = indptr[:-1]
    keys = np.empty(indptr[-1], dtype=np.uint64)
    vals = np.ones(indptr[-1], dtype=np.float64)
    slots = starts[:, None] + np.arange(fixed)[None, :]
    keys[slots[:, :N_FIELDS]] = cat
    keys[slots[:, N_FIELDS:]] = num[None, :]
    vals[slots[:, N_FIELDS:]] = np.log1p(counts) / np.log1p(1 / NUMERIC_P)
    in_bag = np.ones(indptr[-1], dtype=bool)
    in_bag[slots.ravel()] = False
    keys[in_bag] = bag
    score = np.add.reduceat(weights(keys) * vals, starts)
    cols = columns(keys, n_features).astype(np.int32 if n_features < 2**31 else np.int64)
    X = scipy.sparse.csr_matrix((vals, cols, indptr), shape=(b, n_features))
    X.sum_duplicates()  # sorts each row's columns, adds up the ones two features share
    return X, score, rng


def block(seed: int, index: int, n_features: int = N_FEATURES, dtype=np.float32):
    """Block ``index`` (``BLOCK`` rows) of the log of ``seed``: ``(X canonical csr_matrix of
    dtype, y int8 in {-1, +1})``."""
    X, score, rng = _block_raw(seed, index, n_features)
    p = 1.0 / (1.0 + np.exp(-(score + BIAS)))
    y = np.where(rng.random(BLOCK) < p, 1, -1).astype(np.int8)
    return X.astype(dtype), y


def rows(seed: int, start: int, stop: int, n_features: int = N_FEATURES, dtype=np.float32):
    """Rows ``start`` to ``stop`` of the log of ``seed``: ``(X csr_matrix, y int8)``."""
    import scipy.sparse

    first, last = start // BLOCK, -(-stop // BLOCK)
    parts = [block(seed, i, n_features, dtype) for i in range(first, last)]
    X = scipy.sparse.vstack([p[0] for p in parts], format="csr")
    y = np.concatenate([p[1] for p in parts])
    a = start - first * BLOCK
    X = X[a : a + stop - start]
    X.has_sorted_indices = X.has_canonical_format = True  # row slices of canonical blocks
    return X, y[a : a + stop - start]


def dask_rows(seed: int, n: int, *, n_features: int = N_FEATURES, chunk_rows: int = 200_000,
              dtype=np.float32):
    """The first ``n`` rows of the log of ``seed`` as ``(X, y)``: a dask array of CSR row
    chunks of ``chunk_rows`` rows (``meta`` an empty CSR block) and its int8 labels. Chunk
    ``i`` is one task (:func:`rows`) shared by both, so writing them in one compute generates
    each row once."""
    import operator

    import dask.array as da
    from dask.base import tokenize

    from daskauc._sparse import sparse_meta

    token = tokenize(seed, n, n_features, chunk_rows, np.dtype(dtype).name, BIAS, SIGMA)
    pair, nx, ny = (f"clicklog-{k}-{token}" for k in ("rows", "X", "y"))
    bounds = [(a, min(n, a + chunk_rows)) for a in range(0, n, chunk_rows)]
    tasks = {(pair, i): (rows, seed, a, b, n_features, dtype) for i, (a, b) in enumerate(bounds)}
    gx = {**tasks, **{(nx, i, 0): (operator.getitem, (pair, i), 0) for i in range(len(bounds))}}
    gy = {**tasks, **{(ny, i): (operator.getitem, (pair, i), 1) for i in range(len(bounds))}}
    sizes = tuple(b - a for a, b in bounds)
    X = da.Array(gx, nx, chunks=(sizes, (n_features,)), meta=sparse_meta(n_features, dtype))
    y = da.Array(gy, ny, chunks=(sizes,), dtype=np.int8, meta=np.empty(0, np.int8))
    return X, y


def estimate_bias(seed: int = 0, n: int = 1_000_000, n_features: int = N_FEATURES,
                  rate: float = 0.01) -> float:
    """The intercept that makes ``rate`` of the first ``n`` rows positive in expectation (a
    bisection on the mean of ``sigmoid(score + b)``)."""
    score = np.concatenate([_block_raw(seed, i, n_features)[1] for i in range(-(-n // BLOCK))])
    lo, hi = -30.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.mean(1 / (1 + np.exp(-(score + mid)))) < rate else (lo, mid)
    return (lo + hi) / 2


# ----------------------------------------------------------------------------- text


@njit(cache=True)
def _write_int(out, pos, v):  # INOUT out; returns the position after the digits
    if v < 0:
        out[pos] = 45  # '-'
        pos += 1
        v = -v
    k = 0
    digits = np.empty(20, np.uint8)
    while True:
        digits[k] = 48 + v % 10
        v //= 10
        k += 1
        if v == 0:
            break
    for m in range(k - 1, -1, -1):
        out[pos] = digits[m]
        pos += 1
    return pos


@njit(cache=True)
def _format_csr(indptr, indices, data, y, vw, offset, out):
    """IN indptr, indices, data, y; OUT out (bytes); returns the bytes written. One line a
    row: VW ``1 |f 12 345:0.693147`` (``vw``; a value of 1 without ``:1``) or LIBSVM
    ``+1 13:1 346:0.693147`` (columns + ``offset``); values with 6 decimals."""
    pos = 0
    for i in range(y.shape[0]):
        if y[i] < 0:
            out[pos] = 45  # '-'
            pos += 1
        elif not vw:
            out[pos] = 43  # '+'
            pos += 1
        out[pos] = 49  # '1'
        pos += 1
        if vw:
            out[pos] = 32  # ' '
            out[pos + 1] = 124  # '|'
            out[pos + 2] = 102  # 'f'
            pos += 3
        for k in range(indptr[i], indptr[i + 1]):
            out[pos] = 32
            pos += 1
            pos = _write_int(out, pos, indices[k] + offset)
            v = data[k]
            if vw and v == 1.0:
                continue
            out[pos] = 58  # ':'
            pos += 1
            if v < 0:
                out[pos] = 45
                pos += 1
                v = -v
            scaled = np.int64(np.round(v * 1e6))
            pos = _write_int(out, pos, scaled // 1_000_000)
            frac = scaled % 1_000_000
            if frac:
                out[pos] = 46  # '.'
                pos += 1
                for p in (100_000, 10_000, 1_000, 100, 10, 1):
                    out[pos] = 48 + (frac // p) % 10
                    pos += 1
        out[pos] = 10  # '\n'
        pos += 1
    return pos


def write_text(path: str, seed: int, start: int, stop: int, *, fmt: str = "vw",
               n_features: int = N_FEATURES) -> bool:
    """Write rows ``start`` to ``stop`` of the log of ``seed`` as Vowpal Wabbit (``fmt="vw"``:
    ``label |f column[:value] ...``, labels -1 / 1, 0-based columns, a value of 1 left out)
    or LIBSVM text (``fmt="libsvm"``: ``label column:value ...``, 1-based columns); skip it
    when the file exists with the marker of the same rows. Generated block by block in this
    process; the values are written with 6 decimals (the store's float32 values to 1e-6).
    Returns whether the file was written (False: kept)."""
    if fmt not in ("vw", "libsvm"):
        raise ValueError(f"fmt must be 'vw' or 'libsvm'; got {fmt!r}")
    marker = f"{path}.done-{seed}-{start}-{stop}-{n_features}"
    if os.path.exists(path) and os.path.exists(marker):
        return False
    row_bytes = 8 + (N_FIELDS + N_NUMERIC + MAX_BAG) * (len(str(n_features)) + 10)
    buf = np.empty(BLOCK * row_bytes, dtype=np.uint8)
    with open(path + ".tmp", "wb") as f:
        a = start
        while a < stop:  # one generator block at a time
            b = min(stop, (a // BLOCK + 1) * BLOCK)
            X, y = rows(seed, a, b, n_features, np.float64)
            n = _format_csr(X.indptr, X.indices, X.data, y, fmt == "vw",
                            0 if fmt == "vw" else 1, buf)
            f.write(buf[:n].tobytes())
            a = b
    os.replace(path + ".tmp", path)
    open(marker, "w").close()
    return True


@njit(cache=True, nogil=True)
def _sgd_touch(indptr, indices, data, w, step):  # INOUT w
    """The least a sparse SGD step does per row: ``s = w . x`` then ``w += step s x``, one
    read and one write of ``w`` at each non-zero (random columns of a large ``w``)."""
    total = 0.0
    for i in range(indptr.shape[0] - 1):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += w[indices[k]] * data[k]
        g = step * (s - 1.0)
        for k in range(indptr[i], indptr[i + 1]):
            w[indices[k]] -= g * data[k]
        total += s
    return total


def update_floor(X, repeat: int = 3) -> float:
    """Seconds per non-zero of :func:`_sgd_touch` over the CSR chunk ``X`` (the best of
    ``repeat``, after a call that compiles): the floor of one sequential chain's work on a
    row, whatever the solver, set by random reads and writes of a d-vector that does not fit
    the caches at 2**22 columns and more."""
    import time

    w = np.zeros(X.shape[1])
    _sgd_touch(X.indptr[:2], X.indices, X.data, w, 1e-9)
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        _sgd_touch(X.indptr, X.indices, X.data, w, 1e-9)
        best = min(best, time.perf_counter() - t)
    return best / max(1, X.nnz)
