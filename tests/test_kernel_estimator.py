"""KernelAUC: the estimator contract, both routes to the same model, the measured-cost switch,
the automatic choice of gamma and lam, saving and loading."""

from __future__ import annotations

from collections import Counter

import dask
import dask.array as da
import numpy as np
import pytest
from reference import kernel as ref
from sklearn.metrics import roc_auc_score

import daskauc.model_selection.gamma_lam as selection
import daskauc.model_selection.width_walk as width_walk
from daskauc import KernelAUC, load_model, save_model
from daskauc.engine.cost import route_costs

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _data(seed, n=400, d=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * [1.0, 3.0, 0.5] + [0.0, 10.0, -2.0]
    Z = (X - [0.0, 10.0, -2.0]) / [1.0, 3.0, 0.5]
    y = np.where(np.sin(2 * Z[:, 0]) + Z[:, 1] ** 2 - 0.8 + 0.3 * rng.standard_normal(n) > 0,
                 1, -1)
    return X, y


FIXED = {"gamma": 0.5, "lam": 1e-3, "tol": 1e-8, "cg_tol": 1e-3, "max_cg": 500}


def test_fit_predict_score_on_numpy_and_dask():
    X, y = _data(0)
    Xt, yt = _data(1, n=200)
    C = X[::8]
    est = KernelAUC(centres=C, **FIXED).fit(X, y)
    s = est.decision_function(Xt)
    assert isinstance(s, np.ndarray) and s.shape == (200,)
    # the model is the kernel expansion over the scaled centres, shifted by the calibration
    Xs = (Xt - est.scaler_.mean_) / est.scaler_.scale_
    f = ref.gaussian(Xs, est.centres_, 0.5) @ est.dual_coef_
    np.testing.assert_allclose(s - est.intercept_, f, rtol=1e-4, atol=1e-5 * np.abs(f).max())
    assert est.score(Xt, yt) == pytest.approx(roc_auc_score(yt, s), abs=1e-12)
    assert est.score(Xt, yt) > 0.85
    assert set(np.unique(est.predict(Xt))) <= {-1, 1}
    # float32 tiles (the default dtype): numpy rows are scaled in float64 then cast, dask rows
    # cast then scaled, so the two agree to float32 rounding, not to the bit
    lazy = est.decision_function(da.from_array(Xt, chunks=(64, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), s, rtol=0, atol=2e-5 * np.abs(s).max())
    est_d = KernelAUC(centres=C, **FIXED).fit(da.from_array(X, chunks=(100, -1)), y)
    np.testing.assert_allclose(est_d.decision_function(Xt), s, rtol=0,
                               atol=2e-5 * np.abs(s).max())
    assert est.selection_ == {} and est.lam_ == 1e-3 and est.gamma_ == 0.5
    assert est.n_features_in_ == 3 and list(est.classes_) == [-1, 1]


def test_kernel_and_embedding_routes_give_the_same_model():
    X, y = _data(2)
    Xt, _ = _data(3, n=150)
    C = X[::10]
    for loss in ("squared_hinge", "least_squares"):
        ker = KernelAUC(centres=C, loss=loss, solver="kernel", **FIXED).fit(X, y)
        emb = KernelAUC(centres=C, loss=loss, solver="embedding", **FIXED).fit(X, y)
        assert (ker.route_, emb.route_) == ("kernel", "embedding")
        a, b = ker.decision_function(Xt), emb.decision_function(Xt)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * np.abs(b).max())


def test_the_switch_follows_measured_cost_and_memory():
    rates = {"tile_flops": 5e10, "gemm32_flops": 8e10, "gemm64_flops": 4e10, "read_bytes": 1e10}
    small = route_costs(50_000, 20, 500, loss="squared_hinge", n_threads=2, rates=rates)
    big = route_costs(464_809, 54, 32_768, loss="squared_hinge", n_threads=2, rates=rates,
                      memory_budget=12e9)
    assert small["embedding"] < small["kernel"]  # few centres: materialize once
    assert big["embedding"] == np.inf and np.isfinite(big["kernel"])  # 61 GB never fits
    # with unlimited memory the embedding's 2 n m^2 build and 9 m^3 eigendecomposition still
    # lose at m = 32,768 (at 16,384 the two are within a few percent with these rates)
    top = route_costs(464_809, 54, 32_768, loss="squared_hinge", n_threads=2, rates=rates)
    assert top["kernel"] < top["embedding"] < np.inf
    X, y = _data(4)
    est = KernelAUC(centres=X[::20], **FIXED).fit(X, y)
    assert est.route_ in ("kernel", "embedding")
    want = min(("kernel", "embedding"), key=lambda r: est.route_costs_[r])
    assert est.route_ == want
    assert KernelAUC(centres=X[::20], persist=False, **FIXED).fit(X, y).route_ == "kernel"


def test_selection_picks_the_best_mean_with_the_stated_ties(monkeypatch):
    # planted fold paths: the best mean is at multiplier 2, lam 1e-3; a tie at multiplier 0.5
    # and 4 (equally far from the rule in log) would go to the one listed first in the order
    planted = {(2.0, 1e-3): 0.95, (0.5, 1e-2): 0.94, (4.0, 1e-2): 0.94}

    def fake_path(Phi_tr, y_tr, Phi_va, y_va, *, loss, lams, solver_params, label):
        mult = float(label.split("gamma=")[1].split("/b")[0])
        return [{"lam": lam, "auc": planted.get((mult, lam), 0.9), "n_iter": 1,
                 "seconds": 0.0} for lam in lams]

    monkeypatch.setattr(selection, "_fold_path", fake_path)
    X, y = _data(5, n=300)
    Xd = da.from_array(X, chunks=(100, -1))
    sel = selection.select_gamma_lam(Xd, y, gamma0=0.1, loss="squared_hinge", n_centres=20,
                                     gamma_multipliers=(0.5, 1.0, 2.0, 4.0),
                                     lams=(1e-1, 1e-2, 1e-3), cv=3, rows=300, n_full=1200,
                                     random_state=np.random.SeedSequence(0))
    assert (sel.gamma_multiplier, sel.lam_subsample) == (2.0, 1e-3)
    assert sel.gamma == pytest.approx(0.2)
    n_tr = 200.0  # three folds of 300 rows
    assert sel.lam == pytest.approx(1e-3 * (n_tr / 1200) ** selection.LAM_EXPONENT)
    assert len(sel.table) == 12 and sel.n_centres == 20
    planted.pop((2.0, 1e-3))
    sel = selection.select_gamma_lam(Xd, y, gamma0=0.1, loss="squared_hinge", n_centres=20,
                                     gamma_multipliers=(0.5, 1.0, 2.0, 4.0),
                                     lams=(1e-1, 1e-2, 1e-3), cv=3, rows=300,
                                     random_state=np.random.SeedSequence(0))
    assert (sel.gamma_multiplier, sel.lam_subsample) == (0.5, 1e-2)  # first in grid order
    fixed = selection.select_gamma_lam(Xd, y, gamma0=0.1, loss="squared_hinge", n_centres=20,
                                       gamma_multipliers=(1.0, 2.0), lam_fixed=3e-4, cv=3,
                                       rows=300, n_full=1200, extend_grid=False,
                                       random_state=np.random.SeedSequence(0))
    assert fixed.lam == 3e-4 and len(fixed.table) == 2
    # the screen's bounds (full-data scale, rescaled to the folds as lam is): only the lams
    # of the grid between them are solved
    scale = (1200 / n_tr) ** selection.LAM_EXPONENT
    bounded = selection.select_gamma_lam(
        Xd, y, gamma0=0.1, loss="squared_hinge", n_centres=20, gamma_multipliers=(1.0, 2.0),
        lams=(1e-1, 1e-2, 1e-3, 1e-4, 1e-5), cv=3, rows=300, n_full=1200, extend_grid=False,
        lam_ceiling=2e-2 / scale, lam_floor=1e-3 / scale,
        random_state=np.random.SeedSequence(0))
    assert sorted({r["lam"] for r in bounded.table}) == pytest.approx([1e-3, 1e-2])


@pytest.mark.parametrize("peak, want", [(0.125, 0.125), (2.0**-6, 0.0625), (8.0, 8.0)])
def test_selection_goes_past_an_end_of_the_grid(monkeypatch, peak, want):
    # planted validation AUC falling with the distance (in octaves) from ``peak``: a best
    # width at an end of the grid is followed past it by factors of 2 until it is inside, at
    # most EDGE_STEPS widths (peak 2^-6 is out of reach: the search stops at 2^-4)
    seen = []

    def fake_path(Phi_tr, y_tr, Phi_va, y_va, *, loss, lams, solver_params, label):
        mult = float(label.split("gamma=")[1].split("/b")[0])
        seen.append(mult)
        auc = 0.95 - 0.01 * abs(np.log2(mult / peak))
        return [{"lam": lam, "auc": auc - 0.001 * k, "n_iter": 1, "seconds": 0.0}
                for k, lam in enumerate(lams)]

    monkeypatch.setattr(selection, "_fold_path", fake_path)
    X, y = _data(5, n=300)
    Xd = da.from_array(X, chunks=(100, -1))
    kw = dict(gamma0=0.1, loss="squared_hinge", n_centres=20, gamma_multipliers=(0.5, 1.0, 2.0),
              lams=(1e-1, 1e-2), cv=3, rows=300, random_state=np.random.SeedSequence(0))
    sel = selection.select_gamma_lam(Xd, y, **kw)
    assert sel.gamma_multiplier == want and sel.lam_subsample == 1e-1
    mults = sorted({r["gamma_multiplier"] for r in sel.table})
    assert len(mults) <= 3 + selection.EDGE_STEPS and len(sel.table) == 2 * len(mults)
    if want == peak:  # found: one width past it on the far side, inside the grid
        assert mults[0] < want < mults[-1] or want in (0.5, 1.0, 2.0)
    # every width on the first fold; on the others only those once among the KEEP_WIDTHS
    # best on it (successive halving), the chosen one always
    counts = Counter(seen)
    assert set(counts) == set(mults) and set(counts.values()) <= {1, 3}
    assert counts[sel.gamma_multiplier] == 3
    assert sum(v == 3 for v in counts.values()) < len(mults)
    fixed = selection.select_gamma_lam(Xd, y, extend_grid=False, **kw)
    assert sorted({r["gamma_multiplier"] for r in fixed.table}) == [0.5, 1.0, 2.0]
    assert fixed.gamma_multiplier == (0.5 if peak < 1 else 2.0)


@pytest.mark.parametrize("peak, want, tried", [
    (8.0, 8.0, [2.0, 4.0, 8.0, 16.0]),          # rises, then falls past the peak
    (2.0**9, 32.0, [2.0, 4.0, 8.0, 16.0, 32.0]),  # still rising after WIDTH_STEPS doublings
    (0.5, 0.5, [2.0, 4.0, 1.0, 0.5, 0.25]),       # the first doubling falls: halve instead
    (2.0, 2.0, [2.0, 4.0, 1.0]),                  # the start is the peak
])
def test_width_walk_follows_the_validation_auc(peak, want, tried):
    calls = []

    def score(mult):  # planted: falls by 0.01 per octave from the peak
        calls.append(mult)
        return 0.95 - 0.01 * abs(np.log2(mult / peak))

    best, table = width_walk.walk_widths(score, 2.0, steps=4, gain=5e-4)
    assert best == want and calls == tried and [t[0] for t in table] == tried
    assert [t[1] for t in table] == [score(t) for t in tried]
    # a rise smaller than the gain stops the walk; ties go to the start
    best, table = width_walk.walk_widths(lambda mult: 0.9 + 1e-4 * mult, 1.0, gain=5e-4)
    assert [t[0] for t in table] == [1.0, 2.0, 0.5] and best == 2.0
    best, _ = width_walk.walk_widths(lambda mult: 0.9, 1.0)
    assert best == 1.0


def _checkerboard(seed, n, freq=7.0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 2))
    y = np.where(np.sin(freq * X[:, 0]) * np.sin(freq * X[:, 1])
                 + 0.2 * rng.standard_normal(n) > 0, 1, -1)
    return X, y


