"""KMeansNystroem says when its pseudo-inverse cuts eigenpairs: the output then has
``n_components_`` columns, fewer than the landmarks asked for."""

import warnings

import numpy as np
import pytest

from daskauc import NSAUC, KMeansNystroem
from daskauc.embed import NystroemRankWarning

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
    assert f"kept {r} of 1600 eigenpairs" in msg and "n_components_" in msg
    assert f"{cut:.3g}" in msg and f"smallest kept {lam[r - 1]:.3g}" in msg


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
