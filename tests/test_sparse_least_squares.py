"""TwoPassAUC, SPAM and SPDAM on sparse rows (issue 42).

Oracles: a fit on sparse rows equals the fit on the dense rows of the same data (same seed,
same chunks, same chains) to rounding: the sparse kernels (``_ls_sparse_kernels``) run the
same steps in lazy forms that are exact algebra (docs/sparse.md). Their folds (a lazy scale
that got small, SPAM-NET's drifts of parallel chains) are driven on purpose. Then the wide
case: 2**18 features inside ``no_dense_rows`` with a sensible AUC, and a cost per non-zero
(the kernels' time per row at 2**14 and 2**20 features; a fit's peak memory a few d-vectors).
"""

from __future__ import annotations

import time
import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import no_dense_rows
from sklearn.metrics import roc_auc_score

from daskauc._sparse import sparse_row_blocks
from daskauc.estimators.least_squares import SPAM, SPDAM, TwoPassAUC
from daskauc.solvers._ls_sparse_kernels import _spdam_chunk_csr, _twopass_sgd_chunk_csr
from daskauc.solvers._spam_sparse_kernels import _spam_chunk_csr
from daskauc.solvers.spam import spam, sparse_drift_every
from daskauc.solvers.spdam import spdam
from daskauc.solvers.twopass import twopass_auc

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")

RTOL = 1e-10  # of the largest coefficient: the lazy forms are exact algebra
ROWS = 70  # rows per chunk of the small data: 5 chunks of 300 rows


def _sparse_data(n=300, d=40, density=0.1, seed=0, dtype=np.float64):
    """Random sparse rows with a class signal in some columns' values; labels in {-1, +1}."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.3, 1, -1).astype(np.int8)
    X = sp.random(n, d, density=density, random_state=seed, format="csr",
                  data_rvs=rng.standard_normal)
    X.data = X.data + 0.8 * np.repeat(y, np.diff(X.indptr)) * (X.indices % 3 == 0)
    return X.astype(dtype), y


def _close(a, b, rtol=RTOL):
    a, b = np.asarray(a), np.asarray(b)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    assert np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1e-300), np.abs(a - b).max()


def _blocks(X, rows=ROWS):
    """The same chunks, sparse and dense."""
    return sparse_row_blocks(X, rows), da.from_array(X.toarray(), chunks=(rows, X.shape[1]))


def _same_state(a, b):
    _close(a.coef, b.coef)
    for field in ("w", "wbar", "u"):
        if hasattr(a.state, field):
            _close(getattr(a.state, field), getattr(b.state, field))
    if hasattr(a.state, "duals"):
        _close(np.concatenate(a.state.duals), np.concatenate(b.state.duals))
    assert a.n_iter == b.n_iter


# ---------------------------------------------------------------------------------------
# the solver functions: sparse == dense

SOLVERS = {
    "twopass": (twopass_auc, dict(eta=0.01, lam=0.01)),
    "twopass-invsqrt": (twopass_auc, dict(eta=0.05, lam=0.1, schedule="invsqrt")),
    "spam": (spam, dict(lam=0.01, eta=0.5)),
    "spam-net": (spam, dict(lam=0.01, l1=0.5, eta=2.0, average=False)),
    "spam-net-inverse": (spam, dict(lam=0.01, l1=2.0, eta=3.0, schedule="inverse")),
    "spdam": (spdam, dict(lam=0.01)),
    "spdam-batch": (spdam, dict(lam=0.01, batch_size=7)),
}


@pytest.mark.parametrize("dtype,chains", [(np.float64, 1), (np.float32, 1), (np.float64, 2)])
@pytest.mark.parametrize("case", SOLVERS)
def test_solver_on_sparse_chunks_equals_dense(case, dtype, chains):
    """4 epochs over 5 chunks; with 2 chains the epochs after the first run the chains'
    drift (SPAM-NET: its folds every 16 steps, the dense kernel's schedule at this width)."""
    solver, kw = SOLVERS[case]
    X, y = _sparse_data(dtype=dtype)
    Xs, Xd = _blocks(X)
    kw = dict(kw, n_epochs=4, random_state=3, n_chains=chains)
    with no_dense_rows():
        sparse = solver(Xs, y, **kw)
    dense = solver(Xd, y, **kw)
    _same_state(sparse, dense)
    if case == "spam-net":  # the L1 prox zeroes the same coordinates
        np.testing.assert_array_equal(sparse.coef == 0, dense.coef == 0)
        assert 0 < np.count_nonzero(dense.coef) < X.shape[1]


FOLDS = {  # a lazy scale below RENORM within a few steps: folded again and again
    "twopass": (twopass_auc, dict(eta=0.02, lam=25.0)),  # shrink 0.5 a step
    "spam": (spam, dict(lam=4e4, eta=1.0)),  # scale about 1/(1 + 8000 / sqrt(t))
    "spam-net": (spam, dict(lam=4e4, l1=1.0, eta=1.0, average=False)),
    "spdam": (spdam, dict(lam=2.0, R=1e-3)),  # rho = 1/21 a step
}


@pytest.mark.parametrize("case", FOLDS)
def test_folding_a_small_scale_keeps_the_fit(case):
    solver, kw = FOLDS[case]
    X, y = _sparse_data(seed=1)
    Xs, Xd = _blocks(X)
    with no_dense_rows():
        sparse = solver(Xs, y, n_epochs=2, random_state=0, **kw)
    dense = solver(Xd, y, n_epochs=2, random_state=0, **kw)
    _same_state(sparse, dense)


def test_read_only_chunks_and_int64_indices():
    """Zarr and dask chunks can be read-only; wide stores index with int64."""
    X, y = _sparse_data(seed=2)
    X64 = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)),
                        shape=X.shape)
    for part in (X64.data, X64.indices, X64.indptr):
        part.flags.writeable = False
    Xd = da.from_array(X.toarray(), chunks=(ROWS, X.shape[1]))
    for solver, kw in (SOLVERS["twopass"], SOLVERS["spam-net"], SOLVERS["spdam-batch"]):
        sparse = solver(sparse_row_blocks(X64, ROWS), y, n_epochs=2, random_state=1, **kw)
        _same_state(sparse, solver(Xd, y, n_epochs=2, random_state=1, **kw))


