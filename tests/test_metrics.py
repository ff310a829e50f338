"""Exact AUC and ROC (daskauc.metrics) against scikit-learn and brute force."""

from __future__ import annotations

from fractions import Fraction

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback
from reference.metrics import brute_force_auc, brute_force_roc
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from daskauc import metrics
from daskauc.metrics import roc_auc, roc_curve


def _cases(rng, n=3000):
    """(name, y, scores, pos_label) with heavy ties, imbalance, odd labels and dtypes."""
    y01 = rng.random(n) < 0.35
    yield "rounded", y01, np.round(rng.normal(size=n), 2), None
    yield "integers", y01, rng.integers(0, 7, n), None
    yield "all-equal", y01, np.full(n, 0.25), None
    imb = np.zeros(n, bool)
    imb[rng.choice(n, n // 101, replace=False)] = True
    yield "imbalanced", np.where(imb, 1, -1), np.round(rng.normal(size=n) + imb, 1), None
    yield "strings", np.where(y01, "spam", "ham"), np.round(rng.random(n), 2), "spam"
    yield "strings-neg", np.where(y01, "spam", "ham"), np.round(rng.random(n), 2), "ham"
    yield "float32", y01.astype(np.int64) + 1, (rng.random(n) + y01).astype(np.float32), None
    yield "distinct", y01, rng.normal(size=n) + 0.5 * y01, None


CASES = list(_cases(np.random.default_rng(20240901)))
IDS = [c[0] for c in CASES]


def _is_pos(y, pos_label):
    y = np.asarray(y)
    return y == (pos_label if pos_label is not None else np.unique(y)[1])


def _sk_auc(y, s, pos_label):
    return roc_auc_score(_is_pos(y, pos_label), s)


# --------------------------------------------------------------------------------------
# numpy
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,y,s,pos_label", CASES, ids=IDS)
def test_numpy_auc_matches_sklearn_and_brute_force(name, y, s, pos_label):
    got = roc_auc(y, s, pos_label=pos_label)
    assert isinstance(got, float)
    assert abs(got - _sk_auc(y, s, pos_label)) <= 1e-12
    assert got == float(brute_force_auc(_is_pos(y, pos_label), s))
    if name == "all-equal":
        assert got == 0.5


@pytest.mark.parametrize("drop", [True, False])
@pytest.mark.parametrize("name,y,s,pos_label", CASES, ids=IDS)
def test_numpy_roc_curve_equals_sklearn(name, y, s, pos_label, drop):
    fpr, tpr, thr = roc_curve(y, s, pos_label=pos_label, drop_intermediate=drop)
    efpr, etpr, ethr = sk_roc_curve(_is_pos(y, pos_label), s, drop_intermediate=drop)
    np.testing.assert_array_equal(fpr, efpr)
    np.testing.assert_array_equal(tpr, etpr)
    np.testing.assert_array_equal(thr, ethr)
    assert thr.dtype == np.float64 and thr[0] == np.inf
    if not drop:
        bf = brute_force_roc(_is_pos(y, pos_label), s)
        for got, want in zip((fpr, tpr, thr), bf, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-15)


def test_numpy_small_exact_values():
    # 2 positives, 2 negatives: pairs (.9>.1) (.9>.5) (.5=.5 -> 1/2) (.5>.1) = 3.5 / 4
    assert roc_auc([1, 0, 1, 0], [0.9, 0.5, 0.5, 0.1]) == 0.875
    assert roc_auc([1, 0], [0.0, 1.0]) == 0.0
    assert roc_auc([True, False], [1, 0]) == 1.0
    assert roc_auc(np.array([[1], [0], [1]]), np.array([[3.0], [1.0], [1.0]])) == 0.75


def test_pos_label_flips_auc():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500)
    s = np.round(rng.random(500), 1)
    assert abs(roc_auc(y, s, pos_label=0) - (1 - roc_auc(y, s))) < 1e-15


def test_twice_u_does_not_overflow_with_huge_counts():
    # all negatives at 0; positives split between 0 (ties) and 2: AUC = (P0/2 + P2) / P
    for P0, P2, N in [(5 * 10**7, 5 * 10**7, 10**8), (3 * 10**9, 4 * 10**9, 6 * 10**9)]:
        p = np.array([P0, 0, P2], np.int64)
        n = np.array([N, 0, 0], np.int64)
        assert metrics._twice_u(p, n) == P0 * N + 2 * P2 * N  # exact Python int
        u2, P, Nn = metrics._combine_u([(metrics._twice_u(p, n), P0 + P2, N)])
        assert Fraction(u2, 2 * P * Nn) == Fraction(P0 + 2 * P2, 2 * (P0 + P2))
    # bucket cross terms in Python integers: every positive above every negative
    buckets = [(0, 0, 4 * 10**9), (0, 5 * 10**9, 0)]
    u2, P, N = metrics._combine_u(buckets)
    assert u2 == 2 * P * N and P == 5 * 10**9 and N == 4 * 10**9


def test_merge_runs_kernel_against_concatenate_sort():
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        a = np.unique(rng.integers(0, 50, 40)).astype(dtype)
        b = np.unique(rng.integers(0, 50, 30)).astype(dtype)
        pa, na = rng.integers(0, 5, (2, a.size))
        pb, nb = rng.integers(0, 5, (2, b.size))
        for arr in (a, b):
            arr.flags.writeable = False  # zarr / dask blocks can be read-only
        v, p, n = metrics._merge((a, pa, na), (b, pb, nb))
        allv = np.concatenate([a, b])
        want_v = np.unique(allv)
        np.testing.assert_array_equal(v, want_v)
        assert v.dtype == dtype
        for got, ca, cb in ((p, pa, pb), (n, na, nb)):
            want = np.array([ca[a == x].sum() + cb[b == x].sum() for x in want_v])
            np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------------------
# dask
# --------------------------------------------------------------------------------------

CHUNKINGS = {
    "one-chunk": -1,
    "many-chunks": 250,
    "uneven": (1, 999, 17, 1200, 3, 780),
}


@pytest.mark.parametrize("chunks", list(CHUNKINGS.values()), ids=list(CHUNKINGS))
@pytest.mark.parametrize("name,y,s,pos_label", CASES, ids=IDS)
def test_dask_auc_matches_sklearn(name, y, s, pos_label, chunks):
    want = _sk_auc(y, s, pos_label)
    exact = roc_auc(y, s, pos_label=pos_label)
    ds = da.from_array(s, chunks=chunks)
    dy = da.from_array(y, chunks=chunks)
    with dask.config.set(scheduler="threads"):
        for yy, ss, nb in [(dy, ds, None), (y, ds, 7), (dy, s, 3)]:
            got = roc_auc(yy, ss, pos_label=pos_label, n_buckets=nb)
            assert abs(got - want) <= 1e-12, (name, nb)
            assert got == exact  # same integers -> the same float


@pytest.mark.parametrize("n_buckets", [1, 2, 13, 64])
def test_dask_ties_across_chunks_and_buckets(n_buckets):
    rng = np.random.default_rng(11)
    n = 4000
    y = rng.random(n) < 0.5
    s = rng.integers(0, 5, n).astype(np.float64)  # 5 values, more buckets than values
    ds = da.from_array(s, chunks=333)
    got = roc_auc(da.from_array(y, chunks=333), ds, n_buckets=n_buckets)
    assert got == float(brute_force_auc(y, s))
    fpr, tpr, thr = roc_curve(y, ds, n_buckets=n_buckets)
    efpr, etpr, ethr = sk_roc_curve(y, s)
    np.testing.assert_array_equal(fpr, efpr)
    np.testing.assert_array_equal(tpr, etpr)
    np.testing.assert_array_equal(thr, ethr)


@pytest.mark.parametrize("drop", [True, False])
def test_dask_roc_equals_sklearn_when_small(drop):
    rng = np.random.default_rng(7)
    n = 5000
    y = np.where(rng.random(n) < 0.1, "pos", "neg")
    s = np.round(rng.normal(size=n) + (y == "pos"), 2).astype(np.float32)
    fpr, tpr, thr = roc_curve(
        da.from_array(y, chunks=700),
        da.from_array(s, chunks=700),
        pos_label="pos",
        drop_intermediate=drop,
        n_buckets=5,
    )
    efpr, etpr, ethr = sk_roc_curve(y == "pos", s, drop_intermediate=drop)
    np.testing.assert_array_equal(fpr, efpr)
    np.testing.assert_array_equal(tpr, etpr)
    np.testing.assert_array_equal(thr, ethr)


@pytest.mark.parametrize("n_buckets", [1, 6])
def test_dask_roc_thinned_to_exact_points(n_buckets):
    rng = np.random.default_rng(8)
    n, max_points = 6000, 100
    y = rng.random(n) < 0.2
    s = rng.normal(size=n) + y  # all distinct: 6000 thresholds, more than max_points
    fpr, tpr, thr = roc_curve(
        y,
        da.from_array(s, chunks=800),
        drop_intermediate=False,
        max_points=max_points,
        n_buckets=n_buckets,
    )
    assert max_points // 2 <= fpr.size <= max_points
    assert (fpr[0], tpr[0], thr[0]) == (0.0, 0.0, np.inf)
    assert fpr[-1] == 1.0 and tpr[-1] == 1.0 and thr[-1] == s.min()
    assert np.all(np.diff(thr) < 0) and np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    # every point kept is an exact point of the full curve
    efpr, etpr, ethr = brute_force_roc(y, s)
    idx = np.searchsorted(-ethr, -thr)
    np.testing.assert_array_equal(ethr[idx], thr)
    np.testing.assert_allclose(fpr, efpr[idx], rtol=1e-15)
    np.testing.assert_allclose(tpr, etpr[idx], rtol=1e-15)
    # spread along the curve: no gap in fpr + tpr much above 2 / max_points
    gaps = np.diff(fpr + tpr)
    assert gaps.max() <= 3 * 2 / (max_points - 2)
    # drop_intermediate on a thinned curve keeps it within bounds too
    f2, _, _ = roc_curve(y, da.from_array(s, chunks=800), max_points=max_points)
    assert 2 <= f2.size <= max_points
    f3, t3, t3thr = roc_curve(y, da.from_array(s, chunks=800), max_points=2)
    np.testing.assert_array_equal(f3, [0, 1])
    np.testing.assert_array_equal(t3, [0, 1])


def _nelem(obj, kind="f") -> int:
    if isinstance(obj, np.ndarray):
        return obj.size if obj.dtype.kind in kind else 0
    if isinstance(obj, (tuple, list)):
        return sum(_nelem(o, kind) for o in obj)
    if isinstance(obj, dict):
        return sum(_nelem(o, kind) for o in obj.values())
    return 0


class _InputSizes(Callback):
    """Record, per task, how many score values (float elements) its inputs hold."""

    def __init__(self):
        super().__init__()
        self.inputs: dict = {}
        self.computes = 0

    def _start(self, dsk):
        self.computes += 1

    def _pretask(self, key, dsk, state):
        deps = state["dependencies"][key]
        self.inputs[key] = sum(_nelem(state["cache"][d]) for d in deps)


def test_dask_never_gathers_all_scores_in_one_task():
    rng = np.random.default_rng(9)
    n, chunk, n_buckets = 40_000, 2_000, 8
    y = rng.random(n) < 0.3
    s = rng.normal(size=n) + y  # all distinct: the worst case for run compression
    ds = da.from_array(s, chunks=chunk)
    dy = da.from_array(y, chunks=chunk)
    cb = _InputSizes()
    with dask.config.set(scheduler="sync"), cb:
        got = roc_auc(dy, ds, n_buckets=n_buckets)
    assert abs(got - roc_auc_score(y, s)) <= 1e-12
    assert cb.computes == 1
    ours = {k: v for k, v in cb.inputs.items() if str(k).find("daskauc-auc-") >= 0}
    by_layer: dict = {}
    for k, v in ours.items():
        layer = (k[0] if isinstance(k, tuple) else k).rsplit("-", 1)[0]
        by_layer.setdefault(layer, []).append(v)
    assert set(by_layer) == {
        f"daskauc-auc-{x}" for x in ("chunk", "sample", "split", "plan", "bucket", "combine")
    }
    # the measurement sees the data: each chunk task reads its chunk, the buckets see it all
    assert by_layer["daskauc-auc-chunk"] == [chunk] * (n // chunk)
    # (each bucket task also receives the n_buckets - 1 boundaries from the plan)
    assert sum(by_layer["daskauc-auc-bucket"]) == n + n_buckets * (n_buckets - 1)
    # ... but no task of the graph ever gets more than a fraction of the scores
    assert max(by_layer["daskauc-auc-bucket"]) <= 2 * n / n_buckets
    assert max(by_layer["daskauc-auc-plan"]) <= n / 4  # a sample, not the scores
    assert max(by_layer["daskauc-auc-combine"]) == 0  # only integers
    assert max(max(v) for v in by_layer.values()) < n / 4


def test_dask_graph_layers_are_named():
    ds = da.from_array(np.arange(100.0), chunks=10)
    dy = da.from_array(np.arange(100) % 2, chunks=10)
    graph = metrics._auc_graph(ds, dy, None, 3)
    ours = [name for name in graph.dask.layers if name.startswith("daskauc-auc-")]
    assert len(ours) == 6
    assert graph.key.startswith("daskauc-auc-combine-")


def test_distributed_cluster(dask_cluster_client):
    rng = np.random.default_rng(10)
    n = 20_000
    y = rng.random(n) < 0.05
    s = np.round(rng.normal(size=n) + y, 2).astype(np.float32)
    ds = da.from_array(s, chunks=(3000, 3000, 500, 6000, 7500))
    dy = da.from_array(y.astype(np.int8) * 2 - 1, chunks=4000)  # rechunked to ds
    got = roc_auc(dy, ds, n_buckets=6)
    assert abs(got - roc_auc_score(y, s)) <= 1e-12
    assert got == roc_auc(y, s)
    fpr, tpr, thr = roc_curve(dy, ds, n_buckets=6)
    efpr, etpr, ethr = sk_roc_curve(y, s)
    np.testing.assert_array_equal(fpr, efpr)
    np.testing.assert_array_equal(tpr, etpr)
    np.testing.assert_array_equal(thr, ethr)
    bad = s.copy()
    bad[12_345] = np.nan
    with pytest.raises(ValueError, match="NaN.*12345"):
        roc_auc(dy, da.from_array(bad, chunks=5000))


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------


def _kinds(y, s):
    yield np.asarray(y), np.asarray(s)
    yield da.from_array(np.asarray(y), chunks=2), da.from_array(np.asarray(s), chunks=2)
    yield np.asarray(y), da.from_array(np.asarray(s), chunks=2)


@pytest.mark.parametrize(
    "y,s,pos_label,match",
    [
        ([1, 1, 1, 1], [0.1, 0.2, 0.3, 0.4], None, "single class"),
        ([0, 1, 2, 1], [0.1, 0.2, 0.3, 0.4], None, "classes"),
        ([0, 1, 0, 1], [0.1, np.nan, 0.3, 0.4], None, "NaN.*index 1"),
        ([0, 1, 0, 1], [0.1, 0.2, np.inf, 0.4], None, "infinity.*index 2"),
        ([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4], 5, "pos_label=5"),
    ],
)
def test_bad_input_errors(y, s, pos_label, match):
    for yy, ss in _kinds(y, s):
        with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match=match):
            roc_auc(yy, ss, pos_label=pos_label)
        with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match=match):
            roc_curve(yy, ss, pos_label=pos_label)


def test_shape_and_parameter_errors():
    with pytest.raises(ValueError, match="3 labels but scores has 4"):
        roc_auc([0, 1, 0], [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="3 labels but scores has 4"):
        roc_auc(da.from_array(np.array([0, 1, 0])), da.from_array(np.arange(4.0)))
    with pytest.raises(ValueError, match="empty"):
        roc_auc([], [])
    with pytest.raises(ValueError, match="empty"):
        roc_auc(da.zeros(0, dtype=int), da.zeros(0))
    with pytest.raises(ValueError, match="1-D"):
        roc_auc([0, 1], np.ones((2, 2)))
    with pytest.raises(TypeError, match="real numbers"):
        roc_auc([0, 1], np.array([1 + 1j, 2j]))
    x = da.from_array(np.arange(10.0), chunks=5)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        roc_auc(da.from_array(np.arange(10) % 2, chunks=5), x[x > -1])
    with pytest.raises(ValueError, match="max_points must be >= 2"):
        roc_curve([0, 1], [0.0, 1.0], max_points=1)
    with pytest.raises(ValueError, match="n_buckets must be >= 1"):
        roc_auc([0, 1], da.from_array(np.array([0.0, 1.0])), n_buckets=0)