def test_width_walk_at_the_final_scale_moves_the_width_and_helps():
    # 24 centres in the selection cannot see the width that 400 centres want (the selection
    # picks 32/b); the walk at 400 centres on 2,000 rows goes down to 8/b, and the test AUC
    # rises over the selection's width (measured: 0.9281 against 0.9263 at the lam the
    # selection's shorter lam path chose; 0.9296 against 0.9226 with the longer one before)
    X, y = _checkerboard(0, 3000)
    Xt, yt = _checkerboard(1, 2000)
    kw = dict(n_centres=400, selection_rows=600, selection_centres=24, random_state=0)
    est = KernelAUC(**kw).fit(X, y)
    walk = est.selection_["width_walk"]
    table = walk["table"]
    # the model without the walk: the selection's width (where the walk starts), same lam
    off = KernelAUC(n_centres=400, gamma=table[0]["gamma"], lam=est.lam_,
                    random_state=0).fit(X, y)
    assert (walk["centres"], walk["rows"], walk["validation_rows"]) == (400, 2000, 1000)
    best = max(table, key=lambda r: r["val_auc"])
    assert est.gamma_ == pytest.approx(best["gamma"]) == est.selection_["gamma"]
    assert est.gamma_ != pytest.approx(off.gamma_)
    assert est.selection_["gamma_multiplier"] == best["gamma_multiplier"]
    mults = [r["gamma_multiplier"] for r in table]
    assert all(b / a in (2.0, 0.5, 0.25) for a, b in zip(mults[:-1], mults[1:], strict=True))
    assert est.score(Xt, yt) > off.score(Xt, yt) + 0.001
    # lam as the selection moves it: (n_fold_train / n) ** LAM_EXPONENT from its fold rows
    assert walk["lam"] == pytest.approx(est.lam_ * (3000 / 2000) ** selection.LAM_EXPONENT)
    # the walk runs only with at least twice the selection's centres, and can be turned off
    for params in ({"n_centres": 40}, {"width_rows": 0}):
        other = KernelAUC(**{**kw, "lam": est.lam_, **params}).fit(X, y)
        assert "width_walk" not in other.selection_ and other.selection_["n_centres"] <= 24