def test_spam_net_drift_schedule_on_sparse_rows():
    """The chains' drift with L1 costs O(r) each: every 16 steps (the dense kernel's) while
    ``r <= 16`` non-zeros a row, then so that it costs at most the rows' non-zeros."""
    assert sparse_drift_every(40, 4 * 300, 300) == 16
    assert sparse_drift_every(64, 4 * 300, 300) == 16
    assert sparse_drift_every(65, 4 * 300, 300) == 32
    assert sparse_drift_every(2**20, 20 * 1000, 1000) == 16 * 3277
    assert sparse_drift_every(100, 0, 0) == 112


# ---------------------------------------------------------------------------------------
# the estimators

ESTIMATORS = {
    "twopass": lambda **kw: TwoPassAUC(n_epochs=3, random_state=0, **kw),
    "spam": lambda **kw: SPAM(n_epochs=3, random_state=0, **kw),
    "spam-net": lambda **kw: SPAM(l1=0.3, n_epochs=3, random_state=0, **kw),
    "spdam": lambda **kw: SPDAM(batch_size=3, n_epochs=3, random_state=0, **kw),
}


@pytest.mark.parametrize("labels,dtype", [((-1, 1), np.float64), ((0, 1), np.float32)])
@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_on_sparse_rows_equals_dense(name, labels, dtype):
    """A scipy matrix in one chunk, and a dask array of sparse chunks with 2 chains, each
    against the dense rows in the same chunks; the "auto" steps come out the same."""
    X, y = _sparse_data(seed=5, dtype=dtype)
    y = np.where(y > 0, labels[1], labels[0])
    with no_dense_rows():
        sparse = ESTIMATORS[name]().fit(X, y)
        scores = sparse.decision_function(X)
    dense = ESTIMATORS[name]().fit(X.toarray(), y)
    _close(sparse.coef_, dense.coef_)
    # a dense float32 block scores in float32 (the sparse one in float64)
    _close(scores, dense.decision_function(X.toarray()), RTOL if dtype == np.float64 else 1e-6)
    np.testing.assert_array_equal(sparse.classes_, labels)
    for step in ("eta_",):
        if hasattr(dense, step):
            assert getattr(sparse, step) == pytest.approx(getattr(dense, step), rel=1e-12)
    Xs, Xd = _blocks(X)
    with no_dense_rows():
        sparse = ESTIMATORS[name](n_chains=2).fit(Xs, y)
        auc = sparse.score(Xs, y)
    dense = ESTIMATORS[name](n_chains=2).fit(Xd, y)
    _close(sparse.coef_, dense.coef_)
    assert auc == pytest.approx(dense.score(Xd, y), abs=1e-12)
    assert auc > 0.75


