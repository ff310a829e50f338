"""UnivariateAUC and SPAM run their SGD on rows centred at their mean when the mean dominates
the rows' spread (``daskauc.estimators._centring``): rows around 100 no longer overflow, the
model applies to the rows as given, and well-scaled rows are used exactly as before."""

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from daskauc import SPAM, UnivariateAUC
from daskauc.solvers.spam import spam
from daskauc.solvers.univariate import univariate_sgd

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")


def _far(n=600, seed=0, loc=100.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return X + loc, y


@pytest.mark.parametrize("make", [lambda: UnivariateAUC(random_state=0),
                                  lambda: UnivariateAUC("square", random_state=0),
                                  lambda: SPAM(random_state=0)])
def test_rows_far_from_the_origin_are_centred(make):
    X, y = _far()
    Xt, yt = _far(seed=1)
    est = make().fit(X, y)
    np.testing.assert_allclose(est.center_, X.mean(axis=0), rtol=1e-12)
    assert np.isfinite(est.coef_).all()
    assert roc_auc_score(yt, est.decision_function(Xt)) > 0.95
    # the same model as the solver on the centred rows
    kw = {"random_state": 0, "n_epochs": est.n_epochs}
    if isinstance(est, SPAM):
        ref = spam(X - X.mean(axis=0), y, eta=est.eta_, average=est.average, **kw)
    else:
        ref = univariate_sgd(X - X.mean(axis=0), y, loss=est.loss, eta0=est.eta0_, **kw)
    np.testing.assert_allclose(est.coef_, ref.coef, rtol=1e-10, atol=1e-12)
    if isinstance(est, UnivariateAUC):  # the offset for the rows as given
        b = ref.state.offset[1]
        assert est.offset_ == pytest.approx(b - est.coef_ @ est.center_, rel=1e-9)


def test_well_scaled_rows_are_used_as_they_are():
    X, y = _far(loc=0.0)
    est = UnivariateAUC(random_state=0).fit(X, y)
    assert not est.center_.any()
    np.testing.assert_array_equal(est.coef_,
                                  univariate_sgd(X, y, eta0=est.eta0_, random_state=0).coef)


def test_dask_input_and_partial_fit_use_the_same_centre():
    X, y = _far(n=800)
    Xd, yd = da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200)
    eager = UnivariateAUC(random_state=0, n_epochs=2).fit(X, y)
    lazy = UnivariateAUC(random_state=0, n_epochs=2).fit(Xd, yd)  # centred as read
    held = UnivariateAUC(random_state=0, n_epochs=2).fit(Xd.persist(), yd)  # a centred copy
    np.testing.assert_allclose(lazy.center_, eager.center_, rtol=1e-12)
    np.testing.assert_array_equal(held.center_, lazy.center_)
    np.testing.assert_array_equal(held.coef_, lazy.coef_)
    step = UnivariateAUC(random_state=0, n_epochs=1).fit(X, y).partial_fit(X[:400], y[:400])
    np.testing.assert_array_equal(step.center_, eager.center_)  # kept from the first fit
    with pytest.raises(ValueError, match="NaN"):
        bad = X.copy()
        bad[5, 1] = np.nan
        UnivariateAUC().fit(da.from_array(bad, chunks=(200, -1)), y)


def test_rows_persisted_on_a_cluster_are_centred_there(dask_cluster_client):
    X, y = _far(n=1200)
    Xd = da.from_array(X, chunks=(300, -1)).persist()
    yd = da.from_array(y, chunks=300).persist()
    on_cluster = UnivariateAUC(random_state=0, n_epochs=2).fit(Xd, yd)
    with dask.config.set(scheduler="threads"):
        local = UnivariateAUC(random_state=0, n_epochs=2).fit(
            da.from_array(X, chunks=(300, -1)), da.from_array(y, chunks=300))
    np.testing.assert_allclose(on_cluster.coef_, local.coef_, rtol=1e-10, atol=1e-12)
