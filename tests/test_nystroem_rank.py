"""KMeansNystroem says when its pseudo-inverse cuts eigenpairs: the output then has
``n_components_`` columns, fewer than the landmarks asked for."""

import warnings

import numpy as np
import pytest

from daskauc import NBAUC, NSAUC, KMeansNystroem
from daskauc.embed import NystroemRankWarning
from daskauc.embed.nystroem import AUTO_LANDMARKS, auto_landmarks

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def test_a_cut_warns_with_the_kept_rank_and_the_cut_off():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    with pytest.warns(NystroemRankWarning) as record:
        m = KMeansNystroem(n_components=1600, kmeans_epochs=1, random_state=0).fit(X)
    assert issubclass(NystroemRankWarning, UserWarning)
    r = m.n_components_
    assert r < 1600 and m.transform(X[:5]).shape == (5, r)
    lam = m.eigenvalues_
    cut = m.eig_tol * lam[0]
    assert lam[r - 1] > cut >= lam[r]
    msg = str(record[0].message)
    # one sentence: the numbers and the fix (it was 600 characters, and suggested eig_tol)
    assert f"kept {r} of 1600 eigenpairs" in msg and f"{cut:.3g}" in msg
    assert f"ask for {r} landmarks" in msg and "eig_tol" not in msg.split("cut the rest")[1]
    assert len(msg) < 260 and msg.count(". ") == 0 and msg.endswith(".")
    assert record[0].filename == __file__  # the source line shown is the caller's


def test_no_cut_no_warning_and_presets_pass_it_on():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NystroemRankWarning)
        m = KMeansNystroem(n_components=30, random_state=0).fit(X)
    assert m.n_components_ == 30
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.warns(NystroemRankWarning):
        model = NSAUC(n_landmarks=600, random_state=0).fit(X[:, :2].repeat(2, axis=0),
                                                             y.repeat(2))
    assert model.transform(X[:3, :2]).shape[1] == model.embedding_.n_components_ < 600


def test_auto_landmarks_follow_the_measured_table():
    assert [auto_landmarks(10**6, d) for d in range(1, 13)] == [
        12, 50, 125, 300, 500, 800, 1200, 1400, 1600, 1600, 1600, 1600]
    assert auto_landmarks(40, 3) == 40 and auto_landmarks(900, 12) == 900  # at most the rows
    assert list(AUTO_LANDMARKS) == [auto_landmarks(10**6, d) for d in range(1, 9)]


def test_the_default_fits_no_landmarks_the_map_drops():
    """The reported case: the default 1,600 landmarks on 3 features spent k-means on 1,600
    centres, then kept 571 eigenpairs and warned in 600 characters."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = np.where(X[:, 0] + X[:, 1] ** 2 > 1, 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NystroemRankWarning)
        m = KMeansNystroem(kmeans_epochs=1, random_state=0).fit(X)
        ns = NSAUC(n_epochs=1, random_state=0).fit(X, y)
        nb = NBAUC(C=1e-3, random_state=0).fit(X, y)
    assert m.landmarks_.shape[0] == m.n_components_ == 125
    for model in (ns, nb):
        assert model.embedding_.landmarks_.shape[0] == model.embedding_.n_components_ == 125
    # "auto" is the integer it chooses: the same map, bit for bit
    explicit = KMeansNystroem(n_components=125, kmeans_epochs=1, random_state=0).fit(X)
    np.testing.assert_array_equal(explicit.landmarks_, m.landmarks_)
    np.testing.assert_array_equal(explicit.projection_, m.projection_)
    # on more features the paper's 1,600 (or every row when fewer)
    Z = rng.normal(size=(700, 12))
    assert KMeansNystroem(kmeans_epochs=0, random_state=0).fit(Z).landmarks_.shape[0] == 700