@pytest.mark.parametrize("name", ["twopass", "spam", "spdam"])
def test_partial_fit_on_sparse_batches_equals_dense(name):
    """A stream of sparse batches (TwoPassAUC and SPAM merge each batch's class means;
    SPDAM continues on the same rows, its duals belong to them)."""
    X, y = _sparse_data(n=400, seed=6)
    if name == "spdam":
        batches = [(X, y)] * 3
    else:
        batches = [(X[i:i + 100], y[i:i + 100]) for i in range(0, 400, 100)]
    sparse, dense = ESTIMATORS[name](), ESTIMATORS[name]()
    for Xb, yb in batches:
        with no_dense_rows():
            sparse.partial_fit(sparse_row_blocks(Xb, 50), yb)
        dense.partial_fit(da.from_array(Xb.toarray(), chunks=(50, X.shape[1])), yb)
        _close(sparse.coef_, dense.coef_)
    assert sparse.n_iter_ == dense.n_iter_


def test_sparse_store_path_is_read_as_csr_chunks(tmp_path):
    """A sparse dataset store (``ingest_array`` of a CSR matrix, 4 chunks) fits as the dense
    rows in the same chunks do."""
    from daskauc import ingest_array

    X, y = _sparse_data(seed=10)
    path = str(tmp_path / "ds.zarr")
    ingest_array(X, y, path, chunk_rows=75)
    for name in ("twopass", "spdam"):
        with no_dense_rows():
            sparse = ESTIMATORS[name]().fit(path)
        dense = ESTIMATORS[name]().fit(da.from_array(X.toarray(), chunks=(75, X.shape[1])), y)
        _close(sparse.coef_, dense.coef_)


def test_sparse_chunks_on_a_cluster_equal_the_threaded_fit(dask_cluster_client):
    """CSR chunks travel to the workers and give the threaded fit, bit for bit (SPDAM's duals
    per chunk, SPAM-NET's lazy prox)."""
    X, y = _sparse_data(n=600, seed=9)
    Xs = sparse_row_blocks(X, 100)
    for name in ("spam-net", "spdam"):
        with dask.config.set(scheduler="threads"):
            local = ESTIMATORS[name](n_chains=1).fit(Xs, y)
        dist = ESTIMATORS[name](n_chains=1).fit(Xs, y)
        np.testing.assert_array_equal(local.coef_, dist.coef_)


# ---------------------------------------------------------------------------------------
# wide rows: no dense rows, a sensible AUC, a cost per non-zero


