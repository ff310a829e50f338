"""The solver functions, one module per family (numba kernels in their ``_*_kernels``
siblings). Importing the package imports every family, so that the solver registry
(:data:`daskauc._registry.SOLVERS`, filled by each module's ``@solver``) is complete."""

from . import (  # noqa: F401 - imported for their registration
    kernel_lsauc,
    kernel_newton,
    newton,
    nsauc,
    oam,
    opauc,
    solam,
    spam,
    spdam,
    stats,
    twopass,
    univariate,
)
