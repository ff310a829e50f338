"""The small frozen result every solver function returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SolverResult:
    """What a solver returns; estimators copy it into fitted attributes.

    coef : the model (r-vector), float64.
    n_iter : epochs (stochastic solvers) or Newton iterations (batch solvers) run.
    converged : whether the stopping rule was met (stochastic solvers: True after the epochs).
    history : one dict per epoch / iteration (objective, gradient norm, seconds, ...).
    state : solver state to continue from (``partial_fit`` / warm starts); solver specific.
    """

    coef: np.ndarray
    n_iter: int
    converged: bool
    history: list[dict] = field(default_factory=list)
    state: Any = None