def _wide(n, d, nnz=20, used=5000, seed=0):
    """``n`` rows of ``nnz`` non-zeros drawn from ``used`` features spread over ``d`` columns
    with power-law frequencies (as words or hashed tokens); the label a noisy threshold of a
    random linear score (30 % positive)."""
    rng = np.random.default_rng(seed)
    features = np.arange(used) * (d // used)
    p = 1.0 / np.arange(1, used + 1)
    draws = rng.choice(used, size=(n, 2 * nnz), p=p / p.sum())
    rows = [np.unique(r)[:nnz] for r in draws]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    X = sp.csr_matrix((rng.random(indptr[-1]), features[np.concatenate(rows)], indptr),
                      shape=(n, d))
    truth = np.zeros(d)
    truth[features] = np.random.default_rng(99).normal(size=used)
    s = X @ truth + 0.3 * rng.normal(size=n)
    return X, np.where(s > np.quantile(s, 0.7), 1, -1).astype(np.int8)


WIDE = {
    "twopass": lambda: TwoPassAUC(random_state=0),
    "spam": lambda: SPAM(random_state=0),
    "spam-net": lambda: SPAM(l1=1e-3, random_state=0),
    "spdam": lambda: SPDAM(lam=1e-2, random_state=0),
}


def test_wide_rows_fit_without_dense_rows_and_rank_well():
    """2,000 rows of 2**18 features (about 20 non-zeros each among 5,000 used): every
    estimator fits and scores inside ``no_dense_rows``; held-out AUC on 1,000 more rows of
    the same law above 0.7 (0.5 is chance)."""
    d = 2**18
    X, y = _wide(2000, d, seed=1)
    X_test, y_test = _wide(1000, d, seed=2)
    for name, make in WIDE.items():
        with no_dense_rows():
            model = make().fit(X, y)
            auc = roc_auc_score(y_test, model.decision_function(X_test))
        assert auc > 0.7, (name, auc)


#: rows visited per timing of each kernel: a per-row time well above the noise of the O(d)
#: work of a chunk at 2**20 features (SPAM-NET's rows cost about 10x the others')
VISITS = {"twopass": 20, "spam": 20, "spam-net": 2, "spdam": 20}


def _kernel_seconds(name: str, d: int, X, y, visits: int) -> float:
    """One call of ``name``'s kernel on the rows ``X`` (as ``d`` columns), each row visited
    ``visits`` times, its arrays made before the clock starts."""
    rng = np.random.default_rng(0)
    cpos, cneg = rng.random(d) / d, rng.random(d) / d
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    m = X.shape[0]
    order = np.tile(np.arange(m, dtype=np.int64), visits)
    parts = (X.indptr, X.indices, X.data, y, order)
    w, wbar, clock, duals, u = np.zeros(d), np.zeros(d), np.zeros(1), np.zeros(m), np.zeros(d)
    tic = time.perf_counter()
    if name == "twopass":
        _twopass_sgd_chunk_csr(*parts, cpos, cneg, np.zeros(0), w, clock, 0, 0.01, False, 1e-3,
                               3.0, 1.5, 1.0, 1.0, 16)
    elif name.startswith("spam"):
        _spam_chunk_csr(*parts, cpos, cneg, np.zeros(0), w, wbar, clock, 0, 1.0, True, 0.3,
                        1e-4, 1e-3 if name == "spam-net" else 0.0, 1.0, 1.0, 16)
    else:
        _spdam_chunk_csr(*parts, cpos, cneg, cneg - cpos, duals, u, w, wbar, 1.8, 1.2,
                         float(m * visits), 1, 1.0, 0.01, 0.999, 5e-4)
    return time.perf_counter() - tic


def test_cost_is_per_non_zero_not_per_feature():
    """The same rows (the same non-zeros in the same columns) at 2**14 and 2**20 features:
    each kernel's time per row within 3x (a dense row would be 64x), and a whole fit at 2**20
    features allocates a few d-vectors of numpy memory at its peak (no n x d array).

    Time per row: a chunk's time less that of a chunk of 10 rows (the O(d) work of a chunk:
    setting up and writing back the lazy form), over the difference in rows visited; best of
    4, the two widths measured in turns. The rows use the same 5,000 columns at both widths,
    so that the memory a row touches is the same: the same features spread over 2**20
    columns add the cost of cache and TLB misses in 8 MiB vectors (2-4x measured,
    docs/sparse.md), which is the machine's."""
    rows, few = _wide(5000, 2**14, seed=3), _wide(10, 2**14, seed=3)
    for name, visits in VISITS.items():
        best = {}
        _kernel_seconds(name, 2**14, *few, visits)  # compiles (or loads) the kernel
        for _ in range(4):
            for d in (2**14, 2**20):
                for key, (X, y) in (("rows", rows), ("few", few)):
                    t = _kernel_seconds(name, d, X, y, visits)
                    best[d, key] = min(best.get((d, key), np.inf), t)
        visited = visits * (rows[0].shape[0] - few[0].shape[0])
        per_row = {d: max(best[d, "rows"] - best[d, "few"], 1e-9) / visited
                   for d in (2**14, 2**20)}
        assert per_row[2**20] < 3 * per_row[2**14], (name, per_row)
    d = 2**20
    X, y = _wide(2000, d, seed=4)
    for make in (lambda: TwoPassAUC(random_state=0, n_chains=1, n_epochs=2),
                 lambda: SPAM(random_state=0, n_chains=1, n_epochs=2),
                 lambda: SPDAM(random_state=0, n_epochs=2)):
        with dask.config.set(scheduler="sync"), no_dense_rows():
            tracemalloc.start()
            make().fit(X, y)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        assert peak < 24 * 8 * d, peak / (8 * d)