@pytest.mark.parametrize("scripted, solved", [
    # three points in a row DROP below the best: stops at the third
    ([0.90, 0.92, 0.917, 0.9175, 0.9171, 0.99, 0.99], 5),
    # below by less than DROP does not count (noisy folds of a few hundred rows)
    ([0.90, 0.92, 0.919, 0.917, 0.9185, 0.917, 0.9175], 7),
    # a point within DROP of the best restarts the count; the grid's end stops it
    ([0.90, 0.92, 0.917, 0.917, 0.919, 0.917, 0.917], 7),
])
def test_lam_path_stops_by_its_rule(monkeypatch, scripted, solved):
    """The path's stop, against validation AUCs scripted lam by lam: the solves are real,
    the scores are the script's."""
    X, y = _data(6, n=300)
    Phi = np.random.default_rng(0).standard_normal((300, 8))
    script = iter(scripted)
    monkeypatch.setattr(selection, "roc_auc", lambda *_: next(script))
    path = selection._fold_path(Phi[:200], y[:200], Phi[200:], y[200:], loss="squared_hinge",
                                lams=[10.0 ** -k for k in range(1, 8)],
                                solver_params={"tol": 1e-6})
    assert [r["auc"] for r in path] == scripted[:solved]
    assert all(r["n_iter"] > 0 for r in path)  # each point solved, none carried


