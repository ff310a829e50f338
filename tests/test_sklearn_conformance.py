"""scikit-learn's estimator checks (``parametrize_with_checks``) on every public estimator.

The instances use their defaults except where a default would only make the checks slow or
meaningless on their tiny data sets (20 to 300 rows); each such parameter says why. No check
is expected to fail.
"""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import daskauc  # noqa: F401 - every class registered
from daskauc._registry import MODEL_CLASSES

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")

# The checks' data sets have 1 to 300 rows: 1,600 landmarks (the papers' default) would be
# capped to every row, with a warning at each of the ~50 fits, and seed as many k-means
# centres as rows. 20 landmarks keep the same code paths (k-means seeding, epochs, the
# eigenvalue cut-off) at a fraction of the time.
# dtype="float64": the presets' default float32 embedding of one row and of a block of rows
# differ in the last bits (BLAS takes other kernels for one row, and exp(-gamma d^2)
# magnifies the rounding of d^2): up to 5e-7, above the atol=1e-7 at which
# check_methods_subset_invariance compares them; float32 cannot do better, float64 runs the
# same code and meets it.
SMALL = {"n_landmarks": 20, "dtype": "float64"}

#: the registered classes whose defaults would only make the checks slow or meaningless on
#: their tiny data sets, and the parameters they get instead; every other registered class
#: is checked with its defaults
SETTINGS = {
    "KMeansNystroem": {"n_components": 20},  # see SMALL
    "NSAUC": SMALL,
    "NSVMSGD2": SMALL,
    "NBAUC": SMALL,
    "RFAUC": SMALL,  # 20 Fourier features instead of 1,600: see SMALL
    "NOAM": SMALL,
    "NSOLAM": SMALL,
    # KernelRankSVM: every training row a landmark, at most 300 here: its defaults
    # lam="auto" / gamma="auto" run a 3-fold validation over a 7 x 17 grid at every fit (on
    # folds of 3 rows in some checks); fixed values test the same model and solver
    "KernelAUC": {"n_centres": 20, "lam": 1e-3, "gamma": "rule"},
}

ESTIMATORS = [MODEL_CLASSES[name](**SETTINGS.get(name, {})) for name in sorted(MODEL_CLASSES)]


def _expected_failures(estimator) -> dict[str, str]:
    """Checks known to fail, with the reason each cannot be fixed: none."""
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_conformance(estimator, check):
    check(estimator)
