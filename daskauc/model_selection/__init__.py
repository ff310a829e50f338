"""Every choice of a hyper-parameter by validation AUC: C (:mod:`.c_path`), the kernel width
and lam (:mod:`.gamma_lam`, then :mod:`.width_walk`), and cross-validation over a grid or an
epoch path (:mod:`.cross_validation`: :func:`cross_validate_auc`, :func:`cv_select_C`).

The floor above the rooms (data, embed, solvers) and below the estimators: it calls the
solver functions directly and never imports :mod:`daskauc.estimators`.
"""

from .cross_validation import cross_validate_auc, cv_select_C

__all__ = ["cross_validate_auc", "cv_select_C"]