def test_automatic_choice_records_its_table_and_beats_a_bad_fixed_gamma():
    X, y = _data(7, n=600)
    Xt, yt = _data(8, n=400)
    est = KernelAUC(centres=X[::6], random_state=0, selection_rows=600,
                    gamma_grid=(0.25, 1.0, 4.0), lam_grid=(1e-2, 1e-3, 1e-4)).fit(X, y)
    sel = est.selection_
    assert sel["gamma"] == est.gamma_ and sel["lam"] == est.lam_
    best = max((r for r in sel["table"] if r["mean_auc"] is not None),
               key=lambda r: r["mean_auc"])
    assert best["gamma"] == pytest.approx(est.gamma_)
    assert "validation AUC" in sel["rule"]
    bad = KernelAUC(centres=X[::6], gamma=est.gamma_ * 64, lam=est.lam_).fit(X, y)
    assert est.score(Xt, yt) > bad.score(Xt, yt)


def test_save_and_load_give_the_same_scores(tmp_path):
    X, y = _data(9)
    est = KernelAUC(centres=X[::8], **FIXED).fit(X, y)
    save_model(est, tmp_path / "m.zarr")
    back = load_model(tmp_path / "m.zarr")
    assert type(back) is KernelAUC and back.route_ == est.route_
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))


def test_validation_history_and_warnings():
    X, y = _data(10)
    Xv, yv = _data(11, n=100)
    est = KernelAUC(centres=X[::8], solver="kernel", **FIXED).fit(X, y, X_val=Xv, y_val=yv)
    assert est.history_[-1]["val_auc"] == pytest.approx(est.score(Xv, yv), abs=1e-12)
    with pytest.warns(UserWarning, match="n_centres=500 > n_samples=400"):
        est = KernelAUC(n_centres=500, gamma=0.5, lam=1e-2).fit(X, y)
    assert est.centres_.shape == (400, 3)  # every row a centre: the exact kernel problem


@pytest.mark.parametrize(
    "params, match",
    [({"n_centres": 0}, "n_centres must be >= 1"), ({"loss": "hinge"}, "loss must be one of"),
     ({"lam": -1.0}, "lam must be > 0"), ({"gamma": "median"}, "gamma must be one of"),
     ({"solver": "gpu"}, "solver must be one of"), ({"lam_grid": []}, "lam_grid must be"),
     ({"centres": np.zeros((5, 2))}, r"centres must have shape \(m, 3\)"),
     ({"scaling": "robust"}, "scaling must be one of"),
     ({"width_rows": -1}, "width_rows must be >= 0"),
     ({"width_centres": 0}, "width_centres must be >= 1")],
)
def test_bad_parameters_are_named(params, match):
    X, y = _data(12, n=100)
    with pytest.raises((ValueError, TypeError), match=match):
        KernelAUC(**{"centres": X[::5], **params}).fit(X, y)


