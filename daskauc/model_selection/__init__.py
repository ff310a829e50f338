"""Every choice of a hyper-parameter by validation AUC: C (:mod:`.c_path`), the kernel width
and lam (:mod:`.gamma_lam`).

The floor above the rooms (data, embed, solvers) and below the estimators: it calls the
solver functions directly and never imports :mod:`daskauc.estimators`.
"""