def test_warm_start_along_m_carries_the_model_over(monkeypatch):
    import daskauc.composite.kernel_model as kn  # the module that calls the solver

    starts = []
    real = kn.kernel_pairwise_newton

    def spy(X, y, centres, **kw):
        starts.append((np.array(centres), kw.get("alpha0")))
        return real(X, y, centres, **kw)

    monkeypatch.setattr(kn, "kernel_pairwise_newton", spy)
    X, y = _data(13, n=600)
    params = {**FIXED, "tol": 1e-6, "solver": "kernel", "random_state": 3}
    est = KernelAUC(n_centres=40, warm_start=True, **params).fit(X, y)
    assert starts[-1][1] is None  # nothing to start from yet
    Xs = est._scale(X)
    f_small = ref.gaussian(Xs, est.centres_, est.gamma_) @ est.dual_coef_  # float64
    idx_small = est.centre_index_
    est.set_params(n_centres=120).fit(X, y)
    assert set(idx_small) <= set(est.centre_index_)  # nested uniform centres
    C, alpha0 = starts[-1]
    # the larger fit starts from exactly the smaller model
    np.testing.assert_allclose(ref.gaussian(Xs, C, est.gamma_) @ alpha0, f_small, rtol=0,
                               atol=1e-12 * np.abs(f_small).max())
    cold = KernelAUC(n_centres=120, **params).fit(X, y)
    assert est.n_iter_ < cold.n_iter_
    f_cold = cold.decision_function(X)
    np.testing.assert_allclose(est.decision_function(X), f_cold, rtol=0,
                               atol=1e-4 * np.abs(f_cold).max())
    # centres that are not nested: the old function interpolated at the new centres
    # (solver="kernel": under load the measured-cost switch may take the embedding route)
    old = KernelAUC(centres=X[::7], warm_start=True, solver="kernel", **FIXED).fit(X, y)
    new_centres = X[3::11]
    f_old = ref.gaussian(old._scale(new_centres), old.centres_, old.gamma_) @ old.dual_coef_
    old.set_params(centres=new_centres).fit(X, y)
    C, alpha0 = starts[-1]
    np.testing.assert_allclose(ref.gaussian(C, C, old.gamma_) @ alpha0, f_old, rtol=0,
                               atol=1e-6 * np.abs(f_old).max())


def test_fit_on_rows_persisted_on_a_cluster(dask_cluster_client):
    # the automatic choice reads its subsample with the cluster's scheduler (a local one
    # cannot see persisted chunks: "missing dependency"), then solves in-process
    X, y = _data(14, n=500)
    Xd = dask_cluster_client.persist(da.from_array(X, chunks=(100, -1)))
    est = KernelAUC(n_centres=60, random_state=0, gamma_grid=(0.5, 2.0), lam_grid=(1e-2, 1e-3),
                    selection_rows=500).fit(Xd, y)
    with dask.config.set(scheduler="threads"):
        local = KernelAUC(n_centres=60, random_state=0, gamma_grid=(0.5, 2.0),
                          lam_grid=(1e-2, 1e-3), selection_rows=500).fit(X, y)
    # the same choice (the scaler's tree reduction may round the last bit differently)
    assert est.gamma_ == pytest.approx(local.gamma_, rel=1e-12)
    assert est.lam_ == pytest.approx(local.lam_, rel=1e-12)
    np.testing.assert_allclose(est.decision_function(X), local.decision_function(X), rtol=0,
                               atol=1e-4 * np.abs(local.decision_function(X)).max())


def test_auto_selection_on_too_few_rows_of_a_class_is_a_clear_error():
    """Two positives for 3-fold selection failed inside scikit-learn's splitter."""
    from daskauc import KernelAUC

    X = np.random.default_rng(0).normal(size=(6, 3))
    y = np.array([0, 0, 0, 0, 1, 1])
    with pytest.raises(ValueError, match="need at least 3 rows of each class; y has 2 positive"):
        KernelAUC().fit(X, y)
    with pytest.raises(ValueError, match="lam=auto choose by 2-fold"):
        KernelAUC(gamma="rule", cv=2).fit(X, np.array([0, 0, 0, 0, 0, 1]))
    assert KernelAUC(gamma="rule", lam=1e-3, n_centres=6).fit(X, y).score(X, y) > 0.5
